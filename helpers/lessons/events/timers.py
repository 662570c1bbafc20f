"""Notebook 04, sections 1, 3 and 4: one matmul by three timers, first calls, two clocks' spread."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from dataclasses import dataclass

from ... import analysis, claims, exercises, plotting, tables
from ...records import Run
from ...timing import Timing
from .common import NOTEBOOK, Row, axes, bars, cols, times, vs_one

TIMERS = ("perf_counter, no sync", "perf_counter + synchronize", "CUDA events")
SPREAD_DRAWS = 400  # bootstrap resamples behind a spread's noise


def tflops(run: Run, timer: str = "CUDA events") -> float:
    """The matmul's rate by ``timer``'s median (2 n**3 operations over it), in TFLOP/s."""
    return run.value["flop"] / run.value[timer].median_s / 1e12


def over_events(run: Run, timer: str) -> claims.Value:
    """``timer``'s median over the events' ("x", spreads added)."""
    return claims.ratio(run.value[timer], run.value["CUDA events"])


def show_timers(run: Run) -> tables.Table:
    """One matmul, three timers: a table (ms; no rate: exercise 1) and bars of the medians (ms)."""
    timed = {label: run.value[label] for label in TIMERS}
    medians = {label: t.median_ms for label, t in timed.items()}
    bars(run, "One matmul, three timers", medians, "median time per matmul (ms)", "CUDA events")
    rows = [(k, t.median_ms, t.min_s * 1e3, t.max_s * 1e3) for k, t in timed.items()]
    return tables.Table(["timer", *cols("ms", ".4f", "median", "min", "max")], rows)


def see_timers(run: Run) -> claims.WhatWeSee:
    """The share of the events' time the unsynchronised clock sees; the synchronised one's."""
    share, synced = (over_events(run, timer) for timer in TIMERS[:2])
    no_sync, synced_s, events_s = (run.value[t].samples_s for t in TIMERS)
    longer, n = sum(a > b for a, b in zip(synced_s, events_s, strict=True)), len(events_s)
    early = max(no_sync) < min(events_s)  # every reading ended before the GPU could have
    rate = f"as if the matmul ran at {tflops(run, TIMERS[0]):.0f} TFLOP/s, {1 / share.value:.0f} times the events' rate"
    problem = f"{rate}: a measurement problem, not a speed, as even its slowest reading ({max(no_sync) * 1e6:.0f} us) is shorter than the events' fastest ({min(events_s) * 1e6:.0f} us), so the clock stopped before the work ended"
    seen = claims.WhatWeSee(NOTEBOOK, run).say(
        f"The unsynchronised host clock reports {share.value:.1%} of the events' time, {problem if early else rate}.",
        f"The synchronised clock measures {times(synced)} the events' time (medians), and read longer than the events in {longer} of {n} paired samples.",
    )
    top = max(no_sync) / run.value[TIMERS[2]].median_s  # the slowest reading, not the median
    slowest = f"the slowest {max(no_sync) * 1e6:.0f} us, {top:.1%} of the events' median time"
    micro = max(no_sync) < 1e-3 and top < 0.5
    seen.check("without sync the clock reads microseconds, far below the events", micro, slowest)
    seen.check("the synchronised clock reads more than the events", synced.value > 1, times(synced))
    return seen


def timer_claims(run: Run) -> list[Row]:
    """That timing GPU work needs synchronisation: the unsynchronised clock against the events."""
    missed = claims.compare(over_events(run, TIMERS[0]), 0.5, holds_if="below")
    claim = "To measure the execution time of GPU operations, we need to synchronise"
    said = f"perf_counter without synchronize / CUDA events, one matmul ({missed.in_words()}: it missed most of the work)"
    return [Row(claim, run, said, missed)]


# ---------------------------------------------------------------- 3. first calls


def short(name: str) -> str:
    """An operation's name without its explanation: ``'torch.erf (why)'`` -> ``'torch.erf'``."""
    return name.split(" (")[0]


def fig(ratio: float) -> str:
    """A ratio with the digits it needs: no decimals from 10 on, one below."""
    return f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.1f}"


