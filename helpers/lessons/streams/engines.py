"""Notebook 03, section 3: the copy engines, two copies on two side streams (requirement (3))."""

from __future__ import annotations

from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, tables
from ...records import Run
from .common import DOES_NOT, NOTEBOOK, OVERLAPS, TUTORIAL, lanes_overlap, over, show_timelines
from .common import steps_note as note

TWO_ENGINES = 0.9  # overlap ratio of opposite copies above which two engines carried them
KEPT = 1.1  # together over the longer copy alone at most this: each copy "kept about its speed"
ENGINES_CLAIM = (
    "Requirement (3): a free DMA (copy) engine; H2D and D2H at once need one engine each"
)
PAIRS = ("H2D + D2H", "H2D + H2D")
SERIAL = ("H2D alone + D2H alone", "twice H2D alone")  # each pair's copies one after the other
COLUMNS = ["copies", ("median", "ms", ".3f"), ("spread (half IQR)", "ms", ".3f"), "samples"]


@dataclass(frozen=True)
class Engines:
    """Section 3's facts: engine count, copy times (s), per-pair overlap and time over serial (x)."""

    count: int | None  # the driver's copy engine count (None: unread)
    times: dict[str, claims.Value]
    both: claims.Value  # overlap ratio per step of H2D + D2H on two streams
    same: claims.Value  # the same of H2D + H2D
    both_ways: claims.Value  # H2D + D2H time over H2D alone + D2H alone
    same_way: claims.Value  # H2D + H2D time over twice H2D alone
    agree: claims.Comparison | None  # the opposite copies' overlap agrees with the count


def facts(run: Run) -> Engines:
    count, v = run.value["copy_engines"], run.value
    t = {label: claims.measured(timing) for label, timing in v["times"].items()}
    both, same = (analysis.per_step(v[p], lambda s: lanes_overlap(s, "memcpy")) for p in PAIRS)
    agree = None
    if count is not None:
        c = claims.compare(both, TWO_ENGINES, holds_if="above" if count >= 2 else "below")
        agree = claims.judged(c, run, NOTEBOOK, ENGINES_CLAIM)
    both_ways = claims.ratio(t["H2D + D2H"], analysis.added(t["H2D alone"], t["D2H alone"]))
    same_way = claims.ratio(t["H2D + H2D"], analysis.added(t["H2D alone"], t["H2D alone"]))
    return Engines(count, t, both, same, both_ways, same_way, agree)


def show(run: Run) -> None:
    """The copies' times (ms), each pair's overlap and time over serial, timelines, the check."""
    e = facts(run)
    rows = [(label, v.value * 1e3, v.spread * 1e3, v.samples) for label, v in e.times.items()]
    display(tables.Table(COLUMNS, rows, caption=f"copy engines reported by the driver: {e.count}"))
    pairs = zip(PAIRS, (e.both, e.same), (e.both_ways, e.same_way), SERIAL, strict=True)
    for pair, overlap, ratio, alone in pairs:
        line = f"{pair}: overlap ratio {overlap}{note(overlap)}; its time over that of the two copies one after the other ({alone}): {analysis.times(ratio)}"
        print(line)
    panels = {pair: run.value[pair] for pair in PAIRS}
    show_timelines(panels, "two copies on two side streams", run, include_host=False)
    agrees = "not testable here" if e.agree is None else claims.stated(e.agree, run)
    line = f"overlap of opposite copies agrees with the engine count (two or more engines: above {TWO_ENGINES:g}; one: below): {agrees}"
    print(line)


def see(run: Run) -> claims.WhatWeSee:
    """The engine count, how opposite and same-direction copies overlapped, and what that shows."""
    e, see = facts(run), claims.WhatWeSee(NOTEBOOK, run)
    count = "The driver's copy engine count could not be read."
    if e.count is not None:
        count = f"The driver reports {analysis.plural(e.count, 'copy engine')}."
    longer = max(("H2D alone", "D2H alone"), key=lambda k: e.times[k].value)
    together, alone = e.times["H2D + D2H"].value, e.times[longer].value
    own = "."
    if e.both.value >= TWO_ENGINES:  # they ran at once: did each keep its speed?
        kept = "each kept about its speed beside the other."
        if together / alone > KEPT:
            kept = (
                "each ran slower beside the other, so they shared something this run does not show."
            )
        own = f", and {together / alone:.2f} times as long as the longer of the two alone ({together * 1e3:.3f} ms against {longer.split()[0]} {alone * 1e3:.3f} ms): {kept}"
    why = "."
    if e.same.value < DOES_NOT:
        why = ": they never ran at the same time, so they could not gain, and this run cannot show whether one direction of the link would limit two copies at once."
    elif e.same.value >= OVERLAPS and e.same_way.value >= 0.9:
        why = ": they ran at once and gained little, so one direction of the link is the limit."
    waited = "did not wait, which one engine cannot explain (the check above fails)."
    if e.both.value < TWO_ENGINES:
        waited = "waited for the engine whatever its stream."
    ran = "ran one after the other" if e.same.value < DOES_NOT else "ran side by side"
    statement = "copies in opposite directions on two side streams run at the same time"
    said = f"overlap ratio {e.both}{note(e.both)}, at least {TWO_ENGINES:g} for at once"
    see.check(statement, e.both.value >= TWO_ENGINES, said)
    both = f"A host-to-device and a device-to-host copy on two side streams ran side by side for {e.both.value:.0%} of the shorter one (overlap ratio {e.both}{note(e.both)}) and together took {e.both_ways.value:.2f} times as long as the two one after the other{own}"
    see.say(count, both)
    if e.count == 1:
        one = f"With one copy engine the two directions take turns on it, so this GPU cannot show copies in opposite directions running at once; what it can show is requirement (3) itself: the second copy {waited}"
        see.say(one)
    same = f"Two host-to-device copies {ran} (overlap ratio {e.same}{note(e.same)}) and together took {e.same_way.value:.2f} times as long as the two one after the other{why}"
    return see.say(same)


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (3) on the copy engines' run."""
    e = facts(run)
    side = "two or more engines above" if (e.count or 0) >= 2 else "one engine below"
    measured = f"{e.count} copy engines; H2D + D2H on two streams: overlap ratio{over(e.both)} (agrees with {side} {TWO_ENGINES:g}); together they took {e.both_ways.value:.2f} times as long as the two one after the other"
    table.add(ENGINES_CLAIM, source=TUTORIAL, run=run, measured=measured, holds=e.agree)
