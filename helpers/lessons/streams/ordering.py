"""Notebook 03, section 1: kernels on one stream keep their order; on two they may run at once."""

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
CLAIMS = (
    "PyTorch's CUDA operations run on the device's default stream unless another is chosen",
    "Tasks on one stream execute strictly in the order they were submitted",
    "Tasks on different streams can run in parallel",
    "The actual degree of parallelism depends on the GPU's resources",
)
PAIR_COLUMNS = ["kernels", "streams used", "overlap ratio", "GPU busy per step"]


def _second_after_first(starts: list[float]) -> float:
    """us from the first of some starts to the second (0.0: fewer than two)."""
    return sorted(starts)[1] - min(starts) if len(starts) >= 2 else 0.0


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
    """Two kernels on one stream or two, per profiled step (times in us), and the streams used."""

    overlap: claims.Value  # overlap ratio of the two streams' kernels
    busy_us: claims.Value  # GPU busy time
    start_gap_us: claims.Value  # the second stream's first start after the first's
    launch_gap_us: claims.Value  # the host's second launch after its first
    streams: int


def _pair(profile: trace.Profile) -> Pair:
    overlap = analysis.per_step(profile, lambda step: lanes_overlap(step, "kernel"))
    times = (_busy_us, _start_gap_us, _launch_gap_us)
    busy, start, launch = (analysis.per_step(profile, f, "us") for f in times)
    streams = len({iv.stream for iv in profile.select(kind="kernel")})
    return Pair(overlap, busy, start, launch, streams)


@dataclass(frozen=True)
class Ordering:
    """Section 1's facts: one stream's spin kernels per step, their order, the pairs, the gains."""

    spin_us: list[float]
    pair_us: float
    matmul_n: int
    steps: list[list[trace.Interval]]  # one stream's spin kernels per step, in start order
    in_order: bool  # every step kept the submission order (told apart by their lengths)
    never_overlap: bool
    pairs: dict[str, Pair]
    spin_gain: claims.Value  # GPU busy time on two streams over one, spin kernels
    mm_gain: claims.Value  # the same for matmuls


def facts(run: Run) -> Ordering:
    spin_us, p = run.params["spin_us"], run.params
    kernels = (trace.select(s, kind="kernel") for s in analysis.steps_of(run.value["in order"]))
    steps = [sorted(k, key=lambda iv: iv.start_us) for k in kernels]
    by_length = sorted(range(len(spin_us)), key=lambda k: spin_us[k])
    lengths = [sorted(range(len(step)), key=lambda k: step[k].duration_us) for step in steps]
    kept = [len(s) == len(spin_us) and o == by_length for s, o in zip(steps, lengths, strict=True)]
    in_order = bool(steps) and all(kept)
    after = [b.start_us >= a.end_us - 1.0 for s in steps for a, b in zip(s, s[1:], strict=False)]
    found = {label: _pair(run.value[label]) for label in PAIRS}
    busy = [pair.busy_us for pair in found.values()]  # in the order of PAIRS: one, two, one, two
    spin_gain, mm_gain = (claims.ratio(busy[i], busy[i - 1]) for i in (1, 3))
    sizes = (spin_us, p["pair_us"], p["matmul_n"])
    return Ordering(*sizes, steps, in_order, all(after), found, spin_gain, mm_gain)


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
    gains = f"GPU busy time on two streams over that on one stream: spin kernels {analysis.times(f.spin_gain)}, matmuls {analysis.times(f.mm_gain)}"
    display(tables.Table(columns, [("requested", *f.spin_us), *steps], caption=caption))
    display(tables.Table(PAIR_COLUMNS, pairs, caption=gains))
    for kind, labels in (("spin kernels", ["in order", *PAIRS[:2]]), ("matmuls", PAIRS[2:])):
        panels = {label: run.value[label] for label in labels}
        title = f"{kind} on one and on two streams"
        show_timelines(panels, title, run, list(panels.values()), include_host=False)