def first_over_later(times: list[float]) -> claims.Value:
    """First call over the later calls' median ("x"), with their relative spread."""
    later = analysis.across(times[1:])
    ratio = times[0] / later.value
    return claims.Value(ratio, ratio * later.spread / later.value, "x", len(times))


def settled_from(times: list[float], within: float = 2.0) -> int:
    """The call (1-based) from which every call takes at most ``within`` times the later median."""
    later = statistics.median(times[1:])
    call = len(times)
    while call > 1 and times[call - 1] <= within * later:
        call -= 1
    return call + 1


def firsts(run: Run) -> dict[str, claims.Value]:
    """Each operation's first call over its later calls' median ("x"), computed once."""
    return {name: first_over_later(t) for name, t in run.value.items()}


def show_first_calls(run: Run) -> tables.Table:
    """First call and later median (ms), their ratio; every call's time (ms, log axis)."""
    ylabel = "time per call (ms, synchronised host clock)"
    ax = axes(run, "First calls", "call number in this process", ylabel)
    over = ("first / later", "x", ".1f")
    table = tables.Table(["call", *cols("ms", ".3f", "first", "later, median"), over])
    for (name, t), ratio in zip(run.value.items(), firsts(run).values(), strict=True):
        table.add(name, t[0] * 1e3, statistics.median(t[1:]) * 1e3, ratio.value)
        ax.plot(range(1, len(t) + 1), [s * 1e3 for s in t], marker="o", label=name)
    plotting.log_axis(ax, "y")
    ax.legend(fontsize=8)
    return table


def see_first_calls(run: Run) -> claims.WhatWeSee:
    """The least and most first call over the later median, when calls settle, the slowest."""
    first, ratio = run.value, {name: r.value for name, r in firsts(run).items()}
    least, most = min(ratio, key=ratio.__getitem__), max(ratio, key=ratio.__getitem__)
    settled = ", ".join(f"{settled_from(t)} for {short(name)}" for name, t in first.items())
    slowest = "; ".join(
        f"{short(n)}: first {t[0] * 1e3:.2f} ms, slowest later {max(t[1:]) * 1e3:.3f} ms"
        for n, t in first.items()
    )
    line = f"The first call took {fig(ratio[least])} times the later calls' median for {short(least)} (the least) up to {fig(ratio[most])} times for {short(most)} (the most): one first call per operation, in one process, so each ratio rests on a single first call."
    seen = claims.WhatWeSee(NOTEBOOK, run).say(line)
    seen.say(f"From call {settled}, every call stayed within twice the later median.")
    first_is_slowest = all(t[0] == max(t) for t in first.values())
    seen.check("the first call of each operation is its slowest", first_is_slowest, slowest)
    return seen


def warm_up_claims(run: Run) -> list[Row]:
    """That a first call can be far slower: the operation whose first call stands out most."""
    first = firsts(run)
    slowest = max(first, key=lambda name: first[name].value)
    far = claims.compare(first[slowest], 10, holds_if="above")
    claim = "Warm up first: the first call of an operation can be far slower than later ones"
    said = f"first call / median of the later ones, {short(slowest)}, the largest of {len(first)} operations ({far.in_words()} counts as far slower); one first call per operation, in one process: the ± is the later calls' spread alone"
    return [Row(claim, run, said, far, "measurement method (nvbandwidth, nccl-tests)")]


# ---------------------------------------------------------------- 4. spread


def spread_noise(t: Timing) -> float:
    """The standard deviation of IQR / median over ``SPREAD_DRAWS`` seeded bootstrap resamples."""
    rng, n = random.Random(0), len(t.samples_s)
    return statistics.stdev(
        dataclasses.replace(t, samples_s=rng.choices(t.samples_s, k=n)).spread
        for _ in range(SPREAD_DRAWS)
    )


@dataclass(frozen=True)
class Spread:
    """Section 4's facts: host clock over events, IQR / median per clock, its difference's noise."""

    host_over_events: claims.Comparison  # against 1, holds above: the host clock sits higher
    spread: dict[str, float]
    wider: str
    difference_noise: float

    @property
    def beyond_noise(self) -> bool:
        a, b = self.spread.values()
        return abs(a - b) > 2 * self.difference_noise


