"""What notebook 01's sections share: names, and a Timing in words."""

from __future__ import annotations

from ... import analysis, claims, timing
from ...records import Run
from ...timing.measures import NOISY_SPREAD

NOTEBOOK = "01_pinned_memory"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
MiB = 2**20
SHOWN = 3  # the noisiest timings named in words


def few_note(samples: int | None) -> str:
    """' (N samples)' when a number rests on fewer than ``analysis.FEW_SAMPLES``, else ''."""
    return f" ({analysis.few(samples)})" if analysis.few(samples) else ""


def us_words(t: timing.Timing) -> str:
    """A Timing's median and spread in us ('370 us ± 17'), with few samples said."""
    v = claims.measured(t)
    return str(claims.Value(v.value * 1e6, v.spread * 1e6, "us")) + few_note(v.samples)


def seen(run: Run, *sentences: str) -> claims.WhatWeSee:
    """What we see on ``run``: each sentence given, leaving out empty ones."""
    return claims.WhatWeSee(NOTEBOOK, run).say(*filter(None, sentences))


def noisy_words(
    sizes: list[int], rows: list[dict[str, timing.Timing]], names: dict[str, str]
) -> str:
    """The timings whose samples spread beyond ``NOISY_SPREAD`` (those a live run warns
    of), widest first, by ``names[key]`` and size; '' when none does."""
    noisy = sorted(
        (
            (t.spread, f"{names[k]} at {timing.format_bytes(n)}")
            for n, row in zip(sizes, rows, strict=True)
            for k, t in row.items()
            if t.is_noisy()
        ),
        reverse=True,
    )
    if not noisy:
        return ""
    shown, more = ", ".join(f"{w} ({s:.0%})" for s, w in noisy[:SHOWN]), len(noisy) - SHOWN
    return (
        f"The warnings of a live run name the timings whose samples spread by more than "
        f"{NOISY_SPREAD:.0%} of their median: here {len(noisy)} of "
        f"{sum(map(len, rows))}, the widest {shown}{f' and {more} more' if more > 0 else ''}; "
        "read those points as uncertain."
    )
