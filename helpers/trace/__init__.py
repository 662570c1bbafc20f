"""Profiler traces as intervals: what ran where and when, how much overlapped, what blocked.

``profile(fn)`` runs ``fn`` under ``torch.profiler``, keeps the gzipped Chrome trace (Perfetto
opens it) and turns it into ``Interval``s: GPU work on a lane per (GPU, stream), runtime calls,
ops and annotations on their host thread; times in microseconds on the trace's clock. Overlap is
added up as Meta's Holistic Trace Analysis does: each set merged, then the time both cover.
"""

from __future__ import annotations

from .chrome import intervals_from_chrome_trace, load_chrome_trace, parse_copy_name, profile
from .intervals import (
    GPU_KINDS,
    KINDS,
    Interval,
    Profile,
    count,
    covered_us,
    gpu_work_of,
    host_blocked_us,
    merge,
    overlap_ratio,
    overlap_us,
    relative,
    select,
    span_us,
)

__all__ = [
    "KINDS",
    "GPU_KINDS",
    "Interval",
    "Profile",
    "select",
    "count",
    "gpu_work_of",
    "relative",
    "merge",
    "covered_us",
    "overlap_us",
    "overlap_ratio",
    "span_us",
    "host_blocked_us",
    "load_chrome_trace",
    "parse_copy_name",
    "intervals_from_chrome_trace",
    "profile",
]
