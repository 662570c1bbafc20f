"""The forkserver launched ranks start from: it imports torch once, so each rank starts in
milliseconds. It imports nothing heavy itself, so a notebook can start it first thing."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing import forkserver
from typing import Any

RANK_MODULES = ["helpers.distributed"]  # what the server imports once, for every rank


def context() -> Any:
    """The multiprocessing context that starts the ranks: "forkserver" with ``RANK_MODULES``
    preloaded where the system has it, else "spawn"; never "fork" (the parent may hold CUDA)."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(RANK_MODULES)  # no effect once the server runs: it has them
    return ctx


def start() -> bool:
    """Start the forkserver in the background if it is not running; return whether this system
    starts ranks from one (False: they are spawned)."""
    if context().get_start_method() != "forkserver":
        return False
    forkserver.ensure_running()  # returns once the server process is started, not imported
    return True