def see(run: Run) -> claims.WhatWeSee:
    """Whether one stream kept its order, and how two spin kernels and two matmuls overlapped."""
    f, see = facts(run), claims.WhatWeSee(NOTEBOOK, run)
    first = f.spin_us.index(min(f.spin_us))
    waited = "."
    if first > 0:
        waited = f": the {f.spin_us[first]:.0f} us one waited for the {max(f.spin_us[:first]):.0f} us one queued before it."
    order = f"On one stream the spin kernels of {', '.join(f'{us:.0f}' for us in f.spin_us)} us ran one after another in the order we queued them, whatever their length{waited}"
    if not (f.in_order and f.never_overlap):
        order = f"On one stream the spin kernels did not keep the order we queued them (in order: {f.in_order}, never overlapping: {f.never_overlap})."
    spins = f.pairs["spins, two streams"]
    gap, launched = spins.start_gap_us.value, spins.launch_gap_us.value
    missing_us = (1 - spins.overlap.value) * f.pair_us
    half = " (about half)" if 0.45 <= f.spin_gain.value <= 0.6 else ""
    by_host = f", when the host launched it ({launched:.1f} us after its first launch)"
    by_host = by_host if gap > 0 and 0.8 <= launched / gap <= 1.2 else ""
    accounts = f": that is the {missing_us:.0f} us they did not share."
    accounts = accounts if missing_us > 0 and 0.8 <= gap / missing_us <= 1.2 else "."
    mms, gain = f.pairs["matmuls, two streams"].overlap, f.mm_gain.value
    saved = "a little time saved" if gain >= 0.8 else "time saved"
    saved = "no time saved" if gain >= 0.95 else saved
    see.say(
        order,
        f"The two {f.pair_us:.0f} us spin kernels on two side streams ran side by side for {spins.overlap.value:.0%} of their time (overlap ratio {spins.overlap}{steps_note(spins.overlap)}), and the GPU was busy {f.spin_gain.value:.2f} times as long as when they shared a stream{half}. The second started {gap:.1f} us after the first{by_host}{accounts}",
        f"The two {f.matmul_n}x{f.matmul_n} matrix products on two streams ran side by side for {mms.value:.0%} of their time (overlap ratio {mms}{steps_note(mms)}) and kept the GPU busy {gain:.2f} times as long as on one stream: {saved}.",
    )
    said = [verdict(claim, held, run) for claim, held in judgements(run)[1:]]
    see.say(
        f"What we expected is the streams article's claims, judged in the claims table below: one stream keeps submission order, **{said[0]}**; two streams run side by side (above {TOGETHER:g}), **{said[1]}**; how much depends on the GPU's resources (matmuls busy above {MATMULS_GAIN:g} of one stream's), **{said[2]}**."
    )
    return see


def verdict(claim: str, held: object, run: Run) -> str:
    """The claims table's verdict on ``claim``, stated (a comparison) or read (a bool)."""
    if isinstance(held, claims.Comparison):
        return claims.stated(claims.judged(held, run, NOTEBOOK, claim), run)
    return claims.as_verdict(held)


def judgements(run: Run) -> list[tuple[str, object]]:
    """Each of the article's claims with what decides it: a bool or a comparison."""
    stream, f = run.value["facts"], facts(run)
    resources = analysis.weakest(gains(f))[1]
    kept = f.in_order and f.never_overlap
    holds = (bool(stream["current_is_default"]), kept, together(f), resources)
    return list(zip(CLAIMS, holds, strict=True))


def together(f: Ordering) -> claims.Comparison:
    """Two spin kernels on two side streams run side by side: overlap ratio above TOGETHER."""
    return claims.compare(f.pairs["spins, two streams"].overlap, TOGETHER, holds_if="above")


def gains(f: Ordering) -> dict[str, claims.Comparison]:
    """GPU busy time on two streams over one: spin kernels should gain, matmuls should not."""
    spin = claims.compare(f.spin_gain, SPINS_GAIN, holds_if="below")
    mm = claims.compare(f.mm_gain, MATMULS_GAIN, holds_if="above")
    return {"spin kernels": spin, "matmuls": mm}


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The streams article's claims: default stream, order, parallelism, resources."""
    stream, f = run.value["facts"], facts(run)
    spins, parallel, busy = f.pairs["spins, two streams"], together(f), gains(f)
    (spin, mm), shown = busy.values(), analysis.weakest(busy)[0]
    order = ", ".join(f"{us:.0f}" for us in f.spin_us)
    measured = (
        f"current stream is the default: {stream['current_is_default']}",
        f"spin kernels of {order} us: in order {f.in_order}, never overlapping {f.never_overlap}",
        f"two spin kernels on two side streams: overlap ratio{over(spins.overlap)} (parallel: together for more than half a kernel, {parallel.in_words()}; the second started {spins.start_gap_us.value:.0f} us after the first)",
        f"GPU busy time on two streams over that on one: spin kernels {f.spin_gain.value:.2f} (should be {spin.in_words()}), SM-filling matmuls {f.mm_gain.value:.2f} (should be {mm.in_words()}); shown: {shown}",
    )
    for (claim, held), said in zip(judgements(run), measured, strict=True):
        table.add(claim, source=ARTICLE, run=run, measured=said, holds=held)
