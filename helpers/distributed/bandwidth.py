"""nccl-tests' bandwidth arithmetic: algbw, busbw and the bus factor of each collective."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .. import hardware

# busbw = algbw x factor(n): what each link carries, comparable with the link's speed.
_BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
OPS = tuple(_BUS_FACTORS)


def check_positive(value: Any, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number ({what}), got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive, finite number ({what}), got {value!r}")
    return float(value)


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor: 2(n-1)/n for all_reduce; (n-1)/n for all_gather,
    reduce_scatter and all_to_all; 1 for broadcast, reduce and send_recv (n = world size).
    """
    if op not in _BUS_FACTORS:
        raise ValueError(f"unknown collective {op!r}: pass one of {list(OPS)}")
    world_size = hardware.check_count(world_size, "world_size", 1, "ranks")
    return _BUS_FACTORS[op](world_size)


def algbw_gbps(nbytes: int | float, seconds: float) -> float:
    """Algorithm bandwidth in decimal GB/s: ``nbytes / seconds / 1e9``.

    ``nbytes`` is the message size as nccl-tests counts it: the buffer for all_reduce,
    broadcast, reduce and send/recv; the whole gathered output for all_gather; the whole
    input for reduce_scatter. ``seconds`` is the time of one operation.
    """
    nbytes = check_positive(nbytes, "nbytes", "the message size in bytes")
    seconds = check_positive(seconds, "seconds", "the time of one operation in seconds")
    return nbytes / seconds / 1e9


def busbw_gbps(op: str, nbytes: int | float, seconds: float, world_size: int) -> float:
    """Bus bandwidth in decimal GB/s, as nccl-tests prints it: ``algbw x bus_factor(op, n)``.

    It is the number to hold against a link's speed: for all_reduce on n ranks each rank
    sends and receives 2(n-1)/n of the buffer, so busbw is what each link carried per second.
    """
    factor = bus_factor(op, world_size)
    return algbw_gbps(nbytes, seconds) * factor


def nccl_version_code() -> int:
    """NCCL's version as nccl-tests' JSON writes it (``major * 10000 + minor * 100 + patch``);
    0 where torch has no NCCL.
    """
    import torch

    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a CPU build has no NCCL to ask
        return 0
    major, minor, patch = (
        (tuple(version) + (0, 0, 0))[:3] if isinstance(version, tuple) else (version, 0, 0)
    )
    return (
        int(major) * 10000 + int(minor) * 100 + int(patch)
        if isinstance(version, tuple)
        else int(version)
    )
