"""Profiler traces as intervals: what ran where and when, how much overlapped, what blocked.

``profile(fn)`` runs ``fn`` under ``torch.profiler`` with a schedule, keeps the Chrome trace
(gzipped: Perfetto and chrome://tracing open ``.json.gz``) and turns it into ``Interval``s:
kernels, copies and memsets on a lane per (GPU, stream); CUDA runtime calls, aten ops and
annotations on the host thread that made them. Times stay on the trace's own clock, in
microseconds; ``relative`` shifts them to start at 0 when you want that.

Overlap is measured the way Meta's Holistic Trace Analysis does it: merge each set of
intervals into disjoint ones, then add up the time covered by both sets (``overlap_us``);
``overlap_ratio`` divides that by the shorter set's time (HTA divides by communication time).

| function | gives |
| --- | --- |
| ``profile(fn, ...)`` | a ``Profile``: intervals of the active steps, the trace file, the step count |
| ``load_chrome_trace``, ``intervals_from_chrome_trace`` | the same from a trace file exported elsewhere |
| ``select``, ``count``, ``gpu_work_of`` | the intervals you want; the GPU work of a runtime call |
| ``merge``, ``covered_us``, ``overlap_us``, ``overlap_ratio``, ``span_us`` | overlap arithmetic (us) |
| ``host_blocked_us`` | how long the host sat in runtime calls such as ``cudaMemcpyAsync`` |
"""

from __future__ import annotations

from .chrome import (
    intervals_from_chrome_trace,
    load_chrome_trace,
    parse_copy_name,
    profile,
)
from .intervals import (
    COPY_KINDS,
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
    "COPY_KINDS",
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
