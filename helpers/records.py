"""Recorded results: run an experiment live where the hardware is here, replay it elsewhere.

An experiment is a plain function in a notebook; its body is the PyTorch code being taught.
``run_or_replay(fn, notebook=..., gpus=N, params=...)`` calls it when this machine has ``N``
GPUs, and otherwise loads what it returned on a GPU machine, saying in its first sentence
which machine is replayed and why.

A recording is ``results/<machine>/<notebook>/<experiment>.json``: an environment header (the
machine as ``hardware.describe()`` saw it, the date, the commit, the parameters) plus a
*fingerprint* of the code that produced it. The fingerprint covers the experiment's source,
the source of every notebook function it reaches, and ``MEASURING_VERSION`` (the helpers'
measuring code); the parameters are compared value by value. ``check_recordings`` reads the
notebooks without running them and lists every recording that is missing, stale, broken or
left over, machine by machine. Files an experiment attaches (Chrome traces) sit beside it.

Replay is explicit: ``COURSE_REPLAY_MACHINE`` names a recorded machine (an unknown name is an
error that lists them); otherwise the machine this one is, if it recorded the experiment, else
the recorded machine with the most GPUs (then the newest recording, then the name).

A machine name stands for a kind of machine (``2xNVIDIA-H200``): two hosts with the same GPUs
share it, and a newer recording replaces an older one; git history keeps the older, and each
recording keeps its own host's report in its header.

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
import math
import os
import re
import shutil
import subprocess
import textwrap
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# timing, trace and distributed define the recorded types: importing them registers those
# types, so ``load`` works on its own.
from . import codec, config, distributed, hardware, timing, trace  # noqa: F401

# Bump when the helpers change what an experiment measures (timing, trace, distributed):
# every recording then becomes stale and is re-recorded. tests/test_records.py keeps
# MEASURING_CODE in step with that code, so a change to it is always a decision.
# Last decision: cuda_events(hold_us="auto") sizes its hold and (with target_s) its calls from queued
# calls; only experiments that pass "auto" (00 and 01, re-recorded with it) measure differently; an experiment
# that passes a number measures as before, so no recording changes.
MEASURING_VERSION = 1
MEASURING_CODE = "1e79b4f3fa791068"
_MEASURING_MODULES = ("timing", "trace", "distributed")

HEADER_KEYS = ("machine", "date", "commit", "quick", "notebook", "experiment", "fingerprint", "params")


class RecordingError(ValueError):
    """A recording that cannot be read: the message names the file and how to re-record it.

    Used by records.load, records.read_header and records.validate_recording.
    """


# ---------------------------------------------------------------- fingerprints

def _definition_node(source: str) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(source))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            node.decorator_list = []
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


def free_names(node: ast.AST) -> set[str]:
    """Names a function reads that it does not bind itself: its globals (and builtins).

    Used by records.fingerprint (what a fingerprint follows).
    """
    bound, read = set(), set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            (read if isinstance(sub.ctx, ast.Load) else bound).add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            bound.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in sub.names)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            bound.add(sub.name)
    return read - bound


def fingerprint_source(source: str, reached: Mapping[str, str] | None = None) -> str:
    """Fingerprint of an experiment: its syntax tree (without decorators or comments), the
    trees of the notebook functions it reaches (``{name: source}``), and ``MEASURING_VERSION``.

    Reformatting or editing comments keeps it; changing the code of the experiment or of any
    function it calls changes it; the Python version does not matter.

    Used by records.fingerprint and records.experiments_in_notebook.
    """
    parts = [f"measuring code v{MEASURING_VERSION}", _canonical(_definition_node(source))]
    parts += [f"{name} = {_canonical(_definition_node(src))}" for name, src in sorted((reached or {}).items())]
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
    cell or module: a lambda, a ``functools.partial``, a method or a closure keeps part of
    what it does out of its source, where no recording could check it.

    Used by records.fingerprint.
    """
    what = ("pass a function defined with def at the top of a notebook cell, and give it its "
            "values through params=")
    if isinstance(fn, functools.partial):
        raise TypeError(f"the experiment is a functools.partial of {fn.func.__name__}: {what}")
    if not inspect.isfunction(fn):
        raise TypeError(f"the experiment must be a function, got {type(fn).__name__}: {what}")
    if fn.__name__ == "<lambda>":
        raise TypeError(f"the experiment is a lambda: {what}")
    if fn.__closure__ or "<locals>" in fn.__qualname__:
        captured = ", ".join(fn.__code__.co_freevars) or "names of the function around it"
        raise TypeError(f"the experiment {fn.__name__} is defined inside another function and "
                        f"captures {captured}: {what}")


def _reached_functions(fn: Callable[..., Any]) -> dict[str, str]:
    """``{name: source}`` of the functions defined beside ``fn`` (same notebook or module) that
    it calls, directly or through each other."""
    reached: dict[str, str] = {}
    todo = [fn]
    while todo:
        current = todo.pop()
        for name in sorted(free_names(_definition_node(_source_of(current)))):
            obj = current.__globals__.get(name)
            if (name in reached or obj is fn or not inspect.isfunction(obj)
                    or obj.__module__ != fn.__module__ or obj.__qualname__ != obj.__name__):
                continue
            reached[name] = _source_of(obj)
            todo.append(obj)
    return reached


