"""What notebook 03 shows of its experiments: kernels on one stream and on two (section 1), the
copy engines (section 3), and the exercises' answers. The sections on a copy beside a kernel
(the tutorial's pinned x streamed copy, the launch order of a pageable copy, prefetching on a
side stream) are in ``streams_copies`` (the notebook calls
``streams_copies.show_tutorial``); the verdicts (the tutorial's requirements, the claims
table) are in ``streams_claims``.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures
nothing. Numbers read from a trace are computed once per profiled step (``analysis.per_step``);
their spread across the steps is the noise a verdict must beat. Tested on every recorded machine
in tests/test_lesson_03.py.
"""

from __future__ import annotations

from typing import Any

from IPython.display import display

from .. import analysis, claims, tables, trace
from ..records import Run
from .streams_copies import (
    DOES_NOT,
    NOTEBOOK,
    copy_and_kernel,
    prefetch,
    profile_stats,
    show_timelines,
    steps_note,
)

# ---------------------------------------------------------------- 1. streams and the order of work


def order_facts(run: Run) -> tuple[list[list[trace.Interval]], bool, bool]:
    """The spin kernels of each step in start order; whether every step kept the submission
    order (told apart by their lengths); whether no two of them overlapped."""
    spin_us = run.params["spin_us"]
    steps = [
        sorted(trace.select(step, kind="kernel"), key=lambda iv: iv.start_us)
        for step in analysis.steps_of(run.value["in order"])
    ]
    submitted_rank = sorted(range(len(spin_us)), key=lambda k: spin_us[k])
    in_order = bool(steps) and all(
        len(step) == len(spin_us)
        and sorted(range(len(step)), key=lambda k: step[k].duration_us) == submitted_rank
        for step in steps
    )
    never_overlap = all(
        nxt.start_us >= prev.end_us - 1.0
        for step in steps
        for prev, nxt in zip(step, step[1:], strict=False)
    )
    return steps, in_order, never_overlap


def _stream_order(stream: int | None) -> int:
    """Streams by id; an interval the profiler gave no stream sorts first."""
    return -1 if stream is None else stream


def _lane_overlap(intervals: list[trace.Interval]) -> float:
    """Overlap ratio of the kernels of two streams (0.0 when they all ran on one stream)."""
    kernels = trace.select(intervals, kind="kernel")
    lanes = [
        [iv for iv in kernels if iv.stream == s]
        for s in sorted({iv.stream for iv in kernels}, key=_stream_order)
    ]
    return trace.overlap_ratio(lanes[0], lanes[1]) if len(lanes) == 2 else 0.0


def _start_gap_us(intervals: list[trace.Interval]) -> float:
    """Microseconds from the first kernel's start on one stream to the first on the other: the
    host's time to launch the second stream's kernel (0.0 when they all ran on one stream)."""
    kernels = trace.select(intervals, kind="kernel")
    starts = sorted(
        min(iv.start_us for iv in kernels if iv.stream == s) for s in {iv.stream for iv in kernels}
    )
    return starts[1] - starts[0] if len(starts) == 2 else 0.0


def _launch_gap_us(intervals: list[trace.Interval]) -> float:
    """Microseconds between the host's first two kernel launches (``cudaLaunchKernel`` calls);
    0.0 when there were fewer than two."""
    starts = sorted(
        iv.start_us for iv in intervals if iv.kind == "runtime" and iv.name == "cudaLaunchKernel"
    )
    return starts[1] - starts[0] if len(starts) >= 2 else 0.0


PAIRS = ("spins, one stream", "spins, two streams", "matmuls, one stream", "matmuls, two streams")


def parallel_facts(run: Run) -> dict[str, dict[str, Any]]:
    """Per pair of kernels: overlap ratio of the two streams' kernels, GPU busy time (us), the
    second stream's start after the first's (us) and the host's second launch after its first
    (us), each per profiled step, and the number of streams used."""
    found = {}
    for label in PAIRS:
        profile = run.value[label]
        found[label] = {
            "overlap": analysis.per_step(profile, _lane_overlap),
            "busy_us": analysis.per_step(
                profile, lambda step: trace.covered_us(trace.select(step, kind="kernel")), "us"
            ),
            "start_gap_us": analysis.per_step(profile, _start_gap_us, "us"),
            "launch_gap_us": analysis.per_step(profile, _launch_gap_us, "us"),
            "streams": len({iv.stream for iv in profile.select(kind="kernel")}),
        }
    return found


