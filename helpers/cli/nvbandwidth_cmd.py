"""``datamove nvbandwidth``: notebooks 01 and 05's copies under nvbandwidth v0.8's testcase names,
flags (``-t``, ``-l``, ``-b`` MiB, ``-i``, ``-v``, ``-j``), text and ``-j`` JSON (output.cpp,
json_output.cpp, testcases_ce.cpp). Copies are timed as the notebooks time them (CUDA events,
median of the samples, as nvbandwidth does); the bidirectional testcase needs each direction's
own time, which ``both_ways_each`` gives as nvbandwidth's ``doMemcpyVector`` does. nvbandwidth's
SM-copy, read and all-to-one testcases are not offered.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import experiments, hardware, timing
from .cli_args import MiB, UsageError, need_gpus
from .cli_output import say


@dataclass(frozen=True)
class Testcase:
    """An nvbandwidth testcase: its key, its matrices (key suffix, nvbandwidth's description),
    the GPUs it needs and the code that measures it."""

    key: str
    matrices: tuple[tuple[str, str], ...]
    gpus: int
    source: str

    @property
    def description(self) -> str:
        """Its last matrix's description (the one nvbandwidth's JSON keeps)."""
        return self.matrices[-1][1]


_BIDIR = "memcpy CE GPU(row) <-> GPU(column) {} bandwidth (GB/s)"
TESTCASES = (
    Testcase(
        "host_to_device_memcpy_ce",
        (("", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"),),
        1,
        "notebook 01's timed_copy(n, 'h2d', pinned=True) on each GPU",
    ),
    Testcase(
        "device_to_host_memcpy_ce",
        (("", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)"),),
        1,
        "notebook 01's timed_copy(n, 'd2h', pinned=True) on each GPU",
    ),
    Testcase(
        "device_to_device_memcpy_write_ce",
        (("", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"),),
        2,
        "notebook 05's peer_copy_bandwidth: dst.copy_(src) on the source GPU's stream (row: source)",
    ),
    Testcase(
        "device_to_device_bidirectional_memcpy_write_ce",
        (
            ("_write1", _BIDIR.format("Write1")),
            ("_write2", _BIDIR.format("Write2")),
            ("_total", _BIDIR.format("Total")),
        ),
        2,
        "both_ways_each: row -> column and column -> row at once, each timed by its own events "
        "(Write1: row -> column, Write2: column -> row, Total: their sum)",
    ),
)
DEFAULT_BUFFER_MIB = 512  # nvbandwidth's -b default
NVBANDWIDTH_NOTE = (
    "NOTE: The reported results may not reflect the full capabilities of the platform.\n"
    "Performance can vary with software drivers, hardware clocks, and system topology.\n"
)
SMALL_BUFFER_WARNING = (
    "NOTE: You have chosen a buffer size that is smaller than the default buffer size. It is "
    "suggested to use the default buffer size (64MB) to achieve maximal peak bandwidth."
)

Matrix = list[list[float | None]]


def find_testcase(name: str) -> Testcase:
    """The testcase named ``name``, or numbered ``name`` in ``-l``, as nvbandwidth's -t takes it."""
    if name.isdigit() and int(name) < len(TESTCASES):
        return TESTCASES[int(name)]
    for case in TESTCASES:
        if case.key == name:
            return case
    raise ValueError(
        f"testcase {name!r} is not one datamove measures: pass one of "
        f"{', '.join(c.key for c in TESTCASES)} (or its index; -l lists them)"
    )


def host_matrix(timings: list[timing.Timing]) -> Matrix:
    """The CPU(row) x GPU(column) matrix of one host copy per GPU: decimal GB/s, one row."""
    return [[t.gbps for t in timings]]


def pair_matrix(pairs: dict[str, list[timing.Timing]], n: int, index: int = 0) -> Matrix:
    """The GPU x GPU GB/s of notebook 05's ``{"i->j": [Timing]}`` at size number ``index``."""
    matrix: Matrix = [[None] * n for _ in range(n)]
    for key, per_size in pairs.items():
        i, j = (int(part) for part in key.split("->"))
        matrix[i][j] = per_size[index].gbps
    return matrix


def matrix_sum(matrix: Matrix) -> float:
    """nvbandwidth's SUM: every measured value of the matrix added up (N/A counts 0)."""
    return sum(v for row in matrix for v in row if v is not None)


def matrix_stats(matrix: Matrix) -> tuple[float, float, float]:
    """nvbandwidth's -v MIN, MAX and AVG (inline_common.h): N/A counts 0; AVG of the values > 0."""
    values = [v or 0.0 for row in matrix for v in row]
    positive = [v for v in values if v > 0]
    return min(values), max(values), sum(positive) / len(positive) if positive else 0.0


