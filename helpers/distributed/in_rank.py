"""Inside a launched rank: ``mark``, ``report``, the rank's device and its clock."""

from __future__ import annotations

import math
import time
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle
import torch
import torch.distributed as dist

_pipe: Connection | None = None  # this rank's line to the parent, set in the rank's process


def mark(label: str) -> None:
    """Inside a worker: tell the parent now that this rank reached ``label`` (``Outcome.marks``),
    so a rank that then hangs still shows how far it got; outside a worker, nothing."""
    if not isinstance(label, str):
        raise TypeError(
            f"mark needs a short text label such as 'recv returned', got {type(label).__name__}"
        )
    if _pipe is not None:
        _pipe.send(("mark", time.monotonic(), label))


def report(value: Any) -> None:
    """Inside a worker: send ``value`` to the parent now, to ``launch(..., on_report=f)``'s
    ``f(rank, value)``; outside a worker, nothing."""
    if _pipe is not None:
        _pipe.send(("report", cloudpickle.dumps(value)))


def backend_here() -> str | None:
    return dist.get_backend() if dist.is_available() and dist.is_initialized() else None


def rank_device() -> torch.device:
    """Inside a worker: this rank's GPU under NCCL, the CPU under gloo."""
    if backend_here() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def synchronize() -> None:
    """Inside a worker: wait for this rank's GPU to finish what is queued (nothing under gloo)."""
    if rank_device().type == "cuda":
        torch.cuda.synchronize()


def device_idle() -> bool:
    """Inside a worker: has everything queued on this rank's current stream finished? Asked
    without waiting (right after a ``recv``: is the data there yet?); always True under gloo."""
    if rank_device().type == "cuda":
        return torch.cuda.current_stream().query()
    return True


def delay(seconds: float) -> None:
    """Inside a worker: make this rank's next operation start ``seconds`` late: under NCCL a spin
    kernel holds the stream while the host goes on (``timing.hold_stream``); under gloo, a sleep."""
    seconds = float(seconds)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    if rank_device().type == "cuda":
        from ..timing import hold_stream

        hold_stream(seconds * 1e6)
    else:
        time.sleep(seconds)
