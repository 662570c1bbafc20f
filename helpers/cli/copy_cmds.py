"""``datamove h2d``, ``d2h`` (notebook 01's ``timed_copy``, a row per size as measured) and ``p2p``
(notebook 05's peer copies): the notebooks' own ``#@save`` cells, in ``helpers.experiments``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .. import experiments, hardware, timing
from .cli_args import MiB, UsageError, need_gpus
from .cli_output import Progress, StreamedRows, emit, machine_facts, matrix_table, say

# Notebook 01's full-size params: samples below and from 64 MiB.
REPEATS_SMALL, REPEATS_LARGE, LARGE_BYTES = 10, 5, 64 * MiB


def host_copy(direction: str, pinned: bool, n: int) -> timing.Timing:
    """One size of notebook 01's copy_bandwidth, with the notebook's samples for that size."""
    return experiments.timed_copy(
        n, direction, pinned, REPEATS_SMALL if n < LARGE_BYTES else REPEATS_LARGE
    )


def _check_copy_sizes(sizes: list[int]) -> None:
    bad = [n for n in sizes if n % 4]
    if bad:
        raise UsageError(
            f"copy sizes are whole 4-byte words (the copied data is int32); {bad[0]} bytes is not: "
            f"pass e.g. {bad[0] - bad[0] % 4 or 4}"
        )


def link_of_gpu0() -> dict[str, Any]:
    """GPU 0's PCIe link at most and its raw one-way rate, as notebook 01 reads it."""
    info = hardware.describe()
    gpu0 = (info.get("gpus") or [{}])[0]
    gen, width = gpu0.get("pcie_gen_max"), gpu0.get("pcie_width_max")
    return {
        "gen": gen,
        "width": width,
        "theoretical_gbps": hardware.pcie_theoretical_gbps(gen, width),
        "memory_ceiling_gbps": hardware.ceiling_gbps(info),
    }


def copy_row(t: timing.Timing, link_gbps: float | None) -> dict[str, Any]:
    """One row of ``h2d``/``d2h``: GB/s (median, slowest, fastest), spread, time, share of the link."""
    slow, fast = t.gbps_range
    return {
        "size": t.nbytes,
        "size_text": timing.format_bytes(t.nbytes or 0),
        "gbps": t.gbps,
        "gbps_slowest": slow,
        "gbps_fastest": fast,
        "spread": t.spread,
        "time_us": t.median_us,
        "link_share": t.gbps / link_gbps if link_gbps else None,
        "samples": len(t.samples_s),
        "calls_per_sample": t.calls_per_sample,
        "method": t.method,
    }


def _f2(x: Any) -> str:
    return f"{x:.2f}"


# A row's key -> its heading, width and format in the table.
COPY_COLUMNS: dict[str, tuple[str, int, Callable[[Any], str]]] = {
    "size_text": ("size", 9, str),
    "gbps": ("GB/s", 8, _f2),
    "gbps_slowest": ("slowest", 8, _f2),
    "gbps_fastest": ("fastest", 8, _f2),
    "spread": ("IQR/median", 10, lambda x: f"{x:.3f}"),
    "time_us": ("us/copy", 10, lambda x: f"{x:.1f}"),
    "link_share": ("of link", 7, lambda x: f"{x:.0%}"),
    "calls_per_sample": ("calls", 6, str),
    "method": ("clock", 24, str),
}


def cmd_copy(args: argparse.Namespace) -> int:
    """``datamove h2d`` / ``d2h``: each size's row printed as soon as it is measured."""
    need_gpus(1)
    _check_copy_sizes(args.sizes)
    link = link_of_gpu0()
    memory = "pinned" if args.pinned else "pageable"
    facts = machine_facts()
    raw = link["theoretical_gbps"]
    where = (
        f"PCIe gen {link['gen']} x{link['width']}: raw {raw:.1f} GB/s per direction "
        f"(copies reach about 80-90% of it)"
        if raw
        else "PCIe link not reported by nvidia-smi"
    )
    out = StreamedRows(args, COPY_COLUMNS)
    if out.mode == "text":
        say(
            f"{args.command.upper()} from {memory} memory on {facts['gpu']}; decimal GB/s, median of the "
            f"samples (slowest-fastest); {where}"
        )
    out.header()
    progress = Progress(args.command, len(args.sizes))
    try:
        for n in args.sizes:
            out.add(copy_row(host_copy(args.command, args.pinned, n), raw))
            progress.step()
    finally:
        progress.close()
    if out.mode == "json":
        emit(
            args,
            {"command": args.command, "memory": memory, **facts, "link": link, "rows": out.rows},
            COPY_COLUMNS,
            "",
        )
    return 0


# ---------------------------------------------------------------- p2p: notebook 05's peer copies

# Notebook 05's full-size params: samples for the bandwidth matrices; latency size, samples and calls.
P2P_REPEATS, LATENCY_BYTES, LATENCY_REPEATS, LATENCY_CALLS = 7, 4, 10, 50


def cmd_p2p(args: argparse.Namespace) -> int:
    """``datamove p2p``: notebook 05's peer copies (one way, both ways, latency) at one size."""
    need_gpus(2)
    n, size = hardware.gpu_count(), args.size
    say(
        f"datamove p2p: one way, both ways and latency, {timing.format_bytes(size)}, every pair of GPUs",
        sys.stderr,
    )
    # {"i->j": [Timing]}, {"i<->j": [Timing]} and {"i->j": [Timing]}, one Timing per size
    one_way = experiments.peer_copy_bandwidth(sizes=[size], repeats=P2P_REPEATS)
    both = experiments.peer_copy_both_ways(sizes=[size], repeats=P2P_REPEATS)
    latency = experiments.peer_copy_latency(
        sizes=[LATENCY_BYTES], repeats=LATENCY_REPEATS, calls=LATENCY_CALLS
    )
    uni = [[one_way[f"{i}->{j}"][0].gbps if i != j else None for j in range(n)] for i in range(n)]
    bidi = [
        [both[f"{min(i, j)}<->{max(i, j)}"][0].gbps if i != j else None for j in range(n)]
        for i in range(n)
    ]
    lat = [[latency[f"{i}->{j}"][0].median_us for j in range(n)] for i in range(n)]
    peer = hardware.peer_access()
    rows = [
        {
            "src": i,
            "dst": j,
            "peer_access": peer[i][j],
            "unidirectional_gbps": uni[i][j],
            "bidirectional_gbps": bidi[i][j],
            "latency_us": lat[i][j],
        }
        for i in range(n)
        for j in range(n)
    ]
    payload = {
        "command": "p2p",
        **machine_facts(),
        "size": size,
        "latency_bytes": LATENCY_BYTES,
        "unidirectional_gbps": uni,
        "bidirectional_gbps": bidi,
        "latency_us": lat,
        "rows": rows,
    }
    text = "\n\n".join(
        [
            matrix_table(f"one direction, {timing.format_bytes(size)}", uni, "decimal GB/s"),
            matrix_table(
                f"both directions at once, {timing.format_bytes(size)} each way",
                bidi,
                "decimal GB/s, total",
            ),
            matrix_table(f"latency of a {LATENCY_BYTES} B copy", lat, "us per copy"),
        ]
    )
    emit(args, payload, list(rows[0]), text)  # CSV: every field of a row
    return 0
