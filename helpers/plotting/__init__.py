"""Plots for the course: bandwidth in decimal GB/s on every axis that shows it, sizes on a log
axis with binary prefixes, and every title names the machine the numbers come from."""

from __future__ import annotations

from .before_after import BEFORE_AFTER_MAX_WIDTH_IN, draw_before_after
from .charts import (
    bandwidth_vs_size,
    bars_with_ratios,
    grouped_bars,
    log_axis,
    machine_title,
    size_axis,
    titled,
)
from .timeline import timeline, timelines

__all__ = [
    "BEFORE_AFTER_MAX_WIDTH_IN",
    "bandwidth_vs_size",
    "bars_with_ratios",
    "draw_before_after",
    "grouped_bars",
    "log_axis",
    "machine_title",
    "size_axis",
    "timeline",
    "timelines",
    "titled",
]
