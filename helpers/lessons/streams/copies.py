"""Notebook 03, sections 2 to 4 on a host-to-device copy beside a kernel: the tutorial's pinned x
streamed experiment and its requirements (1) and (2), and the forum thread's launch order."""

from __future__ import annotations

from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, tables, trace
from ...records import Run
from .common import (
    ARTICLE,
    DOES_NOT,
    FORUM,
    NOTEBOOK,
    OVERLAPS,
    TUTORIAL,
    over,
    show_timelines,
    steps_note,
)

HELD = 0.8  # host time in cudaMemcpyAsync over the GPU's copy time: the copy held the host
BESIDE = 0.5  # a pageable copy launched after the kernel "ran beside it" above this ratio
FAIR_START_US = 50.0
_TUTORIAL_MS = (
    "copy",
    "kernel",
    "host in cudaMemcpyAsync",
)  # the copy and the kernel both started within this of the hold's end
OVERLAP_CLAIM = "An asynchronous copy on one stream and compute on another overlap"
ONLY_CLAIM = (
    "Only a pinned source copied on a side stream overlaps with the kernel on the main stream"
)
SIDE_STREAM_CLAIM = "Requirement (1): the copy must be on a separate, non-default stream"
PINNED_RELIABLE = "Pinned memory is the reliable way to overlap (either launch order)"


def _parts(step: list[trace.Interval]) -> tuple[list[trace.Interval], list[trace.Interval]]:
    """(H2D copies, kernels other than the hold's spin kernel) of some intervals."""
    kernels = [k for k in trace.select(step, kind="kernel") if "spin_kernel" not in k.name]
    return trace.select(step, kind="memcpy", copy_kind="HtoD"), kernels


def _held(step: list[trace.Interval]) -> float:
    return trace.host_blocked_us(step, "cudaMemcpyAsync") / trace.covered_us(_parts(step)[0])


@dataclass(frozen=True)
class CopyBesideKernel:
    """One configuration's profile: per profiled step the overlap ratio of the H2D copy with the
    kernels and the host's time in ``cudaMemcpyAsync`` over the GPU copy's; per step on average
    the copy's, the kernels' and the host's time in it (us)."""

    overlap: claims.Value
    held: claims.Value
    copy_us: float
    kernel_us: float
    host_in_memcpy_us: float


def beside(profile: trace.Profile) -> CopyBesideKernel:
    copies, kernels = _parts(profile.intervals)
    return CopyBesideKernel(
        analysis.per_step(profile, lambda step: trace.overlap_ratio(*_parts(step))),
        analysis.per_step(profile, _held),
        trace.covered_us(copies) / profile.steps,
        trace.covered_us(kernels) / profile.steps,
        trace.host_blocked_us(profile.intervals, "cudaMemcpyAsync") / profile.steps,
    )


def configurations(run: Run) -> dict[str, CopyBesideKernel]:
    """``beside`` of every profile of a run (the tutorial's or the launch order's), by its label."""
    return {label: beside(p) for label, p in run.value["profiles"].items()}


@dataclass(frozen=True)
class StepStart:
    """One profiled step of the pinned copy on a side stream: the copy's and the first matmul's
    start after the hold's spin kernel ended (us), the copy's and the kernels' busy time (us) and
    the copy's rate in the trace (decimal GB/s)."""

    copy_late_us: float
    kernel_late_us: float
    copy_us: float
    kernel_us: float
    copy_gbps: float

    @property
    def fair(self) -> bool:
        return max(self.copy_late_us, self.kernel_late_us) <= FAIR_START_US


def starts(run: Run, label: str = "pinned, side stream") -> list[StepStart]:
    """``StepStart`` of each profiled step of one configuration of the tutorial's run."""
    found = []
    for step in analysis.steps_of(run.value["profiles"][label]):
        copies, kernels = _parts(step)
        holds = [k.end_us for k in trace.select(step, kind="kernel") if "spin_kernel" in k.name]
        hold_end = max(holds, default=min(iv.start_us for iv in copies + kernels))
        found.append(
            StepStart(
                min(c.start_us for c in copies) - hold_end,
                min(k.start_us for k in kernels) - hold_end,
                trace.covered_us(copies),
                trace.covered_us(kernels),
                run.params["nbytes"] / trace.covered_us(copies) / 1e3,
            )
        )
    return found


# ---------------------------------------------------------------- 2. the tutorial's experiment


