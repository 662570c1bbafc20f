"""Each claim's value in every recorded run of each machine kind, from the history of
results/index.jsonl: the evidence a verdict reads to answer "would another run on this kind say
the same?" (``claims.Comparison.borderline``).

    python tools/run_to_run.py           # write results/run_to_run.json (make index runs it)
    python tools/run_to_run.py --show    # print each claim's largest move between runs

Each committed version of the index, and the index here, holds one value per (machine, claim).
Values that repeat from one version to the next are one run (the same recording replayed); a
claim whose threshold, side or unit changed starts its history anew (it is another test), and so
does one whose experiment ran with other params (e.g. 02's DataLoader with 4 workers instead of
2), found from the recordings' headers in the git history. A change of the experiment's code
alone (a new fingerprint, same params) keeps the history: most are refactors that measure the
same thing. The file holds, per kind, the runs' ``values`` (a verdict is borderline where they lie
on both sides of the threshold), and per claim its ``band``: the most it moved on a kind run two
times or more (half the range, as a factor's log for a ratio or a measure with a unit), which a kind run once
borrows. A git clone without history (shallow) has only the committed file.
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
from helpers import claims  # noqa: E402  (a tool run as a script: the package is beside it)

INDEX = ROOT / "results" / "index.jsonl"
OUT = ROOT / "results" / "run_to_run.json"

Key = tuple[str, str, str]  # machine, notebook, claim
# A claim whose words changed keeps its runs: its old words -> its new words.
RENAMED = {
    "NCCL finds the fastest path between the GPUs (here NVLink): busbw close to the link's ceiling": (
        "NCCL finds the fastest path between the GPUs: busbw close to the link's ceiling"
    ),
}
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
            found[(row["machine"], row["notebook"], RENAMED.get(row["name"], row["name"]))] = row
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


def moved(values: list[float], threshold: float, unit: str) -> float:
    """Half the range of a claim's values over runs, in its scale (``claims.Comparison.distance``):
    a factor's log for a ratio or a measure with a unit, else a difference in its unit."""
    scale = claims.Comparison(claims.Value(threshold, unit=unit or ""), threshold, "above")
    distances = [scale.distance(v) for v in values]
    if max(distances) == min(distances):  # also all at -inf: a count at 0 every run
        return 0.0
    return (max(distances) - min(distances)) / 2


def evidence(runs: dict[Key, list[float]], tests: dict[Key, dict[str, Any]]) -> dict[str, Any]:
    """``{"kinds": {machine: {notebook: {claim: {"values", "threshold", "holds_if"}}}},
    "bands": {notebook: {claim: {"band", "machine", "threshold", "holds_if"}}}}``: each claim's
    value in every recorded run of each machine kind, and the most it moved (``moved``) on a kind
    run two times or more, under the test (threshold and side) of the newest index (``tests``)."""
    kinds: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    bands: dict[str, dict[str, dict[str, Any]]] = {}
    for key, values in sorted(runs.items()):
        machine, notebook, claim = key
        test = {"threshold": tests[key]["threshold"], "holds_if": tests[key]["holds_if"]}
        kinds.setdefault(machine, {}).setdefault(notebook, {})[claim] = {"values": values, **test}
        known = bands.setdefault(notebook, {}).get(claim)
        if len(values) >= 2 and (known is None or known["threshold"] == test["threshold"]):
            band = moved(values, test["threshold"], tests[key].get("unit") or "")
            if known is None or band > known["band"]:
                bands[notebook][claim] = {"band": band, "machine": machine, **test}
    bands = {notebook: found for notebook, found in bands.items() if found}
    return {"kinds": kinds, "bands": bands}


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
    result = evidence(runs_of(versions), versions[-1])
    if args.show:
        for notebook, found in result["bands"].items():
            for claim, band in found.items():
                values = result["kinds"][band["machine"]][notebook][claim]["values"]
                print(f"{band['band']:8.3g}  {band['machine']} {notebook}: {claim[:80]}  {values}")
        return 0
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    tmp.replace(OUT)
    several = sum(len(found) for found in result["bands"].values())
    print(f"wrote {OUT.relative_to(ROOT)}: {several} claims run two times or more on a kind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
