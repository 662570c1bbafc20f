"""Run or replay: ``run_or_replay`` measures live where the hardware is and replays elsewhere,
saying which machine's numbers a notebook shows and why.

A replay uses ``COURSE_REPLAY_MACHINE``'s recording, else this machine's, else that of the
recorded machine with the most GPUs (then the newest recording, then the name)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import checks, codec, config, hardware
from .fingerprints import fingerprint
from .footprints import footprint_sentence
from .machines import machine_folders
from .notebook_reader import experiments_in_notebook
from .store import (
    describe_machine,
    environment_header,
    load,
    read_header,
    recorded_machine_names,
    recordings_of,
    rerecord_command,
    save,
)

# characters per line of Run.describe(): a notebook's output, or the site, shows them whole
DESCRIBE_WIDTH = 100


@dataclasses.dataclass
class Choice:
    """Which recording a replay uses, and the reason in words."""

    path: Path
    machine: str
    reason: str


def _this_machine_name() -> str | None:
    return describe_machine()["machine"] if hardware.gpu_count() else None


def _most_gpus(headers: dict[str, dict[str, Any]]) -> str:
    """The machine of ``{machine: header}`` with the most GPUs, then the newest, then the name."""
    return max(
        headers, key=lambda m: (len(headers[m]["machine"].get("gpus") or []), headers[m]["date"], m)
    )


def choose_recording(notebook: str, name: str, gpus: int, root: Path | None = None) -> Choice:
    """The recording of ``notebook/name`` to replay; ``COURSE_REPLAY_MACHINE`` naming no machine
    that recorded it is a ``ValueError`` that lists those that did."""
    root = root or config.results_dir()
    candidates = {p.parts[-3]: p for p in recordings_of(notebook, name, gpus, root)}
    have = ", ".join(candidates) or "none"
    wanted = config.replay_machines()
    if wanted:
        known = recorded_machine_names(root)
        unknown = [m for m in wanted if m not in known]
        if unknown:
            raise ValueError(
                f"{config.REPLAY_MACHINE_ENV} names {', '.join(map(repr, unknown))}, not a "
                f"recorded machine; recorded machines: {', '.join(known) or 'none'}"
            )
        chosen = next((m for m in wanted if m in candidates), None)
        if chosen is None:
            raise ValueError(
                f"{config.REPLAY_MACHINE_ENV}={','.join(wanted)} has no recording of "
                f"{notebook}/{name} (it needs {gpus} GPU(s)); machines that have it: {have}"
            )
        why = (
            "chose it"
            if chosen == wanted[0]
            else f"names {wanted[0]} first, which did not record it; {chosen} is the first on "
            f"its list that did (recorded on {have})"
        )
        return Choice(candidates[chosen], chosen, f"{config.REPLAY_MACHINE_ENV} {why}")
    if not candidates:
        raise ValueError(
            f"{notebook}/{name} needs {gpus} GPU(s), this machine has {hardware.gpu_count()}, and no "
            f"recording of it is under {root}; {rerecord_command(None, [notebook])}"
        )
    here = _this_machine_name()
    if here in candidates:
        return Choice(candidates[here], here, "it is this machine")
    best = _most_gpus({m: read_header(path) for m, path in candidates.items()})
    reason = (
        "it is the only machine that recorded it"
        if len(candidates) == 1
        else f"it is the one with the most GPUs of those that recorded it ({have}); "
        f"set {config.REPLAY_MACHINE_ENV} to choose another"
    )
    return Choice(candidates[best], best, reason)


@dataclasses.dataclass
class Run:
    """What ``run_or_replay`` gives back: the value, where and when it was measured, and for a
    replay why this machine does not measure and why that recording."""

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
        return hardware.gpu_name(self.header["machine"]) or "no GPU"

    def apart_from(self, other: Run, this: str, that: str) -> str:
        """``' (<this> recorded on A, <that> on B)'`` where ``other`` comes from another machine,
        else ``''``: for a sentence that compares two runs."""
        if self.machine == other.machine:
            return ""
        return f" ({this} recorded on {self.machine}, {that} on {other.machine})"

    def describe(self) -> str:
        """One plain sentence: measured here, or replayed from which machine, why, and when."""
        m = self.header["machine"]
        versions = f"torch {m.get('torch')}, driver {m.get('driver') or '-'}"
        if self.live:
            sentence = (
                f"Measured live on this machine ({self.machine}: {self.gpu_name}, {versions})."
            )
        else:
            sentence = (
                f"Replayed from {self.machine}, not measured here: {self.reason}. Recorded there "
                f"({self.gpu_name}, {versions}) on {self.header['date'][:10]} at commit "
                f"{self.header.get('commit') or 'unknown'}."
            )
        return _filled(sentence)

    def where(self) -> str:
        """A few words for tables: ``live on X`` or ``replayed from X``."""
        return f"{'live on' if self.live else 'replayed from'} {self.machine}"


def _check_arguments(fn: Any, notebook: Any, gpus: Any, params: Any) -> None:
    if not callable(fn):
        raise TypeError(
            f"run_or_replay needs the experiment function itself, got {type(fn).__name__}"
        )
    if not isinstance(notebook, str) or not notebook:
        raise TypeError("notebook must be the notebook's name as a string, e.g. '01_pinned_memory'")
    if not checks.is_whole(gpus) or gpus < 0:
        raise ValueError(
            f"gpus must be the number of GPUs the experiment needs (0, 1, 2, ...), got {gpus!r}"
        )
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
        warnings.warn(
            f"the recording {choice.path} was made with other params than these: "
            f"{rerecord_command(choice.machine, [notebook])}",
            stacklevel=3,
        )
    reason = f"{_why_not_live(gpus)}; {choice.machine} is replayed because {choice.reason}"
    return Run(value, False, header, reason=reason)


# (notebook, machine, date, reason) described in full
_DESCRIBED: set[tuple[str, str, str, str]] = set()


def _said_once(notebook: str, run: Run) -> str:
    """The replay's full sentence the first time a notebook replays a machine's recording of a
    day, then one line that points back to it."""
    key = (notebook, run.machine, run.header["date"][:10], run.reason)
    if key in _DESCRIBED:
        return f"Replayed from {run.machine} (recorded {key[2]}), as said above."
    _DESCRIBED.add(key)
    return run.describe()


def _filled(sentence: str) -> str:
    """``sentence`` in lines of at most ``DESCRIBE_WIDTH`` characters, words never split, nor a
    size from its unit ("4.03 GiB")."""
    glued = re.sub(r"(?<=\d) (?=[KMGT]?i?B\b)", "\xa0", sentence)  # textwrap keeps \xa0 whole
    filled = textwrap.fill(glued, DESCRIBE_WIDTH, break_long_words=False, break_on_hyphens=False)
    return filled.replace("\xa0", " ")


def where_numbers_come_from(notebook: str, root: Path | None = None) -> str:
    """What a notebook's set-up cell prints first: the report of this machine where it has a
    GPU, else of the recorded machine its replays come from, and what the notebook needs."""
    here = hardware.describe()
    if hardware.gpu_count():
        return (
            hardware.report(here)
            + "\n\n"
            + _filled(footprint_sentence(notebook, here["machine"], root))
        )
    headers = {
        machine.name: read_header(sorted((machine / notebook).glob("*.json"))[0])
        for machine in machine_folders(root)
        if any((machine / notebook).glob("*.json"))
    }
    this = f"This machine ({here.get('machine')}: {here.get('cpu')}) has no GPU to measure with"
    if not headers:
        return (
            f"{this}, and no machine has recorded {notebook}: {rerecord_command(None, [notebook])}"
        )
    wanted = [m for m in config.replay_machines() if m in headers]
    if wanted:
        chosen, why = wanted[0], f"{config.REPLAY_MACHINE_ENV} chose it"
    else:
        chosen = _most_gpus(headers)
        why = "it has the most GPUs of the machines that recorded this notebook"
    sentence = (
        f"{this}: the experiments below replay recordings made on {chosen} ({why}; each experiment "
        f"says where its numbers come from)."
    )
    return (
        _filled(sentence)
        + "\n\n"
        + hardware.report(headers[chosen]["machine"])
        + "\n\n"
        + _filled(footprint_sentence(notebook, chosen, root))
    )


def recorded_runs(notebook: str, name: str, root: Path | None = None) -> dict[str, Run]:
    """``{machine: Run}`` of every recorded machine's recording of ``notebook/name``."""
    found = {}
    for path in recordings_of(notebook, name, 0, root):
        header, value = load(path)
        found[path.parts[-3]] = Run(
            value, False, header, reason=f"the recording of {path.parts[-3]}"
        )
    return found


