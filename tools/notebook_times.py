"""How long each notebook takes: live on each recorded GPU machine, and in replay here.

A run's times come from its executed notebook: Jupyter stamps each code cell with when it
started and ended (``metadata.execution``). A notebook's seconds are from its first cell's
start to its last cell's end (the kernel's start-up is not counted). They are kept in

- ``results/<machine>/run_times.json``, written by ``tools/gpu_run.py`` after each notebook it
  runs live: ``{"full" | "quick": {notebook: {"date", "commit", "seconds", "cells": [{"cell":
  index in the notebook, "seconds"}, ...]}}}``;
- ``results/replay_times.json``, written here by ``measure-replay``: the same entry per
  notebook under ``"notebooks"``, with ``"cpus"``, what replayed it (every notebook at full
  size, one at a time, as ``make run`` does on a machine without a GPU).

    python tools/notebook_times.py table            # the README's tables, from those files
    python tools/notebook_times.py write-readme     # put it into README.md between its markers
    python tools/notebook_times.py measure-replay   # replay every notebook here, timing it
    python tools/notebook_times.py from-executed MACHINE FOLDER --commit C   # a machine's times
                                          # from its executed notebooks (build/gpu-executed/...)

A machine without a time for a notebook shows "not recorded"; no number is ever made up.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMES = "run_times.json"
REPLAY_TIMES = "replay_times.json"
MODES = ("full", "quick")
BEGIN, END = "<!-- notebook-times: begin -->", "<!-- notebook-times: end -->"


def _stamp(cell: dict, key: str) -> dt.datetime | None:
    value = cell.get("metadata", {}).get("execution", {}).get(key)
    return dt.datetime.fromisoformat(value) if value else None


def times_of(executed: dict, commit: str) -> dict:
    """The entry of one run from its executed notebook: date (its first cell's start, UTC),
    ``commit``, seconds from first cell start to last cell end, and seconds per code cell.

    Used by ``tools/gpu_run.py``.
    """
    cells, first, last = [], None, None
    for index, cell in enumerate(executed["cells"]):
        start, end = _stamp(cell, "iopub.execute_input"), _stamp(cell, "shell.execute_reply")
        if cell["cell_type"] != "code" or start is None or end is None:
            continue
        cells.append({"cell": index, "seconds": round((end - start).total_seconds(), 3)})
        first, last = first or start, end
    if not cells:
        raise ValueError(
            "the notebook has no timed code cell: pass one executed by Jupyter "
            "(nbclient or nbmake), whose cells carry metadata.execution"
        )
    return {
        "date": first.isoformat(timespec="seconds"),
        "commit": commit,
        "seconds": round((last - first).total_seconds(), 1),
        "cells": cells,
    }


def entry_problems(entry: object, where: str) -> list[str]:
    """What is wrong with one notebook's entry (see the module's docstring); empty is good.

    Used by ``tools/gpu_run.py``.
    """
    if not isinstance(entry, dict) or set(entry) != {"date", "commit", "seconds", "cells"}:
        return [f"{where}: expected an object with exactly date, commit, seconds, cells"]
    problems = []
    if not isinstance(entry["seconds"], int | float) or entry["seconds"] < 0:
        problems.append(f"{where}: seconds must be a number >= 0")
    if not isinstance(entry["date"], str) or not isinstance(entry["commit"], str):
        problems.append(f"{where}: date and commit must be strings")
    cells = entry["cells"]
    if not isinstance(cells, list) or not all(
        isinstance(c, dict)
        and set(c) == {"cell", "seconds"}
        and isinstance(c["cell"], int)
        and isinstance(c["seconds"], int | float)
        and c["seconds"] >= 0
        for c in cells
    ):
        problems.append(f"{where}: cells must be a list of {{cell: index, seconds: >= 0}}")
    return problems


def run_times_problems(path: Path) -> list[str]:
    """What is wrong with a ``results/<machine>/run_times.json``; empty is good.

    Used by ``tools/gpu_run.py``.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        return [f"{path}: not readable as JSON ({e})"]
    if not isinstance(data, dict) or not set(data) <= set(MODES):
        return [f"{path}: expected an object whose keys are among {', '.join(MODES)}"]
    problems = []
    for mode, runs in data.items():
        if not isinstance(runs, dict):
            problems.append(f"{path}: {mode} must map notebooks to their times")
            continue
        for notebook, entry in runs.items():
            problems += entry_problems(entry, f"{path}: {mode}/{notebook}")
    return problems


