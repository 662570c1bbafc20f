"""A barrier that the ranks of one host leave within about a microsecond of each other, as
``MPI_Barrier`` lets nccl-tests' ranks start their clocks together: ``on_one_host``.

After an NCCL barrier and a synchronize, the two ranks' ``-G 1`` times of one graph of 20 8 B
all_reduces differed by 0.6-1.3 us a call on 2xH200 (three processes); with this barrier after
them, by at most 0.15 us, and their mean fell by 0.26-0.73 us a call (the README's -G section).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import socket
import time
import uuid

import torch.distributed as dist

TIMEOUT_S = 60.0  # a rank that never arrives: the others raise instead of spinning forever


class SpinBarrier:
    """Each rank writes its round into a shared page and spins until every rank has written it."""

    def __init__(self, path: str, rank: int, world_size: int) -> None:
        with open(path, "r+b") as file:
            self._page = mmap.mmap(file.fileno(), 8 * world_size)
        self._rounds = memoryview(self._page).cast("q")
        self.rank, self.round = rank, 0

    def wait(self, timeout_s: float = TIMEOUT_S) -> None:
        """Return once every rank has called ``wait`` as often; RuntimeError after ``timeout_s``."""
        self.round += 1
        self._rounds[self.rank] = self.round
        deadline = time.monotonic() + timeout_s
        while min(self._rounds) < self.round:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"rank {self.rank}: not every rank reached the barrier within {timeout_s:g} s"
                )


def on_one_host(rank: int, world_size: int) -> SpinBarrier | None:
    """A ``SpinBarrier`` on a page of /dev/shm that every rank of the group maps (a collective
    call); None where the ranks span hosts or a rank cannot map the page. The page's name is
    removed once all have mapped it, so nothing is left behind."""
    hosts: list = [None] * world_size
    dist.all_gather_object(hosts, socket.gethostname())
    if len(set(hosts)) > 1:
        return None
    path = [f"/dev/shm/datamove-{uuid.uuid4().hex}"]
    dist.broadcast_object_list(path, src=0)
    if rank == 0:
        with contextlib.suppress(OSError), open(path[0], "wb") as file:
            file.write(bytes(8 * world_size))
    dist.barrier()  # the page exists, or no rank will map it
    barrier: SpinBarrier | None = None
    with contextlib.suppress(OSError):
        barrier = SpinBarrier(path[0], rank, world_size)
    mapped: list = [None] * world_size
    dist.all_gather_object(mapped, barrier is not None)
    if rank == 0 and os.path.exists(path[0]):
        os.unlink(path[0])
    return barrier if all(mapped) else None
