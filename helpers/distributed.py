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
| ``rank_device()``, ``synchronize()``, ``device_idle()``, ``delay(seconds)`` | inside a worker: the rank's device and its clock |
| ``algbw_gbps``, ``busbw_gbps``, ``bus_factor`` | nccl-tests' bandwidth definitions |

Functions defined in a notebook travel to the ranks by value (``cloudpickle``). Ranks are never
forked from the notebook (it may have initialised CUDA, which a forked child cannot use): they are
forked from multiprocessing's *forkserver*, a fresh interpreter started on the first launch that
imports torch and this module once, so every later launch starts its ranks in milliseconds instead
of the seconds that importing torch costs each process ("spawn", where there is no forkserver).
Each rank takes the notebook's environment as it is at the launch. From a script, call ``launch``
under ``if __name__ == "__main__":``, as both start methods require. What a rank prints goes to
``Outcome.printed`` / ``Outcome.log``, not to the notebook.

Taught in 06_nccl_point_to_point_and_collectives.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import math
import multiprocessing as mp
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import cloudpickle
import torch
import torch.distributed as dist

from . import hardware
from .codec import register

# Environment every rank gets, on every machine: NVLink SHARP (NVLS) and multicast objects
# stay off. The shared GPU machines require it; elsewhere it changes nothing we measure.
RANK_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

STARTUP_TIMEOUT_S = 180.0  # importing torch and joining the group, per launch
FAILURE_GRACE_S = 1.0      # after one rank fails, how long the others may still report
DEATH_NEWS_S = 0.5         # how late a rank's death may show after the exceptions it caused elsewhere
TEARDOWN_S = 3.0           # how long ranks that all returned may take to leave the group (a healthy
                           # group leaves in well under a second; one with a receive never matched,
                           # as notebook 06 makes, does not leave at all and is killed after this)
OUTPUT_KIB = 20            # how much of the end of each rank's stdout / stderr is read back
MAX_WORLD_SIZE = 64        # more ranks than a demonstration needs on one machine
# Variables every rank gets from the launcher itself (torchrun's), which env= may not change.
LAUNCHER_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")

BACKENDS = ("nccl", "gloo")

# ---------------------------------------------------------------- bandwidth (nccl-tests)

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


MAX_TIMEOUT_S = 24 * 3600.0  # longer than any demonstration; bigger values overflow the clocks