def fingerprint(fn: Callable[..., Any]) -> str:
    """Fingerprint of an experiment function as it is now (see ``fingerprint_source``).

    Used by records.run_or_replay and records.check_recordings.
    """
    check_experiment(fn)
    return fingerprint_source(_source_of(fn), _reached_functions(fn))


def measuring_code_hash() -> str:
    """Hash of the measuring modules' code (``timing``, ``trace``, ``distributed``), without
    docstrings and comments: a test compares it with ``MEASURING_CODE``.

    Used by the course's tests (test_recordings_trust.py compares it with
    ``MEASURING_CODE``).
    """
    digest = hashlib.sha256()
    helpers = Path(__file__).parent
    files: list[Path] = []
    for name in _MEASURING_MODULES:  # helpers/<name>.py, or every .py of helpers/<name>/ (a package)
        module = helpers / f"{name}.py"
        files += [module] if module.exists() else sorted((helpers / name).rglob("*.py"))
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        digest.update(_canonical(tree).encode())
    return digest.hexdigest()[:16]


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

    Used by records.save and records.run_or_replay.
    """
    return {
        "machine": dict(_machine()),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "quick": config.quick_mode(),
        "notebook": notebook,
        "experiment": name,
        "fingerprint": fp,
        "params": codec.encode(params, None, "params"),
    }


# ---------------------------------------------------------------- save / load

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def recording_path(machine: str, notebook: str, name: str, root: Path | None = None) -> Path:
    """``results/<machine>/<notebook>/<name>.json``.

    Used by records.save.
    """
    for label, part in (("machine", machine), ("notebook", notebook), ("name", name)):
        if not isinstance(part, str) or not _SAFE_NAME.fullmatch(part) or ".." in part:
            raise ValueError(f"{label} {part!r} cannot name a folder or file under results/: use letters, digits "
                             f"and . _ + - (e.g. '2xNVIDIA-H200', '01_pinned_memory', 'copy_bandwidth')")
    return (root or config.results_dir()) / machine / notebook / f"{name}.json"


def save(notebook: str, name: str, value: Any, *, fp: str, params: dict[str, Any] | None = None,
         root: Path | None = None) -> Path:
    """Save an experiment's result with its environment header; return the file written.

    Used by records.run_or_replay.
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

    record = {"header": header, "result": codec.encode(value, attach)}
    path.write_text(codec.dumps(record))
    return path


def rerecord_command(machine: str | None, notebooks: Iterable[str]) -> str:
    """The commands that re-record ``notebooks`` on a machine like ``machine``.

    Used by records.load, records.choose_recording and records.format_problems (in
    their messages).
    """
    names = " ".join(f"notebooks/{nb}.ipynb" for nb in sorted(set(notebooks)))
    where = f"on a {machine} machine" if machine else "on a GPU machine with enough GPUs"
    archive = f"gpu-results-{machine or '<machine>'}.tar.gz"
    return (f"{where}: make gpu-all NOTEBOOKS=\"{names}\" OUT=build/gpu-out; "
            f"then here: make unpack ARCHIVE=build/gpu-out/{archive}")