def show_tutorial(run: Run) -> None:
    """The pinned copy's timing, the kernel's length, a table of the four configurations (overlap
    ratio; copy, kernel and host-in-cudaMemcpyAsync times per step in ms) and their timelines."""
    tutorial, found = run.value, configurations(run)
    print(tutorial["copy"])
    print(
        f"kernel: {tutorial['matmuls_per_kernel']} matmuls of "
        f"{tutorial['one_matmul'].median_ms:.3f} ms each"
    )
    profiles = tutorial["profiles"]
    display(
        tables.Table(
            ["configuration", "overlap", *((w, "ms", ".3f") for w in _TUTORIAL_MS)],
            [
                (
                    label,
                    str(s.overlap),
                    s.copy_us / 1e3,
                    s.kernel_us / 1e3,
                    s.host_in_memcpy_us / 1e3,
                )
                for label, s in found.items()
            ],
            caption=f"per profiled step ({next(iter(profiles.values())).steps} steps)",
        )
    )
    show_timelines(
        {f"{label}: overlap {found[label].overlap.value:.2f}": p for label, p in profiles.items()},
        "H2D copy beside matmuls, pinned x streamed",
        run,
        list(profiles.values()),
    )


def see_tutorial(run: Run) -> claims.WhatWeSee:
    """How the pinned copy on a side stream started and ran beside the kernel in each step (the
    fair start, who outlasted whom, the traced rate against the events'), whether the pinned copy
    on the current stream overlapped, and how long a pageable copy held the host (ms, and as a
    multiple of the GPU copy)."""
    found = configurations(run)
    side, current = found["pinned, side stream"], found["pinned, current stream"]
    page_side, page_current = found["pageable, side stream"], found["pageable, current stream"]
    see = claims.WhatWeSee(NOTEBOOK, run)
    whose = "its" if side.copy_us <= side.kernel_us else "the kernel's"
    see.say(
        f"With a pinned source on a side stream the copy ran beside the kernel for "
        f"{side.overlap.value:.0%} of {whose} time (overlap ratio {side.overlap}"
        f"{steps_note(side.overlap)})."
    )
    steps, events_gbps = starts(run), run.value["copy"].gbps
    late = [(n, s) for n, s in enumerate(steps) if not s.fair]
    see.say(
        f"The fair start held in {len(steps) - len(late)} of {analysis.plural(len(steps), 'profiled step')}"
        f" (copy and first matmul both started within {FAIR_START_US:.0f} us of the spin kernel's end)"
        + "".join(
            f"; in profiled step {n + 1} the copy started {s.copy_late_us / 1e3:.2f} ms and the first matmul "
            f"{s.kernel_late_us / 1e3:.2f} ms after it ended: the host had not queued them in time"
            for n, s in late
        )
        + ". The kernel outlasted the copy in "
        + f"{sum(s.kernel_us > s.copy_us for s in steps)} of them (copy "
        + ", ".join(f"{s.copy_us / 1e3:.2f}" for s in steps)
        + " ms; kernel "
        + ", ".join(f"{s.kernel_us / 1e3:.2f}" for s in steps)
        + " ms), and the traced copy ran at "
        + ", ".join(f"{s.copy_gbps:.0f}" for s in steps)
        + f" GB/s against {events_gbps:.0f} GB/s timed with events"
        + (
            ": where the copy outlasted the kernel, the rest of it had nothing to hide behind."
            if any(s.copy_us > s.kernel_us for s in steps)
            else "."
        )
    )
    see.say(
        "With a pinned source on the current stream the copy and the kernels shared one lane, and "
        + ("ran one after the other" if current.overlap.value < DOES_NOT else "still overlapped")
        + f" (overlap ratio {current.overlap}{steps_note(current.overlap)})."
    )
    held_side, held_current = page_side.held.value, page_current.held.value
    times = (
        f"about {held_side:.2f} times"
        if f"{held_side:.2f}" == f"{held_current:.2f}"
        else f"{held_side:.2f} and {held_current:.2f} times"
    )
    launched = (
        "and only then launched the kernels: "
        if max(page_side.overlap.value, page_current.overlap.value) < DOES_NOT
        else "and yet some of the kernel ran beside the copy: "
    )
    see.say(
        f"With a pageable source the host sat in `cudaMemcpyAsync` for "
        f"{page_side.host_in_memcpy_us / 1e3:.1f} ms (side stream) and "
        f"{page_current.host_in_memcpy_us / 1e3:.1f} ms (current stream), {times} as long as the "
        f"GPU copy, {launched}overlap ratios {page_side.overlap.value:.2f} (side stream) and "
        f"{page_current.overlap.value:.2f} (current stream)"
        + (
            f", medians of {page_side.held.samples} profiled steps."
            if steps_note(page_side.held)
            else "."
        )
    )
    return see