def record(machine_folder: Path, mode: str, notebook: str, entry: dict) -> Path:
    """Put ``entry`` for ``notebook`` run in ``mode`` into ``machine_folder/run_times.json``,
    keeping the other notebooks' times; written whole to a temporary file, then renamed.

    Used by ``tools/gpu_run.py``.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is neither of {MODES}: pass 'full' or 'quick'")
    problems = entry_problems(entry, notebook)
    if problems:
        raise ValueError("; ".join(problems))
    path = Path(machine_folder) / RUN_TIMES
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault(mode, {})[notebook] = entry
    data = {m: dict(sorted(data[m].items())) for m in MODES if m in data}
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".run_times-", delete=False) as f:
        f.write(json.dumps(data, indent=1) + "\n")
    os.replace(f.name, path)
    return path


def _seconds(value: float | None) -> str:
    if value is None:
        return "not recorded"
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def _machines(results: Path) -> list[str]:
    """The machines' folders, less hidden ones and a kind that only says why it was not
    recorded (a folder holding gaps.json alone)."""
    return sorted(
        p.name
        for p in results.iterdir()
        if p.is_dir()
        and not p.name.startswith(".")
        and {c.name for c in p.iterdir()} - {"gaps.json"}
    )


def _times(results: Path, machine: str, mode: str) -> dict:
    path = results / machine / RUN_TIMES
    return json.loads(path.read_text()).get(mode, {}) if path.exists() else {}


def _markdown(rows: list[list[str]]) -> str:
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def table(root: Path = ROOT) -> str:
    """The README's first table: per notebook, seconds live at full size on each recorded machine
    that recorded it (from its run_times.json) and in replay here (results/replay_times.json).

    Used by ``tools/notebook_times.py write-readme`` and tests/test_notebook_times.py.
    """
    results = root / "results"
    machines = _machines(results)
    live = {m: _times(results, m, "full") for m in machines}
    replay_path = results / REPLAY_TIMES
    replay = (
        json.loads(replay_path.read_text())
        if replay_path.exists()
        else {"notebooks": {}, "cpus": "?"}
    )
    notebooks = sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))
    head = ["notebook", *(f"live, {m}" for m in machines), f"replay ({replay['cpus']} CPU cores)"]
    rows = [head, ["---"] * len(head)]
    for (
        nb
    ) in notebooks:  # a machine that replays a notebook it cannot run says "-", not a live time
        cells = [
            (
                "-"
                if not (results / m / nb).is_dir()
                else _seconds(live[m][nb]["seconds"])
                if nb in live[m]
                else "not recorded"
            )
            for m in machines
        ]
        rows.append([f"`{nb}`", *cells, _seconds(replay["notebooks"].get(nb, {}).get("seconds"))])
    return _markdown(rows)


def quick_table(root: Path = ROOT) -> str:
    """The README's second table: per notebook, seconds live in quick mode on each machine that
    timed it (``gpu_run.py --quick`` or ``--only-quick``), with their sum; a machine with fewer GPUs
    than a notebook needs ran what it could and replayed the rest, as a classroom's would.

    Used by ``tools/notebook_times.py write-readme`` and tests/test_notebook_times.py.
    """
    results = root / "results"
    quick = {m: times for m in _machines(results) if (times := _times(results, m, "quick"))}
    notebooks = sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))
    rows = [["notebook", *(f"quick, {m}" for m in quick)], ["---"] * (len(quick) + 1)]
    for nb in notebooks:
        rows.append(
            [
                f"`{nb}`",
                *(
                    _seconds(t[nb]["seconds"]) if nb in t else "not recorded"
                    for t in quick.values()
                ),
            ]
        )
    rows.append(
        [
            "all of them",
            *(
                _seconds(sum(t[nb]["seconds"] for nb in notebooks if nb in t))
                + ("" if set(notebooks) <= set(t) else " (not all timed)")
                for t in quick.values()
            ),
        ]
    )
    return _markdown(rows)


QUICK_CAPTION = (
    "**In quick mode** (`COURSE_QUICK=1`, a classroom's run), live on each machine that timed it\n"
    "(`make gpu-all GPU_FLAGS=--quick`), counted the same way; a machine with fewer GPUs than a\n"
    "notebook needs runs what it can and replays the rest, as a classroom's would:"
)


def memory_table(root: Path = ROOT) -> str:
    """The README's third table: per notebook, the most memory its experiments held, live at
    full size and in quick mode, on each machine that measured it (``footprints.json``): GPU
    memory on one GPU / pinned host memory / the notebook's process, in GiB.

    Used by ``tools/notebook_times.py write-readme``.
    """
    from helpers import records

    results = root / "results"
    machines = [m for m in _machines(results) if (results / m / records.FOOTPRINTS).exists()]
    notebooks = sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))
    head = ["notebook", *(f"{mode}, {m}" for m in machines for mode in ("full size", "quick"))]
    rows = [head, ["---"] * len(head)]

    def gib(n: int | None) -> str:
        return "?" if n is None else f"{n / 2**30:.1f}"

    for nb in notebooks:
        cells = []
        for m in machines:
            for mode in ("full", "quick"):
                used = records.notebook_footprint(results / m, nb, mode)
                cells.append(
                    "not measured"
                    if used is None
                    else f"{gib(used.gpu[0])} / {gib(used.pinned)} / {gib(used.host)}"
                )
        rows.append([f"`{nb}`", *cells])
    return _markdown(rows)


MEMORY_CAPTION = (
    "**Memory each notebook needs**, the most any of its experiments held, live (`make gpu-all`\n"
    "measures it into `results/<machine>/footprints.json`), in GiB: on one GPU (PyTorch's\n"
    "allocator) / pinned host memory / the notebook's process (resident, pinned included;\n"
    "notebook 06's rank processes are not counted):"
)


def tables(root: Path = ROOT) -> str:
    """The tables as the README shows them: full size and replay, quick mode, memory, each
    under its caption.

    Used by ``tools/notebook_times.py table`` and ``readme_with_table``.
    """
    return (
        f"{table(root)}\n\n{QUICK_CAPTION}\n\n{quick_table(root)}\n\n{MEMORY_CAPTION}\n\n"
        f"{memory_table(root)}"
    )


def readme_with_table(readme: str, root: Path = ROOT) -> str:
    """``readme`` with the text between its notebook-times markers replaced by ``table``.

    Used by ``tools/notebook_times.py write-readme`` and tests/test_notebook_times.py.
    """
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise ValueError(
            f"README.md must hold the markers {BEGIN} and {END} once each, around the table"
        )
    before, rest = readme.split(BEGIN)
    return f"{before}{BEGIN}\n{tables(root)}\n{END}{rest.split(END)[1]}"


TEST_BEGIN, TEST_END = "<!-- make-test-time: begin -->", "<!-- make-test-time: end -->"


def test_time_sentence(root: Path = ROOT) -> str:
    """The README's sentence on how long ``make test`` took on a fresh clone, from
    results/replay_times.json's ``make_test`` (``measure-test`` writes it)."""
    path = root / "results" / REPLAY_TIMES
    timed = json.loads(path.read_text()).get("make_test") if path.exists() else None
    if not timed:
        return "`make test` has not been timed on a fresh clone (`python tools/notebook_times.py measure-test`)."
    return (
        f"On a fresh clone with {timed['cpus']} CPU cores (load average {timed['load']:g} as it "
        f"started), `make test` took {_seconds(timed['seconds'])}, setting itself up included "
        f"({timed['date'][:10]}, commit {timed['commit']})."
    )


