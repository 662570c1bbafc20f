"""Process groups for the NCCL and gloo demonstrations, with every wait bounded; algbw and busbw.

``launch(worker)`` starts one process per rank the way ``torchrun`` does (environment variables
``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, then
``init_process_group``), calls ``worker(rank, world_size, *args)`` in each, and returns what each
rank returned, in rank order. NCCL is used when there is one GPU per rank, gloo (on the CPU)
otherwise, so the same demonstration runs on a laptop and on a GPU machine.

Nothing can hang the notebook: start-up and the workers each have a deadline; at the deadline
every rank still running is killed and a ``TimeoutError`` names the ranks that did not finish.
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

Functions defined in a notebook travel to the ranks by value (``cloudpickle``); ranks are started
with multiprocessing's "spawn" method, never "fork" (the notebook may have initialised CUDA). From
a script, call ``launch`` under ``if __name__ == "__main__":``, as "spawn" requires. What a rank
prints goes to ``Outcome.printed`` / ``Outcome.log``, not to the notebook.

Taught in 06_nccl_point_to_point_and_collectives.
"""

from __future__ import annotations

import datetime as _dt
import math
import multiprocessing as mp
import os
import shutil
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
TEARDOWN_S = 15.0          # how long ranks that all returned may take to leave the group
OUTPUT_CHARS = 20_000      # how much of each rank's stdout / stderr an Outcome keeps (the end)

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

    Taught in 06_nccl_point_to_point_and_collectives.
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

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    nbytes = _check_positive(nbytes, "nbytes", "the message size in bytes")
    seconds = _check_positive(seconds, "seconds", "the time of one operation in seconds")
    return nbytes / seconds / 1e9


def busbw_gbps(op: str, nbytes: int | float, seconds: float, world_size: int) -> float:
    """Bus bandwidth in decimal GB/s, as nccl-tests prints it: ``algbw x bus_factor(op, n)``.

    It is the number to hold against a link's speed: for all_reduce on n ranks each rank
    sends and receives 2(n-1)/n of the buffer, so busbw is what each link carried per second.

    Taught in 06_nccl_point_to_point_and_collectives.
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
    (``errors[rank]`` holds the traceback), 'died' (the process ended without a word: the exit
    code is in ``errors``) or 'stopped' (still running when the deadline passed or another rank
    failed, and killed). ``marks[rank]`` lists ``[seconds since that rank's worker started,
    label]`` for each ``mark()`` it reached. ``printed`` / ``log`` hold the end of what each
    rank wrote to stdout / stderr. ``startup_s`` is the time to start the processes and join the
    group; ``elapsed_s`` the time from then until every rank had finished or been stopped.

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

    @property
    def ok(self) -> bool:
        """True when every rank returned."""
        return all(s == RETURNED for s in self.status)

    @property
    def unfinished(self) -> list[int]:
        """The ranks that did not return."""
        return [rank for rank, s in enumerate(self.status) if s != RETURNED]

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
            lines.append(f"  rank {rank}: {self.status[rank]}; reached {marks}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def raise_for_status(self) -> list[Any]:
        """The results in rank order if every rank returned; else raise ``WorkerError`` (a rank
        raised or died) or ``LaunchTimeout`` (ranks were still running at the deadline)."""
        failed = [r for r, s in enumerate(self.status) if s in (RAISED, DIED)]
        if failed:
            rank = failed[0]
            raise WorkerError(self, rank)
        if self.unfinished:
            raise LaunchTimeout(self)
        return list(self.results)


class WorkerError(RuntimeError):
    """A rank raised an exception or its process died; ``.rank``, ``.outcome`` say which and how.

    Taught in 06_nccl_point_to_point_and_collectives.
    """

    def __init__(self, outcome: Outcome, rank: int) -> None:
        self.outcome, self.rank = outcome, rank
        what = "raised" if outcome.status[rank] == RAISED else "died"
        log = outcome.log[rank].strip()
        tail = f"\n--- end of rank {rank}'s stderr ---\n{log[-3000:]}" if log else ""
        super().__init__(f"rank {rank} of {outcome.world_size} ({outcome.backend}) {what}:\n"
                         f"{(outcome.errors[rank] or '').rstrip()}{tail}")


class LaunchTimeout(TimeoutError):
    """Ranks were still running at the deadline and were killed; ``.outcome`` has their marks.

    Taught in 06_nccl_point_to_point_and_collectives.
    """

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        where = "; ".join(f"rank {r} last reached {outcome.last_mark(r)!r}" for r in outcome.unfinished)
        super().__init__(f"ranks {outcome.unfinished} of {outcome.world_size} ({outcome.backend}) did not "
                         f"finish within {outcome.timeout_s:g} s and were stopped ({where})")


# ---------------------------------------------------------------- choosing and checking


def default_world_size() -> int:
    """One rank per GPU when there are at least two GPUs, else 2 (gloo ranks on the CPU).

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    gpus = hardware.gpu_count()
    return gpus if gpus >= 2 else 2


