"""``datamove``: the course's measurements as a command line, on the helpers' own code paths.

| subcommand | what it does |
| --- | --- |
| ``doctor`` | preflight of a machine: each check pass / warn / fail, with the fix |
| ``h2d``, ``d2h`` | host <-> GPU copy bandwidth by size, as notebook 01 times it, beside the PCIe link's raw rate |
| ``p2p`` | the peer matrix: one-way and both-ways GB/s, and latency, as notebook 05 times them |
| ``collectives`` | nccl-tests' columns for the collectives of ``distributed.collective_timings`` (torchrun or spawned ranks) |
| ``record`` | the GPU run of ``tools/gpu_run.py``: GPU tests, every notebook live, results/<machine>/, validated |
| ``check`` | the headline figures measured again against this machine's rows in results/index.jsonl |

This module measures nothing itself: ``h2d``, ``d2h`` and ``p2p`` call the notebooks' own
experiments, which their ``#@save`` cells put into ``helpers.experiments`` (written once, in the
notebook); collectives are ``helpers.distributed``'s. It imports the helpers; no helper imports it.

Used by the command line (datamove).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from . import config, distributed, experiments, hardware, records, timing

MiB, GiB = 2**20, 2**30
ROOT = Path(__file__).resolve().parent.parent  # the clone: notebooks/, tools/, results/

# ---------------------------------------------------------------- arguments

_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE = re.compile(r"(\d+)\s*([kmgt]i?b|b)?", re.IGNORECASE)
SIZE_HELP = "bytes (4096) or with a unit (4KiB, 64MiB, 1GiB; 1GB = 10^9)"


class UsageError(Exception):
    """A request this machine or these arguments cannot serve: one line, exit status 2.

    Used by the command line (datamove).
    """


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (no usage block) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_size(text: str) -> int:
    """``"4096"``, ``"4KiB"``, ``"64MiB"``, ``"1GiB"``, ``"1GB"`` -> bytes (KiB = 1024, KB = 1000).

    Used by the command line (datamove).
    """
    match = _SIZE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a size: pass {SIZE_HELP}")
    nbytes = int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if nbytes <= 0:
        raise ValueError(f"{text!r} is not a positive size: pass {SIZE_HELP}")
    return nbytes


def parse_sizes(text: str) -> list[int]:
    """Sizes in bytes from ``"4KiB:1GiB"`` (x4 steps, as notebook 01 sweeps), ``"4KiB:1GiB:2"``
    (x2 steps) or a list ``"4KiB,64MiB"``.

    Used by the command line (datamove).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text!r} is not a list of sizes: pass e.g. 4KiB:1GiB or 4KiB,64MiB")
    if ":" not in text:
        return [parse_size(part) for part in text.split(",")]
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(f"{text!r}: a range is SMALLEST:LARGEST or SMALLEST:LARGEST:FACTOR, e.g. 4KiB:1GiB")
    smallest, largest = parse_size(parts[0]), parse_size(parts[1])
    if largest < smallest:
        raise ValueError(f"{text!r}: the largest size comes second, e.g. 4KiB:1GiB")
    factor = parts[2].strip() if len(parts) == 3 else "4"
    if not factor.isdigit() or int(factor) < 2:
        raise ValueError(f"{text!r}: the step factor is a whole number >= 2, e.g. 4KiB:1GiB:2")
    return timing.sizes_pow2(smallest, largest, int(factor))


def parse_tolerance(text: str) -> float:
    """``"5%"`` or ``"0.05"`` -> 0.05: how far below its baseline a figure may fall.

    Used by the command line (datamove).
    """
    text = text.strip() if isinstance(text, str) else ""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise ValueError(f"{text!r} is not a tolerance: pass a percentage below 100, e.g. 5% (or 0.05)")
    return value


def parse_ops(text: str) -> list[str]:
    """``"all_reduce,all_gather"`` or ``"all"`` -> a list of names from ``distributed.COLLECTIVE_OPS``.

    Used by the command line (datamove).
    """
    if text.strip() == "all":
        return list(distributed.COLLECTIVE_OPS)
    ops = [op.strip() for op in text.split(",") if op.strip()]
    unknown = [op for op in ops if op not in distributed.COLLECTIVE_OPS]
    if unknown or not ops:
        raise ValueError(f"unknown collective {', '.join(unknown) or repr(text)}: pass 'all' or names from "
                         f"{','.join(distributed.COLLECTIVE_OPS)}")
    return ops


def _whole(least: int) -> Callable[[str], int]:
    """A parser of whole numbers >= ``least`` (ranks, calls, samples) with a ValueError that says so."""
    def parse_whole(text: str) -> int:
        if not text.strip().isdigit() or int(text) < least:
            raise ValueError(f"{text!r} is not a whole number >= {least}")
        return int(text)
    return parse_whole


