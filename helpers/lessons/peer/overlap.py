"""Notebook 05, section 7: the blog post's ``A.to("cuda:1")`` beside ``B * B * B * B`` on the
receiver under 8 choices of streams and ``non_blocking``, read from the profiler's traces."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import claims, config, plotting, tables, timing, trace
from ...records import Run
from . import NOTEBOOK, stream_labels

HIGH, LOW = 0.8, 0.2  # an overlap ratio at least HIGH counts as overlap, at most LOW as none
ON_SENDER = "copy_ between two GPUs runs on the sender's current stream (Copy.cu)"
NO_WAIT = (
    "copy_ between two GPUs never makes the host wait (no cudaStreamSynchronize in the traces)"
)
LONGER_GAP = "at the blog post's sizes the host's gap before the multiplication is a larger share of the copy"
LESS_OVERLAP = "so with side streams on both GPUs the two overlap less than at our sizes"
MARK = "spin_kernel"  # the tiny kernels mark_streams() runs on each stream in turn, naming lanes
Lanes = dict[tuple[int | None, int | None], str]
# what keeps B*B*B*B (cuda:1's default stream) behind the copy, by (sender, receiver) streamed
ORDERED_BY = {
    (False, False): "copy_'s event (cuda:1's default stream waits for the copy)",
    (True, False): "copy_'s event (cuda:1's default stream waits for the copy)",
    (False, True): "the legacy default stream's rule (the copy is on cuda:0's default stream)",
    (True, True): "nothing",
}


def lane_names(profile: trace.Profile, lanes: list[str]) -> Lanes:
    """``{(device, stream): name}``, read off the spin kernels that mark_streams() ran in turn."""
    names: Lanes = {}
    marks = sorted(profile.select(kind="kernel", name=MARK), key=lambda iv: iv.start_us)
    for k, iv in enumerate(marks):
        names.setdefault((iv.device, iv.stream), lanes[k % len(lanes)])
    return names


def lanes_of(intervals: list[trace.Interval], names: Lanes) -> str:
    """The names of the lanes the intervals ran on, e.g. 'cuda:0 side stream s0'."""
    found = {
        names.get((iv.device, iv.stream), f"GPU {iv.device} stream {iv.stream}") for iv in intervals
    }
    return ", ".join(sorted(found)) or "none found"


def issue_gaps_us(profile: trace.Profile) -> list[float]:
    """Host us from the start of each copy's cudaMemcpyAsync to the next kernel launch."""
    launches = [call.start_us for call in profile.select(kind="runtime", name="LaunchKernel")]
    copies = profile.select(kind="runtime", name="cudaMemcpy")
    return [
        min(s for s in launches if s >= c.end_us) - c.start_us
        for c in copies
        if any(s >= c.end_us for s in launches)
    ]


def between_gpus(iv: trace.Interval) -> bool:
    """A PtoP copy, or one whose source and destination are two known, different devices."""
    known = None not in (iv.src_device, iv.dst_device)
    return iv.copy_kind == "PtoP" or known and iv.src_device != iv.dst_device


def overlap_word(ratios: list[float]) -> str:
    """ "overlap", "no overlap" or "partial overlap", from overlap ratios and the HIGH and LOW marks."""
    if min(ratios) >= HIGH:
        return "overlap"
    return "no overlap" if max(ratios) <= LOW else "partial overlap"


def streams(sender: bool, receiver: bool) -> tuple[str, str]:
    """The sender's and the receiver's current stream, as the tables name them."""
    return "s0" if sender else "default", "s1" if receiver else "default"


@dataclass(frozen=True)
class Combination:
    """One of the 8 runs, read from its trace: ms per step, overlap ratio (0 to 1), host syncs."""

    sender: bool
    receiver: bool
    non_blocking: bool
    copy_kind: str
    copy_lane: str
    kernel_lane: str
    copy_ms: float
    kernels_ms: float
    ratio: float
    syncs: int
    profile: trace.Profile

    def __str__(self) -> str:
        sender, receiver = streams(self.sender, self.receiver)
        return f"sender {sender}, receiver {receiver}, non_blocking={self.non_blocking}"


def combinations(seed: Run) -> list[Combination]:
    """The 8 runs read from their traces."""
    found = []
    for r in seed.value["runs"]:
        prof = r["profile"]
        names = lane_names(prof, seed.value["lanes"])
        copies = [iv for iv in prof.select(kind="memcpy") if between_gpus(iv)]
        kernels = [iv for iv in prof.select(kind="kernel", device=1) if MARK not in iv.name]
        found.append(
            Combination(
                r["sender_streamed"],
                r["receiver_streamed"],
                r["non_blocking"],
                ", ".join(sorted({str(c.copy_kind) for c in copies})) or "none",
                lanes_of(copies, names),
                lanes_of(kernels, names),
                trace.covered_us(copies) / prof.steps / 1e3,
                trace.covered_us(kernels) / prof.steps / 1e3,
                trace.overlap_ratio(copies, kernels) if copies and kernels else float("nan"),
                trace.count(prof.intervals, "runtime", "cudaStreamSynchronize"),
                prof,
            )
        )
    return found