def _check_positive(value: Any, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number ({what}), got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive, finite number ({what}), got {value!r}")
    return float(value)


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor: 2(n-1)/n for all_reduce; (n-1)/n for all_gather,
    reduce_scatter and all_to_all; 1 for broadcast, reduce and send_recv (n = world size).

    Used by the lessons (helpers/lessons/).
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

    Used by the lessons (helpers/lessons/).
    """
    nbytes = _check_positive(nbytes, "nbytes", "the message size in bytes")
    seconds = _check_positive(seconds, "seconds", "the time of one operation in seconds")
    return nbytes / seconds / 1e9


def busbw_gbps(op: str, nbytes: int | float, seconds: float, world_size: int) -> float:
    """Bus bandwidth in decimal GB/s, as nccl-tests prints it: ``algbw x bus_factor(op, n)``.

    It is the number to hold against a link's speed: for all_reduce on n ranks each rank
    sends and receives 2(n-1)/n of the buffer, so busbw is what each link carried per second.

    Used by the lessons (helpers/lessons/).
    """
    factor = bus_factor(op, world_size)
    return algbw_gbps(nbytes, seconds) * factor


# ---------------------------------------------------------------- inside a rank

_pipe: Connection | None = None  # this rank's line to the parent, set in the rank's process


def mark(label: str) -> None:
    """Inside a worker: tell the parent that this rank reached ``label``, and when.

    Sent at once (not at the end), so a rank that then hangs still shows how far it got:
    ``Outcome.marks[rank]`` lists ``[seconds since the worker started, label]``. Outside a
    launched worker it does nothing.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    if not isinstance(label, str):
        raise TypeError(f"mark needs a short text label such as 'recv returned', got {type(label).__name__}")
    if _pipe is not None:
        _pipe.send(("mark", time.monotonic(), label))


def _backend_here() -> str | None:
    return dist.get_backend() if dist.is_available() and dist.is_initialized() else None


def rank_device() -> torch.device:
    """Inside a worker: where this rank's tensors live - its GPU under NCCL, the CPU under gloo.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    if _backend_here() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def synchronize() -> None:
    """Inside a worker: wait until this rank's GPU has finished everything queued so far
    (``torch.cuda.synchronize()`` under NCCL; nothing to wait for under gloo).

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    if rank_device().type == "cuda":
        torch.cuda.synchronize()


def device_idle() -> bool:
    """Inside a worker: has everything queued on this rank's current stream finished?

    Under NCCL it asks the stream (``torch.cuda.current_stream().query()``) without waiting,
    so right after a ``recv`` returns it says whether the data is already there. Under gloo
    the host does the work itself, so it is always True.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    if rank_device().type == "cuda":
        return torch.cuda.current_stream().query()
    return True


def delay(seconds: float) -> None:
    """Inside a worker: make this rank's next operation start ``seconds`` late.

    Under NCCL a spin kernel keeps the current stream busy for that long and the host goes
    on at once (``timing.hold_stream``): the next collective is queued behind it, so its data
    leaves late while the host is free. Under gloo the host itself sleeps.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    seconds = float(seconds)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    if rank_device().type == "cuda":
        from .timing import hold_stream

        hold_stream(seconds * 1e6)
    else:
        time.sleep(seconds)


# ---------------------------------------------------------------- what a launch gives back


RETURNED, RAISED, DIED, STOPPED = "returned", "raised", "died", "stopped"


@register
@dataclass
class Outcome:
    """What ``supervise`` saw of each rank: its status, result, marks, output and error.

    ``status[rank]`` is 'returned' (the worker returned; ``results[rank]`` holds it), 'raised'
    (``errors[rank]`` holds the traceback), 'died' (the process ended without a word:
    ``errors[rank]`` says how, e.g. "died with SIGKILL" or "exited with code 3") or 'stopped'
    (still running when the deadline passed or another rank failed, and killed).
    ``failure_order`` lists the ranks that raised or died in the order they failed (a death
    before the errors it caused in the other ranks). ``marks[rank]`` lists ``[seconds since that
    rank's worker started, label]`` for each ``mark()`` it reached. ``printed`` / ``log`` hold the
    last ``OUTPUT_KIB`` KiB of what each rank wrote to stdout / stderr. ``startup_s`` is the time
    to start the processes and join the group (None if start-up did not finish within
    ``startup_timeout_s``); ``elapsed_s`` the time from then (or from the launch, if start-up did
    not finish) until every rank had finished or been stopped. Times in seconds.

    Taught in 06_nccl_point_to_point_and_collectives.
    """

    backend: str
    world_size: int
    timeout_s: float
    status: list[str]
    results: list[Any]
    errors: list[str | None]
    marks: list[list[list[Any]]]
    printed: list[str]
    log: list[str]
    reason: str = ""
    startup_s: float | None = None
    elapsed_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    startup_timeout_s: float | None = None
    failure_order: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every rank returned."""
        return all(s == RETURNED for s in self.status)

    @property
    def unfinished(self) -> list[int]:
        """The ranks that did not return."""
        return [rank for rank, s in enumerate(self.status) if s != RETURNED]

    @property
    def first_failure(self) -> int | None:
        """The rank that failed (raised or died) first, or None if none failed."""
        failed = [r for r in self.failure_order if self.status[r] in (RAISED, DIED)]
        failed += [r for r, s in enumerate(self.status) if s in (RAISED, DIED) and r not in failed]
        return failed[0] if failed else None

    def reached(self, rank: int) -> list[str]:
        """The labels of the marks ``rank`` reached, in order."""
        return [label for _, label in self.marks[rank]]

    def last_mark(self, rank: int) -> str | None:
        """The last mark ``rank`` reached (None if it reached none)."""
        labels = self.reached(rank)
        return labels[-1] if labels else None

    def describe(self) -> str:
        """A few lines for people: what each rank did and the last line it reached."""
        lines = [f"{self.backend}, {self.world_size} ranks: {self.reason}"]
        for rank in range(self.world_size):
            marks = ", ".join(f"{label!r} at {t:.3f} s" for t, label in self.marks[rank]) or "no marks"
            how = self.errors[rank] if self.status[rank] == DIED else self.status[rank]
            lines.append(f"  rank {rank}: {how}; reached {marks}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def raise_for_status(self) -> list[Any]:
        """The results in rank order if every rank returned; else raise ``WorkerError`` naming the
        rank that failed first (it raised or died) or ``LaunchTimeout`` (ranks were still running
        at a deadline)."""
        rank = self.first_failure
        if rank is not None:
            raise WorkerError(self, rank)
        if self.unfinished:
            raise LaunchTimeout(self)
        return list(self.results)


class WorkerError(RuntimeError):
    """A rank raised an exception or its process died; ``.rank``, ``.outcome`` say which and how.

    The message names the rank and, for a death, its exit code or signal ("rank 1 of 2 (gloo)
    died with SIGKILL before returning"); for an exception, its traceback. Raised by
    ``Outcome.raise_for_status``, which ``launch`` calls.

    Used by distributed.Outcome.
    """

    def __init__(self, outcome: Outcome, rank: int) -> None:
        self.outcome, self.rank = outcome, rank
        error = (outcome.errors[rank] or "").rstrip()
        what = f"raised:\n{error}" if outcome.status[rank] == RAISED else error or "died"
        log = outcome.log[rank].strip()
        tail = f"\n--- end of rank {rank}'s stderr ---\n{log[-3000:]}" if log else ""
        super().__init__(f"rank {rank} of {outcome.world_size} ({outcome.backend}) {what}{tail}")


class LaunchTimeout(TimeoutError):
    """Ranks were still running at a deadline and were killed; ``.outcome`` has their marks.

    The message says which deadline: start-up (``startup_timeout_s``, with the seconds waited)
    or the workers' ``timeout_s``. Raised by ``Outcome.raise_for_status``, which ``launch`` calls.

    Used by distributed.Outcome.
    """

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        where = "; ".join(f"rank {r} last reached {outcome.last_mark(r)!r}" for r in outcome.unfinished)
        ranks = f"ranks {outcome.unfinished} of {outcome.world_size} ({outcome.backend})"
        if outcome.startup_s is None and outcome.startup_timeout_s is not None:
            waited = f"{outcome.elapsed_s:.1f} s" if outcome.elapsed_s is not None else "that long"
            super().__init__(f"{ranks} had not started their worker within startup_timeout_s="
                             f"{outcome.startup_timeout_s:g} s (starting the processes, importing torch, "
                             f"joining the group) and were stopped after {waited}; pass a longer "
                             f"startup_timeout_s if the machine is busy ({where})")
        else:
            super().__init__(f"{ranks} did not finish within timeout_s={outcome.timeout_s:g} s and were "
                             f"stopped ({where})")


# ---------------------------------------------------------------- choosing and checking


def default_world_size() -> int:
    """One rank per GPU when there are at least two GPUs, else 2 (gloo ranks on the CPU).

    Used by distributed.supervise (when it is given no world_size).
    """
    gpus = hardware.gpu_count()
    return gpus if gpus >= 2 else 2


def choose_backend(world_size: int) -> str:
    """'nccl' when this machine has a GPU for every rank (and PyTorch has NCCL), else 'gloo'.

    Used by distributed.supervise (when it is given no backend).
    """
    if hardware.gpu_count() >= world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _check_launch(worker: Any, world_size: Any, backend: Any, timeout_s: Any, startup_timeout_s: Any,
                  args: Any, kwargs: Any, env: Any) -> tuple[int, str]:
    """The world size and backend to use; ValueError / TypeError, saying what to pass, for a bad argument."""
    _check_worker(worker, args, kwargs)
    world_size, backend = _check_ranks(world_size, backend)
    for value, name, what in ((timeout_s, "timeout_s", "seconds the workers may run"),
                              (startup_timeout_s, "startup_timeout_s", "seconds to start the ranks and join the group")):
        if _check_positive(value, name, what) > MAX_TIMEOUT_S:
            raise ValueError(f"{name}={value!r} s is longer than a demonstration may hold the machine "
                             f"(at most {MAX_TIMEOUT_S:g} s, a day); pass the seconds you would wait, e.g. 60")
    _check_env(env)
    return world_size, backend


def _check_worker(worker: Any, args: Any, kwargs: Any) -> None:
    """The worker must be callable as ``worker(rank, world_size, *args, **kwargs)``."""
    if not callable(worker):
        raise TypeError(f"worker must be a function worker(rank, world_size, ...), got {type(worker).__name__}")
    if isinstance(args, str) or not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of extra positional arguments for the worker, got {type(args).__name__}")
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise TypeError(f"kwargs must be a dict of keyword arguments for the worker (names as strings), "
                        f"got {kwargs!r:.80}")
    try:
        signature = inspect.signature(worker)
    except (TypeError, ValueError):
        return  # a built-in without a signature: the ranks will say if the call is wrong
    try:
        signature.bind(0, 1, *args, **(kwargs or {}))
    except TypeError as err:
        raise TypeError(f"worker{signature} cannot be called as worker(rank, world_size, *args, **kwargs) with "
                        f"{len(args)} args and kwargs {sorted(kwargs or {})} ({err}): it must take the rank and "
                        f"the world size first, then what args and kwargs pass") from None


def _check_ranks(world_size: Any, backend: Any) -> tuple[int, str]:
    """The number of ranks and the backend, defaults filled in; 'nccl' only with a GPU per rank."""
    if world_size is None:
        world_size = default_world_size()
    world_size = hardware.check_count(world_size, "world_size", 1, "ranks")
    if world_size > MAX_WORLD_SIZE:
        raise ValueError(f"world_size={world_size} would start {world_size} processes on this machine; "
                         f"pass at most {MAX_WORLD_SIZE} (a demonstration needs 2 to 8)")
    if backend is None:
        backend = choose_backend(world_size)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'nccl' (GPUs), 'gloo' (CPU) or None to choose, got {backend!r}")
    if backend == "nccl" and not dist.is_nccl_available():
        raise ValueError("backend='nccl' needs a PyTorch build with NCCL (a CUDA build); pass backend='gloo'")
    if backend == "nccl" and hardware.gpu_count() < world_size:
        raise ValueError(f"backend='nccl' needs one GPU per rank: world_size={world_size} but this machine has "
                         f"{hardware.gpu_count()} GPU(s); pass backend='gloo' (CPU ranks) or fewer ranks")
    return world_size, backend


def _check_env(env: Any) -> None:
    """``env`` adds string variables, none of those the launcher sets itself."""
    if env is None:
        return
    if not (isinstance(env, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise TypeError("env must be a dict of environment variables, names and values as strings, "
                        "e.g. {'NCCL_DEBUG': 'INFO'}")
    fixed = sorted(set(env) & (set(LAUNCHER_ENV) | set(RANK_ENV)))
    if fixed:
        raise ValueError(f"env may not set {fixed}: the launcher sets them for every rank (LAUNCHER_ENV, and "
                         f"RANK_ENV, which the shared GPU machines require); pass other variables, "
                         f"e.g. {{'NCCL_DEBUG': 'INFO'}}")


def _payload(worker: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> bytes:
    """The worker and its arguments as bytes for the ranks (``cloudpickle``); TypeError if they cannot travel."""
    try:
        return cloudpickle.dumps((worker, tuple(args), dict(kwargs or {})))
    except Exception as err:  # noqa: BLE001 - pickling raises many kinds; all mean the same here
        raise TypeError(f"the worker and its args / kwargs travel to the ranks by pickling, which failed: {err}; "
                        f"pass plain values (numbers, strings, lists, dicts, tensors), not locks, open files "
                        f"or generators") from err


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for ``MASTER_PORT``).

    Used by distributed.supervise.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the rank's process


def _plain(obj: Any) -> Any:
    """Tensors become (nested) lists on the host; containers are walked; the rest is kept."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().tolist()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj) if type(obj) in (list, tuple) else obj
    return obj


def _redirect_output(folder: str, rank: int) -> None:
    """Send this process's stdout and stderr (Python's and C++'s) to files the parent reads."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        with open(os.path.join(folder, f"rank{rank}.{name}"), "wb", buffering=0) as f:
            os.dup2(f.fileno(), fd)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)  # a line printed is a line written


def _join_group(rank: int, spec: dict[str, Any]) -> None:
    os.environ.clear()  # the notebook's environment at the launch, not the forkserver's at its start
    os.environ.update(spec["parent_env"])
    os.environ.update(RANK_ENV)
    os.environ.update(spec["env"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(spec["port"]), RANK=str(rank),
                      WORLD_SIZE=str(spec["world_size"]), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(spec["world_size"]))
    timeout = _dt.timedelta(seconds=spec["group_timeout_s"])
    if spec["backend"] == "nccl":
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", rank))
        from .timing import sleep_cycles_per_us

        sleep_cycles_per_us()  # calibrate delay() now, not in the middle of a measurement
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec["world_size"]))
        dist.init_process_group("gloo", timeout=timeout)


def _own_process_group() -> None:
    """Make this rank the leader of a new session and process group (its id is the rank's pid), so
    that the parent can kill the rank and everything it started (``subprocess``) at once."""
    try:
        os.setsid()
    except OSError:  # already a group leader (never, for a rank: it is a new child)
        pass


def _end_my_group() -> None:
    """Kill this rank's process group - the rank and what it started - or, if the rank is not
    the leader of its own group (it always is), the rank alone."""
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os._exit(1)


def _exit_with_parent() -> None:
    """End this rank, and what it started, as soon as the notebook's process goes away (killed,
    crashed), so no rank is orphaned; runs in a thread of the rank."""
    parent = mp.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        _end_my_group()


def _rank_main(spec: dict[str, Any], rank: int, conn: Connection, release: Any) -> None:
    """The body of each rank's process (started by ``supervise``)."""
    global _pipe
    _own_process_group()
    _redirect_output(spec["folder"], rank)
    threading.Thread(target=_exit_with_parent, daemon=True, name="exit-with-parent").start()
    _pipe = conn
    try:
        worker, args, kwargs = cloudpickle.loads(spec["payload"])
        _join_group(rank, spec)
        conn.send(("start", time.monotonic()))
        result = worker(rank, spec["world_size"], *args, **kwargs)
        try:
            data = cloudpickle.dumps(_plain(result))
        except Exception as err:  # noqa: BLE001 - say which result could not travel
            raise TypeError(f"the worker's result ({type(result).__name__}) cannot be sent back: {err}; "
                            f"return numbers, lists, dicts or tensors") from err
        conn.send(("result", data))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent as text
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass  # the parent has gone
    finally:
        _pipe = None
        _leave(spec, release, conn)


def _leave(spec: dict[str, Any], release: Any, conn: Connection) -> None:
    """Leave the group when every rank is done (or the parent says so), so a rank that finished
    early never tears the group down under one still working; then end the process."""
    release.wait(spec["release_wait_s"])
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001, S110 - leaving is best effort
            pass
    conn.close()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)  # skip the interpreter's slow clean-up: everything worth keeping was sent


# ---------------------------------------------------------------- the parent: launch, watch, collect


@dataclass
class _Rank:
    """The parent's view of one rank: its process, its pipe, and what it has said so far."""

    process: Any
    conn: Connection | None
    status: str | None = None
    result: Any = None
    error: str | None = None
    started_at: float | None = None
    marks: list[list[Any]] = field(default_factory=list)
    exit_seen: bool = False

    @property
    def done(self) -> bool:
        return self.status is not None


@dataclass
class _Launch:
    """One launch as the parent sees it: what the ranks were told, the ranks, the clock readings
    (``time.monotonic``), and the ranks that failed, first to fail first."""

    spec: dict[str, Any]
    release: Any  # the event that lets ranks that all returned leave the group
    ranks: list[_Rank] = field(default_factory=list)
    launched: float = field(default_factory=time.monotonic)
    all_started: float | None = None
    finished: float | None = None
    failures: list[int] = field(default_factory=list)
    killed: bool = False


def _spec(payload: bytes, world_size: int, backend: str, env: Mapping[str, str] | None, folder: str,
          patience_s: float) -> dict[str, Any]:
    """What every rank is told: the worker, the group to join, where to write its output."""
    return {
        "payload": payload,
        "world_size": world_size,
        "backend": backend,
        "port": free_port(),
        "env": dict(env or {}),
        "parent_env": dict(os.environ),
        "folder": folder,
        # The group's own timeout (and the wait to leave it) outlast our deadlines: we stop ranks.
        "group_timeout_s": patience_s,
        "release_wait_s": patience_s,
    }


def start_context() -> Any:
    """The multiprocessing context that starts the ranks: "forkserver" with this module (and so
    torch) preloaded, where the system has it (Linux, macOS); else "spawn". See the module's
    docstring for why never "fork".

    Used by distributed.supervise.
    """
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])  # no effect once the server runs: it has them already
    return ctx


