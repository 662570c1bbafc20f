"""Section 4 of notebook 01: the tutorial's statements across sizes on the host clock (ms), the
two clocks compared, and its claims "up to twice as slow", "in rare cases faster", "pays off"."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, plotting, tables, timing
from ...records import Run
from . import timer
from .common import NOTEBOOK, TUTORIAL, MiB, few_note, noisy_words, seen, us_words

NB, EMPTY = ".pin_memory().to(non_blocking=True)", "an empty pinned cache"
TIMED = {  # each statement's key: its name in the figure, its column in the table
    "pageable_to": ("pageable .to()", "pageable .to()"),
    "pinned_to": ("pinned .to()", "pinned .to()"),
    "pin_memory": (".pin_memory()", "pin_memory()"),
    "pin_then_to": (".pin_memory().to()", "pin_memory().to()"),
    "pin_then_to_nb": (NB, "pin_memory().to(nb)"),
    "pin_then_to_nb_cold": (f"{NB}, empty pinned cache", "same, empty cache"),
}
FORMS = {  # the pin-then-copy forms against the pageable copy: column, legend, marker
    "pin_then_to": ("pin().to() / pageable", ".pin_memory().to() / pageable .to()", "o"),
    "pin_then_to_nb": ("pin().to(nb) / pageable", f"{NB} / pageable .to()", "s"),
    "pin_then_to_nb_cold": ("same, empty cache", f"the same with {EMPTY} (first call)", "^"),
}
STARTS = {  # each form's sentence on its crossing
    "pin_then_to": "With a warm cache, the ratio of `pin_memory().to()`'s time to a pageable `.to()`'s",
    "pin_then_to_nb": "With `non_blocking=True` it",
    "pin_then_to_nb_cold": "With the cache emptied before each call it",
}
SIZE_RANGES = [
    ("below 1 MiB", 0, MiB),
    ("1 MiB to 64 MiB", MiB, 64 * MiB),
    ("64 MiB and up", 64 * MiB, math.inf),
]
RANGE_CHOICES = [label for label, _, _ in SIZE_RANGES] + ["never"]
CASES = {"warm cache": "pin_then_to_nb", "empty cache": "pin_then_to_nb_cold"}
TIMED_PARTS = ("pin_memory", "pinned_to", "pin_then_to")  # the two parts, then the whole
UNCACHED = 20  # a warm pin_memory() this many times slower than the pinned copy was not served by the cache
RARE = 0.25  # "in rare cases": at no more than this share of the sizes measured
RARE_CLAIM = "pin_memory() (a new pinned storage) followed by the copy can, in rare cases, be faster than the driver's chunked copy from pageable memory [{}]"
TWICE_AT = f"{timer.TWICE} [{{}}, host clock]"  # in one size range and cache
PAYS_CLAIM = "Pinning pays off for large tensors"
CLOCKS = (  # the statements compared under the two clocks: name, the Timer's, the sweep's key
    ("The pageable copy", timer.PAGEABLE, "pageable_to"),
    ("`pin_memory()`", timer.PIN, "pin_memory"),
    ("`pin_memory().to()`", timer.PIN_TO, "pin_then_to"),
)
TIMER_RATE = (  # the pageable copy's rate under the Timer over the host clock's, in words
    "faster under the Timer, beyond the noise",
    "the same within the noise",
    "slower under the Timer, beyond the noise",
)
PIPELINED = (  # the blocking form's time over the non-blocking one's, in words
    "so the non-blocking calls were shorter: the pipelining above.",
    "the same within the noise: no gain from pipelining shows at this size.",
    "so the non-blocking calls were longer: no gain from pipelining at this size.",
)
PLOTS = (  # each axis: its y label and title
    ("time per call (ms, median, host clock)", "time per call"),
    ("ratio of times (below 1: pinning pays)", "pin-then-copy vs pageable copy"),
)
EXPECTED = "pin-then-copy loses at small sizes and wins at large ones"  # the section's "what we expect", checked in see()


@dataclass(frozen=True)
class Sweep:
    """By size: median ms and GB/s per ``TIMED`` key, ratio to the pageable copy per ``FORMS`` key."""

    sizes: list[int]  # bytes
    ms: dict[str, list[float]]
    gbps: dict[str, list[float]]
    ratio: dict[str, list[float]]
    fewest: int  # samples of any timing
    first: int | None  # where a warm pin_memory().to() starts to beat the pageable copy for good
    crossing: float | None  # and where it crosses 1, interpolated (``crossover_size``)
    exceed: list[int]  # sizes where a warm pin_memory() alone took longer than pin_memory().to()
    uncached: list[int]  # indices where it took ``UNCACHED`` times the pinned copy or more


def facts(run: Run) -> Sweep:
    rows = run.value["rows"]
    ms = {key: [row[key].median_ms for row in rows] for key in TIMED}
    gbps = {key: [row[key].gbps for row in rows] for key in TIMED}
    ratio = {key: [a / b for a, b in zip(ms[key], ms["pageable_to"], strict=True)] for key in FORMS}
    fewest, sizes = min(len(t.samples_s) for row in rows for t in row.values()), run.value["sizes"]
    alone_and_whole = zip(sizes, ms["pin_memory"], ms["pin_then_to"], strict=True)
    exceed = [n for n, alone, whole in alone_and_whole if alone > whole]
    pins = zip(ms["pin_memory"], ms["pinned_to"], strict=True)
    uncached = [i for i, (pin, pinned) in enumerate(pins) if pin > UNCACHED * pinned]
    crossing = crossover_size(sizes, ratio["pin_then_to"])
    return Sweep(sizes, ms, gbps, ratio, fewest, *crossing, exceed, uncached)


def crossover_size(sizes: list[int], ratios: list[float]) -> tuple[int | None, float | None]:
    """Where a ratio drops below 1 for good: (the first measured size from which it stays below,
    the crossing interpolated in log(size), log(ratio)); (None, None) if the last is 1 or more."""
    if not sizes or len(sizes) != len(ratios):
        raise ValueError("crossover_size needs equally long, non-empty lists of sizes and ratios")
    if ratios[-1] >= 1:
        return None, None
    k = len(ratios) - 1
    while k > 0 and ratios[k - 1] < 1:
        k -= 1
    if k == 0:
        return sizes[0], float(sizes[0])
    x0, x1 = math.log2(sizes[k - 1]), math.log2(sizes[k])
    y0, y1 = math.log(ratios[k - 1]), math.log(ratios[k])
    return sizes[k], 2 ** (x0 + (0 - y0) * (x1 - x0) / (y1 - y0))


def range_of(nbytes: float | None) -> str:
    """The ``SIZE_RANGES`` label that holds a size, or 'never' for None."""
    if nbytes is None:
        return "never"
    return next(label for label, low, high in SIZE_RANGES if low <= nbytes < high)


def crossover_range(run: Run) -> str:
    """The range in which a warm ``pin_memory().to()`` starts to beat a pageable copy for good."""
    return range_of(facts(run).crossing)


def show(run: Run) -> None:
    """Times (ms), ratios and pin_memory()'s GB/s by size, uncached notes, and their plots."""
    f, title = facts(run), plotting.titled("time per call", run)
    columns = [("size", "", timing.format_bytes)] + [(c, "ms", ".3f") for _, c in TIMED.values()]
    columns += [(c, "x", ".2f") for c, _, _ in FORMS.values()] + [("pin_memory()", "GB/s", ".2f")]
    values = [*(f.ms[k] for k in TIMED), *(f.ratio[k] for k in FORMS), f.gbps["pin_memory"]]
    rows = [(n, *[v[i] for v in values]) for i, n in enumerate(f.sizes)]
    caption = "median time per call, synchronised host clock; nb = non_blocking=True"
    display(tables.Table(columns, rows, title=title, caption=caption))
    # from the cache, pin_memory() is a CPU copy, within a small factor of the DMA
    for i in f.uncached:
        n, (pin, pinned, whole) = f.sizes[i], (f.ms[k][i] for k in TIMED_PARTS)
        affected = "include that" if whole >= pin else "were not affected"
        note = f"note: at {timing.format_bytes(n)} a warm pin_memory() alone took {pin:.3f} ms per call, {pin / pinned:.0f} times as long as the pinned copy itself: most likely the cache did not serve it and each call asked the driver for new page-locked memory; pin_memory().to() took {whole:.3f} ms at the same size, so its ratios {affected}"
        print(note)
    _, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(13, 4.5))
    for key, (name, _) in TIMED.items():
        ax_t.plot(f.sizes, f.ms[key], marker="o", label=name)
    for key, (_, name, marker) in FORMS.items():
        ax_r.plot(f.sizes, f.ratio[key], marker=marker, label=name)
    ax_r.axhline(1, color="grey", linestyle="--", label="1: break-even")
    ax_r.axhline(2, color="red", linestyle=":", label="2: 'up to twice as slow'")
    for ax, (ylabel, what) in zip((ax_t, ax_r), PLOTS, strict=True):
        ax.set_ylabel(ylabel)
        ax.set_title(plotting.titled(what, run))
        plotting.size_axis(ax, label="tensor size (bytes, binary prefixes)")
        plotting.log_axis(ax, "y")
        ax.grid(True, which="both", alpha=0.3)
        if f.crossing is not None:
            label = f"pinning pays from about {timing.format_bytes(round(f.crossing))}"
            ax.axvline(f.crossing, color="green", alpha=0.6, label=label)
        ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()


