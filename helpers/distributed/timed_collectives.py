"""Collectives timed as nccl-tests times them, inside a process group: ``collective_timings``."""

from __future__ import annotations

import ctypes
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from .. import checks
from . import spin_barrier
from .in_rank import backend_here, rank_device, report
from .nccl_calls import NcclOutOfPlace

COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


def _check_collective_args(
    rank: Any, world_size: Any, ops: Any, sizes: Any, warmup: Any, iters: Any, samples: Any
) -> tuple[list[str], list[int]]:
    """The checked ops and sizes; ValueError / TypeError saying what to pass."""
    world_size = checks.check_count(world_size, "world_size", 1, "ranks")
    rank = checks.check_count(rank, "rank", 0)
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
    checked = [checks.check_size(size, "each size") for size in sizes]
    step = 4 * world_size
    for size in checked:
        if size % step:
            raise ValueError(
                f"size {size} bytes is not a multiple of 4 x world_size = {step} bytes: a message of "
                f"float32 elements splits into {world_size} equal parts; pass e.g. "
                f"{max(step, size - size % step)} bytes"
            )
    checks.check_count(warmup, "warmup", 0, "calls")
    checks.check_count(iters, "iters", 1, "calls per sample")
    checks.check_count(samples, "samples", 1)
    return list(ops), checked


# Where notebook 06 times each collective: torch runs all_reduce and broadcast in place, the others
# out of place. nccl-tests times both groups; datamove adds the other one (collective_sweep).
PLACEMENTS = ("out_of_place", "in_place")
NOTEBOOK_PLACEMENT = {
    op: "in_place" if op in ("all_reduce", "broadcast") else "out_of_place" for op in COLLECTIVE_OPS
}


def placement_refused(op: str, placement: str, backend: str | None) -> str | None:
    """Why ``op`` cannot be timed in ``placement`` ("out_of_place" or "in_place") here, or None.

    In place as nccl-tests defines it (all_gather's input, reduce_scatter's output: the rank's
    slice of the other buffer); out-of-place all_reduce and broadcast need ``NcclOutOfPlace``.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    if op == "all_to_all" and placement == "in_place":
        return "an in-place all_to_all sends and receives through one buffer at once; torch has no such call"
    if op in ("all_reduce", "broadcast") and placement == "out_of_place" and backend != "nccl":
        return f"torch runs {op} in place only; out of place needs NCCL's own call (backend nccl)"
    return None


def _collective_buffers(
    op: str,
    rank: int,
    world_size: int,
    numel: int,
    device: torch.device,
    placement: str | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The buffers of one call of ``op`` filled with a pattern, and the result every rank expects.

    Small whole numbers, exact in float32: rank r contributes r + 1 (reduce_scatter scaled by the
    part's index); broadcast sends rank 0's ramp; all_to_all sends part j of rank r as r * n + j.
    In place (default: notebook 06's placement), "part" is the rank's slice of "full".
    """
    in_place = (placement or NOTEBOOK_PLACEMENT[op]) == "in_place"
    f32 = torch.float32  # named on every buffer, whatever torch's default dtype is
    n, share = world_size, numel // world_size
    # the index of the part each element belongs to
    parts = torch.arange(n, dtype=f32, device=device).repeat_interleave(share)
    total = n * (n + 1) / 2  # sum over ranks of rank + 1
    mine = slice(rank * share, (rank + 1) * share)  # this rank's part of "full"
    if op == "all_reduce":
        full = torch.full((numel,), rank + 1.0, dtype=f32, device=device)
        out = {} if in_place else {"out": torch.empty(numel, dtype=f32, device=device)}
        return {"full": full, **out}, torch.full((numel,), total, dtype=f32, device=device)
    if op == "all_gather":
        full = torch.empty(numel, dtype=f32, device=device)
        part = full[mine] if in_place else torch.empty(share, dtype=f32, device=device)
        part.fill_(rank + 1.0)
        return {"full": full, "part": part}, parts + 1
    if op == "reduce_scatter":
        full = (parts + 1) * (rank + 1)
        part = full[mine] if in_place else torch.empty(share, dtype=f32, device=device)
        return {"full": full, "part": part}, torch.full(
            (share,), total * (rank + 1), dtype=f32, device=device
        )
    if op == "broadcast":
        ramp = torch.arange(numel, dtype=f32, device=device) % 1024
        full = ramp.clone() if rank == 0 else torch.zeros(numel, dtype=f32, device=device)
        out = {} if in_place else {"out": torch.empty(numel, dtype=f32, device=device)}
        return {"full": full, **out}, ramp
    # all_to_all: part j of rank r goes to rank j, so rank r receives part r of every rank j
    full = rank * n + parts
    return {"full": full, "out": torch.empty(numel, dtype=f32, device=device)}, parts * n + rank


