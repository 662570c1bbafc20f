"""How ``datamove`` prints: rows flushed as measured, progress on stderr, tables, JSON and CSV."""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from .. import hardware, tables


def say(line: str = "", stream: TextIO | None = None) -> None:
    """Print one line and flush it, so a pipe or a log sees each row when it is measured."""
    out = stream or sys.stdout
    out.write(line + "\n")
    out.flush()


class Progress:
    """A progress line on stderr (``all_reduce: 3/8 done, 12 s``), rewritten in place on a
    terminal and left out elsewhere (a log gets the rows, not the bar)."""

    def __init__(self, what: str, total: int, force: bool = False) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = sys.stderr
        self.shown = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()

    def step(self, what: str | None = None) -> None:
        """One more row measured (``what``: a new label, e.g. the next op)."""
        self.done += 1
        self.what = what or self.what
        if self.shown:
            seconds = time.monotonic() - self.start
            self.stream.write(
                f"\r{self.what}: {self.done}/{self.total} done, {seconds:.0f} s\x1b[K"
            )
            self.stream.flush()

    def close(self) -> None:
        """Clear the line (the rows stay on stdout)."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def table(rows: list[dict[str, Any]], columns: dict[str, str]) -> str:
    """Rows as ``helpers.tables.Table`` text; ``columns`` maps a row key to its heading."""
    return tables.Table(
        list(columns.values()), [[row.get(key) for key in columns] for row in rows]
    ).to_text()


def matrix_table(title: str, matrix: Sequence[Sequence[float | None]], unit: str) -> str:
    """A GPU x GPU matrix (row: from, column: to) as ``helpers.tables.Table`` text."""
    n = len(matrix)
    rows = [[f"cuda:{i}", *row] for i, row in enumerate(matrix)]
    return (
        f"{title} ({unit}; row: from, column: to)\n"
        + tables.Table(["from", *(f"cuda:{j}" for j in range(n))], rows).to_text()
    )


def output_mode(args: argparse.Namespace) -> str:
    """The output asked for: "json" (``--json``), "csv" (``--csv``) or "text"."""
    if getattr(args, "json", False):
        return "json"
    return "csv" if getattr(args, "csv", False) else "text"


def csv_header(fields: Iterable[str]) -> csv.DictWriter:
    """A CSV writer on stdout of the rows' ``fields``, its header written."""
    writer = csv.DictWriter(
        sys.stdout, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    return writer


class StreamedRows:
    """Rows printed as measured, as text or CSV (``--json``: kept for the end); ``columns``: key ->
    (heading, width, format)."""

    def __init__(
        self, args: argparse.Namespace, columns: dict[str, tuple[str, int, Callable[[Any], str]]]
    ) -> None:
        self.columns, self.mode = columns, output_mode(args)
        self.rows: list[dict[str, Any]] = []
        self.writer: Any = None

    def header(self) -> None:
        if self.mode == "text":
            say("  ".join(head.rjust(width) for head, width, _ in self.columns.values()))
        elif self.mode == "csv":
            self.writer = csv_header(self.columns)
            sys.stdout.flush()

    def add(self, row: dict[str, Any]) -> None:
        """Keep ``row`` and print it now."""
        self.rows.append(row)
        if self.mode == "text":
            say(
                "  ".join(
                    ("-" if row.get(key) is None else show(row[key])).rjust(width)
                    for key, (_, width, show) in self.columns.items()
                )
            )
        elif self.mode == "csv":
            self.writer.writerow(row)
            sys.stdout.flush()


def emit(
    args: argparse.Namespace, payload: dict[str, Any], fields: Iterable[str], text: str
) -> None:
    """Print the payload as JSON (``--json``), its rows' ``fields`` as CSV (``--csv``) or text."""
    mode = output_mode(args)
    if mode == "json":
        say(json.dumps(payload, indent=2, allow_nan=True, default=str))
    elif mode == "csv":
        csv_header(fields).writerows(payload["rows"])
        sys.stdout.flush()
    else:
        say(text)


def machine_facts() -> dict[str, Any]:
    """Where a figure was measured, for the JSON header: machine, GPU, driver, versions, date."""
    info = hardware.describe()
    gpus = info.get("gpus") or []
    return {
        "machine": info["machine"],
        "gpu": gpus[0]["name"] if gpus else None,
        "driver": info.get("driver"),
        "torch": info.get("torch"),
        "cuda": info.get("cuda"),
        "nccl": info.get("nccl"),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
