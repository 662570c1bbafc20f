"""``datamove record`` (the GPU run of ``tools/gpu_run.py``: GPU tests, every notebook live,
results/<machine>/, validated) and ``datamove check`` (the headline figures measured again against
this machine's rows in results/index.jsonl).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config, distributed, experiments, hardware, records, timing
from .cli_args import MiB, UsageError
from .cli_output import Progress, emit, table
from .collectives_cmd import COLLECTIVE_ITERS, COLLECTIVE_SAMPLES, COLLECTIVE_WARMUP
from .copy_cmds import P2P_REPEATS, host_copy

ROOT = Path(__file__).resolve().parents[2]  # the clone: notebooks/, tools/, results/


def _gpu_run_command(out: Path, quick: bool, skip_tests: bool, notebooks: list[Path]) -> list[str]:
    flags = ["--quick"] * quick + ["--skip-tests"] * skip_tests
    script = str(ROOT / "tools" / "gpu_run.py")
    return [sys.executable, script, "--out", str(out), *flags, *map(str, notebooks)]


def _install_commands() -> list[list[str]]:
    """PyPI's CUDA build of torch (its default on Linux) and the course with its test and CLI extras."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    return [[*pip, "torch>=2.11,<2.15"], [*pip, "-e", f"{ROOT}[dev,cli]"]]


def _recorded_machine(out: Path) -> str | None:
    """The machine named by the archive tools/gpu_run.py wrote into ``out``."""
    archives = sorted(out.glob("gpu-results-*.tar.gz"), key=lambda p: p.stat().st_mtime)
    return (
        archives[-1].name.removeprefix("gpu-results-").removesuffix(".tar.gz") if archives else None
    )


def _record_problems(machine: str, notebooks: list[Path]) -> list[str]:
    """The recordings checks on what was written: validation, then staleness of this machine's."""
    problems = records.validate_machine_folder(config.results_dir() / machine, machine)
    problems += [p.text for p in records.check_recordings(notebooks) if p.machine == machine]
    return problems


def cmd_record(args: argparse.Namespace) -> int:
    """``datamove record``: exit 1 when the run or the recordings checks failed."""
    if not (ROOT / "tools" / "gpu_run.py").exists():
        raise UsageError(
            f"datamove record runs from a clone of the course (no tools/gpu_run.py under {ROOT}); "
            f"git clone it and pip install -e '.[dev,cli]' there"
        )
    if not hardware.driver_present():
        raise UsageError("datamove record needs a GPU machine: no NVIDIA driver answers here")
    if args.install:
        for cmd in _install_commands():
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    out = args.out.resolve()
    env = {**os.environ, **distributed.RANK_ENV, "PYTHONUNBUFFERED": "1"}
    command = _gpu_run_command(out, args.quick, args.skip_tests, notebooks)
    code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    machine = _recorded_machine(out)
    if machine is None:
        print(
            f"datamove record: tools/gpu_run.py wrote no archive into {out} (exit {code})",
            file=sys.stderr,
        )
        return 1
    problems = _record_problems(machine, notebooks)
    verdict = f"{len(problems)} problem(s)" if problems else "sound"
    print(f"recordings checks on results/{machine}/: {verdict}")
    for problem in problems:
        print(f"  - {problem}")
    print(
        f"archive: {out}/gpu-results-{machine}.tar.gz; next: make index, then a pull request with "
        f"results/{machine}/ and results/index.jsonl (CONTRIBUTING.md: Add your machine)"
    )
    return 1 if code or problems else 0


@dataclass(frozen=True)
class Headline:
    """A figure ``datamove check`` measures again: where its baseline sits in results/index.jsonl."""

    key: str
    notebook: str
    experiment: str
    prefix: str  # "field=start": the index row's field (name or label) starts with it
    nbytes: int | None  # the size compared; None: the largest recorded
    gpus: int


HEADLINES = (
    Headline("H2D pinned", "01_pinned_memory", "copy_bandwidth", "label=H2D pinned", 256 * MiB, 1),
    Headline("D2H pinned", "01_pinned_memory", "copy_bandwidth", "label=D2H pinned", 256 * MiB, 1),
    Headline(
        "P2P cuda:0 -> cuda:1",
        "05_device_to_device",
        "peer_copy_bandwidth",
        "name=['0->1']",
        256 * MiB,
        2,
    ),
    Headline(
        "all_reduce busbw",
        "06_nccl_point_to_point_and_collectives",
        "bandwidth",
        "label=all_reduce ",
        None,
        2,
    ),
)


def _matches(row: dict[str, Any], headline: Headline, machine: str) -> bool:
    field, _, start = headline.prefix.partition("=")
    return (
        row["machine"] == machine
        and row["notebook"] == headline.notebook
        and row["experiment"] == headline.experiment
        and row.get("unit") == "GB/s"
        and str(row.get(field, "")).startswith(start)
        and (headline.nbytes is None or row.get("bytes") == headline.nbytes)
    )


