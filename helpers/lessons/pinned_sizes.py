"""What notebook 01 shows of the tutorial's statements timed across sizes: each statement's time
per call, where pinning first starts to pay, the Timer and the host clock compared at the
tutorial's size, and the verdicts on "``pin_memory().to(device, non_blocking=True)`` can be up to
twice as slow as ``.to(device)``" per size range.

The rest of the notebook (where the host waits, bandwidth, the Timer's four statements, pinned
allocations, the claims table) is in ``pinned``. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested on every recorded machine in
tests/test_lesson_01.py.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, plotting, tables, timing
from ..records import Run

NOTEBOOK = "01_pinned_memory"
MiB = 2**20
FEW = analysis.FEW_SAMPLES  # a statement resting on fewer samples than this says how many
TWICE = "pin_memory().to(device, non_blocking=True) can be up to twice as slow as .to(device)"
TUT_PAGEABLE, TUT_PINNED = "pageable_tensor.to('cuda:0')", "pinned_tensor.to('cuda:0')"
TUT_PIN, TUT_PIN_TO = "pageable_tensor.pin_memory()", "pageable_tensor.pin_memory().to('cuda:0')"
TIMED = {
    "pageable_to": "pageable .to()",
    "pinned_to": "pinned .to()",
    "pin_memory": ".pin_memory()",
    "pin_then_to": ".pin_memory().to()",
    "pin_then_to_nb": ".pin_memory().to(non_blocking=True)",
    "pin_then_to_nb_cold": ".pin_memory().to(non_blocking=True), empty pinned cache",
}
COLUMN = {
    "pageable_to": "pageable .to()",
    "pinned_to": "pinned .to()",
    "pin_memory": "pin_memory()",
    "pin_then_to": "pin_memory().to()",
    "pin_then_to_nb": "pin_memory().to(nb)",
    "pin_then_to_nb_cold": "same, empty cache",
}
SIZE_RANGES = [
    ("below 1 MiB", 0, MiB),
    ("1 MiB to 64 MiB", MiB, 64 * MiB),
    ("64 MiB and up", 64 * MiB, math.inf),
]
RANGE_CHOICES = [label for label, _, _ in SIZE_RANGES] + ["never"]
CASES = {"warm cache": "pin_then_to_nb", "empty cache": "pin_then_to_nb_cold"}
UNCACHED = 20  # a warm pin_memory() this many times slower than the pinned copy was not served by the cache


# ---------------------------------------------------------------- small helpers (pinned uses them too)


def few_note(samples: int | None) -> str:
    """' (N samples)' when a number rests on fewer than ``FEW`` samples, else nothing."""
    return f" ({analysis.few(samples)})" if analysis.few(samples) else ""


def us_words(t: timing.Timing) -> str:
    """A Timing's median and spread in microseconds, rounded alike ('370 us ± 17'), with the
    number of samples when there are few."""
    v = claims.measured(t)
    return str(claims.Value(v.value * 1e6, v.spread * 1e6, "us")) + few_note(v.samples)


TWICE_AT_TUTORIAL = f"{TWICE} [at 1e6 float32, with the tutorial's statements and its Timer]"


def twice_claim(label: str) -> str:
    """The claims table's name of "up to twice as slow" in one size range and cache (``label``).

    Used by pinned_claims.add_twice_as_slow.
    """
    return f"{TWICE} [{label}, host clock]"


def tutorial_ratio(run_tut: Run) -> claims.Comparison:
    """The tutorial's r2 under its Timer, t(pin_memory().to()) / t(pageable .to()), against the
    claim "up to twice as slow": ``claims.within(r2, 1, 2)``, judged with the recorded runs
    (``claims.judged``): the verdict the claims table and the sentences both read.
    """
    r2 = claims.ratio(run_tut.value[TUT_PIN_TO], run_tut.value[TUT_PAGEABLE])
    return claims.judged(claims.within(r2, 1, 2), run_tut, NOTEBOOK, TWICE_AT_TUTORIAL)


def _ms(run: Run) -> dict[str, list[float]]:
    return {key: [row[key].median_ms for row in run.value["rows"]] for key in TIMED}


def _ratios(run: Run, key: str) -> list[float]:
    """t(``key``) / t(pageable .to()) at every size, from the medians."""
    ms = _ms(run)
    return [a / b for a, b in zip(ms[key], ms["pageable_to"], strict=True)]


def _crossover_size(sizes: list[int], ratios: list[float]) -> tuple[int | None, float | None]:
    """Where a ratio (pinned way / pageable way) drops below 1 for good.

    Returns (the first measured size from which the ratio stays below 1 at every larger size,
    that point interpolated between it and the size before, linearly in log(size) and
    log(ratio)); (None, None) when the largest size still has a ratio of 1 or more.
    """
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


def _range_of(nbytes: float | None) -> str:
    """The SIZE_RANGES label that holds a size, or 'never' for None."""
    if nbytes is None:
        return "never"
    return next(label for label, low, high in SIZE_RANGES if low <= nbytes < high)


def crossover_range(run: Run) -> str:
    """The size range (one of ``RANGE_CHOICES``) in which ``pin_memory().to()`` with a warm cache
    starts to beat a pageable ``.to()`` for good, by the interpolated crossing of their ratio of
    times; 'never' when it still loses at the largest size.
    """
    return _range_of(_crossover_size(run.value["sizes"], _ratios(run, "pin_then_to"))[1])


# ---------------------------------------------------------------- the sweep


def show_sweep(run: Run) -> None:
    """Every statement's median time per call (ms) at every size, the ratios of the three
    pin-then-copy forms to the pageable copy, and ``pin_memory()``'s rate (GB/s), as a table; a note
    for any size where a warm ``pin_memory()`` was not served by the cache; then the times and the
    ratios against size.
    """
    sizes, rows, ms = run.value["sizes"], run.value["rows"], _ms(run)
    ratios = {
        key: _ratios(run, key) for key in ("pin_then_to", "pin_then_to_nb", "pin_then_to_nb_cold")
    }
    table = tables.Table(
        [("size", "", timing.format_bytes)]
        + [(name, "ms", ".3f") for name in COLUMN.values()]
        + [
            ("pin().to() / pageable", "x", ".2f"),
            ("pin().to(nb) / pageable", "x", ".2f"),
            ("same, empty cache", "x", ".2f"),
            ("pin_memory()", "GB/s", ".2f"),
        ],
        title=plotting.machine_title("time per call", run.machine, run.live),
        caption="median time per call, synchronised host clock; nb = non_blocking=True",
    )
    for i, n in enumerate(sizes):
        table.add(
            n,
            *[ms[key][i] for key in TIMED],
            *[r[i] for r in ratios.values()],
            rows[i]["pin_memory"].gbps,
        )
    display(table)
    # A warm pin_memory() should be served from PyTorch's cache: a CPU copy, within a small factor of
    # the pinned copy to the GPU. Where it is UNCACHED times slower or more, the calls most likely got new blocks.
    for i, n in enumerate(sizes):
        if ms["pin_memory"][i] > UNCACHED * ms["pinned_to"][i]:
            affected = ms["pin_then_to"][i] >= ms["pin_memory"][i]
            print(
                f"note: at {timing.format_bytes(n)} a warm pin_memory() alone took {ms['pin_memory'][i]:.3f} ms per "
                f"call, {ms['pin_memory'][i] / ms['pinned_to'][i]:.0f} times as long as the pinned copy itself: most "
                "likely the cache did not serve it and each call asked the driver for new page-locked memory; "
                f"pin_memory().to() took {ms['pin_then_to'][i]:.3f} ms at the same size, so "
                + ("its ratios include that" if affected else "its ratios were not affected")
            )
    _plot_sweep(run, ratios)


def _plot_sweep(run: Run, ratios: dict[str, list[float]]) -> None:
    sizes, ms = run.value["sizes"], _ms(run)
    crossover = _crossover_size(sizes, ratios["pin_then_to"])[1]
    _, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(13, 4.5))
    for key, name in TIMED.items():
        ax_t.plot(sizes, ms[key], marker="o", label=name)
    ax_t.set_ylabel("time per call (ms, median, host clock)")
    ax_t.set_title(plotting.machine_title("time per call", run.machine, run.live))
    ax_r.plot(sizes, ratios["pin_then_to"], marker="o", label=".pin_memory().to() / pageable .to()")
    ax_r.plot(
        sizes,
        ratios["pin_then_to_nb"],
        marker="s",
        label=".pin_memory().to(non_blocking=True) / pageable .to()",
    )
    ax_r.plot(
        sizes,
        ratios["pin_then_to_nb_cold"],
        marker="^",
        label="the same with an empty pinned cache (first call)",
    )
    ax_r.axhline(1, color="grey", linestyle="--", label="1: break-even")
    ax_r.axhline(2, color="red", linestyle=":", label="2: 'up to twice as slow'")
    ax_r.set_ylabel("ratio of times (below 1: pinning pays)")
    ax_r.set_title(plotting.machine_title("pin-then-copy vs pageable copy", run.machine, run.live))
    for ax in (ax_t, ax_r):
        plotting.size_axis(ax, label="tensor size (bytes, binary prefixes)")
        plotting.log_axis(ax, "y")
        ax.grid(True, which="both", alpha=0.3)
        if crossover is not None:
            ax.axvline(
                crossover,
                color="green",
                alpha=0.6,
                label=f"pinning pays from about {timing.format_bytes(round(crossover))}",
            )
        ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()


def _crossing_words(sizes: list[int], ratios: list[float]) -> str:
    """Where a ratio curve (pinned way / pageable way) crosses 1 for good, in words."""
    first, at = _crossover_size(sizes, ratios)
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


def _parts_at(run: Run, i: int) -> str:
    """pin_memory() plus the pinned copy, against the pageable copy, at the sweep's i-th size."""
    ms, row = _ms(run), run.value["rows"][i]
    pin, pinned, pageable = ms["pin_memory"][i], ms["pinned_to"][i], ms["pageable_to"][i]
    return (
        f"at {timing.format_bytes(run.value['sizes'][i])}, `pin_memory()` ({pin:.3f} ms, "
        f"{row['pin_memory'].gbps:.3g} GB/s) plus the pinned copy ({pinned:.3f} ms, {row['pinned_to'].gbps:.3g} GB/s) "
        f"make {pin + pinned:.3f} ms, against {pageable:.3f} ms for the pageable copy "
        f"({row['pageable_to'].gbps:.3g} GB/s); `pin_memory().to()` measured {ms['pin_then_to'][i]:.3f} ms"
    )