# ---------------------------------------------------------------- 3. requirements (1) and (2)


@dataclass(frozen=True)
class Requirements:
    """The tutorial's verdicts on section 2's run: the working case overlaps; each other case
    does not (by label); and, each with the name of the comparison that decides it, requirement
    (1), requirement (2) with the copy launched first, and "only pinned + side stream"."""

    works: claims.Comparison
    apart: dict[str, claims.Comparison]
    needs_side_stream: tuple[str, claims.Comparison]
    pageable_blocks: tuple[str, claims.Comparison]
    only_pinned_side: tuple[str, claims.Comparison]


def requirements(run: Run) -> Requirements:
    """The verdicts, those that are claims of the table ``claims.judged`` as such."""
    ratios = {label: s.overlap for label, s in configurations(run).items()}
    works = claims.compare(ratios.pop("pinned, side stream"), OVERLAPS, holds_if="above")
    apart = {label: claims.compare(v, DOES_NOT, holds_if="below") for label, v in ratios.items()}

    def deciding(claim: str | None, *others: str) -> tuple[str, claims.Comparison]:
        name, c = analysis.weakest({"pinned, side stream": works, **{o: apart[o] for o in others}})
        return name, claims.judged(c, run, NOTEBOOK, claim) if claim else c

    return Requirements(
        claims.judged(works, run, NOTEBOOK, OVERLAP_CLAIM),
        apart,
        deciding(SIDE_STREAM_CLAIM, "pinned, current stream"),
        deciding(None, "pageable, side stream"),
        deciding(ONLY_CLAIM, *apart),
    )


def show_requirements(run: Run) -> tables.Table:
    """The first two requirements tested on section 2's runs: each statement, the overlap ratio
    it rests on, its threshold and its verdict. Returns the table."""
    req = requirements(run)
    table = tables.Table(
        [
            "statement",
            "run",
            f"overlap ratio ({req.works.value.samples} profiled steps)",
            "holds if",
            "verdict",
        ],
        bold=["verdict"],
        caption="a requirement holds when the working case (pinned, side stream) overlaps and the "
        "case without the requirement does not",
    )
    table.add(
        "pinned + side stream overlaps",
        "pinned, side stream",
        str(req.works.value),
        f"> {OVERLAPS}",
        claims.stated(req.works, run),
    )
    for statement, label, verdict in (
        (
            "(1) without the side stream it does not",
            "pinned, current stream",
            claims.stated(req.needs_side_stream[1], run),
        ),
        (
            "(2) without pinned memory, copy launched first, it does not",
            "pageable, side stream",
            req.pageable_blocks[1].verdict,
        ),
    ):
        table.add(statement, label, str(req.apart[label].value), f"< {DOES_NOT}", verdict)
    name, only = req.only_pinned_side
    table.add(
        "only pinned + side stream overlaps",
        f"all four (decided by {name})",
        str(only.value),
        "",
        claims.stated(only, run),
    )
    return table


def add_tutorial_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's claims on section 2's run: overlap, only pinned + side stream, requirement (1)."""
    req = requirements(run)
    r = {label: s.overlap.value for label, s in configurations(run).items()}
    steps = over(req.works.value)
    table.add(
        OVERLAP_CLAIM,
        source=ARTICLE,
        run=run,
        measured=f"pinned H2D on a side stream beside matmuls: overlap ratio{steps} "
        f"(overlaps above {OVERLAPS})",
        holds=req.works,
    )
    table.add(
        ONLY_CLAIM,
        source=TUTORIAL,
        run=run,
        measured=f"overlap ratios{steps}: "
        + "; ".join(f"{k} {v:.2f}" for k, v in r.items())
        + f" (pinned on a side stream above {OVERLAPS}, the others below {DOES_NOT}); "
        f"shown: {req.only_pinned_side[0]}",
        holds=req.only_pinned_side[1],
    )
    table.add(
        SIDE_STREAM_CLAIM,
        source=f"{TUTORIAL}; {FORUM}",
        run=run,
        measured=f"pinned, overlap ratios{steps}: side stream {r['pinned, side stream']:.2f} "
        f"(above {OVERLAPS}), current stream {r['pinned, current stream']:.2f} (below "
        f"{DOES_NOT}); shown: {req.needs_side_stream[0]}",
        holds=req.needs_side_stream[1],
    )


def add_host_claim(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (2) on the host, on section 2's run: a pageable copy holds the host."""
    page = configurations(run)["pageable, side stream"]
    held = claims.compare(page.held, HELD, holds_if="above")
    table.add(
        "Requirement (2), the source must be pinned, on the host: a pageable copy holds the host "
        "thread for the copy's duration, so work launched after it starts late",
        source=f"{TUTORIAL}; {FORUM}",
        run=run,
        measured=f"pageable, side stream, copy launched first: host in cudaMemcpyAsync "
        f"{page.host_in_memcpy_us / 1e3:.1f} ms per copy, GPU copy {page.copy_us / 1e3:.1f} ms; "
        f"host time over copy time (held {held.in_words()})",
        holds=held,
    )


