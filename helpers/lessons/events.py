"""What notebook 04 shows of its timing experiments: the wrong timer and the right ones, warm-up,
the spread of samples, what events resolve, one measurement by three tools; and the notebook's
claims table.

Its synchronisation experiments (which wait, one stream or GPU waiting for another, many
streams, errors) are in ``events_sync``; the numbers behind the tables and sentences in
``events_analysis``; the rows of the claims table in ``events_claims``. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested on every recorded machine in
tests/test_lesson_04.py.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt

from .. import analysis, claims, exercises, plotting, tables
from ..records import Run
from ..timing import Timing
from . import events_claims
from .events_analysis import (
    by_profiler,
    kernels_of,
    launch_share,
    profiler_us,
    settled_from,
    short,
    sync_over_events,
)

NOTEBOOK = "04_event_timing"
TIMERS = ("perf_counter, no sync", "perf_counter + synchronize", "CUDA events")


def _fig(ratio: float) -> str:
    """A ratio of times with the digits it needs: no decimals from 10 on, one below."""
    return f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.1f}"


# ---------------------------------------------------------------- 1. three timers


def tflops(run: Run) -> float:
    """The matmul's rate by the CUDA events' median: ``2 n**3`` floating-point operations over
    that time, in TFLOP/s (10**12 per second).
    """
    return run.value["flop"] / run.value["CUDA events"].median_s / 1e12


def show_timers(run: Run) -> tables.Table:
    """One matmul, three timers: a table (median, rate in TFLOP/s, min and max, in ms) and bars
    of the medians in ms, each labelled with its ratio to the events'. Returns the table.
    """
    flop = run.value["flop"]
    table = tables.Table(
        [
            "timer",
            ("median", "ms", ".4f"),
            ("rate", "TFLOP/s", ".1f"),
            ("min", "ms", ".4f"),
            ("max", "ms", ".4f"),
        ],
        [
            (label, t.median_ms, flop / t.median_s / 1e12, t.min_s * 1e3, t.max_s * 1e3)
            for label, t in ((label, run.value[label]) for label in TIMERS)
        ],
    )
    plotting.bars_with_ratios(
        {label: run.value[label].median_ms for label in TIMERS},
        baseline="CUDA events",
        ylabel="median time per matmul (ms)",
        title=plotting.machine_title("One matmul, three timers", run.machine, run.live),
    )
    return table


def see_timers(run: Run) -> claims.WhatWeSee:
    """What the three timers show: the share of the events' time the unsynchronised clock sees
    (and the rate it would claim, in TFLOP/s), and the synchronised clock's time as a multiple
    of the events', longer or the same within the noise.
    """
    share, sync = launch_share(run), sync_over_events(run)
    rate = run.value["flop"] / run.value["perf_counter, no sync"].median_s / 1e12
    longer = analysis.in_words(
        claims.compare(sync, 1, holds_if="above"),
        "longer, since it also counts the launch and the return from `synchronize`",
        "the same within the noise",
        "shorter",
    )
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The unsynchronised host clock reports {share.value:.1%} of the events' time: {rate:.0f} TFLOP/s, "
        f"{1 / share.value:.0f} times the rate the events measure."
    )
    seen.say(
        f"The synchronised clock measures {sync.number()} ± {sync.spread_text()} times the events' time: "
        f"{longer}."
    )
    return seen


# ---------------------------------------------------------------- 3. first calls


def show_first_calls(run: Run) -> tables.Table:
    """The first calls of each operation: a table (first call and median of the later ones in
    ms, their ratio) and every call's time in ms against its number, on a log axis. Returns the
    table.
    """
    table = tables.Table(
        [
            "call",
            ("first", "ms", ".3f"),
            ("later, median", "ms", ".3f"),
            ("first / later", "x", ".1f"),
        ]
    )
    _, ax = plt.subplots(figsize=(8, 4))
    for name, times in run.value.items():
        later = statistics.median(times[1:])
        table.add(name, times[0] * 1e3, later * 1e3, times[0] / later)
        ax.plot(range(1, len(times) + 1), [t * 1e3 for t in times], marker="o", label=name)
    plotting.log_axis(ax, "y")
    ax.set_xlabel("call number in this process")
    ax.set_ylabel("time per call (ms, synchronised host clock)")
    ax.set_title(plotting.machine_title("First calls", run.machine, run.live))
    ax.legend(fontsize=8)
    return table


def see_first_calls(run: Run) -> claims.WhatWeSee:
    """What the first calls show: the least and the most the first call took as a multiple of
    the median of the later ones, the call from which each operation stayed within twice that
    median, and a check that each operation's first call is its slowest.
    """
    first = run.value
    ratio = {name: times[0] / statistics.median(times[1:]) for name, times in first.items()}
    least, most = min(ratio, key=ratio.__getitem__), max(ratio, key=ratio.__getitem__)
    settle = {name: settled_from(times) for name, times in first.items()}
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The first call took {_fig(ratio[least])} times the median of the later calls for {short(least)} "
        f"(the least) up to {_fig(ratio[most])} times for {short(most)} (the most)."
    )
    seen.say(
        "From call "
        + ", ".join(f"{settle[name]} for {short(name)}" for name in first)
        + ", every call stayed within twice the later median."
    )
    seen.check(
        "the first call of each operation is its slowest",
        all(times[0] == max(times) for times in first.values()),
        "; ".join(
            f"{short(name)}: first {times[0] * 1e3:.2f} ms, slowest later "
            f"{max(times[1:]) * 1e3:.3f} ms"
            for name, times in first.items()
        ),
    )
    return seen


# ---------------------------------------------------------------- 4. spread


SPREAD_DRAWS = 400  # bootstrap resamples behind a spread's noise


def spread_noise(t: Timing) -> float:
    """How much a clock's IQR / median moves when its samples are drawn again: the standard
    deviation over ``SPREAD_DRAWS`` bootstrap resamples (seeded, so a replay says the same)."""
    rng = random.Random(0)
    n = len(t.samples_s)
    return statistics.stdev(
        dataclasses.replace(t, samples_s=rng.choices(t.samples_s, k=n)).spread
        for _ in range(SPREAD_DRAWS)
    )


@dataclass(frozen=True)
class Spread:
    """Section 4's facts: the host clock's median over the events' ("x", spreads added), each
    clock's IQR / median, and whether their difference is beyond twice its resampling noise."""

    host_over_events: claims.Comparison  # against 1, holds above: the host clock sits higher
    spread: dict[str, float]
    wider: str
    difference_noise: float  # standard deviation of the difference of the two IQR / median

    @property
    def beyond_noise(self) -> bool:
        a, b = self.spread.values()
        return abs(a - b) > 2 * self.difference_noise


