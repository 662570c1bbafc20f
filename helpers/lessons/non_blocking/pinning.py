"""02, sections 5 and 6: pinning many tensors with tensordict, on the main thread or in threads,
and ``DataLoader(pin_memory=True)``; whether pinning pays."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

from ... import analysis, claims, plotting, tables, timing
from ...records import Run
from .loops import faster
from .returns import NOTEBOOK, TUTORIAL

LOADERS = ("pin_memory=False", "pin_memory=True")
PAYS_CLAIM = (
    "Pinning pays for large batches of large tensors [tensordict non_blocking_pin=True, "
    "num_threads=0, against td.to('cuda:0')]"
)
THREADS_CLAIM = (
    "Pinning pays for large batches of large tensors when it runs in separate threads "
    "[tensordict num_threads]"
)


@dataclass(frozen=True)
class TensorDictCalls:
    """Section 5's facts: the four calls in order, and two ratios of times ("x"; below 1: the
    first is faster), spreads added."""

    blocking: str
    default: str
    pin_main: str
    pin_threads: str
    pin_vs_default: claims.Value  # non_blocking_pin=True, num_threads=0 over td.to('cuda:0')
    threads_vs_main: claims.Value  # num_threads=N over num_threads=0


def tensordict_facts(run: Run) -> TensorDictCalls:
    times = run.value["timings"]
    blocking, default, main, threads = list(times)
    return TensorDictCalls(
        blocking,
        default,
        main,
        threads,
        claims.ratio(times[main], times[default]),
        claims.ratio(times[threads], times[main]),
    )


def show_tensordict(run: Run) -> tables.Table:
    """A table of the four calls (ms, IQR / median, samples, GB/s), and bars of their times with
    their ratios to the blocking call's."""
    times = run.value["timings"]
    _, ax = plt.subplots(figsize=(9, 4.5))
    plotting.bars_with_ratios(
        {
            (k.replace("td.to('cuda:0'", "").strip(", )") or "default").replace(
                ", ", "\n"
            ): t.median_ms
            for k, t in times.items()
        },
        ax=ax,
        ylabel="time (ms, median)",
        title=plotting.machine_title(
            f"TensorDict.to('cuda:0'), {run.params['count']} tensors", run.machine, run.live
        ),
    )
    ax.tick_params(axis="x", labelrotation=0)
    plt.tight_layout()
    size = timing.format_bytes(run.params["count"] * run.params["numel"] * 4)
    return tables.Table(
        [
            "call",
            ("median", "ms", ".1f"),
            ("IQR / median", "", ".1%"),
            "samples",
            ("rate", "GB/s", ".2f"),
        ],
        [(k, t.median_ms, t.spread, len(t.samples_s), t.gbps) for k, t in times.items()],
        caption=f"tensordict {run.value['tensordict']}; {size} per call, synchronised host clock",
    )


def faster_or_slower(time_ratio: claims.Value, than: str, verdict: str | None = None) -> str:
    """Words for a ratio of times (below 1: faster) against 1, naming what it is compared with;
    ``verdict``, where given, is the claims table's (``claims.stated``), whose borderline also
    counts the runs recorded before."""
    share = f"({time_ratio.number()} ± {time_ratio.spread_text()} of its time)"
    own = claims.compare(time_ratio, 1, holds_if="below").verdict
    return claims.worded(
        verdict or own,
        f"faster than {than} {share}",
        f"slower than {than} {share}",
        f"the same as {than} within the noise {share}"
        if own == claims.BORDERLINE
        else f"{'faster' if own == claims.HOLDS else 'slower'} than {than} in this run {share}, "
        "but the runs recorded on this kind of machine lie on both sides (borderline here)",
    )


def judged_pays(run: Run) -> tuple[claims.Comparison, claims.Comparison]:
    """The claims table's two tensordict comparisons (main thread against ``td.to``, threads
    against the main thread), judged with the runs recorded before."""
    f = tensordict_facts(run)
    return (
        claims.judged(
            claims.compare(f.pin_vs_default, 1, holds_if="below"), run, NOTEBOOK, PAYS_CLAIM
        ),
        claims.judged(
            claims.compare(f.threads_vs_main, 1, holds_if="below"), run, NOTEBOOK, THREADS_CLAIM
        ),
    )


