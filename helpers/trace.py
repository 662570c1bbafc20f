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

Taught in 03_streams_and_overlap (and used by the notebooks that show a timeline).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import checks, config
from .codec import Attachment, register

KINDS = ("kernel", "memcpy", "memset", "runtime", "annotation", "op")
GPU_KINDS = ("kernel", "memcpy", "memset")
COPY_KINDS = ("HtoD", "DtoH", "DtoD", "PtoP")

# Chrome-trace category (lower-cased) -> Interval.kind. torch.profiler (Kineto) writes the
# lower-case names; Kineto before 2022 wrote "Kernel", "Memcpy", "Memset", "Runtime", "Operator".
_CATEGORY_KIND = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "driver": "runtime",
    "user_annotation": "annotation",
    "gpu_user_annotation": "annotation",
    "cpu_op": "op",
    "operator": "op",
}
_GPU_ANNOTATION = "gpu_user_annotation"

# "Memcpy HtoD (Pinned -> Device)", "Memcpy PtoP (Device -> Device)", "Memcpy DtoD", ...
_COPY_NAME = re.compile(
    r"^\s*Memcpy\s+(?P<kind>[A-Za-z]+)(?:\s*\((?P<src>[^()]*?)\s*->\s*(?P<dst>[^()]*?)\))?"
)
_TRAILING_INT = re.compile(r"(-?\d+)\s*$")


# ---------------------------------------------------------------- the data


@register
@dataclass
class Interval:
    """One slice of a trace, with times in microseconds on the trace's clock.

    ``kind`` is one of ``KINDS``: 'kernel', 'memcpy', 'memset' (GPU work, with ``device`` and
    ``stream``), 'runtime' (a CUDA runtime or driver call on a host ``thread``), 'annotation'
    (``record_function`` ranges and ``ProfilerStep#N``; on a GPU lane when the profiler mirrored
    them there) or 'op' (an aten operator on the host). ``correlation`` joins a runtime call to
    the GPU work it launched. Copies carry ``nbytes``, ``copy_kind`` ('HtoD', 'DtoH', 'DtoD',
    'PtoP') and the memory at each end (``src_memory``/``dst_memory``: 'Pageable', 'Pinned',
    'Device', ...), read from the copy's name. A peer copy sits on the lane of ``device`` and
    says its ends in ``src_device``/``dst_device``.

    Used by the lessons (helpers/lessons/).
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
        """``end_us - start_us``, in microseconds."""
        return self.end_us - self.start_us

    @property
    def on_gpu(self) -> bool:
        """True for work that ran on a GPU (a kernel, copy or memset)."""
        return self.kind in GPU_KINDS


@register
@dataclass
class Profile:
    """What ``profile`` returns: the intervals of the active steps and the trace they came from.

    ``chrome_trace`` is the gzipped Chrome trace (open it in https://ui.perfetto.dev); it is
    copied beside a recording when the profile is saved, and may be None. ``steps`` is the
    number of profiled (active) steps.

    Taught in 03_streams_and_overlap.
    """

    intervals: list[Interval]
    chrome_trace: Attachment | None = None
    steps: int = 0

    def select(self, **criteria: Any) -> list[Interval]:
        """``select(self.intervals, **criteria)``: see the module function ``select``."""
        return select(self.intervals, **criteria)


# ---------------------------------------------------------------- reading a Chrome trace


def load_chrome_trace(path: str | Path) -> dict[str, Any]:
    """Read a Chrome trace file (``.json`` or ``.json.gz``) into ``{"traceEvents": [...]}``.

    A file that holds a bare list of events is wrapped in that form, so callers see one shape.

    Used by trace.profile.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"load_chrome_trace needs the path of a trace file, got {type(path).__name__}"
        )
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"no trace file at {path}: pass the path of a .json or .json.gz Chrome trace"
        )
    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if gzipped else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as err:
        raise ValueError(
            f"{path} is not a readable Chrome trace (JSON, optionally gzipped): {err}"
        ) from err
    if isinstance(data, list):
        return {"traceEvents": data}
    if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        return data
    raise ValueError(
        f"{path} holds JSON but no trace events: expected a list or {{'traceEvents': [...]}}"
    )


