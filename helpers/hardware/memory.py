"""Memory PyTorch holds: what its caching allocators keep on each GPU and in pinned host memory
(``memory_in_use``, ``pinned_host_bytes``), and giving it back between experiments
(``free_memory``).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .machine import gpu_count


def memory_in_use() -> dict[str, int]:
    """Bytes held now: ``gpu<i>_allocated`` / ``gpu<i>_reserved`` by PyTorch's caching allocator
    on each GPU, and ``pinned_host`` held by its caching host (pinned) allocator.
    """
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

    Called after every live experiment, so one experiment's memory never burdens the next. Memory
    that only a reference cycle still holds is freed by a garbage collection (``gc.collect``),
    which takes about 0.15 s in a kernel that has imported torch and matplotlib: it runs only
    when, once the caches are emptied, more memory is in use than ``baseline`` (a
    ``memory_in_use()`` taken before the experiment; always, without one).
    """
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
    """Wait for every GPU, then return the cached device and pinned host blocks to the driver."""
    if gpu_count():
        for i in range(gpu_count()):
            torch.cuda.synchronize(i)
        torch.cuda.empty_cache()
        torch._C._host_emptyCache()


def pinned_host_bytes(stats: dict[str, Any]) -> tuple[int | None, int | None]:
    """(bytes PyTorch's caching host allocator holds, bytes of them in live tensors), read from
    ``torch.cuda.host_memory_stats()``; None for a figure this PyTorch does not report.

    The key names changed between PyTorch versions: older ones report held memory as
    'reserved_bytes' and live memory as 'allocated_bytes'; newer ones report held memory as
    'allocated_bytes' (live + cached) and live memory as 'active_bytes'.
    """
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
    """The most memory one experiment held, in bytes: on each GPU (``gpu``: PyTorch's caching
    allocator, reserved), pinned host memory (``pinned``: its caching host allocator) and the
    notebook's process as a whole (``host``: peak resident memory, pinned included). None where
    this machine does not say (no GPU; not Linux). Processes an experiment starts (06's ranks)
    are not counted.

    Used by records.run_or_replay.
    """

    gpu: tuple[int, ...]
    pinned: int | None
    host: int | None


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def start_footprint() -> None:
    """Start a ``footprint()``: reset the peaks of the GPUs' and the pinned allocators and the
    process's peak resident memory (Linux: writing 5 to /proc/self/clear_refs).

    Used by records.run_or_replay (before each live experiment).
    """
    if gpu_count() and torch.cuda.is_initialized():
        for i in range(gpu_count()):
            torch.cuda.reset_peak_memory_stats(i)
        if hasattr(torch.cuda, "reset_peak_host_memory_stats"):  # PyTorch 2.11 has it; guard older
            torch.cuda.reset_peak_host_memory_stats()
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:  # not Linux, or not allowed: the peak is the process's since it started
        pass


def footprint() -> Footprint:
    """The peaks since ``start_footprint()``.

    Used by records.run_or_replay (after each live experiment).
    """
    gpu: tuple[int, ...] = ()
    pinned = None
    if gpu_count() and torch.cuda.is_initialized():
        gpu = tuple(int(torch.cuda.max_memory_reserved(i)) for i in range(gpu_count()))
        stats = torch.cuda.host_memory_stats()
        held = "reserved_bytes.peak" if "reserved_bytes.peak" in stats else "allocated_bytes.peak"
        pinned = int(stats[held]) if held in stats else None
    host = None
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                host = int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return Footprint(gpu, pinned, host)


def limit_gpu_memory(limit_bytes: int) -> None:
    """Let PyTorch's allocator take at most ``limit_bytes`` on each GPU
    (``torch.cuda.set_per_process_memory_fraction``): a smaller GPU's memory, to check that a
    notebook fits it. An experiment that needs more fails with PyTorch's out-of-memory error.

    Used by records.run_or_replay (``COURSE_GPU_MEMORY_GIB``).
    """
    if not isinstance(limit_bytes, int) or limit_bytes <= 0:
        raise ValueError(f"limit_bytes must be a positive number of bytes, got {limit_bytes!r}")
    for i in range(gpu_count()):
        total = torch.cuda.get_device_properties(i).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit_bytes / total), i)