# ---------------------------------------------------------------- 4. launch order


def range_ms(profile: trace.Profile, name: str) -> float:
    """Milliseconds per step inside the host's labelled range ``name``."""
    ranges = [iv for iv in profile.select(kind="annotation", name=name) if iv.device is None]
    return trace.covered_us(ranges) / profile.steps / 1e3


def pinned_in_both_orders(run: Run) -> tuple[str, claims.Comparison]:
    """Whether a pinned copy overlaps in both launch orders: the deciding comparison, named, and
    judged as the claim ``PINNED_RELIABLE`` (the claims table and the sentence read it)."""
    found = configurations(run)
    name, deciding = analysis.weakest(
        {
            order: claims.compare(found[f"pinned, {order}"].overlap, OVERLAPS, holds_if="above")
            for order in ("kernel first", "copy first")
        }
    )
    return name, claims.judged(deciding, run, NOTEBOOK, PINNED_RELIABLE)


def show_launch_order(run: Run) -> None:
    """The pageable copy's timing, the kernel's length, a table of the four cases (overlap ratio;
    GPU copy and host-in-cudaMemcpyAsync times per step in ms; host time over copy time) and the
    first step of each as a timeline with its labelled ranges."""
    order, found = run.value, configurations(run)
    print(order["pageable_copy"])
    print(f"kernel: {order['matmuls']} matmuls of {order['one_matmul'].median_ms:.3f} ms each")
    profiles = order["profiles"]
    display(
        tables.Table(
            [
                "configuration",
                "overlap",
                ("GPU copy", "ms", ".3f"),
                ("host in cudaMemcpyAsync", "ms", ".3f"),
                "held / copy",
            ],
            [
                (label, str(s.overlap), s.copy_us / 1e3, s.host_in_memcpy_us / 1e3, str(s.held))
                for label, s in found.items()
            ],
            caption=f"per profiled step ({next(iter(profiles.values())).steps} steps); held / "
            "copy: the host's time in cudaMemcpyAsync over the GPU copy's",
        )
    )
    show_timelines(
        {
            f"{label} (first of {p.steps} steps): overlap {found[label].overlap.value:.2f}": analysis.steps_of(
                p
            )[0]
            for label, p in profiles.items()
        },
        "matmuls on s_0, an H2D copy on s_1, in either launch order",
        run,
        list(profiles.values()),
        ranges=["S0 compute", "S1 copy"],
    )


def see_launch_order(run: Run) -> claims.WhatWeSee:
    """How long a pageable copy held the host (ms, and as a multiple of the GPU copy), its overlap
    in either launch order, and a pinned copy's host time (us) and overlap in both orders."""
    found = configurations(run)
    page_kf, page_cf = found["pageable, kernel first"], found["pageable, copy first"]
    pin_kf, pin_cf = found["pinned, kernel first"], found["pinned, copy first"]
    s1_copy = range_ms(run.value["profiles"]["pageable, copy first"], "S1 copy")
    see = claims.WhatWeSee(NOTEBOOK, run)
    see.say(
        f"With a pageable source the host stayed in `cudaMemcpyAsync` for "
        f"{page_kf.host_in_memcpy_us / 1e3:.1f} ms (kernel first) and "
        f"{page_cf.host_in_memcpy_us / 1e3:.1f} ms (copy first), {page_kf.held.value:.2f} and "
        f"{page_cf.held.value:.2f} times as long as the GPU copy, and the labelled range "
        f"`S1 copy` lasted {s1_copy:.1f} ms."
    )
    ran = "ran beside it" if page_kf.overlap.value >= BESIDE else "barely overlapped it"
    see.say(
        f"Launched after the kernel, the pageable copy {ran}, with an overlap ratio of "
        f"{page_kf.overlap.value:.2f} (the share of the shorter one's time"
        f"{steps_note(page_kf.overlap)}); launched before the kernel, {page_cf.overlap.value:.2f}"
        + (
            ": the host could not launch the kernel until the copy was (nearly) done."
            if page_cf.overlap.value < DOES_NOT
            else "."
        )
    )
    name, deciding = pinned_in_both_orders(run)
    verdict = claims.worded(
        claims.stated(deciding, run),
        f"both orders overlap (above {OVERLAPS}).",
        f"{name} does not reach the {OVERLAPS} we count as overlap ({deciding.value}).",
        f"{name} is within the noise of the {OVERLAPS} we count as overlap ({deciding.value}).",
    )
    see.say(
        f"With a pinned source the host spent at most "
        f"{max(pin_kf.host_in_memcpy_us, pin_cf.host_in_memcpy_us):.0f} us in `cudaMemcpyAsync`, "
        f"and the overlap ratio was {pin_kf.overlap.value:.2f} (kernel first) and "
        f"{pin_cf.overlap.value:.2f} (copy first): {verdict}"
    )
    return see


