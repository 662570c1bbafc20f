"""``datamove nvbandwidth``: the copies of notebooks 01 and 05 under nvbandwidth's testcase names,
flags (``-t``, ``-l``, ``-b`` buffer MiB, ``-i`` samples, ``-j``) and output: one matrix per
testcase (``memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)``), a ``SUM <testcase> <value>``
line, and the JSON of ``nvbandwidth -j`` (``bandwidth_matrix`` as strings, ``sum``).

The copies are the notebooks' own (``experiments.timed_copy``, ``experiments.peer_copy_bandwidth``,
``experiments.peer_copy_both_ways``), timed as the notebooks time them: CUDA events around copies
queued behind a spin kernel, the median of the samples, as nvbandwidth itself does. Only the
testcases those copies are listed; nvbandwidth's others (SM copies, reads in the destination's
context, all-to-one) have no notebook experiment and are not offered.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

import torch

from .. import experiments, hardware, timing
from .cli_args import MiB, UsageError, need_gpus
from .cli_output import say


@dataclass(frozen=True)
class Testcase:
    """One nvbandwidth testcase that a notebook's copy measures: its key, nvbandwidth's matrix
    description, the GPUs it needs and the notebook code that runs it.
    """

    key: str
    description: str
    gpus: int
    source: str


TESTCASES = (
    Testcase(
        "host_to_device_memcpy_ce",
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
        1,
        "notebook 01's timed_copy(n, 'h2d', pinned=True) on each GPU",
    ),
    Testcase(
        "device_to_host_memcpy_ce",
        "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
        1,
        "notebook 01's timed_copy(n, 'd2h', pinned=True) on each GPU",
    ),
    Testcase(
        "device_to_device_memcpy_write_ce",
        "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)",
        2,
        "notebook 05's peer_copy_bandwidth: dst.copy_(src) on the source GPU's stream (row: source)",
    ),
    Testcase(
        "device_to_device_bidirectional_memcpy_write_ce",
        "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)",
        2,
        "notebook 05's peer_copy_both_ways: both directions at once, the Total matrix",
    ),
)
DEFAULT_BUFFER_MIB, DEFAULT_SAMPLES = 512, 3  # nvbandwidth's -b and -i defaults

Matrix = list[list[float | None]]


def find_testcase(name: str) -> Testcase:
    """The testcase named ``name`` or numbered ``name`` (its index in ``-l``), as nvbandwidth's -t takes it."""
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
    """The GPU x GPU matrix of notebook 05's results at size number ``index``: ``"i->j"`` keys go
    to row i, column j; ``"i<->j"`` (both ways, total) to both [i][j] and [j][i]; N/A elsewhere.
    """
    matrix: Matrix = [[None] * n for _ in range(n)]
    for key, per_size in pairs.items():
        both = "<->" in key
        i, j = (int(part) for part in key.split("<->" if both else "->"))
        matrix[i][j] = per_size[index].gbps
        if both:
            matrix[j][i] = per_size[index].gbps
    return matrix


def matrix_sum(matrix: Matrix) -> float:
    """nvbandwidth's SUM: every measured value of the matrix added up (N/A counts 0)."""
    return sum(v for row in matrix for v in row if v is not None)


def matrix_text(case: Testcase, matrix: Matrix) -> str:
    """The matrix as nvbandwidth prints it: description, column indices, rows with two decimals
    (N/A where nothing was measured), a blank line, ``SUM <testcase> <sum>``.
    """
    columns = max(len(row) for row in matrix)
    lines = [case.description, "  " + "".join(f"{j:>10}" for j in range(columns))]
    for i, row in enumerate(matrix):
        lines.append(f"{i:>2}" + "".join(f"{'N/A' if v is None else f'{v:.2f}':>10}" for v in row))
    return "\n".join(lines + ["", f"SUM {case.key} {matrix_sum(matrix):.2f}"])


def measure(case: Testcase, nbytes: int, samples: int) -> Matrix:
    """Run ``case`` on every GPU (or pair of GPUs) here with buffers of ``nbytes``: the notebook's
    copy, ``samples`` samples each; its matrix in decimal GB/s.
    """
    n = hardware.gpu_count()
    if case.key.startswith(("host_to_device", "device_to_host")):
        direction = "h2d" if case.key.startswith("host") else "d2h"
        timings = []
        for gpu in range(n):
            with torch.cuda.device(gpu):
                timings.append(experiments.timed_copy(nbytes, direction, True, samples))
        return host_matrix(timings)
    if "bidirectional" in case.key:
        return pair_matrix(experiments.peer_copy_both_ways(sizes=[nbytes], repeats=samples), n)
    return pair_matrix(experiments.peer_copy_bandwidth(sizes=[nbytes], repeats=samples), n)


def json_testcase(case: Testcase, matrix: Matrix | None, status: str = "Passed") -> dict[str, Any]:
    """One entry of ``nvbandwidth -j``'s ``testcases``: name, status and, when run, the
    description, ``bandwidth_matrix`` (values as strings, "N/A" where none) and ``sum``.
    """
    entry: dict[str, Any] = {"name": case.key, "status": status}
    if matrix is not None:
        entry.update(
            bandwidth_description=case.description,
            sum=matrix_sum(matrix),
            bandwidth_matrix=[["N/A" if v is None else f"{v:g}" for v in row] for row in matrix],
        )
    return entry


def _list_text() -> str:
    """``-l``: nvbandwidth's list layout, with the notebook code behind each testcase."""
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
    need_gpus(1)
    try:
        cases = (
            [find_testcase(name) for name in args.testcase] if args.testcase else list(TESTCASES)
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    nbytes, gpus = args.buffer_size * MiB, hardware.gpu_count()
    report: dict[str, Any] = {
        "nvbandwidth": {"version": f"datamove {args.version}", "testcases": []}
    }
    if not args.json:
        info = hardware.describe()
        say(
            f"datamove nvbandwidth: the course's copies under nvbandwidth's names; buffer "
            f"{timing.format_bytes(nbytes)}, {args.samples} samples, median\n"
            f"CUDA Runtime Version: {info.get('cuda')}\nDriver Version: {info.get('driver')}\n"
        )
        for i, gpu in enumerate(info.get("gpus") or []):
            say(f"Device {i}: {gpu.get('name')}")
        say()
    for case in cases:
        if gpus < case.gpus:
            report["nvbandwidth"]["testcases"].append(json_testcase(case, None, "Waived"))
            if not args.json:
                say(
                    f"Running {case.key}.\nWaived: needs {case.gpus} GPUs, this machine has {gpus}.\n"
                )
            continue
        if not args.json:
            say(f"Running {case.key}.")
        matrix = measure(case, nbytes, args.samples)
        report["nvbandwidth"]["testcases"].append(json_testcase(case, matrix))
        if not args.json:
            say(matrix_text(case, matrix) + "\n")
    if args.json:
        say(json.dumps(report, indent=2))
    return 0
