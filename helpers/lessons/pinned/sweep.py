"""Section 4 of notebook 01: the tutorial's statements timed across sizes on a synchronised host
clock: where pinning first pays, the Timer and the host clock compared at the tutorial's size,
and the tutorial's claims "up to twice as slow" (per size range), "in rare cases faster" and
"pinning pays off for large tensors"."""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, plotting, tables, timing
from ...records import Run
from . import timer

NOTEBOOK = "01_pinned_memory"
MiB = 2**20
TIMED = {  # each statement's key: its name in the figure, its column in the table
    "pageable_to": ("pageable .to()", "pageable .to()"),
    "pinned_to": ("pinned .to()", "pinned .to()"),
    "pin_memory": (".pin_memory()", "pin_memory()"),
    "pin_then_to": (".pin_memory().to()", "pin_memory().to()"),
    "pin_then_to_nb": (".pin_memory().to(non_blocking=True)", "pin_memory().to(nb)"),
    "pin_then_to_nb_cold": (
        ".pin_memory().to(non_blocking=True), empty pinned cache",
        "same, empty cache",
    ),
}
FORMS = {  # the pin-then-copy forms against the pageable copy: column, legend, marker, sentence
    "pin_then_to": ("pin().to() / pageable", ".pin_memory().to() / pageable .to()", "o"),
    "pin_then_to_nb": (
        "pin().to(nb) / pageable",
        ".pin_memory().to(non_blocking=True) / pageable .to()",
        "s",
    ),
    "pin_then_to_nb_cold": (
        "same, empty cache",
        "the same with an empty pinned cache (first call)",
        "^",
    ),
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
RARE_CLAIM = (
    "pin_memory() (a new pinned storage) followed by the copy can, in rare cases, be faster than "
    "the driver's chunked copy from pageable memory [{}]"
)
PAYS_CLAIM = "Pinning pays off for large tensors"
RARE = 0.25  # "in rare cases": at no more than this share of the sizes measured


@dataclass(frozen=True)
class Sweep:
    """Sizes (bytes); per ``TIMED`` key the median ms per call and GB/s per size; per ``FORMS``
    key the ratio of times to the pageable copy per size; the fewest samples of any timing."""

    sizes: list[int]
    ms: dict[str, list[float]]
    gbps: dict[str, list[float]]
    ratio: dict[str, list[float]]
    fewest: int

    def parts_exceed_whole(self) -> list[int]:
        """Sizes where a warm ``pin_memory()`` alone took longer than ``pin_memory().to()``."""
        pin, whole = self.ms["pin_memory"], self.ms["pin_then_to"]
        return [n for n, a, b in zip(self.sizes, pin, whole, strict=True) if a > b]


def facts(run: Run) -> Sweep:
    rows = run.value["rows"]
    ms = {key: [row[key].median_ms for row in rows] for key in TIMED}
    return Sweep(
        run.value["sizes"],
        ms,
        {key: [row[key].gbps for row in rows] for key in TIMED},
        {key: [a / b for a, b in zip(ms[key], ms["pageable_to"], strict=True)] for key in FORMS},
        min(len(t.samples_s) for row in rows for t in row.values()),
    )


def crossover_size(sizes: list[int], ratios: list[float]) -> tuple[int | None, float | None]:
    """Where a ratio (pinned way / pageable way) drops below 1 for good: (the first measured size
    from which it stays below 1, the crossing interpolated linearly in log(size) and log(ratio)
    from the size before); (None, None) when the largest size still has a ratio of 1 or more."""
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
    """The range (of ``RANGE_CHOICES``) in which a warm ``pin_memory().to()`` starts to beat a
    pageable ``.to()`` for good, by the interpolated crossing; 'never' if it still loses at the end."""
    f = facts(run)
    return range_of(crossover_size(f.sizes, f.ratio["pin_then_to"])[1])


def show(run: Run) -> None:
    """A table of the times (ms), ratios and ``pin_memory()``'s GB/s by size, a note where a warm
    ``pin_memory()`` was not served by the cache, and the times and ratios against size."""
    f, title = facts(run), plotting.machine_title("time per call", run.machine, run.live)
    columns = [("size", "", timing.format_bytes)] + [(c, "ms", ".3f") for _, c in TIMED.values()]
    columns += [(c, "x", ".2f") for c, _, _ in FORMS.values()] + [("pin_memory()", "GB/s", ".2f")]
    rows = [
        (n, *[f.ms[k][i] for k in TIMED], *[f.ratio[k][i] for k in FORMS], f.gbps["pin_memory"][i])
        for i, n in enumerate(f.sizes)
    ]
    caption = "median time per call, synchronised host clock; nb = non_blocking=True"
    display(tables.Table(columns, rows, title=title, caption=caption))
    # from the cache, pin_memory() is a CPU copy, within a small factor of the DMA
    for n, pin, pinned, whole in zip(f.sizes, *(f.ms[k] for k in TIMED_PARTS), strict=True):
        if pin > UNCACHED * pinned:
            print(
                f"note: at {timing.format_bytes(n)} a warm pin_memory() alone took {pin:.3f} ms "
                f"per call, {pin / pinned:.0f} times as long as the pinned copy itself: most likely "
                "the cache did not serve it and each call asked the driver for new page-locked "
                f"memory; pin_memory().to() took {whole:.3f} ms at the same size, so its ratios "
                + ("include that" if whole >= pin else "were not affected")
            )
    crossover = crossover_size(f.sizes, f.ratio["pin_then_to"])[1]
    _, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(13, 4.5))
    for key, (name, _) in TIMED.items():
        ax_t.plot(f.sizes, f.ms[key], marker="o", label=name)
    for key, (_, label, marker) in FORMS.items():
        ax_r.plot(f.sizes, f.ratio[key], marker=marker, label=label)
    ax_r.axhline(1, color="grey", linestyle="--", label="1: break-even")
    ax_r.axhline(2, color="red", linestyle=":", label="2: 'up to twice as slow'")
    for ax, ylabel, what in (
        (ax_t, "time per call (ms, median, host clock)", "time per call"),
        (ax_r, "ratio of times (below 1: pinning pays)", "pin-then-copy vs pageable copy"),
    ):
        ax.set_ylabel(ylabel)
        ax.set_title(plotting.machine_title(what, run.machine, run.live))
        plotting.size_axis(ax, label="tensor size (bytes, binary prefixes)")
        plotting.log_axis(ax, "y")
        ax.grid(True, which="both", alpha=0.3)
        if crossover is not None:
            label = f"pinning pays from about {timing.format_bytes(round(crossover))}"
            ax.axvline(crossover, color="green", alpha=0.6, label=label)
        ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()


