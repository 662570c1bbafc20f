"""Intervals of a profile, choosing among them, and overlap arithmetic (microseconds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import checks
from ..codec import Attachment, register

KINDS = ("kernel", "memcpy", "memset", "runtime", "annotation", "op")
GPU_KINDS = ("kernel", "memcpy", "memset")
COPY_KINDS = ("HtoD", "DtoH", "DtoD", "PtoP")


@register
@dataclass
class Interval:
    """One slice of a trace, with times in microseconds on the trace's clock.

    GPU work has a ``device`` and ``stream``, host work a ``thread``; ``correlation`` joins a
    runtime call to the GPU work it launched. Copies say their kind and the memory at each end.
    """

    kind: str
    name: str
    start_us: float
    end_us: float
    device: int | None = None
    stream: int | None = None
    thread: int | None = None
    correlation: int | None = None
    nbytes: int | None = None
    copy_kind: str | None = None
    src_memory: str | None = None
    dst_memory: str | None = None
    src_device: int | None = None
    dst_device: int | None = None

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    @property
    def on_gpu(self) -> bool:
        return self.kind in GPU_KINDS


@register
@dataclass
class Profile:
    """What ``profile`` returns: the intervals of the ``steps`` active steps and the gzipped
    Chrome trace they came from (open it in https://ui.perfetto.dev; may be None)."""

    intervals: list[Interval]
    chrome_trace: Attachment | None = None
    steps: int = 0

    def select(self, **criteria: Any) -> list[Interval]:
        """``select(self.intervals, **criteria)``."""
        return select(self.intervals, **criteria)


def _check_intervals(intervals: Any, what: str = "intervals") -> list[Interval]:
    if isinstance(intervals, Profile):
        return list(intervals.intervals)
    if isinstance(intervals, (str, bytes)) or not isinstance(intervals, Iterable):
        raise TypeError(
            f"{what} must be a list of trace.Interval (e.g. profile.intervals), got {type(intervals).__name__}"
        )
    intervals = list(intervals)
    for iv in intervals:
        if not isinstance(iv, Interval):
            raise TypeError(f"{what} must hold trace.Interval objects, found a {type(iv).__name__}")
    return intervals


def _kind_set(kind: str | Iterable[str] | None) -> set[str] | None:
    if kind is None:
        return None
    kinds = {kind} if isinstance(kind, str) else set(kind)
    unknown = kinds - set(KINDS)
    if unknown:
        raise ValueError(
            f"unknown interval kind(s) {sorted(unknown)}: use one or more of {list(KINDS)}"
        )
    return kinds


def select(
    intervals: Sequence[Interval],
    *,
    kind: str | Iterable[str] | None = None,
    name: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    copy_kind: str | None = None,
) -> list[Interval]:
    """The intervals that match every criterion given (None means any; ``name``: a substring)."""
    intervals = _check_intervals(intervals)
    kinds = _kind_set(kind)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a substring to look for, got {type(name).__name__}")
    if copy_kind is not None and copy_kind not in COPY_KINDS:
        raise ValueError(
            f"copy_kind {copy_kind!r} is not one the profiler reports: use one of {list(COPY_KINDS)} "
            f"(HtoD is host to device)"
        )
    for label, number in (("device", device), ("stream", stream)):
        if number is not None and not checks.is_whole(number):
            raise TypeError(f"{label} must be an int index (or None for any), got {number!r}")
    return [
        iv
        for iv in intervals
        if (kinds is None or iv.kind in kinds)
        and (name is None or name in iv.name)
        and (device is None or iv.device == device)
        and (stream is None or iv.stream == stream)
        and (copy_kind is None or iv.copy_kind == copy_kind)
    ]


def count(
    intervals: Sequence[Interval], kind: str | Iterable[str] | None = None, name: str | None = None
) -> int:
    """How many intervals have this ``kind`` and a name containing ``name``."""
    return len(select(intervals, kind=kind, name=name))


def gpu_work_of(intervals: Sequence[Interval], runtime_call: Interval | str) -> list[Interval]:
    """The GPU intervals launched by a 'runtime' Interval, or by every runtime call whose name
    contains ``runtime_call`` ('cudaMemcpyAsync')."""
    intervals = _check_intervals(intervals)
    if isinstance(runtime_call, Interval):
        calls = [runtime_call]
    elif isinstance(runtime_call, str):
        calls = select(intervals, kind="runtime", name=runtime_call)
    else:
        raise TypeError(
            "runtime_call must be a 'runtime' trace.Interval or a runtime call's name, "
            f"got {type(runtime_call).__name__}"
        )
    ids = {c.correlation for c in calls if c.correlation is not None}
    return [iv for iv in intervals if iv.on_gpu and iv.correlation in ids]


def relative(intervals: Sequence[Interval], t0: float | None = None) -> list[Interval]:
    """The intervals with ``t0`` (default: the earliest start) subtracted from their times."""
    intervals = _check_intervals(intervals)
    if t0 is None:
        t0 = min((iv.start_us for iv in intervals), default=0.0)
    return [
        dataclasses.replace(iv, start_us=iv.start_us - t0, end_us=iv.end_us - t0)
        for iv in intervals
    ]


def _spans(intervals: Iterable[Interval | tuple[float, float]]) -> list[tuple[float, float]]:
    if isinstance(intervals, Profile):
        intervals = intervals.intervals
    if isinstance(intervals, (str, bytes)) or not isinstance(intervals, Iterable):
        raise TypeError(
            f"expected a list of trace.Interval or (start_us, end_us) pairs, got {type(intervals).__name__}"
        )
    spans = []
    for iv in intervals:
        if isinstance(iv, Interval):
            start, end = iv.start_us, iv.end_us
        elif isinstance(iv, (tuple, list)) and len(iv) == 2:
            start, end = float(iv[0]), float(iv[1])
        else:
            raise TypeError(f"expected a trace.Interval or a (start_us, end_us) pair, got {iv!r}")
        if end < start:
            raise ValueError(
                f"an interval ends before it starts ({start} > {end}): check the trace"
            )
        spans.append((start, end))
    return spans


def merge(intervals: Iterable[Interval | tuple[float, float]]) -> list[tuple[float, float]]:
    """The time the intervals cover, as sorted, disjoint ``(start_us, end_us)`` pairs."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(_spans(intervals)):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def covered_us(intervals: Iterable[Interval | tuple[float, float]]) -> float:
    """Microseconds during which at least one of the intervals runs (overlaps counted once)."""
    return sum(end - start for start, end in merge(intervals))


def overlap_us(
    a: Iterable[Interval | tuple[float, float]], b: Iterable[Interval | tuple[float, float]]
) -> float:
    """Microseconds during which something of ``a`` and something of ``b`` both run."""
    left, right = merge(a), merge(b)
    total, i, j = 0.0, 0, 0
    while i < len(left) and j < len(right):
        start = max(left[i][0], right[j][0])
        end = min(left[i][1], right[j][1])
        total += max(0.0, end - start)
        if left[i][1] <= right[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlap_ratio(
    a: Iterable[Interval | tuple[float, float]], b: Iterable[Interval | tuple[float, float]]
) -> float:
    """``overlap_us(a, b) / min(covered_us(a), covered_us(b))``: 1.0 when the shorter set is
    hidden behind the other. HTA divides by the communication's time instead."""
    a, b = merge(a), merge(b)
    for label, spans in (("a", a), ("b", b)):
        if not spans:
            raise ValueError(
                f"overlap_ratio: set {label} is empty; select some intervals first "
                "(e.g. select(profile.intervals, kind='memcpy'))"
            )
    shorter = min(covered_us(a), covered_us(b))
    if shorter <= 0:
        raise ValueError("overlap_ratio: one set covers no time (zero-length intervals only)")
    return overlap_us(a, b) / shorter


def span_us(intervals: Iterable[Interval | tuple[float, float]]) -> float:
    """Microseconds from the earliest start to the latest end."""
    spans = _spans(intervals)
    if not spans:
        raise ValueError("span_us needs at least one interval")
    return max(end for _, end in spans) - min(start for start, _ in spans)


def host_blocked_us(intervals: Sequence[Interval], name: str) -> float:
    """Microseconds the host spent inside runtime calls whose name contains ``name`` (nested
    calls counted once per thread)."""
    if not isinstance(name, str) or not name:
        raise TypeError("name must be (part of) a runtime call's name, e.g. 'cudaMemcpyAsync'")
    calls = select(intervals, kind="runtime", name=name)
    threads = {iv.thread for iv in calls}
    return sum(covered_us([iv for iv in calls if iv.thread == t]) for t in threads)
