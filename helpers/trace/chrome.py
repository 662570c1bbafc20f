"""Profiling a function (``profile``) and reading a Chrome trace into ``Interval``s."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .. import checks, config
from ..codec import Attachment
from .intervals import GPU_KINDS, Interval, Profile

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


def load_chrome_trace(path: str | Path) -> dict[str, Any]:
    """A Chrome trace file (``.json`` or ``.json.gz``) as ``{"traceEvents": [...]}``."""
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
    """An int from an int, an integral float or a string of digits, else None."""
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
    """``'Memcpy HtoD (Pinned -> Device)'`` -> ``('HtoD', 'Pinned', 'Device')``; None if not said."""
    if name is not None and not isinstance(name, str):
        raise TypeError(
            f"parse_copy_name reads a copy's name from a trace (a string), got {type(name).__name__}"
        )
    match = _COPY_NAME.match(name or "")
    if not match:
        return None, None, None
    return match.group("kind"), match.group("src") or None, match.group("dst") or None


def _gpu_place(event: dict[str, Any], args: dict[str, Any]) -> tuple[int | None, int | None]:
    """(device, stream) of a GPU event: args.device, else the pid (Kineto's lane), else a peer
    copy's inDevice or toDevice; args.stream, else the tid."""
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
    """The complete events of ``load_chrome_trace(...)`` (or a list of events) of the kinds we
    keep, as Intervals sorted by start time."""
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


def profile(
    fn: Callable[[], Any],
    *,
    wait: int = 1,
    warmup: int = 1,
    active: int = 2,
    skip_first: int = 1,
    name: str = "trace",
) -> Profile:
    """Run ``fn()`` ``skip_first + wait + warmup + active`` times under ``torch.profiler``; the
    intervals of the last ``active`` calls, and the gzipped trace under ``config.traces_dir()``.

    ``fn`` must synchronise the GPU work it wants to see finish within its step.
    """
    if not callable(fn):
        raise TypeError(
            f"profile needs a function to call with no arguments, got {type(fn).__name__}"
        )
    checks.check_count(wait, "wait", 0, "steps")
    checks.check_count(warmup, "warmup", 0, "steps")
    checks.check_count(active, "active", 1, "steps")
    checks.check_count(skip_first, "skip_first", 0, "steps")
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
    packed = folder / f"{name}.trace.json.gz"
    with plain.open("rb") as fin, gzip.open(packed, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    plain.unlink()
    return Profile(intervals=intervals, chrome_trace=Attachment(str(packed)), steps=active)
