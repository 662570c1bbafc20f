"""The course's whole configuration, read from environment variables in this one place.

| variable | meaning |
| --- | --- |
| ``COURSE_QUICK=1`` | quick mode: smaller sizes and fewer repeats, the same code paths (set by ``make test``) |
| ``COURSE_RECORD=1`` | save every live, full-size experiment result under the results directory (set by ``make gpu-all``) |
| ``COURSE_REPLAY=1`` | replay recordings even where the hardware is present (to see a recorded machine's numbers) |
| ``COURSE_REPLAY_MACHINE=NAME[,NAME...]`` | which recorded machine to replay, or machines in order of preference; each must be recorded |
| ``COURSE_INDEX_OUT=PATH`` | while replaying, append each claim's verdict to this JSON-lines file (``make replay-all``) |
| ``COURSE_FOOTPRINT_OUT=PATH`` | while running live, append each experiment's memory footprint to this JSON-lines file (``make gpu-all``) |
| ``COURSE_GPU_MEMORY_GIB=N`` | let PyTorch take at most N GiB on each GPU, to check a notebook fits a smaller GPU |
| ``COURSE_RESULTS_DIR=PATH`` | where recordings are read and written (default: ``results/`` of the clone, or the recordings installed with the package) |
| ``COURSE_TRACES_DIR=PATH`` | where live profiler traces are written (default: ``build/traces/`` of the clone, or the user's cache folder when installed) |
"""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

QUICK_ENV = "COURSE_QUICK"
RECORD_ENV = "COURSE_RECORD"
REPLAY_ENV = "COURSE_REPLAY"
REPLAY_MACHINE_ENV = "COURSE_REPLAY_MACHINE"
INDEX_OUT_ENV = "COURSE_INDEX_OUT"
RESULTS_ENV = "COURSE_RESULTS_DIR"
FOOTPRINT_OUT_ENV = "COURSE_FOOTPRINT_OUT"
GPU_MEMORY_ENV = "COURSE_GPU_MEMORY_GIB"
TRACES_ENV = "COURSE_TRACES_DIR"

_TRUE = {"1", "true", "yes", "on"}


_FALSE = {"", "0", "false", "no", "off"}


def _flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value not in _TRUE | _FALSE:
        raise ValueError(
            f"{name}={os.environ[name]!r} is neither on nor off: set it to 1 (or true, yes, on) "
            f"or to 0 (or false, no, off), or unset it"
        )
    return value in _TRUE


def _absolute(name: str, value: str) -> Path:
    """A folder named by an environment variable: it must be absolute, since a notebook's working
    folder is not the one the variable was set in."""
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ValueError(
            f"{name}={value!r} is a relative path; notebooks run in another folder, so give an "
            f"absolute one, e.g. {name}={Path(value).resolve()}"
        )
    return path


def quick_mode() -> bool:
    """True when ``COURSE_QUICK`` is set: experiments use small sizes and few repeats."""
    return _flag(QUICK_ENV)


def recording_enabled() -> bool:
    """True when ``COURSE_RECORD`` is set: live full-size results are saved as recordings."""
    return _flag(RECORD_ENV)


def replay_forced() -> bool:
    """True when ``COURSE_REPLAY`` is set: replay recordings even where the hardware is here."""
    return _flag(REPLAY_ENV)


def replay_machines() -> list[str]:
    """The recorded machines to replay, in order of preference (empty: the default order).

    ``COURSE_REPLAY_MACHINE=2xNVIDIA-H200`` names one; ``A,B`` replays A and, for an
    experiment A did not record, B.
    """
    return [
        name.strip() for name in os.environ.get(REPLAY_MACHINE_ENV, "").split(",") if name.strip()
    ]


def index_out() -> Path | None:
    """Where replayed claims append their verdicts (``COURSE_INDEX_OUT``), or None."""
    value = os.environ.get(INDEX_OUT_ENV)
    return _absolute(INDEX_OUT_ENV, value) if value else None


def footprint_out() -> Path | None:
    """Where live experiments append their memory footprints (``COURSE_FOOTPRINT_OUT``), or None.

    Used by records.run_or_replay.
    """
    value = os.environ.get(FOOTPRINT_OUT_ENV)
    return _absolute(FOOTPRINT_OUT_ENV, value) if value else None


