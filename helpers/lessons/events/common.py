"""What notebook 04's sections share: its name, sources, claim rows, words, columns, axes."""

from __future__ import annotations

from typing import Any, NamedTuple

import matplotlib.pyplot as plt

from ... import analysis, claims, plotting
from ...records import Run

NOTEBOOK = "04_event_timing"
SOURCE = 'article "PyTorch CUDA Streams Introduction"'
SAME = "the same within the noise"


class Row(NamedTuple):
    """One claim of the claims table, with what was measured and its verdict (``holds``)."""

    claim: str
    run: Run
    measured: str
    holds: object
    source: str = SOURCE


def times(value: claims.Value) -> str:
    """A ratio with its spread, for a sentence: ``'1.02 ± 0.03 times'``."""
    return f"{value.number()} ± {value.spread_text()} times"


def vs_one(value: claims.Value, above: str, below: str, same: str = SAME) -> str:
    """``above`` or ``below`` as a ratio lies against 1, ``same`` within its noise."""
    return analysis.in_words(claims.compare(value, 1, holds_if="above"), above, same, below)


def cols(unit: str, fmt: str, *names: str) -> list[tuple[str, str, str]]:
    """Table columns ``names``, all in ``unit`` with format ``fmt``."""
    return [(name, unit, fmt) for name in names]


def bars(
    run: Run, what: str, values: dict[str, float], ylabel: str, baseline: str | None = None
) -> None:
    """Bars of ``values`` with their ratios to ``baseline`` (the first by default), titled with
    the machine and the ratios' base."""
    base = f"\nratios (x): each bar over {baseline or next(iter(values))}"
    title = plotting.titled(what, run) + base
    plotting.bars_with_ratios(values, baseline=baseline, ylabel=ylabel, title=title)


def axes(run: Run, title: str, xlabel: str, ylabel: str) -> Any:
    """A new figure's axes (8 x 4 in), labelled, titled with the machine."""
    _, ax = plt.subplots(figsize=(8, 4))
    ax.set(xlabel=xlabel, ylabel=ylabel, title=plotting.titled(title, run))
    return ax