def _collective_call(op: str, buffers: dict[str, torch.Tensor], direct: Any = None) -> None:
    """One call of ``op`` (``direct``: an ``NcclOutOfPlace`` for out-of-place calls)."""
    if op == "all_reduce":
        if "out" in buffers:
            direct.all_reduce(buffers["full"], buffers["out"])
        else:
            dist.all_reduce(buffers["full"])
    elif op == "all_gather":
        dist.all_gather_into_tensor(buffers["full"], buffers["part"])
    elif op == "reduce_scatter":
        # full summed over the ranks; this rank keeps its part
        dist.reduce_scatter_tensor(buffers["part"], buffers["full"])
    elif op == "broadcast":
        if "out" in buffers:
            direct.broadcast(buffers["full"], buffers["out"], 0)
        else:
            dist.broadcast(buffers["full"], src=0)
    else:
        dist.all_to_all_single(buffers["out"], buffers["full"])  # part j goes to rank j


def _collective_result(op: str, buffers: dict[str, torch.Tensor]) -> torch.Tensor:
    if op == "reduce_scatter":
        return buffers["part"]
    return buffers["out"] if "out" in buffers else buffers["full"]


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
    """Worker body (inside ``launch`` or ``torchrun``): time collectives over message sizes the
    way nccl-tests does.

    For each size in bytes (float32, a multiple of 4 x world_size, counted as nccl-tests counts it)
    and each op: one checked call counts wrong elements (nccl-tests' ``#wrong``), then ``samples``
    samples of ``iters`` calls after ``warmup``, with CUDA events under NCCL, the host clock under
    gloo. Returns ``{"timings": {op: [Timing per size]}, "wrong": {op: [count per size]}}``.
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
    loop = _Loop(warmup, iters, samples)
    result: dict[str, dict[str, list]] = {
        "timings": {op: [] for op in ops},
        "wrong": {op: [] for op in ops},
    }
    for size in sizes:
        for op in ops:
            timed, wrong, _ = _time_one(op, rank, world_size, size, None, loop)
            result["wrong"][op].append(wrong)
            result["timings"][op].append(timed)
    return result


@dataclass(frozen=True)
class _Loop:
    """How each op is timed, in nccl-tests' flags: ``warmup`` calls (-w), then ``samples`` samples
    of ``iters`` calls (-n), from a CUDA graph replayed ``graph_launches`` times (-G), each call
    timed (``per_iter``: -I 1); ``together``: the ranks' host barrier before a graph's clock."""

    warmup: int
    iters: int
    samples: int
    graph_launches: int = 0
    per_iter: bool = False
    together: spin_barrier.SpinBarrier | None = None


def _time_one(
    op: str,
    rank: int,
    world_size: int,
    size: int,
    placement: str | None,
    loop: _Loop,
    direct: Any = None,
) -> tuple[Any, int, list[float] | None]:
    """One op at one size and placement: its Timing, the check call's wrong elements and, with
    ``per_iter``, ``iters`` more calls timed one by one."""
    from .. import timing  # timing sits below helpers.distributed; imported here as delay() does

    clock = timing.cuda_events if backend_here() == "nccl" else timing.host_clock
    device = rank_device()
    buffers, expected = _collective_buffers(op, rank, world_size, size // 4, device, placement)
    _collective_call(op, buffers, direct)
    wrong = int((_collective_result(op, buffers) != expected).sum().item())
    del expected
    label = f"{op} {timing.format_bytes(size)}"
    call = lambda: _collective_call(op, buffers, direct)  # noqa: E731
    if loop.graph_launches:
        timed = _graph_timing(call, loop, size, label)
    else:
        timed = clock(
            call,
            warmup=loop.warmup,
            repeats=loop.samples,
            calls_per_sample=loop.iters,
            nbytes=size,
            label=label,
        )
    return timed, wrong, _per_iteration_s(call, loop.iters) if loop.per_iter else None


def _graph_timing(call: Callable[[], None], loop: _Loop, size: int, label: str) -> Any:
    """nccl-tests' ``-G`` (src/common.cu, BenchTime): for each sample, ``iters`` calls captured in a
    new CUDA graph on a side stream, then, after a barrier (and a host spin barrier where the ranks
    share a host, as tight as nccl-tests' MPI_Barrier), its first ``launches`` launches on that
    stream timed by a host clock that stops when that stream is done (the first launch uploads the
    graph, inside the timing as in nccl-tests); seconds per call, each sample the mean over ranks."""
    from .. import timing

    warmup, iters, launches = loop.warmup, loop.iters, loop.graph_launches
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 1)):  # NCCL sets up its channels before a capture
            call()
    torch.cuda.synchronize()
    seconds = []
    for _ in range(loop.samples):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            for _ in range(iters):
                call()
        launch, launched = _graph_launch(graph, side)
        dist.barrier()
        torch.cuda.synchronize()
        if loop.together is not None:  # the ranks start their clocks together, as after MPI_Barrier
            loop.together.wait()
        start = time.perf_counter()
        for _ in range(launches):
            launch()
        side.synchronize()  # nccl-tests waits for its stream, not for the device
        seconds.append((time.perf_counter() - start) / (launches * iters))
        del graph
    mean = torch.tensor(seconds, dtype=torch.float64, device=rank_device())
    dist.all_reduce(mean)  # nccl-tests reports the mean over ranks (its -a 1, the default)
    return timing.Timing(
        samples_s=(mean / dist.get_world_size()).tolist(),
        method=f"host clock around the first {launches} {launched} of a new CUDA graph of {iters} calls, one graph a sample, mean over ranks",
        nbytes=size,
        label=label,
        calls_per_sample=iters * launches,
        warmup=warmup,
    )


def _graph_launch(
    graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream
) -> tuple[Callable[[], None], str]:
    """One launch of ``graph`` on ``stream`` as nccl-tests makes it, and its name: the driver's
    ``cuGraphLaunch`` called directly on the instantiated graph, or ``graph.replay()`` where the
    driver library or torch's ``raw_cuda_graph_exec`` is missing. A first launch of 20 8 B
    all_reduces took 9.4-9.5 us a call through replay(), 7.9-8.0 us so (the README's -G section)."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        handle, raw = graph.raw_cuda_graph_exec(), stream.cuda_stream
    except (OSError, AttributeError):

        def replay() -> None:
            with torch.cuda.stream(stream):
                graph.replay()

        return replay, "graph.replay() calls"

    driver.cuGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]

    def launch() -> None:
        if driver.cuGraphLaunch(handle, raw) != 0:
            raise RuntimeError("cuGraphLaunch failed: run without -G, or report it")

    return launch, "cuGraphLaunch calls"


def _per_iteration_s(call: Callable[[], None], iters: int) -> list[float]:
    """nccl-tests' ``-I 1``: ``iters`` back-to-back calls, each timed; the slowest rank's seconds."""
    if backend_here() == "nccl":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        events[0].record()
        for event in events[1:]:
            call()
            event.record()
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) / 1e3 for a, b in zip(events[:-1], events[1:], strict=True)]
    else:
        stamps = [time.perf_counter()]
        for _ in range(iters):
            call()
            stamps.append(time.perf_counter())
        times = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]
    slowest = torch.tensor(times, dtype=torch.float64, device=rank_device())
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