def gpu_memory_limit_bytes() -> int | None:
    """The GPU memory a live run may take on each GPU (``COURSE_GPU_MEMORY_GIB``, in GiB), or None.

    Used by records.run_or_replay.
    """
    value = os.environ.get(GPU_MEMORY_ENV, "").strip()
    if not value:
        return None
    try:
        gib = float(value)
    except ValueError:
        gib = float("nan")
    if not gib > 0 or gib == float("inf"):
        raise ValueError(
            f"{GPU_MEMORY_ENV}={value!r} is not a positive number of GiB: set it to e.g. 16 (a "
            f"16 GB GPU), or unset it"
        )
    return int(gib * 2**30)


PACKAGE = Path(__file__).resolve().parent
PROJECT = "moving-data-course"  # the distribution's name (pyproject.toml), also the cache folder's


def clone_root(package: Path = PACKAGE) -> Path | None:
    """The clone this package is used from (editable install, ``make``, ``PYTHONPATH``): the
    folder above ``helpers/`` when it holds pyproject.toml; None for an installed package
    (its folder is site-packages, never written into).
    """
    root = package.parent
    return root if (root / "pyproject.toml").is_file() else None


def results_dir(package: Path = PACKAGE) -> Path:
    """The folder that holds recordings: ``results/<machine>/<notebook>/<experiment>.json``.

    ``COURSE_RESULTS_DIR`` when set; else ``results/`` of the clone; else, for an installed
    package (``pip install .``), the copy of the recordings installed with it
    (``helpers/results/``).
    """
    env = os.environ.get(RESULTS_ENV)
    if env:
        return _absolute(RESULTS_ENV, env)
    root = clone_root(package)
    return root / "results" if root is not None else package / "results"


def shown_path(path: str | Path, package: Path = PACKAGE) -> str:
    """A file's path as a page shows it: from the clone's folder (``results/2xA/...``) where it is
    in the clone, else absolute; never relative to the kernel's folder, which differs between
    ``notebooks/``, ``build/notebooks/`` and ``workspace/`` copies of the same page."""
    path = Path(path).resolve()
    root = clone_root(package)
    if root is not None and path.is_relative_to(root):
        return str(path.relative_to(root))
    return str(path)


def notebooks_dir(package: Path = PACKAGE) -> Path:
    """The course's notebooks as committed (without outputs): ``notebooks/`` of the clone, or
    the copy installed with the package (``helpers/notebooks/``).
    """
    root = clone_root(package)
    return root / "notebooks" if root is not None else package / "notebooks"


def user_cache(home: Path | None = None) -> Path:
    """The course's folder in the user's cache: ``$XDG_CACHE_HOME/moving-data-course``, else
    ``~/.cache/moving-data-course`` (not created here).
    """
    base = os.environ.get("XDG_CACHE_HOME")
    cache = Path(base) if base and Path(base).is_absolute() else (home or Path.home()) / ".cache"
    return cache / PROJECT


def traces_dir(package: Path = PACKAGE) -> Path:
    """The folder live Chrome traces are written to (created if missing): ``COURSE_TRACES_DIR``
    when set, else ``build/traces/`` of the clone (ignored by git), else, for an installed
    package, ``traces/`` in the user's cache (``user_cache``), never site-packages.
    """
    env = os.environ.get(TRACES_ENV)
    root = clone_root(package)
    if env:
        folder = _absolute(TRACES_ENV, env)
    elif root is not None:
        folder = root / "build" / "traces"
    else:
        folder = user_cache() / "traces"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"cannot use {folder} for traces ({err.strerror}): set {TRACES_ENV} to a folder you "
            f"can write, e.g. {TRACES_ENV}={Path.home() / 'traces'}"
        ) from err
    return folder


def pick(full: T, quick: T) -> T:
    """Return ``quick`` in quick mode and ``full`` otherwise: one place to size an experiment.

    >>> pick(full=[2**10, 2**30], quick=[2**10])  # doctest: +SKIP
    """
    return quick if quick_mode() else full


def course_version() -> str:
    """The installed course's version (pyproject's, e.g. ``0.3.0.dev0``), or "unknown" where it is
    not installed."""
    try:
        return metadata.version("moving-data-course")
    except metadata.PackageNotFoundError:
        return "unknown"


def course_commit() -> str | None:
    """The course's commit: ``COURSE_COMMIT`` where set (a GPU run), else ``git describe`` of the
    clone the helpers are in (``-dirty`` with uncommitted changes); None outside a clone.
    """
    if os.environ.get("COURSE_COMMIT"):
        return os.environ["COURSE_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
