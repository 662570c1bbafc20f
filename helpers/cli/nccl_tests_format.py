"""nccl-tests 2.19.6's output line for line (src/util.cu) and its ``-J`` JSON (file version 3).
A group ``distributed.collective_sweep`` could not measure prints N/A, never a copy of the other.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from typing import Any

from .. import distributed

_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum"}
_ROOT = {"broadcast": 0}
_PER_RANK_COUNT = ("all_gather", "reduce_scatter", "all_to_all")  # nccl-tests counts per rank
JSON_FILE_VERSION = 3
GROUPS = ("out_of_place", "in_place")


def float_str(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: two decimals if they fit ``width``, else one, none, e-form."""
    for form in (".2f", ".1f", ".0f"):
        text = f"{value:{width}{form}}"
        if len(text) <= width:
            return text
    return f"{value:{width}{'.1e' if width >= 7 else '.0e'}}"


def time_str(us: float) -> str:
    """A time in us as nccl-tests prints it (``  13.24``, ``1059.90``, ``12646.0``)."""
    return float_str(us, 7)


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
    graph: int,
    per_iter: bool,
    per_iter_skip: int,
    devices: list[dict[str, Any]],
    version: str,
    note: str,
    clock: str = "CUDA event",
) -> list[str]:
    """The lines before the rows (``per_iter``: ``-I 1``'s report line and columns); ``step`` is
    e.g. ``"2(factor)"``."""
    lines = [
        f"# datamove {version}: torch.distributed, {note}",
        f"# Collective test starting: {op}_perf",
        f"# nThread 1 nGpus {world} minBytes {min_bytes} maxBytes {max_bytes} step: {step} warmup iters: "
        f"{warmup} iters: {iters} agg iters: 1 validation: {check} graph: {graph} unalign: 0",
    ]
    if per_iter:
        skip = f"; summary skips first {per_iter_skip} iterations" if per_iter_skip else ""
        lines.append(
            f"# Per-Iteration Report: {clock} timing; i_* uses max over process rows{skip} "
        )
    lines += ["#", "# Using devices"]
    for d in devices:
        dom, bus, dev = d["pci"]
        lines.append(
            f"#  Rank {d['rank']:2d} Group {0:2d} Pid {d['pid']:6d} on {d['hostname']:>10} device "
            f"{d['device']:2d} [{dom:04x}:{bus:02x}:{dev:02x}] {d['name']}"
        )
    lead = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
    group: tuple[str, ...] = ("time", "algbw", "busbw", "#wrong")
    units: tuple[str, ...] = ("(us)", "(GB/s)", "(GB/s)", "")
    widths: tuple[int, ...] = (7, 6, 6, 6)
    title = "           out-of-place                       in-place          "
    if per_iter:
        group = ("time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
        units = ("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)")
        widths = (7, 6, 6, 6, 7, 7, 7, 7)
        title = "              out-of-place (+ per-iteration)                                in-place (+ per-iteration)"

    def cells(words: tuple[str, ...]) -> str:
        return "".join(f"  {w:>{n}}" for w, n in zip(words * 2, widths * 2, strict=True))

    return lines + [
        "#",
        lead + title,
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        + cells(group)
        + " ",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}" + cells(units) + " ",
    ]


def group_result(
    op: str, nbytes: int, seconds: float, wrong: int | None, world: int
) -> dict[str, Any]:
    """A group in nccl-tests' JSON: time (us), alg_bw, bus_bw (GB/s), nwrong (None: unchecked)."""
    return {
        "time": seconds * 1e6,
        "alg_bw": distributed.algbw_gbps(nbytes, seconds),
        "bus_bw": distributed.busbw_gbps(op, nbytes, seconds, world),
        "nwrong": None if wrong is None else float(wrong),
    }


