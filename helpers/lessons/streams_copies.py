"""What notebook 03 shows of a host-to-device copy beside a kernel: the tutorial's pinned x
streamed experiment (section 2), the launch order of a pageable copy (section 4) and
prefetching on a side stream (section 5). It also holds what every part of the lesson shares
(the notebook's name, the overlap thresholds, the timelines' drawing), so ``streams``, which
re-exports its public names, builds on it.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures
nothing; numbers read from a trace are computed once per profiled step (``analysis.per_step``).
Tested on every recorded machine in tests/test_lesson_03.py.
"""

from __future__ import annotations

import statistics
from typing import Any

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, plotting, tables, trace
from ..records import Run

NOTEBOOK = "03_streams_and_overlap"
OVERLAPS, DOES_NOT = (
    0.95,
    0.2,
)  # "overlaps": a ratio of at least 0.95; "does not overlap": below 0.2


def steps_note(value: claims.Value) -> str:
    """``', 2 profiled steps'`` for a value read from fewer than ``analysis.FEW_SAMPLES`` steps, else nothing."""
    note = analysis.few(value.samples, "profiled step")
    return f", {note}" if note else ""


def show_timelines(panels: dict[str, Any], what: str, run: Run, **options: Any) -> None:
    plotting.timelines(panels, title=plotting.machine_title(what, run.machine, run.live), **options)
    plt.show()


# ---------------------------------------------------------------- 2. the tutorial's experiment


def copy_and_kernel(profile: trace.Profile) -> dict[str, Any]:
    """Per profiled step: the overlap ratio of the H2D copies with the kernels (the hold's spin
    kernel left out), and the host's time in cudaMemcpyAsync over the GPU copy time
    (claims.Values); the copy, kernel and host times per step (us)."""

    def parts(intervals: list[trace.Interval]) -> tuple[list[trace.Interval], list[trace.Interval]]:
        copies = trace.select(intervals, kind="memcpy", copy_kind="HtoD")
        kernels = [k for k in trace.select(intervals, kind="kernel") if "spin_kernel" not in k.name]
        return copies, kernels

    def held(intervals: list[trace.Interval]) -> float:
        return trace.host_blocked_us(intervals, "cudaMemcpyAsync") / trace.covered_us(
            parts(intervals)[0]
        )

    copies, kernels = parts(profile.intervals)
    return {
        "overlap": analysis.per_step(profile, lambda step: trace.overlap_ratio(*parts(step))),
        "held": analysis.per_step(profile, held),
        "copy_us": trace.covered_us(copies) / profile.steps,
        "kernel_us": trace.covered_us(kernels) / profile.steps,
        "host_in_memcpy_us": trace.host_blocked_us(profile.intervals, "cudaMemcpyAsync")
        / profile.steps,
    }


def profile_stats(run: Run) -> dict[str, dict[str, Any]]:
    """``copy_and_kernel`` of every profile of a run (the tutorial's or the launch order's)."""
    return {label: copy_and_kernel(p) for label, p in run.value["profiles"].items()}


def show_tutorial(run: Run) -> None:
    """Section 2's results: the pinned copy's timing, the kernel's length, a table of the four
    configurations (overlap ratio; copy, kernel and host-in-cudaMemcpyAsync times per step in ms)
    and their timelines. Returns nothing.
    """
    tutorial = run.value
    print(tutorial["copy"])
    print(
        f"kernel: {tutorial['matmuls_per_kernel']} matmuls of {tutorial['one_matmul'].median_ms:.3f} ms each"
    )
    stats = profile_stats(run)
    display(
        tables.Table(
            [
                "configuration",
                "overlap",
                ("copy", "ms", ".3f"),
                ("kernel", "ms", ".3f"),
                ("host in cudaMemcpyAsync", "ms", ".3f"),
            ],
            [
                (
                    label,
                    str(s["overlap"]),
                    s["copy_us"] / 1e3,
                    s["kernel_us"] / 1e3,
                    s["host_in_memcpy_us"] / 1e3,
                )
                for label, s in stats.items()
            ],
            caption=f"per profiled step ({next(iter(tutorial['profiles'].values())).steps} steps)",
        )
    )
    show_timelines(
        {
            f"{label}: overlap {stats[label]['overlap'].value:.2f}": profile
            for label, profile in tutorial["profiles"].items()
        },
        "H2D copy beside matmuls, pinned x streamed",
        run,
    )