def _ranks_of(row: dict[str, Any]) -> int:
    """How many ranks timed a collective's index row: its recording's ``world_size``, per entry of
    notebook 06's sweep (``['sweep'][k]...``) or once for the run."""
    _, value = records.load(
        records.recording_path(row["machine"], row["notebook"], row["experiment"])
    )
    sweep = re.match(r"\['sweep'\]\[(\d+)\]", row["name"])
    try:
        return int(
            value["sweep"][int(sweep.group(1))]["world_size"] if sweep else value["world_size"]
        )
    except (KeyError, IndexError, TypeError) as err:
        raise UsageError(
            f"results/index.jsonl's row {row['name']!r} does not match the recording of "
            f"{row['experiment']} on {row['machine']}: run `make index`"
        ) from err


def baseline_figures(rows: list[dict[str, Any]], machine: str) -> dict[str, dict[str, Any]]:
    """This machine's headline figures, ``{key: {"bytes", "ranks", "gbps", "date"}}``: copies at
    256 MiB, all_reduce busbw at the largest size and most ranks recorded."""
    found = {}
    for h in HEADLINES:
        mine = [r for r in rows if _matches(r, h, machine)]
        if not mine:
            continue
        if h.experiment == "bandwidth":
            ranked = [(r["bytes"], _ranks_of(r), r) for r in mine]
            nbytes, ranks, row = max(ranked, key=lambda item: item[:2])
            gbps = row["value"] * distributed.bus_factor("all_reduce", ranks)  # index: algbw
        else:
            row, ranks = max(mine, key=lambda r: r["bytes"]), h.gpus
            nbytes, gbps = row["bytes"], row["value"]
        found[h.key] = {"bytes": nbytes, "ranks": ranks, "gbps": gbps, "date": row["date"]}
    return found


def _measure_headline(key: str, base: dict[str, Any]) -> float | None:
    """The headline measured here at the baseline's size and ranks, GB/s (None: too few GPUs)."""
    nbytes, ranks = base["bytes"], base["ranks"]
    if hardware.gpu_count() < ranks:
        return None
    if key in ("H2D pinned", "D2H pinned"):
        return host_copy(key[:3].lower(), True, nbytes).gbps
    if key.startswith("P2P"):
        return experiments.peer_copy_bandwidth(sizes=[nbytes], repeats=P2P_REPEATS)["0->1"][0].gbps
    result = distributed.launch(
        distributed.collective_timings,
        ranks,
        backend="nccl",
        timeout_s=300,
        kwargs=dict(
            ops=["all_reduce"],
            sizes=[nbytes],
            warmup=COLLECTIVE_WARMUP,
            iters=COLLECTIVE_ITERS,
            samples=COLLECTIVE_SAMPLES,
        ),
    )
    return distributed.busbw_gbps(
        "all_reduce", nbytes, result[0]["timings"]["all_reduce"][0].median_s, ranks
    )


def compare_figures(
    baseline: dict[str, dict[str, Any]], measured: dict[str, float | None], tolerance: float
) -> list[dict[str, Any]]:
    """A row per headline: baseline and measured GB/s, change, and 'pass', 'REGRESSION' (below
    baseline x (1 - tolerance)) or 'skipped' (not measurable here)."""
    rows = []
    for key, base in baseline.items():
        now = measured.get(key)
        ratio = now / base["gbps"] if now is not None else None
        verdict = "skipped" if ratio is None else "pass" if ratio >= 1 - tolerance else "REGRESSION"
        rows.append(
            {
                "figure": key,
                "size_text": timing.format_bytes(base["bytes"]),
                "bytes": base["bytes"],
                "ranks": base.get("ranks"),
                "baseline_gbps": base["gbps"],
                "measured_gbps": now,
                "change": None if ratio is None else f"{ratio - 1:+.1%}",
                "verdict": verdict,
                "baseline_date": base["date"],
            }
        )
    return rows


def _this_machine() -> str:
    return hardware.machine_name(hardware.describe())


def cmd_check(args: argparse.Namespace) -> int:
    """``datamove check``: exit 1 on a regression."""
    machine = _this_machine()
    baseline = baseline_figures(records.read_index(kind="figure"), machine)
    if not baseline:
        raise UsageError(
            f"no baseline for {machine} in {config.results_dir() / records.INDEX_NAME}: record this "
            f"machine first (datamove record; CONTRIBUTING.md: Add your machine)"
        )
    progress = Progress("check", len(baseline))
    measured = {}
    for key, base in baseline.items():
        measured[key] = _measure_headline(key, base)
        progress.step(key)
    progress.close()
    rows = compare_figures(baseline, measured, args.tolerance)
    failed = [r for r in rows if r["verdict"] == "REGRESSION"]
    payload = {"command": "check", "machine": machine, "tolerance": args.tolerance, "rows": rows}
    columns = {
        "figure": "figure",
        "size_text": "size",
        "ranks": "GPUs",
        "baseline_gbps": "baseline GB/s",
        "measured_gbps": "measured GB/s",
        "change": "change",
        "verdict": "verdict",
    }
    text = (
        f"{machine}: headline figures against results/index.jsonl, tolerance {args.tolerance:.0%}\n"
        + table(rows, columns)
        + f"\n{len(failed)} regression(s)"
    )
    emit(args, payload, columns, text)
    return 1 if failed else 0
