"""``results/<machine>/checksums.json``: the sha256 of every recording and attachment of a
machine, written when one is saved and checked whenever one is loaded, validated or unpacked."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

CHECKSUMS = "checksums.json"
WRITE = "python tools/checksums.py"


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(machine_folder: Path) -> dict[str, str] | None:
    path = machine_folder / CHECKSUMS
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _name(path: Path) -> str:
    """``<notebook>/<file>``: a file's key in its machine's checksums."""
    return f"{path.parent.name}/{path.name}"


def note_checksums(machine_folder: Path, files: Iterable[Path]) -> Path:
    """Add (or replace) the checksums of ``files`` in the machine's checksums.json, written
    whole by a rename; return its path."""
    sums = _manifest(machine_folder) or {}
    sums.update({_name(Path(f)): sha256_of(Path(f)) for f in files})
    path = machine_folder / CHECKSUMS
    tmp = machine_folder / f".{CHECKSUMS}.tmp"
    tmp.write_text(json.dumps(dict(sorted(sums.items())), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def write_checksums(machine_folder: Path) -> Path:
    """Write ``machine_folder/checksums.json`` anew from the files there now (after a recording
    was removed or changed on purpose); return its path."""
    (Path(machine_folder) / CHECKSUMS).unlink(missing_ok=True)
    files = [f for f in sorted(Path(machine_folder).glob("*/*")) if f.is_file()]
    return note_checksums(Path(machine_folder), files)


def checksum_problem(path: Path) -> str | None:
    """What is wrong with a recording's or attachment's file against its machine's checksums,
    naming the file and the fix; None when it is whole."""
    machine_folder = path.parent.parent
    manifest = machine_folder / CHECKSUMS
    restore = f"restore it with `git checkout -- {path}` or re-record it"
    if path.is_symlink():
        return f"{path} is a link; recordings and attachments are plain files: {restore}"
    if not path.is_file():
        return f"{path} is missing: {restore}"
    sums = _manifest(machine_folder)
    if sums is None:
        return (
            f"{manifest} is missing or unreadable, so {path} cannot be checked: "
            f"`git checkout -- {manifest}`, or `{WRITE} {machine_folder}` if its files are sound"
        )
    want = sums.get(_name(path))
    if want is None:
        return (
            f"{path} has no checksum in {manifest}: if you made it on purpose, "
            f"`{WRITE} {machine_folder}`"
        )
    if sha256_of(path) != want:
        return f"{path} is not the file that was recorded (its sha256 differs from {manifest}): {restore}"
    return None


def stale_checksums(machine_folder: Path) -> list[str]:
    """The entries of a machine's checksums.json whose file is gone, as problems naming the fix."""
    sums = _manifest(machine_folder) or {}
    return [
        f"{machine_folder / CHECKSUMS} lists {name}, which is not there: restore it with "
        f"`git checkout`, or `{WRITE} {machine_folder}` if it was removed on purpose"
        for name in sorted(sums)
        if not (machine_folder / name).is_file()
    ]
