"""Notebook 03, section 1: kernels on one stream keep their order; on two they may run at once."""

from __future__ import annotations

from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, tables, trace
from ...records import Run
from .common import ARTICLE, DOES_NOT, NOTEBOOK, lanes_overlap, over, show_timelines, steps_note

TOGETHER = 0.5  # "in parallel": two spin kernels together for more than half a kernel
SPINS_GAIN = 0.6  # spin kernels on two streams: GPU busy below this share of one stream's
MATMULS_GAIN = 0.85  # SM-filling matmuls on two streams: GPU busy above this share of one's
PAIRS = ("spins, one stream", "spins, two streams", "matmuls, one stream", "matmuls, two streams")
CLAIMS = (
    "PyTorch's CUDA operations run on the device's default stream unless another is chosen",
    "Tasks on one stream execute strictly in the order they were submitted",
    "Tasks on different streams can run in parallel",
    "The actual degree of parallelism depends on the GPU's resources",
)
PAIR_COLUMNS = ["kernels", "streams used", "overlap ratio", "GPU busy per step"]


def _start_gap_us(step: list[trace.Interval]) -> float:
    """us from the first kernel of one stream to the first of the other (0.0: not two streams)."""
    kernels = trace.select(step, kind="kernel")
    streams = {k.stream for k in kernels}
    firsts = [min(k.start_us for k in kernels if k.stream == s) for s in streams]
    return abs(firsts[0] - firsts[1]) if len(firsts) == 2 else 0.0


def _launch_gap_us(step: list[trace.Interval]) -> float:
    """us between the host's first two ``cudaLaunchKernel`` calls (0.0: fewer than two)."""
    starts = sorted(
        iv.start_us for iv in step if iv.kind == "runtime" and iv.name == "cudaLaunchKernel"
    )
    return starts[1] - starts[0] if len(starts) >= 2 else 0.0


@dataclass(frozen=True)
class Pair:
    """Two kernels on one stream or two, per profiled step (times in us), and the streams used."""

    overlap: claims.Value  # overlap ratio of the two streams' kernels
    busy_us: claims.Value  # GPU busy time
    start_gap_us: claims.Value  # the second stream's first start after the first's
    launch_gap_us: claims.Value  # the host's second launch after its first
    streams: int


def _pair(profile: trace.Profile) -> Pair:
    overlap = analysis.per_step(profile, lambda step: lanes_overlap(step, "kernel"))
    busy = analysis.per_step(
        profile, lambda s: trace.covered_us(trace.select(s, kind="kernel")), "us"
    )
    start, launch = (analysis.per_step(profile, f, "us") for f in (_start_gap_us, _launch_gap_us))
    streams = len({iv.stream for iv in profile.select(kind="kernel")})
    return Pair(overlap, busy, start, launch, streams)


@dataclass(frozen=True)
class Ordering:
    """Section 1's facts: one stream's spin kernels per step, their order, the pairs, the GPU
    busy time on two streams over one (spin kernels should gain, matmuls should not), and what
    decides each of ``CLAIMS`` (a bool or a comparison)."""

    spin_us: list[float]
    steps: list[list[trace.Interval]]  # one stream's spin kernels per step, in start order
    in_order: bool  # every step kept the submission order (told apart by their lengths)
    never_overlap: bool
    pairs: dict[str, Pair]
    spin_gain: claims.Comparison  # below SPINS_GAIN
    mm_gain: claims.Comparison  # above MATMULS_GAIN
    holds: tuple[bool, bool, claims.Comparison, claims.Comparison]  # deciding each of CLAIMS


def facts(run: Run) -> Ordering:
    spin_us, is_default = run.params["spin_us"], bool(run.value["facts"]["current_is_default"])
    kernels = (trace.select(s, kind="kernel") for s in analysis.steps_of(run.value["in order"]))
    steps = [sorted(k, key=lambda iv: iv.start_us) for k in kernels]
    by_length = sorted(range(len(spin_us)), key=lambda k: spin_us[k])
    kept = [sorted(range(len(s)), key=lambda k: s[k].duration_us) == by_length for s in steps]
    in_order = bool(steps) and all(kept)  # a step of another kernel count never matches by_length
    after = [b.start_us >= a.end_us - 1.0 for s in steps for a, b in zip(s, s[1:], strict=False)]
    found = {label: _pair(run.value[label]) for label in PAIRS}
    busy = [pair.busy_us for pair in found.values()]  # in the order of PAIRS: one, two, one, two
    spin = claims.compare(claims.ratio(busy[1], busy[0]), SPINS_GAIN, holds_if="below")
    mm = claims.compare(claims.ratio(busy[3], busy[2]), MATMULS_GAIN, holds_if="above")
    together = claims.compare(found[PAIRS[1]].overlap, TOGETHER, holds_if="above")
    resources = analysis.weakest({"spin kernels": spin, "matmuls": mm})[1]
    holds = (is_default, in_order and all(after), together, resources)
    return Ordering(spin_us, steps, in_order, all(after), found, spin, mm, holds)


