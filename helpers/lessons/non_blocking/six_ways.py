"""02, section 3: the tutorial's six timings, and whether ``non_blocking`` speeds copies up."""

from __future__ import annotations

from ... import analysis, claims, plotting, tables
from ...records import Run
from . import loops
from .loops import EFFECTIVE, effective_claim
from .returns import NOTEBOOK, TUTORIAL

MODES = ("blocking", "non_blocking=True")
SIDES = ((max, "pinned"), (min, "pageable"))  # the slowest pinned time against the fastest pageable
SOURCE = f"{TUTORIAL} (what you will learn)"
# how a sentence on non_blocking's speed-up ends when it holds, does not, or is borderline
NB_ENDS = (".", ", slower beyond this run's noise.", ", no change within the noise.")
COLUMNS = ["source", *((mode, unit, ".1f") for mode in MODES for unit in ("ms", "GB/s"))]
COLUMNS += [("speed-up from non_blocking", "x", ".2f")]


def speedups(run: Run) -> dict[str, claims.Value]:
    """``{source: blocking / non_blocking=True median time}`` ("x"; above 1: non_blocking faster)."""
    return {w: claims.ratio(m["blocking"], m["non_blocking=True"]) for w, m in run.value.items()}


def show(run: Run) -> tables.Table:
    """The six timings (ms, GB/s) and the speed-ups from ``non_blocking``; bars of the times."""
    six, ratio, count = run.value, speedups(run), run.params["count"]
    gb = count * run.params["numel"] * 4 / 1e9
    title = f"{count} tensors, {gb:.2f} GB to the GPU"
    title = plotting.titled(title, run)
    bars = {way: {mode: t.median_ms for mode, t in modes.items()} for way, modes in six.items()}
    plotting.grouped_bars(bars, title=title, ylabel="time for all copies (ms, median)")
    cells = {
        w: [v for mode in MODES for v in (m[mode].median_ms, m[mode].gbps)] for w, m in six.items()
    }
    rows = [(way, *cells[way], ratio[way].value) for way in six]
    caption = f"{count} tensors of {run.params['numel']:.0e} float32 = {gb:.2f} GB per run; medians of {len(six['pinned']['blocking'].samples_s)} samples"
    return tables.Table(COLUMNS, rows, caption=caption)


def see(run: Run) -> claims.WhatWeSee:
    """The six ranked (ms), what non_blocking did per source, and pinning by hand vs pageable."""
    six, ratio, pin_then = run.value, speedups(run), "pin_memory() then copy"
    samples = min(len(t.samples_s) for modes in six.values() for t in modes.values())
    ranked = sorted((t.median_s, way, mode) for way, m in six.items() for mode, t in m.items())
    ranks = "; ".join(f"{way}, {mode} ({sec * 1e3:.0f} ms)" for sec, way, mode in ranked)
    line = f"From fastest to slowest (medians of {samples} samples each, so their spreads are only a rough guide): {ranks}."
    seen = claims.WhatWeSee(NOTEBOOK, run).say(line)
    for way, r in ratio.items():
        end = claims.worded(claims.compare(r, 1, holds_if="above").verdict, *NB_ENDS)
        line = f"{way}: the `non_blocking=True` loop ran {analysis.times(r)} as fast as the blocking one{end}"
        seen.say(line)
    for mode in MODES:
        by_hand = claims.ratio(six["pageable"][mode], six[pin_then][mode])
        verdict = claims.compare(by_hand, 1, holds_if="above").verdict
        paid, not_paid = ": the staging by hand paid here.", ": it did not pay here."
        end = claims.worded(verdict, paid, not_paid, ": the same within the noise.")
        line = f"Pinning by hand, {mode}: `pin_memory()` then copy ran {analysis.times(by_hand)} as fast as the pageable copy{end}"
        seen.say(line)
    slowest, fastest = (f(t.median_ms for t in six[w].values()) for f, w in SIDES)
    said = f"slowest pinned {slowest:.0f} ms, fastest pageable {fastest:.0f} ms"
    statement = "pinned copies are faster than pageable ones, in either mode"
    seen.check(statement, slowest < fastest, said)
    what = f"{run.params['count']} x {run.params['numel'] * 4 / 1e6:g} MB, pageable"
    effective = claims.compare(ratio["pageable"], EFFECTIVE, holds_if="above")
    said = claims.stated(claims.judged(effective, run, NOTEBOOK, effective_claim(what)), run)
    line = f"Whether `non_blocking=True` helps from pageable memory ({analysis.times(ratio['pageable'])}; we expected little) is judged in the claims table below, above {EFFECTIVE:g}x counting as effective: **{said}**."
    seen.say(line)
    gains = claims.compare(ratio[pin_then], 1, holds_if="above").verdict == claims.HOLDS
    said = analysis.times(ratio[pin_then])
    seen.check("`pin_memory()` then copy gains from `non_blocking=True`", gains, said)
    return seen


def add_claims(table: claims.ClaimsTable, run_small: Run, run_six: Run) -> None:
    """Whether ``non_blocking=True`` speeds transfers up: section 2's loop and two of the six."""
    six, count, mb = speedups(run_six), run_six.params["count"], run_six.params["numel"] * 4 / 1e6
    for what, speedup, its_run in (
        (loops.what(run_small), loops.facts(run_small).speedup, run_small),
        (f"{count} x {mb:g} MB, pageable", six["pageable"], run_six),
        (f"{count} x {mb:g} MB, pinned", six["pinned"], run_six),
    ):
        effective = claims.compare(speedup, EFFECTIVE, holds_if="above")
        claim = effective_claim(what)
        measured = f"non-blocking loop this many times as fast as the blocking one (counted effective {effective.in_words()})"
        table.add(claim, source=SOURCE, measured=measured, holds=effective, run=its_run)
