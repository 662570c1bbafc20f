"""Timing device work honestly: CUDA events, a synchronised host clock, warm-up, several samples.

Each clock returns a ``Timing`` (seconds per call, median, spread, decimal GB/s) and warns when the
samples spread widely. ``cuda_events``: work that does not block the host; ``host_clock``: work that
does (pageable copies, ``pin_memory()``); ``benchmark``: ``torch.utils.benchmark``, as the tutorial.
"""

from __future__ import annotations

from .clocks import (
    LONGEST_TARGET_S,
    MOST_CALLS_PER_SAMPLE,
    benchmark,
    calls_for,
    cuda_events,
    hold_stream,
    host_clock,
    load_spin_kernel,
    sleep_cycles_per_us,
    synchronize_all,
    verify_copy,
)
from .measures import Timing, format_bytes, sizes_pow2

__all__ = [
    "MOST_CALLS_PER_SAMPLE",
    "LONGEST_TARGET_S",
    "format_bytes",
    "sizes_pow2",
    "Timing",
    "sleep_cycles_per_us",
    "hold_stream",
    "load_spin_kernel",
    "cuda_events",
    "synchronize_all",
    "host_clock",
    "benchmark",
    "calls_for",
    "verify_copy",
]
