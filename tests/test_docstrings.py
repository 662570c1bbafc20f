"""Every public function and class of the helpers says where the course teaches it, truthfully.

A docstring's "Taught in NN_name." sentence names one or more notebooks; each of them must use
the name in its code cells: ``module.name`` (the notebooks import ``from helpers import module``)
or ``from helpers.module import name``. A class also counts as used where the notebook calls a
helper whose return annotation names the class (``timing.cuda_events(...)`` hands over a
``Timing``). What no notebook calls says instead who calls it, in a "Used by ..." sentence
naming one or more of: ``module.function`` of the helpers (whose code refers to that very object:
each name is resolved through that module's own imports, so ``json.load`` is not ``records.load``),
"the command line (datamove)" (a module of ``helpers/cli/`` uses it), "the course's tools" (a script in
``tools/`` uses it), "the course's tests" (for the checks that exist for the test suite, such as
``records.check_recordings``). Those are checked as well; nothing else takes the place of a notebook.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from functools import cache
from pathlib import Path

import pytest

import helpers

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {path.stem: path for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
TAUGHT = re.compile(r"Taught in (.*?)(?:\.\s|\.$)", re.DOTALL)
USED_BY = re.compile(r"Used by (.*?)(?:\.\s|\.$)", re.DOTALL)
NOTEBOOK_NAME = re.compile(r"\b\d\d_[a-z0-9_]+")
HELPER_NAME = re.compile(r"\b([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)\b")
USERS_BY_PHRASE = {
    "the command line (datamove)": sorted((ROOT / "helpers" / "cli").glob("*.py")),
    "the lessons (helpers/lessons/)": sorted((ROOT / "helpers" / "lessons").glob("*.py")),
    "the course's tools": sorted((ROOT / "tools").glob("*.py")),
    "the course's tests": sorted((ROOT / "tests").glob("test_*.py")),
}


def _code_of(source: str) -> ast.Module:
    """A notebook cell's Python, with IPython's ``%magic`` and ``!shell`` lines left out."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _uses(tree: ast.AST) -> set[tuple[str, str]]:
    """``(module, name)`` for every ``module.name`` and ``from helpers.module import name`` in ``tree``
    (``module`` is the last part of a dotted module, so ``helpers.timing`` gives ``timing``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found.add((node.value.id, node.attr))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.update((node.module.rsplit(".", 1)[-1], alias.name) for alias in node.names)
    return found


@cache
def notebook_uses(stem: str) -> frozenset[tuple[str, str]]:
    cells = json.loads(NOTEBOOKS[stem].read_text())["cells"]
    return frozenset(
        use
        for cell in cells
        if cell["cell_type"] == "code"
        for use in _uses(_code_of("".join(cell["source"])))
    )


@cache
def file_uses(path: Path) -> frozenset[tuple[str, str]]:
    return frozenset(_uses(ast.parse(path.read_text()))) if path.exists() else frozenset()


@cache
def module_files() -> dict[str, Path]:
    """``{short name: file}`` of every helpers module, those of subpackages too (``lessons.streams``
    is ``streams``: the notebooks import it as ``from helpers.lessons import streams``)."""
    found = {}
    for info in pkgutil.walk_packages(helpers.__path__, "helpers."):
        short = info.name.rsplit(".", 1)[-1]
        if not short.startswith("_") and not info.ispkg:
            assert short not in found, f"two helpers modules are both called {short}"
            found[short] = Path(importlib.import_module(info.name).__file__)
    return found


@cache
def reexported() -> dict[tuple[str, str], str]:
    """``{(module, name): re-exporter}`` for each name a helpers subpackage's ``__all__`` re-exports
    from one of its modules (``distributed.launch`` is ``supervisor.launch``, so a notebook that
    calls ``distributed.launch`` uses it), and each name a module's ``__all__`` re-exports from a
    module beside it (``streams.show_tutorial`` is ``streams_copies.show_tutorial``)."""
    found = {}
    for info in pkgutil.walk_packages(helpers.__path__, "helpers."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue  # helpers.cli.__main__ runs the command line when imported
        module = importlib.import_module(info.name)
        within = info.name if info.ispkg else info.name.rsplit(".", 1)[0]
        for name in getattr(module, "__all__", ()):
            owner = getattr(getattr(module, name), "__module__", "")
            if owner.startswith(within + ".") and owner != info.name:
                found[(owner.rsplit(".", 1)[-1], name)] = info.name.rsplit(".", 1)[-1]
    return found


def _spellings(module: str, name: str) -> set[tuple[str, str]]:
    """``(module, name)`` and, where a subpackage re-exports it, ``(package, name)``."""
    package = reexported().get((module, name))
    return {(module, name)} | ({(package, name)} if package else set())


def _module_defining(package: str, name: str) -> str:
    """The module of ``package`` that defines the re-exported ``name`` (else ``package`` itself)."""
    return next(
        (
            module
            for (module, other), pkg in reexported().items()
            if (pkg, other) == (package, name)
        ),
        package,
    )


def public_objects() -> list[tuple[str, str, object]]:
    """``(module, name, object)`` for every public function and class defined in a helpers module."""
    found = []
    for short, path in module_files().items():
        module = importlib.import_module(
            "helpers." + ".".join(path.relative_to(ROOT / "helpers").with_suffix("").parts)
        )
        for name, obj in vars(module).items():
            if (
                not name.startswith("_")
                and (inspect.isfunction(obj) or inspect.isclass(obj))
                and obj.__module__ == module.__name__
            ):
                found.append((short, name, obj))
    return found


def _returns(obj: object, cls: str) -> bool:
    """Whether ``obj`` is a function whose return annotation names the class ``cls``."""
    annotation = (
        getattr(obj, "__annotations__", {}).get("return") if inspect.isfunction(obj) else None
    )
    return annotation is not None and re.search(rf"\b{cls}\b", str(annotation)) is not None


def used_in_notebook(stem: str, module: str, name: str, obj: object) -> bool:
    uses = notebook_uses(stem)
    if _spellings(module, name) & uses:
        return True
    if not inspect.isclass(obj):
        return False
    return any(
        _returns(other, name)
        for mod, other_name, other in public_objects()
        if _spellings(mod, other_name) & uses
    )


@cache
def _top_level(module: str) -> dict[str, frozenset[str]]:
    """``{function or class: every name its code mentions}`` for ``helpers/<module>.py``."""
    path = module_files().get(module)
    tree = ast.parse(path.read_text()) if path is not None else ast.Module([], [])
    return {
        node.name: frozenset(
            sub.id if isinstance(sub, ast.Name) else sub.attr
            for sub in ast.walk(node)
            if isinstance(sub, (ast.Name, ast.Attribute))
        )
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }


def helper_uses(module: str, owner: str) -> set[str]:
    """Every name the top-level function or class ``owner`` of ``helpers/<module>.py`` mentions,
    itself or through the module's private functions it calls (``_check_arguments``)."""
    defined, seen, todo, names = _top_level(module), set(), [owner], set()
    while todo:
        current = todo.pop()
        if current in seen or current not in defined:
            continue
        seen.add(current)
        names |= defined[current]
        todo += [n for n in defined[current] if n.startswith("_") and n in defined]
    return names