def _read_record(path: Path) -> dict[str, Any]:
    """The raw JSON of a recording, or ``RecordingError`` naming the file and the fix."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise RecordingError(f"{path} cannot be read ({err}): {_fix(path)}") from err
    except json.JSONDecodeError as err:
        raise RecordingError(f"{path} is not a readable recording (JSON error: {err}): {_fix(path)}") from err
    if not isinstance(record, dict) or not isinstance(record.get("header"), dict) or "result" not in record:
        raise RecordingError(f"{path} has no header and result: {_fix(path)}")
    missing = [key for key in HEADER_KEYS if key not in record["header"]]
    if missing or not isinstance(record["header"]["machine"], dict):
        raise RecordingError(f"{path}: its header lacks {', '.join(missing) or 'the machine'}: {_fix(path)}")
    return record


def _fix(path: Path) -> str:
    machine = path.parts[-3] if len(path.parts) >= 3 else None
    return (f"re-record it ({rerecord_command(machine, [path.parent.name])}) "
            f"or restore it with `git checkout -- {path}`")


def read_header(path: Path | str) -> dict[str, Any]:
    """A recording's environment header, checked (``RecordingError`` names the file otherwise).

    Used by records.choose_recording and records.check_recordings.
    """
    return _read_record(Path(path))["header"]


def load(path: Path | str) -> tuple[dict[str, Any], Any]:
    """Read a recording: ``(header, result)``, with registered types and attachments restored.

    A file that is not a whole recording raises ``RecordingError`` naming it and the fix.

    Used by records.run_or_replay (to replay), records.validate_recording and
    trace.load_chrome_trace.
    """
    path = Path(path)
    record = _read_record(path)
    try:
        return record["header"], codec.decode(record["result"], path.parent)
    except (TypeError, ValueError) as err:
        raise RecordingError(f"{path}: its result cannot be decoded ({err}): "
                             f"{rerecord_command(path.parts[-3], [path.parent.name])}") from err


def _gpu_total(path: Path) -> int:
    """How many GPUs the machine that made a recording had."""
    return len(read_header(path)["machine"].get("gpus") or [])


def recordings_of(notebook: str, name: str, gpus: int = 0, root: Path | None = None) -> list[Path]:
    """Recordings of one experiment made on machines with at least ``gpus`` GPUs, by machine name.

    Used by records.choose_recording.
    """
    root = root or config.results_dir()
    found = []
    for path in sorted(root.glob(f"*/{notebook}/{name}.json")):
        if _gpu_total(path) >= gpus:
            found.append(path)
    return found


def recorded_machine_names(root: Path | None = None) -> list[str]:
    """Names of the machines with recordings under the results folder, sorted.

    Used by records.choose_recording and the course's tools.
    """
    root = root or config.results_dir()
    return sorted(p.name for p in root.glob("*") if p.is_dir() and not p.name.startswith(".")
                  and any(p.glob("*/*.json")))


def recorded_machines(root: Path | None = None) -> list[dict[str, Any]]:
    """The machine headers of every recorded machine, one each (for reports in 00_start_here).

    Taught in 00_start_here.
    """
    root = root or config.results_dir()
    return [read_header(sorted((root / name).glob("*/*.json"))[0])["machine"]
            for name in recorded_machine_names(root)]


# ---------------------------------------------------------------- choosing what to replay

@dataclasses.dataclass
class Choice:
    """Which recording a replay uses, and the reason in words.

    Used by records.choose_recording.
    """

    path: Path
    machine: str
    reason: str


def _this_machine_name() -> str | None:
    return _machine()["machine"] if hardware.gpu_count() else None


def choose_recording(notebook: str, name: str, gpus: int, root: Path | None = None) -> Choice:
    """The recording of ``notebook/name`` to replay (see the module's docstring for the order).

    ``COURSE_REPLAY_MACHINE`` naming no recorded machine, or one without this experiment, is a
    ``ValueError`` that lists the machines that have it.

    Used by records.run_or_replay and records.replay_plan.
    """
    root = root or config.results_dir()
    candidates = {p.parts[-3]: p for p in recordings_of(notebook, name, gpus, root)}
    have = ", ".join(candidates) or "none"
    wanted = config.replay_machines()
    if wanted:
        known = recorded_machine_names(root)
        unknown = [m for m in wanted if m not in known]
        if unknown:
            raise ValueError(f"{config.REPLAY_MACHINE_ENV} names {', '.join(map(repr, unknown))}, not a "
                             f"recorded machine; recorded machines: {', '.join(known) or 'none'}")
        chosen = next((m for m in wanted if m in candidates), None)
        if chosen is None:
            raise ValueError(f"{config.REPLAY_MACHINE_ENV}={','.join(wanted)} has no recording of "
                             f"{notebook}/{name} (it needs {gpus} GPU(s)); machines that have it: {have}")
        why = "chose it" if chosen == wanted[0] else f"lists it first of those that recorded it ({have})"
        return Choice(candidates[chosen], chosen, f"{config.REPLAY_MACHINE_ENV} {why}")
    if not candidates:
        raise ValueError(
            f"{notebook}/{name} needs {gpus} GPU(s), this machine has {hardware.gpu_count()}, and no "
            f"recording of it is under {root}; {rerecord_command(None, [notebook])}"
        )
    here = _this_machine_name()
    if here in candidates:
        return Choice(candidates[here], here, "it is this machine")
    best = max(candidates, key=lambda m: (_gpu_total(candidates[m]),
                                          read_header(candidates[m])["date"], m))
    reason = ("it is the only machine that recorded it" if len(candidates) == 1 else
              f"it is the one with the most GPUs of those that recorded it ({have}); "
              f"set {config.REPLAY_MACHINE_ENV} to choose another")
    return Choice(candidates[best], best, reason)


# ---------------------------------------------------------------- run or replay

DESCRIBE_WIDTH = 100  # characters per line of Run.describe(): a notebook's output, or the site, shows them whole


@dataclasses.dataclass
class Run:
    """What ``run_or_replay`` gives back: the value, and where and when it was measured.

    ``reason`` says, for a replay, why this machine does not measure and why that recording.

    Taught in 06_nccl_point_to_point_and_collectives.
    """

    value: Any
    live: bool
    header: dict[str, Any]
    saved_to: Path | None = None
    reason: str = ""

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
        """One plain sentence: measured here, or replayed from which machine, why, and when;
        wrapped into lines of at most ``DESCRIBE_WIDTH`` characters (words are never split)."""
        m = self.header["machine"]
        versions = f"torch {m.get('torch')}, driver {m.get('driver') or '-'}"
        if self.live:
            sentence = f"Measured live on this machine ({self.machine}: {self.gpu_name}, {versions})."
        else:
            sentence = (
                f"Replayed from {self.machine}, not measured here: {self.reason}. Recorded there "
                f"({self.gpu_name}, {versions}) on {self.header['date'][:10]} at commit "
                f"{self.header.get('commit') or 'unknown'}."
            )
        return textwrap.fill(sentence, DESCRIBE_WIDTH, break_long_words=False, break_on_hyphens=False)

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
    codec.check_recordable(params or {}, "params")


def _why_not_live(gpus: int) -> str:
    have = hardware.gpu_count()
    if have >= gpus:
        return f"{config.REPLAY_ENV}=1 asks for replay"
    return f"this machine has {have or 'no'} GPU{'s' if have != 1 else ''} and the experiment needs {gpus}"


def _replay(notebook: str, name: str, gpus: int, fp: str, params: dict[str, Any]) -> Run:
    choice = choose_recording(notebook, name, gpus)
    header, value = load(choice.path)
    if header["fingerprint"] != fp:
        warnings.warn(
            f"the recording {choice.path} was made from a different version of {name}() or of the "
            f"functions it calls (fingerprint {header['fingerprint']} != {fp}): "
            f"{rerecord_command(choice.machine, [notebook])}",
            stacklevel=3,
        )
    elif not config.quick_mode() and header["params"] != codec.encode(params, None, "params"):
        warnings.warn(f"the recording {choice.path} was made with other params than these: "
                      f"{rerecord_command(choice.machine, [notebook])}", stacklevel=3)
    reason = f"{_why_not_live(gpus)}; {choice.machine} is replayed because {choice.reason}"
    return Run(value, False, header, reason=reason)


_DESCRIBED: set[tuple[str, str, str, str]] = set()  # (notebook, machine, date, reason) described in full


def _said_once(notebook: str, run: Run) -> str:
    """The replay's full sentence the first time a notebook replays a machine's recording of a
    day, then one line that points back to it."""
    key = (notebook, run.machine, run.header["date"][:10], run.reason)
    if key in _DESCRIBED:
        return f"Replayed from {run.machine} (recorded {key[2]}), as said above."
    _DESCRIBED.add(key)
    return run.describe()


def where_numbers_come_from(notebook: str, root: Path | None = None) -> str:
    """What a notebook's set-up cell prints first: this machine's report where it has a GPU to
    measure with; elsewhere a line on this machine, then the report of the recorded machine its
    replays come from (``COURSE_REPLAY_MACHINE``'s first that recorded the notebook, else the one
    with the most GPUs, then the newest). Each experiment still says where its numbers come from.

    Taught in 01_pinned_memory.
    """
    if hardware.gpu_count():
        return hardware.report()
    root = root or config.results_dir()
    here = hardware.describe()
    headers = {folder.parent.name: read_header(next(iter(sorted(folder.glob("*.json")))))
               for folder in sorted(root.glob(f"*/{notebook}")) if any(folder.glob("*.json"))}
    this = f"This machine ({here.get('machine')}: {here.get('cpu')}) has no GPU to measure with"
    if not headers:
        return f"{this}, and no machine has recorded {notebook}: {rerecord_command(None, [notebook])}"
    wanted = [m for m in config.replay_machines() if m in headers]
    if wanted:
        chosen, why = wanted[0], f"{config.REPLAY_MACHINE_ENV} chose it"
    else:
        chosen = max(headers, key=lambda m: (len(headers[m]["machine"].get("gpus") or []), headers[m]["date"], m))
        why = "it has the most GPUs of the machines that recorded this notebook"
    sentence = (f"{this}: the experiments below replay recordings made on {chosen} ({why}; each experiment "
                f"says where its numbers come from).")
    return (textwrap.fill(sentence, DESCRIBE_WIDTH, break_long_words=False, break_on_hyphens=False) + "\n\n"
            + hardware.report(headers[chosen]["machine"]))


def gap_machines(notebook: str, name: str, root: Path | None = None) -> set[str]:
    """The recorded machines whose gaps.json lists ``notebook/name``: they replay it from another.

    Used by the course's tests.
    """
    root = root or config.results_dir()
    return {folder.name for folder in sorted(root.iterdir()) if folder.is_dir()
            and f"{notebook}/{name}" in recording_gaps(folder)}


def recorded_runs(notebook: str, name: str, root: Path | None = None) -> dict[str, Run]:
    """``{machine: Run}`` for every recorded machine that has ``notebook/name``, each replayed as
    a notebook would replay it there: the value and header of that machine's recording.

    Used by the course's tests (the lessons' analysis is tested on every recording).
    """
    found = {}
    for path in recordings_of(notebook, name, 0, root):
        header, value = load(path)
        found[path.parts[-3]] = Run(value, False, header, reason=f"the recording of {path.parts[-3]}")
    return found


def run_or_replay(fn: Callable[..., Any], *, notebook: str, gpus: int = 1,
                  params: dict[str, Any] | None = None, name: str | None = None) -> Run:
    """Run experiment ``fn(**params)`` live if this machine has ``gpus`` GPUs, else replay it.

    Live: the result is measured now; with ``COURSE_RECORD=1`` (and not in quick mode) it is
    also saved as a recording. Either way the value the notebook gets has been through the
    recordings' encoding (``codec.round_trip``), so live and replay hand over the same types.
    Replay: ``choose_recording`` picks the recording and the first sentence printed says which
    and why. ``gpus=0`` experiments always run live and are never recorded. ``params`` must be
    recordable; that is checked before the experiment runs.

    Taught in 00_start_here.
    """
    _check_arguments(fn, notebook, gpus, params)
    fp = fingerprint(fn)  # refuses lambdas, partials and closures first
    params = params or {}
    name = name or fn.__name__
    live = hardware.gpu_count() >= gpus and not (gpus and config.replay_forced())
    if not live:
        run = _replay(notebook, name, gpus, fp, params)
        print(_said_once(notebook, run))
        return run
    held = hardware.memory_in_use()
    value = fn(**params)
    hardware.free_memory(baseline=held)
    run = Run(codec.round_trip(value), True, environment_header(notebook, name, fp, params))
    if gpus and config.recording_enabled() and not config.quick_mode():
        run.saved_to = save(notebook, name, value, fp=fp, params=params)
    print(run.describe() + (f" Recorded to {run.saved_to}." if run.saved_to else ""))
    return run



def replay_plan(notebook_path: Path | str) -> tuple[list[str], list[str], str]:
    """For a notebook on this machine: (experiments that run live, experiments that replay,
    one line saying which machine the replays come from and why, or why none can).

    Used by the lessons (helpers/lessons/).
    """
    path = Path(notebook_path)
    found = experiments_in_notebook(path)
    have = hardware.gpu_count()
    live = [n for n, e in found.items() if e.gpus <= have and not (e.gpus and config.replay_forced())]
    replay = [n for n in found if n not in live]
    if not replay:
        return live, replay, "-"
    try:
        choices = {choose_recording(path.stem, n, found[n].gpus).machine for n in replay}
    except ValueError as err:
        return live, replay, f"cannot replay: {err}"
    first = choose_recording(path.stem, replay[0], found[replay[0]].gpus)
    machines = ", ".join(sorted(choices))
    return live, replay, machines + ("" if len(choices) > 1 else f" ({first.reason})")

# ---------------------------------------------------------------- reading a notebook

_PARAM_BUILTINS = {f.__name__: f for f in (dict, list, tuple, range, int, float, str, min, max, len,
                                           sorted, sum, round, abs)}


class _FullSizeConfig:
    """``config`` as a full-size recording run sees it (for working out params statically)."""

    @staticmethod
    def pick(full: Any, quick: Any) -> Any:
        return full

    @staticmethod
    def quick_mode() -> bool:
        return False


_PARAM_MODULES = {"config": _FullSizeConfig, "timing": type("timing", (), {
    "sizes_pow2": staticmethod(timing.sizes_pow2)})}


class _Unknown:
    def __init__(self, why: str) -> None:
        self.why = why


_MODULE = _Unknown("a module")


@dataclasses.dataclass
class NotebookExperiment:
    """One ``run_or_replay`` call found in a notebook, as the static reader sees it.

    ``params`` are the full-size parameters worked out from the notebook's text (None when
    they cannot be); ``problems`` lists what keeps the call from being checked.

    Used by records.experiments_in_notebook.
    """

    name: str
    function: str
    gpus: int
    fingerprint: str | None
    params: dict[str, Any] | None
    problems: list[str]


def _code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    sources = []
    for cell in cells:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            sources.append("\n".join(line for line in source.splitlines()
                                     if not line.lstrip().startswith(("%", "!"))))
    return sources


def _evaluate(node: ast.expr, names: Mapping[str, Any]) -> Any:
    """Value of a params expression from literals, ``config.pick`` (full size) and notebook
    constants; raises ``NameError``/``ValueError`` when it uses anything else."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(names.get(sub.id), _Unknown):
            raise ValueError(f"{sub.id} = {names[sub.id].why}")
    namespace = {"__builtins__": {}, **_PARAM_BUILTINS, **_PARAM_MODULES,
                 **{k: v for k, v in names.items() if not isinstance(v, _Unknown)}}
    return eval(compile(ast.Expression(node), "<params>", "eval"), namespace)  # noqa: S307