def see_tensordict(run: Run) -> claims.WhatWeSee:
    """Each call's time as a share of the blocking call's; pinning on the main thread against
    ``td.to('cuda:0')``, and in threads against the main thread, in words."""
    times, f = run.value["timings"], tensordict_facts(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Against the blocking call, `{f.blocking}` (medians of "
        f"{min(len(t.samples_s) for t in times.values())} samples each): "
        + "; ".join(
            f"`{k}` took {r.number()} ± {r.spread_text()} of its time"
            for k, r in (
                (k, claims.ratio(times[k], times[f.blocking]))
                for k in (f.default, f.pin_main, f.pin_threads)
            )
        )
        + "."
    )
    pays, threads_pay = judged_pays(run)
    seen.say(
        "Pinning on the main thread (`num_threads=0`) was "
        f"{faster_or_slower(f.pin_vs_default, '`td.to(' + repr('cuda:0') + ')`', claims.stated(pays, run))}, "
        f"and pinning in threads (`num_threads={run.params['threads']}`) "
        f"{faster_or_slower(f.threads_vs_main, 'pinning on the main thread', claims.stated(threads_pay, run))}."
    )
    return seen


@dataclass(frozen=True)
class Epochs:
    """Section 6's facts: epoch times (ms), GPU work (ms), the speed-up from pinning ("x"; above 1:
    faster pinned), and whether every batch came out pinned with pin_memory=True and none without."""

    epoch_ms: dict[str, float]
    gpu_work_ms: float
    speedup: claims.Value
    all_pinned_or_none: bool
    pinned_counts: str


def dataloader_facts(run: Run) -> Epochs:
    dl = run.value
    on, off = dl["pin_memory=True"], dl["pin_memory=False"]
    return Epochs(
        {k: dl[k]["epoch"].median_ms for k in LOADERS},
        run.params["step_ms"] * on["batches"],
        claims.ratio(off["epoch"], on["epoch"]),
        on["pinned batches"] == on["batches"] and off["pinned batches"] == 0,
        ", ".join(f"{k}: {r['pinned batches']} of {r['batches']} pinned" for k, r in dl.items()),
    )


def show_dataloader(run: Run) -> tables.Table:
    """A table of batches pinned and epoch time (ms, IQR / median, samples), and bars of the
    epoch times with their ratio."""
    dl, f = run.value, dataloader_facts(run)
    plotting.bars_with_ratios(
        {k: r["epoch"].median_ms for k, r in dl.items()},
        title=plotting.machine_title("one DataLoader epoch", run.machine, run.live),
        ylabel="time per epoch (ms, median)",
    )
    return tables.Table(
        [
            "loader",
            "pinned batches",
            "batches",
            ("epoch", "ms", ".1f"),
            ("IQR / median", "", ".1%"),
            "samples",
        ],
        [
            (
                k,
                r["pinned batches"],
                r["batches"],
                r["epoch"].median_ms,
                r["epoch"].spread,
                len(r["epoch"].samples_s),
            )
            for k, r in dl.items()
        ],
        caption=f"medians; the GPU's stand-in work alone is {f.gpu_work_ms:.0f} ms per epoch",
    )


def see_dataloader(run: Run) -> claims.WhatWeSee:
    """A check that the batches come out pinned with ``pin_memory=True`` and only then, and the
    two epoch times (ms) beside the GPU work, with their ratio in words."""
    f = dataloader_facts(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.check(
        "With pin_memory=True every batch comes out pinned, without it none does",
        f.all_pinned_or_none,
        f.pinned_counts,
    )
    seen.say(
        f"An epoch took {f.epoch_ms['pin_memory=True']:.0f} ms with `pin_memory=True` and "
        f"{f.epoch_ms['pin_memory=False']:.0f} ms without, beside {f.gpu_work_ms:.0f} ms of GPU "
        f"work ({f.speedup.samples} samples each): the epoch with pinning ran "
        f"{analysis.times(f.speedup)} as fast as the one without, {faster(f.speedup)}"
    )
    return seen


def add_claims(table: claims.ClaimsTable, run_td: Run, run_dl: Run) -> None:
    """Whether pinning pays, on the main thread or in threads, and DataLoader's pinned batches."""
    td, ms = tensordict_facts(run_td), {k: t.median_ms for k, t in run_td.value["timings"].items()}
    pays, threads_pay = judged_pays(run_td)
    advice = f"{TUTORIAL} (tensordict and advice)"
    table.add(
        PAYS_CLAIM,
        source=advice,
        measured=f"time of {td.pin_main} / time of {td.default} ({ms[td.pin_main]:.1f} and "
        f"{ms[td.default]:.1f} ms); pays: {pays.in_words()}",
        holds=pays,
        run=run_td,
    )
    table.add(
        THREADS_CLAIM,
        source=advice,
        measured=f"time of {td.pin_threads} / time of {td.pin_main} ({ms[td.pin_threads]:.1f} and "
        f"{ms[td.pin_main]:.1f} ms); threads pay: {threads_pay.in_words()}",
        holds=threads_pay,
        run=run_td,
    )
    dl = dataloader_facts(run_dl)
    dl_pays = claims.compare(dl.speedup, 1, holds_if="above")
    table.add(
        "Pinning pays for large batches of large tensors when it runs in separate threads "
        "[DataLoader pin_memory=True]",
        source=f"{TUTORIAL} (advice)",
        measured=f"epoch without pin_memory / epoch with it ({dl.epoch_ms['pin_memory=False']:.0f} "
        f"and {dl.epoch_ms['pin_memory=True']:.0f} ms, {dl.speedup.samples} samples); pays: "
        f"{dl_pays.in_words()}",
        holds=dl_pays,
        run=run_dl,
    )
    table.add(
        "DataLoader(pin_memory=True) hands out batches in pinned memory",
        source=f"{TUTORIAL} (advice: pin in a separate thread, as DataLoader does)",
        measured=dl.pinned_counts,
        holds=dl.all_pinned_or_none,
        run=run_dl,
    )
