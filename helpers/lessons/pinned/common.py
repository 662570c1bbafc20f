"""What notebook 01's sections share: names, and a Timing in words."""

from __future__ import annotations

from ... import analysis, claims, timing
from ...records import Run

NOTEBOOK = "01_pinned_memory"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
MiB = 2**20


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
