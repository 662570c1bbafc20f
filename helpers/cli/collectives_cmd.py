"""``datamove collectives``: the collectives of ``distributed.collective_timings`` printed as
nccl-tests prints them (``helpers.cli.nccl_tests_format``), each row the moment rank 0 has it,
under torchrun or with ranks started here; nccl-tests' flags beside the long options; and a sweep
over the number of ranks (``--sweep-ranks``: N = 2, 4, ... every GPU, busbw against N).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist

from .. import distributed, timing
from . import nccl_tests_format
from .cli_args import MiB, UsageError, need_gpus, size_range
from .cli_output import Progress, say

# Notebook 06's full-size params: warm-up calls, calls per sample, samples.
COLLECTIVE_WARMUP, COLLECTIVE_ITERS, COLLECTIVE_SAMPLES = 5, 20, 5
# Default sizes per backend: gloo on a CPU moves well under 1 GB/s, so its sweep stops where one
# sample still takes well under a second; NCCL goes to 1 GiB as nccl-tests' -e 1G does.
DEFAULT_RANGE = {"nccl": (1024, 2**30, 4), "gloo": (1024, 4 * MiB, 4)}


def _under_torchrun() -> bool:
    """Whether torchrun started this process (its group is joined from the environment)."""
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))


def _check_collective_sizes(sizes: list[int], world_size: int) -> None:
    """Each size a multiple of 4 bytes x ranks (float32 split in equal parts), else a UsageError."""
    step = 4 * world_size
    bad = [n for n in sizes if n % step]
    if bad:
        raise UsageError(
            f"{bad[0]} bytes is not a multiple of 4 x {world_size} ranks = {step} bytes (float32 "
            f"elements split into equal parts); pass e.g. {max(step, bad[0] - bad[0] % step)}"
        )


def _chosen_sizes(args: argparse.Namespace, backend: str, world: int) -> list[int]:
    """``--sizes``, else nccl-tests' -b/-e/-f/-i, else the backend's default range, each rounded up
    to a multiple of 4 x ranks (nccl-tests rounds its counts the same way)."""
    if args.sizes:
        return args.sizes
    smallest, largest, factor = DEFAULT_RANGE[backend]
    smallest = args.minbytes or smallest
    largest = args.maxbytes or max(largest, smallest)
    try:
        sizes = size_range(
            smallest,
            largest,
            factor=None if args.stepbytes else (args.stepfactor or factor),
            step=args.stepbytes,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    step = 4 * world
    return sorted({-(-n // step) * step for n in sizes})


class _NcclTestsPrinter:
    """Prints the header before an op's first row, each row as it arrives, the trailer after its
    last; keeps nccl-tests' JSON results and a progress line on stderr."""

    def __init__(
        self, args: argparse.Namespace, world: int, backend: str, sizes: list[int]
    ) -> None:
        self.args, self.world, self.backend, self.sizes = args, world, backend, sizes
        self.devices: list[dict[str, Any]] = []
        self.rows: dict[str, list[dict[str, Any]]] = {op: [] for op in args.ops}
        self.progress = Progress("collectives", len(args.ops) * len(sizes))
        self.quiet = bool(getattr(args, "json", False))

    def __call__(self, value: dict[str, Any]) -> None:
        if "devices" in value:
            self.devices = value["devices"]
            return
        op, t = value["op"], value["timing"]
        rows = self.rows[op]
        if not rows and not self.quiet:
            self._header(op)
        seconds = t.median_s
        row = nccl_tests_format.result(
            op, t.nbytes, seconds, value["wrong"] if self.args.check else None, self.world
        )
        row["spread"], row["samples"], row["method"] = t.spread, len(t.samples_s), t.method
        rows.append(row)
        self.progress.step(f"{op} {timing.format_bytes(t.nbytes)}")
        if not self.quiet:
            say(nccl_tests_format.row_line(row))
            if len(rows) == len(self.sizes):
                for line in nccl_tests_format.trailer_lines(op, rows):
                    say(line)

    def _header(self, op: str) -> None:
        a = self.args
        step = (
            f"{a.stepbytes}(bytes)"
            if a.stepbytes
            else f"{a.stepfactor or DEFAULT_RANGE[self.backend][2]}(factor)"
        )
        note = (
            f"{self.backend}; time: median of {a.samples} samples of {a.iters} calls (nccl-tests: the mean "
            f"of one sample); the group torch calls fills its column, the other is N/A"
        )
        for line in nccl_tests_format.header_lines(
            op=op,
            world=self.world,
            min_bytes=self.sizes[0],
            max_bytes=self.sizes[-1],
            step=step,
            warmup=a.warmup,
            iters=a.iters,
            check=a.check,
            devices=self.devices,
            version=a.version,
            note=note,
        ):
            say(line)

    def all_rows(self) -> list[dict[str, Any]]:
        return [{"op": op, **row} for op, rows in self.rows.items() for row in rows]


def _spawned(
    args: argparse.Namespace, world: int, backend: str, printer: _NcclTestsPrinter
) -> None:
    distributed.launch(
        distributed.collective_sweep,
        world,
        backend=backend,
        timeout_s=args.timeout,
        kwargs=_sweep_kwargs(args, printer.sizes),
        on_report=lambda rank, value: printer(value),
    )


