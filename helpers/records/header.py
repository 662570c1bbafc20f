"""The environment header of a recording: machine, versions, date, commit, parameters."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import subprocess
from pathlib import Path
from typing import Any

from .. import codec, config, hardware

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
def _machine() -> dict[str, Any]:
    return hardware.describe()


def _commit() -> str | None:
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
