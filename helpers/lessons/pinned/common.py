"""What notebook 01's sections share: names, and a Timing in words."""

from __future__ import annotations

from ... import analysis, claims, timing
from ...records import Run
from ...timing.measures import NOISY_SPREAD

NOTEBOOK = "01_pinned_memory"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
MiB, SHOWN = 2**20, 3  # SHOWN: the noisiest timings named in words


def few_note(samples: int | None) -> str:
    """' (N samples)' when a number rests on fewer than ``analysis.FEW_SAMPLES``, else ''."""
    return f" ({analysis.few(samples)})" if analysis.few(samples) else ""


def us_words(t: timing.Timing) -> str:
    """A Timing's median and spread in us ('370 us ± 17'), with few samples said."""
    v = claims.measured(t)
    return str(claims.Value(v.value * 1e6, v.spread * 1e6, "us")) + few_note(v.samples)


def seen(run: Run, *sentences: str, check: tuple[str, bool, str] | None = None) -> claims.WhatWeSee:
    """What we see on ``run``: the sentences but empty ones; ``check``: (statement, holds, measured)."""
    said = claims.WhatWeSee(NOTEBOOK, run).say(*filter(None, sentences))
    if check:
        said.check(*check)
    return said


def noisy_words(sizes: list[int], rows: list[dict], names: dict[str, str]) -> str:
    """The timings spread beyond ``NOISY_SPREAD`` (a live run warns of each), widest first."""
    noisy = sorted(
        (t.spread, f"{names[k]} at {timing.format_bytes(n)}")
        for n, row in zip(sizes, rows, strict=True)
        for k, t in row.items()
        if t.is_noisy()
    )[::-1]
    shown = ", ".join(f"{w} ({s:.0%})" for s, w in noisy[:SHOWN])
    more = f" and {len(noisy) - SHOWN} more" if len(noisy) > SHOWN else ""
    said = f"The warnings of a live run name the timings whose interquartile range exceeds {NOISY_SPREAD:.0%} of their median: here {len(noisy)} of {sum(map(len, rows))}, the widest {shown}{more}; read those points as uncertain."
    return said if noisy else ""
