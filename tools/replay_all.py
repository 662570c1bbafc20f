"""Replay each notebook on each machine that recorded it, check its verdicts and its ✓/✗ checks
against their numbers, keep results/index.jsonl current.

For each machine under results/ and each notebook it recorded, the notebook is executed in
replay (``COURSE_REPLAY=1``, quick mode for the few parts that run live on the CPU) with
``COURSE_REPLAY_MACHINE=<that machine>,<the others>``: the machine's own recordings first,
and for an experiment it could not record (one that needs more GPUs) the next machine, which
the notebook then names. The executed copies land in ``build/replay/<machine>/`` (what a
reader of that machine's run sees); each claims table appends its verdicts and each
``claims.WhatWeSee`` its checks, and the index is rebuilt from them and from the recordings'
figures.

The truth check: every check of a markdown statement holds, every verdict agrees with its
value, spread, threshold and recorded runs, and every verdict a sentence states outside the
claims table (``claims.stated``) is the table's, on every machine; a failure names notebook,
cell, machine and values. ``make test`` runs this file. The sentences a notebook prints are
tested apart (tests/test_lesson_NN.py, on every machine's recordings), and the numbers its
markdown states by tests/test_typed_numbers.py; nothing here reads the prose.

    python tools/replay_all.py            # replay, then check results/index.jsonl is current
    python tools/replay_all.py --write    # replay, then rewrite results/index.jsonl
    python tools/replay_all.py --notebook 03_streams_and_overlap   # one notebook: replays and
                                          # truth check only (the index needs every notebook)

First the guard (``records.check_recordings``) on the notebooks to replay: a missing, stale,
broken, altered (checksums.json) or linked recording or attachment stops it before any replay.

Exit 1 when the guard finds a problem, a notebook fails in replay, a check or verdict contradicts its numbers, or (without
--write) the index is out of date.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import claims, config, records  # noqa: E402

TIMEOUT_S = 600


def jobs() -> list[tuple[str, Path]]:
    """(machine, notebook) for every notebook each recorded machine has recordings of."""
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    return [
        (machine, nb)
        for machine in records.recorded_machine_names()
        for nb in notebooks
        if any((config.results_dir() / machine / nb.stem).glob("*.json"))
    ]


def preference(machine: str) -> str:
    """``machine`` first, then the other recorded machines by number of GPUs, most first."""
    others = sorted(
        (m for m in records.recorded_machine_names() if m != machine),
        key=lambda m: (-int(m.split("x", 1)[0]) if m.split("x", 1)[0].isdigit() else 0, m),
    )
    return ",".join([machine, *others])


class Worker:
    """One ``tools/replay_kernel.py`` process: one kernel that executes notebook after notebook."""

    def __init__(self, log: Path) -> None:
        env = {**os.environ, "COURSE_REPLAY": "1", "COURSE_QUICK": "1", "PYTHONPATH": str(ROOT)}
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        with log.open("w") as stderr:  # the kernel's own chatter, read when something fails
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "tools" / "replay_kernel.py"), str(ROOT / "notebooks")],
                env=env,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )

    def execute(
        self, machine: str, notebook: Path, index_out: Path
    ) -> tuple[str, str, int, float, str]:
        """Execute one notebook in replay for one machine; (machine, notebook, exit code, s, log tail)."""
        item = {
            "notebook": str(notebook),
            "out": str(ROOT / "build" / "replay" / machine / notebook.name),
            "env": {
                "COURSE_REPLAY_MACHINE": preference(machine),
                "COURSE_INDEX_OUT": str(index_out),
            },
        }
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(item) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            return (
                machine,
                notebook.stem,
                1,
                0.0,
                f"the replay kernel's process ended early:\n{_tail(self.log)}",
            )
        result = json.loads(line)
        return machine, notebook.stem, result["code"], result["seconds"], result["tail"]

    def close(self) -> None:
        """Close its input (the kernel shuts down) and wait, killing it after TIMEOUT_S."""
        assert self.process.stdin
        self.process.stdin.close()
        try:
            self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def replay(
    planned: list[tuple[str, Path]], jobs: int, folder: Path
) -> Iterator[tuple[str, str, int, float, str]]:
    """Replay every planned (machine, notebook) with ``jobs`` kernels; results as they finish,
    the longest notebooks first so that the kernels end together."""
    todo: queue.Queue[tuple[str, Path]] = queue.Queue()
    for pair in sorted(planned, key=lambda p: -p[1].stat().st_size):
        todo.put(pair)
    results: queue.Queue[tuple[str, str, int, float, str] | None] = queue.Queue()

    def work(number: int) -> None:
        worker = Worker(ROOT / "build" / "replay" / f"kernel-{number}.log")
        try:
            while True:
                try:
                    machine, nb = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results.put(worker.execute(machine, nb, folder / f"{machine}-{nb.stem}.jsonl"))
                except (OSError, ValueError) as err:  # the worker's process broke: report, go on
                    results.put(
                        (machine, nb.stem, 1, 0.0, f"the replay kernel's process failed: {err}")
                    )
        finally:
            worker.close()
            results.put(None)

    threads = [
        threading.Thread(target=work, args=(i,), daemon=True)
        for i in range(max(1, min(jobs, len(planned))))
    ]
    for thread in threads:
        thread.start()
    running = len(threads)
    while running:
        result = results.get(timeout=TIMEOUT_S * len(planned))
        if result is None:
            running -= 1
        else:
            yield result


def claim_rows(folder: Path, planned: list[tuple[str, Path]]) -> list[dict]:
    """The verdicts and checks each replay wrote, keeping those measured on the machine it replayed."""
    rows = []
    for machine, nb in planned:
        path = folder / f"{machine}-{nb.stem}.jsonl"
        if path.exists():
            rows += [
                row
                for row in map(json.loads, path.read_text().splitlines())
                if row["machine"] == machine
            ]
    return rows


def cell_of(notebook: Path, text: str) -> str:
    """``cell N`` of the executed ``notebook`` whose output shows ``text`` (or ``cell ?``)."""
    if notebook.exists():
        try:
            cells = json.loads(notebook.read_text())["cells"]
        except json.JSONDecodeError:
            return f"cell ? ({notebook} is not whole: is another run writing build/replay?)"
        for i, cell in enumerate(cells):
            shown = json.dumps(cell.get("outputs", []), ensure_ascii=False)
            if json.dumps(text, ensure_ascii=False)[1:-1] in shown:
                return f"cell {i}"
    return "cell ?"


def untrue(rows: list[dict], executed: Path) -> list[str]:
    """Every check that does not hold, every verdict that disagrees with its own numbers, and every
    verdict stated outside the claims table (``claims.stated``) that differs from the table's row
    of that claim, as a line naming notebook, cell, machine and values; ``executed`` holds
    ``<machine>/<notebook>.ipynb``."""
    problems = []
    table = {
        (r["machine"], r["notebook"], r["name"]): r["verdict"] for r in rows if r["kind"] == "claim"
    }
    for row in rows:
        where = (
            f"{row['notebook']} {cell_of(executed / row['machine'] / (row['notebook'] + '.ipynb'), row['name'])} "
            f"on {row['machine']}"
        )
        if row["kind"] == "check" and row["verdict"] != claims.HOLDS:
            problems.append(f'{where}: "{row["name"]}" does not hold: {row["measured"]}')
        recomputed = claims.verdict_of(row) if row["kind"] == "claim" else None
        if recomputed is not None and recomputed != row["verdict"]:
            problems.append(
                f'{where}: the verdict "{row["verdict"]}" of "{row["name"]}" disagrees with '
                f"{row['value']} ± {row['spread']} against {row['threshold']} ({recomputed})"
            )
        said = table.get((row["machine"], row["notebook"], row["name"]), "no row")
        if row["kind"] == "stated" and row["verdict"] != said:
            problems.append(
                f'{row["notebook"]} on {row["machine"]}: a sentence says "{row["name"]}" '
                f"{row['verdict']}, the claims table: {said}"
            )
    return problems


def failed_marks(planned: list[tuple[str, Path]]) -> list[str]:
    """Every check shown failed (✗) in an executed replay, including those of parts that run live
    here (gloo) and so write no index row, as a line naming notebook, cell and machine."""
    problems = []
    for machine, nb in planned:
        path = ROOT / "build" / "replay" / machine / nb.name
        if not path.exists():
            continue
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            for output in cell.get("outputs", []):
                shown = "".join(output.get("data", {}).get("text/markdown", ""))
                problems += [
                    f"{nb.stem} cell {i} on {machine}: {line.strip()}"
                    for line in shown.splitlines()
                    if claims.FAILED_CHECK in line
                ]
    return problems


def differences(old: list[dict], new: list[dict]) -> list[str]:
    """Rows in one list and not the other, as short lines."""

    def key(row: dict) -> str:
        return json.dumps(row, sort_keys=True)

    gone = {key(r) for r in old} - {key(r) for r in new}
    added = {key(r) for r in new} - {key(r) for r in old}
    return [f"- {k[:300]}" for k in sorted(gone)] + [f"+ {k[:300]}" for k in sorted(added)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite results/index.jsonl")
    parser.add_argument(
        "--jobs",
        type=int,
        default=3,
        help="notebooks executed at once (3 on two cores: 06 spends most of its time waiting)",
    )
    parser.add_argument(
        "--notebook",
        action="append",
        default=[],
        metavar="STEM",
        help="replay only this notebook (repeatable); no index check or write",
    )
    args = parser.parse_args()
    planned = [(m, nb) for m, nb in jobs() if not args.notebook or nb.stem in args.notebook]
    if args.notebook and args.write:
        parser.error(
            "--write rebuilds the whole index: replay every notebook (leave out --notebook)"
        )
    if not planned:
        parser.error(f"no recorded notebook matches {args.notebook}")
    problems = [
        p
        for p in records.check_recordings(sorted((ROOT / "notebooks").glob("*.ipynb")))
        if not args.notebook or p.notebook in args.notebook
    ]
    if problems:  # what the guard catches: nothing is replayed from a recording it refuses
        print("the recordings do not pass the guard; nothing was replayed:")
        print(records.format_problems(problems))
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for machine, stem, code, seconds, tail in replay(planned, args.jobs, Path(tmp)):
            print(
                f"{'replayed' if code == 0 else 'FAILED  '} {stem} on {machine} in {seconds:.1f} s",
                flush=True,
            )
            if code:
                failed += 1
                print(tail)
        rows = records.figure_rows() + claim_rows(Path(tmp), planned)
    stated = [r for r in rows if r["kind"] == "stated"]  # checked, not indexed
    rows = [r for r in rows if r["kind"] != "stated"]
    if failed:
        print(f"{failed} notebook(s) failed in replay; the index is left as it was")
        return 1
    problems = untrue(rows + stated, ROOT / "build" / "replay") + failed_marks(planned)
    if problems:
        print(
            f"{len(problems)} sentence(s) or verdict(s) contradict the numbers; the index is left as it was:"
        )
        print("\n".join(problems))
        return 1
    print(
        f"every check and verdict agrees with its numbers on {len({m for m, _ in planned})} machine(s)"
    )
    if args.notebook:
        return 0
    if args.write:
        print(f"wrote {records.write_index(rows)} ({len(rows)} rows)")
        return 0
    diff = differences(records.read_index(), json.loads(json.dumps(rows)))
    if diff:
        print(f"results/index.jsonl is out of date ({len(diff)} rows differ); run `make index`:")
        print("\n".join(diff[:40]))
        return 1
    print(f"results/index.jsonl is current ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
