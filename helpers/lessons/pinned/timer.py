"""Section 3 of notebook 01: the tutorial's four statements under its Timer (us), and its r2."""

from __future__ import annotations

from ... import analysis, claims, plotting, tables
from ...records import Run
from .common import NOTEBOOK, TUTORIAL, few_note, seen, us_words

PAGEABLE, PINNED = "pageable_tensor.to('cuda:0')", "pinned_tensor.to('cuda:0')"
PIN, PIN_TO = "pageable_tensor.pin_memory()", "pageable_tensor.pin_memory().to('cuda:0')"
TWICE = "pin_memory().to(device, non_blocking=True) can be up to twice as slow as .to(device)"
TWICE_HERE = f"{TWICE} [at 1e6 float32, with the tutorial's statements and its Timer]"
COLUMNS = ["statement", ("median", "us", ".1f"), ("spread (half IQR)", "us", ".1f"), "samples"]
COLUMNS += [("rate", "GB/s", ".2f")]
EXPECTED = "the pinned copy beats the pageable one"  # "what we expect", checked in see()


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
    """r2 = t(pin_memory().to()) / t(pageable .to()) within 1 to 2, judged on the recorded runs."""
    r2 = claims.ratio(run.value[PIN_TO], run.value[PAGEABLE])
    return claims.judged(claims.within(r2, 1, 2), run, NOTEBOOK, TWICE_HERE)


def show(run: Run) -> tables.Table:
    """The four statements (us, samples, GB/s) and bars of their medians (ms). Returns the table."""
    rows, short = [], {}
    for text, t in run.value.items():
        v = claims.measured(t)
        rows.append((text, v.value * 1e6, v.spread * 1e6, v.samples, t.gbps))
        name = text.replace("pageable_tensor", "pageable").replace("pinned_tensor", "pinned")
        short[name] = t.median_ms
    what = f"the tutorial's statements under its Timer, {run.params['numel']:,} float32"
    plotting.bars_with_ratios(
        short, title=plotting.titled(what, run), ylabel="time per call (ms, median)"
    )
    return tables.Table(COLUMNS, rows, caption="torch.utils.benchmark's adaptive_autorange")


def see(run: Run) -> claims.WhatWeSee:
    """The fastest statement, pin_memory() and its parts against the copy, the verdict (us)."""
    tut = run.value
    fastest = min(tut, key=lambda text: tut[text].median_s)
    alone = claims.compare(claims.ratio(tut[PIN], tut[PAGEABLE]), 1, holds_if="above")
    words = analysis.in_words(
        alone,
        "longer than the whole pageable copy",
        "as long as the whole pageable copy, within the noise",
        "less than the whole pageable copy",
    )
    parts, twice = tut[PIN].median_s + tut[PINNED].median_s, ratio(run)
    measured = f"{tut[PINNED].median_s * 1e6:.0f} against {tut[PAGEABLE].median_s * 1e6:.0f} us"
    stated = claims.stated(twice, run)
    verdict = claims.worded(stated, "holds", "does not hold here", "is borderline here")
    return seen(
        run,
        f"The fastest of the four is `{fastest}`, at {us_words(tut[fastest])}.",
        f"`pin_memory()` alone took {us_words(tut[PIN])} against {us_words(tut[PAGEABLE])} for the pageable copy: {analysis.times(alone.value)} the pageable copy's time, {words}.",
        f"`pin_memory().to('cuda:0')` took {us_words(tut[PIN_TO])}; `pin_memory()` and the pinned copy timed apart add up to {parts * 1e6:.1f} us, and the statement took {tut[PIN_TO].median_s / parts:.2f} times that sum.",
        f"So at the tutorial's size, statements and Timer, pinning first and then copying took {analysis.times(twice.value)} the plain pageable copy's time{few_note(twice.value.samples)}: the claim 'slower, but at most twice' ({twice.in_words()}) **{verdict}**.",
        check=(EXPECTED, tut[PINNED].median_s < tut[PAGEABLE].median_s, measured),
    )


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "Up to twice as slow" at the tutorial's size under its Timer (``ratio``)."""
    twice, source = ratio(run), f"{TUTORIAL} (what you will learn)"
    measured = f"t({PIN_TO}) / t({PAGEABLE}) under torch.utils.benchmark.Timer (the tutorial's r2); holds {twice.in_words()}"  # the value's column says a count under 5
    table.add(TWICE_HERE, source=source, measured=measured, holds=twice, run=run)
