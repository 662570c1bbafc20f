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
    """Inside a worker: tell the parent that this rank reached ``label``, and when.

    Sent at once (not at the end), so a rank that then hangs still shows how far it got:
    ``Outcome.marks[rank]`` lists ``[seconds since the worker started, label]``. Outside a
    launched worker it does nothing.
    """
    if not isinstance(label, str):
        raise TypeError(
            f"mark needs a short text label such as 'recv returned', got {type(label).__name__}"
        )
    if _pipe is not None:
        _pipe.send(("mark", time.monotonic(), label))


def report(value: Any) -> None:
    """Inside a worker: send ``value`` (anything picklable: a row of a sweep) to the parent now,
    where ``launch(..., on_report=f)`` calls ``f(rank, value)`` as it arrives. Outside a
    launched worker it does nothing.
    """
    if _pipe is not None:
        _pipe.send(("report", cloudpickle.dumps(value)))


def backend_here() -> str | None:
    return dist.get_backend() if dist.is_available() and dist.is_initialized() else None


def rank_device() -> torch.device:
    """Inside a worker: where this rank's tensors live - its GPU under NCCL, the CPU under gloo."""
    if backend_here() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def synchronize() -> None:
    """Inside a worker: wait until this rank's GPU has finished everything queued so far
    (``torch.cuda.synchronize()`` under NCCL; nothing to wait for under gloo).
    """
    if rank_device().type == "cuda":
        torch.cuda.synchronize()


def device_idle() -> bool:
    """Inside a worker: has everything queued on this rank's current stream finished?

    Under NCCL it asks the stream (``torch.cuda.current_stream().query()``) without waiting,
    so right after a ``recv`` returns it says whether the data is already there. Under gloo
    the host does the work itself, so it is always True.
    """
    if rank_device().type == "cuda":
        return torch.cuda.current_stream().query()
    return True


def delay(seconds: float) -> None:
    """Inside a worker: make this rank's next operation start ``seconds`` late.

    Under NCCL a spin kernel keeps the current stream busy for that long and the host goes
    on at once (``timing.hold_stream``): the next collective is queued behind it, so its data
    leaves late while the host is free. Under gloo the host itself sleeps.
    """
    seconds = float(seconds)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    if rank_device().type == "cuda":
        from ..timing import hold_stream

        hold_stream(seconds * 1e6)
    else:
        time.sleep(seconds)
