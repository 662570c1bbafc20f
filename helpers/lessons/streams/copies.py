"""Notebook 03, sections 2 to 4: an H2D copy beside a kernel (tutorial, requirements, order)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from IPython.display import display

from ... import analysis, claims, tables, trace
from ...records import Run
from .common import ARTICLE, DOES_NOT, FORUM, NOTEBOOK, OVERLAPS, TUTORIAL, over, show_timelines
from .common import steps_note as note

HELD = 0.8  # host time in cudaMemcpyAsync over the GPU's copy time: the copy held the host
BESIDE = 0.5  # a pageable copy launched after the kernel "ran beside it" above this ratio
FAIR_START_US = 50.0  # the copy and the kernel both started within this of the hold's end
OVERLAP_CLAIM = "An asynchronous copy on one stream and compute on another overlap"
ONLY_CLAIM = (
    "Only a pinned source copied on a side stream overlaps with the kernel on the main stream"
)
SIDE_STREAM_CLAIM = "Requirement (1): the copy must be on a separate, non-default stream"
PINNED_RELIABLE = "Pinned memory is the reliable way to overlap (either launch order)"
HOST_CLAIM = "Requirement (2), the source must be pinned, on the host: a pageable copy holds the host thread for the copy's duration, so work launched after it starts late"
GPU_CLAIM = "Requirement (2), the source must be pinned, on the GPU: a pageable copy cannot overlap a kernel, even one launched before it"
HOLDS_HOST_CLAIM = (
    "A pageable H2D cudaMemcpyAsync holds the host thread until the copy is (nearly) done"
)
ORDER_CLAIM = (
    "With a pageable copy, overlap only happens when the kernel was launched before the copy"
)
ORDERS = ("kernel first", "copy first")
BOTH = f"{TUTORIAL}; {FORUM}"
SIDE, PAGE_SIDE = "pinned, side stream", "pageable, side stream"
CURRENT = "pinned, current stream"
TUTORIALS = "the tutorial's version"


def _parts(step: list[trace.Interval]) -> tuple[list[trace.Interval], list[trace.Interval]]:
    """(H2D copies, kernels other than the hold's spin kernel) of some intervals."""
    kernels = [k for k in trace.select(step, kind="kernel") if "spin_kernel" not in k.name]
    return trace.select(step, kind="memcpy", copy_kind="HtoD"), kernels


def _held(step: list[trace.Interval]) -> float:
    return trace.host_blocked_us(step, "cudaMemcpyAsync") / trace.covered_us(_parts(step)[0])


def _list(values: Iterable[float], fmt: str = ".2f") -> str:
    return ", ".join(f"{v:{fmt}}" for v in values)


def earlier_share(step: list[trace.Interval]) -> float:
    """Of the copies' time beside a matmul, the share beside one launched before the previous
    copy (in an earlier iteration of the loop); 0.0 when no copy ran beside a matmul."""
    copies, kernels = _parts(step)
    launched = {iv.correlation: iv.start_us for iv in trace.select(step, kind="runtime")}
    copies.sort(key=lambda c: launched.get(c.correlation, c.start_us))
    beside = earlier = 0.0
    for before, copy in zip([None, *copies], copies, strict=False):
        beside += trace.overlap_us([copy], kernels)
        if before is not None:
            since = launched.get(before.correlation, before.start_us)
            old = [k for k in kernels if launched.get(k.correlation, k.start_us) < since]
            earlier += trace.overlap_us([copy], old)
    return earlier / beside if beside else 0.0


@dataclass(frozen=True)
class CopyBesideKernel:
    """One configuration (or the thread's loop): per profiled step, overlap ratio, host hold
    and ``earlier_share``; per step (per iteration of the thread's loop) on average, ms."""

    overlap: claims.Value  # the copy's overlap ratio with the kernels
    held: claims.Value  # the host's time in cudaMemcpyAsync over the copy's
    earlier: claims.Value
    copy_ms: float
    kernel_ms: float
    host_ms: float  # the host's time in cudaMemcpyAsync
    wait_ms: float  # in cudaStreamSynchronize


def beside(profile: trace.Profile, iterations: int = 1) -> CopyBesideKernel:
    """``CopyBesideKernel`` of a profile whose steps each run ``iterations`` copies."""
    copies, kernels = _parts(profile.intervals)
    calls = ("cudaMemcpyAsync", "cudaStreamSynchronize")
    busy_us = [trace.covered_us(copies), trace.covered_us(kernels)]
    busy_us += [trace.host_blocked_us(profile.intervals, call) for call in calls]
    overlap = analysis.per_step(profile, lambda step: trace.overlap_ratio(*_parts(step)))
    held, earlier = (analysis.per_step(profile, f) for f in (_held, earlier_share))
    times = (us / profile.steps / 1e3 / iterations for us in busy_us)
    return CopyBesideKernel(overlap, held, earlier, *times)


def configurations(run: Run) -> dict[str, CopyBesideKernel]:
    """``beside`` of every profile of a run (the tutorial's or the launch order's), by its label."""
    return {label: beside(p) for label, p in run.value["profiles"].items()}


@dataclass(frozen=True)
class StepStart:
    """One profiled step of the pinned copy on a side stream (us after the hold, ms, GB/s)."""

    copy_late_us: float  # the copy's start after the hold's spin kernel ended
    kernel_late_us: float  # the first matmul's
    copy_ms: float
    kernel_ms: float
    copy_gbps: float  # the copy's rate in the trace (decimal)

    @property
    def fair(self) -> bool:
        return max(self.copy_late_us, self.kernel_late_us) <= FAIR_START_US


def starts(run: Run) -> list[StepStart]:
    """``StepStart`` of each profiled step of the tutorial's pinned copy on a side stream."""
    found = []
    for step in analysis.steps_of(run.value["profiles"][SIDE]):
        copies, kernels = _parts(step)
        holds = [k.end_us for k in trace.select(step, kind="kernel") if "spin_kernel" in k.name]
        end = max(holds, default=min(iv.start_us for iv in copies + kernels))
        copy_us, kernel_us = trace.covered_us(copies), trace.covered_us(kernels)
        firsts = (min(c.start_us for c in copies) - end, min(k.start_us for k in kernels) - end)
        gbps = run.params["nbytes"] / copy_us / 1e3
        found.append(StepStart(*firsts, copy_us / 1e3, kernel_us / 1e3, gbps))
    return found


def _show(run: Run, columns: list, cells: Callable, title: str, **options: Any) -> None:
    """The copy's and kernel's timings, a table of the configurations, and their timelines."""
    v, found, profiles = run.value, configurations(run), run.value["profiles"]
    first = "ranges" in options  # the launch order's: each first step, the host's time
    print(v["pageable_copy" if first else "copy"])
    line = f"kernel: {v['matmuls' if first else 'matmuls_per_kernel']} matmuls of {v['one_matmul'].median_ms:.3f} ms each"
    print(line)
    rows = [(label, str(s.overlap), *cells(s)) for label, s in found.items()]
    caption = f"per profiled step ({next(iter(profiles.values())).steps} steps)"
    held = "; held / copy: the host's time in cudaMemcpyAsync over the GPU copy's"
    caption += held if first else ""
    display(tables.Table(["configuration", "overlap", *columns], rows, caption=caption))
    panels = {}
    for label, p in profiles.items():
        name = f"{label}{f' (first of {p.steps} steps)' if first else ''}: overlap {found[label].overlap.value:.2f}"
        panels[name] = analysis.steps_of(p)[0] if first else p
    show_timelines(panels, title, run, list(profiles.values()), **options)


# ---------------------------------------------------------------- 2. the tutorial's experiment


def show_tutorial(run: Run) -> None:
    """The four configurations: overlap ratio; copy, kernel and host-in-cudaMemcpyAsync (ms)."""
    columns = [(w, "ms", ".3f") for w in ("copy", "kernel", "host in cudaMemcpyAsync")]
    title = "H2D copy beside matmuls, pinned x streamed"
    _show(run, columns, lambda s: (s.copy_ms, s.kernel_ms, s.host_ms), title)


def see_tutorial(run: Run) -> claims.WhatWeSee:
    """Each configuration's overlap, the side-stream copy's start and rate, the pageable hold."""
    found, steps, (name, only) = (
        configurations(run),
        starts(run),
        requirements(run).only_pinned_side,
    )
    side, current, page = found[SIDE], found[CURRENT], found[PAGE_SIDE]
    page_current = found["pageable, current stream"]
    whose = "its" if side.copy_ms <= side.kernel_ms else "the kernel's"
    late = ""
    for n, s in ((n, s) for n, s in enumerate(steps, 1) if not s.fair):
        late += f"; in profiled step {n} the copy started {s.copy_late_us / 1e3:.2f} ms and the first matmul {s.kernel_late_us / 1e3:.2f} ms after it ended: the host had not queued them in time"
    rest = "."
    if any(s.copy_ms > s.kernel_ms for s in steps):
        rest = ": where the copy outlasted the kernel, the rest of it had nothing to hide behind."
    ran = "ran one after the other" if current.overlap.value < DOES_NOT else "still overlapped"
    held = [f"{p.held.value:.2f}" for p in (page, page_current)]
    times = f"about {held[0]} times" if held[0] == held[1] else f"{held[0]} and {held[1]} times"
    launched = "and yet some of the kernel ran beside the copy"
    if max(page.overlap.value, page_current.overlap.value) < DOES_NOT:
        launched = "and only then launched the kernels"
    medians = f", medians of {page.held.samples} profiled steps" if note(page.held) else ""
    # the last sentence states the claims table's own verdict on ONLY_CLAIM, not a second one
    return claims.WhatWeSee(NOTEBOOK, run).say(
        f"With a pinned source on a side stream the copy ran beside the kernel for {side.overlap.value:.0%} of {whose} time (overlap ratio {side.overlap}{note(side.overlap)}).",
        f"The fair start held in {sum(s.fair for s in steps)} of {analysis.plural(len(steps), 'profiled step')} (copy and first matmul both started within {FAIR_START_US:.0f} us of the spin kernel's end){late}. The kernel outlasted the copy in {sum(s.kernel_ms > s.copy_ms for s in steps)} of them (copy {_list(s.copy_ms for s in steps)} ms; kernel {_list(s.kernel_ms for s in steps)} ms), and the traced copy ran at {_list((s.copy_gbps for s in steps), '.0f')} GB/s against {run.value['copy'].gbps:.0f} GB/s timed with events{rest}",
        f"With a pinned source on the current stream the copy and the kernels shared one lane, and {ran} (overlap ratio {current.overlap}{note(current.overlap)}).",
        f"With a pageable source the host sat in `cudaMemcpyAsync` for {page.host_ms:.1f} ms (side stream) and {page_current.host_ms:.1f} ms (current stream), {times} as long as the GPU copy, {launched}: overlap ratios {page.overlap.value:.2f} (side stream) and {page_current.overlap.value:.2f} (current stream){medians}.",
        f"The tutorial's conclusion, that only the pinned source on a side stream overlaps, is judged in the claims table below, decided by the {name} case: **{claims.stated(only, run)}**.",
    )


def show_as_written(run: Run, changed: Run) -> tables.Table:
    """The tutorial's sizes beside section 2's: overlap ratios; copy and kernel ms per step."""
    found, ours = configurations(run), configurations(changed)
    rows = [
        (label, str(s.overlap), str(ours[label].overlap), s.copy_ms, s.kernel_ms)
        for label, s in found.items()
    ]
    columns: list = ["configuration", "overlap, as written", "overlap, section 2"]
    columns += [("copy", "ms", ".3f"), ("kernel", "ms", ".3f")]
    steps = next(iter(run.value["profiles"].values())).steps
    caption = f"per profiled step ({steps} steps), the tutorial's 20 MiB and t * t * t{run.apart_from(changed, TUTORIALS, 'the changed one')}"
    return tables.Table(columns, rows, caption=caption)


def see_as_written(run: Run, changed: Run) -> claims.WhatWeSee:
    """The tutorial's conclusion checked at its own sizes, and what the changes moved."""
    found, ours, see = configurations(run), configurations(changed), claims.WhatWeSee(NOTEBOOK, run)
    side = found[SIDE]
    others = [s.overlap.value for label, s in found.items() if label != SIDE]
    holds = side.overlap.value >= OVERLAPS and all(v < DOES_NOT for v in others)
    ratios = "; ".join(f"{label} {s.overlap}{note(s.overlap)}" for label, s in found.items())
    statement = f"At the tutorial's own sizes, only the pinned source on a side stream overlaps (overlap ratio at least {OVERLAPS}, the others below {DOES_NOT})"
    see.check(statement, holds, f"overlap ratios: {ratios}")
    shorter = "the kernels'" if side.kernel_ms < side.copy_ms else "the copy's"
    moved = [
        k
        for k, s in found.items()
        if (s.overlap.value >= OVERLAPS) != (ours[k].overlap.value >= OVERLAPS)
    ]
    agree = f"agree on which configurations overlap (overlap ratio {OVERLAPS} or more)"
    if moved:
        agree = f"disagree on which configurations overlap (overlap ratio {OVERLAPS} or more): {'; '.join(moved)} overlaps in one and not in the other"
    return see.say(
        f"With a pinned source on a side stream the copy took {side.copy_ms:.3f} ms and the kernels {side.kernel_ms:.3f} ms per step, so its overlap ratio is the share of {shorter} time spent beside the other.",
        f"The tutorial's version and section 2's changed one {agree}{run.apart_from(changed, TUTORIALS, 'the changed one')}.",
    )


# ---------------------------------------------------------------- 3. requirements (1) and (2)


@dataclass(frozen=True)
class Requirements:
    """The tutorial's verdicts on section 2's run, each named by the comparison deciding it."""

    works: claims.Comparison  # the working case overlaps
    apart: dict[str, claims.Comparison]  # each other case (by label) does not
    needs_side_stream: tuple[str, claims.Comparison]  # requirement (1)
    pageable_blocks: tuple[str, claims.Comparison]  # requirement (2), copy first: not a claim
    only_pinned_side: tuple[str, claims.Comparison]  # "only pinned + side stream"


def requirements(run: Run) -> Requirements:
    """The verdicts, those that are claims of the table ``claims.judged`` as such."""
    ratios = {label: s.overlap for label, s in configurations(run).items()}
    works = claims.compare(ratios.pop(SIDE), OVERLAPS, holds_if="above")
    apart = {label: claims.compare(v, DOES_NOT, holds_if="below") for label, v in ratios.items()}
    judged = claims.judged(works, run, NOTEBOOK, OVERLAP_CLAIM)

    def deciding(claim: str | None, *others: str) -> tuple[str, claims.Comparison]:
        # a claim is judged on its own recorded runs; a row that is not one, on the working case's
        cases = {SIDE: works if claim else judged, **{o: apart[o] for o in others}}
        name, c = analysis.weakest(cases)
        return name, claims.judged(c, run, NOTEBOOK, claim) if claim else c

    side = deciding(SIDE_STREAM_CLAIM, CURRENT)
    only = deciding(ONLY_CLAIM, *apart)
    return Requirements(judged, apart, side, deciding(None, PAGE_SIDE), only)


def show_requirements(run: Run) -> tables.Table:
    """Each requirement, its case's overlap ratio and threshold, and the verdict of the weaker of
    the working case and that case (the claims table's where it is a claim), naming which."""
    req = requirements(run)
    columns = ["statement", "run", f"overlap ratio ({req.works.value.samples} profiled steps)"]
    caption = "a requirement holds when the working case (pinned, side stream) overlaps and the case without the requirement does not"
    table = tables.Table([*columns, "holds if", "verdict"], bold=["verdict"], caption=caption)
    every = f"all four (decided by {req.only_pinned_side[0]})"
    two = "(2) without pinned memory, copy launched first, it does not (host and GPU together: the claims table judges each apart)"
    rows = (
        ("pinned + side stream overlaps", SIDE, (SIDE, req.works)),
        ("(1) without the side stream it does not", CURRENT, req.needs_side_stream),
        (two, PAGE_SIDE, req.pageable_blocks),
        ("only pinned + side stream overlaps", every, req.only_pinned_side),
    )
    for statement, label, (by, c) in rows:
        shown = req.apart.get(label, c)  # the row's own case, else the deciding one
        verdict = claims.stated(c, run) if c.claim else c.verdict
        verdict += f" (decided by {by})" if verdict != shown.verdict else ""
        table.add(statement, label, str(shown.value), shown.holds_if_text(), verdict)
    return table


def add_tutorial_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's claims on section 2's run: overlap, only pinned + side stream, requirement (1)."""
    req, r = requirements(run), {label: s.overlap.value for label, s in configurations(run).items()}
    (only_by, only), (side_by, side) = req.only_pinned_side, req.needs_side_stream
    steps, ratios = over(req.works.value), "; ".join(f"{k} {v:.2f}" for k, v in r.items())
    measured = (
        f"pinned H2D on a side stream beside matmuls: overlap ratio{steps} (overlaps above {OVERLAPS})",
        f"overlap ratios{steps}: {ratios} (pinned on a side stream above {OVERLAPS}, the others below {DOES_NOT}); shown: {only_by}",
        f"pinned, overlap ratios{steps}: side stream {r[SIDE]:.2f} (above {OVERLAPS}), current stream {r['pinned, current stream']:.2f} (below {DOES_NOT}); shown: {side_by}",
    )
    claimed, sources = (OVERLAP_CLAIM, ONLY_CLAIM, SIDE_STREAM_CLAIM), (ARTICLE, TUTORIAL, BOTH)
    rows = zip(claimed, sources, measured, (req.works, only, side), strict=True)
    for claim, source, said, holds in rows:
        table.add(claim, source=source, run=run, measured=said, holds=holds)


def add_pinned_claims(table: claims.ClaimsTable, run_tutorial: Run, run_order: Run) -> None:
    """Requirement (2) on the GPU, on section 4's run (a pageable copy launched after the
    kernel), then on the host, on section 2's (a pageable copy holds the host)."""
    overlap = launch_order(run_order).cases[0].overlap
    measured = f"pageable copy on a side stream, launched after the kernel: overlap ratio{over(overlap)} (the requirement holds below {DOES_NOT})"
    holds = claims.compare(overlap, DOES_NOT, holds_if="below")
    table.add(GPU_CLAIM, source=BOTH, run=run_order, measured=measured, holds=holds)
    page = configurations(run_tutorial)[PAGE_SIDE]
    held = claims.compare(page.held, HELD, holds_if="above")
    measured = f"pageable, side stream, copy launched first: host in cudaMemcpyAsync {page.host_ms:.1f} ms per copy, GPU copy {page.copy_ms:.1f} ms; host time over copy time (held {held.in_words()})"
    table.add(HOST_CLAIM, source=BOTH, run=run_tutorial, measured=measured, holds=held)