def _start_ranks(run: _Launch, ctx: Any) -> None:
    """Start one process per rank, each with a pipe on which it tells the parent how it goes."""
    for rank in range(run.spec["world_size"]):
        reader, writer = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_rank_main, args=(run.spec, rank, writer, run.release),
                              name=f"rank{rank}", daemon=True)
        run.ranks.append(_Rank(process, reader))  # before start: the clean-up closes its pipe
        try:
            process.start()
        finally:
            writer.close()


def _read_messages(rank: _Rank) -> None:
    """Take every message waiting on a rank's pipe; close the pipe at its end."""
    while rank.conn is not None:
        try:
            if not rank.conn.poll():
                return
            message = rank.conn.recv()
        except (EOFError, OSError):
            rank.conn.close()
            rank.conn = None
            return
        kind = message[0]
        if kind == "start":
            rank.started_at = message[1]
        elif kind == "mark" and rank.started_at is not None:
            rank.marks.append([round(message[1] - rank.started_at, 6), message[2]])
        elif kind == "mark":
            rank.marks.append([0.0, message[2]])
        elif kind == "result" and rank.status is None:
            try:
                rank.result, rank.status = cloudpickle.loads(message[1]), RETURNED
            except Exception as err:  # noqa: BLE001
                rank.status, rank.error = RAISED, f"its result could not be read back here: {err!r}"
        elif kind == "error" and rank.status is None:
            rank.status, rank.error = RAISED, message[1]


