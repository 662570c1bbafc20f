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


def _named_path(name: str) -> Path | None:
    """The path the environment variable ``name`` gives (None where unset or empty): absolute,
    since a notebook's working folder is not the one the variable was set in."""
    value = os.environ.get(name)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ValueError(
            f"{name}={value!r} is a relative path; notebooks run in another folder, so give an "
            f"absolute one, e.g. {name}={Path(value).resolve()}"
        )
    return path


def quick_mode() -> bool:
    """``COURSE_QUICK``: experiments use small sizes and few repeats."""
    return _flag(QUICK_ENV)


def recording_enabled() -> bool:
    """``COURSE_RECORD``: live full-size results are saved as recordings."""
    return _flag(RECORD_ENV)


def replay_forced() -> bool:
    """``COURSE_REPLAY``: replay recordings even where the hardware is here."""
    return _flag(REPLAY_ENV)


def replay_machines() -> list[str]:
    """The recorded machines ``COURSE_REPLAY_MACHINE`` names (``A,B``), in order of preference."""
    return [
        name.strip() for name in os.environ.get(REPLAY_MACHINE_ENV, "").split(",") if name.strip()
    ]


def index_out() -> Path | None:
    """Where replayed claims append their verdicts (``COURSE_INDEX_OUT``), or None."""
    return _named_path(INDEX_OUT_ENV)


def footprint_out() -> Path | None:
    """Where live experiments append their memory footprints (``COURSE_FOOTPRINT_OUT``), or None."""
    return _named_path(FOOTPRINT_OUT_ENV)


def gpu_memory_limit_bytes() -> int | None:
    """The bytes a live run may take on each GPU (``COURSE_GPU_MEMORY_GIB``, in GiB), or None."""
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
    """The clone this package is used from: the folder above ``helpers/`` when it holds
    pyproject.toml; None for an installed package."""
    root = package.parent
    return root if (root / "pyproject.toml").is_file() else None


def results_dir(package: Path = PACKAGE) -> Path:
    """The folder of ``<machine>/<notebook>/<experiment>.json``: ``COURSE_RESULTS_DIR``, else
    ``results/`` of the clone, else the copy installed with the package."""
    root = clone_root(package)
    return _named_path(RESULTS_ENV) or (root or package) / "results"


def shown_path(path: str | Path, package: Path = PACKAGE) -> str:
    """A file's path as a page shows it: from the clone's folder where it is in the clone, else
    absolute; never from the kernel's folder, which differs between copies of a page."""
    path = Path(path).resolve()
    root = clone_root(package)
    if root is not None and path.is_relative_to(root):
        return str(path.relative_to(root))
    return str(path)


def notebooks_dir(package: Path = PACKAGE) -> Path:
    """The course's notebooks as committed: ``notebooks/`` of the clone, or the copy installed
    with the package."""
    root = clone_root(package)
    return root / "notebooks" if root is not None else package / "notebooks"


def user_cache(home: Path | None = None) -> Path:
    """``$XDG_CACHE_HOME/moving-data-course``, else ``~/.cache/moving-data-course``."""
    base = os.environ.get("XDG_CACHE_HOME")
    cache = Path(base) if base and Path(base).is_absolute() else (home or Path.home()) / ".cache"
    return cache / PROJECT


def traces_dir(package: Path = PACKAGE) -> Path:
    """The folder live Chrome traces are written to (created if missing): ``COURSE_TRACES_DIR``,
    else ``build/traces/`` of the clone, else ``traces/`` in the user's cache."""
    root = clone_root(package)
    folder = _named_path(TRACES_ENV) or (
        root / "build" / "traces" if root is not None else user_cache() / "traces"
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"cannot use {folder} for traces ({err.strerror}): set {TRACES_ENV} to a folder you "
            f"can write, e.g. {TRACES_ENV}={Path.home() / 'traces'}"
        ) from err
    return folder


def pick(full: T, quick: T) -> T:
    """``quick`` in quick mode, else ``full``: one place to size an experiment."""
    return quick if quick_mode() else full


def course_version() -> str:
    """The installed course's version, or "unknown" where it is not installed."""
    try:
        return metadata.version("moving-data-course")
    except metadata.PackageNotFoundError:
        return "unknown"


def course_commit() -> str | None:
    """``COURSE_COMMIT`` where set (a GPU run), else ``git describe --dirty`` of the clone; None
    outside a clone."""
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