def see_sweep(run: Run) -> claims.WhatWeSee:
    """What the sweep shows: where each pin-then-copy form's ratio of times to the pageable copy
    crosses 1 for good (warm cache, non-blocking, empty cache), the two parts of pin-then-copy on
    either side of the crossing (ms, GB/s), and ``pin_memory()``'s rate against the pageable copy's
    from 1 MiB up (GB/s).
    """
    sizes, rows = run.value["sizes"], run.value["rows"]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"With a warm cache, the ratio of `pin_memory().to()`'s time to a pageable `.to()`'s "
        f"{_crossing_words(sizes, _ratios(run, 'pin_then_to'))}."
    )
    seen.say(
        f"With `non_blocking=True` it {_crossing_words(sizes, _ratios(run, 'pin_then_to_nb'))}."
    )
    seen.say(
        f"With the cache emptied before each call it {_crossing_words(sizes, _ratios(run, 'pin_then_to_nb_cold'))}."
    )
    first = _crossover_size(sizes, _ratios(run, "pin_then_to"))[0]
    if first is None:
        seen.say(f"At the largest size, {_parts_at(run, len(sizes) - 1)}.")
    else:
        k = sizes.index(first)
        seen.say(
            "On either side of the crossing, "
            + "; ".join(_parts_at(run, i) for i in (k - 1, k) if i >= 0)
            + "."
        )
    big = [row for n, row in zip(sizes, rows, strict=True) if n >= MiB]
    if big:
        pin_rates, page_rates = (
            [r["pin_memory"].gbps for r in big],
            [r["pageable_to"].gbps for r in big],
        )
        seen.say(
            f"From 1 MiB up a warm `pin_memory()` copies at {min(pin_rates):.3g} to {max(pin_rates):.3g} GB/s, "
            f"while the pageable copy runs at {min(page_rates):.3g} to {max(page_rates):.3g} GB/s."
        )
    fewest = min(len(t.samples_s) for row in rows for t in row.values())
    if fewest < FEW:
        seen.say(f"Each time is the median of as few as {fewest} samples at the largest sizes.")
    return seen