def choose_backend(world_size: int) -> str:
    """'nccl' when this machine has a GPU for every rank (and PyTorch has NCCL), else 'gloo'.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    if hardware.gpu_count() >= world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _check_launch(worker: Any, world_size: Any, backend: Any, timeout_s: Any, startup_timeout_s: Any,
                  args: Any, kwargs: Any, env: Any) -> tuple[int, str]:
    if not callable(worker):
        raise TypeError(f"worker must be a function worker(rank, world_size, ...), got {type(worker).__name__}")
    if world_size is None:
        world_size = default_world_size()
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be the number of ranks to start (a whole number >= 1), got {world_size!r}")
    if backend is None:
        backend = choose_backend(world_size)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'nccl' (GPUs), 'gloo' (CPU) or None to choose, got {backend!r}")
    if backend == "nccl":
        if not dist.is_nccl_available():
            raise ValueError("backend='nccl' needs a PyTorch build with NCCL (a CUDA build); pass backend='gloo'")
        if hardware.gpu_count() < world_size:
            raise ValueError(
                f"backend='nccl' needs one GPU per rank: world_size={world_size} but this machine has "
                f"{hardware.gpu_count()} GPU(s); pass backend='gloo' (CPU ranks) or fewer ranks"
            )
    for value, name, what in ((timeout_s, "timeout_s", "seconds the workers may run"),
                              (startup_timeout_s, "startup_timeout_s", "seconds to start the ranks and join the group")):
        if _check_positive(value, name, what) > MAX_TIMEOUT_S:
            raise ValueError(f"{name}={value!r} s is longer than a demonstration may hold the machine "
                             f"({MAX_TIMEOUT_S:g} s, a day); pass the seconds you would wait, e.g. 60")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of extra positional arguments for the worker, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict of keyword arguments for the worker, got {type(kwargs).__name__}")
    if env is not None and not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                              for k, v in env.items())):
        raise TypeError("env must be a dict of environment variables, names and values as strings")
    return world_size, backend


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for ``MASTER_PORT``).

    Taught in 06_nccl_point_to_point_and_collectives.
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


def _exit_with_parent() -> None:
    """End this rank's process if the notebook's process goes away, so no rank is orphaned."""
    parent = mp.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        os._exit(1)


def _rank_main(spec: dict[str, Any], rank: int, conn: Connection, release: Any) -> None:
    """The body of each rank's process (started by ``supervise``)."""
    global _pipe
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
        # Leave the group only when every rank is done (or the parent says so), so a rank
        # that finished early never tears the group down under one still working.
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


# ---------------------------------------------------------------- the parent


@dataclass
class _Rank:
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


def _tail(path: Path) -> str:
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-OUTPUT_CHARS:]


def _stop(ranks: list[_Rank], release: Any, graceful: bool) -> None:
    """End every rank's process: let them leave the group if all returned, else kill them."""
    if graceful:
        release.set()
        end = time.monotonic() + TEARDOWN_S
        for rank in ranks:
            rank.process.join(max(0.0, end - time.monotonic()))
    for rank in ranks:
        if rank.process.is_alive():
            rank.process.terminate()
    for rank in ranks:
        rank.process.join(3.0)
        if rank.process.is_alive():
            rank.process.kill()
            rank.process.join(3.0)