def show(run: Run) -> None:
    """The stream facts, the spin kernels' order (us), overlap and busy time (us), timelines."""
    stream, f = run.value["facts"], facts(run)
    handles = ", ".join(f"{h:#x}" for h in stream["side_handles"])
    line = f"current stream is the default stream: {stream['current_is_default']}; default stream handle {stream['default_handle']:#x}, side streams {handles}"
    print(line)
    columns = ["spin kernels", *(f"kernel {k + 1} (us)" for k in range(len(f.spin_us)))]
    steps = [
        (f"step {n}, in start order", *(k.duration_us for k in s)) for n, s in enumerate(f.steps)
    ]
    caption = f"same order as submitted: {f.in_order}; no two kernels of one stream overlap: {f.never_overlap}"
    pairs = [(k, p.streams, str(p.overlap), str(p.busy_us)) for k, p in f.pairs.items()]
    gains = f"GPU busy time on two streams over that on one stream: spin kernels {analysis.times(f.spin_gain.value)}, matmuls {analysis.times(f.mm_gain.value)}"
    display(tables.Table(columns, [("requested", *f.spin_us), *steps], caption=caption))
    display(tables.Table(PAIR_COLUMNS, pairs, caption=gains))
    for kind, labels in (("spin kernels", ["in order", *PAIRS[:2]]), ("matmuls", PAIRS[2:])):
        panels = {label: run.value[label] for label in labels}
        show_timelines(panels, f"{kind} on one and on two streams", run, include_host=False)


def see(run: Run) -> claims.WhatWeSee:
    """Whether one stream kept its order, and how two spin kernels and two matmuls overlapped."""
    f, pair_us, n = facts(run), run.params["pair_us"], run.params["matmul_n"]
    first = f.spin_us.index(min(f.spin_us))
    waited = "."
    if first > 0:
        waited = f": the {f.spin_us[first]:.0f} us one waited for the {max(f.spin_us[:first]):.0f} us one queued before it."
    order = f"On one stream the spin kernels of {', '.join(f'{us:.0f}' for us in f.spin_us)} us ran one after another in the order we queued them, whatever their length{waited}"
    if not (f.in_order and f.never_overlap):
        order = f"On one stream the spin kernels did not keep the order we queued them (in order: {f.in_order}, never overlapping: {f.never_overlap})."
    spins, spin_gain, gain = f.pairs[PAIRS[1]], f.spin_gain.value.value, f.mm_gain.value.value
    gap, launched = spins.start_gap_us.value, spins.launch_gap_us.value
    missing_us = (1 - spins.overlap.value) * pair_us
    half = " (about half)" if 0.45 <= spin_gain <= 0.6 else ""
    by_host = f", when the host launched it ({launched:.1f} us after its first launch)"
    by_host = by_host if gap > 0 and 0.8 <= launched / gap <= 1.2 else ""
    accounts = f": that is the {missing_us:.0f} us they did not share."
    accounts = accounts if missing_us > 0 and 0.8 <= gap / missing_us <= 1.2 else "."
    mms = f.pairs["matmuls, two streams"].overlap
    saved = "a little time saved" if gain >= 0.8 else "time saved"
    saved = "no time saved" if gain >= 0.95 else saved
    hardly, then = "hardly, as we expected", ", as expected"
    if mms.value >= DOES_NOT:
        hardly = 'more than the "hardly" we expected'
        then = '. So they overlapped without finishing any sooner: the "no room" we expected shows in the busy time, not in the overlap ratio'
    if gain < 0.95:
        then = ", which our expectation (no room for the second until the first is nearly done) did not predict"
    said = [
        claims.stated(claims.judged(h, run, NOTEBOOK, c), run)
        for c, h in zip(CLAIMS[2:], f.holds[2:], strict=True)
    ]
    return claims.WhatWeSee(NOTEBOOK, run).say(
        order,
        f"The two {pair_us:.0f} us spin kernels on two side streams ran side by side for {spins.overlap.value:.0%} of their time (overlap ratio {spins.overlap}{steps_note(spins.overlap)}), and the GPU was busy {spin_gain:.2f} times as long as when they shared a stream{half}. The second started {gap:.1f} us after the first{by_host}{accounts}",
        f"The two {n}x{n} matrix products on two streams ran side by side for {mms.value:.0%} of their time (overlap ratio {mms}{steps_note(mms)}), {hardly} (we call a ratio below {DOES_NOT:g} no overlap), and kept the GPU busy {gain:.2f} times as long as on one stream: {saved}{then}.",
        f"What we expected is the streams article's claims, judged in the claims table below: one stream keeps submission order, **{claims.as_verdict(f.holds[1])}**; two streams run side by side (above {TOGETHER:g}), **{said[0]}**; how much depends on the GPU's resources (matmuls busy above {MATMULS_GAIN:g} of one stream's), **{said[1]}**.",
    )


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The streams article's claims: default stream, order, parallelism, resources."""
    stream, f = run.value["facts"], facts(run)
    spins, (_, parallel, _) = f.pairs[PAIRS[1]], f.holds[1:]
    shown = analysis.weakest({"spin kernels": f.spin_gain, "matmuls": f.mm_gain})[0]
    order = ", ".join(f"{us:.0f}" for us in f.spin_us)
    measured = (
        f"current stream is the default: {stream['current_is_default']}",
        f"spin kernels of {order} us: in order {f.in_order}, never overlapping {f.never_overlap}",
        f"two spin kernels on two side streams: overlap ratio{over(spins.overlap)} (parallel: together for more than half a kernel, {parallel.in_words()}; the second started {spins.start_gap_us.value:.0f} us after the first)",
        f"GPU busy time on two streams over that on one: spin kernels {f.spin_gain.value.value:.2f} (should be {f.spin_gain.in_words()}), SM-filling matmuls {f.mm_gain.value.value:.2f} (should be {f.mm_gain.in_words()}); shown: {shown}",
    )
    for claim, held, said in zip(CLAIMS, f.holds, measured, strict=True):
        table.add(claim, source=ARTICLE, run=run, measured=said, holds=held)