def spread_facts(run: Run) -> Spread:
    clocks = run.value
    return Spread(
        claims.compare(claims.ratio(clocks["host clock"], clocks["events"]), 1, holds_if="above"),
        {label: t.spread for label, t in clocks.items()},
        max(clocks, key=lambda label: clocks[label].spread),
        math.hypot(*(spread_noise(t) for t in clocks.values())),
    )


def higher_median(run: Run) -> str | None:
    """Exercise 2: the clock (``'events'`` or ``'host clock'``) whose median is higher, or None
    when the two are the same within the noise (a difference not to grade)."""
    sits = spread_facts(run).host_over_events
    if sits.verdict == claims.BORDERLINE:
        return None
    return "host clock" if sits.value.value > 1 else "events"


def check_higher_median(answer: str | None, run: Run) -> bool | None:
    """Exercise 2's checker: ``answer`` against ``higher_median``; says so and returns None when
    the medians are the same within the noise."""
    expected = higher_median(run)
    if expected is None:
        print("On this machine the two medians are the same within the noise: nothing to grade.")
        return None
    return exercises.check_choice(
        answer, expected, choices=list(run.value), hint="compare the medians printed in section 4"
    )


def show_spread(run: Run) -> tables.Table:
    """The samples of both clocks: a table (median, mean, IQR, min and max in us, IQR / median,
    samples) and their histograms in us, each median dashed. Returns the table.
    """
    table = tables.Table(
        [
            "clock",
            ("median", "us", ".2f"),
            ("mean", "us", ".2f"),
            ("IQR from", "us", ".2f"),
            ("IQR to", "us", ".2f"),
            ("IQR / median", "", ".1%"),
            ("min", "us", ".2f"),
            ("max", "us", ".2f"),
            "samples",
        ]
    )
    _, ax = plt.subplots(figsize=(8, 4))
    for label, t in run.value.items():
        q1, q3 = t.quartiles_s
        table.add(
            label,
            t.median_us,
            t.mean_s * 1e6,
            q1 * 1e6,
            q3 * 1e6,
            t.spread,
            t.min_s * 1e6,
            t.max_s * 1e6,
            len(t.samples_s),
        )
        bars: Any = ax.hist([s * 1e6 for s in t.samples_s], bins=30, alpha=0.6, label=label)[2]
        ax.axvline(
            t.median_us,
            linestyle="--",
            color=bars[0].get_facecolor()[:3],
            linewidth=1.2,
            label=f"median, {label} ({t.median_us:.1f} us)",
        )
    ax.set_xlabel("time per call (us)")
    ax.set_ylabel("number of samples")
    ax.set_title(
        plotting.machine_title(
            f"{run.params['samples']} samples of one kernel (dashed: medians)",
            run.machine,
            run.live,
        )
    )
    ax.legend()
    return table