def _as_int(value: Any) -> int | None:
    """An int from an int, an integral float or a string of digits; None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _trailing_int(value: Any) -> int | None:
    """Like ``_as_int``, but also reads ``"stream 7"`` (old Kineto's tid for GPU lanes) as 7."""
    number = _as_int(value)
    if number is None and isinstance(value, str):
        match = _TRAILING_INT.search(value)
        number = int(match.group(1)) if match else None
    return number


def parse_copy_name(name: str) -> tuple[str | None, str | None, str | None]:
    """``'Memcpy HtoD (Pinned -> Device)'`` -> ``('HtoD', 'Pinned', 'Device')``.

    Parts the name does not say are None (``'Memcpy DtoH'`` -> ``('DtoH', None, None)``).

    Used by trace.intervals_from_chrome_trace (the copy kind and memories of a copy).
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(
            f"parse_copy_name reads a copy's name from a trace (a string), got {type(name).__name__}"
        )
    match = _COPY_NAME.match(name or "")
    if not match:
        return None, None, None
    return match.group("kind"), match.group("src") or None, match.group("dst") or None


def _gpu_place(event: dict[str, Any], args: dict[str, Any]) -> tuple[int | None, int | None]:
    """(device, stream) of a GPU event.

    The device is args.device, else an integer pid (the lane Kineto drew it on), else, for a
    peer copy, args.inDevice (where the copy ran) or args.toDevice. The stream is args.stream,
    else the tid (``7`` or old Kineto's ``"stream 7"``).
    """
    device = _as_int(args.get("device"))
    for fallback in (event.get("pid"), args.get("inDevice"), args.get("toDevice")):
        if device is None:
            device = _as_int(fallback)
    stream = _as_int(args.get("stream"))
    if stream is None:
        stream = _trailing_int(event.get("tid"))
    return device, stream


def _interval_from_event(event: Any) -> Interval | None:
    """The Interval of one complete ("ph": "X") trace event, or None for events we do not keep."""
    if not isinstance(event, dict) or event.get("ph") != "X":
        return None
    category = str(event.get("cat", "")).lower()
    kind = _CATEGORY_KIND.get(category)
    if kind is None:
        return None
    try:
        start = float(event["ts"])
        duration = float(event.get("dur", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    args = event["args"] if isinstance(event.get("args"), dict) else {}
    name = str(event.get("name", ""))
    interval = Interval(
        kind=kind,
        name=name,
        start_us=start,
        end_us=start + max(duration, 0.0),
        correlation=_as_int(args.get("correlation")),
    )
    if kind in GPU_KINDS or category == _GPU_ANNOTATION:
        interval.device, interval.stream = _gpu_place(event, args)
    else:
        interval.thread = _as_int(event.get("tid"))
    if kind in ("memcpy", "memset"):
        interval.nbytes = _as_int(args.get("bytes"))
    if kind == "memcpy":
        interval.copy_kind, interval.src_memory, interval.dst_memory = parse_copy_name(name)
        interval.src_device = _as_int(args.get("fromDevice"))
        interval.dst_device = _as_int(args.get("toDevice"))
    return interval


def intervals_from_chrome_trace(trace: dict[str, Any] | list[Any]) -> list[Interval]:
    """The kernels, copies, memsets, runtime calls, annotations and ops of a Chrome trace.

    ``trace`` is what ``load_chrome_trace`` returns (or the bare list of events). Only complete
    events (``"ph": "X"``) of the categories torch.profiler writes are kept; times stay in
    microseconds on the trace's clock. The result is sorted by start time.

    Used by trace.profile.
    """
    if isinstance(trace, dict):
        events = trace.get("traceEvents")
        if not isinstance(events, list):
            raise ValueError(
                "the trace dict has no 'traceEvents' list: pass load_chrome_trace(path)"
            )
    elif isinstance(trace, list):
        events = trace
    else:
        raise TypeError(
            f"intervals_from_chrome_trace needs a trace dict or a list of events, got {type(trace).__name__}"
        )
    intervals = [iv for iv in map(_interval_from_event, events) if iv is not None]
    intervals.sort(key=lambda iv: (iv.start_us, iv.end_us))
    return intervals


# ---------------------------------------------------------------- profiling


def _check_schedule(wait: Any, warmup: Any, active: Any, skip_first: Any) -> None:
    checks.check_count(wait, "wait", 0, "steps")
    checks.check_count(warmup, "warmup", 0, "steps")
    checks.check_count(active, "active", 1, "steps")
    checks.check_count(skip_first, "skip_first", 0, "steps")


def _gzip_file(src: Path, dest: Path) -> Path:
    with src.open("rb") as fin, gzip.open(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    return dest


def profile(
    fn: Callable[[], Any],
    *,
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    skip_first: int = 1,
    name: str = "trace",
) -> Profile:
    """Run ``fn()`` under ``torch.profiler`` and return the intervals of the active steps.

    ``fn`` is called ``skip_first + wait + warmup + active`` times, with ``prof.step()`` after
    each call; ``torch.profiler.schedule`` records only the last ``active`` calls (the first
    calls warm up caches, the allocator and CUDA). CPU activity is always profiled, CUDA
    activity when CUDA is available. ``fn`` must synchronise the GPU work it wants to see
    finish within its step. The Chrome trace is written gzipped to a new folder under
    ``config.traces_dir()`` (``build/traces/``) as ``<name>.trace.json.gz`` and kept as
    ``Profile.chrome_trace``: open it in Perfetto after the run.

    Taught in 03_streams_and_overlap.
    """
    if not callable(fn):
        raise TypeError(
            f"profile needs a function to call with no arguments, got {type(fn).__name__}"
        )
    _check_schedule(wait, warmup, active, skip_first)
    if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(
            f"name must be a short file-name-safe string such as 'h2d_overlap', got {name!r}"
        )

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=config.traces_dir()))
    plain = folder / f"{name}.trace.json"
    exported: list[Path] = []

    def on_trace_ready(prof: torch.profiler.profile) -> None:
        prof.export_chrome_trace(str(plain))
        exported.append(plain)

    schedule = torch.profiler.schedule(
        wait=wait, warmup=warmup, active=active, skip_first=skip_first, repeat=1
    )
    with torch.profiler.profile(
        activities=activities, schedule=schedule, on_trace_ready=on_trace_ready
    ) as prof:
        for _ in range(skip_first + wait + warmup + active):
            fn()
            prof.step()
    if not exported or not plain.is_file():
        raise RuntimeError(
            f"torch.profiler wrote no trace into {folder}; was the profiler disabled?"
        )
    intervals = intervals_from_chrome_trace(load_chrome_trace(plain))
    packed = _gzip_file(plain, folder / f"{name}.trace.json.gz")
    plain.unlink()
    return Profile(intervals=intervals, chrome_trace=Attachment(str(packed)), steps=active)


# ---------------------------------------------------------------- choosing intervals


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
    """The intervals that match every criterion given (None means any).

    ``kind``: one of ``KINDS`` or several; ``name``: a substring of the name (case matters);
    ``device``/``stream``: GPU index and stream id; ``copy_kind``: 'HtoD', 'DtoH', 'DtoD', 'PtoP'.

    Used by the lessons (helpers/lessons/).
    """
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
    """How many intervals have this ``kind`` and a name containing ``name``.

    Taught in 02_non_blocking.
    """
    return len(select(intervals, kind=kind, name=name))


def gpu_work_of(intervals: Sequence[Interval], runtime_call: Interval | str) -> list[Interval]:
    """The GPU intervals (kernels, copies, memsets) launched by a runtime call.

    ``runtime_call`` is a 'runtime' Interval, joined on its correlation id; or a name such as
    'cudaMemcpyAsync', which takes every runtime call whose name contains it.

    Used by the course's tests (test_trace.py ties each copy to the runtime call that
    queued it).
    """
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
    """Copies of the intervals with ``t0`` (default: the earliest start) subtracted from times.

    Used by the lessons (helpers/lessons/).
    """
    intervals = _check_intervals(intervals)
    if not intervals and t0 is None:
        return []
    if t0 is None:
        t0 = min(iv.start_us for iv in intervals)
    return [
        dataclasses.replace(iv, start_us=iv.start_us - t0, end_us=iv.end_us - t0)
        for iv in intervals
    ]


# ---------------------------------------------------------------- overlap arithmetic


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
    """The time the intervals cover, as sorted, disjoint ``(start_us, end_us)`` pairs.

    Nested and overlapping intervals fuse, and so do intervals that touch end to start.

    Used by trace.covered_us, trace.overlap_us and trace.overlap_ratio.
    """
    merged: list[tuple[float, float]] = []
    for start, end in sorted(_spans(intervals)):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def covered_us(intervals: Iterable[Interval | tuple[float, float]]) -> float:
    """Microseconds during which at least one of the intervals runs (overlaps counted once).

    Used by the lessons (helpers/lessons/).
    """
    return sum(end - start for start, end in merge(intervals))


def overlap_us(
    a: Iterable[Interval | tuple[float, float]], b: Iterable[Interval | tuple[float, float]]
) -> float:
    """Microseconds during which something of ``a`` and something of ``b`` both run.

    Each set is merged first, then the two sorted lists are swept together (as Holistic Trace
    Analysis measures communication/computation overlap).

    Used by the lessons (helpers/lessons/).
    """
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
    entirely hidden behind the other, 0.0 when they never run together.

    The denominator is the time of the *shorter* set, whichever it is, so the ratio is symmetric
    and says how much of the work that could be hidden was hidden (two lanes of copies and
    kernels, neither of which is "the" communication). Holistic Trace Analysis instead divides
    the same overlap by the communication time alone; the two agree whenever ``a`` is the
    communication and the shorter set. For HTA's number, divide ``overlap_us(comm, compute)``
    by ``covered_us(comm)`` yourself.

    Used by the lessons (helpers/lessons/).
    """
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
    """Microseconds from the earliest start to the latest end.

    Used by the lessons (helpers/lessons/).
    """
    spans = _spans(intervals)
    if not spans:
        raise ValueError("span_us needs at least one interval")
    return max(end for _, end in spans) - min(start for start, _ in spans)


def host_blocked_us(intervals: Sequence[Interval], name: str) -> float:
    """Microseconds the host spent inside runtime calls whose name contains ``name``.

    E.g. 'cudaMemcpyAsync' (long for a pageable copy, short for a pinned one) or
    'cudaStreamSynchronize'. Calls nested on one thread are counted once; time on different
    threads adds up.

    Taught in 02_non_blocking.
    """
    if not isinstance(name, str) or not name:
        raise TypeError("name must be (part of) a runtime call's name, e.g. 'cudaMemcpyAsync'")
    calls = select(intervals, kind="runtime", name=name)
    threads = {iv.thread for iv in calls}
    return sum(covered_us([iv for iv in calls if iv.thread == t]) for t in threads)