def _exit_words(exitcode: int | None) -> str:
    """How a process ended, in words: 'died with SIGKILL' (a signal) or 'exited with code 3'."""
    if exitcode is None:
        return "ended (its exit code could not be read)"
    if exitcode < 0:
        try:
            return f"died with {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"died with signal {-exitcode}"
    return f"exited with code {exitcode}"


def _has_ended(process: Any) -> bool:
    """Whether a rank's process has ended; once its sentinel says it is ending, wait (up to a
    second) for its exit code, so that a death is seen as soon as the ranks it cut off."""
    if not process.is_alive():
        return True
    if wait([process.sentinel], timeout=0):
        process.join(1.0)
        return not process.is_alive()
    return False


def _notice_exit(rank: _Rank) -> None:
    """If the rank's process has ended without returning or raising, mark it 'died' and say how."""
    if rank.exit_seen or not _has_ended(rank.process):
        return
    rank.exit_seen = True
    _read_messages(rank)  # what it sent just before it ended
    if rank.done:
        return
    rank.status, rank.error = DIED, f"{_exit_words(rank.process.exitcode)} before returning"
    if rank.started_at is None:
        rank.error += (" (before its worker started: from a script, call launch() under "
                       "`if __name__ == '__main__':`, as multiprocessing's spawn needs)")