def _call_target(node: ast.Call) -> ast.expr | None:
    return node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "fn"), None)


def _is_run_or_replay(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "run_or_replay"


class _NotebookReader:
    """Walks a notebook's code cells in order, as a kernel would define them."""

    def __init__(self) -> None:
        self.functions: dict[str, str] = {}
        self.values: dict[str, Any] = {}   # notebook variables: a value, or _Unknown
        self.found: dict[str, NotebookExperiment] = {}

    def read_cell(self, source: str) -> None:
        tree = ast.parse(source)
        for node in tree.body:
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
                value = _evaluate(node.value, self.values) if node.value and not isinstance(node, ast.AugAssign) \
                    else _Unknown("changed in place")
            except Exception as err:  # noqa: BLE001 - anything the static reader cannot evaluate
                value = _Unknown(f"{ast.unparse(node.value)[:60]} ({type(err).__name__})")
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
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)) \
                and len(value) == len(target.elts):
            for sub, item in zip(target.elts, value, strict=True):
                self._assign(sub, item)
        else:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    self._assign(sub, _Unknown("unpacked from a value the reader cannot split"))

    def _experiment(self, call: ast.Call) -> NotebookExperiment:
        keywords = {k.arg: k.value for k in call.keywords}
        target = _call_target(call)
        function = target.id if isinstance(target, ast.Name) else ast.unparse(target) if target else "?"
        name = keywords["name"].value if isinstance(keywords.get("name"), ast.Constant) else function
        gpus_node = keywords.get("gpus")
        literal = gpus_node is None or (isinstance(gpus_node, ast.Constant) and isinstance(gpus_node.value, int))
        gpus = 1 if gpus_node is None else gpus_node.value if literal else -1
        problems = [] if literal else ["gpus= must be a literal number"]
        if not isinstance(target, ast.Name) or function not in self.functions:
            problems.append(f"the experiment `{function}` is not a function defined with def at the top "
                            f"of a cell, so its source cannot be checked")
            return NotebookExperiment(name, function, gpus, None, None, problems)
        fp = self._fingerprint(function, problems)
        params = None
        try:
            params = _evaluate(keywords["params"], self.values) if "params" in keywords else {}
            params = codec.encode(params, None, "params")
        except Exception as err:  # noqa: BLE001
            problems.append(f"its params cannot be worked out from the notebook ({err}): build them from "
                            f"literals, config.pick(...) and constants defined in the notebook")
            params = None
        return NotebookExperiment(name, function, gpus, fp, params, problems)

    def _fingerprint(self, function: str, problems: list[str]) -> str:
        reached: dict[str, str] = {}
        todo = [function]
        while todo:
            for used in sorted(free_names(_definition_node(self.functions[todo.pop()]))):
                if used in self.functions and used != function and used not in reached:
                    reached[used] = self.functions[used]
                    todo.append(used)
                elif used in self.values and self.values[used] is not _MODULE:
                    problems.append(f"{function} reads the notebook variable `{used}`, which its "
                                    f"recording cannot check: pass it through params=")
        return fingerprint_source(self.functions[function], reached)


