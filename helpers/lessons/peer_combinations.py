"""What notebook 05 shows of the blog post's experiment (section 7): ``A.to("cuda:1")`` beside
``B * B * B * B`` on the receiver, under 8 combinations of streams and ``non_blocking``, read
from the profiler's traces: which lane each copy ran on, whether it overlapped the receiver's
kernels, the tables, the timelines and what we see. ``peer_streams`` builds on its lane names.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures
nothing. Tested on every recorded machine in tests/test_lesson_05.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from .. import claims, plotting, tables, timing, trace
from ..records import Run

NOTEBOOK = "05_device_to_device"
HIGH, LOW = 0.8, 0.2  # an overlap ratio at least HIGH counts as overlap, at most LOW as none
_MARK = (
    "spin_kernel"  # the tiny kernels mark_streams() runs on each stream in turn, to name the lanes
)


# ---------------------------------------------------------------- 7. the blog post's experiment: reading the 8 traces


def _lane_names(
    profile: trace.Profile, lanes: list[str]
) -> dict[tuple[int | None, int | None], str]:
    """``{(device, stream): name}``, read off the spin kernels that mark_streams() ran in turn."""
    marks = sorted(profile.select(kind="kernel", name=_MARK), key=lambda iv: iv.start_us)
    names: dict[tuple[int | None, int | None], str] = {}
    for k, iv in enumerate(marks):
        names.setdefault((iv.device, iv.stream), lanes[k % len(lanes)])
    return names


def _peer_copies(profile: trace.Profile) -> list[trace.Interval]:
    """The copies from one GPU to another in a trace."""
    return [
        iv
        for iv in profile.select(kind="memcpy")
        if iv.copy_kind == "PtoP"
        or (
            iv.src_device is not None
            and iv.dst_device is not None
            and iv.src_device != iv.dst_device
        )
    ]


def _receiver_kernels(profile: trace.Profile) -> list[trace.Interval]:
    """The kernels of B * B * B * B: every kernel on cuda:1 but the lane markers."""
    return [iv for iv in profile.select(kind="kernel", device=1) if _MARK not in iv.name]


def _lanes_of(
    intervals: list[trace.Interval], names: dict[tuple[int | None, int | None], str]
) -> str:
    """The names of the lanes the intervals ran on, e.g. 'cuda:0 side stream s0'."""
    found = {
        names.get((iv.device, iv.stream), f"GPU {iv.device} stream {iv.stream}") for iv in intervals
    }
    return ", ".join(sorted(found)) or "none found"


def _combination(row: dict) -> str:
    return (
        f"sender {'s0' if row['sender_streamed'] else 'default'}, receiver "
        f"{'s1' if row['receiver_streamed'] else 'default'}, non_blocking={row['non_blocking']}"
    )


def _rows(seed: Run) -> list[dict]:
    """One dict per combination: its flags, the copy's kinds and lane, B^4's lane, the copy's and
    the kernels' ms per step, their overlap ratio, the host's cudaStreamSynchronize calls."""
    rows = []
    for r in seed.value["runs"]:
        prof = r["profile"]
        names = _lane_names(prof, seed.value["lanes"])
        copies, kernels = _peer_copies(prof), _receiver_kernels(prof)
        rows.append(
            {
                **{k: r[k] for k in ("sender_streamed", "receiver_streamed", "non_blocking")},
                "copy_kind": ", ".join(sorted({str(c.copy_kind) for c in copies})) or "none",
                "copy_lane": _lanes_of(copies, names),
                "kernel_lane": _lanes_of(kernels, names),
                "copy_ms": trace.covered_us(copies) / prof.steps / 1e3,
                "kernels_ms": trace.covered_us(kernels) / prof.steps / 1e3,
                "ratio": trace.overlap_ratio(copies, kernels)
                if copies and kernels
                else float("nan"),
                "stream_syncs": trace.count(prof.intervals, "runtime", "cudaStreamSynchronize"),
                "profile": prof,
            }
        )
    return rows


def _issue_gaps_us(profile: trace.Profile) -> list[float]:
    """Host microseconds from the start of each copy's cudaMemcpyAsync to the next kernel launch."""
    launches = [call.start_us for call in profile.select(kind="runtime", name="LaunchKernel")]
    gaps = []
    for call in profile.select(kind="runtime", name="cudaMemcpy"):
        later = [start for start in launches if start >= call.end_us]
        if later:
            gaps.append(min(later) - call.start_us)
    return gaps