def _note_failures(run: _Launch) -> None:
    """Add the ranks that newly raised or died to ``run.failures``: deaths first, since a rank
    that dies cuts the others off and makes them raise, never the other way round."""
    new = [i for i, r in enumerate(run.ranks) if r.status in (RAISED, DIED) and i not in run.failures]
    run.failures += sorted(new, key=lambda i: run.ranks[i].status != DIED)


def _take_news(run: _Launch) -> None:
    """Read what every rank has sent, notice the processes that ended, note who failed.

    A rank that dies cuts its peers off, and their exception can reach us before its process
    has ended; so on news of an exception, give deaths ``DEATH_NEWS_S`` to show first."""
    for rank in run.ranks:
        _read_messages(rank)
    if any(r.status == RAISED and i not in run.failures for i, r in enumerate(run.ranks)):
        wait([r.process.sentinel for r in run.ranks if not r.exit_seen], timeout=DEATH_NEWS_S)
    for rank in run.ranks:
        _notice_exit(rank)
    _note_failures(run)


def _watch(run: _Launch, startup_timeout_s: float, timeout_s: float) -> None:
    """Wait for news from the ranks until every one is done or a deadline passes: start-up's,
    then the workers' (``timeout_s`` from when the last rank started its worker); once a rank
    has failed, the others have ``FAILURE_GRACE_S`` more to report."""
    deadline = run.launched + startup_timeout_s
    while True:
        _take_news(run)
        now = time.monotonic()
        if run.all_started is None and all(r.started_at is not None or r.done for r in run.ranks):
            run.all_started, deadline = now, now + timeout_s
        if all(r.done for r in run.ranks) or now >= deadline:
            break
        if run.failures:
            deadline = min(deadline, now + FAILURE_GRACE_S)
        waitables = [r.conn for r in run.ranks if r.conn is not None]
        waitables += [r.process.sentinel for r in run.ranks if not r.exit_seen]
        wait(waitables, timeout=deadline - now)
    run.finished = time.monotonic()


