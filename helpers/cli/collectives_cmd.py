"""``datamove collectives``: ``distributed.collective_sweep`` in nccl-tests' flags and output, each
row as rank 0 has it, under torchrun or with ranks started here; ``--sweep-ranks``: busbw against N.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path
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
    """``--sizes``, else -b/-e/-f/-i over the backend's default range, rounded up to a multiple of
    4 x ranks as nccl-tests rounds its counts."""
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


def _settled_flags(args: argparse.Namespace, backend: str) -> None:
    """nccl-tests' checks of -G, -I and -K (src/common.cu), same warnings and fallbacks; -G
    refused under gloo, whose CPU ranks have no CUDA graph."""
    if args.cudagraph and backend != "nccl":
        raise UsageError(
            f"-G {args.cudagraph} replays the calls from a CUDA graph; the {backend} backend runs on "
            "the CPU and has none: pass -G 0 (or --backend nccl on GPUs)"
        )
    if args.per_iter_timing not in (0, 1):
        say("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.", sys.stderr)
        args.per_iter_timing = 0
    if args.per_iter_timing and args.cudagraph:
        say(
            "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling.",
            sys.stderr,
        )
        args.per_iter_timing = 0
    if args.per_iter_skip and not 0 <= args.per_iter_skip < args.iters:
        say(
            f"per-iteration skip (-K) must be between 0 and {args.iters - 1}. Disabling.",
            sys.stderr,
        )
        args.per_iter_skip = 0
    if args.per_iter_skip and not args.per_iter_timing:
        say("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.", sys.stderr)
        args.per_iter_skip = 0


def _reserve(path: Path) -> Path:
    """The first of ``path``, ``path.0``, ``path.1``... not there yet (as separate nccl-tests runs
    given one -J path write), created empty now."""
    for candidate in itertools.chain([path], (Path(f"{path}.{i}") for i in range(10_000))):
        try:
            with candidate.open("x"):
                return candidate
        except FileExistsError:
            continue
    raise UsageError(f"{path} and {path}.0 to .9999 exist: pass another -J path")


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` beside ``path`` first, then swap it in."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


class _NcclTestsPrinter:
    """Prints each op's block as a separate nccl-tests run would (header, rows as they arrive,
    trailer), keeps its JSON document (written to -J's path when the op is done), shows progress."""

    def __init__(self, args: argparse.Namespace, world: int, backend: str) -> None:
        _settled_flags(args, backend)
        self.sizes = _chosen_sizes(args, backend, world)
        _check_collective_sizes(self.sizes, world)
        self.args, self.world, self.backend = args, world, backend
        self.factor = None if args.stepbytes else args.stepfactor or DEFAULT_RANGE[backend][2]
        self.settings = dict(  # what the header and the JSON both state
            world=world,
            min_bytes=self.sizes[0],
            max_bytes=self.sizes[-1],
            warmup=args.warmup,
            iters=args.iters,
            check=args.check,
            graph=args.cudagraph,
            per_iter=bool(args.per_iter_timing),
            per_iter_skip=args.per_iter_skip,
        )
        self.devices: list[dict[str, Any]] = []
        self.rows: dict[str, list[dict[str, Any]]] = {op: [] for op in args.ops}
        self.docs: list[dict[str, Any]] = []
        self.json_path: Path | None = None
        self.started = _dt.datetime.now()
        self.progress = Progress("collectives", len(args.ops) * len(self.sizes))
        self.quiet = args.json

    def __call__(self, value: dict[str, Any]) -> None:
        if "devices" in value:
            self.devices = value["devices"]
            return
        op, size = value["op"], value["size"]
        rows = self.rows[op]
        if not rows:
            self._start(op)
        rows.append(self._row(op, size, value["groups"]))
        self.progress.step(f"{op} {timing.format_bytes(size)}")
        if not self.quiet:
            say(nccl_tests_format.row_line(rows[-1]))
        if len(rows) == len(self.sizes):
            self._finish(op, rows)

    def _row(self, op: str, size: int, groups: dict[str, Any]) -> dict[str, Any]:
        a = self.args
        measured = {k: g for k, g in groups.items() if "timing" in g}
        results: dict[str, dict[str, Any] | None] = {
            k: nccl_tests_format.group_result(
                op, size, g["timing"].median_s, g["wrong"] if a.check else None, self.world
            )
            for k, g in measured.items()
        }
        per_iter = {  # -I 1: nccl-tests' per-iteration report, for each group timed that way
            k: nccl_tests_format.per_iter_stats(g["per_iter_s"], a.per_iter_skip)
            for k, g in measured.items()
            if a.per_iter_timing and g["per_iter_s"]
        }
        row = nccl_tests_format.result(op, size, self.world, a.iters, results, per_iter)
        spreads = [g["timing"].spread for g in measured.values() if g["timing"].spread is not None]
        row["datamove"] = {
            "spread": max(spreads) if spreads else None,
            "samples": a.samples,
            "method": "; ".join(sorted({g["timing"].method for g in measured.values()})),
            "not_measured": {k: g["refused"] for k, g in groups.items() if "refused" in g},
        }
        return row

    def _start(self, op: str) -> None:
        a = self.args
        self.started = _dt.datetime.now()
        if a.output_file:
            self.json_path = _reserve(a.output_file)
            if not self.quiet:
                say(f"# Writing JSON output to {self.json_path}")
        if self.quiet:
            return
        graph = (
            f"a new CUDA graph of {a.iters} calls a sample, its first {a.cudagraph} launches timed, mean over ranks"
            if a.cudagraph
            else "launched"
        )
        note = (
            f"{self.backend}; time: median of {a.samples} samples of {a.iters} calls ({graph}; "
            f"nccl-tests: the mean of one sample); N/A where a group cannot be timed here"
        )
        for line in nccl_tests_format.header_lines(
            op=op,
            step=f"{a.stepbytes}(bytes)" if a.stepbytes else f"{self.factor}(factor)",
            devices=self.devices,
            version=a.version,
            note=note,
            clock="CUDA event" if self.backend == "nccl" else "host clock",
            **self.settings,
        ):
            say(line)

    def _finish(self, op: str, rows: list[dict[str, Any]]) -> None:
        if not self.quiet:
            for line in nccl_tests_format.trailer_lines(op, rows):
                say(line)
        doc = nccl_tests_format.json_document(
            argv=sys.argv,
            factor=self.factor,
            step_bytes=self.args.stepbytes,
            devices=self.devices,
            rows=rows,
            started=self.started,
            **self.settings,
        )
        self.docs.append(doc)
        if self.json_path is not None:
            _write_atomically(self.json_path, json.dumps(doc, indent=2))

    def all_rows(self) -> list[dict[str, Any]]:
        return [row for rows in self.rows.values() for row in rows]


def _sweep_kwargs(args: argparse.Namespace, sizes: list[int]) -> dict[str, Any]:
    return dict(
        ops=args.ops,
        sizes=sizes,
        warmup=args.warmup,
        iters=args.iters,
        samples=args.samples,
        graph_launches=args.cudagraph,
        per_iter=bool(args.per_iter_timing),
    )


def _torchrun(args: argparse.Namespace) -> _NcclTestsPrinter | None:
    """Join torchrun's group; rank 0 prints and returns its printer, the other ranks None."""
    for name, value in distributed.RANK_ENV.items():
        os.environ.setdefault(name, value)
    backend = args.backend or (
        "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    )
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    printer = _NcclTestsPrinter(args, world, backend)
    timeout = _dt.timedelta(seconds=args.timeout)
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("gloo", timeout=timeout)
    try:
        kwargs = _sweep_kwargs(args, printer.sizes)
        distributed.collective_sweep(rank, world, **kwargs, emit=printer)
    finally:
        dist.destroy_process_group()
    return printer if rank == 0 else None


def cmd_collectives(args: argparse.Namespace) -> int:
    """``datamove collectives``: exit 1 when a row has wrong elements."""
    if args.sweep_ranks:
        return _cmd_rank_sweep(args)
    if all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):  # torchrun's
        printer = _torchrun(args)
        if printer is None:
            return 0  # not rank 0: rank 0 prints
    else:
        world = args.ngpus or distributed.default_world_size()
        backend = args.backend or distributed.choose_backend(world)
        if backend == "nccl":
            need_gpus(world, f" (nccl: one per rank, {world} ranks; pass --backend gloo or -g)")
        printer = _NcclTestsPrinter(args, world, backend)
        try:
            distributed.launch(
                distributed.collective_sweep,
                world,
                backend=backend,
                timeout_s=args.timeout,
                kwargs=_sweep_kwargs(args, printer.sizes),
                on_report=lambda rank, value: printer(value),
            )
        finally:
            printer.progress.close()
    if args.json:  # one op: its document; several: a list of them, one per op
        docs = printer.docs
        say(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
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
            if "op" in value:  # the group notebook 06 times
                got[value["op"]] = value["groups"][distributed.NOTEBOOK_PLACEMENT[value["op"]]]

        distributed.launch(
            distributed.collective_sweep,
            n,
            backend=backend,
            timeout_s=args.timeout,
            kwargs={**_sweep_kwargs(args, [size - size % (4 * n)]), "per_iter": False},
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