def crossing_words(sizes: list[int], ratios: list[float]) -> str:
    """Where a ratio curve (pinned way / pageable way) crosses 1 for good, in words."""
    first, at = crossover_size(sizes, ratios)
    if first is None or at is None:
        never = "is at or above 1 at every size" if min(ratios) >= 1 else "never stays below 1"
        return f"{never} (ratio {min(ratios):.3g} to {max(ratios):.3g}; {ratios[-1]:.3g} at the largest size)"
    slower, below = (
        sum(r >= 1 for n, r in zip(sizes, ratios, strict=True) if n < first),
        sizes.index(first),
    )
    if not below:  # below 1 from the smallest size: it never crosses
        return f"is below 1 at every size (ratio {min(ratios):.3g} to {max(ratios):.3g})"
    every = "the one smaller size" if below == 1 else f"all {below} smaller sizes"
    at_slower = every if slower == below else f"{slower} of the {below} smaller sizes"
    return f"is below 1 at every size from {timing.format_bytes(first)} on and at or above 1 at {at_slower}; it crosses 1 at about {timing.format_bytes(round(at))}"


def parts_at(f: Sweep, i: int) -> str:
    """pin_memory() plus the pinned copy, against the pageable copy, at the i-th size."""
    (pin, pinned, whole), page = (f.ms[k][i] for k in TIMED_PARTS), f.ms["pageable_to"][i]
    gbps = {k: f"{f.gbps[k][i]:.3g} GB/s" for k in ("pin_memory", "pinned_to", "pageable_to")}
    fails, guess = "", pin + pinned < page  # the first guess, against the measured statement
    if guess != (whole < page):
        fails = f": the sum says pinning {'pays' if guess else 'does not pay'} here, the measured statement says it {'does not' if guess else 'does'}"
    return f"at {timing.format_bytes(f.sizes[i])}, `pin_memory()` ({pin:.3f} ms, {gbps['pin_memory']}) plus the pinned copy ({pinned:.3f} ms, {gbps['pinned_to']}) make {pin + pinned:.3f} ms, against {page:.3f} ms for the pageable copy ({gbps['pageable_to']}); `pin_memory().to()` measured {whole:.3f} ms{fails}"


