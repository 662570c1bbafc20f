"""02, the end of section 5: the tutorial's Timer (one CPU thread) on the loops of sections 2, 3
and 5, beside the synchronised host clock those sections use."""

from __future__ import annotations

from dataclasses import dataclass

from ... import analysis, claims, exercises, tables, timing
from ...records import Run
from .returns import NOTEBOOK
from .six_ways import MODES

SECTIONS = {"small copies": 2, "synergies": 3, "tensordict": 5}  # the Timer run's keys
SYNERGIES = {  # the tutorial's statement: section 3's (source, mode)
    "copy_to_device(*tensors)": ("pageable", "blocking"),
    "copy_to_device_nonblocking(*tensors)": ("pageable", "non_blocking=True"),
    "copy_to_device(*tensors_pinned)": ("pinned", "blocking"),
    "copy_to_device_nonblocking(*tensors_pinned)": ("pinned", "non_blocking=True"),
    "pin_copy_to_device(*tensors)": ("pin_memory() then copy", "blocking"),
    "pin_copy_to_device_nonblocking(*tensors)": ("pin_memory() then copy", "non_blocking=True"),
}
AGREES = {  # (no speed-up under the Timer, no speed-up under the host clock): the choice
    (True, True): "both",
    (True, False): "the Timer (one thread)",
    (False, True): "the host clock",
    (False, False): "neither",
}
PAID = ("paid", "did not pay", "made no difference beyond the noise")  # pinning by hand, worded
PINS = (  # the statements that pin on the main thread: a CPU copy per tensor there
    "pin_copy_to_device(*tensors)",
    "pin_copy_to_device_nonblocking(*tensors)",
    "td.to('cuda:0', non_blocking_pin=True, num_threads=0)",
)


@dataclass(frozen=True)
class BothClocks:
    """One of the tutorial's statements, timed by its Timer and by our section's host clock."""

    section: int
    statement: str
    timer: timing.Timing
    ours: timing.Timing

    @property
    def ratio(self) -> claims.Value:
        """Timer over host clock ("x"; above 1: longer under the Timer's one thread)."""
        return claims.ratio(self.timer, self.ours)

    @property
    def pins(self) -> bool:
        """It pins on the main thread."""
        return self.statement in PINS


def pairs(timers: Run, small: Run, six: Run, td: Run) -> list[BothClocks]:
    """Every statement the Timer ran, with the host clock's timing of it, in the tutorial's order."""
    ours = {
        "small copies": {
            "copy_to_device(*tensors)": small.value["blocking"]["time"],
            "copy_to_device_nonblocking(*tensors)": small.value["non_blocking"]["time"],
        },
        "synergies": {s: six.value[way][mode] for s, (way, mode) in SYNERGIES.items()},
        "tensordict": td.value["timings"],
    }
    return [
        BothClocks(number, statement, timed, ours[key][statement])
        for key, number in SECTIONS.items()
        for statement, timed in timers.value[key].items()
    ]


def _note(timers: Run, *host_clock: Run) -> str:
    """Where one of the host clock's runs comes from another machine than the Timer's: which."""
    other = next((r for r in host_clock if r.machine != timers.machine), host_clock[0])
    return timers.apart_from(other, "the Timer's", "the host clock's")


def show(timers: Run, small: Run, six: Run, td: Run) -> tables.Table:
    """Each statement: the Timer's median (ms) and samples, the host clock's, and their ratio."""
    columns: list = ["section", "statement", ("Timer, 1 thread", "ms", ".2f"), "Timer samples"]
    columns += [(f"host clock, {timers.value['threads']} threads", "ms", ".2f")]
    columns += [("Timer / host clock", "", analysis.times)]  # the ratio with its spread
    caption = f"medians; each of the Timer's adaptive_autorange samples is one block of calls{_note(timers, small, six, td)}"
    table = tables.Table(columns, caption=caption)
    for p in pairs(timers, small, six, td):
        t = p.timer
        table.add(p.section, p.statement, t.median_ms, len(t.samples_s), p.ours.median_ms, p.ratio)
    return table