def gains(parallel: dict[str, dict[str, Any]]) -> tuple[claims.Value, claims.Value]:
    """GPU busy time on two streams over that on one: (spin kernels, matmuls)."""
    spins, matmuls = (
        claims.ratio(
            parallel[f"{kind}, two streams"]["busy_us"], parallel[f"{kind}, one stream"]["busy_us"]
        )
        for kind in ("spins", "matmuls")
    )
    return spins, matmuls


def show_ordering(run: Run) -> None:
    """Section 1's results: the stream facts (is the current stream the default one, the
    streams' handles), the spin kernels of one stream in start order (a table of their durations
    in us), the overlap and GPU busy time (us) of kernels on one and on two streams (a table),
    and their timelines. Returns nothing.
    """
    facts = run.value["facts"]
    print(
        f"current stream is the default stream: {facts['current_is_default']}; default stream handle "
        f"{facts['default_handle']:#x}, side streams "
        + ", ".join(f"{h:#x}" for h in facts["side_handles"])
    )
    spin_us = run.params["spin_us"]
    steps, in_order, never_overlap = order_facts(run)
    display(
        tables.Table(
            ["spin kernels", *(f"kernel {k + 1} (us)" for k in range(len(spin_us)))],
            [("requested", *spin_us)]
            + [
                (f"step {n}, in start order", *(iv.duration_us for iv in step))
                for n, step in enumerate(steps)
            ],
            caption=f"same order as submitted: {in_order}; no two kernels of one stream "
            f"overlap: {never_overlap}",
        )
    )
    parallel = parallel_facts(run)
    spin_gain, mm_gain = gains(parallel)
    display(
        tables.Table(
            ["kernels", "streams used", "overlap ratio", "GPU busy per step"],
            [
                (label, p["streams"], str(p["overlap"]), str(p["busy_us"]))
                for label, p in parallel.items()
            ],
            caption=f"GPU busy time on two streams over that on one stream: spin kernels "
            f"{analysis.times(spin_gain)}, matmuls {analysis.times(mm_gain)}",
        )
    )
    for kind, labels in (
        ("spin kernels", ["in order", "spins, one stream", "spins, two streams"]),
        ("matmuls", ["matmuls, one stream", "matmuls, two streams"]),
    ):
        show_timelines(
            {label: run.value[label] for label in labels},
            f"{kind} on one and on two streams",
            run,
            include_host=False,
        )