def see(run: Run) -> claims.WhatWeSee:
    """Each form's crossing, the parts either side of it (ms, GB/s), parts against the whole."""
    f, size = facts(run), timing.format_bytes
    k = len(f.sizes) - 1 if f.first is None else f.sizes.index(f.first)
    sides = f"At the largest size, {parts_at(f, k)}."
    if f.first is not None:
        sides = f"On either side of the crossing, {'; '.join(parts_at(f, i) for i in (k - 1, k) if i >= 0)}."
    whole = "At every size `pin_memory()` timed alone took less than `pin_memory().to()`, which contains it."
    if f.exceed:
        whole = f"At {len(f.exceed)} of the {len(f.sizes)} sizes ({', '.join(map(size, f.exceed))}) a warm `pin_memory()` timed alone took longer than `pin_memory().to()`, which contains it: parts timed apart do not add up to the statement, so their sum is a guide and the crossing is read from the measured ratio."
    big, said = [i for i, n in enumerate(f.sizes) if n >= MiB], [sides, whole]
    missed = [i for i in big if i in f.uncached]
    if served := [i for i in big if i not in missed]:
        pins, pages = ([f.gbps[key][i] for i in served] for key in ("pin_memory", "pageable_to"))
        rates = f"From 1 MiB up a warm `pin_memory()` copies at {min(pins):.3g} GB/s ({size(f.sizes[served[pins.index(min(pins))]])}) to {max(pins):.3g} GB/s ({size(f.sizes[served[pins.index(max(pins))]])}), {max(pins) / min(pins):.2g} times apart, while the pageable copy runs at {min(pages):.3g} to {max(pages):.3g} GB/s"
        left = f"; left out: {', '.join(size(f.sizes[i]) for i in missed)}, where it took more than {UNCACHED} times as long as the pinned copy (the note under the table)"
        said.append(rates + (left if missed else "") + ".")
    few = f"Each time is the median of as few as {f.fewest} samples at the largest sizes."
    said.append(few if f.fewest < analysis.FEW_SAMPLES else "")
    ends = f.ratio["pin_then_to"][0], f.ratio["pin_then_to"][-1]
    measured = f"the warm pin-then-copy / pageable ratio is {ends[0]:.3g} at {size(f.sizes[0])} and {ends[1]:.3g} at {size(f.sizes[-1])}"
    return seen(
        run,
        *(f"{go} {crossing_words(f.sizes, f.ratio[key])}." for key, go in STARTS.items()),
        *said,
        noisy_words(f.sizes, run.value["rows"], {k: f"`{n}`" for k, (n, _) in TIMED.items()}),
        check=(EXPECTED, ends[0] > 1 > ends[1], measured),
    )


