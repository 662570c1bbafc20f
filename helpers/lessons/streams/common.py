"""What notebook 03's sections share: names, sources, overlap thresholds, notes, timelines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import matplotlib.pyplot as plt

from ... import analysis, claims, config, plotting, trace
from ...records import Run

NOTEBOOK = "03_streams_and_overlap"
ARTICLE = 'article "PyTorch CUDA Streams Introduction"'
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
FORUM = "NVIDIA forum thread on pageable copies"
OVERLAPS = 0.95  # "overlaps": an overlap ratio of at least this
DOES_NOT = 0.2  # "does not overlap": an overlap ratio below this


def steps_note(value: claims.Value) -> str:
    """``', 2 profiled steps'`` for a value read from fewer than ``analysis.FEW_SAMPLES`` steps."""
    note = analysis.few(value.samples, "profiled step")
    return f", {note}" if note else ""


def over(value: claims.Value) -> str:
    """``' over 2 profiled steps'`` for a value read from a trace's steps."""
    return f" over {analysis.plural(value.samples, 'profiled step')}" if value.samples else ""


def lanes_overlap(intervals: list[trace.Interval], kind: str) -> float:
    """Overlap ratio of the ``kind`` intervals of two streams (0.0 unless exactly two streams)."""
    work = trace.select(intervals, kind=kind)
    streams = sorted({iv.stream for iv in work}, key=lambda s: -1 if s is None else s)
    if len(streams) != 2:
        return 0.0
    return trace.overlap_ratio(*([iv for iv in work if iv.stream == s] for s in streams))


def show_timelines(
    panels: dict[str, Any], what: str, run: Run, profiles: Iterable | None = None, **options: Any
) -> None:
    """The panels' timelines titled with the machine, then where their Chrome traces are (those of
    ``profiles`` where the panels are steps)."""
    plotting.timelines(panels, title=plotting.titled(what, run), **options)
    plt.show()
    profiles = panels.values() if profiles is None else profiles
    files = sorted({config.shown_path(p.chrome_trace.path) for p in profiles if p.chrome_trace})
    if files:
        print("Chrome traces, openable in https://ui.perfetto.dev:", *files, sep="\n  ")
