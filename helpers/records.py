"""Recorded results: run an experiment live where the hardware is here, replay it elsewhere.

An experiment is a plain function in a notebook; its body is the PyTorch code being taught.
``run_or_replay(fn, notebook=..., gpus=N, params=...)`` calls it when this machine has ``N``
GPUs, and otherwise loads what it returned on a GPU machine, saying so in one plain sentence.

A recording is ``results/<machine>/<notebook>/<experiment>.json``: an environment header
(the machine as ``hardware.describe()`` saw it, the date, the commit, the parameters) plus a
fingerprint of the experiment's source, so that a recording that no longer matches its
notebook is caught (``stale_recordings``). Files an experiment attaches (Chrome traces) are
copied beside it.

Results may hold plain JSON values, tuples, numpy numbers and the dataclasses registered
here with ``@register`` (``Timing``, the trace module's intervals, ``Attachment``).

Taught in 00_start_here.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as _dt
import functools
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import config, hardware

_TYPES: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: let instances of this dataclass be saved in and loaded from recordings.

    Taught in 00_start_here.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"only dataclasses can be registered for recordings, not {cls.__name__}")
    _TYPES[cls.__name__] = cls
    return cls


@register
@dataclasses.dataclass
class Attachment:
    """A file that belongs to a result (a Chrome trace): copied beside the recording when saved.

    Taught in 00_start_here.
    """

    path: str


# ---------------------------------------------------------------- fingerprints

def _function_node(source: str) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(source))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            return node
    raise ValueError("the source holds no function definition")


def _canonical(node: Any) -> str:
    """A syntax tree as text, leaving out empty and None fields.

    ``ast.dump`` is not stable across Python versions (3.12 added ``type_params=[]`` to every
    function, 3.13 changed which empty fields it shows), and recordings made on a GPU machine's
    Python must match notebooks checked on another Python.
    """
    if isinstance(node, ast.AST):
        fields = [f"{name}={_canonical(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != [] and name != "type_comment"]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


def fingerprint_source(source: str) -> str:
    """Fingerprint of a function's source: its syntax tree, without decorators or comments.

    Reformatting or editing comments keeps the fingerprint; changing the code changes it; the
    Python version does not matter.

    Taught in 00_start_here.
    """
    node = _function_node(source)
    node.decorator_list = []
    return hashlib.sha256(_canonical(node).encode()).hexdigest()[:16]


def fingerprint(fn: Callable[..., Any]) -> str:
    """Fingerprint of a function defined in a file or a notebook cell (see ``fingerprint_source``).

    Taught in 00_start_here.
    """
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError) as err:
        raise TypeError(
            f"cannot read the source of {fn!r}: pass a function defined with def in a notebook or module"
        ) from err
    return fingerprint_source(source)


# ---------------------------------------------------------------- encoding

def _encode(obj: Any, attach: Callable[[str], str] | None) -> Any:
    if isinstance(obj, Attachment):
        return {"__type__": "Attachment", "path": attach(obj.path) if attach else obj.path}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        name = type(obj).__name__
        if _TYPES.get(name) is not type(obj):
            raise TypeError(f"{name} is not registered for recordings: decorate it with @records.register")
        fields = {f.name: _encode(getattr(obj, f.name), attach) for f in dataclasses.fields(obj)}
        return {"__type__": name, **fields}
    if isinstance(obj, dict):
        return {str(k): _encode(v, attach) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, attach) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "tolist"):  # numpy arrays and scalars, torch tensors
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(
        f"cannot record a {type(obj).__name__}: return plain numbers, strings, lists, dicts, "
        f"Timing or trace results from an experiment"
    )


def _decode(obj: Any, folder: Path | None) -> Any:
    if isinstance(obj, list):
        return [_decode(v, folder) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__type__" not in obj:
        return {k: _decode(v, folder) for k, v in obj.items()}
    name = obj["__type__"]
    if name not in _TYPES:
        raise ValueError(f"recording holds an unknown type {name!r}; is the helpers package up to date?")
    fields = {k: _decode(v, folder) for k, v in obj.items() if k != "__type__"}
    if name == "Attachment" and folder is not None:
        fields["path"] = str(folder / fields["path"])
    return _TYPES[name](**fields)


# ---------------------------------------------------------------- the header

@functools.lru_cache(maxsize=1)
def _machine() -> dict[str, Any]:
    return hardware.describe()


def _commit() -> str | None:
    if os.environ.get("COURSE_COMMIT"):
        return os.environ["COURSE_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def environment_header(notebook: str, name: str, fp: str, params: dict[str, Any]) -> dict[str, Any]:
    """What a recording says about where it came from: machine, versions, date, commit, parameters.

    Taught in 00_start_here.
    """
    return {
        "machine": dict(_machine()),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "quick": config.quick_mode(),
        "notebook": notebook,
        "experiment": name,
        "fingerprint": fp,
        "params": _encode(params, None),
    }


# ---------------------------------------------------------------- save / load

def recording_path(machine: str, notebook: str, name: str, root: Path | None = None) -> Path:
    """``results/<machine>/<notebook>/<name>.json``.

    Taught in 00_start_here.
    """
    return (root or config.results_dir()) / machine / notebook / f"{name}.json"


def save(notebook: str, name: str, value: Any, *, fp: str, params: dict[str, Any] | None = None,
         root: Path | None = None) -> Path:
    """Save an experiment's result with its environment header; return the file written.

    Taught in 00_start_here.
    """
    header = environment_header(notebook, name, fp, params or {})
    path = recording_path(header["machine"]["machine"], notebook, name, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    copied: list[str] = []

    def attach(src: str) -> str:
        dest = f"{name}.{len(copied)}.{Path(src).name}"
        shutil.copyfile(src, path.parent / dest)
        copied.append(dest)
        return dest

    record = {"header": header, "result": _encode(value, attach)}
    path.write_text(json.dumps(record, indent=1, allow_nan=True) + "\n")
    return path


def load(path: Path | str) -> tuple[dict[str, Any], Any]:
    """Read a recording: ``(header, result)``, with registered types and attachments restored.

    Taught in 00_start_here.
    """
    from . import distributed, timing, trace  # noqa: F401 - importing them registers their types

    path = Path(path)
    record = json.loads(path.read_text())
    return record["header"], _decode(record["result"], path.parent)


def recordings_of(notebook: str, name: str, gpus: int = 0, root: Path | None = None) -> list[Path]:
    """Recordings of one experiment made on machines with at least ``gpus`` GPUs, by machine name.

    Taught in 00_start_here.
    """
    root = root or config.results_dir()
    found = []
    for path in sorted(root.glob(f"*/{notebook}/{name}.json")):
        header = json.loads(path.read_text())["header"]
        if len(header["machine"].get("gpus") or []) >= gpus:
            found.append(path)
    return found


def recorded_machines(root: Path | None = None) -> list[dict[str, Any]]:
    """The machine headers of every recorded machine, one each (for reports in 00_start_here)."""
    root = root or config.results_dir()
    machines = []
    for folder in sorted(p for p in root.glob("*") if p.is_dir()):
        first = next(iter(sorted(folder.glob("*/*.json"))), None)
        if first is not None:
            machines.append(json.loads(first.read_text())["header"]["machine"])
    return machines


# ---------------------------------------------------------------- run or replay

@dataclasses.dataclass
class Run:
    """What ``run_or_replay`` gives back: the value, and where and when it was measured.

    Taught in 06_nccl_point_to_point_and_collectives.
    """

    value: Any
    live: bool
    header: dict[str, Any]
    saved_to: Path | None = None

    @property
    def machine(self) -> str:
        return self.header["machine"]["machine"]

    @property
    def params(self) -> dict[str, Any]:
        return self.header["params"]

    @property
    def gpu_name(self) -> str:
        gpus = self.header["machine"].get("gpus") or []
        return gpus[0]["name"] if gpus else "no GPU"

    def describe(self) -> str:
        """One plain sentence: measured here, or replayed from which machine, GPU and date."""
        m = self.header["machine"]
        versions = f"torch {m.get('torch')}, driver {m.get('driver') or '-'}"
        if self.live:
            return f"Measured live on this machine ({self.machine}: {self.gpu_name}, {versions})."
        return (
            f"Replayed, not measured here: recorded on {self.machine} ({self.gpu_name}, {versions}) "
            f"on {self.header['date'][:10]} at commit {self.header.get('commit') or 'unknown'}."
        )

    def where(self) -> str:
        """A few words for tables: ``live on X`` or ``replayed from X``."""
        return f"{'live on' if self.live else 'replayed from'} {self.machine}"


def _check_arguments(fn: Any, notebook: Any, gpus: Any, params: Any) -> None:
    if not callable(fn):
        raise TypeError(f"run_or_replay needs the experiment function itself, got {type(fn).__name__}")
    if not isinstance(notebook, str) or not notebook:
        raise TypeError("notebook must be the notebook's name as a string, e.g. '01_pinned_memory'")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be the number of GPUs the experiment needs (0, 1, 2, ...), got {gpus!r}")
    if params is not None and not isinstance(params, dict):
        raise TypeError("params must be a dict of keyword arguments for the experiment")


def _replay(notebook: str, name: str, gpus: int, fp: str) -> Run:
    candidates = recordings_of(notebook, name, gpus)
    if not candidates:
        raise ValueError(
            f"{notebook}/{name} needs {gpus} GPU(s), this machine has {hardware.gpu_count()}, and no "
            f"recording of it is under {config.results_dir()}; run `make gpu-all` on a machine with "
            f"{gpus} GPU(s) to record it"
        )
    wanted = config.replay_machine()
    chosen = next((p for p in candidates if p.parts[-3] == wanted), candidates[0])
    header, value = load(chosen)
    if header["fingerprint"] != fp:
        warnings.warn(
            f"the recording {chosen} was made from a different version of {name}() than the one in "
            f"this notebook (fingerprint {header['fingerprint']} != {fp}): re-record it on a GPU machine",
            stacklevel=3,
        )
    return Run(value, False, header)


def run_or_replay(fn: Callable[..., Any], *, notebook: str, gpus: int = 1,
                  params: dict[str, Any] | None = None, name: str | None = None) -> Run:
    """Run experiment ``fn(**params)`` live if this machine has ``gpus`` GPUs, else replay it.

    Live: the result is measured now; with ``COURSE_RECORD=1`` (and not in quick mode) it is
    also saved as a recording. Replay: the newest recording of a machine with enough GPUs is
    loaded (``COURSE_REPLAY_MACHINE`` chooses among several) and a sentence says where it comes
    from. ``gpus=0`` experiments always run live and are never recorded.

    Taught in 00_start_here.
    """
    _check_arguments(fn, notebook, gpus, params)
    params = params or {}
    name = name or fn.__name__
    fp = fingerprint(fn)
    live = hardware.gpu_count() >= gpus and not (gpus and config.replay_forced())
    if not live:
        run = _replay(notebook, name, gpus, fp)
        print(run.describe())
        return run
    value = fn(**params)
    hardware.free_memory()
    run = Run(value, True, environment_header(notebook, name, fp, params))
    if gpus and config.recording_enabled() and not config.quick_mode():
        run.saved_to = save(notebook, name, value, fp=fp, params=params)
    print(run.describe() + (f" Recorded to {run.saved_to}." if run.saved_to else ""))
    return run


# ---------------------------------------------------------------- staleness

def _calls_in(tree: ast.AST) -> list[tuple[str, int, str | None]]:
    """(function name, gpus, name=) of every ``run_or_replay(fn, ...)`` call in a syntax tree."""
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "run_or_replay"):
            continue
        if not node.args or not isinstance(node.args[0], ast.Name):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        gpus = kw["gpus"].value if isinstance(kw.get("gpus"), ast.Constant) else 1
        name = kw["name"].value if isinstance(kw.get("name"), ast.Constant) else None
        calls.append((node.args[0].id, gpus, name))
    return calls


def experiments_in_notebook(path: Path | str) -> dict[str, tuple[int, str]]:
    """``{experiment name: (gpus, fingerprint)}`` for every ``run_or_replay`` call in a notebook.

    Taught in 00_start_here.
    """
    cells = json.loads(Path(path).read_text())["cells"]
    functions: dict[str, str] = {}
    calls: list[tuple[str, int, str | None]] = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = ast.get_source_segment(source, node) or ""
        calls.extend(_calls_in(tree))
    found = {}
    for fn_name, gpus, name in calls:
        if fn_name in functions:
            found[name or fn_name] = (gpus, fingerprint_source(functions[fn_name]))
    return found


def stale_recordings(notebook_path: Path | str, root: Path | None = None) -> list[str]:
    """Problems with a notebook's recordings: missing, or made from other source. Empty is good.

    Only experiments that need a GPU are checked (``gpus=0`` ones always run live).

    Taught in 00_start_here.
    """
    notebook = Path(notebook_path).stem
    problems = []
    for name, (gpus, fp) in experiments_in_notebook(notebook_path).items():
        if gpus == 0:
            continue
        paths = recordings_of(notebook, name, gpus, root)
        if not paths:
            problems.append(f"{notebook}/{name}: no recording from a machine with {gpus} GPU(s)")
        for p in paths:
            recorded = json.loads(p.read_text())["header"]["fingerprint"]
            if recorded != fp:
                problems.append(f"{p}: stale (recorded fingerprint {recorded}, notebook has {fp})")
    return problems
