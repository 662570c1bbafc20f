"""Read a notebook's own definitions into a test: the one loader the notebook tests share."""

import ast
import json
from pathlib import Path


def _binds(node: ast.stmt, names: set[str]) -> bool:
    """Whether ``node`` is a ``def`` of one of ``names`` or an assignment to one (tuples too)."""
    if isinstance(node, ast.FunctionDef):
        return node.name in names
    if not isinstance(node, ast.Assign):
        return False
    targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return any(isinstance(t, ast.Name) and t.id in names for t in targets)


def definitions(notebook: Path, names: set[str], namespace: dict) -> dict:
    """Execute, into ``namespace`` (the modules they need), the top-level functions and constants
    of ``notebook``'s code cells that ``names`` asks for; fail naming any it no longer defines."""
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.parse("".join(cell["source"])).body:
            if _binds(node, names):
                exec(compile(ast.Module([node], []), str(notebook), "exec"), namespace)
    missing = names - set(namespace)
    assert not missing, f"notebook {notebook.stem[:2]} no longer defines {sorted(missing)}"
    return namespace