# ---------------------------------------------------------------- 4. launch order


def range_ms(profile: trace.Profile, name: str) -> float:
    """Milliseconds per step inside the host's labelled range ``name``."""
    ranges = [iv for iv in profile.select(kind="annotation", name=name) if iv.device is None]
    return trace.covered_us(ranges) / profile.steps / 1e3


@dataclass(frozen=True)
class LaunchOrder:
    """Section 4's four cases, and the forum thread's verdicts on them, each with the name of
    the order deciding it (``analysis.weakest``); ``order`` and ``pinned`` are claims of the
    table, judged (``claims.judged``), ``held`` is the comparison alone."""

    cases: tuple[CopyBesideKernel, ...]  # pageable kernel first, copy first; pinned the same
    held: tuple[str, claims.Comparison]  # the pageable copy holds the host (HOLDS_HOST_CLAIM)
    per_order: dict[str, claims.Comparison]  # ORDER_CLAIM's: overlap kernel first, none after
    order: tuple[str, claims.Comparison]  # the deciding one, judged
    pinned: tuple[str, claims.Comparison]  # a pinned copy overlaps in both (PINNED_RELIABLE)


def launch_order(run: Run) -> LaunchOrder:
    """Section 4's facts and verdicts, computed once from a ``launch_order`` run."""
    found = configurations(run)
    cases = tuple(found[f"{m}, {o}"] for m in ("pageable", "pinned") for o in ORDERS)
    pages, pins = zip(ORDERS, cases[:2], strict=True), zip(ORDERS, cases[2:], strict=True)
    held = analysis.weakest({o: claims.compare(p.held, HELD, holds_if="above") for o, p in pages})
    per_order = {ORDERS[0]: claims.compare(cases[0].overlap, BESIDE, holds_if="above")}
    per_order[ORDERS[1]] = claims.compare(cases[1].overlap, DOES_NOT, holds_if="below")
    both = {o: claims.compare(p.overlap, OVERLAPS, holds_if="above") for o, p in pins}
    order_by, order = analysis.weakest(per_order)
    pinned_by, pinned = analysis.weakest(both)
    order_judged = order_by, claims.judged(order, run, NOTEBOOK, ORDER_CLAIM)
    pinned_judged = pinned_by, claims.judged(pinned, run, NOTEBOOK, PINNED_RELIABLE)
    return LaunchOrder(cases, held, per_order, order_judged, pinned_judged)