def add_gpu_claim(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (2) on the GPU, on section 4's run: a pageable copy launched after the kernel."""
    page_kf = configurations(run)["pageable, kernel first"]
    table.add(
        "Requirement (2), the source must be pinned, on the GPU: a pageable copy cannot overlap a "
        "kernel, even one launched before it",
        source=f"{TUTORIAL}; {FORUM}",
        run=run,
        measured=f"pageable copy on a side stream, launched after the kernel: overlap ratio"
        f"{over(page_kf.overlap)} (the requirement holds below {DOES_NOT})",
        holds=claims.compare(page_kf.overlap, DOES_NOT, holds_if="below"),
    )


def add_order_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The forum thread's claims on section 4's run: the host held, launch order, pinned memory."""
    found = configurations(run)
    page_kf, page_cf = found["pageable, kernel first"], found["pageable, copy first"]
    pin_kf, pin_cf = found["pinned, kernel first"], found["pinned, copy first"]
    shown, held = analysis.weakest(
        {
            "kernel first": claims.compare(page_kf.held, HELD, holds_if="above"),
            "copy first": claims.compare(page_cf.held, HELD, holds_if="above"),
        }
    )
    table.add(
        "A pageable H2D cudaMemcpyAsync holds the host thread until the copy is (nearly) done",
        source=FORUM,
        run=run,
        measured=f"host time in cudaMemcpyAsync over GPU copy time (held above {HELD:g}): pageable "
        f"{page_kf.held.value:.2f} (kernel first) and {page_cf.held.value:.2f} (copy first), "
        f"pinned at most {max(pin_kf.held.value, pin_cf.held.value):.3f}; shown: pageable, {shown}",
        holds=held,
    )
    orders = {
        "kernel first": claims.compare(page_kf.overlap, BESIDE, holds_if="above"),
        "copy first": claims.compare(page_cf.overlap, DOES_NOT, holds_if="below"),
    }
    shown, order = analysis.weakest(orders)
    table.add(
        "With a pageable copy, overlap only happens when the kernel was launched before the copy",
        source=FORUM,
        run=run,
        measured=f"pageable, overlap ratios{over(page_kf.overlap)}: kernel first "
        f"{page_kf.overlap.value:.2f} ({orders['kernel first'].in_words()}), copy first "
        f"{page_cf.overlap.value:.2f} ({orders['copy first'].in_words()}); shown: {shown}",
        holds=order,
    )
    shown, both = pinned_in_both_orders(run)
    table.add(
        PINNED_RELIABLE,
        source=FORUM,
        run=run,
        measured=f"pinned, overlap ratios{over(pin_kf.overlap)}: kernel first "
        f"{pin_kf.overlap.value:.2f}, copy first {pin_cf.overlap.value:.2f} (both above "
        f"{OVERLAPS}); shown: {shown}",
        holds=both,
    )


# ---------------------------------------------------------------- the exercises' answers


def best_configuration(run: Run) -> str:
    """The tutorial's configuration whose copy ran beside the kernel the most (median overlap)."""
    found = configurations(run)
    return max(found, key=lambda label: found[label].overlap.value)


def host_in_memcpy_ms(run: Run, configuration: str) -> float:
    """Milliseconds per profiled step the host spent in ``cudaMemcpyAsync`` in one configuration
    of a run with profiles (e.g. ``"pageable, copy first"`` of the launch order)."""
    found = configurations(run)
    if configuration not in found:
        raise ValueError(f"no configuration {configuration!r}: pick one of {list(found)}")
    return found[configuration].host_in_memcpy_us / 1e3
