"""How far each claim's value moved between recorded runs of the same machine kind, from the
history of results/index.jsonl: the band a verdict must clear so that a second run does not flip it.

    python tools/run_to_run.py           # write results/run_to_run.json (make index runs it)
    python tools/run_to_run.py --show    # print the claims that moved, largest floor first

Each committed version of the index, and the index here, holds one value per (machine, claim).
Values that repeat from one version to the next are one run (the same recording replayed); a
claim whose threshold, side or unit changed starts its history anew (it is another test), and so
does one whose experiment ran with other params (e.g. 02's DataLoader with 4 workers instead of
2), found from the recordings' headers in the git history. A change of the experiment's code alone
(a new fingerprint, same params) keeps the history: most are refactors that measure the same thing. A
claim with two or more runs gets ``floor``: half the range of its values. ``claims.ClaimsTable``
widens a verdict's band to it (``claims.run_to_run_floor``), so a claim whose value moved 0.87 to
0.95 between two runs, against 0.9, is borderline there, not "holds" one day and "does not hold"
the next; and a run whose value lies on the other side of the threshold from a recorded one gets
at least the distance to it (``claims.run_to_run_floor``), so the extremes of the history are
borderline too. A git clone without history (shallow) has only the committed file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
INDEX = ROOT / "results" / "index.jsonl"
OUT = ROOT / "results" / "run_to_run.json"

Key = tuple[str, str, str]  # machine, notebook, claim
Recording = tuple[str, str, str, str]  # machine, notebook, experiment, date


def _test_of(row: dict[str, Any]) -> tuple[Any, ...]:
    return row["threshold"], row["holds_if"], row.get("unit"), row.get("params")


def header_params(text: str) -> tuple[str, str] | None:
    """``(date, params as sorted JSON)`` from a recording's JSON, or None where it has no header."""
    try:
        header = json.loads(text).get("header", {})
    except (json.JSONDecodeError, AttributeError):
        return None
    if "date" not in header or "params" not in header:
        return None
    return header["date"], json.dumps(header["params"], sort_keys=True)


def recording_params() -> dict[Recording, str]:
    """``{(machine, notebook, experiment, date): params}`` of every recording in the git history
    of results/ and in the working tree: which params a value came from."""
    found: dict[Recording, str] = {}

    def add(path: str, text: str) -> None:
        parts = Path(path).parts
        if len(parts) == 4 and parts[0] == "results" and parts[3].endswith(".json"):
            header = header_params(text)
            if header:
                found[(parts[1], parts[2], parts[3][:-5], header[0])] = header[1]

    log = subprocess.run(
        ["git", "log", "--format=%H", "--", "results"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    for rev in log:
        changed = subprocess.run(
            ["git", "diff-tree", "--no-commit-id", "--name-only", "-r", rev, "--", "results"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        for path in changed:
            if path.endswith(".json") and len(Path(path).parts) == 4:
                shown = subprocess.run(
                    ["git", "show", f"{rev}:{path}"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if shown.returncode == 0:
                    add(path, shown.stdout)
    from helpers import records

    for path in [
        p for folder in records.machine_folders(ROOT / "results") for p in folder.glob("*/*.json")
    ]:
        add(str(path.relative_to(ROOT)), path.read_text())
    return found


def numeric_claims(
    lines: Iterable[str], params: dict[Recording, str] | None = None
) -> dict[Key, dict[str, Any]]:
    """``{(machine, notebook, claim): row}`` of an index's claims decided on a number, each with
    its recording's ``params`` where ``params`` knows them."""
    found = {}
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        value = row.get("value")
        if (
            row.get("kind") == "claim"
            and row.get("threshold") is not None
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
        ):
            if params is not None:
                row["params"] = params.get(
                    (row["machine"], row["notebook"], row.get("experiment"), row.get("date"))
                )
            found[(row["machine"], row["notebook"], row["name"])] = row
    return found


def runs_of(versions: list[dict[Key, dict[str, Any]]]) -> dict[Key, list[float]]:
    """Each claim's values over the index's versions (oldest first), one per run: consecutive
    equal values are one run, and only the versions that test it as the newest does count."""
    newest = versions[-1] if versions else {}
    runs: dict[Key, list[float]] = {}
    for key, row in newest.items():
        values: list[float] = []
        for version in versions:
            old = version.get(key)
            if old is None or _test_of(old) != _test_of(row):
                continue
            if not values or values[-1] != old["value"]:
                values.append(float(old["value"]))
        runs[key] = values
    return runs


def floors(
    runs: dict[Key, list[float]], tests: dict[Key, dict[str, Any]] | None = None
) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``{machine: {notebook: {claim: {"floor", "runs", "values", "threshold", "holds_if"}}}}`` for
    claims with two runs or more; ``tests`` (the newest index's rows) gives each one's threshold and
    side, so a claim tested otherwise later gets no floor from this history."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for key, values in sorted(runs.items()):
        if len(values) >= 2:
            machine, notebook, claim = key
            row = (tests or {}).get(key, {})
            out.setdefault(machine, {}).setdefault(notebook, {})[claim] = {
                "floor": (max(values) - min(values)) / 2,
                "runs": len(values),
                "values": values,
                "threshold": row.get("threshold"),
                "holds_if": row.get("holds_if"),
            }
    return out


def history() -> list[list[str]]:
    """The lines of every committed version of results/index.jsonl, oldest first, then the file here."""
    revs = subprocess.run(
        ["git", "log", "--format=%H", "--", "results/index.jsonl"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    versions = []
    for rev in reversed(revs):
        shown = subprocess.run(
            ["git", "show", f"{rev}:results/index.jsonl"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if shown.returncode == 0:
            versions.append(shown.stdout.splitlines())
    return versions + [INDEX.read_text().splitlines()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--show", action="store_true", help="print the claims that moved instead of writing"
    )
    args = parser.parse_args(argv)
    params = recording_params()
    versions = [numeric_claims(lines, params) for lines in history()]
    result = floors(runs_of(versions), versions[-1])
    if args.show:
        moved = [
            (f["floor"], m, n, c, f["values"])
            for m, by in result.items()
            for n, cs in by.items()
            for c, f in cs.items()
        ]
        for floor, machine, notebook, claim, values in sorted(moved, reverse=True):
            print(f"{floor:10.4g}  {machine} {notebook}: {claim[:80]}  {values}")
        return 0
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    tmp.replace(OUT)
    print(
        f"wrote {OUT.relative_to(ROOT)}: {sum(len(cs) for by in result.values() for cs in by.values())} claims "
        "with two runs or more"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
