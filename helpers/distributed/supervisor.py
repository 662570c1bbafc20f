"""The parent's side of a launch: start the ranks, watch the deadlines, stop them, collect."""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import cloudpickle
import torch.distributed as dist

from .. import forkserver
from .launch_checks import check_launch, worker_payload
from .launch_settings import (
    DEATH_NEWS_S,
    FAILURE_GRACE_S,
    OUTPUT_KIB,
    STARTUP_TIMEOUT_S,
    TEARDOWN_S,
)
from .outcome import DIED, RAISED, RETURNED, STOPPED, Outcome
from .rank_process import rank_main


@dataclass
class _Rank:
    """The parent's view of one rank: its process, its pipe and what it has said so far."""

    process: Any
    conn: Connection | None
    status: str | None = None
    result: Any = None
    error: str | None = None
    started_at: float | None = None
    marks: list[list[Any]] = field(default_factory=list)
    exit_seen: bool = False
    on_report: Callable[[Any], None] | None = None

    @property
    def done(self) -> bool:
        return self.status is not None


@dataclass
class _Launch:
    """One launch as the parent sees it; times are ``time.monotonic`` readings."""

    spec: dict[str, Any]
    release: Any  # the event that lets ranks that all returned leave the group
    ranks: list[_Rank] = field(default_factory=list)
    launched: float = field(default_factory=time.monotonic)
    all_started: float | None = None
    finished: float | None = None
    failures: list[int] = field(default_factory=list)
    killed: bool = False
    exited: list[bool] = field(default_factory=list)  # which ranks ended before the kill
    on_report: Callable[[int, Any], None] | None = None


def _serve_store(world_size: int, patience_s: float) -> Any:
    """The ranks' ``TCPStore``, served from here before any rank starts (as torchrun's agent does),
    on a port the system picks; it stops serving when the last reference to it goes."""
    return dist.TCPStore(
        "127.0.0.1",
        0,
        world_size,
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=patience_s),
    )


def _start_ranks(run: _Launch, ctx: Any) -> None:
    """One process per rank, each with a pipe to tell the parent how it goes."""
    for rank in range(run.spec["world_size"]):
        reader, writer = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=rank_main,
            args=(run.spec, rank, writer, run.release),
            name=f"rank{rank}",
            daemon=True,
        )
        on_report = None if run.on_report is None else functools.partial(run.on_report, rank)
        # appended before it starts: the clean-up closes its pipe
        run.ranks.append(_Rank(process, reader, on_report=on_report))
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
        elif kind == "report" and rank.on_report is not None and rank.status is None:
            rank.on_report(cloudpickle.loads(message[1]))
        elif kind == "result" and rank.status is None:
            try:
                rank.result, rank.status = cloudpickle.loads(message[1]), RETURNED
            except Exception as err:  # noqa: BLE001
                rank.status, rank.error = RAISED, f"its result could not be read back here: {err!r}"
        elif kind == "error" and rank.status is None:
            rank.status, rank.error = RAISED, message[1]


def _exit_words(exitcode: int | None) -> str:
    """'died with SIGKILL' (a signal) or 'exited with code 3'."""
    if exitcode is None:
        return "ended (its exit code could not be read)"
    if exitcode < 0:
        try:
            return f"died with {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"died with signal {-exitcode}"
    return f"exited with code {exitcode}"


def _has_ended(process: Any) -> bool:
    """Whether a rank's process has ended; once its sentinel fires, wait up to a second for its
    exit code, so that a death is seen as soon as the ranks it cut off."""
    if not process.is_alive():
        return True
    if wait([process.sentinel], timeout=0):
        process.join(1.0)
        return not process.is_alive()
    return False


def _notice_exit(rank: _Rank) -> None:
    """Mark a rank whose process ended without returning or raising 'died', and say how."""
    if rank.exit_seen or not _has_ended(rank.process):
        return
    rank.exit_seen = True
    _read_messages(rank)  # what it sent just before it ended
    if rank.done:
        return
    rank.status, rank.error = DIED, f"{_exit_words(rank.process.exitcode)} before returning"
    if rank.started_at is None:
        rank.error += (
            " (before its worker started: from a script, call launch() under "
            "`if __name__ == '__main__':`, as multiprocessing's spawn needs)"
        )


def _note_failures(run: _Launch) -> None:
    """Add the ranks that newly raised or died to ``run.failures``, deaths first: a rank that
    dies makes the others raise, never the other way round."""
    new = [
        i for i, r in enumerate(run.ranks) if r.status in (RAISED, DIED) and i not in run.failures
    ]
    run.failures += sorted(new, key=lambda i: run.ranks[i].status != DIED)


def _take_news(run: _Launch) -> None:
    """Read every rank's news, notice ended processes, note who failed. The peers' exceptions can
    arrive before the death that caused them, so on an exception deaths get ``DEATH_NEWS_S``."""
    for rank in run.ranks:
        _read_messages(rank)
    if any(r.status == RAISED and i not in run.failures for i, r in enumerate(run.ranks)):
        wait([r.process.sentinel for r in run.ranks if not r.exit_seen], timeout=DEATH_NEWS_S)
    for rank in run.ranks:
        _notice_exit(rank)
    _note_failures(run)


def _watch(run: _Launch, startup_timeout_s: float, timeout_s: float) -> None:
    """Wait until every rank is done or a deadline passes: start-up's, then ``timeout_s`` from when
    the last rank started its worker; after a failure, ``FAILURE_GRACE_S`` more."""
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
    end = time.monotonic() + seconds
    pending = [r.process.sentinel for r in ranks]
    while pending and time.monotonic() < end:
        ready = wait(pending, timeout=end - time.monotonic())
        pending = [s for s in pending if s not in ready]


