"""Notebook 03, section 1: kernels on one stream keep their order; on two they may run at once,
as far as the GPU has room (spin kernels of one thread, matmuls that fill every SM)."""

from __future__ import annotations

from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, tables, trace
from ...records import Run
from .common import ARTICLE, NOTEBOOK, lanes_overlap, over, show_timelines, steps_note

TOGETHER = 0.5  # "in parallel": two spin kernels together for more than half a kernel
SPINS_GAIN = 0.6  # spin kernels on two streams: GPU busy below this share of one stream's
MATMULS_GAIN = 0.85  # SM-filling matmuls on two streams: GPU busy above this share of one's
PAIRS = ("spins, one stream", "spins, two streams", "matmuls, one stream", "matmuls, two streams")


def _second_after_first(starts: list[float]) -> float:
    """us from the first of some starts to the second (0.0: fewer than two)."""
    starts = sorted(starts)
    return starts[1] - starts[0] if len(starts) >= 2 else 0.0


def _start_gap_us(step: list[trace.Interval]) -> float:
    """us from the first kernel of one stream to the first of the other (0.0: one stream)."""
    kernels = trace.select(step, kind="kernel")
    streams = {k.stream for k in kernels}
    firsts = [min(k.start_us for k in kernels if k.stream == s) for s in streams]
    return _second_after_first(firsts) if len(firsts) == 2 else 0.0


def _launch_gap_us(step: list[trace.Interval]) -> float:
    """us between the host's first two ``cudaLaunchKernel`` calls (0.0: fewer than two)."""
    launches = [iv for iv in step if iv.kind == "runtime" and iv.name == "cudaLaunchKernel"]
    return _second_after_first([iv.start_us for iv in launches])


def _busy_us(step: list[trace.Interval]) -> float:
    return trace.covered_us(trace.select(step, kind="kernel"))


@dataclass(frozen=True)
class Pair:
    """Two kernels on one stream or two, per profiled step: the overlap ratio of the two streams'
    kernels, GPU busy time (us), the second stream's first start after the first's (us) and the
    host's second launch after its first (us); and how many streams ran them."""

    label: str
    overlap: claims.Value
    busy_us: claims.Value
    start_gap_us: claims.Value
    launch_gap_us: claims.Value
    streams: int


def _pair(label: str, profile: trace.Profile) -> Pair:
    return Pair(
        label,
        analysis.per_step(profile, lambda step: lanes_overlap(step, "kernel")),
        analysis.per_step(profile, _busy_us, "us"),
        analysis.per_step(profile, _start_gap_us, "us"),
        analysis.per_step(profile, _launch_gap_us, "us"),
        len({iv.stream for iv in profile.select(kind="kernel")}),
    )


@dataclass(frozen=True)
class Ordering:
    """Section 1's facts: the spin kernels of one stream per step in start order, whether every
    step kept the submission order (told apart by their lengths) and no two overlapped; the four
    pairs; GPU busy time on two streams over one (spin kernels, matmuls)."""

    spin_us: list[float]
    pair_us: float
    matmul_n: int
    steps: list[list[trace.Interval]]
    in_order: bool
    never_overlap: bool
    pairs: tuple[Pair, ...]
    spin_gain: claims.Value
    mm_gain: claims.Value

    def pair(self, label: str) -> Pair:
        return next(p for p in self.pairs if p.label == label)


def facts(run: Run) -> Ordering:
    """Section 1's numbers, computed once from a ``stream_ordering`` run."""
    spin_us, p = run.params["spin_us"], run.params
    steps = [
        sorted(trace.select(step, kind="kernel"), key=lambda iv: iv.start_us)
        for step in analysis.steps_of(run.value["in order"])
    ]
    by_length = sorted(range(len(spin_us)), key=lambda k: spin_us[k])
    in_order = bool(steps) and all(
        len(step) == len(spin_us)
        and sorted(range(len(step)), key=lambda k: step[k].duration_us) == by_length
        for step in steps
    )
    pairs = [zip(step, step[1:], strict=False) for step in steps]
    never_overlap = all(b.start_us >= a.end_us - 1.0 for pair in pairs for a, b in pair)
    found = tuple(_pair(label, run.value[label]) for label in PAIRS)
    gains = (claims.ratio(found[two].busy_us, found[two - 1].busy_us) for two in (1, 3))
    return Ordering(
        spin_us, p["pair_us"], p["matmul_n"], steps, in_order, never_overlap, found, *gains
    )


def show(run: Run) -> None:
    """The stream facts (is the current stream the default one, the handles), a table of the spin
    kernels of one stream in start order (us), a table of overlap and GPU busy time (us) of
    kernels on one and on two streams, and their timelines."""
    stream, f = run.value["facts"], facts(run)
    print(
        f"current stream is the default stream: {stream['current_is_default']}; default stream "
        f"handle {stream['default_handle']:#x}, side streams "
        + ", ".join(f"{h:#x}" for h in stream["side_handles"])
    )
    display(
        tables.Table(
            ["spin kernels", *(f"kernel {k + 1} (us)" for k in range(len(f.spin_us)))],
            [("requested", *f.spin_us)]
            + [
                (f"step {n}, in start order", *(iv.duration_us for iv in step))
                for n, step in enumerate(f.steps)
            ],
            caption=f"same order as submitted: {f.in_order}; no two kernels of one stream "
            f"overlap: {f.never_overlap}",
        ),
        tables.Table(
            ["kernels", "streams used", "overlap ratio", "GPU busy per step"],
            [(p.label, p.streams, str(p.overlap), str(p.busy_us)) for p in f.pairs],
            caption="GPU busy time on two streams over that on one stream: spin kernels "
            f"{analysis.times(f.spin_gain)}, matmuls {analysis.times(f.mm_gain)}",
        ),
    )
    for kind, labels in (("spin kernels", ["in order", *PAIRS[:2]]), ("matmuls", PAIRS[2:])):
        panels = {label: run.value[label] for label in labels}
        show_timelines(
            panels,
            f"{kind} on one and on two streams",
            run,
            list(panels.values()),
            include_host=False,
        )