def see_ordering(run: Run) -> claims.WhatWeSee:
    """A ``claims.WhatWeSee`` of what section 1 shows (sentences built from its numbers): whether the
    spin kernels of one stream kept their order, how long two spin kernels and two matmuls on
    two streams ran side by side (share of their time) and how long the GPU was busy compared
    with one stream.
    """
    spin_us, pair_us, matmul_n = (
        run.params["spin_us"],
        run.params["pair_us"],
        run.params["matmul_n"],
    )
    _, in_order, never_overlap = order_facts(run)
    parallel = parallel_facts(run)
    spin_gain, mm_gain = gains(parallel)
    spins_two, mms_two = (
        parallel["spins, two streams"]["overlap"],
        parallel["matmuls, two streams"]["overlap"],
    )
    see = claims.WhatWeSee(NOTEBOOK, run)
    shortest = spin_us.index(min(spin_us))
    if in_order and never_overlap:
        see.say(
            f"On one stream the spin kernels of {', '.join(f'{us:.0f}' for us in spin_us)} us ran one "
            f"after another in the order we queued them, whatever their length"
            + (
                f": the {spin_us[shortest]:.0f} us one waited for the {max(spin_us[:shortest]):.0f} us one "
                "queued before it."
                if shortest > 0
                else "."
            )
        )
    else:
        see.say(
            f"On one stream the spin kernels did not keep the order we queued them (in order: "
            f"{in_order}, never overlapping: {never_overlap})."
        )
    gap, launched = (
        parallel["spins, two streams"]["start_gap_us"],
        parallel["spins, two streams"]["launch_gap_us"],
    )
    missing_us = (1 - spins_two.value) * pair_us
    by_host = gap.value > 0 and 0.8 <= launched.value / gap.value <= 1.2
    accounts = missing_us > 0 and 0.8 <= gap.value / missing_us <= 1.2
    see.say(
        f"The two {pair_us:.0f} us spin kernels on two side streams ran side by side for {spins_two.value:.0%} "
        f"of their time (overlap ratio {spins_two}{steps_note(spins_two)}), and the GPU was busy "
        f"{spin_gain.value:.2f} times as long as when they shared a stream"
        f"{' (about half)' if 0.45 <= spin_gain.value <= 0.6 else ''}. "
        f"The second started {gap.value:.1f} us after the first"
        + (
            f", when the host launched it ({launched.value:.1f} us after its first launch)"
            if by_host
            else ""
        )
        + (f": that is the {missing_us:.0f} us they did not share." if accounts else ".")
    )
    saved = (
        "no time saved"
        if mm_gain.value >= 0.95
        else "a little time saved"
        if mm_gain.value >= 0.8
        else "time saved"
    )
    see.say(
        f"The two {matmul_n}x{matmul_n} matrix products on two streams ran side by side for "
        f"{mms_two.value:.0%} of their time (overlap ratio {mms_two}{steps_note(mms_two)}) "
        f"and kept the GPU busy {mm_gain.value:.2f} times as long as on one stream: {saved}."
    )
    return see


# ---------------------------------------------------------------- 3. the copy engines


def _copy_lanes_overlap(intervals: list[trace.Interval]) -> float:
    """Overlap ratio of the copies of two streams (0.0 when they all ran on one stream)."""
    copies = trace.select(intervals, kind="memcpy")
    lanes = [
        [iv for iv in copies if iv.stream == s]
        for s in sorted({iv.stream for iv in copies}, key=_stream_order)
    ]
    return trace.overlap_ratio(lanes[0], lanes[1]) if len(lanes) == 2 else 0.0


TWO_ENGINES = 0.9  # overlap ratio of opposite copies above which two engines carried them
ENGINES_CLAIM = (
    "Requirement (3): a free DMA (copy) engine; H2D and D2H at once need one engine each"
)


def engine_facts(run: Run) -> dict[str, Any]:
    """The copy engine count; the copies' times (claims.Values, s); per pair of copies the
    overlap ratio of the two streams' copies per step; the pairs' times over the sum of their
    copies alone; whether the opposite copies' overlap agrees with the count (None: no count)."""
    engines = run.value
    count = engines["copy_engines"]
    times = {label: claims.measured(t) for label, t in engines["times"].items()}
    pair = {
        label: analysis.per_step(engines[label], _copy_lanes_overlap)
        for label in ("H2D + D2H", "H2D + H2D")
    }
    agree = (
        None
        if count is None
        else claims.judged(
            claims.compare(
                pair["H2D + D2H"], TWO_ENGINES, holds_if="above" if count >= 2 else "below"
            ),
            run,
            NOTEBOOK,
            ENGINES_CLAIM,
        )
    )
    return {
        "count": count,
        "times": times,
        "overlap": pair,
        "agree": agree,
        "both_ways": claims.ratio(
            times["H2D + D2H"], analysis.added(times["H2D alone"], times["D2H alone"])
        ),
        "same_way": claims.ratio(
            times["H2D + H2D"], analysis.added(times["H2D alone"], times["H2D alone"])
        ),
    }


