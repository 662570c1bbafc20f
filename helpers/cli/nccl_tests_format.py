"""nccl-tests' output, line for line (nccl-tests 2.19, src/util.cu): the ``# nThread`` header,
``# Using devices`` lines, the out-of-place / in-place header and units line, rows printed as
measured, the trailer (``# Out of bounds values``, ``# Avg bus bandwidth``); its JSON (``-J``,
file version 3); and one small parser that reads a log of either.

torch.distributed's ``all_reduce`` and ``broadcast`` work in place, ``all_gather_into_tensor``,
``reduce_scatter_tensor`` and ``all_to_all_single`` out of place (as notebook 06 calls them):
each row fills the group its call measured and prints N/A in the other, never a copy of it.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from typing import Any

from .. import distributed

IN_PLACE_OPS = ("all_reduce", "broadcast")
_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum"}
_ROOT = {"broadcast": 0}
_PER_RANK_COUNT = (
    "all_gather",
    "reduce_scatter",
    "all_to_all",
)  # nccl-tests' count is per rank there
JSON_FILE_VERSION = 3


def time_str(us: float) -> str:
    """A time in us as nccl-tests prints it, read off its logs: two decimals below 100 us, one
    below 10,000 us, none above (``  13.24``, ``  135.8``, ``  12646``), seven characters wide.
    """
    decimals = 2 if us < 100 else 1 if us < 10_000 else 0
    return f"{us:7.{decimals}f}"


def header_lines(
    *,
    op: str,
    world: int,
    min_bytes: int,
    max_bytes: int,
    step: str,
    warmup: int,
    iters: int,
    check: int,
    devices: list[dict[str, Any]],
    version: str,
    note: str,
) -> list[str]:
    """The lines before the rows: versions, ``# nThread ...``, ``# Using devices`` and one line per
    rank, the two header lines and the units line. ``step`` is e.g. ``"2(factor)"``.
    """
    lines = [
        f"# datamove {version}: torch.distributed, {note}",
        f"# Collective test starting: {op}_perf",
        f"# nThread 1 nGpus {world} minBytes {min_bytes} maxBytes {max_bytes} step: {step} warmup iters: "
        f"{warmup} iters: {iters} agg iters: 1 validation: {check} graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for d in devices:
        dom, bus, dev = d["pci"]
        lines.append(
            f"#  Rank {d['rank']:2d} Group {0:2d} Pid {d['pid']:6d} on {d['hostname']:>10} device "
            f"{d['device']:2d} [{dom:04x}:{bus:02x}:{dev:02x}] {d['name']}"
        )
    blank = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
    lines += [
        "#",
        blank + "           out-of-place                       in-place          ",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
        f"{'busbw':>6}  {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6} ",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
        f"{'(GB/s)':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6} ",
    ]
    return lines


def result(op: str, nbytes: int, seconds: float, wrong: int | None, world: int) -> dict[str, Any]:
    """One row as nccl-tests' JSON has it: size, count, type, redop, root (text, width 6), the
    group measured (``time`` in us, ``alg_bw``, ``bus_bw`` in GB/s, ``nwrong``; None when not
    checked) and None for the other group.
    """
    group = {
        "time": seconds * 1e6,
        "alg_bw": distributed.algbw_gbps(nbytes, seconds),
        "bus_bw": distributed.busbw_gbps(op, nbytes, seconds, world),
        "nwrong": None if wrong is None else float(wrong),
    }
    in_place = op in IN_PLACE_OPS
    return {
        "size": nbytes,
        "count": nbytes // 4 // (world if op in _PER_RANK_COUNT else 1),
        "type": "float",
        "redop": _REDOP.get(op, "none"),
        "root": f"{_ROOT.get(op, -1):6d}",
        "out_of_place": None if in_place else group,
        "in_place": group if in_place else None,
        "actual_iterations": None,
        "experiment_name": "",
    }


def row_line(row: dict[str, Any]) -> str:
    """``row`` (from ``result``) as nccl-tests prints it; N/A in the group not measured."""
    line = f"{row['size']:12d}  {row['count']:12d}  {row['type']:>8}  {row['redop']:>6}  {row['root']:>6}"
    for key in ("out_of_place", "in_place"):
        g = row[key]
        if g is None:
            line += f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
        else:
            wrong = "   N/A" if g["nwrong"] is None else f"{g['nwrong']:6g}"
            line += f"  {time_str(g['time'])}  {g['alg_bw']:6.2f}  {g['bus_bw']:6.2f}  {wrong}"
    return line


def summary(rows: list[dict[str, Any]]) -> tuple[int, float]:
    """The trailer's figures: wrong elements in all, and the mean busbw of every group measured."""
    groups = [
        row[key] for row in rows for key in ("out_of_place", "in_place") if row[key] is not None
    ]
    wrong = int(sum(g["nwrong"] or 0 for g in groups))
    return wrong, sum(g["bus_bw"] for g in groups) / len(groups) if groups else 0.0


