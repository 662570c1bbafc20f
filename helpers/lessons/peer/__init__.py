"""Notebook 05_device_to_device, a module per section: ``links`` (1; every pair at once),
``devices`` (2, 8), ``copies`` (3-6), ``overlap`` (7), ``table`` (the claims). Each turns the
runs (live or replayed) into typed facts, tables, figures and sentences; it measures nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ... import tables

NOTEBOOK = "05_device_to_device"


def pair_name(pair: str) -> str:
    """'0->1' -> 'cuda:0 -> cuda:1', '0<->1' -> 'cuda:0 <-> cuda:1'."""
    arrow = "<->" if "<->" in pair else "->"
    return "cuda:" + pair.replace(arrow, f" {arrow} cuda:")


def pair_ends(pair: str) -> tuple[int, int]:
    """'0->1' or '0<->1' -> (0, 1)."""
    i, j = re.split(r"<?->", pair)
    return int(i), int(j)


def span(low: str, high: str) -> str:
    """'99%' when both ends print alike, else '98% to 99%'."""
    return low if low == high else f"{low} to {high}"


def stream_labels(names: Mapping[tuple[int | None, int | None], str]) -> dict[int, str]:
    """{stream id: 'side stream s0'} from {(device, stream): 'cuda:0 side stream s0'}."""
    by_id: dict[int, set[str]] = {}
    for (_, stream), name in names.items():
        if stream is not None:
            by_id.setdefault(stream, set()).add(name.split(" ", 1)[1])
    return {stream: found.pop() for stream, found in by_id.items() if len(found) == 1}


def matrix(
    n: int, cells: Mapping, fmt: object, caption: str, title: str = "", unit: str = ""
) -> tables.Table:
    """A row per source GPU, a column per destination, ``cells`` by pair ('0->1')."""
    columns = ["from", *[(f"to cuda:{j}", unit, fmt) for j in range(n)]]
    table = tables.Table(columns, title=title, caption=caption)
    for i in range(n):
        table.add(f"cuda:{i}", *[cells.get(f"{i}->{j}") for j in range(n)])
    return table
