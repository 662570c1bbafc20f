"""Section 3 of notebook 01: the tutorial's four statements under ``torch.utils.benchmark``'s
Timer at its size, and the claim "up to twice as slow" there (the tutorial's ratio r2)."""

from __future__ import annotations

from ... import analysis, claims, plotting, tables, timing
from ...records import Run

NOTEBOOK = "01_pinned_memory"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
PAGEABLE, PINNED = "pageable_tensor.to('cuda:0')", "pinned_tensor.to('cuda:0')"
PIN, PIN_TO = "pageable_tensor.pin_memory()", "pageable_tensor.pin_memory().to('cuda:0')"
TWICE = "pin_memory().to(device, non_blocking=True) can be up to twice as slow as .to(device)"
TWICE_HERE = f"{TWICE} [at 1e6 float32, with the tutorial's statements and its Timer]"


def few_note(samples: int | None) -> str:
    """' (N samples)' when a number rests on fewer than ``analysis.FEW_SAMPLES``, else ''."""
    return f" ({analysis.few(samples)})" if analysis.few(samples) else ""


def us_words(t: timing.Timing) -> str:
    """A Timing's median and spread in us, rounded alike ('370 us ± 17'), with few samples said."""
    v = claims.measured(t)
    return str(claims.Value(v.value * 1e6, v.spread * 1e6, "us")) + few_note(v.samples)


def twice_words(comparison: claims.Comparison, one: bool = False) -> str:
    """What a ratio's verdict on "slower, but at most twice" means, in words."""
    if comparison.verdict == claims.BORDERLINE:
        return f"within its noise of {comparison.threshold:g}"
    if comparison.value.value > 2:
        return "more than twice as slow"
    if comparison.value.value < 1:
        return "pinning first is faster" if one else "never slower, pinning first is faster"
    return "slower, but at most twice"


def ratio(run: Run) -> claims.Comparison:
    """The tutorial's r2 under its Timer, t(pin_memory().to()) / t(pageable .to()), against
    "up to twice as slow": ``claims.within(r2, 1, 2)`` judged with the recorded runs: the one
    verdict the claims table, the sentences and section 4's table read."""
    r2 = claims.ratio(run.value[PIN_TO], run.value[PAGEABLE])
    return claims.judged(claims.within(r2, 1, 2), run, NOTEBOOK, TWICE_HERE)


def show(run: Run) -> tables.Table:
    """A table of the four statements (median and spread in us, samples, GB/s) and bars of the
    medians in ms with their ratios. Returns the table."""
    rows = []
    for text, t in run.value.items():
        v = claims.measured(t)
        rows.append((text, v.value * 1e6, v.spread * 1e6, v.samples, t.gbps))
    table = tables.Table(
        [
            "statement",
            ("median", "us", ".1f"),
            ("spread (half IQR)", "us", ".1f"),
            "samples",
            ("rate", "GB/s", ".2f"),
        ],
        rows,
        caption="torch.utils.benchmark's adaptive_autorange",
    )
    plotting.bars_with_ratios(
        {
            text.replace("pageable_tensor", "pageable").replace(
                "pinned_tensor", "pinned"
            ): t.median_ms
            for text, t in run.value.items()
        },
        title=plotting.machine_title(
            f"the tutorial's statements under its Timer, {run.params['numel']:,} float32",
            run.machine,
            run.live,
        ),
        ylabel="time per call (ms, median)",
    )
    return table


def see(run: Run) -> claims.WhatWeSee:
    """The fastest statement, ``pin_memory()`` alone against the pageable copy, pin-then-copy
    against its two parts timed apart, and the verdict on "up to twice as slow" (us, ratios)."""
    tut = run.value
    seen = claims.WhatWeSee(NOTEBOOK, run)
    fastest = min(tut, key=lambda text: tut[text].median_s)
    seen.say(f"The fastest of the four is `{fastest}`, at {us_words(tut[fastest])}.")
    pin_alone = claims.compare(claims.ratio(tut[PIN], tut[PAGEABLE]), 1, holds_if="above")
    words = analysis.in_words(
        pin_alone,
        "longer than the whole pageable copy",
        "as long as the whole pageable copy, within the noise",
        "less than the whole pageable copy",
    )
    seen.say(
        f"`pin_memory()` alone took {us_words(tut[PIN])} against {us_words(tut[PAGEABLE])} for the pageable copy: "
        f"{analysis.times(pin_alone.value)} the pageable copy's time, {words}."
    )
    parts = tut[PIN].median_s + tut[PINNED].median_s
    seen.say(
        f"`pin_memory().to('cuda:0')` took {us_words(tut[PIN_TO])}; `pin_memory()` and the pinned copy timed "
        f"apart add up to {parts * 1e6:.1f} us, and the statement took {tut[PIN_TO].median_s / parts:.2f} "
        "times that sum."
    )
    twice = ratio(run)
    verdict = claims.worded(
        claims.stated(twice, run), "holds", "does not hold here", "is borderline here"
    )
    seen.say(
        f"So at the tutorial's size, statements and Timer, pinning first and then copying took "
        f"{analysis.times(twice.value)} the plain pageable copy's time{few_note(twice.value.samples)}: the claim "
        f"'slower, but at most twice' ({twice.in_words()}) **{verdict}**."
    )
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "Up to twice as slow" at the tutorial's size under its Timer (``ratio``)."""
    twice = ratio(run)
    few = analysis.few(twice.value.samples)
    table.add(
        TWICE_HERE,
        source=f"{TUTORIAL} (what you will learn)",
        measured=f"t({PIN_TO}) / t({PAGEABLE}) under torch.utils.benchmark.Timer (the tutorial's r2"
        f"{'; ' + few if few else ''}); holds {twice.in_words()}",
        holds=twice,
        run=run,
    )
