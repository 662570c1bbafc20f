"""The claims table every notebook ends with, and ``WhatWeSee``: sentences computed from the data
and checked statements of the markdown."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TypeVar

from .. import config, records
from ..records import Run
from ..tables import Table
from .verdicts import (
    BORDERLINE,
    BORDERLINE_RULE,
    DOES_NOT_HOLD,
    FAILED_CHECK,
    HOLDS,
    Comparison,
    as_verdict,
)

T = TypeVar("T")


@dataclass
class Claim:
    """One row of the claims table; ``comparison`` where the claim is a number."""

    text: str
    source: str
    measured: str
    verdict: str
    where: str
    comparison: Comparison | None = None


class ClaimsTable:
    """The claims a notebook tested, shown through ``tables.Table``."""

    def __init__(self, notebook: str) -> None:
        if not isinstance(notebook, str) or not notebook:
            raise TypeError(
                "ClaimsTable needs the notebook's name, e.g. ClaimsTable('01_pinned_memory')"
            )
        self.notebook = notebook
        self.claims: list[Claim] = []

    def add(
        self, claim: str, *, source: str, measured: str, holds: object, run: Run | None = None
    ) -> Claim:
        """Add a claim with its computed verdict: ``holds`` is a ``compare(...)`` (value,
        threshold, spread), a bool, or None; ``run`` says whether it was live or replayed."""
        for name, value in (("claim", claim), ("source", source), ("measured", measured)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"{name} must be a non-empty string")
        where = run.where() if run is not None else "this machine"
        holds = judged(holds, run, self.notebook, claim)
        comparison = holds if isinstance(holds, Comparison) else None
        row = Claim(claim, source, measured, as_verdict(holds), where, comparison)
        self.claims.append(row)
        if comparison is not None:
            fields = dict(
                value=comparison.value.value,
                unit=comparison.value.unit,
                spread=comparison.value.spread,
                threshold=comparison.threshold,
                holds_if=comparison.holds_if,
                holds_if_text=comparison.holds_if_text(),
                runs=list(comparison.runs),
                band=comparison.band,
                between=list(comparison.between) if comparison.between else None,
            )
        else:
            fields = dict(value=None if holds is None else bool(holds))
        _export(
            self.notebook,
            run,
            kind="claim",
            name=row.text,
            verdict=row.verdict,
            source=row.source,
            measured=row.measured,
            **fields,
        )
        return row

    def verdicts(self) -> dict[str, str]:
        """``{claim: verdict}``, for tests and exercises."""
        return {c.text: c.verdict for c in self.claims}

    def table(self) -> Table:
        """The rows as a ``tables.Table``."""
        table = Table(
            ["claim", "source", "measured", "value ± spread", "holds if", "where", "verdict"],
            title=f"Claims tested in {self.notebook}",
            caption=self._note(),
            bold=["verdict"],
        )
        for c in self.claims:
            value = side = None
            if c.comparison is not None:
                v = c.comparison.value
                number = f"{v.number()} ± {v.spread_text()}" if v.spread else v.without_spread()
                notes = "; ".join(n for n in (v.few(), c.comparison.evidence()) if n)
                value = f"{number}{' ' + v.unit if v.unit else ''}{f' ({notes})' if notes else ''}"
                side = c.comparison.holds_if_text()
            table.add(c.text, c.source, c.measured, value, side, c.where, c.verdict)
        return table

    def to_markdown(self) -> str:
        """The rows as a Markdown pipe table (verdicts in bold), without title or note."""
        table = self.table()
        table.title = table.caption = ""
        return table.to_markdown()

    def _note(self) -> str:
        """The footnote on borderline verdicts, under a table that has one."""
        return _BORDERLINE_NOTE if any(c.verdict == BORDERLINE for c in self.claims) else ""

    def _repr_markdown_(self) -> str:
        note = f"\n\n*{self._note()}*" if self._note() else ""
        return f"### Claims tested in {self.notebook}\n\n" + self.to_markdown() + note

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __repr__(self) -> str:  # print() and Jupyter's plain text: the table
        return self.table().to_text()


_BORDERLINE_NOTE = f"borderline here: {BORDERLINE_RULE}"

# under results/: written by tools/run_to_run.py from the index's history
RUN_TO_RUN_FILE = "run_to_run.json"


def recorded_runs(
    machine: str, notebook: str, claim: str, comparison: Comparison
) -> tuple[tuple[float, ...], float]:
    """``(runs, band)`` of a claim from ``results/run_to_run.json``: its value in each recorded
    run of this kind, and the most it moved between runs on a kind run several times (in the
    claim's scale). A history of another threshold or side is another test's and does not count."""
    data = _run_to_run()
    tests = {(comparison.threshold, comparison.holds_if)}
    if comparison.between is not None:
        tests = {(comparison.between[0], "above"), (comparison.between[1], "below")}

    def same(found: dict) -> bool:
        return (found.get("threshold"), found.get("holds_if")) in tests

    found = data.get("kinds", {}).get(machine, {}).get(notebook, {}).get(claim, {})
    band = data.get("bands", {}).get(notebook, {}).get(claim, {})
    return tuple(found["values"]) if same(found) else (), band["band"] if same(band) else 0.0


def judged(holds: T, run: Run | None, notebook: str, claim: str) -> T:
    """``holds`` with the evidence of the recorded runs where it is a ``Comparison`` and ``run``
    says the machine: the one verdict the claims table and any sentence (``stated``) read."""
    if not isinstance(holds, Comparison) or run is None:
        return holds
    runs, band = recorded_runs(run.machine, notebook, claim, holds)
    return dataclasses.replace(holds, runs=runs, band=band, claim=(notebook, claim))


def stated(comparison: Comparison, run: Run | None) -> str:
    """The verdict of a ``judged`` comparison, for a sentence outside the claims table; a replay
    writes it to the index, where the truth check compares it with the claims table's."""
    if not isinstance(comparison, Comparison) or comparison.claim is None:
        raise TypeError(
            "stated() takes a comparison from claims.judged(holds, run, NOTEBOOK, claim), so that "
            "the sentence and the claims table read one verdict"
        )
    notebook, claim = comparison.claim
    _export(notebook, run, kind="stated", name=claim, verdict=comparison.verdict)
    return comparison.verdict


_FLOORS: dict[str, tuple[float, dict]] = {}


def _run_to_run() -> dict:
    path = config.results_dir() / RUN_TO_RUN_FILE
    if not path.exists():
        return {}
    mtime = path.stat().st_mtime
    cached = _FLOORS.get(str(path))
    if cached is None or cached[0] != mtime:
        _FLOORS[str(path)] = (mtime, json.loads(path.read_text()))
    return _FLOORS[str(path)][1]


def _export(notebook: str, run: Run | None, **fields: object) -> None:
    """While ``make replay-all`` replays, append a replayed verdict or check to the index file."""
    out = config.index_out()
    if out is None or run is None or run.live:
        return
    line = records.index_row(run.header, notebook=notebook, **fields)
    with out.open("a") as f:
        f.write(json.dumps(line, allow_nan=True) + "\n")


@dataclass
class Check:
    """A statement made in markdown, checked against the measurement."""

    statement: str
    holds: bool
    measured: str


class WhatWeSee:
    """What a section's numbers show: ``say`` adds a sentence built from the values, ``check``
    tests a statement the markdown makes."""

    def __init__(self, notebook: str, run: Run | None = None) -> None:
        if not isinstance(notebook, str) or not notebook:
            raise TypeError("WhatWeSee needs the notebook's name, e.g. WhatWeSee(NOTEBOOK, run)")
        self.notebook = notebook
        self.run = run
        self.sentences: list[str] = []
        self.checks: list[Check] = []

    def say(self, *sentences: str) -> WhatWeSee:
        """Add sentences built from the measured values, in order."""
        if any(not isinstance(s, str) or not s.strip() for s in sentences):
            raise TypeError("say() takes non-empty sentences, built from the measured values")
        self.sentences += [s.strip() for s in sentences]
        return self

    def check(self, statement: str, holds: object, measured: str, run: Run | None = None) -> bool:
        """Test ``statement`` with ``holds``, a bool computed from the data, shown (not raised)
        with ``measured``; returns ``holds``. ``run``: where the check reads another run than the
        section's (a live check is not written to the index)."""
        if type(holds).__name__ not in ("bool", "bool_"):
            raise TypeError(f"check() needs holds as a bool computed from the data, got {holds!r}")
        if not all(isinstance(text, str) and text for text in (statement, measured)):
            raise TypeError(
                "check() needs the statement and what was measured, as non-empty strings"
            )
        item = Check(statement, bool(holds), measured)
        self.checks.append(item)
        _export(
            self.notebook,
            run or self.run,
            kind="check",
            name=statement,
            verdict=HOLDS if item.holds else DOES_NOT_HOLD,
            value=item.holds,
            measured=measured,
        )
        return item.holds

    def to_markdown(self) -> str:
        where = ""
        if self.run is not None:
            where = (
                f" ({'measured here' if self.run.live else 'replayed from ' + self.run.machine})"
            )
        text = f"**What we see**{where}: " + " ".join(self.sentences)
        for c in self.checks:
            mark = "✓ as expected" if c.holds else FAILED_CHECK
            text += f"\n- {mark}: {c.statement} ({c.measured})"
        return text

    _repr_markdown_ = __repr__ = to_markdown  # Jupyter's Markdown, print() and plain text

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:  # IPython's text/plain
        printer.text(self.to_markdown())  # type: ignore[attr-defined]
