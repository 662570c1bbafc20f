"""The environment header of a recording: machine, versions, date, commit, parameters."""

from __future__ import annotations

import datetime as _dt
import functools
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