def experiments_in_notebook(path: Path | str) -> dict[str, NotebookExperiment]:
    """Every ``run_or_replay`` call in a notebook, read from its text without running it.

    Used by records.replay_plan, records.check_recordings and the course's tools.
    """
    if not isinstance(path, (str, Path)):
        raise TypeError(f"experiments_in_notebook takes a notebook's path, got {type(path).__name__}")
    if not Path(path).is_file():
        raise ValueError(f"no notebook at {path}: pass the path of an .ipynb file, e.g. notebooks/01_pinned_memory.ipynb")
    reader = _NotebookReader()
    for source in _code_cells(Path(path)):
        reader.read_cell(source)
    return reader.found


# ---------------------------------------------------------------- validating a recording

# Clocks that time the device's work itself. A rate from another clock can describe what moved
# no bytes (a pinned allocation, a call that returns before its copy) and is not checked.
_DEVICE_CLOCKS = ("cuda events", "torch.utils.benchmark")
_LEAVES = (timing.Timing, trace.Interval, codec.Attachment)


def _leaves(value: Any, where: str = "result") -> Iterable[tuple[str, Any]]:
    """(position, object) of every Timing, Interval and Attachment in a decoded result."""
    if isinstance(value, _LEAVES):
        yield where, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _leaves(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{where}[{k!r}]")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{where}[{i}]")


