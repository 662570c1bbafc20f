"""Claims tables: each claim of a source document, what was measured, and a computed verdict.

A verdict is never typed in: ``ClaimsTable.add`` takes ``holds``, a bool computed from the
measurement (or ``None`` when the claim cannot be tested on this hardware), and turns it into
"holds", "does not hold here" or "not testable here". Every notebook ends with its table.

Taught in 00_start_here (how to read the table); used by every notebook.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import config, records
from .records import Run

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold here"
NOT_TESTABLE = "not testable here"


@dataclass
class Claim:
    """One row: the claim, its source, what was measured, where, and the verdict.

    Taught in 00_start_here.
    """

    text: str
    source: str
    measured: str
    verdict: str
    where: str


def _as_verdict(holds: object) -> str:
    if holds is None:
        return NOT_TESTABLE
    if type(holds).__name__ in ("bool", "bool_"):  # Python or numpy bool
        return HOLDS if bool(holds) else DOES_NOT_HOLD
    raise TypeError(
        f"holds must be a bool computed from the measurement (or None if not testable), "
        f"got {holds!r}; write e.g. holds=ratio < 2"
    )


class ClaimsTable:
    """The claims a notebook tested, rendered as a Markdown table in Jupyter.

    Taught in 01_pinned_memory.
    """

    def __init__(self, notebook: str) -> None:
        if not isinstance(notebook, str) or not notebook:
            raise TypeError("ClaimsTable needs the notebook's name, e.g. ClaimsTable('01_pinned_memory')")
        self.notebook = notebook
        self.claims: list[Claim] = []

    def add(self, claim: str, *, source: str, measured: str, holds: object,
            run: Run | None = None) -> Claim:
        """Add a claim with its computed verdict; ``run`` says whether it was live or replayed."""
        for name, value in (("claim", claim), ("source", source), ("measured", measured)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"{name} must be a non-empty string")
        where = run.where() if run is not None else "this machine"
        row = Claim(claim, source, measured, _as_verdict(holds), where)
        self.claims.append(row)
        self._export(row, run)
        return row

    def _export(self, row: Claim, run: Run | None) -> None:
        """While ``make replay-all`` replays, append a replayed claim's verdict to the index file."""
        out = config.index_out()
        if out is None or run is None or run.live:
            return
        line = records.index_row(run.header, kind="claim", notebook=self.notebook, name=row.text,
                                 verdict=row.verdict, source=row.source, measured=row.measured)
        with out.open("a") as f:
            f.write(json.dumps(line, allow_nan=True) + "\n")

    def verdicts(self) -> dict[str, str]:
        """``{claim: verdict}``, for tests and exercises."""
        return {c.text: c.verdict for c in self.claims}

    def to_markdown(self) -> str:
        rows = ["| claim | source | measured | where | verdict |", "| --- | --- | --- | --- | --- |"]
        for c in self.claims:
            cells = [c.text, c.source, c.measured, c.where, f"**{c.verdict}**"]
            rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        return "\n".join(rows)

    def _repr_markdown_(self) -> str:
        return f"### Claims tested in {self.notebook}\n\n" + self.to_markdown()

    def __str__(self) -> str:
        return self.to_markdown()
