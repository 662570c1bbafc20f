"""Process groups for the NCCL and gloo demonstrations, with every wait bounded; algbw and busbw.

``launch(worker)`` starts one process per rank the way ``torchrun`` does (environment variables
``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, then
``init_process_group``), calls ``worker(rank, world_size, *args)`` in each, and returns what each
rank returned, in rank order. NCCL is used when there is one GPU per rank, gloo (on the CPU)
otherwise, so the same demonstration runs on a laptop and on a GPU machine.

Nothing can hang the notebook: start-up and the workers each have a deadline; at the deadline
every rank still running is killed and a ``TimeoutError`` names the ranks that did not finish.
Each rank runs in a process group of its own, so what it started (a ``subprocess``) is killed
with it, and a rank whose parent goes away (a notebook kernel killed) ends itself. A rank that
dies is named with its exit code or signal (``rank 1 died with SIGKILL``).
``supervise`` is the same without raising: it returns an ``Outcome`` that says what each rank
did, where it was (the ``mark`` calls it reached) and what it printed - the way notebook 06
shows a rank stuck in a ``recv`` whose ``send`` never comes.

| function | job |
| --- | --- |
| ``launch(worker, world_size, ...)`` | run the ranks; their results in rank order, or an exception that names the rank |
| ``supervise(worker, world_size, ...)`` | the same, returning an ``Outcome`` even when ranks fail or hang |
| ``mark(label)`` | inside a worker: note that this rank reached this line, and when |
| ``report(value)`` | inside a worker: hand a value to the parent now (``launch(..., on_report=f)``) |
| ``rank_device()``, ``synchronize()``, ``device_idle()``, ``delay(seconds)`` | inside a worker: the rank's device and its clock |
| ``algbw_gbps``, ``busbw_gbps``, ``bus_factor`` | nccl-tests' bandwidth definitions |
| ``collective_timings``, ``collective_sweep`` | collectives timed as nccl-tests does (worker bodies) |

One module per job: ``launch_settings``, ``bandwidth``, ``in_rank``, ``outcome``, ``launch_checks``,
``rank_process``, ``supervisor`` (the parent's side) and ``timed_collectives``.

Functions defined in a notebook travel to the ranks by value (``cloudpickle``). Ranks are never
forked from the notebook (it may have initialised CUDA, which a forked child cannot use): they are
forked from multiprocessing's *forkserver*, a fresh interpreter started on the first launch that
imports torch and this module once, so every later launch starts its ranks in milliseconds instead
of the seconds that importing torch costs each process ("spawn", where there is no forkserver).
Each rank takes the notebook's environment as it is at the launch. From a script, call ``launch``
under ``if __name__ == "__main__":``, as both start methods require. What a rank prints goes to
``Outcome.printed`` / ``Outcome.log``, not to the notebook.
"""

from __future__ import annotations

from .bandwidth import OPS, algbw_gbps, bus_factor, busbw_gbps, nccl_version_code
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
    STARTUP_TIMEOUT_S,
    TEARDOWN_S,
)
from .outcome import DIED, RAISED, RETURNED, STOPPED, LaunchTimeout, Outcome, WorkerError
from .supervisor import launch, supervise
from .timed_collectives import (
    COLLECTIVE_OPS,
    NOTEBOOK_PLACEMENT,
    PLACEMENTS,
    collective_sweep,
    collective_timings,
    placement_refused,
)

__all__ = [
    "BACKENDS",
    "COLLECTIVE_OPS",
    "DEATH_NEWS_S",
    "DIED",
    "FAILURE_GRACE_S",
    "LAUNCHER_ENV",
    "MAX_TIMEOUT_S",
    "MAX_WORLD_SIZE",
    "NOTEBOOK_PLACEMENT",
    "OPS",
    "OUTPUT_KIB",
    "PLACEMENTS",
    "RAISED",
    "RANK_ENV",
    "RETURNED",
    "STARTUP_TIMEOUT_S",
    "STOPPED",
    "TEARDOWN_S",
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