def _attachments(value: Any) -> list[codec.Attachment]:
    return [leaf for _, leaf in _leaves(value) if isinstance(leaf, codec.Attachment)]


def _bandwidths(value: Any) -> Iterable[tuple[str, float]]:
    """(label, GB/s) of every device-timed Timing with bytes in a decoded result."""
    for _, t in _leaves(value):
        if isinstance(t, timing.Timing) and t.nbytes and t.median_s > 0 and t.method in _DEVICE_CLOCKS:
            yield t.label or "a timing", t.gbps


def _bad_times(value: Any) -> Iterable[str]:
    """Where a decoded result holds a negative or non-finite time."""
    for where, leaf in _leaves(value):
        if isinstance(leaf, timing.Timing):
            bad = [s for s in leaf.samples_s if not (isinstance(s, (int, float)) and math.isfinite(s) and s >= 0)]
            if bad:
                yield f"{where} ({leaf.label or 'a timing'}) has samples {bad[:3]}"
        elif isinstance(leaf, trace.Interval) and not (
                math.isfinite(leaf.start_us) and math.isfinite(leaf.end_us) and leaf.end_us >= leaf.start_us):
            yield f"{where} has an interval {leaf.name!r} from {leaf.start_us} to {leaf.end_us} us"


def validate_recording(path: Path, machine: str | None = None) -> list[str]:
    """Problems with one recording file, each naming it; empty when it is sound.

    Sound means: it decodes; its header has every key (``HEADER_KEYS``) and names this
    machine, notebook and experiment; it is not a quick-mode run; its attachments exist
    beside it as plain files; no time is negative or not a number; no device-timed bandwidth
    is over the machine's fastest link (``hardware.ceiling_gbps``) by more than 10%.

    Used by records.validate_machine_folder and records.check_recordings.
    """
    path = Path(path)
    try:
        header, value = load(path)
    except RecordingError as err:
        return [str(err)]
    problems = []
    expected = {"machine": machine or path.parts[-3], "notebook": path.parent.name, "experiment": path.stem}
    found = {"machine": header["machine"].get("machine"), "notebook": header["notebook"],
             "experiment": header["experiment"]}
    problems += [f"{path}: its header says {key} {found[key]!r}, its place says {want!r}"
                 for key, want in expected.items() if found[key] != want]
    if header["quick"]:
        problems.append(f"{path}: it is a quick-mode run; recordings are made at full size")
    if not isinstance(header["fingerprint"], str) or not header["fingerprint"]:
        problems.append(f"{path}: its header has no fingerprint")
    for attachment in _attachments(value):
        file = Path(attachment.path)
        if file.parent != path.parent or file.is_symlink() or not file.is_file():
            problems.append(f"{path}: its attachment {file.name} is missing or not a plain file beside it")
    problems += [f"{path}: {bad}" for bad in _bad_times(value)]
    ceiling = hardware.ceiling_gbps(header["machine"])
    problems += [f"{path}: {label} at {gbps:.1f} GB/s is over 1.1 x the machine's fastest link "
                 f"({ceiling:.0f} GB/s)" for label, gbps in _bandwidths(value) if gbps > 1.1 * ceiling]
    return problems