def crossing_words(sizes: list[int], ratios: list[float]) -> str:
    """Where a ratio curve (pinned way / pageable way) crosses 1 for good, in words."""
    first, at = crossover_size(sizes, ratios)
    if first is None or at is None:
        return (
            f"never stays below 1 (ratio {min(ratios):.3g} to {max(ratios):.3g}; {ratios[-1]:.3g} at the largest "
            "size)"
        )
    slower = sum(r >= 1 for n, r in zip(sizes, ratios, strict=True) if n < first)
    return (
        f"is below 1 at every size from {timing.format_bytes(first)} on and at or above 1 at {slower} of the "
        f"{sizes.index(first)} smaller sizes; it crosses 1 at about {timing.format_bytes(round(at))}"
    )


def parts_at(f: Sweep, i: int) -> str:
    """pin_memory() plus the pinned copy, against the pageable copy, at the sweep's i-th size."""
    (pin, pinned, whole), page = (f.ms[k][i] for k in TIMED_PARTS), f.ms["pageable_to"][i]
    gbps = {k: f"{f.gbps[k][i]:.3g} GB/s" for k in ("pin_memory", "pinned_to", "pageable_to")}
    return (
        f"at {timing.format_bytes(f.sizes[i])}, `pin_memory()` ({pin:.3f} ms, "
        f"{gbps['pin_memory']}) plus the pinned copy ({pinned:.3f} ms, {gbps['pinned_to']}) make "
        f"{pin + pinned:.3f} ms, against {page:.3f} ms for the pageable copy "
        f"({gbps['pageable_to']}); `pin_memory().to()` measured {whole:.3f} ms"
    )