def _module_object(short: str) -> object:
    path = module_files()[short]
    return importlib.import_module(
        "helpers." + ".".join(path.relative_to(ROOT / "helpers").with_suffix("").parts)
    )


@cache
def _definitions(module: str) -> dict[str, ast.AST]:
    """``{function or class: its syntax tree}`` for the top level of ``helpers/<module>.py``."""
    tree = ast.parse(module_files()[module].read_text())
    return {
        node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }


def _resolve(node: ast.expr, namespace: dict[str, object]) -> object:
    """The object a name or a dotted name stands for in a module (None where it cannot say)."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace)
        return getattr(base, node.attr, None) if inspect.ismodule(base) else None
    return None


def refers_to(user_module: str, owner: str, module: str, name: str) -> bool:
    """Whether the code of ``helpers.<user_module>.<owner>``, itself or through the module's private
    functions it calls, refers to the very object ``helpers.<module>.<name>``: each name is resolved
    through the user module's own imports, so ``json.load`` is not ``records.load``."""
    target = getattr(_module_object(module), name, None)
    if target is None:
        return False
    namespace, defined = vars(_module_object(user_module)), _definitions(user_module)
    seen, todo = set(), [owner]
    while todo:
        current = todo.pop()
        if current in seen or current not in defined:
            continue
        seen.add(current)
        for sub in ast.walk(defined[current]):
            if isinstance(sub, (ast.Name, ast.Attribute)) and _resolve(sub, namespace) is target:
                return True
            if isinstance(sub, ast.Name) and sub.id.startswith("_"):
                todo.append(sub.id)
    return False


