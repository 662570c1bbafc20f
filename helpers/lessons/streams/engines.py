"""Notebook 03, section 3: the copy engines, two copies on two side streams (requirement (3))."""

from __future__ import annotations

from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, tables
from ...records import Run
from .common import (
    DOES_NOT,
    NOTEBOOK,
    OVERLAPS,
    TUTORIAL,
    lanes_overlap,
    over,
    show_timelines,
    steps_note,
)

TWO_ENGINES = 0.9  # overlap ratio of opposite copies above which two engines carried them
ENGINES_CLAIM = (
    "Requirement (3): a free DMA (copy) engine; H2D and D2H at once need one engine each"
)
PAIRS = ("H2D + D2H", "H2D + H2D")


@dataclass(frozen=True)
class Engines:
    """The driver's copy engine count (None: unread); the four copies' times (s); per pair of
    copies the overlap ratio of its two streams' copies per step; the pairs' times over the sum
    of their copies alone (x); whether the opposite copies' overlap agrees with the count."""

    count: int | None
    times: dict[str, claims.Value]
    both: claims.Value
    same: claims.Value
    both_ways: claims.Value
    same_way: claims.Value
    agree: claims.Comparison | None


def facts(run: Run) -> Engines:
    """Section 3's numbers, computed once from a ``copy_engines`` run."""
    count = run.value["copy_engines"]
    t = {label: claims.measured(timing) for label, timing in run.value["times"].items()}
    both, same = (
        analysis.per_step(run.value[pair], lambda step: lanes_overlap(step, "memcpy"))
        for pair in PAIRS
    )
    agree = (
        None
        if count is None
        else claims.judged(
            claims.compare(both, TWO_ENGINES, holds_if="above" if count >= 2 else "below"),
            run,
            NOTEBOOK,
            ENGINES_CLAIM,
        )
    )
    return Engines(
        count,
        t,
        both,
        same,
        claims.ratio(t["H2D + D2H"], analysis.added(t["H2D alone"], t["D2H alone"])),
        claims.ratio(t["H2D + H2D"], analysis.added(t["H2D alone"], t["H2D alone"])),
        agree,
    )


def show(run: Run) -> None:
    """A table of the four copies' times (median and spread in ms, samples) under the engine
    count, each pair's overlap ratio and time over its two copies one after the other, the pairs'
    timelines, and whether the opposite copies' overlap agrees with the engine count."""
    e = facts(run)
    display(
        tables.Table(
            ["copies", ("median", "ms", ".3f"), ("spread (half IQR)", "ms", ".3f"), "samples"],
            [(label, v.value * 1e3, v.spread * 1e3, v.samples) for label, v in e.times.items()],
            caption=f"copy engines reported by the driver: {e.count}",
        )
    )
    for pair, overlap, ratio, alone in (
        (PAIRS[0], e.both, e.both_ways, "H2D alone + D2H alone"),
        (PAIRS[1], e.same, e.same_way, "twice H2D alone"),
    ):
        print(
            f"{pair}: overlap ratio {overlap}{steps_note(overlap)}; its time over that of the two "
            f"copies one after the other ({alone}): {analysis.times(ratio)}"
        )
    panels = {pair: run.value[pair] for pair in PAIRS}
    show_timelines(
        panels, "two copies on two side streams", run, list(panels.values()), include_host=False
    )
    print(
        f"overlap of opposite copies agrees with the engine count (two or more engines: above "
        f"{TWO_ENGINES:g}; one: below): "
        + ("not testable here" if e.agree is None else claims.stated(e.agree, run))
    )


def see(run: Run) -> claims.WhatWeSee:
    """The engine count, how long opposite and same-direction copies on two streams ran side by
    side, and their time as a multiple of the two copies one after the other; for the latter, what
    that can say about one direction of the link (nothing, when they never ran at once)."""
    e = facts(run)
    see = claims.WhatWeSee(NOTEBOOK, run)
    see.say(
        "The driver's copy engine count could not be read."
        if e.count is None
        else f"The driver reports {analysis.plural(e.count, 'copy engine')}."
    )
    see.say(
        f"A host-to-device and a device-to-host copy on two side streams ran side by side for "
        f"{e.both.value:.0%} of the shorter one (overlap ratio {e.both}{steps_note(e.both)}) and "
        f"together took {e.both_ways.value:.2f} times as long as the two one after the other"
        + (
            ": each direction had its own engine and its own direction of the link."
            if e.both.value >= TWO_ENGINES and e.both_ways.value < 0.8
            else "."
        )
    )
    if e.same.value < DOES_NOT:
        why = (
            ": they never ran at the same time, so they could not gain, and this run cannot show "
            "whether one direction of the link would limit two copies at once."
        )
    elif e.same.value >= OVERLAPS and e.same_way.value >= 0.9:
        why = ": they ran at once and gained little, so one direction of the link is the limit."
    else:
        why = "."
    if e.count == 1:
        see.say(
            "With one copy engine the two directions take turns on it, so this GPU cannot show "
            "copies in opposite directions running at once; what it can show is requirement (3) "
            "itself: the second copy "
            + (
                "waited for the engine whatever its stream."
                if e.both.value < TWO_ENGINES
                else "did not wait, which one engine cannot explain (the check above fails)."
            )
        )
    see.say(
        f"Two host-to-device copies {'ran one after the other' if e.same.value < DOES_NOT else 'ran side by side'} "
        f"(overlap ratio {e.same}{steps_note(e.same)}) and together took {e.same_way.value:.2f} "
        f"times as long as the two one after the other{why}"
    )
    return see


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (3) on the copy engines' run."""
    e = facts(run)
    side = "two or more engines above" if (e.count or 0) >= 2 else "one engine below"
    table.add(
        ENGINES_CLAIM,
        source=TUTORIAL,
        run=run,
        measured=f"{e.count} copy engines; H2D + D2H on two streams: overlap ratio{over(e.both)} "
        f"(agrees with {side} {TWO_ENGINES:g}); together they took {e.both_ways.value:.2f} times "
        "as long as the two one after the other",
        holds=e.agree,
    )