def note_footprint(notebook: str, name: str, used: hardware.Footprint) -> None:
    """Append one live experiment's footprint, as a JSON line, to ``COURSE_FOOTPRINT_OUT``
    where it is set (``gather_footprints`` reads the lines)."""
    out = config.footprint_out()
    if out is None:
        return
    line = {
        "notebook": notebook,
        "experiment": name,
        "quick": config.quick_mode(),
        **dataclasses.asdict(used),
    }
    with out.open("a") as f:
        f.write(json.dumps(line) + "\n")


def run_or_replay(
    fn: Callable[..., Any],
    *,
    notebook: str,
    gpus: int = 1,
    params: dict[str, Any] | None = None,
    name: str | None = None,
) -> Run:
    """Run experiment ``fn(**params)`` live if this machine has ``gpus`` GPUs, else replay it.

    A live value goes through the recordings' encoding too, so live and replay hand over the
    same types; with ``COURSE_RECORD=1`` a full-size live run with ``gpus >= 1`` is saved.
    """
    _check_arguments(fn, notebook, gpus, params)
    fp = fingerprint(fn)  # refuses lambdas, partials and closures first
    params = params or {}
    name = name or fn.__name__
    live = hardware.gpu_count() >= gpus and not (gpus and config.replay_forced())
    if not live:
        run = _replay(notebook, name, gpus, fp, params)
        _say(_said_once(notebook, run))
        return run
    if (limit := config.gpu_memory_limit_bytes()) is not None:
        hardware.limit_gpu_memory(limit)
    held = hardware.memory_in_use()
    hardware.start_footprint()
    value = fn(**params)
    note_footprint(notebook, name, hardware.footprint())
    hardware.free_memory(baseline=held)
    run = Run(codec.round_trip(value), True, environment_header(notebook, name, fp, params))
    if gpus and config.recording_enabled() and not config.quick_mode():
        run.saved_to = save(notebook, name, value, fp=fp, params=params)
    _say(run.describe() + (f" Recorded to {run.saved_to}." if run.saved_to else ""))
    return run


def _say(line: str) -> None:
    """``line`` and its newline in one write: print() writes them apart, and Jupyter can flush
    between the two, leaving an output cell that holds only the newline."""
    sys.stdout.write(line + "\n")


def replay_plan(notebook_path: Path | str) -> tuple[list[str], list[str], str]:
    """For a notebook on this machine: (experiments that run live, experiments that replay,
    one line saying which machine the replays come from and why, or why none can)."""
    path = Path(notebook_path)
    found = experiments_in_notebook(path)
    have = hardware.gpu_count()
    live = [
        n for n, e in found.items() if e.gpus <= have and not (e.gpus and config.replay_forced())
    ]
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
