"""Memory PyTorch's caching allocators hold on each GPU and pinned, and giving it back (``free_memory``)."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .machine import gpu_count


def memory_in_use() -> dict[str, int]:
    """Bytes PyTorch's caching allocators hold now: ``gpu<i>_allocated`` / ``gpu<i>_reserved``,
    ``pinned_host``."""
    used: dict[str, int] = {}
    for i in range(gpu_count()):
        used[f"gpu{i}_allocated"] = int(torch.cuda.memory_allocated(i))
        used[f"gpu{i}_reserved"] = int(torch.cuda.memory_reserved(i))
    if gpu_count():
        stats = torch.cuda.host_memory_stats()
        used["pinned_host"] = int(
            stats.get("allocated_bytes.current", stats.get("reserved_bytes.current", 0))
        )
    return used


def free_memory(baseline: dict[str, int] | None = None) -> dict[str, int]:
    """Give cached GPU and pinned host memory back to the driver; return ``memory_in_use()`` after.

    ``gc.collect`` (0.15 s in a notebook) runs only when more is in use than ``baseline``."""
    _empty_caches()
    used = memory_in_use()
    if baseline is None or any(
        used[key] > baseline.get(key, 0) for key in used if not key.endswith("_reserved")
    ):
        gc.collect()
        _empty_caches()
        used = memory_in_use()
    return used


def _empty_caches() -> None:
    """Wait for every GPU, then return the cached device and pinned blocks to the driver."""
    if gpu_count():
        for i in range(gpu_count()):
            torch.cuda.synchronize(i)
        torch.cuda.empty_cache()
        torch._C._host_emptyCache()


def pinned_host_bytes(stats: dict[str, Any]) -> tuple[int | None, int | None]:
    """(bytes PyTorch's caching host allocator holds, bytes of them in live tensors), read from
    ``torch.cuda.host_memory_stats()`` under either version's key names; None where not said."""
    if not isinstance(stats, dict):
        raise TypeError(
            f"pinned_host_bytes takes the dict of torch.cuda.host_memory_stats(), got {type(stats).__name__}"
        )
    if "reserved_bytes.current" in stats:
        return stats["reserved_bytes.current"], stats.get(
            "active_bytes.current", stats.get("allocated_bytes.current")
        )
    if "active_bytes.current" in stats:
        return stats.get("allocated_bytes.current"), stats["active_bytes.current"]
    return None, None


@dataclass(frozen=True)
class Footprint:
    """The most memory one experiment held, in bytes: reserved on each GPU, pinned, and the
    process's peak resident memory (``host``); None where not said. Its ranks are not counted."""

    gpu: tuple[int, ...]
    pinned: int | None
    host: int | None


def start_footprint() -> None:
    """Start a ``footprint()``: reset the allocators' peaks and the process's peak resident memory."""
    if gpu_count() and torch.cuda.is_initialized():
        for i in range(gpu_count()):
            torch.cuda.reset_peak_memory_stats(i)
        if hasattr(torch.cuda, "reset_peak_host_memory_stats"):  # older PyTorch lacks it
            torch.cuda.reset_peak_host_memory_stats()
    with contextlib.suppress(OSError):  # not Linux, or not allowed: the peak since the start
        Path("/proc/self/clear_refs").write_text("5")


def footprint() -> Footprint:
    """The peaks since ``start_footprint()``."""
    gpu: tuple[int, ...] = ()
    pinned = None
    if gpu_count() and torch.cuda.is_initialized():
        gpu = tuple(int(torch.cuda.max_memory_reserved(i)) for i in range(gpu_count()))
        stats = torch.cuda.host_memory_stats()
        held = "reserved_bytes.peak" if "reserved_bytes.peak" in stats else "allocated_bytes.peak"
        pinned = int(stats[held]) if held in stats else None
    host = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                host = int(line.split()[1]) * 1024  # kB
    return Footprint(gpu, pinned, host)


def limit_gpu_memory(limit_bytes: int) -> None:
    """Let PyTorch's allocator take at most ``limit_bytes`` on each GPU (a smaller GPU's memory)."""
    if not isinstance(limit_bytes, int) or limit_bytes <= 0:
        raise ValueError(f"limit_bytes must be a positive number of bytes, got {limit_bytes!r}")
    for i in range(gpu_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit_bytes / total), i)
