"""The drawings of notebook 02: when ``.to()`` returns against when the copy is done, the two
loops of small copies, the six timings, the hazards' wrong results, tensordict's calls and the
DataLoader's epochs.

Each function draws one figure from the notebook's runs (``records.Run``, live or replayed) for
the ``show_*`` function of ``non_blocking`` that shows the same run beside its table; none
measures anything. Tested through ``non_blocking`` in tests/test_lesson_02.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from .. import plotting, timing
from ..records import Run
from .non_blocking_analysis import gigabytes, shown


def draw_returns(run: Run) -> None:
    """When ``.to()`` returned and when the copy finished, for each kind of copy, as grouped
    bars on a log axis (ms after a synchronised start, medians).
    """
    ret, size = run.value, timing.format_bytes(run.params["nbytes"])
    _, ax = plt.subplots(figsize=(11, 4.5))
    plotting.grouped_bars(
        {
            label.replace("from ", "").replace(" then ", "\nthen ").replace(", ", "\n"): {
                ".to() returned": r["returned"].median_ms,
                "copy finished": r["finished"].median_ms,
            }
            for label, r in ret.items()
        },
        ax=ax,
        ylabel="ms after a synchronised start (median, log)",
        title=plotting.machine_title(
            f"when .to() returns vs when the copy is done, {size}", run.machine, run.live
        ),
    )
    plotting.log_axis(ax, "y")
    ax.tick_params(axis="x", labelsize=8)
    plt.tight_layout()


def draw_loops(run: Run) -> None:
    """The two loops' times per loop (ms, medians) as bars, each with its ratio to the
    blocking loop's.
    """
    small, count = run.value, run.params["count"]
    plotting.bars_with_ratios(
        {f"{label} loop": r["time"].median_ms for label, r in small.items()},
        title=plotting.machine_title(
            f"{count} copies of {run.params['numel'] * 4} bytes", run.machine, run.live
        ),
        ylabel="time per loop (ms, median)",
    )


def draw_six(run: Run) -> None:
    """The six timings as grouped bars: blocking and ``non_blocking=True`` per source, the
    time for all copies in ms (medians).
    """
    six = run.value
    plotting.grouped_bars(
        {way: {mode: t.median_ms for mode, t in modes.items()} for way, modes in six.items()},
        title=plotting.machine_title(
            f"{run.params['count']} tensors, {gigabytes(run):.2f} GB to the GPU",
            run.machine,
            run.live,
        ),
        ylabel="time for all copies (ms, median)",
    )


def draw_hazards(run: Run) -> None:
    """The share of trials of each hazard and fix that gave a wrong result, as horizontal bars
    (red where any went wrong), each labelled with its counts.
    """
    haz = run.value["cases"]
    _, ax = plt.subplots(figsize=(9, 5))
    labels = list(haz)
    bars = ax.barh(
        [shown(k) for k in labels],
        [haz[k]["wrong"] / haz[k]["trials"] for k in labels],
        color=["tab:red" if haz[k]["wrong"] else "tab:green" for k in labels],
    )
    ax.bar_label(
        bars,
        labels=[f"{haz[k]['wrong']} of {haz[k]['trials']}" for k in labels],
        padding=3,
        fontsize=8,
    )
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of trials with a wrong result")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(plotting.machine_title("non_blocking hazards and fixes", run.machine, run.live))
    plt.tight_layout()


def draw_tensordict(run: Run) -> None:
    """The four ``TensorDict.to`` calls' times (ms, medians) as bars, each with its ratio to the
    blocking call's.
    """
    times = run.value["timings"]
    _, ax = plt.subplots(figsize=(9, 4.5))
    plotting.bars_with_ratios(
        {
            (label.replace("td.to('cuda:0'", "").strip(", )") or "default").replace(
                ", ", "\n"
            ): t.median_ms
            for label, t in times.items()
        },
        ax=ax,
        ylabel="time (ms, median)",
        title=plotting.machine_title(
            f"TensorDict.to('cuda:0'), {run.params['count']} tensors", run.machine, run.live
        ),
    )
    ax.tick_params(axis="x", labelrotation=0)
    plt.tight_layout()


def draw_dataloader(run: Run) -> None:
    """The two epochs' times (ms, medians) as bars, with their ratio."""
    dl = run.value
    plotting.bars_with_ratios(
        {label: r["epoch"].median_ms for label, r in dl.items()},
        title=plotting.machine_title("one DataLoader epoch", run.machine, run.live),
        ylabel="time per epoch (ms, median)",
    )