def _wait_for_exits(ranks: list[_Rank], seconds: float) -> None:
    """Wait until every rank's process has ended, or ``seconds`` have passed."""
    end = time.monotonic() + seconds
    pending = [r.process.sentinel for r in ranks]
    while pending and time.monotonic() < end:
        ready = wait(pending, timeout=end - time.monotonic())
        pending = [s for s in pending if s not in ready]


def _kill_group(process: Any) -> None:
    """SIGKILL a rank's process group: the rank and everything it started (its group's id is
    its pid, see ``_own_process_group``); the rank alone if it had not made its group yet."""
    if process.pid is None:
        return  # never started
    # While a process of the group lives, the system gives no other process the group's id.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass  # no such group: the rank had not called setsid yet, or the group is gone
    if process.is_alive():
        process.kill()


def _kill_all(run: _Launch) -> None:
    """Kill every rank's process group, then reap the ranks."""
    for rank in run.ranks:
        _kill_group(rank.process)
    for rank in run.ranks:
        if rank.process.pid is not None:
            rank.process.join(3.0)
    run.killed = True


def _stop(run: _Launch) -> None:
    """End every rank and what it started: when all returned, let them leave the group first
    (up to ``TEARDOWN_S``); then kill each rank's process group, whatever is left of it."""
    if all(r.status == RETURNED for r in run.ranks):
        run.release.set()
        _wait_for_exits(run.ranks, TEARDOWN_S)
    _kill_all(run)


def _reason(run: _Launch, startup_timeout_s: float, timeout_s: float) -> str:
    """One phrase: how the launch ended."""
    if run.failures:
        first = run.ranks[run.failures[0]]
        how = first.error if first.status == DIED else first.status
        return f"rank {run.failures[0]} {how}; ranks still running were stopped"
    if all(r.status == RETURNED for r in run.ranks):
        return "every rank returned"
    if run.all_started is None:
        waited = (run.finished or run.launched) - run.launched
        return (f"start-up took longer than startup_timeout_s={startup_timeout_s:g} s (waited {waited:.1f} s); "
                f"the ranks were stopped")
    return f"the deadline ({timeout_s:g} s) passed; ranks still running were stopped"


def _tail(path: Path) -> str:
    """The last ``OUTPUT_KIB`` KiB of a rank's output file, read without reading the rest; when
    the start was cut, it begins at a whole line, after a note of how much was left out."""
    limit = OUTPUT_KIB * 1024
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            data = f.read(limit)
    except OSError:
        return ""
    if size <= limit:
        return data.decode("utf-8", errors="replace")
    cut = data.find(b"\n") + 1  # 0 when there is no line end: keep it all
    return (f"[... the first {size - len(data) + cut} bytes are not kept]\n"
            + data[cut:].decode("utf-8", errors="replace"))


def _collect(run: _Launch, timeout_s: float, startup_timeout_s: float) -> Outcome:
    """The ``Outcome``: the last messages read, ranks not done marked 'stopped', the ends of
    their output read back."""
    for rank in run.ranks:
        _read_messages(rank)  # marks sent just before the end
    _note_failures(run)
    for rank in run.ranks:
        if not rank.done:
            rank.status = STOPPED
    folder, started = Path(run.spec["folder"]), run.all_started
    return Outcome(
        backend=run.spec["backend"],
        world_size=run.spec["world_size"],
        timeout_s=float(timeout_s),
        status=[r.status or STOPPED for r in run.ranks],
        results=[r.result for r in run.ranks],
        errors=[r.error for r in run.ranks],
        marks=[r.marks for r in run.ranks],
        printed=[_tail(folder / f"rank{i}.stdout") for i in range(len(run.ranks))],
        log=[_tail(folder / f"rank{i}.stderr") for i in range(len(run.ranks))],
        reason=_reason(run, startup_timeout_s, timeout_s),
        startup_s=None if started is None else round(started - run.launched, 3),
        elapsed_s=round((run.finished or run.launched) - (started if started is not None else run.launched), 3),
        startup_timeout_s=float(startup_timeout_s),
        failure_order=list(run.failures),
    )


