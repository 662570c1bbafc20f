"""``datamove``: the course's measurements as a command line (``COMMANDS``), a module per job and
here the parser and ``main``. Nothing here measures by itself: copies are the notebooks' own
experiments (``helpers.experiments``), collectives ``helpers.distributed``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import config
from .cli_args import (
    SIZE_HELP,
    MiB,
    Parser,
    UsageError,
    argtype,
    one_of,
    parse_ops,
    parse_output_file,
    parse_ranks,
    parse_seconds,
    parse_size,
    parse_sizes,
    parse_tolerance,
    whole,
)

__all__ = ["UsageError", "build_parser", "main", "version"]

# Each subcommand's line in `datamove --help`, which is built from this alone: the subcommands'
# modules import torch (3-4 s) and are imported only where the full parser is built, so
# `datamove --version` and `datamove --help` answer at once.
COMMANDS = {
    "h2d": "Host-to-GPU copy bandwidth by size",
    "d2h": "GPU-to-host copy bandwidth by size",
    "p2p": "peer matrix: one-way and both-ways GB/s, latency",
    "nvbandwidth": "the copies under nvbandwidth's testcase names and matrices",
    "collectives": "collectives in nccl-tests' output and flags (torchrun or spawned ranks)",
    "doctor": "preflight: GPUs, driver, PCIe links, NUMA, other work, limits, "
    "peers, NCCL, disk, recordings",
    "topo": "GPU x GPU links (NVLink, PCIe), NUMA nodes and ceilings, from NVML",
    "record": "record this GPU machine: GPU tests, every notebook live, results/<machine>/",
    "check": "compare the headline figures with this machine's recorded baseline",
    "notebooks": "copy the course's notebooks into a folder, and run them there (--run)",
}


def version() -> str:
    """The installed course's version (pyproject's), or "unknown" where it is not installed."""
    return config.course_version()


def _output_flags(parser: argparse.ArgumentParser, csv_too: bool = True) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--json",
        action="store_true",
        help="print JSON (machine, versions, rows) instead of a table",
    )
    if csv_too:
        group.add_argument(
            "--csv", action="store_true", help="print the rows as CSV instead of a table"
        )


def _command(
    sub: argparse._SubParsersAction, name: str, func: Callable[[Any], int], description: str
) -> argparse.ArgumentParser:
    """The subcommand ``name`` (its help line from ``COMMANDS``), run by ``func``."""
    parser = sub.add_parser(name, help=COMMANDS[name], description=description)
    parser.set_defaults(func=func)
    return parser


# argparse types: nccl-tests' sizes, whole numbers >= 1 and >= 0, seconds
SIZE, POSITIVE, COUNT = argtype(parse_size), argtype(whole(1)), argtype(whole(0))
SECONDS = argtype(parse_seconds)


def _add_copies(sub: argparse._SubParsersAction) -> None:
    from .copy_cmds import LATENCY_BYTES, cmd_copy, cmd_p2p
    from .nvbandwidth_cmd import cmd_nvbandwidth

    for name, way in (("h2d", "Host-to-GPU"), ("d2h", "GPU-to-host")):
        copy = _command(
            sub,
            name,
            cmd_copy,
            f"{way} copy bandwidth on cuda:0, size by size, timed exactly as notebook 01 does: pinned "
            "copies with CUDA events around copies queued behind a spin kernel, pageable ones with a synchronised "
            "host clock; warm-up, several samples, median and spread; contents checked once. Each row is printed "
            "when measured. Beside it, the PCIe link's raw rate.",
        )
        copy.add_argument(
            "--sizes",
            type=argtype(parse_sizes),
            default=parse_sizes("4KiB:1GiB"),
            help=f"SMALLEST:LARGEST[:FACTOR] (x4 steps) or a list A,B; each {SIZE_HELP} "
            "(default 4KiB:1GiB)",
        )
        memory = copy.add_mutually_exclusive_group()
        memory.add_argument(
            "--pinned",
            action="store_true",
            default=True,
            help="page-locked host memory (the default)",
        )
        memory.add_argument(
            "--pageable",
            dest="pinned",
            action="store_false",
            help="ordinary (pageable) host memory",
        )
        _output_flags(copy)

    p2p = _command(
        sub,
        "p2p",
        cmd_p2p,
        "Copies between every pair of GPUs, timed as notebook 05 does: one direction, both directions at once, "
        f"and the latency of a {LATENCY_BYTES}-byte copy. Needs 2 GPUs.",
    )
    p2p.add_argument(
        "--size", type=SIZE, default=256 * MiB, help=f"copy size, {SIZE_HELP} (default 256MiB)"
    )
    _output_flags(p2p)

    nvb = _command(
        sub,
        "nvbandwidth",
        cmd_nvbandwidth,
        "nvbandwidth's copy-engine testcases measured by notebooks 01 and 05's "
        "code: a matrix per testcase and its SUM line, or nvbandwidth's JSON (-j).",
    )
    nvb.add_argument(  # several names after one -t, as nvbandwidth's (Boost multitoken) -t takes them
        "-t",
        "--testcase",
        action="extend",
        nargs="+",
        help="testcase names or indices (-t a b, or -t a -t b; default all)",
    )
    nvb.add_argument("-l", "--list", action="store_true", help="list the testcases")
    nvb.add_argument(
        "-b",
        "--bufferSize",
        dest="buffer_size",
        type=POSITIVE,
        default=512,
        help="buffer size in MiB (default 512, as nvbandwidth)",
    )
    nvb.add_argument(
        "-i",
        "--testSamples",
        dest="samples",
        type=POSITIVE,
        default=3,
        help="samples per measurement (default 3, as nvbandwidth)",
    )
    nvb.add_argument(
        "-v", "--verbose", action="store_true", help="MIN, MAX and AVG beside each SUM"
    )
    nvb.add_argument("-j", "--json", action="store_true", help="print nvbandwidth's JSON")


def _add_collectives(sub: argparse._SubParsersAction) -> None:
    from .. import distributed
    from .collectives_cmd import (
        COLLECTIVE_ITERS,
        COLLECTIVE_SAMPLES,
        COLLECTIVE_WARMUP,
        cmd_collectives,
    )

    coll = _command(
        sub,
        "collectives",
        cmd_collectives,
        "Time collectives as nccl-tests does and print its output: header, '# Using devices', out-of-place and "
        "in-place groups, each row as it is measured, '# Out of bounds values' and '# Avg bus bandwidth' (exit 1 "
        "on wrong values). Under torchrun it joins torchrun's group; otherwise it starts -g ranks here (NCCL with "
        "a GPU per rank, else gloo). nccl-tests' short flags mean what they mean there.",
    )
    coll.add_argument(
        "-b", "--minbytes", type=SIZE, help="smallest size (default 1K; nccl-tests' 128M units)"
    )
    coll.add_argument(
        "-e", "--maxbytes", type=SIZE, help="largest size (default 1G with nccl, 4M with gloo)"
    )
    steps = coll.add_mutually_exclusive_group()
    steps.add_argument(
        "-f", "--stepfactor", type=argtype(whole(2)), help="multiply the size by this (default 4)"
    )
    steps.add_argument("-i", "--stepbytes", type=SIZE, help="add this many bytes to the size")
    coll.add_argument(
        "-g",
        "--ngpus",
        "--nproc",
        type=argtype(parse_ranks),
        help="ranks to start without torchrun (default: "
        "one per GPU, or 2); with --sweep-ranks the most CPU ranks",
    )
    coll.add_argument(
        "-n",
        "--iters",
        type=POSITIVE,
        default=COLLECTIVE_ITERS,
        help="calls per sample (default %(default)s)",
    )
    coll.add_argument(
        "-w",
        "--warmup_iters",
        "--warmup",
        dest="warmup",
        type=COUNT,
        default=COLLECTIVE_WARMUP,
        help="warm-up calls (default %(default)s)",
    )
    coll.add_argument(
        "-c", "--check", type=COUNT, default=1, help="check results (1, default) or not"
    )
    coll.add_argument(
        "-G",
        "--cudagraph",
        type=COUNT,
        default=0,
        help="capture the -n calls in a new CUDA graph each sample and time its first launches, "
        "this many (default 0: launch each call; NCCL only)",
    )
    coll.add_argument(
        "-I",
        "--per_iter_timing",
        type=COUNT,
        default=0,
        help="1: also time each call of one more batch (nccl-tests' per-iteration report)",
    )
    coll.add_argument(
        "-K",
        "--per_iter_skip",
        type=COUNT,
        default=0,
        help="leave the first K calls out of the -I summary (default 0)",
    )
    coll.add_argument(
        "-o",
        "--op",
        type=argtype(one_of("sum", why="torch's timed reductions sum")),
        default="sum",
        help="reduction op (sum)",
    )
    coll.add_argument(
        "-d",
        "--datatype",
        type=argtype(one_of("float", why="notebook 06 times float32")),
        default="float",
        help="data type (float)",
    )
    coll.add_argument(
        "-J",
        "--output_file",
        type=argtype(parse_output_file),
        help="also write nccl-tests' JSON to this file",
    )
    coll.add_argument(
        "--ops",
        type=argtype(parse_ops),
        default=["all_reduce"],
        help=f"'all' or a comma-separated list of {', '.join(distributed.COLLECTIVE_OPS)} "
        "(default all_reduce: one collective a run, as an nccl-tests binary; several print one "
        "block each, as separate runs would)",
    )
    coll.add_argument(
        "--sizes",
        type=argtype(parse_sizes),
        help=f"instead of -b/-e/-f: SMALLEST:LARGEST[:FACTOR] or a list; each {SIZE_HELP}",
    )
    coll.add_argument(
        "--backend",
        choices=distributed.BACKENDS,
        help="nccl (GPUs) or gloo (CPU); default: nccl with a GPU per rank, else gloo",
    )
    coll.add_argument(
        "--samples",
        type=POSITIVE,
        default=COLLECTIVE_SAMPLES,
        help="samples of -n calls, median taken (default %(default)s)",
    )
    coll.add_argument(
        "--sweep-ranks",
        action="store_true",
        help="busbw at the largest size against N = 2, 4, ... "
        "every GPU (gloo: up to -g CPU ranks, default 4)",
    )
    coll.add_argument(
        "--timeout", type=SECONDS, default=600.0, help="seconds the ranks may run (default 600)"
    )
    coll.add_argument(
        "--json", action="store_true", help="print nccl-tests' JSON instead of its text"
    )


def _add_machine(sub: argparse._SubParsersAction) -> None:
    from .doctor import cmd_doctor
    from .notebooks_cmd import cmd_notebooks
    from .record_check import ROOT, cmd_check, cmd_record
    from .topo import cmd_topo

    doctor = _command(
        sub,
        "doctor",
        cmd_doctor,
        "Check this machine before a workshop or "
        "a GPU CI job. Each check is pass / warn / FAIL with the fix; exit 1 on a FAIL. "
        "Without a GPU it says 'CPU only: the notebooks replay' and exits 0.",
    )
    _output_flags(doctor, csv_too=False)
    doctor.add_argument(
        "--skip-nccl", action="store_true", help="leave out the tiny NCCL all_reduce"
    )
    doctor.add_argument(
        "--timeout", type=SECONDS, default=60.0, help="seconds the NCCL check may take (default 60)"
    )

    topo = _command(
        sub,
        "topo",
        cmd_topo,
        "What connects each pair of GPUs (NVLink with its link count, or the PCIe "
        "path as nvidia-smi topo -m names it), each GPU's PCIe link and NUMA node, and the "
        "ceiling in GB/s each link allows. Without a GPU it says so.",
    )
    topo.add_argument("--json", action="store_true", help="print JSON instead of the matrix")

    record = _command(
        sub,
        "record",
        cmd_record,
        "The contributor's run on a GPU machine (tools/gpu_run.py): the GPU tests, every notebook executed live at "
        "full size with recording on, results/<machine>/ and an archive with the executed notebooks, then the "
        "recordings checks (validation, staleness).",
    )
    record.add_argument(
        "--out",
        type=Path,
        default=ROOT / "build" / "gpu-out",
        help="folder for the archive and summary (default build/gpu-out in the clone)",
    )
    record.add_argument(
        "--install",
        action="store_true",
        help="first pip install PyPI's CUDA build of torch and "
        "the course's test extras (needs network)",
    )
    record.add_argument("--quick", action="store_true", help="also time a quick-mode pass")
    record.add_argument("--skip-tests", action="store_true", help="leave out the GPU tests")

    check = _command(
        sub,
        "check",
        cmd_check,
        "Measure pinned H2D and D2H at 256 MiB, the cuda:0 -> cuda:1 copy at 256 MiB and all_reduce busbw at the "
        "largest size and most ranks notebook 06 recorded, and compare them with this machine's rows in "
        "results/index.jsonl. Exit 1 when a figure falls below its baseline by more than the tolerance.",
    )
    check.add_argument(
        "--tolerance",
        type=argtype(parse_tolerance),
        default=0.05,
        help="how far below the baseline a figure may fall, e.g. 5%% (default 5%%)",
    )
    _output_flags(check)

    notebooks = _command(
        sub,
        "notebooks",
        cmd_notebooks,
        "Copy the notebooks of the installed course into FOLDER (a copy already there "
        "is kept unless --force), then open them with Jupyter, or run them here with --run "
        "(needs the notebooks extra: pip install 'moving-data-course[notebooks]'). Each "
        "replays the recordings where this machine lacks the hardware.",
    )
    notebooks.add_argument("folder", type=Path, help="where the copies go (created)")
    notebooks.add_argument(
        "names", nargs="*", help="which notebooks, e.g. 00_start_here or 03 (default: all)"
    )
    notebooks.add_argument("--run", action="store_true", help="execute them, outputs saved")
    notebooks.add_argument(
        "--quick", action="store_true", help="run in quick mode (COURSE_QUICK=1)"
    )
    notebooks.add_argument(
        "--force", action="store_true", help="replace copies already in the folder"
    )


def build_parser(full: bool = True) -> argparse.ArgumentParser:
    """The ``datamove`` parser; ``full`` False: the subcommands' lines alone (no torch import)."""
    parser = Parser(
        prog="datamove",
        description="Measure how data moves on this machine, with the course's own "
        "code: host <-> GPU copies, peer copies, collectives; check the machine and compare it with "
        "its recordings. Bandwidth in decimal GB/s; sizes with binary prefixes.",
    )
    parser.add_argument("--version", action="version", version=f"datamove {version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    if not full:
        for name, line in COMMANDS.items():
            sub.add_parser(name, help=line)
        return parser
    _add_machine(sub)
    _add_copies(sub)
    _add_collectives(sub)
    parser.set_defaults(version_text=version())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``datamove`` with ``argv`` (default: the command line); return the exit status:
    0 done, 1 a check failed (FAIL, #wrong, regression), 2 a request that cannot be served.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "--version"):
        build_parser(full=False).parse_args(argv)  # prints the help or the version and exits
    from .. import distributed

    args = build_parser().parse_args(argv)
    args.version = args.version_text
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
