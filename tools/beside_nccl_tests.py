"""`datamove collectives` beside nccl-tests on this machine: the README's -G and 1 GiB figures.

    python tools/beside_nccl_tests.py --nccl-tests DIR [--mpiexec mpiexec] [--runs 3] [--out DIR]

DIR holds nccl-tests' binaries built with MPI=1 (``make MPI=1 MPI_HOME=... NCCL_HOME=...``), so
that they run as datamove runs its ranks: one process per GPU (``mpiexec -n G``). For each run,
interleaved, the two tools time all_reduce, all_gather, reduce_scatter and broadcast at 1 GiB, then
from 8 B to 1 MiB with ``-G 1`` and ``-G 20``. Printed per case, op and group: the range over
sizes of the median over runs of datamove's time over nccl-tests' (busbw at 1 GiB), how many sizes
lie within the agreement issue 38 asked for (3% at 1 GiB, 20% with -G), and how often two single
runs agree as closely, datamove against nccl-tests and nccl-tests against itself. The logs stay in
--out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
GROUPS = ("out_of_place", "in_place")
CASES = {  # name: (size arguments, -G, the compared field, the agreement issue 38 asked for)
    "1 GiB busbw": (["-b", "1G", "-e", "1G"], 0, "bus_bw", 0.03),
    "-G 1": (["-b", "8", "-e", "1M", "-f", "2"], 1, "time", 0.2),
    "-G 20": (["-b", "8", "-e", "1M", "-f", "2"], 20, "time", 0.2),
}
NCCL_TESTS_COLUMNS = {"time": (5, 9), "bus_bw": (7, 11)}  # out-of-place and in-place fields
Table = dict[str, dict[int, dict[str, float]]]  # op -> size -> group -> value


def nccl_tests_rows(text: str, field: str) -> dict[int, dict[str, float]]:
    """size -> group -> ``field`` ("time", us, or "bus_bw", GB/s) from nccl-tests' printed table."""
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 13 and parts[0].isdigit():
            columns = NCCL_TESTS_COLUMNS[field]
            rows[int(parts[0])] = {g: float(parts[c]) for g, c in zip(GROUPS, columns, strict=True)}
    return rows


def datamove_rows(documents: list[dict], field: str) -> Table:
    """op -> size -> group -> ``field`` from datamove's JSON documents, one per op in OPS' order."""
    return {
        op: {r["size"]: {g: float(r[g][field]) for g in GROUPS} for r in doc["results"]}
        for op, doc in zip(OPS, documents, strict=True)
    }


def compare(ours: list[Table], theirs: list[Table], tolerance: float) -> list[str]:
    """A line per op and group, then the run-pair agreement: datamove's runs over nccl-tests',
    within ``tolerance`` (a share) either way."""

    def within(ratio: float) -> bool:
        return 1 - tolerance <= ratio <= 1 + tolerance

    lines, each, own = [], [], []
    for op in OPS:
        for g in GROUPS:
            sizes = sorted(set.intersection(*(set(t[op]) for t in ours + theirs)))
            ratios = [
                statistics.median(t[op][s][g] for t in ours)
                / statistics.median(t[op][s][g] for t in theirs)
                for s in sizes
            ]
            each += [a[op][s][g] / b[op][s][g] for a in ours for b in theirs for s in sizes]
            own += [a[op][s][g] / b[op][s][g] for a, b in combinations(theirs, 2) for s in sizes]
            lines.append(
                f"  {op:<15}{g:<13} {min(ratios):.3f}x-{max(ratios):.3f}x (median "
                f"{statistics.median(ratios):.3f}x), within {tolerance:.0%} at {sum(map(within, ratios))} of "
                f"{len(ratios)} sizes"
            )
    lines.append(
        f"  run pairs within {tolerance:.0%}: datamove against nccl-tests {sum(map(within, each))} of "
        f"{len(each)}, nccl-tests against itself {sum(map(within, own))} of {len(own)}"
    )
    return lines


def run_once(case: str, n: int, args: argparse.Namespace) -> tuple[Table, Table]:
    """One run of each tool for ``case``: (datamove's table, nccl-tests' table)."""
    sizes, graph, field, _ = CASES[case]
    tag = f"{case.replace(' ', '_')}_r{n}"
    theirs = {}
    for op in OPS:
        command = [args.mpiexec, "-n", str(args.gpus), str(args.nccl_tests / f"{op}_perf")]
        command += [*sizes, "-g", "1", "-G", str(graph)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
        (args.out / f"nccl_{op}_{tag}.log").write_text(done.stdout)
        theirs[op] = nccl_tests_rows(done.stdout, field)
    command = [sys.executable, "-m", "helpers.cli", "collectives", "--backend", "nccl", "--json"]
    command += ["-g", str(args.gpus), "--ops", ",".join(OPS), *sizes, "-G", str(graph)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=True, cwd=ROOT
    )
    (args.out / f"datamove_{tag}.json").write_text(done.stdout)
    return datamove_rows(json.loads(done.stdout), field), theirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nccl-tests", type=Path, required=True, help="nccl-tests' build folder")
    parser.add_argument("--mpiexec", default="mpiexec")
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "beside-nccl-tests")
    args = parser.parse_args(argv)
    if not (args.nccl_tests / "all_reduce_perf").exists():
        parser.error(f"{args.nccl_tests} has no all_reduce_perf: pass nccl-tests' build folder")
    args.out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        runs = [run_once(case, n, args) for n in range(1, args.runs + 1)]
        print(f"{case}, datamove over nccl-tests, medians of {args.runs} runs:")
        lines = compare([r[0] for r in runs], [r[1] for r in runs], CASES[case][3])
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
