"""Rules of the helpers' code that a reader would otherwise have to check by eye."""

import ast
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