def _rank_facts(rank: int) -> dict[str, Any]:
    """Where this rank runs, for nccl-tests' ``# Using devices`` lines."""
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
    graph_launches: int = 0,
    per_iter: bool = False,
    emit: Callable[[Any], None] | None = None,
) -> None:
    """Worker body, like ``collective_timings``, for datamove: each op and size timed out of place
    then in place, with nccl-tests' ``-G`` (``graph_launches``) and ``-I 1`` (``per_iter``).

    Rank 0 passes to ``emit`` (default: ``report``) ``{"devices": [...]}``, then per op and size
    ``{"op", "size", "groups": {placement: {"timing", "wrong", "per_iter_s"} or {"refused": why}}}``.
    """
    ops, sizes = _check_collective_args(rank, world_size, ops, sizes, warmup, iters, samples)
    graph_launches = checks.check_count(graph_launches, "graph_launches", 0, "graph replays")
    backend = backend_here()
    if graph_launches and backend != "nccl":
        raise ValueError(
            f"graph_launches={graph_launches} replays CUDA graphs; the {backend} backend runs on the "
            "CPU and has none: pass graph_launches=0"
        )
    together = spin_barrier.on_one_host(rank, world_size) if graph_launches else None
    loop = _Loop(warmup, iters, samples, graph_launches, per_iter, together)
    send = emit or report
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, _rank_facts(rank))
    if rank == 0:
        send({"devices": everyone})
    direct = None
    if backend == "nccl" and any(op in ("all_reduce", "broadcast") for op in ops):
        direct = NcclOutOfPlace()
    for op in ops:
        for size in sizes:
            groups: dict[str, dict[str, Any]] = {}
            for placement in PLACEMENTS:
                why = placement_refused(op, placement, backend)
                if why is not None:
                    groups[placement] = {"refused": why}
                    continue
                timed, wrong, per_iter_s = _time_one(
                    op, rank, world_size, size, placement, loop, direct
                )
                total = torch.tensor([wrong], dtype=torch.int64, device=rank_device())
                dist.all_reduce(total)
                groups[placement] = {
                    "timing": timed,
                    "wrong": int(total.item()),
                    "per_iter_s": per_iter_s,
                }
            if rank == 0:
                send({"op": op, "size": size, "groups": groups})