def _own_file_uses(path: Path, module: str, name: str) -> bool:
    """Whether ``name`` is used in its own module's file ``path`` (a helpers/cli/ module calls its own
    functions) or is that file's entry point in pyproject.toml (``datamove = "helpers.cli:main"``)."""
    if path != module_files().get(module):
        return False
    return f'"helpers.{module}:{name}"' in (ROOT / "pyproject.toml").read_text() or any(
        name in helper_uses(module, owner) for owner in _top_level(module) if owner != name
    )


def _users_problems(where: str, module: str, name: str, sentence: str) -> list[str]:
    """What is untrue in a "Used by <sentence>." sentence of ``helpers.<module>.<name>``."""
    problems, named = [], False
    for phrase, paths in USERS_BY_PHRASE.items():
        if phrase in sentence:
            named = True
            if not any(
                _spellings(module, name) & file_uses(path) or _own_file_uses(path, module, name)
                for path in paths
            ):
                problems.append(
                    f"{where} is 'Used by {phrase}', but {module}.{name} is not used there"
                )
    for user_module, owner in HELPER_NAME.findall(sentence):
        user_module = _module_defining(user_module, owner)
        if user_module not in module_files():
            continue  # a file name such as replay_all.py, not a helper
        named = True
        if not refers_to(user_module, owner, module, name) or (user_module, owner) == (
            module,
            name,
        ):
            problems.append(
                f"{where} is 'Used by {user_module}.{owner}', whose code does not use {name}"
            )
    if not named:
        problems.append(
            f"{where}: 'Used by {sentence}' names no helper (module.function), command line or tool"
        )
    return problems


def problems_of(module: str, name: str, obj: object) -> list[str]:
    """What is untrue or missing in the docstring of ``helpers.<module>.<name>`` (empty when all is well)."""
    doc = " ".join((inspect.getdoc(obj) or "").split())
    where = f"helpers.{module}.{name}"
    taught, used_by = TAUGHT.findall(doc + " "), USED_BY.findall(doc + " ")
    if not taught and not used_by:
        return [
            f"{where} has no 'Taught in NN_name.' sentence, nor a 'Used by module.function.' one"
        ]
    problems = [p for sentence in used_by for p in _users_problems(where, module, name, sentence)]
    for sentence in taught:
        stems = NOTEBOOK_NAME.findall(sentence)
        if not stems:
            problems.append(f"{where}: 'Taught in {sentence}' names no notebook")
        for stem in stems:
            if stem not in NOTEBOOKS:
                problems.append(f"{where} is 'Taught in {stem}', which is not a notebook")
            elif not used_in_notebook(stem, module, name, obj):
                problems.append(
                    f"{where} is 'Taught in {stem}', but that notebook's code never uses {module}.{name}"
                )
    return problems


def test_every_public_helper_is_taught_where_its_docstring_says():
    problems = [p for module, name, obj in public_objects() for p in problems_of(module, name, obj)]
    assert not problems, f"{len(problems)} untrue or missing 'Taught in' sentences:\n" + "\n".join(
        problems
    )