def matrix_text(key: str, description: str, matrix: Matrix, verbose: bool = False) -> str:
    """A matrix as nvbandwidth prints it, then ``SUM <key> <sum>`` (``verbose``: MIN, MAX, AVG)."""
    columns = max(len(row) for row in matrix)
    lines = [description, "  " + "".join(f"{j:>10}" for j in range(columns))]
    for i, row in enumerate(matrix):
        lines.append(f"{i:>2}" + "".join(f"{'N/A' if v is None else f'{v:.2f}':>10}" for v in row))
    lines += ["", f"SUM {key} {matrix_sum(matrix):.2f}"]
    if verbose:
        low, high, average = matrix_stats(matrix)
        lines += [f"MIN {key} {low:.2f}", f"MAX {key} {high:.2f}", f"AVG {key} {average:.2f}"]
    return "\n".join(lines)


def both_ways_each(i: int, j: int, nbytes: int, samples: int) -> tuple[float, float]:
    """cuda:i -> cuda:j and back at once, each timed by its own events as nvbandwidth's
    bidirectional testcase does; median decimal GB/s of each direction, both copies checked."""
    x_i = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=f"cuda:{i}")
    x_j = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=f"cuda:{j}")
    on_j, on_i = torch.empty_like(x_j), torch.empty_like(x_i)
    # (source GPU, its copy stream, the destination's own stream: the two never wait on each other)
    directions = (
        (i, torch.cuda.Stream(device=i), torch.cuda.Stream(device=j), x_i, on_j),
        (j, torch.cuda.Stream(device=j), torch.cuda.Stream(device=i), x_j, on_i),
    )
    calls = timing.calls_for(nbytes / 300e9, most=16)
    rates: tuple[list[float], list[float]] = ([], [])
    for sample in range(samples + 1):
        events = []
        for gpu, stream, dst_stream, src, dst in directions:
            with torch.cuda.device(gpu), torch.cuda.stream(stream):
                timing.hold_stream(300 + 150 * calls, gpu)
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                with torch.cuda.stream(dst_stream):  # the destination GPU's current stream
                    for _ in range(calls):
                        dst.copy_(src, non_blocking=True)
                end.record()
            events.append((start, end))
        for gpu, *_ in directions:
            torch.cuda.synchronize(gpu)
        if sample:  # the first sample warms up
            for rate, (start, end) in zip(rates, events, strict=True):
                rate.append(nbytes * calls / (start.elapsed_time(end) / 1e3) / 1e9)
    timing.verify_copy(x_i, on_j, f"cuda:{i} -> cuda:{j} (both ways)")
    timing.verify_copy(x_j, on_i, f"cuda:{j} -> cuda:{i} (both ways)")
    return statistics.median(rates[0]), statistics.median(rates[1])


def measure(case: Testcase, nbytes: int, samples: int) -> list[Matrix]:
    """``case`` on every GPU (or ordered pair) here: a matrix of decimal GB/s per ``matrices``."""
    n = hardware.gpu_count()
    if case.key.startswith(("host_to_device", "device_to_host")):
        direction = "h2d" if case.key.startswith("host") else "d2h"
        timings = []
        for gpu in range(n):
            with torch.cuda.device(gpu):
                timings.append(experiments.timed_copy(nbytes, direction, True, samples))
        return [host_matrix(timings)]
    if "bidirectional" in case.key:
        write1: Matrix = [[None] * n for _ in range(n)]
        write2: Matrix = [[None] * n for _ in range(n)]
        total: Matrix = [[None] * n for _ in range(n)]
        for i, j in itertools.permutations(range(n), 2):
            one, other = both_ways_each(i, j, nbytes, samples)
            write1[i][j], write2[i][j], total[i][j] = one, other, one + other
        return [write1, write2, total]
    return [pair_matrix(experiments.peer_copy_bandwidth(sizes=[nbytes], repeats=samples), n)]


def json_testcase(
    case: Testcase, matrices: list[Matrix] | None, status: str = "Passed", verbose: bool = False
) -> dict[str, Any]:
    """One of ``nvbandwidth -j``'s ``testcases``: name, status and, when run, the rows of every
    matrix one after another as strings, then the last matrix's sum and description (and min,
    max, average with ``verbose``), as nvbandwidth's JSON writer leaves them."""
    entry: dict[str, Any] = {"name": case.key, "status": status}
    if matrices:
        last = matrices[-1]
        entry.update(
            bandwidth_matrix=[
                ["N/A" if v is None else f"{v:g}" for v in row] for m in matrices for row in m
            ],
            sum=matrix_sum(last),
            bandwidth_description=case.description,
        )
        if verbose:
            entry["min"], entry["max"], entry["average"] = matrix_stats(last)
    return entry


