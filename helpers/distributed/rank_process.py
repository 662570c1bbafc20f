"""The body of each rank's process: join the group, call the worker, send back what it gave."""

from __future__ import annotations

import contextlib
import datetime as _dt
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any

import cloudpickle
import torch
import torch.distributed as dist

from . import in_rank
from .launch_settings import RANK_ENV


def _plain(obj: Any) -> Any:
    """Tensors become (nested) lists, inside containers too; the rest is kept."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().tolist()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj) if type(obj) in (list, tuple) else obj
    return obj


def _redirect_output(folder: str, rank: int) -> None:
    """This process's stdout and stderr (Python's and C++'s) into files the parent reads."""
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
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(spec["port"]),
        RANK=str(rank),
        WORLD_SIZE=str(spec["world_size"]),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(spec["world_size"]),
    )
    timeout = _dt.timedelta(seconds=spec["group_timeout_s"])
    # The launcher's store, serving already, answers at once; one that rank 0 started while rank 1
    # was trying to connect made rank 1 retry 0.29-0.63 s later (2xH200).
    store = dist.TCPStore(
        "127.0.0.1", spec["port"], spec["world_size"], is_master=False, timeout=timeout
    )
    group = {"store": store, "rank": rank, "world_size": spec["world_size"], "timeout": timeout}
    if spec["backend"] == "nccl":
        from ..timing import load_spin_kernel, sleep_cycles_per_us

        torch.cuda.set_device(rank)
        # Loading delay()'s spin kernel took 0.3-0.47 s on H200s: do it while the group forms.
        loader = threading.Thread(target=load_spin_kernel, args=(rank,), name="load-spin-kernel")
        loader.start()
        try:
            dist.init_process_group("nccl", device_id=torch.device("cuda", rank), **group)
        finally:
            loader.join()
        sleep_cycles_per_us()  # calibrate delay() now, not in the middle of a measurement
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec["world_size"]))
        dist.init_process_group("gloo", **group)


def _own_process_group() -> None:
    """A process group of its own (its id the rank's pid), so the parent kills what it started too."""
    with contextlib.suppress(OSError):  # already a group leader (never, for a new child)
        os.setsid()


def _end_my_group() -> None:
    """Kill this rank and what it started (the rank alone if it does not lead its group)."""
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os._exit(1)


def _exit_with_parent() -> None:
    """In a thread of the rank: end it as soon as the notebook's process goes away."""
    parent = mp.parent_process()
    if parent is not None:
        wait([parent.sentinel])
        _end_my_group()


def rank_main(spec: dict[str, Any], rank: int, conn: Connection, release: Any) -> None:
    _own_process_group()
    _redirect_output(spec["folder"], rank)
    threading.Thread(target=_exit_with_parent, daemon=True, name="exit-with-parent").start()
    in_rank._pipe = conn
    try:
        worker, args, kwargs = cloudpickle.loads(spec["payload"])
        _join_group(rank, spec)
        conn.send(("start", time.monotonic()))
        result = worker(rank, spec["world_size"], *args, **kwargs)
        try:
            data = cloudpickle.dumps(_plain(result))
        except Exception as err:  # noqa: BLE001 - say which result could not travel
            raise TypeError(
                f"the worker's result ({type(result).__name__}) cannot be sent back: {err}; "
                f"return numbers, lists, dicts or tensors"
            ) from err
        conn.send(("result", data))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent as text
        with contextlib.suppress(OSError):  # the parent has gone
            conn.send(("error", traceback.format_exc()))
    finally:
        in_rank._pipe = None
        _leave(spec, release, conn)


def _leave(spec: dict[str, Any], release: Any, conn: Connection) -> None:
    """End the process once the parent says every rank is done, so no rank takes the group down
    under one still working. Without ``destroy_process_group``: 0.5 s per NCCL rank on H200s, and
    it never returned where a receive was never matched (notebook 06 leaves one)."""
    release.wait(spec["release_wait_s"])
    conn.close()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)  # skip the interpreter's slow clean-up: everything worth keeping was sent
