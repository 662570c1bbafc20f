"""Compare the claim verdicts of two results indexes: did a second run on the same kind of machine
call any claim the other way?

    python tools/compare_verdicts.py OLD.jsonl NEW.jsonl [--machine M ...]
    python tools/compare_verdicts.py --git REV [--machine M ...]   # OLD = results/index.jsonl at REV

A maintainer's check after a live run: `make gpu-all` on a lent machine, `make unpack`,
`make index`, then this against the index committed before. Every verdict that changed is listed
with its value ± spread and threshold on both sides; a claim that went from "holds" to "does not
hold here" (or back) on the same machine kind is a verdict the noise decides, not the hardware,
and the exit status is 1. Moves to or from "borderline here" are reported, not failed, and so is the
change of a claim whose threshold, side or unit changed ("retested": another test, not another run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers import claims  # noqa: E402  (a tool run as a script: the package is beside it)

HOLDS, DOES_NOT_HOLD = "holds", "does not hold here"


def claim_rows(lines: Iterable[str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``{(machine, notebook, claim): row}`` of an index's claim rows."""
    rows = {}
    for line in lines:
        if line.strip():
            row = json.loads(line)
            if row.get("kind") == "claim":
                rows[(row["machine"], row["notebook"], row["name"])] = row
    return rows


def _value(row: Mapping[str, Any]) -> str:
    if row.get("value") is None or isinstance(row.get("value"), bool):
        return str(row.get("value"))
    text = f"{row['value']:.4g}"
    if row.get("spread") is not None:
        text += f" ± {row['spread']:.2g}"
    if row.get("threshold") is not None:
        text += f" ({'>' if row.get('holds_if') == 'above' else '<'} {row['threshold']:.4g})"
    return text


def changes(
    old: Mapping[tuple[str, str, str], Mapping[str, Any]],
    new: Mapping[tuple[str, str, str], Mapping[str, Any]],
    machines: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Every claim present in both whose verdict differs, on the machines asked for (all if none):
    ``{machine, notebook, claim, old, new, flipped, redefined}``: ``flipped`` for holds <-> does not
    hold under the same test, ``redefined`` when the threshold, side or unit changed."""
    wanted = set(machines)
    found = []
    for key in sorted(old.keys() & new.keys()):
        if wanted and key[0] not in wanted:
            continue
        before, after = old[key]["verdict"], new[key]["verdict"]
        same_test = all(
            old[key].get(f) == new[key].get(f) for f in ("threshold", "holds_if", "unit")
        )
        if before != after:
            found.append(
                {
                    "machine": key[0],
                    "notebook": key[1],
                    "claim": key[2],
                    "old": f"{before}: {_value(old[key])}",
                    "new": f"{after}: {_value(new[key])}",
                    "flipped": same_test and {before, after} == {HOLDS, DOES_NOT_HOLD},
                    "redefined": not same_test,
                }
            )
    return found


def unforeseen(
    old: Mapping[tuple[str, str, str], Mapping[str, Any]],
    new: Mapping[tuple[str, str, str], Mapping[str, Any]],
    machines: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Flips the earlier evidence did not foresee: a claim the old index called "holds" or "does
    not hold here" (judged with the runs recorded then, and a kind run once with the band it
    borrowed) whose new value, by its own noise alone, says the opposite. The index itself never
    shows the flip, since the new run joins the runs it is judged by and they then lie on both
    sides. ``{machine, notebook, claim, old, new}`` for each."""
    wanted = set(machines)
    found = []
    for key in sorted(old.keys() & new.keys()):
        row, before = new[key], old[key]["verdict"]
        if (
            (wanted and key[0] not in wanted)
            or not isinstance(row.get("threshold"), (int, float))
            or any(old[key].get(f) != row.get(f) for f in ("threshold", "holds_if", "unit"))
        ):
            continue
        value = claims.Value(row["value"], row.get("spread") or 0.0, row.get("unit") or "")
        alone = claims.Comparison(value, row["threshold"], row["holds_if"]).verdict
        if {before, alone} == {HOLDS, DOES_NOT_HOLD}:
            found.append(
                {
                    "machine": key[0],
                    "notebook": key[1],
                    "claim": key[2],
                    "old": f"{before}: {_value(old[key])}",
                    "new": f"{alone}: {_value(row)}",
                }
            )
    return found


def report(found: list[dict[str, Any]], compared: int) -> str:
    """The changes as text, flipped ones first, then the count."""
    lines = []
    for c in sorted(found, key=lambda c: (not c["flipped"], c["machine"], c["notebook"])):
        mark = "FLIPPED" if c["flipped"] else "retested" if c.get("redefined") else "moved"
        lines.append(
            f"{mark:8} {c['machine']} {c['notebook']}: {c['claim'][:90]}\n"
            f"         {c['old']}  ->  {c['new']}"
        )
    flipped = sum(c["flipped"] for c in found)
    lines.append(
        f"{len(found)} of {compared} verdicts changed; {flipped} flipped between holds and does not hold"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("indexes", nargs="*", type=Path, help="OLD.jsonl NEW.jsonl")
    parser.add_argument(
        "--git", metavar="REV", help="compare results/index.jsonl at REV with the one here"
    )
    parser.add_argument(
        "--machine", action="append", default=[], help="only this machine (repeatable)"
    )
    args = parser.parse_args(argv)
    if args.git:
        shown = subprocess.run(
            ["git", "show", f"{args.git}:results/index.jsonl"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if shown.returncode:
            parser.error(f"git has no results/index.jsonl at {args.git}: {shown.stderr.strip()}")
        old_lines, new_lines = (
            shown.stdout.splitlines(),
            (ROOT / "results" / "index.jsonl").read_text().splitlines(),
        )
    elif len(args.indexes) == 2:
        old_lines, new_lines = (p.read_text().splitlines() for p in args.indexes)
    else:
        parser.error("give OLD.jsonl NEW.jsonl, or --git REV")
    old, new = claim_rows(old_lines), claim_rows(new_lines)
    found = changes(old, new, args.machine)
    compared = sum(1 for k in old.keys() & new.keys() if not args.machine or k[0] in args.machine)
    print(report(found, compared))
    surprises = unforeseen(old, new, args.machine)
    for c in surprises:
        print(
            f"unforeseen {c['machine']} {c['notebook']}: {c['claim'][:90]}\n"
            f"         {c['old']}  ->  {c['new']} (this run's own noise; the old verdict was not borderline)"
        )
    print(f"{len(surprises)} verdicts the earlier evidence did not foresee")
    return 1 if any(c["flipped"] for c in found) else 0


if __name__ == "__main__":
    sys.exit(main())