def _argtype(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` for argparse: its ValueError becomes argparse's one-line error."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert


def _need_gpus(n: int, why: str = "") -> None:
    have = hardware.gpu_count()
    if have < n:
        raise UsageError(f"needs {n} CUDA GPU(s){why}, this machine has {have}; run it on a GPU machine "
                         f"(the notebooks replay recordings elsewhere)")


# ---------------------------------------------------------------- output

def _progress(items: Sequence[Any], what: str) -> Iterable[Any]:
    """``items`` with a tqdm progress bar on stderr where tqdm is installed and stderr is a terminal."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=what, unit="size", file=sys.stderr, leave=False, disable=None)


def _table(rows: list[dict[str, Any]], columns: dict[str, str]) -> str:
    """Rows as an aligned text table; ``columns`` maps a row key to its heading."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"
        return "-" if value is None else str(value)
    cells = [[cell(row.get(key)) for key in columns] for row in rows]
    widths = [max([len(head)] + [len(r[i]) for r in cells]) for i, head in enumerate(columns.values())]
    lines = ["  ".join(h.rjust(w) for h, w in zip(columns.values(), widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def _emit(args: argparse.Namespace, payload: dict[str, Any], columns: dict[str, str], text: str) -> None:
    """Print the payload as JSON (``--json``), its rows as CSV (``--csv``) or ``text`` for people."""
    if getattr(args, "json", False):
        print(json.dumps(payload, indent=2, allow_nan=True))
    elif getattr(args, "csv", False):
        writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(payload["rows"])
    else:
        print(text)


def _machine_facts() -> dict[str, Any]:
    """Where a figure was measured, for the JSON header: machine, GPU, driver, versions, date."""
    info = hardware.describe()
    gpus = info.get("gpus") or []
    return {"machine": info["machine"], "gpu": gpus[0]["name"] if gpus else None, "driver": info.get("driver"),
            "torch": info.get("torch"), "cuda": info.get("cuda"), "nccl": info.get("nccl"),
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}


# ---------------------------------------------------------------- h2d / d2h: notebook 01's timed_copy

# Notebook 01's full-size params: samples below and from 64 MiB.
REPEATS_SMALL, REPEATS_LARGE, LARGE_BYTES = 10, 5, 64 * MiB


def _host_copy(direction: str, pinned: bool, n: int) -> timing.Timing:
    """One size of notebook 01's copy_bandwidth: its own ``timed_copy`` (a #@save cell), with the
    notebook's samples for that size; the copy's contents are checked there."""
    return experiments.timed_copy(n, direction, pinned, REPEATS_SMALL if n < LARGE_BYTES else REPEATS_LARGE)


def _check_copy_sizes(sizes: list[int]) -> None:
    bad = [n for n in sizes if n % 4]
    if bad:
        raise UsageError(f"copy sizes are whole 4-byte words (the copied data is int32); {bad[0]} bytes is not: "
                         f"pass e.g. {bad[0] - bad[0] % 4 or 4}")


def _link_of_gpu0() -> dict[str, Any]:
    """GPU 0's PCIe link at most and its raw one-way rate, as notebook 01 reads it."""
    info = hardware.describe()
    gpu0 = (info.get("gpus") or [{}])[0]
    gen, width = gpu0.get("pcie_gen_max"), gpu0.get("pcie_width_max")
    return {"gen": gen, "width": width, "theoretical_gbps": hardware.pcie_theoretical_gbps(gen, width),
            "memory_ceiling_gbps": hardware.ceiling_gbps(info)}


def _copy_row(t: timing.Timing, link_gbps: float | None) -> dict[str, Any]:
    slow, fast = t.gbps_range
    return {"size": t.nbytes, "size_text": timing.format_bytes(t.nbytes or 0), "gbps": t.gbps,
            "gbps_slowest": slow, "gbps_fastest": fast, "spread": t.spread, "time_us": t.median_us,
            "link_share": t.gbps / link_gbps if link_gbps else None, "samples": len(t.samples_s),
            "calls_per_sample": t.calls_per_sample, "method": t.method}


COPY_COLUMNS = {"size_text": "size", "gbps": "GB/s", "gbps_slowest": "slowest", "gbps_fastest": "fastest",
                "spread": "IQR/median", "time_us": "us/copy", "link_share": "of link", "calls_per_sample": "calls",
                "method": "clock"}


def _cmd_copy(args: argparse.Namespace) -> int:
    _need_gpus(1)
    _check_copy_sizes(args.sizes)
    link = _link_of_gpu0()
    rows = [_copy_row(_host_copy(args.command, args.pinned, n), link["theoretical_gbps"])
            for n in _progress(args.sizes, args.command)]
    memory = "pinned" if args.pinned else "pageable"
    payload = {"command": args.command, "memory": memory, **_machine_facts(), "link": link, "rows": rows}
    raw = link["theoretical_gbps"]
    where = (f"PCIe gen {link['gen']} x{link['width']}: raw {raw:.1f} GB/s per direction "
             f"(copies reach about 80-90% of it)" if raw else "PCIe link not reported by nvidia-smi")
    text = (f"{args.command.upper()} from {memory} memory on {payload['gpu']}; decimal GB/s, median of the "
            f"samples (slowest-fastest); {where}\n" + _table(rows, COPY_COLUMNS))
    _emit(args, payload, COPY_COLUMNS, text)
    return 0


# ---------------------------------------------------------------- p2p: notebook 05's peer copies

# Notebook 05's full-size params: samples for the bandwidth matrices; latency size, samples and calls.
P2P_REPEATS, LATENCY_BYTES, LATENCY_REPEATS, LATENCY_CALLS = 7, 4, 10, 50


def _peer_matrices(size: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Notebook 05's three peer-copy experiments, run at one size for every pair of GPUs here:
    one way ({"i->j": [Timing]}), both ways ({"i<->j": [Timing]}) and latency ({"i->j": [Timing]})."""
    print(f"datamove p2p: one way, both ways and latency, {timing.format_bytes(size)}, every pair of GPUs",
          file=sys.stderr, flush=True)
    one_way = experiments.peer_copy_bandwidth(sizes=[size], repeats=P2P_REPEATS)
    both = experiments.peer_copy_both_ways(sizes=[size], repeats=P2P_REPEATS)
    latency = experiments.peer_copy_latency(sizes=[LATENCY_BYTES], repeats=LATENCY_REPEATS, calls=LATENCY_CALLS)
    return one_way, both, latency


def _matrix_text(title: str, matrix: list[list[float | None]], unit: str) -> str:
    n = len(matrix)
    lines = [f"{title} ({unit}; row: from, column: to)", "        " + "".join(f"{f'cuda:{j}':>10}" for j in range(n))]
    for i, row in enumerate(matrix):
        lines.append(f"  cuda:{i}" + "".join(f"{'-' if v is None else f'{v:.1f}':>10}" for v in row))
    return "\n".join(lines)


def _cmd_p2p(args: argparse.Namespace) -> int:
    _need_gpus(2)
    n, size = hardware.gpu_count(), args.size
    one_way, both, latency = _peer_matrices(size)
    uni = [[one_way[f"{i}->{j}"][0].gbps if i != j else None for j in range(n)] for i in range(n)]
    bidi = [[both[f"{min(i, j)}<->{max(i, j)}"][0].gbps if i != j else None for j in range(n)] for i in range(n)]
    lat = [[latency[f"{i}->{j}"][0].median_us for j in range(n)] for i in range(n)]
    peer = hardware.peer_access()
    rows = [{"src": i, "dst": j, "peer_access": peer[i][j], "unidirectional_gbps": uni[i][j],
             "bidirectional_gbps": bidi[i][j], "latency_us": lat[i][j]} for i in range(n) for j in range(n)]
    payload = {"command": "p2p", **_machine_facts(), "size": size, "latency_bytes": LATENCY_BYTES,
               "unidirectional_gbps": uni, "bidirectional_gbps": bidi, "latency_us": lat, "rows": rows}
    text = "\n\n".join([
        _matrix_text(f"one direction, {timing.format_bytes(size)}", uni, "decimal GB/s"),
        _matrix_text(f"both directions at once, {timing.format_bytes(size)} each way", bidi, "decimal GB/s, total"),
        _matrix_text(f"latency of a {LATENCY_BYTES} B copy", lat, "us per copy")])
    columns = {"src": "src", "dst": "dst", "peer_access": "peer", "unidirectional_gbps": "uni GB/s",
               "bidirectional_gbps": "bidi GB/s", "latency_us": "latency us"}
    _emit(args, payload, columns, text)
    return 0


# ---------------------------------------------------------------- collectives: nccl-tests' columns

# Notebook 06's full-size params: warm-up calls, calls per sample, samples.
COLLECTIVE_WARMUP, COLLECTIVE_ITERS, COLLECTIVE_SAMPLES = 5, 20, 5
_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}
_ROOT = {"broadcast": 0, "reduce": 0}
NCCL_COLUMNS = {"size": "size(B)", "count": "count(elements)", "type": "type", "redop": "redop", "root": "root",
                "time_us": "time(us)", "algbw_gbps": "algbw(GB/s)", "busbw_gbps": "busbw(GB/s)", "wrong": "#wrong"}


def _under_torchrun() -> bool:
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))


def _collective_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return dict(ops=args.ops, sizes=args.sizes, warmup=args.warmup, iters=args.iters, samples=args.samples)


def _check_collective_sizes(sizes: list[int], world_size: int) -> None:
    step = 4 * world_size
    bad = [n for n in sizes if n % step]
    if bad:
        raise UsageError(f"{bad[0]} bytes is not a multiple of 4 x {world_size} ranks = {step} bytes (float32 "
                         f"elements split into equal parts); pass e.g. {max(step, bad[0] - bad[0] % step)}")


def _spawned_collectives(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[int]], int, str]:
    """Start the ranks here with ``distributed.launch``; rank 0's timings and #wrong summed over ranks."""
    world = args.nproc or distributed.default_world_size()
    backend = args.backend or distributed.choose_backend(world)
    if backend == "nccl":
        _need_gpus(world, f" (nccl: one per rank, {world} ranks; pass --backend gloo or --nproc)")
    _check_collective_sizes(args.sizes, world)
    per_rank = distributed.launch(distributed.collective_timings, world, backend=backend, timeout_s=args.timeout,
                                  kwargs=_collective_kwargs(args))
    wrong = {op: [sum(r["wrong"][op][k] for r in per_rank) for k in range(len(args.sizes))] for op in args.ops}
    return per_rank[0]["timings"], wrong, world, backend


def _torchrun_collectives(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[int]], int, str] | None:
    """Join torchrun's group from the environment; rank 0 gets the timings and #wrong summed over
    ranks, the other ranks None."""
    for name, value in distributed.RANK_ENV.items():
        os.environ.setdefault(name, value)
    backend = args.backend or ("nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo")
    world = int(os.environ["WORLD_SIZE"])
    _check_collective_sizes(args.sizes, world)
    timeout = _dt.timedelta(seconds=args.timeout)
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("gloo", timeout=timeout)
    try:
        rank = dist.get_rank()
        result = distributed.collective_timings(rank, world, **_collective_kwargs(args))
        everyone: list[Any] = [None] * world
        dist.all_gather_object(everyone, result["wrong"])
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    wrong = {op: [sum(w[op][k] for w in everyone) for k in range(len(args.sizes))] for op in args.ops}
    return result["timings"], wrong, world, backend


def _collective_rows(timings: dict[str, list[timing.Timing]], wrong: dict[str, list[int]],
                     world: int) -> list[dict[str, Any]]:
    """nccl-tests' columns, one row per op and size; time is the median per call."""
    rows = []
    for op, per_size in timings.items():
        for t, bad in zip(per_size, wrong[op], strict=True):
            rows.append({"op": op, "size": t.nbytes, "count": (t.nbytes or 0) // 4, "type": "float",
                         "redop": _REDOP.get(op, "none"), "root": _ROOT.get(op, -1), "time_us": t.median_us,
                         "algbw_gbps": distributed.algbw_gbps(t.nbytes, t.median_s),
                         "busbw_gbps": distributed.busbw_gbps(op, t.nbytes, t.median_s, world),
                         "wrong": bad, "spread": t.spread, "samples": len(t.samples_s), "method": t.method})
    return rows


def _cmd_collectives(args: argparse.Namespace) -> int:
    got = _torchrun_collectives(args) if _under_torchrun() else _spawned_collectives(args)
    if got is None:
        return 0  # not rank 0: rank 0 prints
    timings, wrong, world, backend = got
    rows = _collective_rows(timings, wrong, world)
    payload = {"command": "collectives", **_machine_facts(), "backend": backend, "world_size": world,
               "warmup": args.warmup, "iters": args.iters, "samples": args.samples, "rows": rows}
    blocks = [f"# {world} ranks, {backend}; time: median of {args.samples} samples of {args.iters} calls after "
              f"{args.warmup} warm-up calls; algbw and busbw in decimal GB/s (busbw: nccl-tests' factors)"]
    for op in timings:
        blocks.append(f"# {op}\n" + _table([r for r in rows if r["op"] == op], NCCL_COLUMNS))
    _emit(args, payload, {"op": "op", **NCCL_COLUMNS}, "\n".join(blocks))
    return 1 if any(r["wrong"] for r in rows) else 0


# ---------------------------------------------------------------- doctor

PASS, WARN, FAIL = "pass", "warn", "FAIL"
DISK_WARN_BYTES, DISK_FAIL_BYTES = 5 * GiB, 1 * GiB  # traces of a full run take a few hundred MB
MEMLOCK_WARN_BYTES = 1 * GiB
BUSY_PERCENT = 10


@dataclass
class Check:
    """One line of ``datamove doctor``: what was checked, pass / warn / FAIL, what was seen, the fix.

    Used by the command line (datamove).
    """

    name: str
    status: str
    seen: str
    fix: str = ""


def _tiny_all_reduce(rank: int, world_size: int) -> float:
    """A rank of doctor's NCCL check: all_reduce of rank + 1; every rank should end with n(n+1)/2."""
    tensor = torch.full((1024,), rank + 1.0, device=distributed.rank_device())
    dist.all_reduce(tensor)
    distributed.synchronize()
    return float(tensor[0])


def _nccl_fact(gpus: int, timeout_s: float) -> dict[str, Any]:
    """Run the tiny all_reduce on every GPU with a deadline; ok and what was seen."""
    try:
        got = distributed.launch(_tiny_all_reduce, gpus, backend="nccl", timeout_s=timeout_s,
                                 startup_timeout_s=max(60.0, timeout_s))
    except Exception as err:  # noqa: BLE001 - the doctor reports any failure as a FAIL line
        return {"ok": False, "seen": str(err).splitlines()[0][:200]}
    expected = gpus * (gpus + 1) / 2
    return {"ok": all(v == expected for v in got), "seen": f"{gpus} ranks returned {got} (expected {expected:g})"}


def _links_under_load() -> list[dict[str, Any]]:
    """The PCIe links read while every GPU runs a spin kernel (idle GPUs lower the generation)."""
    for i in range(hardware.gpu_count()):
        with torch.cuda.device(i):
            timing.hold_stream(300_000)
    links = hardware.pcie_links()
    timing.synchronize_all()
    return links


def _doctor_facts(nccl_timeout_s: float | None) -> dict[str, Any]:
    """What the doctor's checks read, gathered from the helpers (the checks themselves are pure)."""
    activity = hardware.gpu_activity()  # before this process puts a context on any GPU
    gpus = hardware.gpu_count()
    links = _links_under_load() if gpus else hardware.pcie_links()
    numa = {link["index"]: hardware.gpu_numa_node(link["bus_id"]) for link in links if link.get("bus_id")}
    traces = config.traces_dir()
    machine = hardware.machine_name(hardware.describe()) if gpus else "cpu-only"
    can_nccl = gpus >= 1 and dist.is_nccl_available() and nccl_timeout_s is not None
    return {
        "gpus": gpus, "driver": hardware.driver_present(), "torch": torch.__version__,
        "torch_cuda": torch.version.cuda, "driver_cuda": hardware.driver_cuda_version(),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "links": links, "numa": numa,
        "numa_cpus": {node: sorted(hardware.numa_node_cpus(node)) for node in set(numa.values()) if node is not None},
        "affinity": sorted(hardware.cpu_affinity()), "activity": activity, "pid": os.getpid(),
        "memlock": hardware.pinned_memory_limit_bytes(), "peer": hardware.peer_access(),
        "nccl": _nccl_fact(gpus, nccl_timeout_s) if can_nccl else None,
        "traces": str(traces), "free_disk": hardware.free_disk_bytes(traces),
        "machine": machine, "recorded": records.recorded_machine_names(),
    }


def _check_gpus(f: dict[str, Any]) -> list[Check]:
    if f["gpus"]:
        return [Check("GPUs visible", PASS, f"{f['gpus']} CUDA GPU(s) visible to torch {f['torch']}")]
    if f["driver"]:
        return [Check("GPUs visible", FAIL, f"an NVIDIA driver answers but torch {f['torch']} sees no GPU "
                      f"(CUDA_VISIBLE_DEVICES={f['visible_devices']!r})",
                      "install PyPI's CUDA build of torch (make setup here), and check CUDA_VISIBLE_DEVICES")]
    return [Check("GPUs visible", WARN, "no NVIDIA driver and no CUDA GPU: this machine replays the recordings",
                  "run the GPU checks on a GPU machine; the notebooks run here in replay")]


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or "")[:2])


def _check_driver(f: dict[str, Any]) -> list[Check]:
    if not f["driver"]:
        return [Check("driver vs torch's CUDA", WARN, f"no driver; torch built for CUDA {f['torch_cuda'] or '-'}")]
    if not f["torch_cuda"]:
        return [Check("driver vs torch's CUDA", FAIL, f"torch {f['torch']} is a CPU build",
                      "install PyPI's CUDA build: pip install 'torch>=2.11,<2.15' (make setup does)")]
    if f["driver_cuda"] and _version(f["driver_cuda"]) < _version(f["torch_cuda"]):
        return [Check("driver vs torch's CUDA", FAIL, f"driver supports CUDA {f['driver_cuda']}, torch needs "
                      f"{f['torch_cuda']}", f"update the driver, or install a torch built for CUDA <= {f['driver_cuda']}")]
    return [Check("driver vs torch's CUDA", PASS, f"driver supports CUDA {f['driver_cuda'] or '?'}, "
                  f"torch built for {f['torch_cuda']}")]


def _check_links(f: dict[str, Any]) -> list[Check]:
    checks = []
    for link in f["links"]:
        name, now = f"GPU {link['index']} PCIe link", (link["gen_current"], link["width_current"])
        seen = f"gen {now[0]} x{now[1]} now, gen {link['gen_max']} x{link['width_max']} at most (read under load)"
        if None in (*now, link["gen_max"], link["width_max"]):
            checks.append(Check(name, WARN, "not reported by the driver", "read it with nvidia-smi -q -d PCI"))
        elif now[1] < link["width_max"]:
            checks.append(Check(name, FAIL, seen, "a degraded width: reseat the card or move it to a full-width "
                                "slot; check the riser and BIOS lane settings"))
        elif now[0] < link["gen_max"]:
            checks.append(Check(name, WARN, seen, "below its generation under load: check the BIOS PCIe speed "
                                "setting and the slot; idle power saving can also show this"))
        else:
            checks.append(Check(name, PASS, seen))
    return checks


def _check_numa(f: dict[str, Any]) -> list[Check]:
    checks, mine = [], set(f["affinity"])
    for index, node in sorted(f["numa"].items()):
        cpus = set(f["numa_cpus"].get(node, []))
        name = f"GPU {index} NUMA node"
        if node is None or not cpus:
            checks.append(Check(name, PASS, "one NUMA node (or not reported): nothing to match"))
        elif mine & cpus:
            checks.append(Check(name, PASS, f"node {node}; this process may run on {len(mine & cpus)} of its CPUs"))
        else:
            checks.append(Check(name, WARN, f"node {node}, but this process runs only on other nodes' CPUs",
                                f"numactl --cpunodebind={node} --membind={node} <command> (pinned buffers near the GPU)"))
    return checks


def _check_activity(f: dict[str, Any]) -> list[Check]:
    checks = []
    for gpu in f["activity"]:
        others = [pid for pid in gpu["pids"] if pid != f["pid"]]
        busy = (gpu["utilization_pct"] or 0) > BUSY_PERCENT
        seen = f"{gpu['utilization_pct']}% busy, other processes: {others or 'none'}"
        fix = "wait for them, or choose an idle GPU with CUDA_VISIBLE_DEVICES: shared GPUs give wrong timings"
        checks.append(Check(f"GPU {gpu['index']} other work", WARN if others or busy else PASS, seen,
                            fix if others or busy else ""))
    return checks


def _check_memlock(f: dict[str, Any]) -> list[Check]:
    limit = f["memlock"]
    if limit is None:
        return [Check("pinned-memory limit (ulimit -l)", PASS, "unlimited")]
    status = PASS if limit >= MEMLOCK_WARN_BYTES else WARN
    return [Check("pinned-memory limit (ulimit -l)", status, timing.format_bytes(limit) if limit else "0 B",
                  "" if status == PASS else "raise it: ulimit -l unlimited (limits.conf memlock; docker "
                  "--ulimit memlock=-1); registering host memory needs it")]


def _check_peers(f: dict[str, Any]) -> list[Check]:
    peer, n = f["peer"], len(f["peer"])
    if n < 2:
        return [Check("peer access", WARN, f"{n} GPU(s): no pair to check")]
    missing = [f"{i}->{j}" for i in range(n) for j in range(n) if i != j and not peer[i][j]]
    if missing:
        return [Check("peer access", WARN, f"no direct access for {', '.join(missing)}",
                      "those copies go through host memory: check nvidia-smi topo -m and IOMMU/ACS settings")]
    return [Check("peer access", PASS, f"every pair of the {n} GPUs")]


def _check_nccl(f: dict[str, Any]) -> list[Check]:
    if f["nccl"] is None:
        return [Check("NCCL all_reduce", WARN, "not run: needs a GPU and a torch build with NCCL")]
    if f["nccl"]["ok"]:
        return [Check("NCCL all_reduce", PASS, f["nccl"]["seen"])]
    return [Check("NCCL all_reduce", FAIL, f["nccl"]["seen"],
                  "rerun with NCCL_DEBUG=INFO; keep NCCL_NVLS_ENABLE=0; try NCCL_P2P_DISABLE=1 to isolate the link")]


def _check_disk(f: dict[str, Any]) -> list[Check]:
    free = f["free_disk"]
    status = PASS if free >= DISK_WARN_BYTES else WARN if free >= DISK_FAIL_BYTES else FAIL
    return [Check("free disk for traces", status, f"{timing.format_bytes(free)} free at {f['traces']}",
                  "" if status == PASS else "free some space, or set COURSE_TRACES_DIR to a roomier folder")]


def _check_recordings(f: dict[str, Any]) -> list[Check]:
    if f["machine"] in f["recorded"]:
        return [Check("recordings for this machine", PASS, f"results/{f['machine']}/ exists")]
    fix = ("datamove record, then a pull request with results/<machine>/ (README: Add your machine)"
           if f["gpus"] else "nothing to do: notebooks replay " + ", ".join(f["recorded"]))
    return [Check("recordings for this machine", WARN, f"none for {f['machine']}", fix)]


DOCTOR_CHECKS = (_check_gpus, _check_driver, _check_links, _check_numa, _check_activity, _check_memlock,
                 _check_peers, _check_nccl, _check_disk, _check_recordings)


def _cmd_doctor(args: argparse.Namespace) -> int:
    facts = _doctor_facts(None if args.skip_nccl else args.timeout)
    checks = [check for rule in DOCTOR_CHECKS for check in rule(facts)]
    rows = [asdict(c) for c in checks]
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    payload = {"command": "doctor", "machine": facts["machine"], "counts": counts, "rows": rows, "facts": facts}
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(_doctor_text(rows) + f"\n{counts[PASS]} pass, {counts[WARN]} warn, {counts[FAIL]} FAIL on "
              f"{facts['machine']}")
    return 1 if counts[FAIL] else 0


def _doctor_text(rows: list[dict[str, Any]]) -> str:
    """Status, check and what was seen on one line; the fix indented below it."""
    width = max(len(r["name"]) for r in rows)
    lines = []
    for r in rows:
        lines.append(f"{r['status']:>4}  {r['name']:<{width}}  {r['seen']}")
        if r["fix"]:
            lines.append(f"{'':>4}  {'':<{width}}  fix: {r['fix']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- record: tools/gpu_run.py

def _gpu_run_command(out: Path, quick: bool, skip_tests: bool, notebooks: list[Path]) -> list[str]:
    flags = ["--quick"] * quick + ["--skip-tests"] * skip_tests
    return [sys.executable, str(ROOT / "tools" / "gpu_run.py"), "--out", str(out), *flags, *map(str, notebooks)]


def _install_commands() -> list[list[str]]:
    """PyPI's CUDA build of torch (its default on Linux) and the course with its test and CLI extras."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    return [[*pip, "torch>=2.11,<2.15"], [*pip, "-e", f"{ROOT}[dev,cli]"]]


def _recorded_machine(out: Path) -> str | None:
    """The machine named by the archive tools/gpu_run.py wrote into ``out``."""
    archives = sorted(out.glob("gpu-results-*.tar.gz"), key=lambda p: p.stat().st_mtime)
    return archives[-1].name.removeprefix("gpu-results-").removesuffix(".tar.gz") if archives else None


def _record_problems(machine: str, notebooks: list[Path]) -> list[str]:
    """The recordings checks on what was written: validation, then staleness of this machine's."""
    problems = records.validate_machine_folder(config.results_dir() / machine, machine)
    problems += [p.text for p in records.check_recordings(notebooks) if p.machine == machine]
    return problems


def _cmd_record(args: argparse.Namespace) -> int:
    if not (ROOT / "tools" / "gpu_run.py").exists():
        raise UsageError(f"datamove record runs from a clone of the course (no tools/gpu_run.py under {ROOT}); "
                         f"git clone it and pip install -e '.[dev,cli]' there")
    if not hardware.driver_present():
        raise UsageError("datamove record needs a GPU machine: no NVIDIA driver answers here")
    if args.install:
        for cmd in _install_commands():
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    out = args.out.resolve()
    env = {**os.environ, **distributed.RANK_ENV, "PYTHONUNBUFFERED": "1"}
    code = subprocess.run(_gpu_run_command(out, args.quick, args.skip_tests, notebooks), cwd=ROOT, env=env,
                          check=False).returncode
    machine = _recorded_machine(out)
    if machine is None:
        print(f"datamove record: tools/gpu_run.py wrote no archive into {out} (exit {code})", file=sys.stderr)
        return 1
    problems = _record_problems(machine, notebooks)
    print("\n".join([f"recordings checks on results/{machine}/: " + ("sound" if not problems else
                     f"{len(problems)} problem(s)")] + [f"  - {p}" for p in problems]))
    print(f"archive: {out}/gpu-results-{machine}.tar.gz; next: make index, then a pull request with "
          f"results/{machine}/ and results/index.jsonl (README: Add your machine)")
    return 1 if code or problems else 0


# ---------------------------------------------------------------- check: the headline figures

@dataclass(frozen=True)
class Headline:
    """A figure ``datamove check`` measures again: where its baseline sits in results/index.jsonl.

    Used by the command line (datamove).
    """

    key: str
    notebook: str
    experiment: str
    prefix: str  # "field=start": the index row's field (name or label) starts with it
    nbytes: int | None  # the size compared; None: the largest recorded
    gpus: int


HEADLINES = (
    Headline("H2D pinned", "01_pinned_memory", "copy_bandwidth", "label=H2D pinned", 256 * MiB, 1),
    Headline("D2H pinned", "01_pinned_memory", "copy_bandwidth", "label=D2H pinned", 256 * MiB, 1),
    Headline("P2P cuda:0 -> cuda:1", "05_device_to_device", "peer_copy_bandwidth", "name=['0->1']", 256 * MiB, 2),
    Headline("all_reduce busbw", "06_nccl_point_to_point_and_collectives", "bandwidth", "label=all_reduce ", None, 2),
)


def _matches(row: dict[str, Any], headline: Headline, machine: str) -> bool:
    field, _, start = headline.prefix.partition("=")
    return (row["machine"] == machine and row["notebook"] == headline.notebook
            and row["experiment"] == headline.experiment and row.get("unit") == "GB/s"
            and str(row.get(field, "")).startswith(start)
            and (headline.nbytes is None or row.get("bytes") == headline.nbytes))


def _ranks_of(row: dict[str, Any]) -> int:
    """How many ranks timed a collective's index row, read from its recording: notebook 06 keeps
    ``world_size`` per entry of its sweep (``['sweep'][k]...``), or once for the whole run."""
    _, value = records.load(records.recording_path(row["machine"], row["notebook"], row["experiment"]))
    sweep = re.match(r"\['sweep'\]\[(\d+)\]", row["name"])
    try:
        return int(value["sweep"][int(sweep.group(1))]["world_size"] if sweep else value["world_size"])
    except (KeyError, IndexError, TypeError) as err:
        raise UsageError(f"results/index.jsonl's row {row['name']!r} does not match the recording of "
                         f"{row['experiment']} on {row['machine']}: run `make index`") from err


def baseline_figures(rows: list[dict[str, Any]], machine: str) -> dict[str, dict[str, Any]]:
    """This machine's headline figures in index rows: ``{key: {"bytes", "ranks", "gbps", "date"}}``;
    copies at 256 MiB, all_reduce busbw at the largest size and most ranks recorded.

    Used by the command line (datamove).
    """
    found = {}
    for h in HEADLINES:
        mine = [r for r in rows if _matches(r, h, machine)]
        if not mine:
            continue
        if h.experiment == "bandwidth":
            ranked = [(r["bytes"], _ranks_of(r), r) for r in mine]
            nbytes, ranks, row = max(ranked, key=lambda item: item[:2])
            gbps = row["value"] * distributed.bus_factor("all_reduce", ranks)  # the index keeps algbw
        else:
            row, ranks = max(mine, key=lambda r: r["bytes"]), h.gpus
            nbytes, gbps = row["bytes"], row["value"]
        found[h.key] = {"bytes": nbytes, "ranks": ranks, "gbps": gbps, "date": row["date"]}
    return found


def _measure_headline(key: str, base: dict[str, Any]) -> float | None:
    """The headline measured here at the baseline's size (and ranks), in decimal GB/s, by the code
    the subcommands use; None when this machine has too few GPUs for it."""
    nbytes, ranks = base["bytes"], base["ranks"]
    if hardware.gpu_count() < ranks:
        return None
    if key in ("H2D pinned", "D2H pinned"):
        return _host_copy(key[:3].lower(), True, nbytes).gbps
    if key.startswith("P2P"):
        return experiments.peer_copy_bandwidth(sizes=[nbytes], repeats=P2P_REPEATS)["0->1"][0].gbps
    result = distributed.launch(distributed.collective_timings, ranks, backend="nccl", timeout_s=300,
                                kwargs=dict(ops=["all_reduce"], sizes=[nbytes], warmup=COLLECTIVE_WARMUP,
                                            iters=COLLECTIVE_ITERS, samples=COLLECTIVE_SAMPLES))
    return distributed.busbw_gbps("all_reduce", nbytes, result[0]["timings"]["all_reduce"][0].median_s, ranks)


def compare_figures(baseline: dict[str, dict[str, Any]], measured: dict[str, float | None],
                    tolerance: float) -> list[dict[str, Any]]:
    """One row per headline: baseline and measured GB/s, their ratio, and 'pass', 'REGRESSION'
    (measured below baseline x (1 - tolerance)) or 'skipped' (not measurable here).

    Used by the command line (datamove).
    """
    rows = []
    for key, base in baseline.items():
        now = measured.get(key)
        ratio = now / base["gbps"] if now is not None else None
        verdict = "skipped" if ratio is None else "pass" if ratio >= 1 - tolerance else "REGRESSION"
        rows.append({"figure": key, "size_text": timing.format_bytes(base["bytes"]), "bytes": base["bytes"],
                     "ranks": base.get("ranks"), "baseline_gbps": base["gbps"], "measured_gbps": now,
                     "change": None if ratio is None else f"{ratio - 1:+.1%}", "verdict": verdict,
                     "baseline_date": base["date"]})
    return rows


def _this_machine() -> str:
    return hardware.machine_name(hardware.describe())


def _cmd_check(args: argparse.Namespace) -> int:
    machine = _this_machine()
    baseline = baseline_figures(records.read_index(kind="figure"), machine)
    if not baseline:
        raise UsageError(f"no baseline for {machine} in {config.results_dir() / records.INDEX_NAME}: record this "
                         f"machine first (datamove record; README: Add your machine)")
    measured = {key: _measure_headline(key, base) for key, base in _progress(list(baseline.items()), "check")}
    rows = compare_figures(baseline, measured, args.tolerance)
    failed = [r for r in rows if r["verdict"] == "REGRESSION"]
    payload = {"command": "check", "machine": machine, "tolerance": args.tolerance, "rows": rows}
    columns = {"figure": "figure", "size_text": "size", "ranks": "GPUs", "baseline_gbps": "baseline GB/s",
               "measured_gbps": "measured GB/s", "change": "change", "verdict": "verdict"}
    text = (f"{machine}: headline figures against results/index.jsonl, tolerance {args.tolerance:.0%}\n"
            + _table(rows, columns) + f"\n{len(failed)} regression(s)")
    _emit(args, payload, columns, text)
    return 1 if failed else 0


# ---------------------------------------------------------------- the parser

def _output_flags(parser: argparse.ArgumentParser, csv_too: bool = True) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print JSON (machine, versions, rows) instead of a table")
    if csv_too:
        group.add_argument("--csv", action="store_true", help="print the rows as CSV instead of a table")


def build_parser() -> argparse.ArgumentParser:
    """The ``datamove`` argument parser with its seven subcommands.

    Used by the command line (datamove).
    """
    parser = _Parser(prog="datamove", description="Measure how data moves on this machine, with the course's own "
                     "code: host <-> GPU copies, peer copies, collectives; check the machine and compare it with "
                     "its recordings. Bandwidth in decimal GB/s; sizes with binary prefixes.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    doctor = sub.add_parser("doctor", help="preflight: GPUs, driver, PCIe links, NUMA, other work, limits, "
                            "peers, NCCL, disk, recordings", description="Check this machine before a workshop or "
                            "a GPU CI job. Each check is pass / warn / FAIL with the fix; exit 1 on a FAIL. "
                            "Without a GPU it says so and exits 0 with warnings.")
    _output_flags(doctor, csv_too=False)
    doctor.add_argument("--skip-nccl", action="store_true", help="leave out the tiny NCCL all_reduce")
    doctor.add_argument("--timeout", type=float, default=60.0, help="seconds the NCCL check may take (default 60)")
    doctor.set_defaults(func=_cmd_doctor)

    for name, way in (("h2d", "Host-to-GPU"), ("d2h", "GPU-to-host")):
        copy = sub.add_parser(name, help=f"{way} copy bandwidth by size", description=(
            f"{way} copy bandwidth on cuda:0, size by size, timed exactly as notebook 01 does: pinned "
            "copies with CUDA events around copies queued behind a spin kernel, pageable ones with a synchronised "
            "host clock; warm-up, several samples, median and spread; contents checked once. Beside it, the "
            "PCIe link's raw rate."))
        copy.add_argument("--sizes", type=_argtype(parse_sizes), default=parse_sizes("4KiB:1GiB"),
                          help=f"SMALLEST:LARGEST[:FACTOR] (x4 steps) or a list A,B; each {SIZE_HELP} "
                               "(default 4KiB:1GiB)")
        memory = copy.add_mutually_exclusive_group()
        memory.add_argument("--pinned", dest="pinned", action="store_true", default=True,
                            help="page-locked host memory (the default)")
        memory.add_argument("--pageable", dest="pinned", action="store_false", help="ordinary (pageable) host memory")
        _output_flags(copy)
        copy.set_defaults(func=_cmd_copy)

    p2p = sub.add_parser("p2p", help="peer matrix: one-way and both-ways GB/s, latency", description=(
        "Copies between every pair of GPUs, timed as notebook 05 does: one direction, both directions at once, "
        f"and the latency of a {LATENCY_BYTES}-byte copy. Needs 2 GPUs."))
    p2p.add_argument("--size", type=_argtype(parse_size), default=256 * MiB, help=f"copy size, {SIZE_HELP} "
                     "(default 256MiB)")
    _output_flags(p2p)
    p2p.set_defaults(func=_cmd_p2p)

    coll = sub.add_parser("collectives", help="collectives with nccl-tests' columns (torchrun or spawned ranks)",
                          description=(
        "Time collectives as nccl-tests does and print its columns: size, count, type, redop, root, time, algbw, "
        "busbw, #wrong (summed over ranks; exit 1 if any). Under torchrun (one node or several) it joins "
        "torchrun's group; otherwise it starts --nproc ranks here (NCCL with a GPU per rank, else gloo)."))
    coll.add_argument("--ops", type=_argtype(parse_ops), default=parse_ops("all"),
                      help=f"'all' or a comma-separated list of {', '.join(distributed.COLLECTIVE_OPS)} (default all)")
    coll.add_argument("--sizes", type=_argtype(parse_sizes), default=parse_sizes("1KiB:1GiB"),
                      help=f"SMALLEST:LARGEST[:FACTOR] or a list; each {SIZE_HELP} (default 1KiB:1GiB)")
    coll.add_argument("--backend", choices=distributed.BACKENDS, help="nccl (GPUs) or gloo (CPU); default: "
                      "nccl with a GPU per rank, else gloo")
    coll.add_argument("--nproc", type=_argtype(_whole(1)), help="ranks to start without torchrun (default: one per GPU, or 2)")
    coll.add_argument("--warmup", type=_argtype(_whole(0)), default=COLLECTIVE_WARMUP, help="warm-up calls (default 5)")
    coll.add_argument("--iters", type=_argtype(_whole(1)), default=COLLECTIVE_ITERS, help="calls per sample (default 20)")
    coll.add_argument("--samples", type=_argtype(_whole(1)), default=COLLECTIVE_SAMPLES, help="samples (default 5)")
    coll.add_argument("--timeout", type=float, default=600.0, help="seconds the ranks may run (default 600)")
    _output_flags(coll)
    coll.set_defaults(func=_cmd_collectives)

    record = sub.add_parser("record", help="record this GPU machine: GPU tests, every notebook live, "
                            "results/<machine>/", description=(
        "The contributor's run on a GPU machine (tools/gpu_run.py): the GPU tests, every notebook executed live at "
        "full size with recording on, results/<machine>/ and an archive with the executed notebooks, then the "
        "recordings checks (validation, staleness)."))
    record.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-out", help="folder for the archive and "
                        "summary (default build/gpu-out in the clone)")
    record.add_argument("--install", action="store_true", help="first pip install PyPI's CUDA build of torch and "
                        "the course's test extras (needs network)")
    record.add_argument("--quick", action="store_true", help="also time a quick-mode pass")
    record.add_argument("--skip-tests", action="store_true", help="leave out the GPU tests")
    record.set_defaults(func=_cmd_record)

    check = sub.add_parser("check", help="compare the headline figures with this machine's recorded baseline",
                           description=(
        "Measure pinned H2D and D2H at 256 MiB, the cuda:0 -> cuda:1 copy at 256 MiB and all_reduce busbw at the "
        "largest size and most ranks notebook 06 recorded, and compare them with this machine's rows in "
        "results/index.jsonl. Exit 1 when a figure falls below its baseline by more than the tolerance."))
    check.add_argument("--tolerance", type=_argtype(parse_tolerance), default=0.05,
                       help="how far below the baseline a figure may fall, e.g. 5%% (default 5%%)")
    _output_flags(check)
    check.set_defaults(func=_cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``datamove`` with ``argv`` (default: the command line); return the exit status:
    0 done, 1 a check failed (FAIL, #wrong, regression), 2 a request that cannot be served.

    Used by the command line (datamove).
    """
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"datamove {args.command}: {err}", file=sys.stderr)
        return 2
    except (distributed.WorkerError, distributed.LaunchTimeout) as err:
        print(f"datamove {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"datamove {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
