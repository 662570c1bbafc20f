"""The server that launched ranks are started from: multiprocessing's forkserver, which imports
torch once (and ``helpers.distributed``), so that each rank starts in milliseconds.

It imports nothing heavy itself, so a notebook can start the server first thing, and the
server's imports (2-4 s on the GPU machines) run beside the notebook's own.
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing import forkserver
from typing import Any

RANK_MODULES = ["helpers.distributed"]  # what the server imports once, for every rank


def context() -> Any:
    """The multiprocessing context that starts the ranks: "forkserver" with ``RANK_MODULES``
    preloaded, where the system has it (Linux, macOS); else "spawn". Never "fork": the parent
    (a notebook) may hold CUDA already, and a forked child cannot use it.
    """
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(RANK_MODULES)  # no effect once the server runs: it has them
    return ctx


def start() -> bool:
    """Start the forkserver now, in the background, if it is not running: its imports go on
    while the caller goes on, and the first launch waits only for what is left of them.
    Returns whether this system starts ranks from a forkserver (False: they are spawned,
    each importing torch itself, and there is nothing to start).
    """
    if context().get_start_method() != "forkserver":
        return False
    forkserver.ensure_running()  # returns once the server process is started, not imported
    return True