def see_spread(run: Run) -> claims.WhatWeSee:
    """What the samples show, per clock: where half of them lie (us), the slowest as a multiple
    of the median, the mean's side of the median; then the host clock's median as a multiple of
    the events' and which clock spread more (IQR / median).
    """
    spreads = run.value
    seen = claims.WhatWeSee(NOTEBOOK, run)
    for label, t in spreads.items():
        q1, q3 = t.quartiles_s
        side = "above" if t.mean_s > t.median_s else "below" if t.mean_s < t.median_s else "at"
        seen.say(
            f"{label.capitalize()}: half the samples within {q1 * 1e6:.2f}-{q3 * 1e6:.2f} us, the slowest at "
            f"{t.max_s * 1e6:.2f} us, {t.max_s / t.median_s:.2f} times the median; the mean "
            f"({t.mean_s * 1e6:.2f} us) sits {side} the median ({t.median_us:.2f} us)."
        )
    f = spread_facts(run)
    host = f.host_over_events.value
    words = analysis.in_words(f.host_over_events, "longer", "the same within the noise", "shorter")
    least = min(f.spread.values())
    samples = len(spreads["events"].samples_s)
    spread_words = (
        f"the {f.wider} samples spread more ({f.spread[f.wider]:.1%} of their median against "
        f"{least:.1%}), {'beyond' if f.beyond_noise else 'within'} the noise of {samples} samples "
        f"each (± {2 * f.difference_noise * 100:.1f} points, by resampling)"
        if f.spread[f.wider] > least
        else f"both spread alike ({least:.1%} of their median)"
    )
    seen.say(
        f"The host clock's median is {host.number()} ± {host.spread_text()} times the events' "
        f"({words}); here {spread_words}."
    )
    seen.check(
        "the host clock's samples sit higher than the events'",
        f.host_over_events.verdict == claims.HOLDS,
        f"{host.number()} ± {host.spread_text()} times the events' median",
    )
    return seen


# ---------------------------------------------------------------- 5. resolution

PAIRS = ("empty pair (us)", "one tiny kernel (us)")
BATCHES = ("batch, launched as we go", "batch, queued behind a spin kernel")


def _closest_apart(values: list[float]) -> float | None:
    distinct = sorted(set(values))
    steps = [b - a for a, b in zip(distinct, distinct[1:], strict=False)]
    return min(steps) if steps else None


def show_resolution(run: Run) -> tables.Table:
    """What events resolve: the two batches' time per kernel printed (us), a table of the empty
    pair and the single tiny kernel (median, min, max, distinct values and the closest two
    apart, in us), and their histograms. Returns the table.
    """
    resolution = run.value
    for label in BATCHES:
        t = resolution[label]
        queued = (
            f"; queueing them took {t.extra['enqueue_us']:.0f} us of the {t.extra['hold_us']:.0f} us hold"
            if "enqueue_us" in t.extra
            else ""
        )
        print(
            f"{label:36s} {t.median_us:6.3f} us per kernel ({t.calls_per_sample} kernels per sample{queued})"
        )
    table = tables.Table(
        [
            "events around",
            ("median", "us", ".3f"),
            ("min", "us", ".3f"),
            ("max", "us", ".3f"),
            "distinct values",
            ("closest two apart", "us", ".3f"),
        ]
    )
    for label in PAIRS:
        values = resolution[label]
        table.add(
            label.replace(" (us)", ""),
            statistics.median(values),
            min(values),
            max(values),
            len(set(values)),
            _closest_apart(values),
        )
    _, ax = plt.subplots(figsize=(8, 4))
    ax.hist(
        [resolution[label] for label in PAIRS], bins=40, label=["empty pair", "one tiny kernel"]
    )
    ax.set_xlabel("start.elapsed_time(end) (us)")
    ax.set_ylabel("number of samples")
    ax.set_title(plotting.machine_title("Event resolution", run.machine, run.live))
    ax.legend()
    return table


def _times_in_words(ratio: float) -> str:
    """How a reading compares with a floor, in words chosen by the ratio."""
    if ratio < 1.25:
        return f"only a little above it ({ratio:.2f} times)"
    if ratio < 3:
        return f"about {ratio:.1f} times it, the same order"
    return f"{ratio:.0f} times it, well above"


