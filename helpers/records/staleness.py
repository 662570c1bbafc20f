"""Staleness: every recording compared with the notebook that should have made it, machine by
machine, and the command that re-records what is missing, stale or broken."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path

from .machines import machine_folders
from .notebook_reader import NotebookExperiment, experiments_in_notebook
from .store import RecordingError, gpu_total, read_header, rerecord_command
from .validation import GAPS_FILE, recording_gaps, validate_recording


@dataclasses.dataclass
class Problem:
    """One thing wrong with the recordings: on which machine (None: on none), and what."""

    machine: str | None
    notebook: str
    text: str


def _check_one_recording(path: Path, machine: str, expected: NotebookExperiment) -> list[str]:
    problems = validate_recording(path, machine)
    if problems:
        return problems
    header = read_header(path)
    if expected.fingerprint and header["fingerprint"] != expected.fingerprint:
        problems.append(
            f"{path}: stale: made from other code (recorded fingerprint "
            f"{header['fingerprint']}, the notebook's is {expected.fingerprint})"
        )
    if expected.params is not None and header["params"] != expected.params:
        changed = sorted(
            k
            for k in set(header["params"]) | set(expected.params)
            if header["params"].get(k) != expected.params.get(k)
        )
        problems.append(
            f"{path}: stale: made with other params ({', '.join(changed)} differ "
            f"from the notebook's full-size params)"
        )
    return problems


def _check_machine(
    folder: Path, notebook: str, found: Mapping[str, NotebookExperiment]
) -> list[str]:
    machine = folder.parent.name
    gpus_here = gpu_total(sorted(folder.glob("*.json"))[0])
    try:
        gaps = recording_gaps(folder.parent)
    except RecordingError as err:
        return [str(err)]
    problems = [
        f"{folder.parent / GAPS_FILE}: lists {key}, which the notebook no longer has"
        for key in gaps
        if key.split("/")[0] == notebook and key.split("/")[1] not in found
    ]
    for name, experiment in found.items():
        path = folder / f"{name}.json"
        listed = f"{notebook}/{name}" in gaps
        if listed and path.exists():
            problems.append(
                f"{folder.parent / GAPS_FILE}: lists {notebook}/{name}, which is recorded now: "
                f"remove that line"
            )
        elif 0 < experiment.gpus <= gpus_here and not path.exists() and not listed:
            problems.append(f"{path}: missing; {machine} has the notebook's other recordings")
        elif path.exists():
            problems += _check_one_recording(path, machine, experiment)
    for path in sorted(folder.glob("*.json")):
        if path.stem not in found or found[path.stem].gpus == 0:
            problems.append(
                f"{path}: no experiment {path.stem} with gpus >= 1 in the notebook any more"
            )
    return problems


def check_recordings(notebooks: Iterable[Path | str], root: Path | None = None) -> list[Problem]:
    """Everything wrong with the recordings of these notebooks, machine by machine: missing,
    stale, broken or left over, and problems reading the notebooks themselves. Empty is good."""
    if isinstance(notebooks, (str, Path)):
        raise TypeError(
            f"check_recordings takes a list of notebook paths; got one path, {str(notebooks)!r}: "
            f"pass [{str(notebooks)!r}]"
        )
    machines = machine_folders(root)
    problems: list[Problem] = []
    names = set()
    for nb_path in map(Path, notebooks):
        notebook = nb_path.stem
        names.add(notebook)
        found = experiments_in_notebook(nb_path)
        problems += [
            Problem(None, notebook, f"{notebook}/{e.name}: {text}")
            for e in found.values()
            for text in e.problems
        ]
        folders = [m / notebook for m in machines if any((m / notebook).glob("*.json"))]
        for e in found.values():
            if e.gpus > 0 and not any((f / f"{e.name}.json").exists() for f in folders):
                problems.append(
                    Problem(None, notebook, f"{notebook}/{e.name}: no machine has recorded it")
                )
        for folder in folders:
            problems += [
                Problem(folder.parent.name, notebook, text)
                for text in _check_machine(folder, notebook, found)
            ]
    for folder in [f for m in machines for f in sorted(m.iterdir())]:
        if folder.is_dir() and folder.name not in names:
            problems.append(
                Problem(
                    folder.parent.name,
                    folder.name,
                    f"{folder}: recordings of a notebook that does not exist",
                )
            )
    return problems


def format_problems(problems: Iterable[Problem]) -> str:
    """Problems grouped by machine, each group ending with the command that re-records it."""
    groups: dict[str | None, list[Problem]] = {}
    for problem in problems:
        groups.setdefault(problem.machine, []).append(problem)
    lines = []
    for machine in sorted(groups, key=lambda m: (m is not None, m or "")):
        title = machine or "no machine (the notebook itself, or nothing recorded anywhere)"
        lines.append(f"{title}:")
        lines += [f"  - {p.text}" for p in groups[machine]]
        lines.append(
            f"  re-record {rerecord_command(machine, [p.notebook for p in groups[machine]])}"
        )
    return "\n".join(lines)