def see_two_clocks(run_tut: Run, run_pin: Run) -> claims.WhatWeSee:
    """The Timer against the host clock at the sweep's size nearest the tutorial's (us, GB/s)."""
    tut, sizes, numel = run_tut.value, run_pin.value["sizes"], run_tut.params["numel"]
    near = min(range(len(sizes)), key=lambda i: abs(math.log(sizes[i] / (numel * 4))))
    row, size = run_pin.value["rows"][near], timing.format_bytes
    page, pin, nb = (row[k] for k in ("pageable_to", "pin_then_to", "pin_then_to_nb"))
    timer_rate, clock_rate = (claims.measured(t, as_rate=True) for t in (tut[timer.PAGEABLE], page))
    pageable = claims.compare(claims.ratio(timer_rate, clock_rate), 1, holds_if="above")  # per byte
    blocking, nonblocking = claims.ratio(pin, page), claims.ratio(nb, page)
    gain = claims.compare(claims.ratio(pin, nb), 1, holds_if="above")
    r2 = timer.ratio(run_tut).value
    flag = f"At {size(sizes[near])} a warm `pin_memory()` on the host clock took more than {UNCACHED} times as long as the pinned copy: the note under section 4's table flags that size (most likely not served from the cache) and section 4's `pin_memory()` rates leave it out, so read its host-clock time above with that flag."
    return seen(
        run_pin,
        f"The sweep's size nearest to the tutorial's {numel:,} float32 ({size(numel * 4)}) is {size(sizes[near])} ({sizes[near] / numel / 4:.2f} times as many bytes).",
        *(
            f"{name} took {us_words(tut[statement])} under the Timer (section 3) and {us_words(row[key])} on the host clock (section 4), {tut[statement].gbps:.3g} against {row[key].gbps:.3g} GB/s."
            for name, statement, key in CLOCKS
        ),
        flag if near in facts(run_pin).uncached else "",
        f"So even the pageable copy, which the two differences above should not touch, ran at {analysis.times(pageable.value)} its host-clock rate under the Timer: {analysis.in_words(pageable, *TIMER_RATE)}; each clock's ratios are read against the pageable copy timed by the same clock.",
        f"The claim's ratio, pin-then-copy's time over the pageable copy's, is {analysis.times(r2)} under the Timer{few_note(r2.samples)}, {analysis.times(blocking)} on the host clock with the blocking statement and {analysis.times(nonblocking)} with `non_blocking=True`.",
        f"Back to back, the non-blocking form took {us_words(nb)} per call against {us_words(pin)} for the blocking one: the blocking form took {analysis.times(gain.value)} the non-blocking form's time, {analysis.in_words(gain, *PIPELINED)}",
    )


def nonblocking_ratios(run: Run) -> dict[str, list[claims.Value]]:
    """Per ``CASES`` key, t(pin_memory().to(non_blocking=True)) / t(pageable .to()) per size."""
    rows = run.value["rows"]
    return {case: [claims.ratio(r[k], r["pageable_to"]) for r in rows] for case, k in CASES.items()}


def range_verdict(
    ratios: list[claims.Value],
    run: Run | None = None,
    label: str = "",
    sizes: list[int] | None = None,
) -> tuple[claims.Comparison, str]:
    """ "Up to twice as slow" in one size range: (comparison, words) for its worst ratio, judged
    with the recorded runs of ``run``'s kind for ``label``; ``sizes``: the ratios' (bytes)."""
    if not ratios:
        raise ValueError("range_verdict needs the ratios of at least one size")
    worst = max(ratios, key=lambda r: r.value)
    comparison = claims.judged(claims.within(worst, 1, 2), run, NOTEBOOK, TWICE_AT.format(label))
    places, words = worst.decimals(), timer.twice_words(comparison)
    low, above = min(r.value for r in ratios), sum(r.value > 1 for r in ratios)
    above_1 = "all" if above == len(ratios) else str(above) if above else "none"
    at = f" at {timing.format_bytes(sizes[ratios.index(worst)])}" if sizes else ""
    span = f"ratios {low:.{places}f} to {worst.value:.{places}f} over {len(ratios)} sizes, {above_1} of them above 1, the worst {analysis.times(worst)}{few_note(worst.samples)}{at}"
    if len(ratios) == 1:  # quick mode: one size in the range
        span = f"one size{at}, ratio {analysis.times(worst)}{few_note(worst.samples)}"
    which = "the ratio" if len(ratios) == 1 else "the worst ratio"
    worst_is = f"{which} is " if comparison.verdict == claims.BORDERLINE else ""
    return comparison, f"{span}: {worst_is}{words}"


