"""Fingerprints: what a recording says about the code that made it."""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# Bump when the helpers change what an experiment measures (timing, trace, distributed):
# every recording then becomes stale and is re-recorded. tests/test_recordings_trust.py keeps
# MEASURING_CODE in step with that code, so a change to it is always a decision; after deciding,
# `make measuring-code` writes the new hash here.
# Last decision: timing, trace and distributed were made shorter (docstrings, one helper where two
# did the same) with the same calls in the same order, so no recording changes; a live run of all
# seven notebooks on 2xH200 after it checked that.
MEASURING_VERSION = 1
MEASURING_CODE = "e9a2dd9c28c60097"
_MEASURING_MODULES = ("timing", "trace", "distributed")


def definition_node(source: str) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(source))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            node.decorator_list = []
            return node
    raise ValueError("the source holds no function definition")


def _canonical(node: Any) -> str:
    """A syntax tree as text, leaving out empty and None fields: ``ast.dump`` differs between
    Python versions, and a recording must match its notebook on any of them."""
    if isinstance(node, ast.AST):
        fields = [
            f"{name}={_canonical(value)}"
            for name, value in ast.iter_fields(node)
            if value is not None and value != [] and name != "type_comment"
        ]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


def free_names(node: ast.AST) -> set[str]:
    """Names a function reads that it does not bind itself: its globals (and builtins)."""
    bound: set[str] = set()
    read: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (read if isinstance(sub.ctx, ast.Load) else bound).add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif (
            isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and sub is not node
        ):
            bound.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in sub.names)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            bound.add(sub.name)
    return read - bound


def fingerprint_source(source: str, reached: Mapping[str, str] | None = None) -> str:
    """Fingerprint of an experiment: its syntax tree (without decorators or comments), the
    trees of the notebook functions it reaches (``{name: source}``), and ``MEASURING_VERSION``."""
    parts = [f"measuring code v{MEASURING_VERSION}", _canonical(definition_node(source))]
    parts += [
        f"{name} = {_canonical(definition_node(src))}"
        for name, src in sorted((reached or {}).items())
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _source_of(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError) as err:
        raise TypeError(
            f"cannot read the source of {fn!r}: pass a function defined with def in a notebook or module"
        ) from err


def check_experiment(fn: Any) -> None:
    """Raise ``TypeError`` unless ``fn`` is a function defined with ``def`` at the top of a
    cell or module: anything else keeps part of what it does out of its source."""
    what = (
        "pass a function defined with def at the top of a notebook cell, and give it its "
        "values through params="
    )
    if isinstance(fn, functools.partial):
        raise TypeError(f"the experiment is a functools.partial of {fn.func.__name__}: {what}")
    if not inspect.isfunction(fn):
        raise TypeError(f"the experiment must be a function, got {type(fn).__name__}: {what}")
    if fn.__name__ == "<lambda>":
        raise TypeError(f"the experiment is a lambda: {what}")
    if fn.__closure__ or "<locals>" in fn.__qualname__:
        captured = ", ".join(fn.__code__.co_freevars) or "names of the function around it"
        raise TypeError(
            f"the experiment {fn.__name__} is defined inside another function and "
            f"captures {captured}: {what}"
        )


def _reached_functions(fn: Callable[..., Any]) -> dict[str, str]:
    """``{name: source}`` of the functions defined beside ``fn`` (same notebook or module) that
    it calls, directly or through each other."""
    reached: dict[str, str] = {}
    todo = [fn]
    while todo:
        current = todo.pop()
        for name in sorted(free_names(definition_node(_source_of(current)))):
            obj = current.__globals__.get(name)
            if (
                name in reached
                or obj is fn
                or not inspect.isfunction(obj)
                or obj.__module__ != fn.__module__
                or obj.__qualname__ != obj.__name__
            ):
                continue
            reached[name] = _source_of(obj)
            todo.append(obj)
    return reached


def fingerprint(fn: Callable[..., Any]) -> str:
    """Fingerprint of an experiment function as it is now."""
    check_experiment(fn)
    return fingerprint_source(_source_of(fn), _reached_functions(fn))


def _measuring_files() -> list[Path]:
    """``helpers/<name>.py`` of each measuring module, or every file of its package."""
    helpers = Path(__file__).resolve().parent.parent
    files: list[Path] = []
    for name in _MEASURING_MODULES:
        module = helpers / f"{name}.py"
        files += [module] if module.exists() else sorted((helpers / name).rglob("*.py"))
    return files


def measuring_code_hash() -> str:
    """Hash of the measuring modules' code, without docstrings and comments."""
    digest = hashlib.sha256()
    for path in _measuring_files():
        tree = ast.parse(path.read_text())
        nodes: list[Any] = list(ast.walk(tree))  # any node with a body: module, def, if, ...
        for node in nodes:
            body = getattr(node, "body", None)
            if (
                isinstance(body, list)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
        digest.update(_canonical(tree).encode())
    return digest.hexdigest()[:16]


def write_measuring_code(path: Path | None = None) -> str:
    """Set ``MEASURING_CODE`` in this file (or ``path``, a copy of it) to
    ``measuring_code_hash()``; return the new hash (``make measuring-code``)."""
    path = path or Path(__file__)
    new = measuring_code_hash()
    text, count = re.subn(
        r'^MEASURING_CODE = "[0-9a-f]*"$',
        f'MEASURING_CODE = "{new}"',
        path.read_text(),
        count=1,
        flags=re.MULTILINE,
    )
    if count != 1:
        raise RuntimeError(f'{path} has no line MEASURING_CODE = "..." to set')
    path.write_text(text)
    return new