def show_engines(run: Run) -> None:
    """The copy engines' results: a table of the four copies' times (median and spread in ms,
    samples) under the driver's engine count, each pair's overlap ratio and time over the two
    copies one after the other, the pairs' timelines, and whether the opposite copies' overlap
    agrees with the engine count. Returns nothing.
    """
    e = engine_facts(run)
    display(
        tables.Table(
            ["copies", ("median", "ms", ".3f"), ("spread (half IQR)", "ms", ".3f"), "samples"],
            [(label, v.value * 1e3, v.spread * 1e3, v.samples) for label, v in e["times"].items()],
            caption=f"copy engines reported by the driver: {e['count']}",
        )
    )
    for pair, alone in (("H2D + D2H", "H2D alone + D2H alone"), ("H2D + H2D", "twice H2D alone")):
        ratio = e["both_ways"] if pair == "H2D + D2H" else e["same_way"]
        print(
            f"{pair}: overlap ratio {e['overlap'][pair]}{steps_note(e['overlap'][pair])}; its time over that of the "
            f"two copies one after the other ({alone}): {analysis.times(ratio)}"
        )
    show_timelines(
        {label: run.value[label] for label in ("H2D + D2H", "H2D + H2D")},
        "two copies on two side streams",
        run,
        include_host=False,
    )
    print(
        f"overlap of opposite copies agrees with the engine count (two or more engines: above {TWO_ENGINES:g}; "
        "one: below): "
        + ("not testable here" if e["agree"] is None else claims.stated(e["agree"], run))
    )


def see_engines(run: Run) -> claims.WhatWeSee:
    """A ``claims.WhatWeSee`` of what the copy engines show (sentences built from their numbers): the
    engine count, how long opposite and same-direction copies on two streams ran side by side,
    and their time as a multiple of the two copies one after the other.
    """
    e = engine_facts(run)
    count, pair = e["count"], e["overlap"]
    both, same = pair["H2D + D2H"].value, pair["H2D + H2D"].value
    see = claims.WhatWeSee(NOTEBOOK, run)
    see.say(
        "The driver's copy engine count could not be read."
        if count is None
        else f"The driver reports {analysis.plural(count, 'copy engine')}."
    )
    see.say(
        f"A host-to-device and a device-to-host copy on two side streams ran side by side for {both:.0%} "
        f"of the shorter one (overlap ratio {pair['H2D + D2H']}{steps_note(pair['H2D + D2H'])}) and together took "
        f"{e['both_ways'].value:.2f} times as long as the two one after the other"
        + (
            ": each direction had its own engine and its own direction of the link."
            if both >= 0.9 and e["both_ways"].value < 0.8
            else "."
        )
    )
    see.say(
        f"Two host-to-device copies {'ran one after the other' if same < DOES_NOT else 'ran side by side'} "
        f"(overlap ratio {pair['H2D + H2D']}{steps_note(pair['H2D + H2D'])}) and together took "
        f"{e['same_way'].value:.2f} times as long as the two one after the other"
        + (
            ": they gained little, because one link direction is the limit."
            if e["same_way"].value >= 0.9
            else "."
        )
    )
    return see


# ---------------------------------------------------------------- the exercises' answers


def ideal_speedup(run: Run) -> float:
    """The many-batch limit of prefetching, ``(c + k) / max(c, k)``, from one batch's copy ``c``
    and compute ``k`` measured apart (a multiple of the prefetching loop's speed, x).
    """
    return prefetch(run)["ideal"].value


def best_configuration(run: Run) -> str:
    """The configuration of the tutorial's four whose copy ran beside the kernel the most (the
    highest median overlap ratio over the profiled steps).
    """
    stats = profile_stats(run)
    return max(stats, key=lambda label: stats[label]["overlap"].value)


def host_in_memcpy_ms(run: Run, configuration: str) -> float:
    """Milliseconds per profiled step the host spent in ``cudaMemcpyAsync`` in one configuration
    of a run with profiles (e.g. ``"pageable, copy first"`` of the launch order).
    """
    profiles = run.value["profiles"]
    if configuration not in profiles:
        raise ValueError(f"no configuration {configuration!r}: pick one of {list(profiles)}")
    return copy_and_kernel(profiles[configuration])["host_in_memcpy_us"] / 1e3