def see_tutorial(run: Run) -> claims.WhatWeSee:
    """A ``claims.WhatWeSee`` of what section 2 shows (sentences built from its numbers): how much of
    the pinned copy on a side stream ran beside the kernel, whether the pinned copy on the
    current stream overlapped, and how long the host sat in ``cudaMemcpyAsync`` for a pageable
    copy (ms, and as a multiple of the GPU copy).
    """
    stats = profile_stats(run)
    pinned_side, pinned_current = stats["pinned, side stream"], stats["pinned, current stream"]
    pageable_side, pageable_current = (
        stats["pageable, side stream"],
        stats["pageable, current stream"],
    )
    see = claims.WhatWeSee(NOTEBOOK, run)
    whose = "its" if pinned_side["copy_us"] <= pinned_side["kernel_us"] else "the kernel's"
    see.say(
        f"With a pinned source on a side stream the copy ran beside the kernel for "
        f"{pinned_side['overlap'].value:.0%} of {whose} time (overlap ratio {pinned_side['overlap']}"
        f"{steps_note(pinned_side['overlap'])})."
    )
    see.say(
        "With a pinned source on the current stream the copy and the kernels shared one lane, and "
        + (
            "ran one after the other"
            if pinned_current["overlap"].value < DOES_NOT
            else "still overlapped"
        )
        + f" (overlap ratio {pinned_current['overlap']}{steps_note(pinned_current['overlap'])})."
    )
    side_held, current_held = pageable_side["held"].value, pageable_current["held"].value
    times = (
        f"about {side_held:.2f} times"
        if f"{side_held:.2f}" == f"{current_held:.2f}"
        else f"{side_held:.2f} and {current_held:.2f} times"
    )
    launched = (
        "and only then launched the kernels: "
        if max(pageable_side["overlap"].value, pageable_current["overlap"].value) < DOES_NOT
        else "and yet some of the kernel ran beside the copy: "
    )
    see.say(
        f"With a pageable source the host sat in `cudaMemcpyAsync` for "
        f"{pageable_side['host_in_memcpy_us'] / 1e3:.1f} ms (side stream) and "
        f"{pageable_current['host_in_memcpy_us'] / 1e3:.1f} ms (current stream), {times} as long as the GPU "
        f"copy, {launched}overlap ratios {pageable_side['overlap'].value:.2f} (side stream) and "
        f"{pageable_current['overlap'].value:.2f} (current stream)"
        + (
            f", medians of {pageable_side['held'].samples} profiled steps."
            if steps_note(pageable_side["held"])
            else "."
        )
    )
    return see


# ---------------------------------------------------------------- 4. launch order


def _range_ms(profile: trace.Profile, name: str) -> float:
    """Milliseconds per step inside the host's labelled range ``name``."""
    ranges = [iv for iv in profile.select(kind="annotation", name=name) if iv.device is None]
    return trace.covered_us(ranges) / profile.steps / 1e3


PINNED_RELIABLE = "Pinned memory is the reliable way to overlap (either launch order)"


def pinned_in_both_orders(
    stats: dict[str, dict[str, Any]], run: Run
) -> tuple[str, claims.Comparison]:
    """Whether a pinned copy overlaps in both launch orders: the deciding comparison, named, and
    judged as the claim ``PINNED_RELIABLE`` (the claims table and the sentence read it)."""
    name, deciding = analysis.weakest(
        {
            order: claims.compare(stats[f"pinned, {order}"]["overlap"], OVERLAPS, holds_if="above")
            for order in ("kernel first", "copy first")
        }
    )
    return name, claims.judged(deciding, run, NOTEBOOK, PINNED_RELIABLE)


def show_launch_order(run: Run) -> None:
    """Section 4's results: the pageable copy's timing, the kernel's length, a table of the four
    cases (overlap ratio; GPU copy and host-in-cudaMemcpyAsync times per step in ms; host time over
    copy time) and the first step of each as a timeline with its labelled ranges. Returns nothing.
    """
    order = run.value
    print(order["pageable_copy"])
    print(f"kernel: {order['matmuls']} matmuls of {order['one_matmul'].median_ms:.3f} ms each")
    stats = profile_stats(run)
    steps = next(iter(order["profiles"].values())).steps
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
                (
                    label,
                    str(s["overlap"]),
                    s["copy_us"] / 1e3,
                    s["host_in_memcpy_us"] / 1e3,
                    str(s["held"]),
                )
                for label, s in stats.items()
            ],
            caption=f"per profiled step ({steps} steps); held / copy: the host's time in "
            "cudaMemcpyAsync over the GPU copy's",
        )
    )
    show_timelines(
        {
            f"{label} (first of {profile.steps} steps): overlap {stats[label]['overlap'].value:.2f}": analysis.steps_of(
                profile
            )[0]
            for label, profile in order["profiles"].items()
        },
        "matmuls on s_0, an H2D copy on s_1, in either launch order",
        run,
        ranges=["S0 compute", "S1 copy"],
    )