def see(run: Run) -> claims.WhatWeSee:
    """Where each pin-then-copy form's ratio crosses 1 for good, the parts on either side of the
    crossing (ms, GB/s), where a part took longer than the whole, ``pin_memory()``'s GB/s."""
    f, seen = facts(run), claims.WhatWeSee(NOTEBOOK, run)
    for key, start in (
        (
            "pin_then_to",
            "With a warm cache, the ratio of `pin_memory().to()`'s time to a pageable `.to()`'s",
        ),
        ("pin_then_to_nb", "With `non_blocking=True` it"),
        ("pin_then_to_nb_cold", "With the cache emptied before each call it"),
    ):
        seen.say(f"{start} {crossing_words(f.sizes, f.ratio[key])}.")
    first = crossover_size(f.sizes, f.ratio["pin_then_to"])[0]
    if first is None:
        seen.say(f"At the largest size, {parts_at(f, len(f.sizes) - 1)}.")
    else:
        k = f.sizes.index(first)
        sides = "; ".join(parts_at(f, i) for i in (k - 1, k) if i >= 0)
        seen.say(f"On either side of the crossing, {sides}.")
    exceed = f.parts_exceed_whole()
    seen.say(
        f"At {len(exceed)} of the {len(f.sizes)} sizes "
        f"({', '.join(map(timing.format_bytes, exceed))}) a warm `pin_memory()` timed alone took "
        "longer than `pin_memory().to()`, which contains it: parts timed apart do not add up to "
        "the statement, so their sum is a guide and the crossing is read from the measured ratio."
        if exceed
        else "At every size `pin_memory()` timed alone took less than `pin_memory().to()`, which "
        "contains it."
    )
    big = [i for i, n in enumerate(f.sizes) if n >= MiB]
    if big:
        pins, pages = ([f.gbps[k][i] for i in big] for k in ("pin_memory", "pageable_to"))
        seen.say(
            f"From 1 MiB up a warm `pin_memory()` copies at {min(pins):.3g} to {max(pins):.3g} "
            f"GB/s, while the pageable copy runs at {min(pages):.3g} to {max(pages):.3g} GB/s."
        )
    if f.fewest < analysis.FEW_SAMPLES:
        seen.say(f"Each time is the median of as few as {f.fewest} samples at the largest sizes.")
    return seen


