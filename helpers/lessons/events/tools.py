"""Notebook 04, sections 5 and 6: what events resolve; one matmul by three tools."""

from __future__ import annotations

import statistics

from ... import analysis, claims, tables, trace
from ...records import Run
from .common import NOTEBOOK, Row, axes, bars, cols, times

PAIRS = ("empty pair (us)", "one tiny kernel (us)")
BEYOND = ": a GPU time above the whole reading is a measurement problem, not a result"
BATCHES = ("batch, launched as we go", "batch, queued behind a spin kernel")
# cudaEventElapsedTime's "resolution of around 0.5 microseconds" (CUDA Runtime API); section 6's
DOCUMENTED_US, AGREE = 0.5, 0.05  # "within a few percent": the largest gap to the profiler
QUEUED = "the batch queued behind a spin kernel measures less per kernel than the batch launched as we go"


def closest_apart(values: list[float]) -> float | None:
    """The smallest step between two distinct values (None: fewer than two)."""
    distinct = sorted(set(values))
    return min((b - a for a, b in zip(distinct, distinct[1:], strict=False)), default=None)


def show_resolution(run: Run) -> tables.Table:
    """The batches' time per kernel printed (us); the pairs' table and histograms (us)."""
    for label in BATCHES:
        t = run.value[label]
        queued = "; queueing them took {enqueue_us:.0f} us of the {hold_us:.0f} us hold"
        queued = queued.format(**t.extra) if "enqueue_us" in t.extra else ""
        kernels = f"({t.calls_per_sample} kernels{queued})"
        print(f"{label:36s} {t.median_us:6.3f} us per kernel {kernels}")
    columns = ["events around", *cols("us", ".3f", "median", "min", "max"), "distinct values"]
    table = tables.Table([*columns, ("closest two apart", "us", ".3f")])
    for label in PAIRS:
        v = run.value[label]
        row = (statistics.median(v), min(v), max(v), len(set(v)), closest_apart(v))
        table.add(label.replace(" (us)", ""), *row)
    ax = axes(run, "Event resolution", "start.elapsed_time(end) (us)", "number of samples")
    ax.hist([run.value[label] for label in PAIRS], bins=40, label=["empty pair", "one tiny kernel"])
    ax.legend()
    return table


def times_in_words(ratio: float) -> str:
    """How a reading compares with a floor, in words chosen by the ratio."""
    if ratio < 1.25:
        return f"only a little above it ({ratio:.2f} times)"
    if ratio < 3:
        return f"about {ratio:.1f} times it"
    return f"{ratio:.0f} times it, well above"


def see_resolution(run: Run) -> claims.WhatWeSee:
    """The empty pair (us) and its step, one tiny kernel against it, the two batches per kernel."""
    empty, closest = run.value[PAIRS[0]], closest_apart(run.value[PAIRS[0]])
    floor, single = (statistics.median(run.value[label]) for label in PAIRS)
    launched, queued = (run.value[label].median_us for label in BATCHES)
    step = f"; its values are {closest:.3f} us apart at the closest, their step" if closest else ""
    host = f"the batch launched as we go takes {launched:.2f} us per kernel, the host's launch rate"
    gpu = queued / single  # the kernel's share of the single pair's reading; the rest is the host's
    host_share = "almost all" if gpu < 0.1 else "most" if gpu < 0.5 else ""
    share = f"so {host_share} of it is host time (the two record calls and the launch), and one pair of events cannot time such a kernel"
    if not host_share:  # the GPU's own time is half the reading or more
        share = "so at most half of it is host time" + (BEYOND if gpu > 1 else "")
    seen = claims.WhatWeSee(NOTEBOOK, run).say(
        f"The empty pair measures {floor:.2f} us (median of {len(empty)}; {min(empty):.2f} to {max(empty):.2f} us), not zero: on an idle stream each event completes when the host records it, so the pair measures the host's time between the two record calls ({host}), not what events can resolve{step}.",
        f"A single tiny kernel measures {single:.2f} us against the empty pair's {floor:.2f} us, {times_in_words(single / floor)}; the kernel's own GPU time ({queued:.2f} us per kernel in the queued batch) is {gpu:.0%} of it, {share}."
        if single > floor
        else f"A single tiny kernel measures {single:.2f} us, no more than the empty pair: the host's launch, not the kernel, is what such a pair measures, so it cannot time it.",
        f"A batch launched as we go takes {launched:.2f} us per kernel, the host's launch rate; queued behind a spin kernel, {queued:.2f} us per kernel, the GPU's rate, while the single kernel's reading is {single / queued:.0f} times that.",
    )
    seen.check(QUEUED, queued < launched, f"{queued:.2f} us against {launched:.2f} us")
    if closest:
        doc = f"{closest:.3f} us apart; CUDA documents about {DOCUMENTED_US} us"
        seen.check("steps finer than the documented resolution", closest < DOCUMENTED_US, doc)
    small = floor < single and single > 2 * queued
    said = f"{single:.2f} us; empty {floor:.2f}, GPU {queued:.2f}"
    more = "one kernel's pair reads more than the empty pair and more than twice the GPU time"
    seen.check(more, small, said)
    return seen