def show_launch_order(run: Run) -> None:
    """The four cases: overlap ratio; GPU copy and host-in-cudaMemcpyAsync (ms); held / copy."""
    columns = [("GPU copy", "ms", ".3f"), ("host in cudaMemcpyAsync", "ms", ".3f"), "held / copy"]
    title = "matmuls on s_0, an H2D copy on s_1, in either launch order"
    ranges = ["S0 compute", "S1 copy"]
    _show(run, columns, lambda s: (s.copy_ms, s.host_ms, str(s.held)), title, ranges=ranges)


def see_launch_order(run: Run) -> claims.WhatWeSee:
    """A pageable copy's hold on the host and overlap per order; a pinned copy's (us, ratios)."""
    o = launch_order(run)
    page_kf, page_cf, pin_kf, pin_cf = o.cases
    s1_copy = range_ms(run.value["profiles"]["pageable, copy first"], "S1 copy")
    ran = "ran beside it" if page_kf.overlap.value >= BESIDE else "barely overlapped it"
    done = ": the host could not launch the kernel until the copy was (nearly) done"
    done = done if page_cf.overlap.value < DOES_NOT else ""
    (name, deciding), order = o.pinned, o.order[1]
    both = f"both orders overlap (above {OVERLAPS})."
    short = f"{name} does not reach the {OVERLAPS} we count as overlap ({deciding.value})."
    noise = f"{name} is within the noise of the {OVERLAPS} we count as overlap ({deciding.value})."
    verdict = claims.worded(claims.stated(deciding, run), both, short, noise)
    return claims.WhatWeSee(NOTEBOOK, run).say(
        f"With a pageable source the host stayed in `cudaMemcpyAsync` for {page_kf.host_ms:.1f} ms (kernel first) and {page_cf.host_ms:.1f} ms (copy first), {page_kf.held.value:.2f} and {page_cf.held.value:.2f} times as long as the GPU copy, and the labelled range `S1 copy` lasted {s1_copy:.1f} ms.",
        f"Launched after the kernel, the pageable copy {ran}, with an overlap ratio of {page_kf.overlap.value:.2f} (the share of the shorter one's time{note(page_kf.overlap)}); launched before the kernel, {page_cf.overlap.value:.2f}{done}.",
        f"With a pinned source the host spent at most {max(pin_kf.host_ms, pin_cf.host_ms) * 1e3:.0f} us in `cudaMemcpyAsync`, and the overlap ratio was {pin_kf.overlap.value:.2f} (kernel first) and {pin_cf.overlap.value:.2f} (copy first): {verdict}",
        f"What we expected, a pageable copy overlapping a kernel launched before it (at least {BESIDE:g}) and not one launched after it (below {DOES_NOT:g}), is the forum thread's claim that the claims table below judges: **{claims.stated(order, run)}**.",
    )