def _on_source_stream(rows: list[dict]) -> int:
    """In how many runs the copy ran on the sender's current stream."""
    return sum(
        row["copy_lane"]
        == ("cuda:0 side stream s0" if row["sender_streamed"] else "cuda:0 default stream")
        for row in rows
    )


def _by_streams(rows: list[dict]) -> dict[tuple[bool, bool], dict[bool, float]]:
    """{(sender streamed, receiver streamed): {non_blocking: overlap ratio}}."""
    found: dict[tuple[bool, bool], dict[bool, float]] = {}
    for row in rows:
        found.setdefault((row["sender_streamed"], row["receiver_streamed"]), {})[
            row["non_blocking"]
        ] = row["ratio"]
    return found


def _overlap_word(ratios: list[float]) -> str:
    """ "overlap", "no overlap" or "partial overlap", from overlap ratios and the HIGH and LOW marks."""
    return (
        "overlap"
        if min(ratios) >= HIGH
        else "no overlap"
        if max(ratios) <= LOW
        else "partial overlap"
    )


def _ordered_by(sender_streamed: bool, receiver_streamed: bool) -> str:
    """What keeps B*B*B*B (cuda:1's default stream) behind the copy, from Copy.cu and CUDA's rules."""
    if not receiver_streamed:
        return "copy_'s event (cuda:1's default stream waits for the copy)"
    if not sender_streamed:
        return "the legacy default stream's rule (the copy is on cuda:0's default stream)"
    return "nothing"


@dataclass(frozen=True)
class _Overlap:
    both_side: list[float]  # overlap ratios of the runs with s0 and s1 current
    others: list[float]  # those of the other runs
    legacy: list[float]  # sender default, receiver s1
    nb_change: float  # the largest change of the ratio when only non_blocking changes
    host_syncs: int  # cudaStreamSynchronize calls in all traces
    copy_kinds: list[str]  # the kinds of the peer copies found, per run, distinct
    host_copies: int  # copies to or from the host in all traces
    runs: int
    steps: int  # profiled steps per trace (the fewest)

    @property
    def both_side_text(self) -> str:
        return " and ".join(f"{r:.2f}" for r in self.both_side)


def overlap_summary(seed: Run) -> _Overlap:
    """The blog post's experiment in numbers: the overlap ratios (0 to 1) with side streams on
    both GPUs, in the other runs and in the legacy default stream's case, the largest change
    when only non_blocking changes, the host's synchronize calls, the copies' kinds, how many
    copies touched the host, and how many runs and profiled steps there were.
    """
    rows = _rows(seed)
    both = [row for row in rows if row["sender_streamed"] and row["receiver_streamed"]]
    others = [row for row in rows if not (row["sender_streamed"] and row["receiver_streamed"])]
    by_streams = _by_streams(rows)
    return _Overlap(
        both_side=[row["ratio"] for row in both],
        others=[row["ratio"] for row in others],
        legacy=list(by_streams.get((False, True), {}).values()),
        nb_change=max(abs(r[True] - r[False]) for r in by_streams.values()),
        host_syncs=sum(row["stream_syncs"] for row in rows),
        copy_kinds=sorted({row["copy_kind"] for row in rows}),
        host_copies=sum(
            iv.copy_kind in ("HtoD", "DtoH")
            for row in rows
            for iv in row["profile"].select(kind="memcpy")
        ),
        runs=len(rows),
        steps=min(row["profile"].steps for row in rows),
    )