def validate_machine_folder(folder: Path, machine: str) -> list[str]:
    """``validate_recording`` for every recording under ``results/<machine>``, plus the files
    there that are neither a recording nor one's attachment, and any link. Empty is good.

    Used by the course's tools (tools/gpu_run.py checks an archive before
    unpacking it).
    """
    folder = Path(folder)
    recordings = sorted(folder.glob("*/*.json"))
    if not recordings:
        return [f"{folder}: holds no recording (<notebook>/<experiment>.json)"]
    problems: list[str] = []
    attached: set[Path] = set()
    for path in recordings:
        problems += validate_recording(path, machine)
        try:
            attached.update(Path(a.path) for a in _attachments(load(path)[1]))
        except RecordingError:
            pass
    try:
        recording_gaps(folder)
    except RecordingError as err:
        problems.append(str(err))
    for item in sorted(folder.rglob("*")):
        if item.is_symlink():
            problems.append(f"{item}: a link; recordings are plain files")
        elif item in (folder / GAPS_FILE, folder / "run_times.json"):
            continue  # run_times.json: seconds per notebook and cell (tools/notebook_times.py checks it)
        elif item.is_file() and item not in attached and item not in recordings:
            problems.append(f"{item}: neither a recording nor a file one attaches")
        elif item.is_dir() and item.parent != folder:
            problems.append(f"{item}: a folder inside a notebook's recordings")
    return problems


# ---------------------------------------------------------------- staleness

@dataclasses.dataclass
class Problem:
    """One thing wrong with the recordings: where (machine may be None: no machine has it)
    and what, for ``check_recordings``.

    Used by records.check_recordings and records.format_problems.
    """

    machine: str | None
    notebook: str
    text: str


def _check_one_recording(path: Path, machine: str, expected: NotebookExperiment) -> list[str]:
    problems = validate_recording(path, machine)
    if problems:
        return problems
    header = read_header(path)
    if expected.fingerprint and header["fingerprint"] != expected.fingerprint:
        problems.append(f"{path}: stale: made from other code (recorded fingerprint "
                        f"{header['fingerprint']}, the notebook's is {expected.fingerprint})")
    if expected.params is not None and header["params"] != expected.params:
        changed = sorted(k for k in set(header["params"]) | set(expected.params)
                         if header["params"].get(k) != expected.params.get(k))
        problems.append(f"{path}: stale: made with other params ({', '.join(changed)} differ "
                        f"from the notebook's full-size params)")
    return problems


GAPS_FILE = "gaps.json"


def recording_gaps(machine_folder: Path) -> dict[str, str]:
    """The experiments a recorded machine is known not to have, each with why:
    ``results/<machine>/gaps.json``, ``{"<notebook>/<experiment>": "why"}``. Written by hand when
    an experiment is added or changed and no machine of that kind can be lent to record it; a
    listed experiment is not reported missing, and replaying it "on" that machine takes the next
    machine of ``COURSE_REPLAY_MACHINE``'s list, which the notebook names. Empty without the file.

    Used by records.validate_machine_folder and records.check_recordings.
    """
    path = Path(machine_folder) / GAPS_FILE
    if not path.exists():
        return {}
    try:
        gaps = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RecordingError(f"{path} is not readable JSON ({err}): write {{\"<notebook>/<experiment>\": \"why\"}}") from err
    if not isinstance(gaps, dict) or not all(isinstance(k, str) and k.count("/") == 1 and isinstance(v, str)
                                             and v.strip() for k, v in gaps.items()):
        raise RecordingError(f"{path} must map \"<notebook>/<experiment>\" to a sentence saying why it is not "
                             f"recorded on this machine")
    return gaps


def _check_machine(folder: Path, notebook: str, found: Mapping[str, NotebookExperiment]) -> list[str]:
    machine = folder.parent.name
    gpus_here = _gpu_total(sorted(folder.glob("*.json"))[0])
    try:
        gaps = recording_gaps(folder.parent)
    except RecordingError as err:
        return [str(err)]
    problems = [f"{folder.parent / GAPS_FILE}: lists {key}, which the notebook no longer has"
                for key in gaps if key.split("/")[0] == notebook and key.split("/")[1] not in found]
    for name, experiment in found.items():
        path = folder / f"{name}.json"
        listed = f"{notebook}/{name}" in gaps
        if listed and path.exists():
            problems.append(f"{folder.parent / GAPS_FILE}: lists {notebook}/{name}, which is recorded now: "
                            f"remove that line")
        elif 0 < experiment.gpus <= gpus_here and not path.exists() and not listed:
            problems.append(f"{path}: missing; {machine} has the notebook's other recordings")
        elif path.exists():
            problems += _check_one_recording(path, machine, experiment)
    for path in sorted(folder.glob("*.json")):
        if path.stem not in found or found[path.stem].gpus == 0:
            problems.append(f"{path}: no experiment {path.stem} with gpus >= 1 in the notebook any more")
    return problems


