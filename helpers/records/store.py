"""Recordings on disk: the environment header, where one goes, saving it, reading it back, and
which machines have one."""

from __future__ import annotations

import datetime as _dt
import functools
import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# importing timing, trace and distributed registers the recorded types they define
from .. import codec, config, distributed, hardware, timing, trace  # noqa: F401
from .checksums import checksum_problem, note_checksums
from .machines import machine_folders

HEADER_KEYS = (
    "machine",
    "date",
    "commit",
    "quick",
    "notebook",
    "experiment",
    "fingerprint",
    "params",
)


@functools.lru_cache(maxsize=1)
def describe_machine() -> dict[str, Any]:
    return hardware.describe()


def environment_header(notebook: str, name: str, fp: str, params: dict[str, Any]) -> dict[str, Any]:
    """What a recording says about where it came from: machine, versions, date, commit, parameters."""
    return {
        "machine": dict(describe_machine()),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": config.course_commit(),
        "quick": config.quick_mode(),
        "notebook": notebook,
        "experiment": name,
        "fingerprint": fp,
        "params": codec.encode(params, None, "params"),
    }


class RecordingError(ValueError):
    """A recording that cannot be read: the message names the file and how to re-record it."""


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def recording_path(machine: str, notebook: str, name: str, root: Path | None = None) -> Path:
    """``results/<machine>/<notebook>/<name>.json``."""
    for label, part in (("machine", machine), ("notebook", notebook), ("name", name)):
        if not isinstance(part, str) or not _SAFE_NAME.fullmatch(part) or ".." in part:
            raise ValueError(
                f"{label} {part!r} cannot name a folder or file under results/: use letters, digits "
                f"and . _ + - (e.g. '2xNVIDIA-H200', '01_pinned_memory', 'copy_bandwidth')"
            )
    return (root or config.results_dir()) / machine / notebook / f"{name}.json"


def save(
    notebook: str,
    name: str,
    value: Any,
    *,
    fp: str,
    params: dict[str, Any] | None = None,
    root: Path | None = None,
) -> Path:
    """Save an experiment's result with its environment header; return the file written."""
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
    note_checksums(path.parent.parent, [path, *(path.parent / name for name in copied)])
    return path


def rerecord_command(machine: str | None, notebooks: Iterable[str]) -> str:
    """The commands that re-record ``notebooks`` on a machine like ``machine``."""
    names = " ".join(f"notebooks/{nb}.ipynb" for nb in sorted(set(notebooks)))
    where = f"on a {machine} machine" if machine else "on a GPU machine with enough GPUs"
    archive = f"gpu-results-{machine or '<machine>'}.tar.gz"
    return (
        f'{where}: make gpu-all NOTEBOOKS="{names}" OUT=build/gpu-out; '
        f"then here: make unpack ARCHIVE=build/gpu-out/{archive}"
    )


def _read_record(path: Path) -> dict[str, Any]:
    """The raw JSON of a recording, or ``RecordingError`` naming the file and the fix."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise RecordingError(f"{path} cannot be read ({err}): {_fix(path)}") from err
    except json.JSONDecodeError as err:
        raise RecordingError(
            f"{path} is not a readable recording (JSON error: {err}): {_fix(path)}"
        ) from err
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("header"), dict)
        or "result" not in record
    ):
        raise RecordingError(f"{path} has no header and result: {_fix(path)}")
    missing = [key for key in HEADER_KEYS if key not in record["header"]]
    if missing or not isinstance(record["header"]["machine"], dict):
        raise RecordingError(
            f"{path}: its header lacks {', '.join(missing) or 'the machine'}: {_fix(path)}"
        )
    return record


def _fix(path: Path) -> str:
    machine = path.parts[-3] if len(path.parts) >= 3 else None
    return (
        f"re-record it ({rerecord_command(machine, [path.parent.name])}) "
        f"or restore it with `git checkout -- {path}`"
    )


def read_header(path: Path | str) -> dict[str, Any]:
    """A recording's environment header, checked (``RecordingError`` names the file otherwise)."""
    return _read_record(Path(path))["header"]


def load(path: Path | str) -> tuple[dict[str, Any], Any]:
    """Read a recording: ``(header, result)``, with registered types and attachments restored;
    ``RecordingError`` where it or an attachment is not whole or not the file recorded."""
    path = Path(path)
    record = _read_record(path)
    for file in [path, *(path.parent / name for name in _attached(record["result"]))]:
        problem = checksum_problem(file)
        if problem:
            raise RecordingError(f"{path}: {problem}" if file != path else problem)
    try:
        return record["header"], codec.decode(record["result"], path.parent)
    except (TypeError, ValueError) as err:
        raise RecordingError(
            f"{path}: its result cannot be decoded ({err}): "
            f"{rerecord_command(path.parts[-3], [path.parent.name])}"
        ) from err


def _attached(raw: Any) -> list[str]:
    """The file names of the attachments in a recording's raw JSON result."""
    if isinstance(raw, list):
        return [name for item in raw for name in _attached(item)]
    if not isinstance(raw, dict):
        return []
    if raw.get("__type__") == "Attachment":
        return [Path(str(raw.get("path"))).name]
    return [name for item in raw.values() for name in _attached(item)]


def gpu_total(path: Path) -> int:
    """How many GPUs the machine that made a recording had."""
    return len(read_header(path)["machine"].get("gpus") or [])


def recordings_of(notebook: str, name: str, gpus: int = 0, root: Path | None = None) -> list[Path]:
    """Recordings of one experiment on machines with at least ``gpus`` GPUs, by machine name."""
    paths = [folder / notebook / f"{name}.json" for folder in machine_folders(root)]
    return [path for path in paths if path.is_file() and gpu_total(path) >= gpus]


def recorded_machine_names(root: Path | None = None) -> list[str]:
    """Names of the machines with recordings under the results folder, sorted."""
    return [folder.name for folder in machine_folders(root)]


def recorded_machines(root: Path | None = None) -> list[dict[str, Any]]:
    """The machine header of every recorded machine (00_start_here reports them)."""
    return [read_header(sorted(f.glob("*/*.json"))[0])["machine"] for f in machine_folders(root)]