def see_two_clocks(run_tut: Run, run_pin: Run) -> claims.WhatWeSee:
    """The Timer (section 3) against the host clock (section 4) at the sweep's size nearest to the
    tutorial's: each statement's time (us) and rate (GB/s) under both, whether the pageable copy
    itself differed between them, the claim's ratio under both, and whether back-to-back
    non-blocking calls were shorter than blocking ones, within the noise."""
    tut, sizes = run_tut.value, run_pin.value["sizes"]
    numel_bytes = run_tut.params["numel"] * 4
    near = min(range(len(sizes)), key=lambda i: abs(math.log(sizes[i] / numel_bytes)))
    row = run_pin.value["rows"][near]
    seen = claims.WhatWeSee(NOTEBOOK, run_pin)
    seen.say(
        f"The sweep's size nearest to the tutorial's {run_tut.params['numel']:,} float32 "
        f"({timing.format_bytes(numel_bytes)}) is {timing.format_bytes(sizes[near])} "
        f"({sizes[near] / numel_bytes:.2f} times as many bytes)."
    )
    for name, statement, key in (
        ("The pageable copy", timer.PAGEABLE, "pageable_to"),
        ("`pin_memory()`", timer.PIN, "pin_memory"),
        ("`pin_memory().to()`", timer.PIN_TO, "pin_then_to"),
    ):
        seen.say(
            f"{name} took {timer.us_words(tut[statement])} under the Timer (section 3) and "
            f"{timer.us_words(row[key])} on the host clock (section 4), {tut[statement].gbps:.3g} against "
            f"{row[key].gbps:.3g} GB/s."
        )
    # Per byte: the sweep's size is not exactly the tutorial's.
    pageable = claims.compare(
        claims.ratio(
            claims.measured(tut[timer.PAGEABLE], as_rate=True),
            claims.measured(row["pageable_to"], as_rate=True),
        ),
        1,
        holds_if="above",
    )
    seen.say(
        f"So even the pageable copy, which the two differences above should not touch, ran at "
        f"{analysis.times(pageable.value)} its host-clock rate under the Timer: "
        + analysis.in_words(
            pageable,
            "faster under the Timer, beyond the noise",
            "the same within the noise",
            "slower under the Timer, beyond the noise",
        )
        + "; each clock's ratios are read against the pageable copy timed by the same clock."
    )
    blocking = claims.ratio(row["pin_then_to"], row["pageable_to"])
    nonblocking = claims.ratio(row["pin_then_to_nb"], row["pageable_to"])
    r2 = timer.ratio(run_tut).value
    seen.say(
        f"The claim's ratio, pin-then-copy's time over the pageable copy's, is {analysis.times(r2)} under the "
        f"Timer{timer.few_note(r2.samples)}, {analysis.times(blocking)} on the host clock with the blocking "
        f"statement and {analysis.times(nonblocking)} with `non_blocking=True`."
    )
    gain = claims.compare(
        claims.ratio(row["pin_then_to"], row["pin_then_to_nb"]), 1, holds_if="above"
    )
    seen.say(
        f"Back to back, the non-blocking form took {timer.us_words(row['pin_then_to_nb'])} per call against "
        f"{timer.us_words(row['pin_then_to'])} for the blocking one: the blocking form took "
        f"{analysis.times(gain.value)} the non-blocking form's time, "
        + analysis.in_words(
            gain,
            "so the non-blocking calls were shorter: the pipelining above.",
            "the same within the noise: no gain from pipelining shows at this size.",
            "so the non-blocking calls were longer: no gain from pipelining at this size.",
        )
    )
    return seen


def twice_claim(label: str) -> str:
    """The claims table's name of "up to twice as slow" in one size range and cache (``label``)."""
    return f"{timer.TWICE} [{label}, host clock]"


def nonblocking_ratios(run: Run) -> dict[str, list[claims.Value]]:
    """{"warm cache": [...], "empty cache": [...]}: t(``pin_memory().to(non_blocking=True)``) over
    t(pageable ``.to()``) at every size, ratios of medians with their spreads."""
    rows = run.value["rows"]
    return {
        case: [claims.ratio(r[key], r["pageable_to"]) for r in rows] for case, key in CASES.items()
    }


def range_verdict(
    ratios: list[claims.Value], run: Run | None = None, label: str = ""
) -> tuple[claims.Comparison, str]:
    """ "Up to twice as slow" in one size range: (comparison, words) for its worst (largest) ratio,
    ``claims.within(worst, 1, 2)`` judged with the recorded runs of ``run``'s kind for ``label``."""
    if not ratios:
        raise ValueError("range_verdict needs the ratios of at least one size")
    worst = max(ratios, key=lambda r: r.value)
    comparison = claims.judged(claims.within(worst, 1, 2), run, NOTEBOOK, twice_claim(label))
    places, words = worst.decimals(), timer.twice_words(comparison)
    span = (
        f"ratios {min(r.value for r in ratios):.{places}f} to {worst.value:.{places}f} over {len(ratios)} "
        f"sizes, the worst {analysis.times(worst)}{timer.few_note(worst.samples)}"
    )
    if comparison.verdict == claims.BORDERLINE:
        words = "the worst ratio is " + words
    return comparison, f"{span}: {words}"