# ---------------------------------------------------------------- the checker itself can fail


def _fake(doc: str, module: str = "timing"):
    def fake() -> None: ...

    fake.__doc__ = doc
    fake.__module__ = f"helpers.{module}"
    return fake


def test_the_checker_accepts_a_true_sentence_and_refuses_false_ones():
    assert (
        problems_of("timing", "cuda_events", _fake("Time it.\n\nTaught in 04_event_timing.")) == []
    )
    wrong = problems_of("timing", "cuda_events", _fake("Taught in 00_start_here and 99_nowhere."))
    assert len(wrong) == 1 and "'Taught in 99_nowhere', which is not a notebook" in wrong[0]
    never = problems_of("timing", "no_such_function", _fake("Taught in 04_event_timing."))
    assert "never uses timing.no_such_function" in never[0]
    assert "no 'Taught in" in problems_of("timing", "cuda_events", _fake("Time it."))[0]


def test_the_checker_counts_a_class_handed_over_by_a_function_the_notebook_calls():
    from helpers import timing

    assert used_in_notebook("04_event_timing", "timing", "Timing", timing.Timing)
    assert not used_in_notebook(
        "04_event_timing", "timing", "NoSuchClass", type("NoSuchClass", (), {})
    )


def test_the_checker_checks_who_uses_what_no_notebook_calls():
    # synchronize_all is defined in timing/clocks.py; "timing.host_clock" resolves there too
    assert problems_of("clocks", "synchronize_all", _fake("Used by timing.host_clock.")) == []
    wrong = problems_of("clocks", "synchronize_all", _fake("Used by timing.cuda_events."))
    assert (
        len(wrong) == 1
        and "'Used by clocks.cuda_events', whose code does not use synchronize_all" in wrong[0]
    )
    assert (
        "not used there"
        in problems_of("clocks", "synchronize_all", _fake("Used by the course's tools."))[0]
    )
    assert (
        "names no helper" in problems_of("clocks", "synchronize_all", _fake("Used by everyone."))[0]
    )


def test_a_name_a_lesson_module_re_exports_counts_where_the_notebook_calls_it():
    """notebook 03 calls streams.show_tutorial, which streams re-exports (its __all__) from
    streams_copies; a name the module imports without listing it in __all__ does not count."""
    from helpers.lessons import streams_copies

    assert ("streams", "show_tutorial") in _spellings("streams_copies", "show_tutorial")
    assert used_in_notebook(
        "03_streams_and_overlap", "streams_copies", "show_tutorial", streams_copies.show_tutorial
    )
    assert _spellings("streams_copies", "_stats") == {("streams_copies", "_stats")}
    assert not used_in_notebook(
        "04_event_timing", "streams_copies", "show_tutorial", streams_copies.show_tutorial
    )


def test_a_name_that_only_looks_the_same_is_not_a_use():
    """trace.load_chrome_trace calls json.load, not records.load (issue 27 found the old checker,
    which compared bare names, fooled by it)."""
    wrong = problems_of("store", "load", _fake("Used by trace.load_chrome_trace.", "records.store"))
    assert len(wrong) == 1 and "whose code does not use load" in wrong[0]
    assert (
        problems_of("store", "load", _fake("Used by records.figure_rows.", "records.store")) == []
    )
    assert refers_to("running", "Run", "machine", "gpu_name")  # hardware/machine.py defines it
    assert not refers_to("running", "Run", "machine", "no_such_function")


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from helpers import timing\nt = timing.cuda_events(f)", {("timing", "cuda_events")}),
        (
            "from helpers.trace import overlap_ratio\n%matplotlib inline\n!ls",
            {("trace", "overlap_ratio")},
        ),
    ],
)
def test_uses_reads_attributes_and_imports(source, expected):
    assert expected <= _uses(_code_of(source))