def by_hand(found: list[BothClocks]) -> dict[str, tuple[claims.Comparison, claims.Comparison]]:
    """Section 3's ``pin_memory()`` then copy against the pageable copy, per mode: how many times
    as fast (above 1: pinning by hand paid), under the Timer and under the host clock."""
    by = {SYNERGIES[p.statement]: p for p in found if p.section == SECTIONS["synergies"]}

    def judged(mode: str, clock: str) -> claims.Comparison:
        a, b = (getattr(by[way, mode], clock) for way in ("pageable", "pin_memory() then copy"))
        return claims.compare(claims.ratio(a, b), 1, holds_if="above")

    return {mode: (judged(mode, "timer"), judged(mode, "ours")) for mode in MODES}


def check_tutorial_agrees(
    answer: str | None, timers: Run, small: Run, six: Run, td: Run
) -> bool | None:
    """Exercise 4: under which clock the blocking pin-then-copy loop brought no speed-up beyond
    the noise over the pageable copy, as the tutorial says it should not."""
    if apart := _note(timers, small, six, td):
        print(
            f"Not graded on this page: the two clocks ran on two machines{apart}, so they cannot say what one machine did; this exercise is graded where one machine recorded both."
        )
        return None
    under_timer, under_ours = by_hand(pairs(timers, small, six, td))["blocking"]
    agrees = [c.verdict != claims.HOLDS for c in (under_timer, under_ours)]
    expected = AGREES[agrees[0], agrees[1]]
    hint = "read the last sentences of section 5: did pinning by hand pay with one thread, and with many?"
    return exercises.check_choice(answer, expected, choices=list(AGREES.values()), hint=hint)


def see(timers: Run, small: Run, six: Run, td: Run) -> claims.WhatWeSee:
    """Whether pinning took longer under the Timer, how far plain copies moved, pinning by hand."""
    found, see = pairs(timers, small, six, td), claims.WhatWeSee(NOTEBOOK, timers)
    pins = [p for p in found if p.pins]
    in_threads = f"td.to('cuda:0', non_blocking_pin=True, num_threads={td.params['threads']})"
    threaded = {p.statement: p for p in found}[in_threads]  # KeyError: a td run without it
    plain = [p for p in found if not p.pins and p is not threaded]
    least, most = (f(plain, key=lambda p: p.ratio.value) for f in (min, max))
    listed = "; ".join(
        f"`{p.statement}` (section {p.section}) {p.timer.median_ms:.0f} ms against {p.ours.median_ms:.0f} ms, {analysis.times(p.ratio)}"
        for p in pins
    )
    longer = all(
        claims.compare(p.ratio, 1, holds_if="above").verdict == claims.HOLDS
        and p.ratio.value > most.ratio.value
        for p in pins
    )
    statement = f"The {len(pins)} statements that pin on the main thread took longer under the Timer's one thread than under the host clock's {timers.value['threads']}, beyond the noise and by more than any statement that does not pin"
    said = f"{listed}; the most of those that do not pin: `{most.statement}` (section {most.section}), {analysis.times(most.ratio)}"
    if apart := _note(timers, small, six, td):
        see.say(
            f"Every ratio here sets one machine's Timer against another machine's host clock{apart}: it compares two machines as well as two clocks, so whether the {len(pins)} statements that pin took longer under the Timer is not checked on this page."
        )
    else:
        see.check(statement, longer, said)
    see.say(
        f"The {len(plain)} statements that do not pin came out between {analysis.times(least.ratio)} (`{least.statement}`, section {least.section}) and {analysis.times(most.ratio)} (`{most.statement}`, section {most.section}) as long under the Timer: that is how far apart the two clocks came on loops that do not pin.",
        f"tensordict's `num_threads={td.params['threads']}`, which pins in its own threads, took {analysis.times(threaded.ratio)} as long under the Timer.",
    )
    for mode, (under_timer, under_ours) in by_hand(found).items():
        paid = [claims.worded(f.verdict, *PAID) for f in (under_timer, under_ours)]
        line = f"Section 3's pinning by hand, {mode}: `pin_memory()` then copy ran {analysis.times(under_timer.value)} as fast as the pageable copy under the Timer, and {analysis.times(under_ours.value)} under the host clock: pinning by hand {paid[0]} with one thread and {paid[1]} with {timers.value['threads']}."
        see.say(line)
    few = min(len(p.timer.samples_s) for p in found)
    if analysis.few(few):
        see.say(f"Some statements' Timer medians rest on {analysis.few(few)} (its fewest).")
    return see