def _cuda_version_code(version: str | None) -> int:
    """``"12.8"`` -> 12080, as CUDA reports versions; 0 when unknown."""
    if not version:
        return 0
    major, _, minor = version.partition(".")
    return int(major) * 1000 + int(minor or 0) * 10


def device_lines() -> list[str]:
    """nvbandwidth's device names, ``NAME (dddddddd:bb:dd)`` (PCI domain, bus, device)."""
    lines = []
    for i in range(hardware.gpu_count()):
        props = torch.cuda.get_device_properties(i)
        dom, bus, dev = (
            int(getattr(props, f"pci_{part}_id", 0)) for part in ("domain", "bus", "device")
        )
        lines.append(f"{props.name} ({dom:08x}:{bus:02x}:{dev:02x})")
    return lines


def header(version: str) -> dict[str, Any]:
    """What nvbandwidth states before its testcases (versions as CUDA's integer codes), here."""
    info = hardware.describe()
    return {
        "version": f"datamove {version}",
        "git_version": version,
        "runtime": _cuda_version_code(torch.version.cuda),
        "cuda_driver": _cuda_version_code(hardware.driver_cuda_version() or torch.version.cuda),
        "driver": str(info.get("driver") or "unknown"),
        "host": socket.gethostname(),
        "devices": device_lines(),
    }


def header_text(facts: dict[str, Any]) -> str:
    """nvbandwidth's text before its testcases, line for line."""
    lines = [
        f"nvbandwidth Version: {facts['version']}",
        f"Built from Git version: {facts['git_version']}",
        "",
        f"CUDA Runtime Version: {facts['runtime']}",
        f"CUDA Driver Version: {facts['cuda_driver']}",
        f"Driver Version: {facts['driver']}",
        "",
        facts["host"],
        *(f"Device {i}: {d}" for i, d in enumerate(facts["devices"])),
        "",
    ]
    return "\n".join(lines)


def json_header(facts: dict[str, Any]) -> dict[str, Any]:
    """``nvbandwidth -j``'s keys before ``testcases``."""
    return {
        "version": facts["version"],
        "git_version": facts["git_version"],
        "CUDA Runtime Version": facts["runtime"],
        "Driver Version": facts["driver"],
        "GPU Device list": [f"{i}: {d}: ({facts['host']})" for i, d in enumerate(facts["devices"])],
    }


def _list_text() -> str:
    """``-l``: nvbandwidth's list layout, with the code behind each testcase."""
    lines = ["Index, Name:", "\tDescription", "======================="]
    for i, case in enumerate(TESTCASES):
        lines += [
            f"{i}, {case.key}:",
            f"{case.description}; measured by {case.source}. Needs {case.gpus} GPU(s).",
            "",
        ]
    return "\n".join(lines)


def cmd_nvbandwidth(args: argparse.Namespace) -> int:
    """``datamove nvbandwidth``: the chosen testcases, each matrix printed as soon as it is measured."""
    if args.list:
        say(_list_text())
        return 0
    try:  # the names first: a bad one is the user's to fix on any machine
        cases = (
            [find_testcase(name) for name in args.testcase] if args.testcase else list(TESTCASES)
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    need_gpus(1)
    nbytes, gpus, verbose = args.buffer_size * MiB, hardware.gpu_count(), bool(args.verbose)
    facts = header(args.version)
    report: dict[str, Any] = {"nvbandwidth": {**json_header(facts), "testcases": []}}
    small = args.buffer_size < DEFAULT_BUFFER_MIB
    if small:
        report["nvbandwidth"]["warning"] = SMALL_BUFFER_WARNING
    text: Callable[[str], None] = (lambda line: None) if args.json else say  # -j: JSON alone
    if not args.json:  # what datamove adds goes to stderr: stdout is nvbandwidth's, line for line
        print(
            f"datamove: the course's copies under nvbandwidth's names; buffer "
            f"{timing.format_bytes(nbytes)}, {args.samples} samples, median",
            file=sys.stderr,
        )
    text(header_text(facts))
    if small:
        text(SMALL_BUFFER_WARNING)
    testcases = report["nvbandwidth"]["testcases"]
    for case in cases:
        if gpus < case.gpus:
            testcases.append(json_testcase(case, None, "Waived"))
            text("Waived: ")
            continue
        text(f"Running {case.key}.")
        matrices = measure(case, nbytes, args.samples)
        testcases.append(json_testcase(case, matrices, verbose=verbose))
        for (suffix, description), matrix in zip(case.matrices, matrices, strict=True):
            text(matrix_text(case.key + suffix, description, matrix, verbose) + "\n")
    say(json.dumps(report, indent=2) if args.json else NVBANDWIDTH_NOTE)
    return 0
