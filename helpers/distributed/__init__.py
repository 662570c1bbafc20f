"""Process groups for the NCCL and gloo demonstrations, every wait bounded; nccl-tests' busbw.

``launch(worker, world_size)`` starts one process per rank as ``torchrun`` does, calls
``worker(rank, world_size, *args)`` in each and returns the results in rank order: NCCL with one
GPU per rank, else gloo on the CPU. ``supervise`` returns an ``Outcome`` instead of raising.
Nothing hangs the notebook: at a deadline every rank still running is killed with what it started.
Ranks are forked from a forkserver that imported torch once (a process that initialised CUDA cannot
fork); from a script, call ``launch`` under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

from .bandwidth import algbw_gbps, bus_factor, busbw_gbps, nccl_version_code
from .in_rank import delay, device_idle, mark, rank_device, report, synchronize
from .launch_checks import choose_backend, default_world_size
from .launch_settings import (
    BACKENDS,
    DEATH_NEWS_S,
    FAILURE_GRACE_S,
    LAUNCHER_ENV,
    MAX_TIMEOUT_S,
    MAX_WORLD_SIZE,
    OUTPUT_KIB,
    RANK_ENV,
)
from .outcome import LaunchTimeout, Outcome, WorkerError
from .supervisor import launch, supervise
from .timed_collectives import (
    COLLECTIVE_OPS,
    NOTEBOOK_PLACEMENT,
    collective_sweep,
    collective_timings,
    placement_refused,
)

__all__ = [
    "BACKENDS",
    "COLLECTIVE_OPS",
    "DEATH_NEWS_S",
    "FAILURE_GRACE_S",
    "LAUNCHER_ENV",
    "MAX_TIMEOUT_S",
    "MAX_WORLD_SIZE",
    "NOTEBOOK_PLACEMENT",
    "OUTPUT_KIB",
    "RANK_ENV",
    "LaunchTimeout",
    "Outcome",
    "WorkerError",
    "algbw_gbps",
    "bus_factor",
    "busbw_gbps",
    "choose_backend",
    "collective_sweep",
    "collective_timings",
    "default_world_size",
    "delay",
    "device_idle",
    "launch",
    "mark",
    "nccl_version_code",
    "placement_refused",
    "rank_device",
    "report",
    "supervise",
    "synchronize",
]