def _kill_group(process: Any) -> None:
    """SIGKILL a rank's process group (its id is the rank's pid): the rank and what it started."""
    if process.pid is None:
        return  # never started
    # While a process of the group lives, no other process gets the group's id.
    # OSError: no such group (the rank had not called setsid yet, or the group is gone)
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.is_alive():
        process.kill()


def _kill_all(run: _Launch) -> None:
    for rank in run.ranks:
        _kill_group(rank.process)
    for rank in run.ranks:
        if rank.process.pid is not None:
            rank.process.join(3.0)
    run.killed = True


def _stop(run: _Launch) -> None:
    """End every rank and what it started: ranks that all returned may end by themselves (up to
    ``TEARDOWN_S``), then every process group is killed. A rank not finished before the kill is
    'stopped': what it raises after (gloo's "Connection closed by peer") is the kill's doing."""
    if all(r.status == RETURNED for r in run.ranks):
        run.release.set()
        _wait_for_exits(run.ranks, TEARDOWN_S)
    _settle(run)
    run.exited = [_has_ended(r.process) for r in run.ranks]
    _kill_all(run)


def _reason(run: _Launch, startup_timeout_s: float, timeout_s: float) -> str:
    if run.failures:
        first = run.ranks[run.failures[0]]
        how = first.error if first.status == DIED else first.status
        return f"rank {run.failures[0]} {how}; ranks still running were stopped"
    if all(r.status == RETURNED for r in run.ranks):
        return "every rank returned"
    if run.all_started is None:
        waited = (run.finished or run.launched) - run.launched
        return (
            f"start-up took longer than startup_timeout_s={startup_timeout_s:g} s (waited {waited:.1f} s); "
            f"the ranks were stopped"
        )
    return f"the deadline ({timeout_s:g} s) passed; ranks still running were stopped"


def _tail(path: Path) -> str:
    """The last ``OUTPUT_KIB`` KiB of a rank's output file; a cut start begins at a whole line,
    after a note of how much was left out."""
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
    return f"[... the first {size - len(data) + cut} bytes are not kept]\n" + data[cut:].decode(
        "utf-8", errors="replace"
    )


def _settle(run: _Launch) -> None:
    """Read the last messages (marks sent just before the end), note who failed, and mark the
    ranks not done 'stopped'."""
    for rank in run.ranks:
        _read_messages(rank)
    _note_failures(run)
    for rank in run.ranks:
        if not rank.done:
            rank.status = STOPPED


def _collect(run: _Launch, timeout_s: float, startup_timeout_s: float) -> Outcome:
    _settle(run)
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
        elapsed_s=round(
            (run.finished or run.launched) - (started if started is not None else run.launched), 3
        ),
        startup_timeout_s=float(startup_timeout_s),
        failure_order=list(run.failures),
        exited=list(run.exited),
    )


def _clean_up(run: _Launch | None, folder: str) -> None:
    """On any way out (an interrupt included): no process, pipe or folder is left."""
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
    on_report: Callable[[int, Any], None] | None = None,
) -> Outcome:
    """Run ``worker(rank, world_size, *args, **kwargs)`` in one new process per rank, each in the
    default process group, until all return or a deadline passes; never raises for what the ranks do.

    ``backend``: 'nccl' (rank r uses GPU r), 'gloo' (CPU) or None to choose. Start-up may take
    ``startup_timeout_s`` seconds, the workers then ``timeout_s``; at a deadline, or
    ``FAILURE_GRACE_S`` after a rank fails, the ranks still running are killed. ``env`` adds to
    ``RANK_ENV``. Tensors in results come back as lists. ``on_report(rank, value)`` gets each
    value a rank passes to ``report``.
    """
    world_size, backend = check_launch(
        worker, world_size, backend, timeout_s, startup_timeout_s, args, kwargs, env
    )
    payload = worker_payload(worker, args, kwargs)
    ctx = forkserver.context()
    folder = tempfile.mkdtemp(prefix="course-ranks-")
    run: _Launch | None = None
    patience_s = startup_timeout_s + timeout_s + 60.0
    store = None
    try:
        store = _serve_store(world_size, patience_s)
        spec = {
            "payload": payload,
            "world_size": world_size,
            "backend": backend,
            "port": store.port,
            "env": dict(env or {}),
            "parent_env": dict(os.environ),
            "folder": folder,
            # The group's own timeout and the wait to leave it outlast our deadlines: we stop ranks.
            "group_timeout_s": patience_s,
            "release_wait_s": patience_s,
        }
        run = _Launch(spec, ctx.Event(), on_report=on_report)
        _start_ranks(run, ctx)
        _watch(run, startup_timeout_s, timeout_s)
        _stop(run)
        return _collect(run, timeout_s, startup_timeout_s)
    finally:
        _clean_up(run, folder)
        del store  # stop serving now, even if a traceback keeps this frame alive


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
    on_report: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """``supervise``, returning the results in rank order, or raising ``WorkerError`` for the rank
    that failed first or ``LaunchTimeout`` (a ``TimeoutError``) naming the ranks and the deadline."""
    outcome = supervise(
        worker,
        world_size,
        backend=backend,
        timeout_s=timeout_s,
        startup_timeout_s=startup_timeout_s,
        args=args,
        kwargs=kwargs,
        env=env,
        on_report=on_report,
    )
    return outcome.raise_for_status()