def _reason(ranks: list[_Rank], started: bool, startup_timeout_s: float, timeout_s: float) -> str:
    """One phrase: how the launch ended."""
    failed = [i for i, r in enumerate(ranks) if r.status in (RAISED, DIED)]
    if failed:
        return f"rank {failed[0]} {ranks[failed[0]].status}; ranks still running were stopped"
    if all(r.status == RETURNED for r in ranks):
        return "every rank returned"
    if not started:
        return f"start-up took longer than {startup_timeout_s:g} s; the ranks were stopped"
    return f"the deadline ({timeout_s:g} s) passed; ranks still running were stopped"


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
    ``choose_backend``. ``world_size`` defaults to ``default_world_size()``. Start-up (spawning,
    importing torch, joining the group) may take ``startup_timeout_s``; the workers then have
    ``timeout_s`` seconds. At the deadline, or one second after a rank fails, the ranks still
    running are killed. ``env`` adds environment variables to the ranks (e.g. NCCL_DEBUG);
    ``RANK_ENV`` is always set. Tensors in a result come back as lists.

    Never raises for what happens inside the ranks: see ``Outcome`` (and ``launch``).

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    world_size, backend = _check_launch(worker, world_size, backend, timeout_s, startup_timeout_s,
                                        args, kwargs, env)
    folder = tempfile.mkdtemp(prefix="course-ranks-")
    spec = {
        "payload": cloudpickle.dumps((worker, tuple(args), dict(kwargs or {}))),
        "world_size": world_size,
        "backend": backend,
        "port": free_port(),
        "env": dict(env or {}),
        "folder": folder,
        # The group's own timeout (and the wait to leave it) outlast our deadline: we stop ranks.
        "group_timeout_s": startup_timeout_s + timeout_s + 60.0,
        "release_wait_s": startup_timeout_s + timeout_s + 60.0,
    }
    ctx = mp.get_context("spawn")
    release = ctx.Event()
    ranks: list[_Rank] = []
    launched = time.monotonic()
    all_started: float | None = None
    try:
        for rank in range(world_size):
            reader, writer = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_rank_main, args=(spec, rank, writer, release),
                                  name=f"rank{rank}", daemon=True)
            process.start()
            writer.close()
            ranks.append(_Rank(process, reader))
        deadline = launched + startup_timeout_s
        while True:
            for rank in ranks:
                _read_messages(rank)
                if not rank.exit_seen and not rank.process.is_alive():
                    rank.exit_seen = True
                    _read_messages(rank)
                    if not rank.done:
                        rank.status = DIED
                        rank.error = f"its process ended with exit code {rank.process.exitcode} without returning"
                        if rank.started_at is None:
                            rank.error += (" before its worker started (from a script, call launch() under "
                                           "`if __name__ == '__main__':`, as multiprocessing's spawn needs)")
            now = time.monotonic()
            if all_started is None and all(r.started_at is not None or r.done for r in ranks):
                all_started = now
                deadline = now + timeout_s
            if all(r.done for r in ranks) or now >= deadline:
                break
            if any(r.status in (RAISED, DIED) for r in ranks):
                deadline = min(deadline, now + FAILURE_GRACE_S)
            waitables = [r.conn for r in ranks if r.conn is not None]
            waitables += [r.process.sentinel for r in ranks if not r.exit_seen]
            wait(waitables, timeout=max(0.0, deadline - now))
        finished = time.monotonic()
        _stop(ranks, release, graceful=all(r.status == RETURNED for r in ranks))
        for rank in ranks:
            _read_messages(rank)  # marks sent just before the end
            if not rank.done:
                rank.status = STOPPED
        reason = _reason(ranks, all_started is not None, startup_timeout_s, timeout_s)
        return Outcome(
            backend=backend,
            world_size=world_size,
            timeout_s=float(timeout_s),
            status=[r.status or STOPPED for r in ranks],
            results=[r.result for r in ranks],
            errors=[r.error for r in ranks],
            marks=[r.marks for r in ranks],
            printed=[_tail(Path(folder) / f"rank{i}.stdout") for i in range(world_size)],
            log=[_tail(Path(folder) / f"rank{i}.stderr") for i in range(world_size)],
            reason=reason,
            startup_s=None if all_started is None else round(all_started - launched, 3),
            elapsed_s=round(finished - (all_started if all_started is not None else launched), 3),
        )
    finally:
        for rank in ranks:  # on any way out (an interrupt included), no process is left behind
            if rank.process.is_alive():
                rank.process.kill()
                rank.process.join(3.0)
            if rank.conn is not None:
                rank.conn.close()
        shutil.rmtree(folder, ignore_errors=True)


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

    The same as ``supervise`` (see it for the arguments), but a rank that raises or dies
    raises ``WorkerError`` naming the rank (with its traceback), and ranks still running at the
    deadline are killed and raise ``LaunchTimeout`` (a ``TimeoutError``) naming them.

    >>> def hello(rank, world_size):  # doctest: +SKIP
    ...     return f"rank {rank} of {world_size}"
    >>> launch(hello, 2, backend="gloo")  # doctest: +SKIP
    ['rank 0 of 2', 'rank 1 of 2']

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    outcome = supervise(worker, world_size, backend=backend, timeout_s=timeout_s,
                        startup_timeout_s=startup_timeout_s, args=args, kwargs=kwargs, env=env)
    return outcome.raise_for_status()