def see_launch_order(run: Run) -> claims.WhatWeSee:
    """A ``claims.WhatWeSee`` of what section 4 shows (sentences built from its numbers): how long a
    pageable copy held the host (ms, and as a multiple of the GPU copy), its overlap in either
    launch order, and a pinned copy's host time (us) and overlap in both orders.
    """
    stats = profile_stats(run)
    pageable_kf, pageable_cf = stats["pageable, kernel first"], stats["pageable, copy first"]
    pinned_kf, pinned_cf = stats["pinned, kernel first"], stats["pinned, copy first"]
    pinned_both = pinned_in_both_orders(stats, run)
    s1_copy = _range_ms(run.value["profiles"]["pageable, copy first"], "S1 copy")
    see = claims.WhatWeSee(NOTEBOOK, run)
    see.say(
        f"With a pageable source the host stayed in `cudaMemcpyAsync` for {pageable_kf['host_in_memcpy_us'] / 1e3:.1f} "
        f"ms (kernel first) and {pageable_cf['host_in_memcpy_us'] / 1e3:.1f} ms (copy first), "
        f"{pageable_kf['held'].value:.2f} and {pageable_cf['held'].value:.2f} times as long as the GPU copy, and "
        f"the labelled range `S1 copy` lasted {s1_copy:.1f} ms."
    )
    beside = "ran beside it" if pageable_kf["overlap"].value >= 0.5 else "barely overlapped it"
    see.say(
        f"Launched after the kernel, the pageable copy {beside}, with an overlap ratio of "
        f"{pageable_kf['overlap'].value:.2f} (the share of the shorter one's time"
        f"{steps_note(pageable_kf['overlap'])}); launched before the kernel, {pageable_cf['overlap'].value:.2f}"
        + (
            ": the host could not launch the kernel until the copy was (nearly) done."
            if pageable_cf["overlap"].value < DOES_NOT
            else "."
        )
    )
    name, deciding = pinned_both
    verdict = claims.worded(
        claims.stated(deciding, run),
        f"both orders overlap (above {OVERLAPS}).",
        f"{name} does not reach the {OVERLAPS} we count as overlap ({deciding.value}).",
        f"{name} is within the noise of the {OVERLAPS} we count as overlap ({deciding.value}).",
    )
    see.say(
        f"With a pinned source the host spent at most "
        f"{max(pinned_kf['host_in_memcpy_us'], pinned_cf['host_in_memcpy_us']):.0f} us in `cudaMemcpyAsync`, and "
        f"the overlap ratio was {pinned_kf['overlap'].value:.2f} (kernel first) and "
        f"{pinned_cf['overlap'].value:.2f} (copy first): {verdict}"
    )
    return see


# ---------------------------------------------------------------- 5. prefetching


def prefetch(run: Run) -> dict[str, Any]:
    """The double-buffering numbers: copy ``c`` and compute ``k`` of one batch (claims.Values,
    s), the speed-up (serial loop time over prefetching loop time), the best speed-ups for N
    batches and for many, the share of the possible gain obtained, and per loop the share of the
    H2D copies' time during which a kernel ran."""
    db, n = run.value, run.params["n_batches"]
    c, k = claims.measured(db["copy"]), claims.measured(db["compute"])
    speedup = claims.ratio(db["serial"], db["prefetched"])
    ideal_n = analysis.propagated(lambda c, k: n * (c + k) / (c + (n - 1) * max(c, k) + k), c, k)
    hidden = {}
    for loop in ("serial", "prefetched"):
        profile = db[f"{loop} trace"]
        copies, kernels = (
            profile.select(kind="memcpy", copy_kind="HtoD"),
            profile.select(kind="kernel"),
        )
        hidden[loop] = trace.overlap_us(copies, kernels) / trace.covered_us(copies)
    return {
        "c": c,
        "k": k,
        "n": n,
        "speedup": speedup,
        "ideal_n": ideal_n,
        "hidden": hidden,
        "ideal": analysis.propagated(lambda c, k: (c + k) / max(c, k), c, k),
        "gain_share": analysis.propagated(
            lambda s, i: (s - 1) / (i - 1), speedup, ideal_n, unit=""
        ),
    }


def _traced_copy_ms(run: Run) -> tuple[float, int]:
    """The median H2D copy in the traced prefetching loop (ms), and how many copies it has."""
    copies = run.value["prefetched trace"].select(kind="memcpy", copy_kind="HtoD")
    return statistics.median(iv.duration_us for iv in copies) / 1e3, len(copies)


