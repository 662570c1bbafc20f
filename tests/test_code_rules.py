"""Rules of the helpers' code that a reader would otherwise have to check by eye."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELPERS = sorted((ROOT / "helpers").rglob("*.py"))


def private_imports(source: str) -> list[str]:
    """``module._name`` for every ``from module import _name`` of ``source`` (a single leading
    underscore: a module's private name; dunders such as ``__version__`` are not private)."""
    return [
        f"{node.module or '.'}.{alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_no_private_name_is_imported_across_modules_of_helpers():
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in HELPERS
        for name in private_imports(path.read_text())
    ]
    assert not found, (
        "a private name crosses a module boundary; make it public where it is shared, or move it "
        "to the module that uses it:\n" + "\n".join(found)
    )


def test_the_private_import_finder_finds_one():
    source = "from .verdicts import _number, compare\nfrom . import __version__\nimport os\n"
    assert private_imports(source) == ["verdicts._number"]


# ------------------------------------------------ a claim's threshold is written once

NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\.?\d| ?[KMG]i?B\b)(?=x\b|%|[^\w.]|\.\D|\.$|$)")


def numbers_in_words(node: ast.AST) -> set[float]:
    """The numbers written in the literal text of a claim's words (``measured=``), format
    specifications (``:.2f``) and sizes ("from 1 MiB up") left out."""
    specs = {
        id(sub)
        for fv in ast.walk(node)
        if isinstance(fv, ast.FormattedValue) and fv.format_spec is not None
        for sub in ast.walk(fv.format_spec)
    }
    return {
        float(number)
        for sub in ast.walk(node)
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in specs
        for number in NUMBER.findall(sub.value)
    }


def literal_thresholds(node: ast.AST, assigned: dict[str, ast.expr]) -> set[float]:
    """The literal thresholds of the ``compare(value, threshold, ...)`` and ``within(value, low,
    high)`` calls a ``holds=`` expression makes, following the names it reads to the expressions
    the function assigned them."""
    found: set[float] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in assigned:
            found |= literal_thresholds(assigned.pop(sub.id), assigned)
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            bounds = {"compare": sub.args[1:2], "within": sub.args[1:3]}.get(name, [])
            bounds += [k.value for k in sub.keywords if name == "compare" and k.arg == "threshold"]
            found |= {
                float(b.value)
                for b in bounds
                if isinstance(b, ast.Constant) and isinstance(b.value, (int, float))
            }
    return found


def thresholds_written_twice(source: str, where: str = "") -> list[str]:
    """``where:line: numbers`` for each ``table.add(..., measured=..., holds=...)`` whose words
    repeat a literal threshold of its comparison."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        assigned = {
            target.id: node.value
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for call in ast.walk(function):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            words = {k.arg: k.value for k in call.keywords}
            if call.func.attr == "add" and {"measured", "holds"} <= words.keys():
                both = numbers_in_words(words["measured"]) & literal_thresholds(
                    words["holds"], dict(assigned)
                )
                if both:
                    found.append(f"{where}:{call.lineno}: {sorted(both)}")
    return found


def test_a_claims_threshold_is_written_once():
    found = [
        problem
        for path in sorted((ROOT / "helpers" / "lessons").rglob("*.py"))
        for problem in thresholds_written_twice(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not found, (
        "a claim's words repeat its threshold as a literal; format them from the comparison "
        "(comparison.in_words()) or from a named constant:\n" + "\n".join(found)
    )


def test_the_threshold_finder_finds_a_repeated_one_and_passes_a_derived_one():
    twice = (
        "def rows(table, run):\n"
        "    ratio = claims.compare(run.value, 1.1, holds_if='above')\n"
        "    table.add('fast', measured='counted effective from 1.10x (1 MiB)', holds=ratio)\n"
        "    table.add('ok', measured=f'{x:.2f} in 1 MiB', holds=claims.within(x, 0.5, 2))\n"
    )
    assert thresholds_written_twice(twice) == [":3: [1.1]"]
    once = "def rows(table, x):\n    c = compare(x, 0.5, holds_if='below')\n"
    once += "    table.add('c', measured=f'share ({c.in_words()})', holds=c)\n"
    assert thresholds_written_twice(once) == []
