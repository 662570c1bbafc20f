"""nccl-tests' bandwidth arithmetic: algbw, busbw and the bus factor of each collective."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .. import checks

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
    """nccl-tests' bus-bandwidth factor of ``op`` on ``world_size`` ranks."""
    if op not in _BUS_FACTORS:
        raise ValueError(f"unknown collective {op!r}: pass one of {list(OPS)}")
    world_size = checks.check_count(world_size, "world_size", 1, "ranks")
    return _BUS_FACTORS[op](world_size)


def algbw_gbps(nbytes: int | float, seconds: float) -> float:
    """Algorithm bandwidth in decimal GB/s: the message size as nccl-tests counts it (all_gather's
    whole output, reduce_scatter's whole input) over the seconds of one operation."""
    nbytes = check_positive(nbytes, "nbytes", "the message size in bytes")
    seconds = check_positive(seconds, "seconds", "the time of one operation in seconds")
    return nbytes / seconds / 1e9


def busbw_gbps(op: str, nbytes: int | float, seconds: float, world_size: int) -> float:
    """Bus bandwidth in decimal GB/s, ``algbw x bus_factor(op, n)``: what each link carried."""
    factor = bus_factor(op, world_size)
    return algbw_gbps(nbytes, seconds) * factor


def nccl_version_code() -> int:
    """NCCL's version as nccl-tests' JSON writes it (major * 10000 + minor * 100 + patch), or 0."""
    import torch

    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a CPU build has no NCCL to ask
        return 0
    if not isinstance(version, tuple):
        return int(version)
    major, minor, patch = (version + (0, 0, 0))[:3]
    return int(major) * 10000 + int(minor) * 100 + int(patch)