def _clean_up(run: _Launch | None, folder: str) -> None:
    """On any way out (an exception or an interrupt included): no process, pipe or folder is left."""
    if run is not None:
        if not run.killed:
            _kill_all(run)
        for rank in run.ranks:
            if rank.conn is not None:
                rank.conn.close()
    shutil.rmtree(folder, ignore_errors=True)


def supervise(
    worker: Callable[..., Any],
    world_size: int | None = None,
    *,
    backend: str | None = None,
    timeout_s: float = 60.0,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Run ``worker(rank, world_size, *args, **kwargs)`` in ``world_size`` new processes, one per
    rank, each in the default process group; watch them until all return or a deadline passes.

    ``backend``: 'nccl' (one GPU per rank: rank r uses GPU r), 'gloo' (CPU) or None for
    ``choose_backend``. ``world_size`` defaults to ``default_world_size()`` (at most
    ``MAX_WORLD_SIZE``). Start-up (starting the processes, the forkserver's import of torch on
    the first launch, joining the group) may take
    ``startup_timeout_s`` seconds; the workers then have ``timeout_s`` seconds (each at most
    ``MAX_TIMEOUT_S``). At the deadline, or ``FAILURE_GRACE_S`` after a rank fails, the ranks
    still running are killed, each with what it started (its process group). ``env`` adds
    environment variables to the ranks (e.g. NCCL_DEBUG); ``RANK_ENV`` and the launcher's own
    variables are always set. Tensors in a result come back as lists. Bad arguments raise
    ``ValueError`` / ``TypeError`` before any process starts.

    Never raises for what happens inside the ranks: see ``Outcome`` (and ``launch``).

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    world_size, backend = _check_launch(worker, world_size, backend, timeout_s, startup_timeout_s,
                                        args, kwargs, env)
    payload = _payload(worker, args, kwargs)
    ctx = start_context()
    folder = tempfile.mkdtemp(prefix="course-ranks-")
    run: _Launch | None = None
    try:
        spec = _spec(payload, world_size, backend, env, folder, startup_timeout_s + timeout_s + 60.0)
        run = _Launch(spec, ctx.Event())
        _start_ranks(run, ctx)
        _watch(run, startup_timeout_s, timeout_s)
        _stop(run)
        return _collect(run, timeout_s, startup_timeout_s)
    finally:
        _clean_up(run, folder)


def launch(
    worker: Callable[..., Any],
    world_size: int | None = None,
    *,
    backend: str | None = None,
    timeout_s: float = 60.0,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Any]:
    """Run ``worker(rank, world_size, *args, **kwargs)`` on every rank; return the results in
    rank order.

    The same as ``supervise`` (see it for the arguments), but the rank that failed first raises
    ``WorkerError`` naming it (with its traceback, or its exit code or signal if it died), and
    ranks still running at a deadline are killed and raise ``LaunchTimeout`` (a
    ``TimeoutError``) naming them and the deadline (start-up's or the workers').

    >>> def hello(rank, world_size):  # doctest: +SKIP
    ...     return f"rank {rank} of {world_size}"
    >>> launch(hello, 2, backend="gloo")  # doctest: +SKIP
    ['rank 0 of 2', 'rank 1 of 2']

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    outcome = supervise(worker, world_size, backend=backend, timeout_s=timeout_s,
                        startup_timeout_s=startup_timeout_s, args=args, kwargs=kwargs, env=env)
    return outcome.raise_for_status()


# ---------------------------------------------------------------- collectives, timed as nccl-tests does

COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


def _check_collective_args(rank: Any, world_size: Any, ops: Any, sizes: Any, warmup: Any, iters: Any,
                           samples: Any) -> tuple[list[str], list[int]]:
    """The checked ops and sizes of ``collective_timings``; ValueError/TypeError saying what to pass."""
    world_size = hardware.check_count(world_size, "world_size", 1, "ranks")
    rank = hardware.check_count(rank, "rank", 0)
    if rank >= world_size:
        raise ValueError(f"rank must be 0 to world_size - 1 = {world_size - 1}, got {rank}")
    if isinstance(ops, str) or not isinstance(ops, Sequence) or not ops:
        raise TypeError(f"ops must be a non-empty list of collective names from {list(COLLECTIVE_OPS)}, got {ops!r}")
    for op in ops:
        if op not in COLLECTIVE_OPS:
            raise ValueError(f"unknown collective {op!r}: pass names from {list(COLLECTIVE_OPS)}")
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise TypeError(f"sizes must be a non-empty list of message sizes in bytes, got {sizes!r}")
    checked = [hardware.check_size(size, "each size") for size in sizes]
    step = 4 * world_size
    for size in checked:
        if size % step:
            raise ValueError(f"size {size} bytes is not a multiple of 4 x world_size = {step} bytes: a message of "
                             f"float32 elements splits into {world_size} equal parts; pass e.g. "
                             f"{max(step, size - size % step)} bytes")
    hardware.check_count(warmup, "warmup", 0, "calls")
    hardware.check_count(iters, "iters", 1, "calls per sample")
    hardware.check_count(samples, "samples", 1)
    return list(ops), checked


def _collective_buffers(op: str, rank: int, world_size: int, numel: int,
                        device: torch.device) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The buffers of one call of ``op`` filled with a pattern, and the result every rank expects.

    Values are small whole numbers, exact in float32: rank r contributes r + 1 (all_reduce,
    reduce_scatter scaled by the part's index, all_gather); broadcast sends rank 0's ramp;
    all_to_all sends part j of rank r as r * n + j.
    """
    n, share = world_size, numel // world_size
    parts = torch.arange(n, dtype=torch.float32, device=device).repeat_interleave(share)  # part index
    total = n * (n + 1) / 2  # sum over ranks of rank + 1
    if op == "all_reduce":
        full = torch.full((numel,), rank + 1.0, device=device)
        return {"full": full}, torch.full((numel,), total, device=device)
    if op == "all_gather":
        part = torch.full((share,), rank + 1.0, device=device)
        return {"full": torch.empty(numel, device=device), "part": part}, parts + 1
    if op == "reduce_scatter":
        full = (parts + 1) * (rank + 1)
        return {"full": full, "part": torch.empty(share, device=device)}, torch.full((share,), total * (rank + 1),
                                                                                       device=device)
    if op == "broadcast":
        ramp = torch.arange(numel, dtype=torch.float32, device=device) % 1024
        return {"full": ramp.clone() if rank == 0 else torch.zeros(numel, device=device)}, ramp
    # all_to_all: part j of rank r goes to rank j, so rank r receives part r of every rank j
    full = rank * n + parts
    return {"full": full, "out": torch.empty(numel, device=device)}, parts * n + rank


def _collective_call(op: str, buffers: dict[str, torch.Tensor]) -> None:
    """One call of ``op`` on the buffers of ``_collective_buffers``."""
    if op == "all_reduce":
        dist.all_reduce(buffers["full"])
    elif op == "all_gather":
        dist.all_gather_into_tensor(buffers["full"], buffers["part"])  # every rank's part, into full
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(buffers["part"], buffers["full"])  # full summed; this rank keeps its part
    elif op == "broadcast":
        dist.broadcast(buffers["full"], src=0)
    else:
        dist.all_to_all_single(buffers["out"], buffers["full"])  # part j goes to rank j


def _collective_result(op: str, buffers: dict[str, torch.Tensor]) -> torch.Tensor:
    return buffers["part"] if op == "reduce_scatter" else buffers["out"] if op == "all_to_all" else buffers["full"]


def collective_timings(rank: int, world_size: int, *, ops: Sequence[str], sizes: Sequence[int], warmup: int,
                       iters: int, samples: int) -> dict[str, dict[str, list]]:
    """Worker body run inside an initialised process group (``launch`` or ``torchrun``): time
    collectives over message sizes the way nccl-tests does.

    For each size in bytes (a message of float32 elements; a multiple of 4 x world_size) and
    each op of ``COLLECTIVE_OPS``: one call on a known pattern is checked and its wrong elements
    counted (nccl-tests' ``#wrong``), then ``samples`` samples of ``iters`` back-to-back calls
    are timed after ``warmup`` calls - with CUDA events on the rank's stream under NCCL, with a
    synchronised host clock under gloo (CPU). The size is what nccl-tests calls the size: the
    buffer of all_reduce and broadcast, the whole gathered output of all_gather, the whole input
    of reduce_scatter, the whole send buffer of all_to_all. Returns
    ``{"timings": {op: [Timing per size]}, "wrong": {op: [wrong elements per size]}}``, each
    ``Timing`` in seconds per call with ``nbytes`` = the size (``busbw_gbps`` turns it into GB/s).

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    ops, sizes = _check_collective_args(rank, world_size, ops, sizes, warmup, iters, samples)
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("collective_timings runs inside a process group: pass it to distributed.launch "
                         "(launch(collective_timings, n, kwargs=...)) or call it from a torchrun script after "
                         "init_process_group")
    if (dist.get_rank(), dist.get_world_size()) != (rank, world_size):
        raise ValueError(f"rank {rank} of {world_size} does not match the process group (rank "
                         f"{dist.get_rank()} of {dist.get_world_size()}); pass dist.get_rank(), dist.get_world_size()")
    from . import timing  # timing sits below this module; imported here as delay() does

    clock = timing.cuda_events if _backend_here() == "nccl" else timing.host_clock
    device = rank_device()
    result: dict[str, dict[str, list]] = {"timings": {op: [] for op in ops}, "wrong": {op: [] for op in ops}}
    for size in sizes:
        for op in ops:
            buffers, expected = _collective_buffers(op, rank, world_size, size // 4, device)
            _collective_call(op, buffers)
            result["wrong"][op].append(int((_collective_result(op, buffers) != expected).sum().item()))
            del expected
            result["timings"][op].append(clock(
                lambda op=op, buffers=buffers: _collective_call(op, buffers), warmup=warmup, repeats=samples,
                calls_per_sample=iters, nbytes=size, label=f"{op} {timing.format_bytes(size)}"))
            del buffers
    return result