def readme_with_times(readme: str, root: Path = ROOT) -> str:
    """``readme`` with its generated parts current: the tables (``readme_with_table``) and the
    sentence between its make-test-time markers (``test_time_sentence``)."""
    readme = readme_with_table(readme, root)
    if readme.count(TEST_BEGIN) != 1 or readme.count(TEST_END) != 1:
        raise ValueError(f"README.md must hold the markers {TEST_BEGIN} and {TEST_END} once each")
    before, rest = readme.split(TEST_BEGIN)
    return f"{before}{TEST_BEGIN}{test_time_sentence(root)}{TEST_END}{rest.split(TEST_END)[1]}"


def measure_test(root: Path = ROOT) -> Path:
    """Clone HEAD into a temporary folder and time ``make test`` there (its set-up included),
    as a contributor's fresh clone runs it; write the seconds, and the load average as it
    started, into results/replay_times.json. A failed run is a SystemExit with its output's tail."""
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "VIRTUAL_ENV"))}
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "course"
        subprocess.run(["git", "clone", "--quiet", str(root), str(clone)], check=True)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        run = subprocess.run(
            ["make", "test"], cwd=clone, env=env, capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise SystemExit(f"make test failed on a fresh clone:\n{(run.stdout + run.stderr)[-3000:]}")
    path = root / "results" / REPLAY_TIMES
    timed = json.loads(path.read_text()) if path.exists() else {}
    timed["make_test"] = {
        "seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "load": round(load, 2),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": commit,
    }
    path.write_text(json.dumps(timed, indent=1) + "\n")
    return path


RUN = (
    "import sys, nbformat; from nbclient import NotebookClient; nb = nbformat.read(sys.argv[1], 4); "
    "NotebookClient(nb, timeout=1200, kernel_name='python3', "
    "resources={'metadata': {'path': sys.argv[3]}}).execute(); nbformat.write(nb, sys.argv[2])"
)


def measure_replay(root: Path = ROOT) -> Path:
    """Replay every notebook here at full size, one at a time in a fresh kernel (as ``make run``
    does without a GPU), and write their times to results/replay_times.json.

    Used by ``tools/notebook_times.py measure-replay``.
    """
    commit = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_")}
    timed = {}
    with tempfile.TemporaryDirectory() as tmp:
        for nb in sorted((root / "notebooks").glob("*.ipynb")):
            out = Path(tmp) / nb.name
            subprocess.run(
                [sys.executable, "-c", RUN, str(nb), str(out), str(nb.parent)], env=env, check=True
            )
            timed[nb.stem] = times_of(json.loads(out.read_text()), commit)
            print(f"{nb.stem}: {timed[nb.stem]['seconds']:.0f} s in replay", flush=True)
    path = root / "results" / REPLAY_TIMES
    kept = json.loads(path.read_text()) if path.exists() else {}  # make_test's time stays
    path.write_text(
        json.dumps({**kept, "cpus": os.cpu_count(), "notebooks": timed}, indent=1) + "\n"
    )
    return path


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        choices=["table", "write-readme", "measure-replay", "measure-test", "from-executed"],
    )
    parser.add_argument(
        "machine", nargs="?", help="from-executed: the machine's folder name under results/"
    )
    parser.add_argument(
        "folder", nargs="?", type=Path, help="from-executed: its executed notebooks"
    )
    parser.add_argument("--commit", help="from-executed: the commit the run was made from")
    args = parser.parse_args(argv)
    if args.command == "table":
        print(tables())
    elif args.command == "write-readme":
        readme = ROOT / "README.md"
        readme.write_text(readme_with_times(readme.read_text()))
    elif args.command == "measure-replay":
        print(measure_replay())
    elif args.command == "measure-test":
        print(measure_test())
    else:
        if not (args.machine and args.folder and args.commit):
            parser.error("from-executed needs MACHINE FOLDER --commit COMMIT")
        if not (ROOT / "results" / args.machine).is_dir():
            parser.error(f"results/{args.machine}/ does not exist: pass a recorded machine")
        for path in sorted(args.folder.glob("*.ipynb")):
            entry = times_of(json.loads(path.read_text()), args.commit)
            print(record(ROOT / "results" / args.machine, "full", path.stem, entry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