def per_iter_stats(times_s: list[float], skip: int) -> dict[str, Any]:
    """nccl-tests' ``*_per_iter`` object in us (``computeIterStats``) of per-call times in seconds,
    summarising the calls after the first ``skip``."""
    kept = sorted(times_s[skip:])
    n = len(kept)
    avg = sum(kept) / n
    stdev = math.sqrt(sum((t - avg) ** 2 for t in kept) / n)

    def pct(p: int) -> float:
        return kept[min(n - 1, (n * p + 99) // 100 - 1)]

    return {
        "skipped_iterations": skip,
        "min_us": kept[0] * 1e6,
        "max_us": kept[-1] * 1e6,
        "avg_us": avg * 1e6,
        "p50_us": kept[n // 2] * 1e6,
        "p95_us": pct(95) * 1e6,
        "p99_us": pct(99) * 1e6,
        "stdev_us": stdev * 1e6,
        "cv_pct": stdev / avg * 100 if avg > 0 else 0.0,
        "times_us": [t * 1e6 for t in times_s],
    }


def result(
    op: str,
    nbytes: int,
    world: int,
    iters: int,
    groups: dict[str, dict[str, Any] | None],
    per_iter: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One row as nccl-tests' JSON has it; a group not measured is None, each group followed by
    its per-iteration object where ``per_iter`` has one."""
    row: dict[str, Any] = {
        "size": nbytes,
        "count": nbytes // 4 // (world if op in _PER_RANK_COUNT else 1),
        "type": "float",
        "redop": _REDOP.get(op, "none"),
        "root": f"{_ROOT.get(op, -1):6d}",
    }
    for key in GROUPS:
        row[key] = groups.get(key)
        if per_iter is not None and key in per_iter:
            row[f"{key}_per_iter"] = per_iter[key]
    row["actual_iterations"] = iters
    row["experiment_name"] = ""
    return row


def row_line(row: dict[str, Any]) -> str:
    """``row`` (from ``result``) as nccl-tests prints it; N/A in a group not measured."""
    line = f"{row['size']:12d}  {row['count']:12d}  {row['type']:>8}  {row['redop']:>6}  {row['root']:>6}"
    per_iter = any(f"{key}_per_iter" in row for key in GROUPS)
    for key in GROUPS:
        g = row[key]
        if g is None:
            line += f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
        else:
            wrong = "   N/A" if g["nwrong"] is None else f"{g['nwrong']:6g}"
            line += (
                f"  {time_str(g['time'])}  {float_str(g['alg_bw'], 6)}  "
                f"{float_str(g['bus_bw'], 6)}  {wrong}"
            )
        if per_iter:
            stats = row.get(f"{key}_per_iter")
            if stats is None:
                line += f"  {'N/A':>7}" * 4
            else:
                line += "".join(
                    f"  {float_str(stats[k], 7)}" for k in ("min_us", "max_us", "p99_us", "cv_pct")
                )
    return line


def summary(rows: list[dict[str, Any]]) -> tuple[int, float]:
    """Wrong elements in all, and the mean busbw of every group measured."""
    groups = [row[key] for row in rows for key in GROUPS if row[key] is not None]
    wrong = int(sum(g["nwrong"] or 0 for g in groups))
    return wrong, sum(g["bus_bw"] for g in groups) / len(groups) if groups else 0.0


def trailer_lines(op: str, rows: list[dict[str, Any]]) -> list[str]:
    """nccl-tests' lines after the rows, with datamove's comment lines (a group not measured and
    why, ``spread_lines``) where nccl-tests' -M memory line goes."""
    wrong, average = summary(rows)
    return [
        f"# {'Out of bounds values':<20} : {wrong} {'FAILED' if wrong else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {average:g} ",
        "#",
        f"# Collective test concluded: {op}_perf",
        *[
            f"# {'Not measured':<20} : {group}: {why}"
            for group, why in ((rows[0].get("datamove") or {}).get("not_measured") or {}).items()
        ],
        *spread_lines(rows),
        "#",
        "",
    ]


def _busbw(row: dict[str, Any]) -> float:
    group = row["in_place"] if row["in_place"] is not None else row["out_of_place"]
    return float(group["bus_bw"]) if group is not None else 0.0


def spread_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Comment lines (nccl-tests' readers skip them) on what its format has no column for: the
    rows' sample spread (``row["datamove"]["spread"]``, IQR/median), typical and largest, and
    where busbw fell as the size grew (other work disturbed the samples); none without a spread."""
    extra = [r.get("datamove") or {} for r in rows]
    spread = [
        (float(e["spread"]), int(r["size"]))
        for e, r in zip(extra, rows, strict=True)
        if e.get("spread") is not None
    ]
    if not spread:
        return []
    worst, at = max(spread)
    typical = sorted(s for s, _ in spread)[len(spread) // 2]
    samples = {e.get("samples") for e in extra}
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


def _json_bool(value: bool) -> str:
    """nccl-tests' ``jsonBool``: the strings "true" and "false"."""
    return "true" if value else "false"


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
    graph: int,
    per_iter: bool,
    per_iter_skip: int,
    devices: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    started: _dt.datetime,
) -> dict[str, Any]:
    """nccl-tests' ``-J`` JSON (version 3) of one collective's run, keys and types as its writer
    makes them; only the NCCL_/TORCH_ environment (the rest may hold secrets), and ``devices``
    as a one-process ``-g N`` run fills it (the first rank only)."""
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
            "graph": graph,
            "blocking_collectives": _json_bool(False),
            "per_iter_timing": _json_bool(per_iter),
            "per_iter_skip": per_iter_skip,
            "parallel_init": _json_bool(False),
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
                for d in devices[:1]
            ],
        },
        "results": [{k: v for k, v in row.items() if k != "datamove"} for row in rows],
        "out_of_bounds": {"count": wrong, "okay": _json_bool(wrong == 0)},
        "average_bus_bandwidth": {"bandwidth": average, "okay": "unchecked"},
        "errors": [],
        "end_time": _dt.datetime.now().strftime(when),
    }