def twice_as_slow_verdicts(run: Run) -> dict[str, tuple[claims.Comparison, str]]:
    """{"<size range>, <warm|empty> cache": ``range_verdict``} for each size range measured."""
    sizes, verdicts = run.value["sizes"], {}
    for case, values in nonblocking_ratios(run).items():
        for label, low, high in SIZE_RANGES:
            ratios = [v for n, v in zip(sizes, values, strict=True) if low <= n < high]
            if ratios:  # quick mode measures fewer sizes
                verdicts[f"{label}, {case}"] = range_verdict(ratios, run, f"{label}, {case}")
    return verdicts


def show_twice_as_slow(run_tut: Run, run_pin: Run) -> tables.Table:
    """Every verdict on "up to twice as slow": at the tutorial's size under its Timer, then per
    size range with the cache warm and empty, with the ratios each rests on. Returns the table."""
    tutorial = timer.ratio(run_tut)
    table = tables.Table(
        ["sizes", "statement and clock", "pinned cache", "the ratios", "verdict"],
        bold=["verdict"],
        title=plotting.machine_title(f"'{timer.TWICE}'", run_pin.machine, run_pin.live),
        caption="ratio: t(pin-then-copy) / t(pageable .to()); the claim holds between 1 and 2",
    )
    table.add(
        f"{run_tut.params['numel']:,} float32",
        "pin_memory().to() (blocking), the tutorial's Timer",
        "warm",
        f"{analysis.times(tutorial.value)}{timer.few_note(tutorial.value.samples)}: "
        f"{timer.twice_words(tutorial, one=True)}",
        claims.stated(tutorial, run_tut),
    )
    for label, (comparison, words) in twice_as_slow_verdicts(run_pin).items():
        sizes, case = label.split(", ")
        table.add(
            sizes,
            "pin_memory().to(non_blocking=True), host clock",
            case.split()[0],
            words,
            claims.stated(comparison, run_pin),
        )
    return table


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "Up to twice as slow" per size range and cache, "in rare cases faster" per cache, and
    "pinning pays off for large tensors" at the largest size."""
    source, sizes = f"{timer.TUTORIAL} (what you will learn)", run.value["sizes"]
    for label, (comparison, words) in twice_as_slow_verdicts(run).items():
        measured = (
            "the worst t(pin_memory().to(non_blocking=True)) / t(pageable .to()) in the range: "
            f"{words}; holds {comparison.in_words()}"
        )
        table.add(twice_claim(label), source=source, measured=measured, holds=comparison, run=run)
    for case, values in nonblocking_ratios(run).items():
        best = min(range(len(values)), key=lambda i: values[i].value)
        faster = [claims.compare(v, 1, holds_if="below") for v in values]
        wins = sum(c.verdict == claims.HOLDS for c in faster)
        # "can be faster": at one size at least; "in rare cases": at no more than RARE of the sizes
        share = claims.Value(wins / len(values), unit=f"of {len(values)} sizes")
        rare = claims.compare(share, RARE, holds_if="below")
        name, decisive = analysis.weakest({"faster somewhere": faster[best], "rare": rare})
        measured = (
            f"t(pin_memory().to(non_blocking=True)) / t(pageable .to()): smallest "
            f"{values[best].number()} at {timing.format_bytes(sizes[best])} (faster: "
            f"{faster[best].in_words()}); faster beyond this run's noise at {wins} of "
            f"{len(values)} sizes ('rare': at most {RARE:.0%} of them); shown: {name}"
        )
        table.add(
            RARE_CLAIM.format(case),
            source=timer.TUTORIAL,
            measured=measured,
            holds=decisive,
            run=run,
        )
    last = run.value["rows"][-1]
    pays = claims.compare(
        claims.ratio(last["pin_then_to"], last["pageable_to"]), 1, holds_if="below"
    )
    measured = (
        f"t(pin_memory().to()) / t(pageable .to()) at the largest size, "
        f"{timing.format_bytes(sizes[-1])}, warm cache; pays: {pays.in_words()}"
    )
    table.add(
        PAYS_CLAIM, source=f"{timer.TUTORIAL} (advice)", measured=measured, holds=pays, run=run
    )