def _beyond_bound(run: Run, p: dict[str, Any]) -> str:
    """Why a speed-up above the N-batch bound is possible: what the bound rests on was off."""
    traced_ms, copies = _traced_copy_ms(run)
    why = []
    if traced_ms < 0.95 * p["c"].value * 1e3:
        why.append(
            f"in the traced prefetching loop a copy took {traced_ms:.2f} ms (median of {copies}), not the "
            f"{p['c'].value * 1e3:.2f} ms measured alone"
        )
    serial = run.value["serial"]
    if serial.spread > 0.1:
        why.append(
            f"the serial loop's {len(serial.samples_s)} samples spread over {serial.spread:.0%} of their "
            f"median ({serial.min_s * 1e3:.1f} to {serial.max_s * 1e3:.1f} ms)"
        )
    if not why:
        why.append(
            "the copy and compute times it rests on were measured apart, and differ from the loop's"
        )
    return ": " + "; and ".join(why)


def show_prefetching(run: Run) -> None:
    """Section 5's results: the timings of one batch's copy and compute and of both loops, whether
    they give the same results, the measured speed-up against the best possible for N batches and
    for many (as multiples), the share of that gain obtained, and both loops' timelines. Returns
    nothing.
    """
    db = run.value
    p = prefetch(run)
    print(db["copy"])
    print(db["compute"], f"({db['matmuls_per_batch']} matmuls + a sum)")
    print(db["serial"])
    print(db["prefetched"])
    print(f"both loops give the same results: {db['same_results']}")
    print(
        f"\nspeed-up of prefetching, serial loop time / prefetching loop time: {analysis.times(p['speedup'])}"
    )
    print(
        f"best possible for {p['n']} batches, N (c + k) / (c + (N-1) max(c, k) + k): {analysis.times(p['ideal_n'])}; "
        f"for many batches, (c + k) / max(c, k): {analysis.times(p['ideal'])}"
    )
    print(
        f"prefetching loop time / serial loop time: {1 / p['speedup'].value:.2f}; "
        f"max(c, k) / (c + k) = {1 / p['ideal'].value:.2f}"
    )
    if p["gain_share"].value <= 1:
        print(
            f"share of the possible gain obtained, (speed-up - 1) / (best - 1): {p['gain_share']}"
        )
    else:
        print(
            f"the speed-up is above the best possible for {p['n']} batches, computed from c and k measured apart, "
            f"so one side of that comparison is off{_beyond_bound(run, p)}"
        )
    show_timelines(
        {f"{loop} loop": db[f"{loop} trace"] for loop in ("serial", "prefetched")},
        f"{p['n']} batches, serial and prefetched",
        run,
        include_host=False,
        unit="ms",
    )


def see_prefetching(run: Run) -> claims.WhatWeSee:
    """A ``claims.WhatWeSee`` of what section 5 shows (sentences built from its numbers): whether both
    loops give the same results, how much of the copies' time ran beside the compute in each
    loop's trace, and the speed-up against the best the copy and compute times allow.
    """
    db, p = run.value, prefetch(run)
    n, c, k, speedup, ideal, ideal_n = (
        p["n"],
        p["c"],
        p["k"],
        p["speedup"],
        p["ideal"],
        p["ideal_n"],
    )
    see = claims.WhatWeSee(NOTEBOOK, run)
    see.check(
        "both loops compute the same results",
        bool(db["same_results"]),
        f"torch.allclose of the {n} sums: {db['same_results']}",
    )
    see.say(
        f"In the traces (one traced run of each loop) the copies ran beside the compute for "
        f"{p['hidden']['prefetched']:.0%} of the copy time in the prefetching loop and {p['hidden']['serial']:.0%} "
        f"in the serial loop."
    )
    allowed = f"the copy ({c.value * 1e3:.2f} ms) and compute ({k.value * 1e3:.2f} ms) measured apart allow for {n} batches"
    head = (
        f"The prefetching loop took {db['prefetched'].median_ms:.1f} ms for {n} batches against "
        f"{db['serial'].median_ms:.1f} ms for the serial loop: a speed-up (serial time over prefetching time) of "
        f"{analysis.times(speedup)}"
    )
    if p["gain_share"].value > 1:
        see.say(
            f"{head}, more than the {ideal_n.value:.2f}x that {allowed}, so one side of that comparison is off"
            f"{_beyond_bound(run, p)}."
        )
    else:
        # at most the N-batch bound, which is below the many-batch limit
        see.say(
            f"{head}, {p['gain_share'].value:.0%} of the gain that {allowed} ({ideal_n.value:.2f}x), and below "
            f"the many-batch limit of {ideal.value:.2f}x: the first copy and the last compute of the loop cannot "
            "be hidden."
        )
    return see