# ---------------------------------------------------------------- the two clocks at the tutorial's size


def see_two_clocks(run_tut: Run, run_pin: Run) -> claims.WhatWeSee:
    """The Timer (section 3) against the host clock (section 4) at the sweep's size nearest to
    the tutorial's: each statement's time (us) and rate (GB/s) under both, the claim's ratio of
    times under both (blocking and non-blocking), and whether back-to-back non-blocking calls took
    less time per call than blocking ones, within the noise.
    """
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
        ("The pageable copy", TUT_PAGEABLE, "pageable_to"),
        ("`pin_memory()`", TUT_PIN, "pin_memory"),
        ("`pin_memory().to()`", TUT_PIN_TO, "pin_then_to"),
    ):
        seen.say(
            f"{name} took {us_words(tut[statement])} under the Timer (section 3) and {us_words(row[key])} on the host "
            f"clock (section 4), {tut[statement].gbps:.3g} against {row[key].gbps:.3g} GB/s."
        )
    blocking = claims.ratio(row["pin_then_to"], row["pageable_to"])
    nonblocking = claims.ratio(row["pin_then_to_nb"], row["pageable_to"])
    timer = tutorial_ratio(run_tut).value
    seen.say(
        f"The claim's ratio, pin-then-copy's time over the pageable copy's, is {analysis.times(timer)} under the "
        f"Timer{few_note(timer.samples)}, {analysis.times(blocking)} on the host clock with the blocking statement and "
        f"{analysis.times(nonblocking)} with `non_blocking=True`."
    )
    gain = claims.compare(
        claims.ratio(row["pin_then_to"], row["pin_then_to_nb"]), 1, holds_if="above"
    )
    seen.say(
        f"Back to back, the non-blocking form took {us_words(row['pin_then_to_nb'])} per call against "
        f"{us_words(row['pin_then_to'])} for the blocking one: the blocking form took {analysis.times(gain.value)} "
        "the non-blocking form's time, "
        + analysis.in_words(
            gain,
            "so the non-blocking calls were shorter: the pipelining above.",
            "the same within the noise: no gain from pipelining shows at this size.",
            "so the non-blocking calls were longer: no gain from pipelining at this size.",
        )
    )
    return seen


