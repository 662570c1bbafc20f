"""Choosing the recording a replay uses: ``COURSE_REPLAY_MACHINE``, else this machine, else
the recorded machine with the most GPUs (then the newest recording, then the name)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import config, hardware
from .header import describe_machine
from .store import gpu_total, read_header, recorded_machine_names, recordings_of, rerecord_command


@dataclasses.dataclass
class Choice:
    """Which recording a replay uses, and the reason in words."""

    path: Path
    machine: str
    reason: str


def _this_machine_name() -> str | None:
    return describe_machine()["machine"] if hardware.gpu_count() else None


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
            else f"lists it first of those that recorded it ({have})"
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
    best = max(
        candidates, key=lambda m: (gpu_total(candidates[m]), read_header(candidates[m])["date"], m)
    )
    reason = (
        "it is the only machine that recorded it"
        if len(candidates) == 1
        else f"it is the one with the most GPUs of those that recorded it ({have}); "
        f"set {config.REPLAY_MACHINE_ENV} to choose another"
    )
    return Choice(candidates[best], best, reason)