def show_combinations(seed: Run) -> None:
    """Shows the 8 combinations (the copy's lane, copy and B^4 in ms per step, overlap ratio,
    the host's synchronize calls), which stream ran what, whether the blog post's claim holds
    run by run, what orders B^4 behind the copy against the overlap seen, the host's time from
    issuing the copy to launching B^4 (us), and where the Chrome traces are. Returns nothing.
    """
    rows, params = _rows(seed), seed.params
    table = tables.Table(
        [
            "sender",
            "receiver",
            "non_blocking",
            "the copy ran on",
            ("copy", "ms", ".3f"),
            ("B^4", "ms", ".3f"),
            ("overlap", "", ".2f"),
            "syncs",
        ],
        title=plotting.machine_title("The 8 combinations, times per step", seed.machine, seed.live),
        caption=(
            f"A: {timing.format_bytes(params['a_numel'] * 4)} copied from cuda:0 to cuda:1; "
            f"B: {timing.format_bytes(params['b_numel'] * 4)} on cuda:1; "
            "syncs: the host's cudaStreamSynchronize calls"
        ),
    )
    for row in rows:
        table.add(
            "s0" if row["sender_streamed"] else "default",
            "s1" if row["receiver_streamed"] else "default",
            str(row["non_blocking"]),
            row["copy_lane"],
            row["copy_ms"],
            row["kernels_ms"],
            row["ratio"],
            row["stream_syncs"],
        )
    display(table)
    print(
        f"the copy ran on the sender's current stream, as Copy.cu says, in {_on_source_stream(rows)} of {len(rows)} runs;"
    )
    print("B * B * B * B ran on: " + "; ".join(sorted({row["kernel_lane"] for row in rows})))
    print(
        "copy kinds in the traces: "
        + ", ".join(sorted({row["copy_kind"] for row in rows}))
        + " (PtoP: from one GPU's memory straight into the other's)\n"
    )
    both = [row for row in rows if row["sender_streamed"] and row["receiver_streamed"]]
    others = [row for row in rows if not (row["sender_streamed"] and row["receiver_streamed"])]
    print(
        f"overlap ratio with side streams on both GPUs: {[round(row['ratio'], 2) for row in both]}; in the other "
        f"{len(others)} runs at most {max(row['ratio'] for row in others):.2f}"
    )
    overlap = overlap_summary(seed)
    print(
        f"largest change of the overlap ratio when only non_blocking changes: {overlap.nb_change:.2f};\n"
        f"cudaStreamSynchronize calls in the {len(rows)} traces: {overlap.host_syncs}"
    )
    differ = [row for row in both if not row["ratio"] >= HIGH] + [
        row for row in others if not row["ratio"] <= LOW
    ]
    if not differ:
        print(
            f"The blog post's claim holds here: overlap (ratio >= {HIGH}) exactly in the {len(both)} runs with side\n"
            f"streams on both GPUs, none (ratio <= {LOW}) in the other {len(others)}."
        )
    else:
        print("The blog post's claim does not hold here; these runs differ from it:")
        for row in differ:
            print(f"  {_combination(row)}: overlap ratio {row['ratio']:.2f}")
    order = tables.Table(
        ["sender", "receiver", "what keeps B*B*B*B behind the copy", "overlap seen"]
    )
    for (sender_streamed, receiver_streamed), ratios in _by_streams(rows).items():
        seen = _overlap_word(list(ratios.values())).replace("partial overlap", "partial")
        order.add(
            "s0" if sender_streamed else "default",
            "s1" if receiver_streamed else "default",
            _ordered_by(sender_streamed, receiver_streamed),
            seen,
        )
    display(order)
    gaps_us = [gap for row in rows for gap in _issue_gaps_us(row["profile"])]
    if gaps_us:
        print(
            f"on the host, {statistics.median(gaps_us):.0f} us pass from issuing the copy to launching the first "
            f"multiplication\n(median of {len(gaps_us)} copies in the {len(rows)} traces), against "
            f"{statistics.median(row['copy_ms'] for row in rows) * 1e3:.0f} us for the copy itself"
        )
    traces = [row["profile"].chrome_trace.path for row in rows if row["profile"].chrome_trace]
    if traces:
        folder, _, name = traces[0].rpartition("/")
        print(
            f"Chrome traces (open them in https://ui.perfetto.dev), e.g. in\n  {folder}/\n  {name}"
        )


def _first_step_gpu_work(profile: trace.Profile, lanes: int) -> list[trace.Interval]:
    """The copies and kernels of the first profiled step, without the lane markers."""
    marks = sorted(profile.select(kind="kernel", name=_MARK), key=lambda iv: iv.start_us)
    second_step = marks[lanes].start_us if len(marks) > lanes else float("inf")
    return [
        iv
        for iv in profile.intervals
        if iv.on_gpu and iv.start_us < second_step and _MARK not in iv.name
    ]


def stream_labels(names: dict[tuple[int | None, int | None], str]) -> dict[int, str]:
    """{stream id: 'side stream s0' ...} for plotting.timeline, when no id names two streams."""
    by_id: dict[int, set[str]] = {}
    for (_, stream), name in names.items():
        if stream is None:  # a lane the profiler gave no stream id cannot be named by one
            continue
        by_id.setdefault(stream, set()).add(name.split(" ", 1)[1])
    return {stream: found.pop() for stream, found in by_id.items() if len(found) == 1}


