"""The static notebook reader: every ``run_or_replay`` call of a notebook, its fingerprint and
its full-size params, worked out from the notebook's text without running it."""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeGuard

from .. import codec, timing
from .fingerprints import definition_node, fingerprint_source, free_names

_PARAM_BUILTINS = {
    f.__name__: f
    for f in (dict, list, tuple, range, int, float, str, min, max, len, sorted, sum, round, abs)
}


# what params may use of config and timing, as a full-size recording run sees them
_PARAM_MODULES = {
    "config": SimpleNamespace(pick=lambda full, quick: full, quick_mode=lambda: False),
    "timing": SimpleNamespace(sizes_pow2=timing.sizes_pow2),
}


class _Unknown:
    def __init__(self, why: str) -> None:
        self.why = why


_MODULE = _Unknown("a module")


@dataclasses.dataclass
class NotebookExperiment:
    """One ``run_or_replay`` call found in a notebook: ``params`` at full size (None when the
    text does not say them), ``problems`` what keeps the call from being checked."""

    name: str
    function: str
    gpus: int
    fingerprint: str | None
    params: dict[str, Any] | None
    problems: list[str]


def _code_cells(path: Path) -> list[str]:
    """Each code cell's source, without its IPython magics and shell lines."""
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(cell["source"]).splitlines() for cell in cells if cell["cell_type"] == "code"]
    return [
        "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
        for lines in code
    ]


def _evaluate(node: ast.expr, names: Mapping[str, Any]) -> Any:
    """Value of a params expression from literals, ``config.pick`` (full size) and notebook
    constants; raises ``NameError``/``ValueError`` when it uses anything else."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(names.get(sub.id), _Unknown):
            raise ValueError(f"{sub.id} = {names[sub.id].why}")
    namespace = {
        "__builtins__": {},
        **_PARAM_BUILTINS,
        **_PARAM_MODULES,
        **{k: v for k, v in names.items() if not isinstance(v, _Unknown)},
    }
    return eval(compile(ast.Expression(node), "<params>", "eval"), namespace)  # noqa: S307


def _is_run_or_replay(node: ast.AST) -> TypeGuard[ast.Call]:
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "run_or_replay"
    )


class _NotebookReader:
    """Walks a notebook's code cells in order, as a kernel would define them."""

    def __init__(self) -> None:
        self.functions: dict[str, str] = {}
        self.values: dict[str, Any] = {}  # notebook variables: a value, or _Unknown
        self.found: dict[str, NotebookExperiment] = {}

    def read_cell(self, source: str) -> None:
        for node in ast.parse(source).body:
            self._define(node, source)
            for call in (sub for sub in ast.walk(node) if _is_run_or_replay(sub)):
                experiment = self._experiment(call)
                self.found[experiment.name] = experiment

    def _define(self, node: ast.stmt, source: str) -> None:
        if isinstance(node, ast.FunctionDef):
            self.functions[node.name] = ast.get_source_segment(source, node) or ""
            self.values.pop(node.name, None)
        elif isinstance(node, ast.ClassDef):
            self.values[node.name] = _Unknown("a class defined in the notebook")
            self.functions.pop(node.name, None)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            try:
                value = (
                    _evaluate(node.value, self.values)
                    if node.value and not isinstance(node, ast.AugAssign)
                    else _Unknown("changed in place")
                )
            except Exception as err:  # noqa: BLE001 - anything the static reader cannot evaluate
                value = _Unknown(f"{ast.unparse(node.value or node)[:60]} ({type(err).__name__})")
            for target in targets:
                self._assign(target, value)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                if name not in _PARAM_MODULES:
                    self.values[name] = _MODULE
        elif isinstance(node, (ast.For, ast.With, ast.If, ast.While, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
                    self.values[sub.id] = _Unknown("set inside a block")

    def _assign(self, target: ast.expr, value: Any) -> None:
        """Bind ``name = value`` and ``a, b = (x, y)``; anything else becomes unknown."""
        if isinstance(target, ast.Name):
            self.values[target.id] = value
            self.functions.pop(target.id, None)
        elif (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (tuple, list))
            and len(value) == len(target.elts)
        ):
            for sub, item in zip(target.elts, value, strict=True):
                self._assign(sub, item)
        else:
            for part in ast.walk(target):
                if isinstance(part, ast.Name):
                    self._assign(part, _Unknown("unpacked from a value the reader cannot split"))

    def _experiment(self, call: ast.Call) -> NotebookExperiment:
        keywords = {k.arg: k.value for k in call.keywords}
        target = call.args[0] if call.args else keywords.get("fn")
        function = (
            target.id if isinstance(target, ast.Name) else ast.unparse(target) if target else "?"
        )
        name_node = keywords.get("name")
        name = str(name_node.value) if isinstance(name_node, ast.Constant) else function
        gpus_node = keywords.get("gpus", ast.Constant(1))
        if isinstance(gpus_node, ast.Constant) and isinstance(gpus_node.value, int):
            gpus, problems = gpus_node.value, []
        else:
            gpus, problems = -1, ["gpus= must be a literal number"]
        if not isinstance(target, ast.Name) or function not in self.functions:
            problems.append(
                f"the experiment `{function}` is not a function defined with def at the top "
                f"of a cell, so its source cannot be checked"
            )
            return NotebookExperiment(name, function, gpus, None, None, problems)
        fp = self._fingerprint(function, problems)
        try:
            params = _evaluate(keywords["params"], self.values) if "params" in keywords else {}
            params = codec.encode(params, None, "params")
        except Exception as err:  # noqa: BLE001
            problems.append(
                f"its params cannot be worked out from the notebook ({err}): build them from "
                f"literals, config.pick(...) and constants defined in the notebook"
            )
            params = None
        return NotebookExperiment(name, function, gpus, fp, params, problems)

    def _fingerprint(self, function: str, problems: list[str]) -> str:
        reached: dict[str, str] = {}
        todo = [function]
        while todo:
            for used in sorted(free_names(definition_node(self.functions[todo.pop()]))):
                if used in self.functions and used != function and used not in reached:
                    reached[used] = self.functions[used]
                    todo.append(used)
                elif used in self.values and self.values[used] is not _MODULE:
                    problems.append(
                        f"{function} reads the notebook variable `{used}`, which its "
                        f"recording cannot check: pass it through params="
                    )
        return fingerprint_source(self.functions[function], reached)


def experiments_in_notebook(path: Path | str) -> dict[str, NotebookExperiment]:
    """Every ``run_or_replay`` call in a notebook, read from its text without running it."""
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"experiments_in_notebook takes a notebook's path, got {type(path).__name__}"
        )
    if not Path(path).is_file():
        raise ValueError(
            f"no notebook at {path}: pass the path of an .ipynb file, e.g. notebooks/01_pinned_memory.ipynb"
        )
    reader = _NotebookReader()
    for source in _code_cells(Path(path)):
        reader.read_cell(source)
    return reader.found
