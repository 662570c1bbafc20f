"""No typed numbers in the notebooks' markdown or the lesson modules' sentences (issue 35, item 2).

A number in a markdown cell (outside code, LaTeX and links) is allowed when it is:
- a STRUCTURE number: a section, notebook, exercise, cell or list index, a GPU or rank index;
- a parameter: its value, or its value with the unit normalised (bytes, seconds, elements, a
  fraction for %), is a numeric constant of the notebook's code cells (folded: ``64 * MiB``) or a
  module-level constant of the lesson modules the notebook imports; a size in bytes may also be
  such a value (or the product of two) times an element size. Counts "N of M" and ratios "1.4x"
  are measurements and never pass as parameters;
- a fact of a source: its sentence names the source (SOURCES), in the same clause (between
  semicolons or colons);
- one of the declared CONSTANTS, each with its reason.
Everything else, a measured time, rate, share, ratio or count typed by hand, is reported.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from itertools import combinations_with_replacement
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Allowed:
    """Numbers inside a match of ``pattern`` (a regex, case-insensitive) are allowed, for ``reason``."""

    pattern: str
    reason: str


STRUCTURE = [
    Allowed(r"^\s*#+\s*\d+\b", "a heading's notebook or section number"),
    Allowed(r"^\s*(?:\d+\.|\*\*\d+\.\*\*)(?=\s)", "a numbered list item or exercise"),
    Allowed(
        r"\b(?:sections?|notebooks?|exercises?|cells?|rows?|seeds?|steps?|requirements?|lines?)"
        r"\s+\(?\d+\)?(?:\s*(?:,|-|and|or|to)\s*\(?\d+\)?)*",
        "a reference to a section, notebook, exercise, cell, row, seed, line or requirement",
    ),
    Allowed(r"(?:^|[\s(*])\(\d+\)", "an item of an enumeration in a sentence, (1)"),
    Allowed(
        r"\b(?:GPUs?|ranks?|cuda:|GPU ?)\s*\d+(?:\s*(?:,|and|or|->|to)\s*(?:GPU\s*|cuda:)?\d+)*",
        "a GPU or rank index",
    ),
    Allowed(r"\bpart \d+\b", "a part of a source document"),
]

SOURCES = [
    r"tutorial",
    r"forum thread",
    r"the thread",
    r"the answer",
    r"streams article",
    r"the article",
    r"blog post",
    r"the source",
    r"nccl-tests",
    r"nvbandwidth",
    r"bandwidthTest",
    r"p2pBandwidthLatencyTest",
    r"CUDA documents",
    r"CUDA programming guide",
    r"PCIe \d\.\d spec",
    r"NVIDIA's description",
    r"PyTorch documents",
]

CONSTANTS = [
    Allowed(
        r"\b1 means fully hidden, 0 not at all", "the overlap ratio's definition: its two ends"
    ),
    Allowed(
        r"\(1: the shorter is entirely hidden; 0:", "the overlap ratio's definition: its two ends"
    ),
    Allowed(r"break-even at 1", "a ratio of two times is even at 1, by definition"),
    Allowed(
        r"\bbetween 1 and\s+2\b|\bbetween 1 \(slower\)\s+and 2\b",
        "the claim's 'up to twice as slow' as a range",
    ),
    Allowed(
        r"\bbelow 1\b|\babove 2\b|\bat 2\b|\bis 2 when\b",
        "the bounds of 'up to twice as slow' and of a speed-up",
    ),
    Allowed(r"\b10\^9\b", "decimal GB: 10^9 bytes, by definition"),
    Allowed(r"\b2 x size\b", "a copy within one GPU reads and writes: twice its size"),
    Allowed(
        r"\b2\(\*n\*-1\)/\*n\*|\(\*n\*-1\)/\*n\*|factor 1\b", "busbw's factors, derived in the cell"
    ),
    Allowed(r"\b2 n³", "the operation count of a square matmul"),
    Allowed(r"\b1 KiB to 1 GiB\b|\b1 KiB\b", "the sweep's size range, named by its ends"),
    Allowed(r"\bNV#|# NVLinks", "nvidia-smi's notation"),
    Allowed(r"\b0 to\s+`", "ranks are numbered from 0"),
    Allowed(
        r"\b(?:8|16) ranks?\b|\beight GPUs\b|\b(?:two|2) (?:8|eight)-GPU machines\b",
        "a worked example's machines",
    ),
]

UNITS = {
    "B": 1,
    "bytes": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "KB": 1e3,
    "kB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "Mi": 2**20,
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1,
    "seconds": 1,
    "second": 1,
    "%": 0.01,
}
DECIMAL = {"KB", "kB", "MB", "GB", "TB"}  # written rounded: compared to the precision written
MEASURED = ("x", "×", "GB/s", "TB/s", "TFLOP/s")  # forms that are never a parameter
ELEMENT_BYTES = (1, 2, 4, 8)

NUMBER = re.compile(
    r"(?<![\w.^/#\\])(?P<num>\d+(?:\.\d+)?(?:\^\d+)?)"
    r"(?:\s?(?P<unit>KiB|MiB|GiB|TiB|KB|kB|MB|GB|TB|GB/s|TB/s|TFLOP/s|B|bytes|Mi|ns|us|µs|ms|"
    r"seconds|second|s|%|x|×)(?![\w/])|(?![\w^]|\.\d))"
)
OUT_OF = re.compile(r"\b\d+\s+(?:out\s+)?of\s+\d+\b")
MASKED = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]+\$|\]\([^)]*\)|https?://\S+", re.S)
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z*(`\"'])|\n\s*\n|\n(?=\s*(?:[-|]|\d+\.|\*\*\d))")


@dataclass(frozen=True)
class Typed:
    """A number that no rule allows: where it is and the sentence it is in."""

    notebook: str
    cell: int
    text: str
    sentence: str

    def __str__(self) -> str:
        return f"{self.notebook}, cell {self.cell}: {self.text!r} in: {self.sentence}"


def _fold(node: ast.AST, names: dict[str, float]) -> float | None:
    """The value of a constant expression (numbers, names bound to numbers, + - * / // **)."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _fold(node.operand, names)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp):
        left, right = _fold(node.left, names), _fold(node.right, names)
        if left is None or right is None:
            return None
        ops = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        if type(node.op) in ops:
            return ops[type(node.op)]
        if isinstance(node.op, ast.Pow) and abs(right) < 64:
            return float(left**right)
        if isinstance(node.op, (ast.Div, ast.FloorDiv)) and right:
            return left / right if isinstance(node.op, ast.Div) else float(left // right)
    return None


def code_values(sources: list[str]) -> set[float]:
    """Every numeric constant and folded constant expression in these Python sources."""
    values: set[float] = set()
    names: dict[str, float] = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a cell with IPython magics: its numbers are not parameters
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                value = _fold(node.value, names)
                if value is not None:
                    names[node.targets[0].id] = value
        for node in ast.walk(tree):
            value = _fold(node, names) if isinstance(node, ast.expr) else None
            if value is not None:
                values.add(abs(value))
    return values


def lesson_constants(code: list[str]) -> set[float]:
    """Module-level UPPER_CASE numeric constants of the lesson modules these cells import."""
    modules = set()
    for source in code:
        for match in re.finditer(r"^from helpers\.lessons import (.+)$", source, re.M):
            modules.update(name.strip() for name in match.group(1).split(","))
    sources = []
    for module in sorted(modules):
        package = ROOT / "helpers" / "lessons" / module
        files = sorted(package.glob("*.py")) if package.is_dir() else [package.with_suffix(".py")]
        for file in files:
            if file.exists():
                tree = ast.parse(file.read_text())
                sources += [
                    ast.unparse(n)
                    for n in tree.body
                    if isinstance(n, ast.Assign) and _is_constant_name(n)
                ]
    return code_values(sources)


def _is_constant_name(node: ast.Assign) -> bool:
    return all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)


def _value(num: str) -> float:
    if "^" in num:
        base, power = num.split("^")
        return float(base) ** float(power)
    return float(num)


def _is_parameter(num: str, unit: str | None, params: set[float], products: set[float]) -> bool:
    value = _value(num)
    if any(_same(value, p) for p in params):
        return True
    if unit is None or unit not in UNITS:
        return False
    scaled = value * UNITS[unit]
    if unit in DECIMAL or unit in ("B", "bytes", "KiB", "MiB", "GiB", "TiB"):
        decimals = len(num.split(".")[1]) if "." in num else 0
        tolerance = 0.5 * 10**-decimals * UNITS[unit] if unit in DECIMAL else 0.0
        return any(
            abs(scaled - p * k) <= tolerance + 1e-9 * scaled
            for p in products
            for k in ELEMENT_BYTES
        )
    return any(_same(scaled, p) for p in params)


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _spans(patterns: list[str], text: str, flags: int = re.I | re.M) -> list[tuple[int, int]]:
    return [m.span() for p in patterns for m in re.finditer(p, text, flags)]


def _inside(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in spans)


def _sentences(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for match in SENTENCE_END.finditer(text):
        bounds.append((start, match.start()))
        start = match.end()
    bounds.append((start, len(text)))
    return bounds


def typed_in_markdown(
    text: str, params: set[float], notebook: str = "", cell: int = 0
) -> list[Typed]:
    """The numbers of one markdown cell that no rule allows."""
    masked = [m.span() for m in MASKED.finditer(text)]
    allowed = _spans([a.pattern for a in STRUCTURE + CONSTANTS], text)
    measured = _spans([OUT_OF.pattern], text)
    products = params | {
        a * b for a, b in combinations_with_replacement(params, 2) if a >= 100 and b >= 100
    }
    sentences = _sentences(text)
    found = []
    for match in NUMBER.finditer(text):
        span = match.span("num")
        if _inside(span, masked) or _inside(span, allowed):
            continue
        start, end = next(s for s in sentences if s[0] <= span[0] <= s[1])
        sentence = " ".join(text[start:end].split())
        if any(
            re.search(source, _clause(text[start:end], span[0] - start), re.I) for source in SOURCES
        ):
            continue
        unit = match.group("unit") or _range_unit(text, match.end())
        is_measured = _inside(span, measured) or unit in MEASURED
        if not is_measured and _is_parameter(match.group("num"), unit, params, products):
            continue
        found.append(Typed(notebook, cell, match.group(0).strip(), sentence))
    return found


def _clause(sentence: str, at: int) -> str:
    """The part of a sentence around position ``at`` between semicolons or colons."""
    starts = [0] + [m.end() for m in re.finditer(r"[;:]\s", sentence) if m.end() <= at]
    ends = [m.start() for m in re.finditer(r"[;:]\s", sentence) if m.start() >= at] + [
        len(sentence)
    ]
    return sentence[max(starts) : min(ends)]


def _range_unit(text: str, end: int) -> str | None:
    """The unit of a range's second end, for its first: '24-49 GB/s', '1 to 2 ms'."""
    following = re.match(r"\s*(?:-|–|to)\s*", text[end:])
    if not following:
        return None
    match = NUMBER.match(text, end + following.end())
    return match.group("unit") if match else None


def typed_in_notebook(path: Path) -> list[Typed]:
    """The numbers of a notebook's markdown cells that no rule allows."""
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    code = [c for c in code if not c.startswith("# Set-up")]  # the install cell has no parameters
    params = code_values(code) | lesson_constants(code)
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            found += typed_in_markdown("".join(cell["source"]), params, path.name, index)
    return found


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _notebook(tmp_path: Path, code: str, markdown: str) -> Path:
    cells = [
        {
            "cell_type": "code",
            "source": code,
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        },
        {"cell_type": "markdown", "source": markdown, "metadata": {}},
    ]
    path = tmp_path / "99_synthetic.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    return path


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_markdown_types_no_measured_number(notebook: Path) -> None:
    typed = typed_in_notebook(notebook)
    assert not typed, (
        "numbers typed in the markdown that are not a parameter, a source's fact with the source named "
        "in the same sentence, or a declared constant: delete them, let the 'what we see' output say "
        "them, or name their source (the rule: this file's docstring):\n"
        + "\n".join(map(str, typed))
    )


CODE = """
MiB = 2**20
run = records.run_or_replay(copy, params=dict(nbytes=config.pick(full=64 * MiB, quick=2**24),
                                              count=1000, hold_ms=10.0, chunk=2**26))
"""


def test_a_synthetic_notebook_fails_on_each_measured_number(tmp_path: Path) -> None:
    markdown = (
        "## 2. A copy\n\n"
        "**What we expect**: a 64 MiB copy (16 MiB in quick mode) of 1000 tensors, with a 10 ms hold "
        "and chunks of 64 MiB, as section 3 explains.\n"
        "The link is PCIe gen 5 x16 (63 GB/s raw per direction, PCIe 5.0 spec). "
        "The tutorial uses 100 repetitions. "
        "Code is not read: `torch.empty(7 * 3)` and $e^{42}$.\n\n"
        "**Why**: the copy took 4.2 ms and ran at 24-49 GB/s; the events spread 6.8% against 3.5%, "
        "a ratio of 1.38x; 10 of 10 results were wrong; a 48 MiB copy was slow."
    )
    typed = typed_in_notebook(_notebook(tmp_path, CODE, markdown))
    assert [t.text for t in typed] == [
        "4.2 ms",
        "24",
        "49 GB/s",
        "6.8%",
        "3.5%",
        "1.38x",
        "10",
        "10",
        "48 MiB",
    ]
    assert all(t.notebook == "99_synthetic.ipynb" and t.cell == 1 for t in typed)
    assert typed[0].sentence.startswith("**Why**: the copy took 4.2 ms")
    assert "99_synthetic.ipynb, cell 1: '4.2 ms' in: **Why**" in str(typed[0])


def test_a_source_must_be_named_in_the_same_sentence(tmp_path: Path) -> None:
    markdown = (
        "The tutorial copies a tensor. It takes 100 repetitions. The tutorial uses 100 repetitions."
    )
    typed = typed_in_notebook(_notebook(tmp_path, CODE, markdown))
    assert [t.sentence for t in typed] == ["It takes 100 repetitions."]


def test_a_count_of_results_never_passes_as_a_parameter(tmp_path: Path) -> None:
    """1000 is a parameter, but "1000 of 1000" is a count of what happened."""
    typed = typed_in_notebook(_notebook(tmp_path, CODE, "1000 tensors; 1000 of 1000 were right."))
    assert [t.text for t in typed] == ["1000", "1000"]


def test_the_failure_names_each_number_with_its_notebook_cell_and_sentence(tmp_path: Path) -> None:
    typed = typed_in_notebook(_notebook(tmp_path, CODE, "A 64 MiB copy. It took 4.2 ms."))
    assert [str(t) for t in typed] == ["99_synthetic.ipynb, cell 1: '4.2 ms' in: It took 4.2 ms."]
    assert not typed_in_notebook(_notebook(tmp_path, CODE, "A 64 MiB copy."))


def test_every_declared_constant_has_a_reason_and_is_used() -> None:
    """The allow-list stays small: an entry no notebook needs any more is removed."""
    text = "\n".join(
        "".join(c["source"])
        for p in NOTEBOOKS
        for c in json.loads(p.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )
    for allowed in STRUCTURE + CONSTANTS:
        assert allowed.reason.strip(), allowed
    unused = [a for a in CONSTANTS if not re.search(a.pattern, text, re.I | re.M)]
    assert not unused, f"declared constants no notebook's markdown uses: {unused}"


LESSONS = sorted((ROOT / "helpers" / "lessons").rglob("*.py"))


def sentence_templates(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every f-string and every string with a space in a module, docstrings
    and format specs left out; a formatted value reads as a word, never as a number."""
    tree = ast.parse(source)
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            skip.add(id(node.format_spec))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            parts = (v.value if isinstance(v, ast.Constant) else " value " for v in node.values)
            found.append((node.lineno, "".join(parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value:
            found.append((node.lineno, node.value))
    return found


def typed_in_module(path: Path) -> list[Typed]:
    """The numbers of a lesson module's sentences that no rule allows; its own numeric
    constants and literals are its parameters."""
    source = path.read_text()
    params = code_values([source])
    name = str(path.relative_to(ROOT))
    return [
        t
        for line, text in sentence_templates(source)
        for t in typed_in_markdown(text, params, name, line)
    ]


@pytest.mark.parametrize(
    "module", LESSONS, ids=lambda p: str(p.relative_to(ROOT / "helpers" / "lessons"))
)
def test_the_sentence_templates_type_no_measured_number(module: Path) -> None:
    typed = typed_in_module(module)
    assert not typed, (
        "numbers typed in sentences (line: number): compute them from the run\n"
        + "\n".join(map(str, typed))
    )


def test_a_sentence_template_fails_on_a_typed_count_and_passes_a_computed_one(
    tmp_path: Path,
) -> None:
    module = tmp_path / "lesson.py"
    module.write_text(
        "SIZE = 64 * 2**20\n"
        "def see(f):\n"
        '    """Says 3 things."""\n'
        '    a = f"{f.wrong} mismatches over 7 collectives; a 64 MiB copy; {f.ms:8.2f} ms"\n'
        '    b = f"over {len(f.calls)} collectives, `x * 2 + 1`, {f.n:>9}"\n'
        '    return a, b, "took 4.2 ms", "GPU0"\n'
    )
    found = [
        t.text
        for line, text in sentence_templates(module.read_text())
        for t in typed_in_markdown(text, code_values([module.read_text()]))  # the markdown's rules
    ]
    assert found == ["7", "4.2 ms"]
