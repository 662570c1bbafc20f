"""The flat export: ``results/index.jsonl``, one row per machine x figure or verdict."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import config, hardware, timing
from .machines import machine_folders
from .store import load
from .validation import DEVICE_CLOCKS, leaves

INDEX_NAME = "index.jsonl"


def index_row(header: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """One line of ``results/index.jsonl``: the recording's machine and versions, and ``fields``."""
    m = header["machine"]
    row = {"kind": None, "machine": m.get("machine"), "gpu": hardware.gpu_name(m)}
    row |= {key: m.get(key) for key in ("driver", "torch", "cuda", "nccl")}
    row |= {key: header.get(key) for key in ("date", "commit", "notebook", "experiment")}
    row |= dict.fromkeys(("name", "value", "unit", "spread", "verdict"))
    return row | fields


def figure_rows(root: Path | None = None) -> list[dict[str, Any]]:
    """One ``figure`` row per timing in every recording: GB/s for a device-timed copy, else
    seconds per call."""
    rows = []
    for path in [p for folder in machine_folders(root) for p in sorted(folder.glob("*/*.json"))]:
        header, value = load(path)
        for where, t in leaves(value):
            if not isinstance(t, timing.Timing):
                continue
            rate = bool(t.nbytes) and t.method in DEVICE_CLOCKS
            rows.append(
                index_row(
                    header,
                    kind="figure",
                    name=where.removeprefix("result"),
                    label=t.label,
                    value=t.gbps if rate else t.median_s,
                    unit="GB/s" if rate else "s",
                    spread=t.spread,
                    bytes=t.nbytes,
                    method=t.method,
                    samples=len(t.samples_s),
                )
            )
    return sorted(rows, key=_sort_key)


def _sort_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k)) for k in ("kind", "machine", "notebook", "experiment", "name"))


def read_index(root: Path | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``results/index.jsonl`` (of one ``kind``, 'figure' or 'claim', if given)."""
    path = (root or config.results_dir()) / INDEX_NAME
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if kind is None or r["kind"] == kind]


def write_index(rows: Iterable[Mapping[str, Any]], root: Path | None = None) -> Path:
    """Write ``results/index.jsonl``, one sorted JSON object a line; return its path."""
    path = (root or config.results_dir()) / INDEX_NAME
    text = "".join(json.dumps(row, allow_nan=True) + "\n" for row in sorted(rows, key=_sort_key))
    path.write_text(text)
    return path
