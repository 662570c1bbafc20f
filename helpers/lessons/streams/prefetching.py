"""Notebook 03, section 5: prefetching the next batch on a side stream (double buffering)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ... import analysis, claims, trace
from ...records import Run
from .common import ARTICLE, NOTEBOOK, show_timelines

NOISY = 0.1  # a loop whose samples' IQR is above this share of their median is said to be noisy


@dataclass(frozen=True)
class Prefetching:
    """Section 5's facts: one batch's copy ``c`` and compute ``k`` (s), speed-ups (x), overlap."""

    c: claims.Value
    k: claims.Value
    n: int  # batches
    speedup: claims.Value  # serial loop time over prefetching loop time
    ideal_n: claims.Value  # the best speed-up for n batches
    ideal: claims.Value  # the best for many batches
    gain_share: claims.Value  # the share of the n-batch gain obtained
    hidden_serial: float  # per loop's trace, the share of the copies' time beside a kernel
    hidden_prefetched: float


def _hidden(profile: trace.Profile) -> float:
    copies = profile.select(kind="memcpy", copy_kind="HtoD")
    return trace.overlap_us(copies, profile.select(kind="kernel")) / trace.covered_us(copies)


def facts(run: Run) -> Prefetching:
    db, n = run.value, run.params["n_batches"]
    c, k = claims.measured(db["copy"]), claims.measured(db["compute"])
    speedup = claims.ratio(db["serial"], db["prefetched"])
    ideal_n = analysis.propagated(lambda c, k: n * (c + k) / (c + (n - 1) * max(c, k) + k), c, k)
    ideal = analysis.propagated(lambda c, k: (c + k) / max(c, k), c, k)
    share = analysis.propagated(lambda s, i: (s - 1) / (i - 1), speedup, ideal_n, unit="")
    hidden = (_hidden(db[f"{loop} trace"]) for loop in ("serial", "prefetched"))
    return Prefetching(c, k, n, speedup, ideal_n, ideal, share, *hidden)


def _noisy(run: Run) -> list[str]:
    """Each loop whose samples spread over more than ``NOISY`` of their median, in words."""
    loops = (("serial", run.value["serial"]), ("prefetching", run.value["prefetched"]))
    return [
        f"the {name} loop's {len(t.samples_s)} samples spread over {t.spread:.0%} of their median ({t.min_s * 1e3:.1f} to {t.max_s * 1e3:.1f} ms)"
        for name, t in loops
        if t.spread > NOISY
    ]


def _beyond_bound(run: Run, p: Prefetching) -> str:
    """Why a speed-up above the N-batch bound is possible: what the bound rests on was off."""
    copies = run.value["prefetched trace"].select(kind="memcpy", copy_kind="HtoD")
    traced_ms = statistics.median(iv.duration_us for iv in copies) / 1e3
    copy = f"in the traced prefetching loop a copy took {traced_ms:.2f} ms (median of {len(copies)}), not the {p.c.value * 1e3:.2f} ms measured alone"
    why = [copy] if traced_ms < 0.95 * p.c.value * 1e3 else []
    why += _noisy(run)
    apart = "the copy and compute times it rests on were measured apart, and differ from the loop's"
    return ": " + "; and ".join(why or [apart])


def show(run: Run) -> None:
    """The copy, compute and loop timings, the speed-up against the best, and both timelines."""
    db, p = run.value, facts(run)
    compute = f"{db['compute']} ({db['matmuls_per_batch']} matmuls + a sum)"
    same = f"both loops give the same results: {db['same_results']}"
    print(db["copy"], compute, db["serial"], db["prefetched"], same, sep="\n")
    speedup = f"speed-up of prefetching, serial loop time / prefetching loop time: {analysis.times(p.speedup)}"
    best = f"best possible for {p.n} batches, N (c + k) / (c + (N-1) max(c, k) + k): {analysis.times(p.ideal_n)}; for many batches, (c + k) / max(c, k): {analysis.times(p.ideal)}"
    inverse = f"prefetching loop time / serial loop time: {1 / p.speedup.value:.2f}; max(c, k) / (c + k) = {1 / p.ideal.value:.2f}"
    share = f"share of the possible gain obtained, (speed-up - 1) / (best - 1): {p.gain_share}"
    if p.gain_share.value > 1:
        share = f"the speed-up is above the best possible for {p.n} batches, computed from c and k measured apart, so one side of that comparison is off{_beyond_bound(run, p)}"
    print("", speedup, best, inverse, share, sep="\n")
    panels = {f"{loop} loop": db[f"{loop} trace"] for loop in ("serial", "prefetched")}
    title = f"{p.n} batches, serial and prefetched"
    show_timelines(panels, title, run, include_host=False, unit="ms")


def see(run: Run) -> claims.WhatWeSee:
    """The same-results check, the copies' time beside compute, and the speed-up against the best."""
    db, p, see = run.value, facts(run), claims.WhatWeSee(NOTEBOOK, run)
    same = f"torch.allclose of the {p.n} sums: {db['same_results']}"
    see.check("both loops compute the same results", bool(db["same_results"]), same)
    traced = f"In the traces (one traced run of each loop) the copies ran beside the compute for {p.hidden_prefetched:.0%} of the copy time in the prefetching loop and {p.hidden_serial:.0%} in the serial loop."
    allowed = f"the copy ({p.c.value * 1e3:.2f} ms) and compute ({p.k.value * 1e3:.2f} ms) measured apart allow for {p.n} batches"
    head = f"The prefetching loop took {db['prefetched'].median_ms:.1f} ms for {p.n} batches against {db['serial'].median_ms:.1f} ms for the serial loop: a speed-up (serial time over prefetching time) of {analysis.times(p.speedup)}"
    tail = f"{p.gain_share.value:.0%} of the gain that {allowed} ({p.ideal_n.value:.2f}x), and below the many-batch limit of {p.ideal.value:.2f}x: the first copy and the last compute of the loop cannot be hidden."
    if noisy := " and ".join(_noisy(run)):
        tail += f" In this run {noisy}, so that share is {p.gain_share.value:.0%} ± {p.gain_share.spread:.0%}."
    if p.gain_share.value > 1:
        tail = f"more than the {p.ideal_n.value:.2f}x that {allowed}, so one side of that comparison is off{_beyond_bound(run, p)}."
    return see.say(traced, f"{head}, {tail}")


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The streams article's prefetching claim."""
    p, same = facts(run), run.value["same_results"]
    claim = "Copying the next batch on a second stream while computing this one improves efficiency"
    measured = f"speed-up (serial loop time over prefetching loop time) against half the gain the copy and compute measured apart allow for {p.n} batches, 1 + ({p.ideal_n.value:.2f} - 1) / 2; same results {same}"
    half_the_gain = 1 + (p.ideal_n.value - 1) / 2  # the speed-up that obtains half of it (x)
    holds = claims.compare(p.speedup, half_the_gain, holds_if="above") if same else False
    table.add(claim, source=ARTICLE, run=run, measured=measured, holds=holds)


def ideal_speedup(run: Run) -> float:
    """Exercise 1's answer: ``(c + k) / max(c, k)`` from one batch's copy and compute (x)."""
    return facts(run).ideal.value
