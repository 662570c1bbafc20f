"""The rank processes between launches: started from the forkserver, kept (with their CUDA
context, loaded kernels and imports) for the next launch of the same shape when ``keep_ranks``
says so, and closed.

A kept rank serves the next launch with the same backend, world size and environment (ranks of
up to ``KEPT_SHAPES`` shapes are kept, so gloo and NCCL launches can take turns); every
launch still joins a new process group (``init_process_group`` on a fresh port) and leaves it at
its end, so what a launch measures of NCCL, a first ``recv`` included, is what a new group does.
What a kept process keeps: its CUDA context, the kernels it has loaded, the modules it has
imported, and calibrations such as ``timing.sleep_cycles_per_us``. A launch that fails, hangs
or is stopped ends its ranks; for NCCL, new ones are started at once (``start_ahead``) and start
CUDA and NCCL while the notebook goes on, so the next launch finds them ready.

Used by helpers.distributed.supervisor.
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .rank_process import _rank_main

_KEEP = False  # whether launches hand their ranks to the next one (keep_ranks)
KEPT_SHAPES = 4  # how many shapes of launch (backend, world size, environment) keep ranks at once


@dataclass
class _Idle:
    """Ranks that finished a launch, waiting for the next one of the same shape."""

    shape: tuple[Any, ...]
    processes: list[Any] = field(default_factory=list)
    conns: list[Connection] = field(default_factory=list)


_idle: dict[tuple[Any, ...], _Idle] = {}  # by shape, the most recently used last


def keep_ranks(keep: bool = True) -> None:
    """Keep the rank processes of a launch that ended well for the next launch of the same
    backend, world size and environment (``keep=True``), or end them after each launch
    (``keep=False``, the default, as ``torchrun`` does). Each launch joins a new process group
    either way; kept processes only skip starting CUDA and NCCL and loading kernels again (about
    1 s per NCCL launch on two H200s). After an NCCL launch that was stopped, its successors are
    started at once (``start_ahead``). ``keep_ranks(False)`` also ends the ranks kept now.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    global _KEEP
    if not isinstance(keep, bool):
        raise TypeError(f"keep_ranks takes True or False, got {type(keep).__name__}")
    _KEEP = keep
    if not keep:
        close_ranks()


def keeping() -> bool:
    """Whether launches keep their ranks for the next one (``keep_ranks``).

    Used by distributed.supervise.
    """
    return _KEEP


def shape_of(backend: str, world_size: int, env: Mapping[str, str]) -> tuple[Any, ...]:
    """What a kept rank must share with a launch to serve it: the backend, the world size, and
    the environment (the notebook's and ``env``): CUDA and NCCL read theirs when they start.

    Used by distributed.supervise.
    """
    return (backend, world_size, tuple(sorted({**os.environ, **env}.items())))


def take(shape: tuple[Any, ...], world_size: int, ctx: Any) -> tuple[list[Any], list[Connection]]:
    """Ranks for a launch of this shape: the kept ones if they fit and live, else new processes
    (the kept ones are closed first). Returns the processes and the parent's end of each one's
    line, in rank order.

    Used by distributed.supervise.
    """
    idle = _idle.pop(shape, None)
    if idle is not None:
        if all(p.is_alive() for p in idle.processes):
            return idle.processes, idle.conns
        _close(idle)
    processes, conns = [], []
    try:
        for rank in range(world_size):
            here, there = ctx.Pipe(duplex=True)
            process = ctx.Process(
                target=_rank_main, args=(rank, there), name=f"rank{rank}", daemon=True
            )
            processes.append(process)
            conns.append(here)
            try:
                process.start()
            finally:
                there.close()
    except BaseException:
        _close(_Idle(shape, processes, conns))
        raise
    return processes, conns


def start_ahead(shape: tuple[Any, ...], world_size: int, ctx: Any, spec: dict[str, Any]) -> None:
    """Start the ranks of an NCCL launch that ended its ranks (a hang stopped at its deadline)
    now, for the next launch of the same shape: each starts CUDA on its GPU while the notebook
    goes on, and serves that launch as a kept rank would (it waits for the warm-up first). Does
    nothing for gloo, whose ranks start in milliseconds, or when ranks are not kept.

    Used by distributed.supervise.
    """
    if not _KEEP or spec["backend"] != "nccl" or shape in _idle:
        return
    processes, conns = take(shape, world_size, ctx)
    for conn in conns:
        conn.send(("warm", spec))
    give_back(shape, processes, conns)


def give_back(shape: tuple[Any, ...], processes: list[Any], conns: list[Connection]) -> None:
    """Keep the ranks of a launch that ended well for the next launch of the same shape; the
    ranks of the shape used least recently end when more than ``KEPT_SHAPES`` would be kept.

    Used by distributed.supervise.
    """
    if shape in _idle:
        _close(_idle.pop(shape))
    _idle[shape] = _Idle(shape, list(processes), list(conns))
    while len(_idle) > KEPT_SHAPES:
        _close(_idle.pop(next(iter(_idle))))


def close_ranks() -> None:
    """End the ranks kept for the next launch (if any); nothing else is left running. Also run
    when this process exits.

    Used by distributed.keep_ranks.
    """
    while _idle:
        _close(_idle.pop(next(iter(_idle))))


def _close(idle: _Idle) -> None:
    """Ask kept ranks to end, give them a second, then kill what is left of each (its process
    group, as ``supervisor`` does) and reap them."""
    for conn in idle.conns:
        try:
            conn.send(("close",))
        except OSError:
            pass  # already gone
    end = time.monotonic() + 1.0
    pending = [p.sentinel for p in idle.processes if p.pid is not None]
    while pending and time.monotonic() < end:
        ready = wait(pending, timeout=end - time.monotonic())
        pending = [s for s in pending if s not in ready]
    for process in idle.processes:
        if process.pid is not None and process.is_alive():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                process.kill()
        if process.pid is not None:
            process.join(3.0)
    for conn in idle.conns:
        conn.close()


atexit.register(close_ranks)
