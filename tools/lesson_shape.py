"""How much of each notebook is the lesson: its code lines, the experiments' share of them, and
what else is left in it.

    python tools/lesson_shape.py            # the table, one row per notebook
    python tools/lesson_shape.py --check    # exit 1 naming every notebook over its budget

Counted as issue 23 counts them: code lines of every code cell but the install cell (the first),
without blank lines and comment lines. *Experiments* are the functions passed to
``records.run_or_replay`` and the notebook functions they call (as ``records`` fingerprints them);
every other top-level ``def`` is an *other function*; the longest other cell is the longest
stretch of code in one cell that is not an experiment's definition.

The budgets (``BUDGETS``) are the shape of a lesson in CONTRIBUTING.md: the PyTorch being taught
is most of a notebook's code, everything else is a short call into the package. tests/test_project.py
runs ``--check``'s logic.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import records  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Budget:
    """The most a notebook may hold: code lines, other functions, lines of one other cell; the
    least share of its code lines that are experiments."""

    lines: int
    share: float
    functions: int
    cell: int


# 00 teaches how the course runs (one small experiment); 01-06 each teach one subject.
BUDGETS = {"00": Budget(lines=150, share=0.0, functions=2, cell=15)}
DEFAULT_BUDGET = Budget(lines=450, share=0.55, functions=2, cell=15)
FORBIDDEN = ("ctypes", "calls_for(")  # hardware queries and hand sizing belong to the package
# What stays in a notebook only until a machine of the kind that recorded it can record it again:
# taking it out changes the experiments' fingerprints, and no such machine could remake them.
AWAITING_RERECORD = {
    "05_device_to_device": (
        "calls_for(",
        "05's peer copies need two GPUs; none was lent when the other notebooks "
        "moved to target_s= and hold_us='auto' (issue 23)",
    ),
}


@dataclasses.dataclass
class Shape:
    """What one notebook's code is made of (see the module's docstring for how it is counted)."""

    notebook: str
    lines: int
    experiment_lines: int
    other_functions: list[str]
    longest_other_cell: int
    forbidden: list[str]

    @property
    def share(self) -> float:
        return self.experiment_lines / self.lines if self.lines else 0.0

    def problems(self) -> list[str]:
        """What exceeds the notebook's budget, in words."""
        budget = BUDGETS.get(self.notebook[:2], DEFAULT_BUDGET)
        found = []
        if self.lines > budget.lines:
            found.append(f"{self.lines} code lines (at most {budget.lines})")
        if self.share < budget.share:
            found.append(
                f"experiments are {self.share:.0%} of the code (at least {budget.share:.0%})"
            )
        if len(self.other_functions) > budget.functions:
            found.append(
                f"{len(self.other_functions)} top-level functions that are not experiments "
                f"(at most {budget.functions}): {', '.join(self.other_functions)}"
            )
        if self.longest_other_cell > budget.cell:
            found.append(
                f"a cell of {self.longest_other_cell} lines that is not an experiment "
                f"(at most {budget.cell})"
            )
        waiting = AWAITING_RERECORD.get(self.notebook, ("", ""))[0]
        found += [
            f"uses {word.rstrip('(')} (move it into the package)"
            for word in self.forbidden
            if word != waiting
        ]
        return found


def _code_lines(lines: list[str]) -> int:
    return sum(
        1 for line in lines if line.strip() and not line.lstrip().startswith(("#", "%", "!"))
    )


def _experiment_functions(path: Path, functions: dict[str, str]) -> set[str]:
    """The experiments of a notebook and every notebook function they reach."""
    found = {e.function for e in records.experiments_in_notebook(path).values()}
    todo = list(found)
    while todo:
        source = functions.get(todo.pop())
        if source is None:
            continue
        for name in records.free_names(ast.parse(source).body[0]):
            if name in functions and name not in found:
                found.add(name)
                todo.append(name)
    return found & set(functions)


def shape_of(path: Path) -> Shape:
    """Count one notebook's code (the first code cell, the install cell, is left out)."""
    cells = [
        ("".join(c["source"]))
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    cells = cells[1:]
    parsed = []
    functions: dict[str, str] = {}
    for source in cells:
        text = "\n".join(
            line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        tree = ast.parse(text)
        parsed.append((text, tree))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = ast.get_source_segment(text, node) or ""
    experiments = _experiment_functions(path, functions)
    lines = experiment_lines = longest = 0
    others: list[str] = []
    for text, tree in parsed:
        all_lines = text.splitlines()
        lines += _code_lines(all_lines)
        inside: set[int] = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                span = range(
                    node.lineno - 1 - len(node.decorator_list), node.end_lineno or node.lineno
                )
                if node.name in experiments:
                    experiment_lines += _code_lines([all_lines[i] for i in span])
                    inside.update(span)
                elif node.name not in others:
                    others.append(node.name)
        longest = max(
            longest, _code_lines([line for i, line in enumerate(all_lines) if i not in inside])
        )
    code = "\n".join(cells)
    return Shape(
        path.stem, lines, experiment_lines, others, longest, [w for w in FORBIDDEN if w in code]
    )


def table(paths: list[Path]) -> str:
    """The shape of each notebook as a markdown table (the one issue 23 measured)."""
    rows = [
        "| notebook | code lines | experiments' share | other top-level functions | longest other cell |",
        "| --- | --- | --- | --- | --- |",
    ]
    for path in paths:
        s = shape_of(path)
        rows.append(
            f"| {s.notebook[:2]} | {s.lines} | {s.share:.0%} | {len(s.other_functions)} | {s.longest_other_cell} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 naming every notebook over its budget"
    )
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    print(table(paths))
    if not args.check:
        return 0
    for stem, (word, why) in AWAITING_RERECORD.items():
        print(f"{stem} keeps {word.rstrip('(')} until it is re-recorded: {why}")
    failed = [(p.stem, s) for p in paths if (s := shape_of(p).problems())]
    for stem, problems in failed:
        print(f"{stem}: " + "; ".join(problems), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
