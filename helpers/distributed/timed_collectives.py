"""Collectives timed as nccl-tests times them, inside a process group: ``collective_timings``."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from .. import hardware
from .in_rank import backend_here, rank_device, report

COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


def _check_collective_args(
    rank: Any, world_size: Any, ops: Any, sizes: Any, warmup: Any, iters: Any, samples: Any
) -> tuple[list[str], list[int]]:
    """The checked ops and sizes of ``collective_timings``; ValueError/TypeError saying what to pass."""
    world_size = hardware.check_count(world_size, "world_size", 1, "ranks")
    rank = hardware.check_count(rank, "rank", 0)
    if rank >= world_size:
        raise ValueError(f"rank must be 0 to world_size - 1 = {world_size - 1}, got {rank}")
    if isinstance(ops, str) or not isinstance(ops, Sequence) or not ops:
        raise TypeError(
            f"ops must be a non-empty list of collective names from {list(COLLECTIVE_OPS)}, got {ops!r}"
        )
    for op in ops:
        if op not in COLLECTIVE_OPS:
            raise ValueError(f"unknown collective {op!r}: pass names from {list(COLLECTIVE_OPS)}")
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise TypeError(f"sizes must be a non-empty list of message sizes in bytes, got {sizes!r}")
    checked = [hardware.check_size(size, "each size") for size in sizes]
    step = 4 * world_size
    for size in checked:
        if size % step:
            raise ValueError(
                f"size {size} bytes is not a multiple of 4 x world_size = {step} bytes: a message of "
                f"float32 elements splits into {world_size} equal parts; pass e.g. "
                f"{max(step, size - size % step)} bytes"
            )
    hardware.check_count(warmup, "warmup", 0, "calls")
    hardware.check_count(iters, "iters", 1, "calls per sample")
    hardware.check_count(samples, "samples", 1)
    return list(ops), checked


def _collective_buffers(
    op: str, rank: int, world_size: int, numel: int, device: torch.device
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The buffers of one call of ``op`` filled with a pattern, and the result every rank expects.

    Values are small whole numbers, exact in float32: rank r contributes r + 1 (all_reduce,
    reduce_scatter scaled by the part's index, all_gather); broadcast sends rank 0's ramp;
    all_to_all sends part j of rank r as r * n + j.
    """
    n, share = world_size, numel // world_size
    parts = torch.arange(n, dtype=torch.float32, device=device).repeat_interleave(
        share
    )  # part index
    total = n * (n + 1) / 2  # sum over ranks of rank + 1
    if op == "all_reduce":
        full = torch.full((numel,), rank + 1.0, device=device)
        return {"full": full}, torch.full((numel,), total, device=device)
    if op == "all_gather":
        part = torch.full((share,), rank + 1.0, device=device)
        return {"full": torch.empty(numel, device=device), "part": part}, parts + 1
    if op == "reduce_scatter":
        full = (parts + 1) * (rank + 1)
        return {"full": full, "part": torch.empty(share, device=device)}, torch.full(
            (share,), total * (rank + 1), device=device
        )
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
        dist.all_gather_into_tensor(
            buffers["full"], buffers["part"]
        )  # every rank's part, into full
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(
            buffers["part"], buffers["full"]
        )  # full summed; this rank keeps its part
    elif op == "broadcast":
        dist.broadcast(buffers["full"], src=0)
    else:
        dist.all_to_all_single(buffers["out"], buffers["full"])  # part j goes to rank j


def _collective_result(op: str, buffers: dict[str, torch.Tensor]) -> torch.Tensor:
    return (
        buffers["part"]
        if op == "reduce_scatter"
        else buffers["out"]
        if op == "all_to_all"
        else buffers["full"]
    )


def collective_timings(
    rank: int,
    world_size: int,
    *,
    ops: Sequence[str],
    sizes: Sequence[int],
    warmup: int,
    iters: int,
    samples: int,
) -> dict[str, dict[str, list]]:
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
    """
    ops, sizes = _check_collective_args(rank, world_size, ops, sizes, warmup, iters, samples)
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "collective_timings runs inside a process group: pass it to distributed.launch "
            "(launch(collective_timings, n, kwargs=...)) or call it from a torchrun script after "
            "init_process_group"
        )
    if (dist.get_rank(), dist.get_world_size()) != (rank, world_size):
        raise ValueError(
            f"rank {rank} of {world_size} does not match the process group (rank "
            f"{dist.get_rank()} of {dist.get_world_size()}); pass dist.get_rank(), dist.get_world_size()"
        )
    from .. import timing  # timing sits below helpers.distributed; imported here as delay() does

    clock = timing.cuda_events if backend_here() == "nccl" else timing.host_clock
    device = rank_device()
    result: dict[str, dict[str, list]] = {
        "timings": {op: [] for op in ops},
        "wrong": {op: [] for op in ops},
    }
    for size in sizes:
        for op in ops:
            buffers, expected = _collective_buffers(op, rank, world_size, size // 4, device)
            _collective_call(op, buffers)
            result["wrong"][op].append(
                int((_collective_result(op, buffers) != expected).sum().item())
            )
            del expected
            result["timings"][op].append(
                clock(
                    lambda op=op, buffers=buffers: _collective_call(op, buffers),  # type: ignore[misc]
                    warmup=warmup,
                    repeats=samples,
                    calls_per_sample=iters,
                    nbytes=size,
                    label=f"{op} {timing.format_bytes(size)}",
                )
            )
            del buffers
    return result


def _rank_facts(rank: int) -> dict[str, Any]:
    """Where this rank runs, for nccl-tests' ``# Using devices`` lines: pid, host, device, PCI id, name."""
    facts: dict[str, Any] = {
        "rank": rank,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "device": -1,
        "pci": [0, 0, 0],
        "name": f"CPU ({backend_here() or 'no group'})",
    }
    device = rank_device()
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            device=device.index,
            name=props.name,
            pci=[int(getattr(props, f"pci_{part}_id", 0)) for part in ("domain", "bus", "device")],
        )
    return facts


def collective_sweep(
    rank: int,
    world_size: int,
    *,
    ops: Sequence[str],
    sizes: Sequence[int],
    warmup: int,
    iters: int,
    samples: int,
    emit: Callable[[Any], None] | None = None,
) -> None:
    """Worker body, like ``collective_timings`` (same arguments, same measurement: it calls it
    for one op and one size at a time), that hands over each row as soon as it is measured.

    Rank 0 passes to ``emit`` (default: ``report``, to the launching process) first
    ``{"devices": [facts of every rank]}``, then, op by op and size by size,
    ``{"op", "timing": Timing, "wrong": wrong elements summed over the ranks}``.
    """
    send = emit or report
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, _rank_facts(rank))
    if rank == 0:
        send({"devices": everyone})
    for op in ops:
        for size in sizes:
            got = collective_timings(
                rank,
                world_size,
                ops=[op],
                sizes=[size],
                warmup=warmup,
                iters=iters,
                samples=samples,
            )
            wrong = torch.tensor([got["wrong"][op][0]], dtype=torch.int64, device=rank_device())
            dist.all_reduce(wrong)
            if rank == 0:
                send({"op": op, "timing": got["timings"][op][0], "wrong": int(wrong.item())})
