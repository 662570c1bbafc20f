"""The memory each notebook needs, as ``make gpu-all`` measured it live:
``results/<machine>/footprints.json`` holds ``{"full" | "quick": {notebook: {experiment: {"gpu":
[bytes per GPU], "pinned": bytes or null, "host": bytes or null}}}}``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .. import hardware, timing
from .machines import machine_folders

FOOTPRINTS = "footprints.json"
MODES = ("full", "quick")


def gather_footprints(lines: Path, machine_folder: Path) -> Path:
    """Merge the JSON lines ``run_or_replay`` appended to ``lines`` into
    ``machine_folder/footprints.json`` (written whole by a rename); return its path."""
    path = Path(machine_folder) / FOOTPRINTS
    found = read(machine_folder)
    if Path(lines).exists():
        for line in Path(lines).read_text().splitlines():
            row = json.loads(line)
            mode = "quick" if row["quick"] else "full"
            kept = {k: row[k] for k in ("gpu", "pinned", "host")}
            found.setdefault(mode, {}).setdefault(row["notebook"], {})[row["experiment"]] = kept
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=".footprints-", delete=False
    ) as f:
        json.dump(found, f, indent=1, sort_keys=True)
    os.replace(f.name, path)
    return path


def read(machine_folder: Path) -> dict[str, Any]:
    """``machine_folder/footprints.json`` as a dict (empty where there is none); a file that is
    not one is a ValueError naming it and the fix."""
    path = Path(machine_folder) / FOOTPRINTS
    if not path.exists():
        return {}
    problems = footprint_problems(path)
    if problems:
        raise ValueError("; ".join(problems))
    return json.loads(path.read_text())


def footprint_problems(path: Path) -> list[str]:
    """What is wrong with a ``footprints.json``; empty is good."""
    fix = f"{path}: re-record the machine, or `git checkout -- {path}`"
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        return [f"{fix} (it is not JSON: {err})"]
    if not isinstance(found, dict) or not set(found) <= set(MODES):
        return [f"{fix} (its top level must be {{'full': ..., 'quick': ...}})"]
    for mode, notebooks in found.items():
        for notebook, experiments in notebooks.items():
            for name, used in experiments.items():
                ok = (
                    isinstance(used, dict)
                    and set(used) == {"gpu", "pinned", "host"}
                    and isinstance(used["gpu"], list)
                    and all(isinstance(b, int) and b >= 0 for b in used["gpu"])
                    and all(
                        v is None or (isinstance(v, int) and v >= 0)
                        for v in (used["pinned"], used["host"])
                    )
                )
                if not ok:
                    return [
                        f"{fix} ({mode}/{notebook}/{name} is not gpu, pinned and host in bytes)"
                    ]
    return []


def notebook_footprint(machine_folder: Path, notebook: str, mode: str) -> hardware.Footprint | None:
    """The most any experiment of ``notebook`` held in ``mode`` on that machine (each figure the
    largest of its experiments'; ``gpu`` the largest on any one GPU), or None where unmeasured."""
    experiments = read(machine_folder).get(mode, {}).get(notebook, {})
    if not experiments:
        return None

    def most(key: str) -> int | None:
        values = [u[key] for u in experiments.values() if u[key] is not None]
        return max(values) if values else None

    gpu = max((b for u in experiments.values() for b in u["gpu"]), default=0)
    return hardware.Footprint((gpu,), most("pinned"), most("host"))


def _amount(n: int | None) -> str:
    return "an unmeasured amount" if n is None else timing.format_bytes(n)


def footprint_sentence(notebook: str, machine: str | None = None, root: Path | None = None) -> str:
    """What ``notebook`` needs, in words, as ``machine`` (else the recorded machine with the most
    GPUs that measured it) measured it live, at full size and in quick mode."""
    measured = [
        f for f in machine_folders(root) if any(notebook in read(f).get(m, {}) for m in MODES)
    ]
    # this machine's, else the one with the most GPUs (names start with the count: "2xNVIDIA-H200")
    chosen = [f for f in measured if f.name == machine] or sorted(
        measured, key=lambda f: (int(n) if (n := f.name.partition("x")[0]).isdigit() else 0, f.name)
    )[-1:]
    if not chosen:
        return (
            f"Memory: no machine has measured what {notebook} needs yet (make gpu-all measures it)."
        )
    parts = []
    for mode in MODES:
        used = notebook_footprint(chosen[0], notebook, mode)
        if used is not None:
            parts.append(
                f"{'at full size' if mode == 'full' else 'in quick mode'} up to {_amount(used.gpu[0])} "
                f"on one GPU, {_amount(used.pinned)} of pinned host memory and {_amount(used.host)} for "
                f"the notebook's process (pinned included)"
            )
    return f"Memory, as {chosen[0].name} measured it live: " + "; ".join(parts) + "."