def spread_facts(run: Run) -> Spread:
    """Section 4's numbers, computed once from a ``spread`` run."""
    clocks = run.value
    return Spread(
        claims.compare(claims.ratio(clocks["host clock"], clocks["events"]), 1, holds_if="above"),
        {label: t.spread for label, t in clocks.items()},
        max(clocks, key=lambda label: clocks[label].spread),
        math.hypot(*(spread_noise(t) for t in clocks.values())),
    )


def higher_median(run: Run) -> str | None:
    """Exercise 2: the clock with the higher median, None when the same within the noise."""
    return analysis.in_words(spread_facts(run).host_over_events, "host clock", "", "events") or None


def check_higher_median(answer: str | None, run: Run) -> bool | None:
    """Exercise 2's checker; None (and says so) when the medians are the same within the noise."""
    expected = higher_median(run)
    if expected is None:
        print("On this machine the two medians are the same within the noise: nothing to grade.")
        return None
    hint = "compare the medians printed in section 4"
    return exercises.check_choice(answer, expected, choices=list(run.value), hint=hint)


def show_spread(run: Run) -> tables.Table:
    """Both clocks' samples: a table (us, IQR / median) and histograms (us), medians dashed."""
    what = f"{run.params['samples']} samples of one kernel (dashed: medians)"
    ax = axes(run, what, "time per call (us)", "number of samples")
    in_us = cols("us", ".2f", "median", "mean", "IQR from", "IQR to", "min", "max")
    table = tables.Table(["clock", *in_us, ("IQR / median", "", ".1%"), "samples"])
    for label, t in run.value.items():
        us = (s * 1e6 for s in (t.median_s, t.mean_s, *t.quartiles_s, t.min_s, t.max_s))
        table.add(label, *us, t.spread, len(t.samples_s))
        patches = ax.hist([s * 1e6 for s in t.samples_s], bins=30, alpha=0.6, label=label)[2]
        color = patches[0].get_facecolor()[:3]
        median = f"median, {label} ({t.median_us:.1f} us)"
        ax.axvline(t.median_us, linestyle="--", color=color, linewidth=1.2, label=median)
    ax.legend()
    return table


def see_spread(run: Run) -> claims.WhatWeSee:
    """Per clock where half the samples lie (us); the host clock over the events; which spread."""
    seen, f = claims.WhatWeSee(NOTEBOOK, run), spread_facts(run)
    for label, t in run.value.items():
        (q1, q3), mean = (q * 1e6 for q in t.quartiles_s), t.mean_s
        side = "above" if mean > t.median_s else "below" if mean < t.median_s else "at"
        line = f"{label.capitalize()}: half the samples within {q1:.2f}-{q3:.2f} us, the slowest at {t.max_s * 1e6:.2f} us, {t.max_s / t.median_s:.2f} times the median; the mean ({mean * 1e6:.2f} us) sits {side} the median ({t.median_us:.2f} us)."
        seen.say(line)
    host, least = f.host_over_events.value, min(f.spread.values())
    noise = f"the noise of {len(t.samples_s)} samples each (± {2 * f.difference_noise * 100:.1f} points, by resampling)"
    whose = f"{f.wider}'" if f.wider.endswith("s") else f"{f.wider}'s"
    shares = " and ".join(f"{v:.1%} ({k})" for k, v in f.spread.items())
    spread = (
        f"the {whose} samples spread more ({f.spread[f.wider]:.1%} of their median against {least:.1%}), beyond {noise}"
        if f.beyond_noise
        else f"both spread alike within {noise}: {shares} of their medians"
    )
    words = vs_one(host, "longer", "shorter")
    seen.say(f"The host clock's median is {times(host)} the events' ({words}); here {spread}.")
    higher, sits = f.host_over_events.verdict == claims.HOLDS, f"{times(host)} the events' median"
    seen.check("the host clock's samples sit higher than the events'", higher, sits)
    pulled = all(t.mean_s > t.median_s for t in run.value.values())
    gaps = ", ".join(f"{k} {(t.mean_s - t.median_s) * 1e6:.2f} us" for k, t in run.value.items())
    said = f"mean - median: {gaps}"
    seen.check("slow samples pull each clock's mean above its median", pulled, said)
    return seen