def twice_as_slow_verdicts(run: Run) -> dict[str, tuple[claims.Comparison, str]]:
    """{"<size range>, <warm|empty> cache": ``range_verdict``} for each size range measured."""
    sizes, verdicts = run.value["sizes"], {}
    for case, values in nonblocking_ratios(run).items():
        for label, low, high in SIZE_RANGES:
            inside = [(n, v) for n, v in zip(sizes, values, strict=True) if low <= n < high]
            if inside:  # quick mode measures fewer sizes
                ns, ratios = (list(x) for x in zip(*inside, strict=True))
                verdicts[f"{label}, {case}"] = range_verdict(ratios, run, f"{label}, {case}", ns)
    return verdicts


def show_twice_as_slow(run_tut: Run, run_pin: Run) -> tables.Table:
    """Every verdict on "up to twice as slow", with the ratios each rests on. Returns the table."""
    tutorial = timer.ratio(run_tut)
    title = plotting.titled(f"'{timer.TWICE}'", run_pin)
    caption = "ratio: t(pin-then-copy) / t(pageable .to()); the claim holds between 1 and 2"
    columns = ["sizes", "statement and clock", "pinned cache", "the ratios", "verdict"]
    table = tables.Table(columns, bold=["verdict"], title=title, caption=caption)
    words = f"{analysis.times(tutorial.value)}{few_note(tutorial.value.samples)}: {timer.twice_words(tutorial, one=True)}"
    numel, verdict = run_tut.params["numel"], claims.stated(tutorial, run_tut)
    statement = "pin_memory().to() (blocking), the tutorial's Timer"
    table.add(f"{numel:,} float32", statement, "warm", words, verdict)
    for label, (comparison, words) in twice_as_slow_verdicts(run_pin).items():
        sizes, case = label.split(", ")
        statement = "pin_memory().to(non_blocking=True), host clock"
        table.add(sizes, statement, case.split()[0], words, claims.stated(comparison, run_pin))
    return table


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "Up to twice as slow" per range and cache, "in rare cases faster" per cache, "pays off"."""
    source, sizes = f"{TUTORIAL} (what you will learn)", run.value["sizes"]
    for label, (comparison, words) in twice_as_slow_verdicts(run).items():
        measured = f"the worst t(pin_memory().to(non_blocking=True)) / t(pageable .to()) in the range: {words}; holds {comparison.in_words()}"
        claim = TWICE_AT.format(label)
        table.add(claim, source=source, measured=measured, holds=comparison, run=run)
    for case, values in nonblocking_ratios(run).items():
        best = min(range(len(values)), key=lambda i: values[i].value)
        faster = [claims.compare(v, 1, holds_if="below") for v in values]
        wins = sum(c.verdict == claims.HOLDS for c in faster)
        # "can be faster": at one size at least; "in rare cases": at no more than RARE of the sizes
        share = claims.Value(wins / len(values), unit=f"of {len(values)} sizes")
        rare = claims.compare(share, RARE, holds_if="below")
        name, decisive = analysis.weakest({"faster somewhere": faster[best], "rare": rare})
        measured = f"t(pin_memory().to(non_blocking=True)) / t(pageable .to()): smallest {values[best].number()} at {timing.format_bytes(sizes[best])} (faster: {faster[best].in_words()}); faster beyond this run's noise at {wins} of {len(values)} sizes ('rare': at most {RARE:.0%} of them); shown: {name}"
        claim = RARE_CLAIM.format(case)
        table.add(claim, source=TUTORIAL, measured=measured, holds=decisive, run=run)
    last = run.value["rows"][-1]
    ratio = claims.ratio(last["pin_then_to"], last["pageable_to"])
    pays = claims.compare(ratio, 1, holds_if="below")
    measured = f"t(pin_memory().to()) / t(pageable .to()) at the largest size, {timing.format_bytes(sizes[-1])}, warm cache; pays: {pays.in_words()}"
    table.add(PAYS_CLAIM, source=f"{TUTORIAL} (advice)", measured=measured, holds=pays, run=run)