def _sweep_kwargs(args: argparse.Namespace, sizes: list[int]) -> dict[str, Any]:
    return dict(
        ops=args.ops, sizes=sizes, warmup=args.warmup, iters=args.iters, samples=args.samples
    )


def _torchrun(args: argparse.Namespace) -> _NcclTestsPrinter | None:
    """Join torchrun's group; rank 0 prints and returns its printer, the other ranks None."""
    for name, value in distributed.RANK_ENV.items():
        os.environ.setdefault(name, value)
    backend = args.backend or (
        "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    )
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    sizes = _chosen_sizes(args, backend, world)
    _check_collective_sizes(sizes, world)
    printer = _NcclTestsPrinter(args, world, backend, sizes)
    timeout = _dt.timedelta(seconds=args.timeout)
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("gloo", timeout=timeout)
    try:
        distributed.collective_sweep(rank, world, **_sweep_kwargs(args, sizes), emit=printer)
    finally:
        dist.destroy_process_group()
    return printer if rank == 0 else None


def _write_json(
    args: argparse.Namespace, printer: _NcclTestsPrinter, started: _dt.datetime
) -> dict[str, Any]:
    doc = nccl_tests_format.json_document(
        argv=sys.argv,
        world=printer.world,
        min_bytes=printer.sizes[0],
        max_bytes=printer.sizes[-1],
        factor=None if args.stepbytes else args.stepfactor or 4,
        step_bytes=args.stepbytes,
        warmup=args.warmup,
        iters=args.iters,
        check=args.check,
        devices=printer.devices,
        rows=printer.all_rows(),
        started=started,
    )
    if args.output_file:
        args.output_file.write_text(json.dumps(doc, indent=2, default=str))
    return doc


def cmd_collectives(args: argparse.Namespace) -> int:
    """``datamove collectives``: exit 1 when a row has wrong elements."""
    started = _dt.datetime.now()
    if args.sweep_ranks:
        return _cmd_rank_sweep(args)
    if _under_torchrun():
        printer = _torchrun(args)
        if printer is None:
            return 0  # not rank 0: rank 0 prints
    else:
        world = args.ngpus or distributed.default_world_size()
        backend = args.backend or distributed.choose_backend(world)
        if backend == "nccl":
            need_gpus(world, f" (nccl: one per rank, {world} ranks; pass --backend gloo or -g)")
        sizes = _chosen_sizes(args, backend, world)
        _check_collective_sizes(sizes, world)
        printer = _NcclTestsPrinter(args, world, backend, sizes)
        try:
            _spawned(args, world, backend, printer)
        finally:
            printer.progress.close()
    doc = _write_json(args, printer, started)
    if args.json:
        say(json.dumps(doc, indent=2, default=str))
    return 1 if nccl_tests_format.summary(printer.all_rows())[0] else 0


def rank_counts(gpus: int) -> list[int]:
    """N = 2, 4, 8, ... up to every GPU, and every GPU itself when it is not a power of two."""
    counts = [n for n in (2**k for k in range(1, 12)) if n <= gpus]
    return counts + [gpus] * (gpus >= 2 and gpus not in counts)


def _cmd_rank_sweep(args: argparse.Namespace) -> int:
    """busbw at the largest size against the number of ranks, one line per N as it is measured."""
    backend = args.backend or ("nccl" if torch.cuda.device_count() >= 2 else "gloo")
    top = torch.cuda.device_count() if backend == "nccl" else (args.ngpus or 4)
    if backend == "nccl":
        need_gpus(2, " (a sweep over ranks needs 2 GPUs; pass --backend gloo to sweep CPU ranks)")
    counts = rank_counts(top)
    size = (args.sizes or [args.maxbytes or DEFAULT_RANGE[backend][1]])[-1]
    say(
        f"# busbw (GB/s) at {timing.format_bytes(size)} against the number of ranks, {backend}; median of "
        f"{args.samples} samples of {args.iters} calls"
    )
    say(f"# {'N':>4}  " + "  ".join(f"{op:>14}" for op in args.ops))
    wrong = 0
    for n in counts:
        _check_collective_sizes([size - size % (4 * n)], n)
        got: dict[str, Any] = {}

        def keep(rank: int, value: dict[str, Any], got: dict[str, Any] = got) -> None:
            if "op" in value:
                got[value["op"]] = value

        distributed.launch(
            distributed.collective_sweep,
            n,
            backend=backend,
            timeout_s=args.timeout,
            kwargs=_sweep_kwargs(args, [size - size % (4 * n)]),
            on_report=keep,
        )
        wrong += sum(v["wrong"] for v in got.values())
        cells = [
            distributed.busbw_gbps(op, got[op]["timing"].nbytes, got[op]["timing"].median_s, n)
            for op in args.ops
        ]
        say(
            f"  {n:>4}  " + "  ".join(f"{c:14.4g}" for c in cells)
        )  # 4 digits: gloo on a CPU is slow
    return 1 if wrong else 0
