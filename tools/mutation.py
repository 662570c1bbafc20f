"""Mutation testing's numbers, for `make mutate`: pick a random sample of mutants, and score
what mutmut found (per module and for the package, with a 95% interval for a sample).

    python tools/mutation.py pick NAMES.txt N [--seed S]   # N mutant names, one per line
    python tools/mutation.py score RESULTS.txt [--total T --only SAMPLE.txt]
                                   # the score; T: mutants in the package; SAMPLE: the names drawn

NAMES.txt and RESULTS.txt are what `mutmut results --all true` prints (``name: status``). A
mutant "killed" or "timeout" was noticed by a test; "survived" and "no tests" were not; "not
checked" (not run) is left out. Run by the Makefile's `mutate` target.
"""

from __future__ import annotations

import argparse
import collections
import math
import random
import re
import sys
from pathlib import Path

LINE = re.compile(r"\s*((helpers\.[\w.]+?)\.x\w*__mutmut_\d+): (.+)$")
NOTICED = ("killed", "timeout")


def read(path: Path) -> list[tuple[str, str, str]]:
    """(mutant name, module, status) for each line of mutmut's results."""
    rows = []
    for line in path.read_text().splitlines():
        m = LINE.match(line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3).strip()))
    return rows


def pick(rows: list[tuple[str, str, str]], n: int, seed: int) -> list[str]:
    """``n`` mutant names drawn at random without replacement (all of them when fewer), sorted."""
    if n < 1:
        raise ValueError(f"the sample needs at least 1 mutant, got {n}")
    names = sorted(name for name, _, _ in rows)
    return sorted(random.Random(seed).sample(names, min(n, len(names))))


def wilson(caught: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a proportion ``caught / n`` (a share, 0 to 1)."""
    if n == 0:
        return 0.0, 1.0
    p = caught / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def score(rows: list[tuple[str, str, str]], total: int | None = None) -> list[str]:
    """Lines: each module's share of mutants noticed, then the package's (with its 95% interval
    and the sample's size against ``total`` when the run was a sample)."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for _, module, status in rows:
        if status != "not checked":
            counts[module][status] += 1
    lines, everything = [], collections.Counter[str]()
    for module in sorted(counts):
        c = counts[module]
        n, caught = sum(c.values()), sum(c[k] for k in NOTICED)
        everything.update(c)
        lines.append(f"{module:45} {caught / n:5.0%}  {caught} of {n} noticed; {n - caught} missed")
    n, caught = sum(everything.values()), sum(everything[k] for k in NOTICED)
    others = "".join(f"; {v} {k}" for k, v in sorted(everything.items()) if k not in NOTICED)
    line = f"mutation score {caught / max(n, 1):.0%}: {caught} of {n} mutants noticed{others}"
    if total is not None and n < total:
        low, high = wilson(caught, n)
        line += (
            f" (a random sample of {n} of the package's {total} mutants: "
            f"95% interval {low:.1%}-{high:.1%})"
        )
    return [*lines, line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pick", help="a random sample of mutant names")
    p.add_argument("names", type=Path)
    p.add_argument("n", type=int)
    p.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("score", help="the score per module and for the package")
    s.add_argument("results", type=Path)
    s.add_argument("--total", type=int, default=None)
    s.add_argument("--only", type=Path, default=None, help="score only these names (the sample)")
    args = parser.parse_args(argv)
    if args.command == "pick":
        print("\n".join(pick(read(args.names), args.n, args.seed)))
        return 0
    rows = read(args.results)
    if args.only is not None:  # a mutant run while setting up is not part of the sample
        drawn = set(args.only.read_text().split())
        rows = [row for row in rows if row[0] in drawn]
    print("\n".join(score(rows, args.total)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