def show_timelines(seed: Run) -> None:
    """Draws the first profiled step of each of the 8 combinations as a timeline of the GPUs'
    lanes (named by the streams the notebook made), all on one time scale in ms. Returns nothing.
    """
    rows, lanes = _rows(seed), seed.value["lanes"]
    steps = [_first_step_gpu_work(row["profile"], len(lanes)) for row in rows]
    longest_ms = (
        max(max(iv.end_us for iv in ivs) - min(iv.start_us for iv in ivs) for ivs in steps) / 1e3
    )
    fig, axes = plt.subplots(4, 2, figsize=(15, 13))
    for ax, row, work in zip(axes.flat, rows, steps, strict=True):
        plotting.timeline(
            work,
            title=f"{_combination(row)}: overlap {row['ratio']:.2f}",
            ax=ax,
            unit="ms",
            include_host=False,
            stream_names=stream_labels(_lane_names(row["profile"], lanes)),
        )
        ax.set_xlim(0, longest_ms * 1.02)  # the same time scale in every panel
        if ax is not axes.flat[0] and ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.suptitle(
        plotting.machine_title(
            "The blog post's experiment: A.to('cuda:1') beside B*B*B*B on cuda:1, one step each",
            seed.machine,
            seed.live,
        )
    )
    fig.tight_layout()
    plt.show()


def see_combinations(seed: Run) -> claims.WhatWeSee:
    """Which streams ran the copy and B^4, the overlap ratios (0 to 1) with side streams on both
    GPUs, in the other runs and in the legacy default stream's case, what non_blocking changed,
    and the share of the copy's time the host spends before launching B^4; checks that the host
    never waited (no cudaStreamSynchronize).
    """
    rows, overlap = _rows(seed), overlap_summary(seed)
    seen = claims.WhatWeSee(NOTEBOOK, seed)
    seen.say(
        f"The copy ran on the sender's current stream in {_on_source_stream(rows)} of {len(rows)} runs; "
        f"B * B * B * B ran on {'; '.join(sorted({row['kernel_lane'] for row in rows}))}."
    )
    seen.say(
        f"With side streams on both GPUs the overlap ratio was {overlap.both_side_text} (each over "
        f"{overlap.steps} profiled steps: {_overlap_word(overlap.both_side)}, counting {HIGH} and up as overlap "
        f"and {LOW} and below as none); in the other {len(overlap.others)} runs it was at most "
        f"{max(overlap.others):.2f}. With the sender on its default stream and s1 current on the receiver (the "
        f"legacy default stream's case) it was {' and '.join(f'{r:.2f}' for r in overlap.legacy)}: "
        f"{_overlap_word(overlap.legacy)}."
    )
    seen.say(f"Changing only non_blocking moved the ratio by at most {overlap.nb_change:.2f}.")
    gaps_us = [gap for row in rows for gap in _issue_gaps_us(row["profile"])]
    if gaps_us:
        gap, copy_us = (
            statistics.median(gaps_us),
            statistics.median(row["copy_ms"] for row in rows) * 1e3,
        )
        seen.say(
            f"The host took {gap:.0f} us from issuing the copy to launching the first multiplication, "
            f"{gap / copy_us:.0%} of the copy's {copy_us:.0f} us: the part of the copy that runs alone even "
            "at best."
        )
    seen.check(
        "copy_ between two GPUs runs on the sender's current stream (Copy.cu)",
        _on_source_stream(rows) == len(rows),
        f"{_on_source_stream(rows)} of {len(rows)} runs",
    )
    seen.check(
        "copy_ between two GPUs never makes the host wait (no cudaStreamSynchronize in the traces)",
        overlap.host_syncs == 0,
        f"{overlap.host_syncs} cudaStreamSynchronize calls in the {len(rows)} traces",
    )
    return seen


def copy_lane(seed: Run, sender_streamed: bool, receiver_streamed: bool, non_blocking: bool) -> str:
    """The name of the stream the copy ran on in one combination, e.g. 'cuda:0 default stream'."""
    return next(
        row["copy_lane"]
        for row in _rows(seed)
        if (row["sender_streamed"], row["receiver_streamed"], row["non_blocking"])
        == (sender_streamed, receiver_streamed, non_blocking)
    )


def lane_choices(seed: Run) -> list[str]:
    """The names of the four streams the experiment made current (sorted), and any other lane a
    copy ran on: the choices of the exercise.
    """
    return sorted({*seed.value["lanes"], *(row["copy_lane"] for row in _rows(seed))})