def see_resolution(run: Run) -> claims.WhatWeSee:
    """What events resolve: the empty pair in us (its range; on an idle stream it measures the
    host's gap between two record calls) and its closest values (the resolution), the single
    tiny kernel's reading against the empty pair, the two batches per kernel in us, and a check
    that the queued batch measures less per kernel than the batch launched as we go.
    """
    resolution = run.value
    empty = resolution["empty pair (us)"]
    floor_us, single_us = (
        statistics.median(empty),
        statistics.median(resolution["one tiny kernel (us)"]),
    )
    launched_us, queued_us = (resolution[label].median_us for label in BATCHES)
    closest = _closest_apart(empty)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The empty pair measures {floor_us:.2f} us (median of {len(empty)}; {min(empty):.2f} to "
        f"{max(empty):.2f} us), not zero, though nothing ran between its two events: on an idle stream each "
        "event completes when the host records it, so the pair measures the host's time between the two "
        f"record calls (the batch launched as we go, below, takes {launched_us:.2f} us per kernel, the host's "
        "launch rate), not what events can resolve"
        + (
            f"; its values are {closest:.3f} us apart at the closest, and that step is the resolution."
            if closest is not None
            else "."
        )
    )
    if single_us > floor_us:
        seen.say(
            f"A single tiny kernel measures {single_us:.2f} us against the empty pair's {floor_us:.2f} us, "
            f"{_times_in_words(single_us / floor_us)} (the empty pair is {floor_us / single_us:.0%} of that "
            "reading). Most of it is the host launching the kernel, so one pair of events cannot time such a "
            "kernel."
        )
    else:
        seen.say(
            f"A single tiny kernel measures {single_us:.2f} us, no more than the empty pair: the host's "
            "launch, not the kernel, is what such a pair measures, so one pair of events cannot time it."
        )
    seen.say(
        f"A batch launched as we go takes {launched_us:.2f} us per kernel, the rate at which the host launches; "
        f"queued behind a spin kernel, {queued_us:.2f} us per kernel, the rate at which the GPU runs them, "
        f"while the single kernel's reading is {single_us / queued_us:.0f} times that."
    )
    seen.check(
        "the batch queued behind a spin kernel measures less per kernel than the batch launched as we go",
        queued_us < launched_us,
        f"{queued_us:.2f} us against {launched_us:.2f} us",
    )
    return seen


# ---------------------------------------------------------------- 6. three tools


def show_tools(run: Run) -> None:
    """One matmul by three tools: each one's time per matmul printed (us), the profiler's
    kernels (how many, their shortest and longest in us), and bars of the three with their
    ratios to the profiler's. Returns nothing.
    """
    tools = run.value
    by_tool_us = {
        "CUDA events": tools["events"].median_us,
        "torch.utils.benchmark": tools["benchmark"].median_us,
        "profiler kernels": profiler_us(run),
    }
    for label, us in by_tool_us.items():
        print(f"{label:22s} {us:9.2f} us per matmul (median)")
    kernel_us = [iv.duration_us for iv in kernels_of(run)]
    print(
        f"profiler: {len(kernel_us)} kernels in {tools['profiler'].steps} steps of {tools['matmuls_per_step']} "
        f"matmuls, each from {min(kernel_us):.2f} to {max(kernel_us):.2f} us"
    )
    plotting.bars_with_ratios(
        by_tool_us,
        baseline="profiler kernels",
        ylabel="time per matmul (us)",
        title=plotting.machine_title("One matmul, three tools", run.machine, run.live),
    )


def see_tools(run: Run) -> claims.WhatWeSee:
    """What the three tools show: the events' and ``torch.utils.benchmark``'s medians as
    multiples of the profiler's kernel time per matmul, with their spreads, and how far apart
    the three are at most.
    """
    events, bench = by_profiler(run, "events"), by_profiler(run, "benchmark")
    blocks = len(run.value["benchmark"].samples_s)
    few = f" (from its {blocks} measurements)" if blocks < 5 else ""
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The events measure {events.number()} ± {events.spread_text()} times the profiler's kernel time and "
        f"`torch.utils.benchmark` {bench.number()} ± {bench.spread_text()} times{few}; the three agree within "
        f"{max(abs(events.value - 1), abs(bench.value - 1)):.1%}."
    )
    return seen


# ---------------------------------------------------------------- the claims table


def claims_table(
    run_timers: Run,
    run_tools: Run,
    run_wait: Run,
    run_streams: Run,
    run_gpus: Run,
    run_first: Run,
    run_many: Run,
    run_errors: Run,
) -> claims.ClaimsTable:
    """The claims notebook 04 tests, each with its verdict computed from the runs: timing needs
    synchronisation, events measure GPU work, which wait blocks what, events order streams and
    GPUs, warm-up, what many streams cost on the GPU and the host, and errors surfacing later.
    """
    table = claims.ClaimsTable(NOTEBOOK)
    events_claims.add_timing(table, run_timers, run_tools)
    events_claims.add_waits(table, run_wait)
    events_claims.add_ordering(table, run_streams, run_gpus)
    events_claims.add_warm_up(table, run_first)
    events_claims.add_many_streams(table, run_many)
    events_claims.add_errors(table, run_errors)
    return table
