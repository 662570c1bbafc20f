"""Validating recordings and a machine's folder, and the gaps a machine declares."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import codec, hardware, timing, trace
from .checksums import CHECKSUMS, stale_checksums
from .footprints import FOOTPRINTS, footprint_problems
from .machines import machine_folders
from .store import RecordingError, load

# Clocks that time the device's work itself. A rate from another clock can describe what moved
# no bytes (a pinned allocation, a call that returns before its copy) and is not checked.
DEVICE_CLOCKS = ("cuda events", "torch.utils.benchmark")
_LEAVES = (timing.Timing, trace.Interval, codec.Attachment)


def leaves(value: Any, where: str = "result") -> Iterable[tuple[str, Any]]:
    """(position, object) of every Timing, Interval and Attachment in a decoded result."""
    if isinstance(value, _LEAVES):
        yield where, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from leaves(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{where}[{k!r}]")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{where}[{i}]")


def _attachments(value: Any) -> list[codec.Attachment]:
    return [leaf for _, leaf in leaves(value) if isinstance(leaf, codec.Attachment)]


def _bandwidths(value: Any) -> Iterable[tuple[str, int, float]]:
    """(label, bytes, GB/s) of every device-timed Timing with bytes in a decoded result."""
    for _, t in leaves(value):
        if (
            isinstance(t, timing.Timing)
            and t.nbytes
            and t.median_s > 0
            and t.method in DEVICE_CLOCKS
        ):
            yield t.label or "a timing", t.nbytes, t.gbps


def _bad_times(value: Any) -> Iterable[str]:
    """Where a decoded result holds an interval that ends before it starts or at no finite time
    (a Timing with such samples is refused when it is decoded: ``timing.Timing`` checks them)."""
    for where, leaf in leaves(value):
        if isinstance(leaf, trace.Interval) and not (
            math.isfinite(leaf.start_us)
            and math.isfinite(leaf.end_us)
            and leaf.end_us >= leaf.start_us
        ):
            yield f"{where} has an interval {leaf.name!r} from {leaf.start_us} to {leaf.end_us} us"


def validate_recording(path: Path, machine: str | None = None) -> list[str]:
    """Problems with one recording file, each naming it; empty when it is sound: it loads, its
    header names its place, it is full size, its attachments are plain files beside it, and no
    time or device-timed bandwidth is impossible (over 1.1 x the memory bandwidth, or, for bytes
    that fit in the L2 cache, over what the SMs move through it)."""
    path = Path(path)
    try:
        header, value = load(path)
    except RecordingError as err:
        return [str(err)]
    place = (machine or path.parts[-3], path.parent.name, path.stem)
    said = (header["machine"].get("machine"), header["notebook"], header["experiment"])
    problems = [
        f"{path}: its header says {key} {found!r}, its place says {want!r}"
        for key, found, want in zip(("machine", "notebook", "experiment"), said, place, strict=True)
        if found != want
    ]
    if header["quick"]:
        problems.append(f"{path}: it is a quick-mode run; recordings are made at full size")
    if not isinstance(header["fingerprint"], str) or not header["fingerprint"]:
        problems.append(f"{path}: its header has no fingerprint")
    for attachment in _attachments(value):
        file = Path(attachment.path)
        if file.parent != path.parent or file.is_symlink() or not file.is_file():
            problems.append(
                f"{path}: its attachment {file.name} is missing or not a plain file beside it"
            )
    problems += [f"{path}: {bad}" for bad in _bad_times(value)]
    info = header["machine"]
    memory, cache = hardware.ceiling_gbps(info), hardware.cache_bytes(info)
    for label, nbytes, gbps in _bandwidths(value):
        if nbytes <= cache and gbps > (most := hardware.cache_ceiling_gbps(info)):
            problems.append(
                f"{path}: {label} at {gbps:.1f} GB/s is impossible even from cache: its "
                f"{nbytes / 2**20:g} MiB fit in the L2 cache ({cache / 2**20:g} MiB), and the SMs "
                f"move at most {most:.0f} GB/s through it"
            )
        elif nbytes > cache and gbps > 1.1 * memory:
            problems.append(
                f"{path}: {label} at {gbps:.1f} GB/s is over 1.1 x the GPUs' memory bandwidth "
                f"({memory:.0f} GB/s), and its {nbytes / 2**20:g} MiB are too many for the L2 "
                f"cache ({cache / 2**20:g} MiB)"
            )
    return problems


def validate_machine_folder(folder: Path, machine: str) -> list[str]:
    """``validate_recording`` for every recording under ``results/<machine>``, plus the files
    there that are neither a recording nor one's attachment, and any link. Empty is good."""
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
    problems += stale_checksums(folder)
    for item in sorted(folder.rglob("*")):
        if item.is_symlink():
            problems.append(f"{item}: a link; recordings are plain files")
        elif item == folder / FOOTPRINTS:
            problems += footprint_problems(item)
        elif item in (folder / GAPS_FILE, folder / "run_times.json", folder / CHECKSUMS):
            continue  # run_times.json: seconds per notebook and cell (tools/notebook_times.py checks it)
        elif item.is_file() and item not in attached and item not in recordings:
            problems.append(f"{item}: neither a recording nor a file one attaches")
        elif item.is_dir() and item.parent != folder:
            problems.append(f"{item}: a folder inside a notebook's recordings")
    return problems


GAPS_FILE = "gaps.json"


def recording_gaps(machine_folder: Path) -> dict[str, str]:
    """``results/<machine>/gaps.json``, ``{"<notebook>/<experiment>": "why"}``: experiments a
    machine is known not to have (written by hand when no such machine can be lent), which are
    not reported missing. Empty without the file."""
    path = Path(machine_folder) / GAPS_FILE
    if not path.exists():
        return {}
    try:
        gaps = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RecordingError(
            f'{path} is not readable JSON ({err}): write {{"<notebook>/<experiment>": "why"}}'
        ) from err
    if not isinstance(gaps, dict) or not all(
        isinstance(k, str) and k.count("/") == 1 and isinstance(v, str) and v.strip()
        for k, v in gaps.items()
    ):
        raise RecordingError(
            f'{path} must map "<notebook>/<experiment>" to a sentence saying why it is not '
            f"recorded on this machine"
        )
    return gaps


def gap_machines(notebook: str, name: str, root: Path | None = None) -> set[str]:
    """The recorded machines whose gaps.json lists ``notebook/name``."""
    return {
        folder.name
        for folder in machine_folders(root)
        if f"{notebook}/{name}" in recording_gaps(folder)
    }