def check_recordings(notebooks: Iterable[Path | str], root: Path | None = None) -> list[Problem]:
    """Everything wrong with the recordings of these notebooks, machine by machine: an
    experiment no machine recorded; on each machine that recorded a notebook, every experiment
    it has the GPUs for that is missing, stale (code, reached functions, measuring version or
    params changed), broken or lacking an attachment; recordings of experiments or notebooks
    that no longer exist; and problems reading the notebook itself. Empty is good.

    Used by records.stale_recordings and the course's tests (every recording matches its
    notebook).
    """
    if isinstance(notebooks, (str, Path)):
        raise TypeError(f"check_recordings takes a list of notebook paths; got one path, {str(notebooks)!r}: "
                        f"pass [{str(notebooks)!r}]")
    root = root or config.results_dir()
    problems: list[Problem] = []
    names = set()
    for nb_path in map(Path, notebooks):
        notebook = nb_path.stem
        names.add(notebook)
        found = experiments_in_notebook(nb_path)
        problems += [Problem(None, notebook, f"{notebook}/{e.name}: {text}")
                     for e in found.values() for text in e.problems]
        folders = sorted(f for f in root.glob(f"*/{notebook}") if f.is_dir() and any(f.glob("*.json")))
        for e in found.values():
            if e.gpus > 0 and not any((f / f"{e.name}.json").exists() for f in folders):
                problems.append(Problem(None, notebook, f"{notebook}/{e.name}: no machine has recorded it"))
        for folder in folders:
            problems += [Problem(folder.parent.name, notebook, text)
                         for text in _check_machine(folder, notebook, found)]
    for folder in sorted(root.glob("*/*")):
        if folder.is_dir() and folder.name not in names and not folder.parent.name.startswith("."):
            problems.append(Problem(folder.parent.name, folder.name,
                                    f"{folder}: recordings of a notebook that does not exist"))
    return problems


def stale_recordings(notebook_path: Path | str, root: Path | None = None) -> list[str]:
    """``check_recordings`` for one notebook, as lines of text. Empty is good.

    Used by the course's tests (test_records.py).
    """
    notebook = Path(notebook_path).stem
    return [p.text for p in check_recordings([notebook_path], root) if p.notebook == notebook]


def format_problems(problems: Iterable[Problem]) -> str:
    """Problems grouped by machine, each group ending with the command that re-records it.

    Used by the course's tests (their failure messages).
    """
    groups: dict[str | None, list[Problem]] = {}
    for problem in problems:
        groups.setdefault(problem.machine, []).append(problem)
    lines = []
    for machine in sorted(groups, key=lambda m: (m is not None, m or "")):
        title = machine or "no machine (the notebook itself, or nothing recorded anywhere)"
        lines.append(f"{title}:")
        lines += [f"  - {p.text}" for p in groups[machine]]
        lines.append(f"  re-record {rerecord_command(machine, [p.notebook for p in groups[machine]])}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the flat export

INDEX_NAME = "index.jsonl"
INDEX_KEYS = ("kind", "machine", "gpu", "driver", "torch", "cuda", "nccl", "date", "commit",
              "notebook", "experiment", "name", "value", "unit", "spread", "verdict")


def index_row(header: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """One line of ``results/index.jsonl``: the recording's machine and versions, then ``fields``
    (kind, name, value, unit, spread, verdict and any extra keys).

    Used by records.figure_rows, claims.ClaimsTable and claims.WhatWeSee.
    """
    m = header["machine"]
    gpus = m.get("gpus") or []
    row = {"kind": None, "machine": m.get("machine"), "gpu": gpus[0]["name"] if gpus else None,
           "driver": m.get("driver"), "torch": m.get("torch"), "cuda": m.get("cuda"), "nccl": m.get("nccl"),
           "date": header.get("date"), "commit": header.get("commit"), "notebook": header.get("notebook"),
           "experiment": header.get("experiment"), "name": None, "value": None, "unit": None,
           "spread": None, "verdict": None}
    row.update(fields)
    return row


def figure_rows(root: Path | None = None) -> list[dict[str, Any]]:
    """One ``figure`` row per timing in every recording, in the index's order: GB/s for a device-timed copy (with its
    bytes), else seconds per call; the spread is the timing's IQR over its median.

    Used by the course's tools (tools/replay_all.py).
    """
    root = root or config.results_dir()
    rows = []
    for path in sorted(root.glob("*/*/*.json")):
        header, value = load(path)
        for where, t in _leaves(value):
            if not isinstance(t, timing.Timing):
                continue
            rate = bool(t.nbytes) and t.method in _DEVICE_CLOCKS
            rows.append(index_row(header, kind="figure", name=where.removeprefix("result"), label=t.label,
                                  value=t.gbps if rate else t.median_s, unit="GB/s" if rate else "s",
                                  spread=t.spread, bytes=t.nbytes, method=t.method, samples=len(t.samples_s)))
    return sorted(rows, key=_sort_key)


def _sort_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k)) for k in ("kind", "machine", "notebook", "experiment", "name"))


def read_index(root: Path | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``results/index.jsonl`` (of one ``kind``, 'figure' or 'claim', if given).

    Used by the course's tools (tools/replay_all.py).
    """
    path = (root or config.results_dir()) / INDEX_NAME
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if kind is None or r["kind"] == kind]


def write_index(rows: Iterable[Mapping[str, Any]], root: Path | None = None) -> Path:
    """Write ``results/index.jsonl``, one sorted JSON object a line; return its path.

    Used by the course's tools (tools/replay_all.py).
    """
    path = (root or config.results_dir()) / INDEX_NAME
    text = "".join(json.dumps(row, allow_nan=True) + "\n" for row in sorted(rows, key=_sort_key))
    path.write_text(text)
    return path