def see(run: Run) -> claims.WhatWeSee:
    """Whether the spin kernels of one stream kept their order, how long two spin kernels and two
    matmuls on two streams ran side by side and how long the GPU was busy against one stream."""
    f = facts(run)
    see = claims.WhatWeSee(NOTEBOOK, run)
    first = f.spin_us.index(min(f.spin_us))
    waited = (
        f": the {f.spin_us[first]:.0f} us one waited for the {max(f.spin_us[:first]):.0f} us one "
        "queued before it."
        if first > 0
        else "."
    )
    see.say(
        f"On one stream the spin kernels of {', '.join(f'{us:.0f}' for us in f.spin_us)} us ran "
        f"one after another in the order we queued them, whatever their length{waited}"
        if f.in_order and f.never_overlap
        else f"On one stream the spin kernels did not keep the order we queued them (in order: "
        f"{f.in_order}, never overlapping: {f.never_overlap})."
    )
    spins = f.pair("spins, two streams")
    gap, launched = spins.start_gap_us.value, spins.launch_gap_us.value
    missing_us = (1 - spins.overlap.value) * f.pair_us
    by_host = gap > 0 and 0.8 <= launched / gap <= 1.2
    accounts = missing_us > 0 and 0.8 <= gap / missing_us <= 1.2
    see.say(
        f"The two {f.pair_us:.0f} us spin kernels on two side streams ran side by side for "
        f"{spins.overlap.value:.0%} of their time (overlap ratio {spins.overlap}"
        f"{steps_note(spins.overlap)}), and the GPU was busy {f.spin_gain.value:.2f} times as long "
        f"as when they shared a stream{' (about half)' if 0.45 <= f.spin_gain.value <= 0.6 else ''}. "
        f"The second started {gap:.1f} us after the first"
        + (
            f", when the host launched it ({launched:.1f} us after its first launch)"
            if by_host
            else ""
        )
        + (f": that is the {missing_us:.0f} us they did not share." if accounts else ".")
    )
    mms, gain = f.pair("matmuls, two streams").overlap, f.mm_gain.value
    saved = (
        "no time saved" if gain >= 0.95 else "a little time saved" if gain >= 0.8 else "time saved"
    )
    see.say(
        f"The two {f.matmul_n}x{f.matmul_n} matrix products on two streams ran side by side for "
        f"{mms.value:.0%} of their time (overlap ratio {mms}{steps_note(mms)}) and kept the GPU "
        f"busy {gain:.2f} times as long as on one stream: {saved}."
    )
    return see


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The streams article's claims: default stream, order, parallelism, resources."""
    stream, f = run.value["facts"], facts(run)
    spins = f.pair("spins, two streams")
    together = claims.compare(spins.overlap, TOGETHER, holds_if="above")
    table.add(
        "PyTorch's CUDA operations run on the device's default stream unless another is chosen",
        source=ARTICLE,
        run=run,
        measured=f"current stream is the default: {stream['current_is_default']}",
        holds=bool(stream["current_is_default"]),
    )
    table.add(
        "Tasks on one stream execute strictly in the order they were submitted",
        source=ARTICLE,
        run=run,
        measured=f"spin kernels of {', '.join(f'{us:.0f}' for us in f.spin_us)} us: in order "
        f"{f.in_order}, never overlapping {f.never_overlap}",
        holds=f.in_order and f.never_overlap,
    )
    table.add(
        "Tasks on different streams can run in parallel",
        source=ARTICLE,
        run=run,
        measured=f"two spin kernels on two side streams: overlap ratio{over(spins.overlap)} "
        f"(parallel: together for more than half a kernel, {together.in_words()}; the second "
        f"started {spins.start_gap_us.value:.0f} us after the first)",
        holds=together,
    )
    gains = {
        "spin kernels": claims.compare(f.spin_gain, SPINS_GAIN, holds_if="below"),
        "matmuls": claims.compare(f.mm_gain, MATMULS_GAIN, holds_if="above"),
    }
    shown, resources = analysis.weakest(gains)
    table.add(
        "The actual degree of parallelism depends on the GPU's resources",
        source=ARTICLE,
        run=run,
        measured=f"GPU busy time on two streams over that on one: spin kernels "
        f"{f.spin_gain.value:.2f} (should be {gains['spin kernels'].in_words()}), SM-filling "
        f"matmuls {f.mm_gain.value:.2f} (should be {gains['matmuls'].in_words()}); shown: {shown}",
        holds=resources,
    )