def trailer_lines(op: str, rows: list[dict[str, Any]]) -> list[str]:
    """``# Out of bounds values : N OK|FAILED``, ``# Avg bus bandwidth    : x``, datamove's own
    comment lines (``spread_lines``), and the end line.
    """
    wrong, average = summary(rows)
    return [
        f"# {'Out of bounds values':<20} : {wrong} {'FAILED' if wrong else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {average:g} ",
        *spread_lines(rows),
        "#",
        f"# Collective test concluded: {op}_perf",
    ]


def _busbw(row: dict[str, Any]) -> float:
    group = row["in_place"] if row["in_place"] is not None else row["out_of_place"]
    return float(group["bus_bw"]) if group is not None else 0.0


def spread_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Comment lines (which nccl-tests' readers skip) on what its format has no column for: the
    spread of the samples behind each row (interquartile range over median, in %) at its largest
    and typical, and the sizes where busbw fell as the size grew (rows out of order: other work
    disturbed the samples, as on a busy CPU under gloo). No lines when the rows carry no spread.
    """
    spread = [(float(r["spread"]), int(r["size"])) for r in rows if r.get("spread") is not None]
    if not spread:
        return []
    worst, at = max(spread)
    typical = sorted(s for s, _ in spread)[len(spread) // 2]
    samples = {r.get("samples") for r in rows}
    lines = [
        f"# {'Sample spread':<20} : median {100 * typical:.1f}%, at most {100 * worst:.1f}% "
        f"({at} B); interquartile range over median of "
        f"{'/'.join(str(n) for n in sorted(samples, key=str))} samples a row"
    ]
    falls = [
        (a["size"], b["size"], _busbw(b) / _busbw(a) - 1)
        for a, b in zip(rows, rows[1:], strict=False)
        if _busbw(a) > 0 and _busbw(b) < _busbw(a) * 0.95
    ]
    if falls:
        small, large, change = min(falls, key=lambda f: f[2])
        lines.append(
            f"# {'Out of order':<20} : busbw fell by more than 5% as the size grew at "
            f"{len(falls)} of {len(rows) - 1} steps (most: {100 * change:+.0f}% from {small} B "
            f"to {large} B): compare those rows' spread, and measure again on an idle machine"
        )
    return lines


def json_document(
    *,
    argv: list[str],
    world: int,
    min_bytes: int,
    max_bytes: int,
    factor: int | None,
    step_bytes: int | None,
    warmup: int,
    iters: int,
    check: int,
    devices: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    started: _dt.datetime,
) -> dict[str, Any]:
    """nccl-tests' ``-J`` JSON (file version 3): version, times, args, the NCCL_/TORCH_ environment
    (not the whole environment: it may hold secrets), config with devices, results, out_of_bounds,
    average_bus_bandwidth.
    """
    wrong, average = summary(rows)
    step = {"step_factor": factor} if factor else {"step_bytes": step_bytes}
    nccl = distributed.nccl_version_code()
    when = "%Y-%m-%d %H:%M:%S"
    return {
        "version": JSON_FILE_VERSION,
        "start_time": started.strftime(when),
        "args": argv,
        "env": [
            f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_"))
        ],
        "nccl_version": nccl,
        "config": {
            "nthreads": 1,
            "ngpus": world,
            "minimum_bytes": min_bytes,
            "maximum_bytes": max_bytes,
            **step,
            "warmup_iters": warmup,
            "iterations": iters,
            "aggregated_iterations": 1,
            "validation": check,
            "graph": 0,
            "blocking_collectives": False,
            "per_iter_timing": False,
            "per_iter_skip": 0,
            "parallel_init": False,
            "devices": [
                {
                    "rank": d["rank"],
                    "group": 0,
                    "pid": d["pid"],
                    "hostname": d["hostname"],
                    "device": d["device"],
                    "device_hex": "{:04x}:{:02x}:{:02x}".format(*d["pci"]),
                    "device_info": d["name"],
                }
                for d in devices
            ],
        },
        "results": rows,
        "out_of_bounds": {"count": wrong, "okay": wrong == 0},
        "average_bus_bandwidth": {"bandwidth": average, "okay": "unchecked"},
        "end_time": _dt.datetime.now().strftime(when),
    }


# ---------------------------------------------------------------- reading a log back

_HEADER = re.compile(
    r"#\s*nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((\w+)\) "
    r"warmup iters: (\d+) iters: (\d+)(?: agg iters: (\d+))? validation: (\d+)"
)
_DEVICE = re.compile(
    r"#\s+Rank\s+(\d+)(?: Group\s+(\d+))? Pid\s+(\d+) on\s+(\S+) device\s+(-?\d+) \[([^\]]*)\] (.*)"
)
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(.*)$")
_TRAILER = re.compile(r"#\s*(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)")


def _group(cells: list[str]) -> dict[str, float | None] | None:
    """Four cells of a row's group (time, algbw, busbw, #wrong) as numbers; None when all are N/A."""
    if all(c == "N/A" for c in cells):
        return None
    return {
        "time": float(cells[0]),
        "alg_bw": float(cells[1]),
        "bus_bw": float(cells[2]),
        "nwrong": None if cells[3] == "N/A" else float(cells[3]),
    }


def parse_log(text: str) -> dict[str, Any]:
    """Read an nccl-tests log (nccl-tests' own or datamove's): the header's fields, the devices,
    each row with its out-of-place and in-place groups, the out-of-bounds count and the average
    bus bandwidth. Lines it does not know (NCCL INFO, mpirun's prefixes stripped first) are skipped.
    """
    found: dict[str, Any] = {
        "config": None,
        "devices": [],
        "results": [],
        "out_of_bounds": None,
        "average_bus_bandwidth": None,
    }
    for raw in text.splitlines():
        line = re.sub(r"^\[\d+,\d+\]<stdout>:", "", raw).rstrip()
        if (m := _HEADER.match(line)) is not None:
            found["config"] = {
                "nthreads": int(m[1]),
                "ngpus": int(m[2]),
                "minimum_bytes": int(m[3]),
                "maximum_bytes": int(m[4]),
                f"step_{m[6]}": int(m[5]),
                "warmup_iters": int(m[7]),
                "iterations": int(m[8]),
                "validation": int(m[10]),
            }
        elif (m := _DEVICE.match(line)) is not None:
            found["devices"].append(
                {
                    "rank": int(m[1]),
                    "pid": int(m[3]),
                    "hostname": m[4],
                    "device": int(m[5]),
                    "device_hex": m[6],
                    "device_info": m[7],
                }
            )
        elif (m := _TRAILER.match(line)) is not None:
            key = "out_of_bounds" if m[1].startswith("Out") else "average_bus_bandwidth"
            found[key] = int(m[2]) if key == "out_of_bounds" else float(m[2])
        elif (m := _ROW.match(line)) is not None:
            cells = m[6].split()
            if len(cells) < 8:
                continue
            found["results"].append(
                {
                    "size": int(m[1]),
                    "count": int(m[2]),
                    "type": m[3],
                    "redop": m[4],
                    "root": int(m[5]),
                    "out_of_place": _group(cells[0:4]),
                    "in_place": _group(cells[4:8]),
                }
            )
    return found