# ---------------------------------------------------------------- "up to twice as slow", per size range


def _twice_words(comparison: claims.Comparison, one: bool = False) -> str:
    """What a ratio's verdict on "slower, but at most twice" means, in words."""
    worst = comparison.value.value
    if comparison.verdict == claims.BORDERLINE:
        return f"within its noise of {comparison.threshold:g}"
    if worst > 2:
        return "more than twice as slow"
    if worst < 1:
        return "pinning first is faster" if one else "never slower, pinning first is faster"
    return "slower, but at most twice"


def _twice_as_slow_verdict(
    ratios: list[claims.Value], run: Run | None = None, label: str = ""
) -> tuple[claims.Comparison, str]:
    """'can be up to twice as slow' in one size range: (comparison, words) for its worst ratio.

    The worst (largest) ratio, with its spread, must lie between 1 (slower) and 2 (at most twice):
    ``claims.within(worst, 1, 2)``, judged with the recorded runs of ``run``'s machine kind for
    the claim of that ``label`` (``claims.judged``), borderline where the evidence straddles a bound.
    """
    if not ratios:
        raise ValueError("twice_as_slow_verdict needs the ratios of at least one size")
    worst = max(ratios, key=lambda r: r.value)
    comparison = claims.judged(claims.within(worst, 1, 2), run, NOTEBOOK, twice_claim(label))
    places = worst.decimals()
    span = (
        f"ratios {min(r.value for r in ratios):.{places}f} to {worst.value:.{places}f} over {len(ratios)} sizes, "
        f"the worst {analysis.times(worst)}{few_note(worst.samples)}"
    )
    words = _twice_words(comparison)
    return (
        comparison,
        f"{span}: {'the worst ratio is ' + words if comparison.verdict == claims.BORDERLINE else words}",
    )


def nonblocking_ratios(run: Run) -> dict[str, list[claims.Value]]:
    """{"warm cache": [...], "empty cache": [...]}: t(``pin_memory().to(non_blocking=True)``) over
    t(pageable ``.to()``) at every size of the sweep, ratios of median times with their spreads.
    """
    return {
        case: [claims.ratio(row[key], row["pageable_to"]) for row in run.value["rows"]]
        for case, key in CASES.items()
    }


def twice_as_slow_verdicts(run: Run) -> dict[str, tuple[claims.Comparison, str]]:
    """{"<size range>, <warm|empty> cache": (comparison, words)}: the verdict on "up to twice as
    slow" in each size range the sweep measured, from its worst ratio of times.
    """
    sizes, verdicts = run.value["sizes"], {}
    for case, values in nonblocking_ratios(run).items():
        for label, low, high in SIZE_RANGES:
            in_range = [v for n, v in zip(sizes, values, strict=True) if low <= n < high]
            if in_range:  # quick mode measures fewer sizes
                name = f"{label}, {case}"
                verdicts[name] = _twice_as_slow_verdict(in_range, run, name)
    return verdicts


def show_twice_as_slow(run_tut: Run, run_pin: Run) -> tables.Table:
    """Every verdict on "up to twice as slow": at the tutorial's size under its Timer, then per
    size range of the sweep with the pinned cache warm and empty, each with the ratios of times it
    rests on. Returns the table.
    """
    table = tables.Table(
        ["sizes", "statement and clock", "pinned cache", "the ratios", "verdict"],
        bold=["verdict"],
        title=plotting.machine_title(f"'{TWICE}'", run_pin.machine, run_pin.live),
        caption="ratio: t(pin-then-copy) / t(pageable .to()); the claim holds between 1 and 2",
    )
    tutorial = tutorial_ratio(run_tut)
    table.add(
        f"{run_tut.params['numel']:,} float32",
        "pin_memory().to() (blocking), the tutorial's Timer",
        "warm",
        f"{analysis.times(tutorial.value)}{few_note(tutorial.value.samples)}: {_twice_words(tutorial, one=True)}",
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