def add_order_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The forum thread's claims on section 4's run: the host held, launch order, pinned memory."""
    o = launch_order(run)
    page_kf, page_cf, pin_kf, pin_cf = o.cases
    (held_by, held), (order_by, order), (pinned_by, pinned) = o.held, o.order, o.pinned
    kf, cf = o.per_order.values()
    measured = (
        f"host time in cudaMemcpyAsync over GPU copy time (held above {HELD:g}): pageable {page_kf.held.value:.2f} (kernel first) and {page_cf.held.value:.2f} (copy first), pinned at most {max(pin_kf.held.value, pin_cf.held.value):.3f}; shown: pageable, {held_by}",
        f"pageable, overlap ratios{over(page_kf.overlap)}: kernel first {page_kf.overlap.value:.2f} ({kf.in_words()}), copy first {page_cf.overlap.value:.2f} ({cf.in_words()}); shown: {order_by}",
        f"pinned, overlap ratios{over(pin_kf.overlap)}: kernel first {pin_kf.overlap.value:.2f}, copy first {pin_cf.overlap.value:.2f} (both above {OVERLAPS}); shown: {pinned_by}",
    )
    claimed = (HOLDS_HOST_CLAIM, ORDER_CLAIM, PINNED_RELIABLE)
    for claim, said, holds in zip(claimed, measured, (held, order, pinned), strict=True):
        table.add(claim, source=FORUM, run=run, measured=said, holds=holds)


# ---------------------------------------------------------------- 4. the thread's loop as posted

THREADS = "the thread's loop"


def thread_loops(run: Run) -> dict[str, CopyBesideKernel]:
    """``beside`` of the pageable and the pinned loop, by source memory; times per copy (one an
    iteration), the profiled step being one loop."""
    return {m: beside(p, run.params["iterations"]) for m, p in run.value["profiles"].items()}


def show_thread(run: Run) -> None:
    """Both loops: overlap ratio, earlier iterations' share; per copy the GPU's and host's ms."""
    found, profiles = thread_loops(run), run.value["profiles"]
    columns: list = ["source", "overlap", "share beside an earlier iteration's matmul"]
    columns += [
        (w, "ms", ".3f") for w in ("GPU copy", "in cudaMemcpyAsync", "in cudaStreamSynchronize")
    ]
    rows = [
        (m, str(t.overlap), str(t.earlier), t.copy_ms, t.host_ms, t.wait_ms)
        for m, t in found.items()
    ]
    loops = next(iter(profiles.values())).steps
    caption = f"per profiled step ({analysis.plural(loops, 'loop')} of {run.params['iterations']} iterations); times per copy"
    display(tables.Table(columns, rows, caption=caption))
    panels = {
        f"{m}, the first loop: overlap {found[m].overlap.value:.2f}": analysis.steps_of(p)[0]
        for m, p in profiles.items()
    }
    title = "the forum thread's loop: two matmuls on s_0, a blocking copy on s_1"
    show_timelines(panels, title, run, list(profiles.values()))