@dataclass(frozen=True)
class Overlap:
    """The 8 runs in numbers: overlap ratios (0 to 1), counts, and host and copy times (us)."""

    both_side: list[float]  # side streams on both GPUs
    others: list[float]
    legacy: list[float]  # sender on its default stream, s1 current on the receiver
    nb_change: float  # the largest change when only non_blocking changes
    host_syncs: int  # cudaStreamSynchronize calls
    copy_kinds: list[str]
    host_copies: int  # copies to or from the host
    runs: int
    on_source: int  # runs whose copy ran on the sender's current stream
    kernel_lanes: list[str]  # where B^4 ran
    steps: int  # profiled steps, the fewest of any run
    issue_us: float | None  # median host time from issuing the copy to launching B^4
    copy_us: float  # the copy's median time per step

    @property
    def both_side_text(self) -> str:
        return " and ".join(f"{r:.2f}" for r in self.both_side)


def summary(seed: Run) -> Overlap:
    rows = combinations(seed)
    ratio = {(row.sender, row.receiver, row.non_blocking): row.ratio for row in rows}
    memcpys = [iv for row in rows for iv in row.profile.select(kind="memcpy")]
    gaps = [gap for row in rows for gap in issue_gaps_us(row.profile)]
    return Overlap(
        [row.ratio for row in rows if row.sender and row.receiver],
        [row.ratio for row in rows if not (row.sender and row.receiver)],
        [row.ratio for row in rows if (row.sender, row.receiver) == (False, True)],
        max(abs(ratio[s, r, True] - ratio[s, r, False]) for s, r, _ in ratio),
        sum(row.syncs for row in rows),
        sorted({row.copy_kind for row in rows}),
        sum(iv.copy_kind in ("HtoD", "DtoH") for iv in memcpys),
        len(rows),
        sum(
            r.copy_lane == f"cuda:0 {'side stream s0' if r.sender else 'default stream'}"
            for r in rows
        ),
        sorted({row.kernel_lane for row in rows}),
        min(row.profile.steps for row in rows),
        statistics.median(gaps) if gaps else None,
        statistics.median(row.copy_ms for row in rows) * 1e3,
    )


def show_combinations(seed: Run) -> None:
    """The combinations (sender, receiver, non_blocking), what orders B^4 behind the copy, and where the Chrome traces are."""
    rows, params, size = combinations(seed), seed.params, timing.format_bytes
    columns = ["sender", "receiver", "non_blocking", "the copy ran on", ("copy", "ms", ".3f")]
    columns += [("B^4", "ms", ".3f"), ("overlap", "", ".2f"), "syncs"]
    title = plotting.titled(f"The {len(rows)} combinations, times per step", seed)
    caption = f"A: {size(params['a_numel'] * 4)} copied from cuda:0 to cuda:1; B: {size(params['b_numel'] * 4)} on cuda:1; syncs: the host's cudaStreamSynchronize calls"
    table = tables.Table(columns, title=title, caption=caption)
    for r in rows:
        flags = (*streams(r.sender, r.receiver), str(r.non_blocking))
        table.add(*flags, r.copy_lane, r.copy_ms, r.kernels_ms, r.ratio, r.syncs)
    display(table)  # which stream ran what, the ratios and the syncs: in the sentences
    why = tables.Table(["sender", "receiver", "what keeps B*B*B*B behind the copy", "overlap seen"])
    for pair in dict.fromkeys((r.sender, r.receiver) for r in rows):
        seen = overlap_word([r.ratio for r in rows if (r.sender, r.receiver) == pair])
        why.add(*streams(*pair), ORDERED_BY[pair], seen.replace("partial overlap", "partial"))
    display(why)
    traces = [r.profile.chrome_trace.path for r in rows if r.profile.chrome_trace]
    if traces:
        path, _, name = config.shown_path(traces[0]).rpartition("/")
        print(f"Chrome traces (open them in https://ui.perfetto.dev), e.g. in\n  {path}/\n  {name}")


def show_timelines(seed: Run) -> None:
    """The first profiled step of each combination as a timeline of the GPUs' lanes, in ms."""
    rows, lanes = combinations(seed), seed.value["lanes"]
    steps = []  # the copies and kernels of the first profiled step, without the lane markers
    for row in rows:
        marks = sorted(row.profile.select(kind="kernel", name=MARK), key=lambda iv: iv.start_us)
        second = marks[len(lanes)].start_us if len(marks) > len(lanes) else float("inf")
        first = [iv for iv in row.profile.intervals if iv.on_gpu and iv.start_us < second]
        steps.append([iv for iv in first if MARK not in iv.name])
    longest_ms = max(trace.span_us(ivs) for ivs in steps) / 1e3
    fig, axes = plt.subplots(4, 2, figsize=(15, 13))
    for ax, row, ivs in zip(axes.flat, rows, steps, strict=True):
        title = f"{row}: overlap {row.ratio:.2f}"
        names = stream_labels(lane_names(row.profile, lanes))
        plotting.timeline(
            ivs, title=title, ax=ax, unit="ms", include_host=False, stream_names=names
        )
        ax.set_xlim(0, longest_ms * 1.02)  # the same time scale in every panel
        if ax is not axes.flat[0] and ax.get_legend() is not None:
            ax.get_legend().remove()
    what = "The blog post's experiment: A.to('cuda:1') beside B*B*B*B on cuda:1, one step each"
    fig.suptitle(plotting.titled(what, seed))
    fig.tight_layout()
    plt.show()