# ---------------------------------------------------------------- 6. three tools


def profiler_time(run: Run) -> claims.Value:
    """The profiled kernels' time per matmul (s), with their durations' relative spread."""
    tools, kernels = run.value, run.value["profiler"].select(kind="kernel")
    durations = analysis.across([iv.duration_us for iv in kernels])
    per_matmul = trace.covered_us(kernels) / (tools["matmuls_per_step"] * tools["profiler"].steps)
    spread = per_matmul * durations.spread / durations.value
    return claims.Value(per_matmul / 1e6, spread / 1e6, "s", len(kernels))


def by_profiler(run: Run) -> tuple[claims.Value, claims.Value]:
    """The events' and the benchmark's medians over the profiler's kernel time ("x")."""
    events, bench, profiled = run.value["events"], run.value["benchmark"], profiler_time(run)
    return claims.ratio(events, profiled), claims.ratio(bench, profiled)


def show_tools(run: Run) -> None:
    """Each tool's time per matmul (us) and the profiler's kernels printed; bars of the three."""
    tools, us = run.value, [iv.duration_us for iv in run.value["profiler"].select(kind="kernel")]
    by_tool = {
        "CUDA events": tools["events"].median_us,
        "torch.utils.benchmark": tools["benchmark"].median_us,
        "profiler kernels": profiler_time(run).value * 1e6,
    }
    for label, per in by_tool.items():
        print(f"{label:22s} {per:9.2f} us per matmul (median)")
    line = f"profiler: {len(us)} kernels in {tools['profiler'].steps} steps of {tools['matmuls_per_step']} matmuls, each from {min(us):.2f} to {max(us):.2f} us"
    print(line)
    bars(run, "One matmul, three tools", by_tool, "time per matmul (us)", "profiler kernels")


def see_tools(run: Run) -> claims.WhatWeSee:
    """The events' and the benchmark's medians over the profiler's kernel time per matmul."""
    (events, bench), blocks = by_profiler(run), len(run.value["benchmark"].samples_s)
    few = f" (from its {blocks} measurements)" if blocks < 5 else ""
    most = max(abs(events.value - 1), abs(bench.value - 1))
    longest = max(iv.duration_us for iv in run.value["profiler"].select(kind="kernel"))
    samples = [s * 1e6 for s in run.value["events"].samples_s]
    line = f"The events measure {times(events)} the profiler's kernel time and `torch.utils.benchmark` {times(bench)}{few}; the three agree within {most:.1%}. {sum(s > longest for s in samples)} of the {len(samples)} event samples read more than the longest profiled kernel ({longest:.2f} us)."
    seen = claims.WhatWeSee(NOTEBOOK, run).say(line)
    agree = f"{most:.1%}, under {AGREE:.0%}"
    seen.check("the three agree within a few percent", most < AGREE, agree)
    return seen


def tools_claims(run: Run) -> list[Row]:
    """That events measure GPU work: against the profiler's kernel time."""
    agree = claims.within(by_profiler(run)[0], 0.9, 1.1)
    claim = "Events measure the time of GPU work (start.record, end.synchronize, start.elapsed_time(end))"
    said = f"events / profiler kernel time, one matmul ({agree.in_words()} counts)"
    return [Row(claim, run, said, agree)]