def see_thread(run: Run, changed: Run) -> claims.WhatWeSee:
    """The thread's observation checked on its own loop, the answer's caveat, section 4 beside."""
    found, see = thread_loops(run), claims.WhatWeSee(NOTEBOOK, run)
    page, pinned = found["pageable"], found["pinned"]
    overlapped = f"In the thread's loop the pageable copy overlapped the matmuls (overlap ratio at least {BESIDE:g})"
    said = f"overlap ratio {page.overlap}{note(page.overlap)}"
    see.check(overlapped, page.overlap.value >= BESIDE, said)
    kernel_first = launch_order(changed).cases[0].overlap
    held = [(t.host_ms + t.wait_ms) / t.copy_ms for t in (page, pinned)]
    loops = analysis.plural(page.earlier.samples or 0, "loop")
    earlier = f"Of the copies' time beside a matmul, {page.earlier.value:.0%} (pageable) and {pinned.earlier.value:.0%} (pinned) was beside a matmul launched in an earlier iteration (medians of {loops})."
    if max(page.overlap.value, pinned.overlap.value) > 0:
        see.say(earlier)
    return see.say(
        f"Per copy the host spent {page.host_ms:.2f} ms in `cudaMemcpyAsync` and {page.wait_ms:.2f} ms in `cudaStreamSynchronize` with a pageable source, {pinned.host_ms:.3f} ms and {pinned.wait_ms:.2f} ms with a pinned one, against GPU copies of {page.copy_ms:.2f} and {pinned.copy_ms:.2f} ms: the blocking `.to()` held the host for {held[0]:.2f} and {held[1]:.2f} times the copy's time.",
        f"With a pinned source the loop's overlap ratio was {pinned.overlap.value:.2f}, against {page.overlap.value:.2f} with a pageable one (the share of the shorter one's time: per iteration the matmuls took {pinned.kernel_ms:.2f} and {page.kernel_ms:.2f} ms); in section 4's single launch, a pageable copy launched after the kernel read {kernel_first.value:.2f}{run.apart_from(changed, THREADS, 'section 4')}.",
    )


# ---------------------------------------------------------------- the exercises' answers


def best_configuration(run: Run) -> str:
    """The tutorial's configuration whose copy ran beside the kernel the most (median overlap)."""
    found = configurations(run)
    return max(found, key=lambda label: found[label].overlap.value)


def host_in_memcpy_ms(run: Run, configuration: str) -> float:
    """Milliseconds per profiled step the host spent in ``cudaMemcpyAsync`` in one configuration."""
    found = configurations(run)
    if configuration not in found:
        raise ValueError(f"no configuration {configuration!r}: pick one of {list(found)}")
    return found[configuration].host_ms