def see_combinations(seed: Run) -> claims.WhatWeSee:
    """Streams, overlap ratios, what non_blocking changed, the host's share of the copy's time."""
    o = summary(seed)
    seen = claims.WhatWeSee(NOTEBOOK, seed).say(
        f"The copy ran on the sender's current stream in {o.on_source} of {o.runs} runs; "
        f"B * B * B * B ran on {'; '.join(o.kernel_lanes)}; the copies' kind in the traces: "
        f"{', '.join(o.copy_kinds)} (PtoP: from one GPU's memory straight into the other's).",
        f"With side streams on both GPUs the overlap ratio was {o.both_side_text} (each over "
        f"{o.steps} profiled steps: {overlap_word(o.both_side)}, counting {HIGH} and up as overlap "
        f"and {LOW} and below as none); in the other {len(o.others)} runs it was at most "
        f"{max(o.others):.2f}. With the sender on its default stream and s1 current on the receiver "
        f"(the legacy default stream's case) it was {' and '.join(f'{r:.2f}' for r in o.legacy)}: "
        f"{overlap_word(o.legacy)}.",
        f"Changing only non_blocking moved the ratio by at most {o.nb_change:.2f}.",
    )
    if o.issue_us is not None:
        seen.say(
            f"The host took {o.issue_us:.0f} us from issuing the copy to launching the first "
            f"multiplication, {o.issue_us / o.copy_us:.0%} of the copy's {o.copy_us:.0f} us: the part "
            "of the copy that runs alone even at best."
        )
    seen.check(ON_SENDER, o.on_source == o.runs, f"{o.on_source} of {o.runs} runs")
    syncs = f"{o.host_syncs} cudaStreamSynchronize calls in the {o.runs} traces"
    seen.check(NO_WAIT, o.host_syncs == 0, syncs)
    return seen


def see_as_posted(posted: Run, seed: Run) -> claims.WhatWeSee:
    """The blog post's sizes beside ours: the copy, the overlap ratios, the host's gap's share;
    the expectation is checked only where both runs come from one machine."""
    p, o = summary(posted), summary(seed)
    two = posted.apart_from(seed, "the blog post's sizes", "ours")
    word = overlap_word(p.both_side)
    seen = claims.WhatWeSee(NOTEBOOK, posted)
    if two:
        seen.say(
            f"These two runs come from two machines{two}: a copy's time and the host's gap belong "
            "to the machine that ran them, so the expectation is not checked across the two."
        )
    seen.say(
        f"At the blog post's sizes the copy took {p.copy_us:.0f} us per step (ours: {o.copy_us:.0f} us). "
        f"With side streams on both GPUs the overlap ratio was {p.both_side_text} (ours: {o.both_side_text}); "
        f"in the other {len(p.others)} runs it was at most {max(p.others):.2f} (ours: {max(o.others):.2f}).",
        f"By section 7's marks ({HIGH} and up overlap, {LOW} and below none) that is {word} at the "
        f"blog post's own sizes on {posted.machine}"
        + {
            "no overlap": ": the copy did not overlap the multiplication there, even with side "
            "streams on both GPUs (the claims table judges the blog post's claim at our sizes).",
            "partial overlap": ": there the copy overlapped the multiplication only in part (the "
            "claims table judges the blog post's claim at our sizes).",
        }.get(word, "."),
    )
    if two:
        return seen
    if p.issue_us is not None and o.issue_us is not None:
        share, ours = p.issue_us / p.copy_us, o.issue_us / o.copy_us
        gaps = f"{p.issue_us:.0f} us, {share:.0%} of its copy; ours {o.issue_us:.0f} us, {ours:.0%}"
        seen.check(LONGER_GAP, share > ours, gaps)
    ratios = f"{p.both_side_text} against {o.both_side_text}"
    seen.check(LESS_OVERLAP, max(p.both_side) < min(o.both_side), ratios)
    return seen


def copy_lane(seed: Run, sender_streamed: bool, receiver_streamed: bool, non_blocking: bool) -> str:
    """The stream the copy ran on in one combination, e.g. 'cuda:0 default stream'."""
    flags = (sender_streamed, receiver_streamed, non_blocking)
    return next(
        r.copy_lane for r in combinations(seed) if (r.sender, r.receiver, r.non_blocking) == flags
    )


def lane_choices(seed: Run) -> list[str]:
    """The exercise's choices: the four streams made current and any other lane a copy ran on."""
    return sorted({*seed.value["lanes"], *(row.copy_lane for row in combinations(seed))})
