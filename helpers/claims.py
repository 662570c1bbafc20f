"""Claims and observations: what a source says, what was measured, and words computed from it.

A verdict is never typed in. A claim is tested either by a ``Comparison`` (a measured value,
its spread, a threshold and the side on which the claim holds: ``claims.compare``) or, when
the claim is not a number, by a bool computed from the measurement (``None`` when it cannot be
tested on this hardware). ``ClaimsTable.add`` turns that into "holds", "does not hold here",
"borderline here" (the value is inside the noise of its threshold: it would flip between runs)
or "not testable here". Every notebook ends with its table, which shows value, threshold and
spread for each row.

What a notebook *sees* is printed from its data too: ``WhatWeSee`` gathers sentences built
from the measured values (``describe_curve`` says how a bandwidth curve ends) and ``check``-s
of statements made in markdown. ``make test`` replays every notebook on every recorded machine
and fails on any check that does not hold or any verdict that disagrees with its numbers.

Taught in 00_start_here (how to read the table); used by every notebook.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from . import checks, config, records
from .records import Run
from .tables import Table
from .timing import Timing, format_bytes

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold here"
BORDERLINE = "borderline here"
NOT_TESTABLE = "not testable here"
VERDICTS = (HOLDS, DOES_NOT_HOLD, BORDERLINE, NOT_TESTABLE)
FAILED_CHECK = "✗ **not on this machine**"  # how WhatWeSee shows a check that failed (the truth check looks for it)

# A difference smaller than this share of the threshold is never called either way, even when
# the samples agree closely: the next run on the same machine moves by about that much.
SPREAD_FLOOR = 0.01
_SIDES = ("above", "below")


# ---------------------------------------------------------------- values with their noise


@dataclass(frozen=True)
class Value:
    """A measured number with its noise: ``spread`` is half the interquartile range, in ``unit``.

    Used by the lessons (helpers/lessons/).
    """

    value: float
    spread: float = 0.0
    unit: str = ""
    samples: int | None = None

    def __post_init__(self) -> None:
        for name in ("value", "spread"):
            number = getattr(self, name)
            if not checks.is_number(number) or math.isnan(float(number)):
                raise TypeError(f"Value.{name} must be a number, got {number!r}")
        if self.spread < 0:
            raise ValueError(
                f"Value.spread is a half-width and cannot be negative, got {self.spread!r}"
            )

    def decimals(self) -> int:
        """Decimal places that show the value to 3 significant digits and the spread to at least
        one, but the value to no more than 4 (and at most 6 places): the value and its spread are
        always rounded alike, and a spread too small to show is written ``<0.0001``."""

        def places(x: float, digits: int) -> int:
            return digits - 1 - math.floor(math.log10(abs(x))) if x else 0

        most = places(self.value, 4) if self.value else 6
        return max(0, min(6, most, max(places(self.value, 3), places(self.spread, 1))))

    def number(self) -> str:
        """The value, rounded as ``decimals()`` says (large values keep no decimals)."""
        return _fixed(self.value, self.decimals())

    def without_spread(self) -> str:
        """The value where it has no spread (a count, or a single sample): a whole number without
        decimals, anything else as ``number()``."""
        if float(self.value).is_integer() and abs(self.value) < 1e6:
            return str(int(self.value))
        return self.number()

    def spread_text(self) -> str:
        """The spread, rounded to the value's decimal places; ``<0.0001`` (one unit of the last
        place) where a spread above zero rounds to nothing."""
        places = self.decimals()
        if self.spread and round(self.spread, places) == 0 and not abs(self.value) >= 1e6:
            return f"<{_fixed(10.0**-places, places)}"
        return _fixed(self.spread, places)

    def __str__(self) -> str:
        """``0.940 ± 0.002 x``; a value whose several samples were all alike says so instead of
        ``± 0`` (``0 in every sample``)."""
        unit = f" {self.unit}" if self.unit else ""
        if not self.spread and (self.samples or 0) > 1:
            return f"{self.without_spread()}{unit} in every sample"
        return f"{self.number()}{unit} ± {self.spread_text()}"


def _floor_text(value: float, floor: float) -> str:
    """A run-to-run floor (> 0) rounded as the value's spread would be, to 2 significant digits at most."""
    places = min(Value(value, floor).decimals(), max(0, 1 - math.floor(math.log10(floor))))
    return _fixed(floor, places)


def _fixed(x: float, decimals: int) -> str:
    if abs(x) >= 1e6 or (x and abs(x) < 1e-6):
        return f"{x:.3g}"
    return f"{x:.{decimals}f}"


def _number(x: float) -> str:
    if x == 0 or 0.01 <= abs(x) < 1e4:
        return f"{x:.3g}" if abs(x) < 10 else f"{x:.4g}" if abs(x) < 1e3 else f"{x:.0f}"
    return f"{x:.3g}"


def measured(timing: Timing, *, as_rate: bool = False, unit: str | None = None) -> Value:
    """A ``Timing`` as a ``Value``: its median (seconds, or decimal GB/s with ``as_rate``) and
    half its interquartile range.

    Used by the lessons (helpers/lessons/).
    """
    if not isinstance(timing, Timing):
        raise TypeError(f"measured() takes a timing.Timing, got {type(timing).__name__}")
    q1, q3 = timing.quartiles_s
    n = len(timing.samples_s)
    if as_rate:
        # a rate is nbytes / time, so its relative spread is the time's
        rate = timing.gbps
        return Value(rate, rate * (q3 - q1) / 2 / timing.median_s, unit or "GB/s", n)
    return Value(timing.median_s, (q3 - q1) / 2, unit or "s", n)


def ratio(numerator: Timing | Value, denominator: Timing | Value, unit: str = "x") -> Value:
    """``numerator / denominator`` with the relative spreads of both added (a cautious bound).

    Timings are compared by their median times. Used by the lessons (helpers/lessons/).
    """
    a = numerator if isinstance(numerator, Value) else measured(numerator)
    b = denominator if isinstance(denominator, Value) else measured(denominator)
    if b.value == 0:
        raise ValueError("ratio(): the denominator's value is 0; compare two non-zero measurements")
    value = a.value / b.value
    relative = (a.spread / abs(a.value) if a.value else 0.0) + b.spread / abs(b.value)
    samples = min((v.samples for v in (a, b) if v.samples is not None), default=None)
    return Value(value, abs(value) * relative, unit, samples)


# ---------------------------------------------------------------- comparisons and verdicts


@dataclass(frozen=True)
class Comparison:
    """A measured ``Value`` against a ``threshold``; the claim holds when the value is on the
    ``holds_if`` side ("above" or "below"), and is borderline within the noise.

    Used by the lessons (helpers/lessons/).
    """

    value: Value
    threshold: float
    holds_if: str
    floor: float = (
        0.0  # how far the value moved between runs on this kind of machine (half the range)
    )
    between: tuple[float, float] | None = (
        None  # set by within(): the claim's two bounds, for display
    )

    @property
    def margin(self) -> float:
        """The noise band around the threshold: the value's spread within its run, or how far it
        moved between recorded runs of this machine kind (``floor``), whichever is larger, and at
        least ``SPREAD_FLOOR`` of the threshold."""
        return max(self.value.spread, self.floor, SPREAD_FLOOR * abs(self.threshold))

    @property
    def verdict(self) -> str:
        difference = self.value.value - self.threshold
        if abs(difference) <= self.margin:
            return BORDERLINE
        above = difference > 0
        return HOLDS if above == (self.holds_if == "above") else DOES_NOT_HOLD

    def __bool__(self) -> bool:
        raise TypeError("a Comparison is not a bool: it can be borderline; read .verdict instead")

    def holds_if_text(self) -> str:
        """The claim's side in symbols: "> 0.8", "< 2", or "between 1 and 2" for ``within``."""
        if self.between is not None:
            return f"between {_number(self.between[0])} and {_number(self.between[1])}"
        return f"{'>' if self.holds_if == 'above' else '<'} {_number(self.threshold)}"

    def __str__(self) -> str:
        return f"{self.value} (holds if {self.holds_if_text()}{' ' + self.value.unit if self.value.unit else ''})"


def compare(value: Value | Timing | float, threshold: float, *, holds_if: str) -> Comparison:
    """The claim holds when ``value`` is ``holds_if`` ("above" or "below") ``threshold``.

    ``value`` is a ``Value`` (e.g. from ``ratio``), a ``Timing`` (its median seconds), or a bare
    number for a count, which has no spread. Used by the lessons (helpers/lessons/).
    """
    if holds_if not in _SIDES:
        raise ValueError(f"holds_if must be 'above' or 'below', got {holds_if!r}")
    if not checks.is_number(threshold):
        raise TypeError(f"threshold must be a number, got {threshold!r}")
    if isinstance(value, Timing):
        value = measured(value)
    elif not isinstance(value, Value):
        if not checks.is_number(value):
            raise TypeError(
                f"compare() takes a claims.Value, a timing.Timing or a number, got {value!r}"
            )
        value = Value(float(value))
    return Comparison(value, float(threshold), holds_if)


def within(value: Value | Timing | float, low: float, high: float) -> Comparison:
    """The claim holds when ``low < value < high`` (e.g. "slower, but at most twice": 1 and 2).

    The verdict is decided at the nearer bound, so it is borderline near either. Used by the lessons (helpers/lessons/).
    """
    if not (checks.is_number(low) and checks.is_number(high)):
        raise TypeError(f"within() needs numeric bounds, got {low!r} and {high!r}")
    if not low < high:
        raise ValueError(f"within() needs low < high, got {low!r} and {high!r}")
    number = compare(value, low, holds_if="above").value
    if abs(number.value - high) < abs(number.value - low):
        nearer = compare(number, high, holds_if="below")
    else:
        nearer = compare(number, low, holds_if="above")
    return dataclasses.replace(nearer, between=(float(low), float(high)))


def _as_verdict(holds: object) -> str:
    if holds is None:
        return NOT_TESTABLE
    if isinstance(holds, Comparison):
        return holds.verdict
    if type(holds).__name__ in ("bool", "bool_"):  # Python or numpy bool
        return HOLDS if bool(holds) else DOES_NOT_HOLD
    raise TypeError(
        f"holds must be a claims.compare(...) of the measurement, a bool computed from it, or None if "
        f"not testable; got {holds!r}; write e.g. holds=claims.compare(ratio, 2, holds_if='below')"
    )


def verdict_of(row: dict) -> str | None:
    """The verdict an index row's value, threshold and spread give (None for a row without them).

    What the truth check recomputes. Used by the course's tools (tools/replay_all.py).
    """
    if row.get("threshold") is None or row.get("value") is None:
        return None
    value = Value(row["value"], row.get("spread") or 0.0, row.get("unit") or "")
    return Comparison(
        value, row["threshold"], row["holds_if"], float(row.get("floor") or 0.0)
    ).verdict


# ---------------------------------------------------------------- the claims table


@dataclass
class Claim:
    """One row: the claim, its source, what was measured, where, and the verdict; ``comparison``
    carries value, threshold and spread when the claim is a number.

    Used by claims.ClaimsTable (one per row of the table).
    """

    text: str
    source: str
    measured: str
    verdict: str
    where: str
    comparison: Comparison | None = None


class ClaimsTable:
    """The claims a notebook tested, shown through ``tables.Table``: HTML in Jupyter, aligned
    text in ``print()``, a pipe table from ``to_markdown()``.

    Taught in 01_pinned_memory.
    """

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
        comparison = holds if isinstance(holds, Comparison) else None
        if comparison is not None and run is not None:
            floor = run_to_run_floor(
                run.machine,
                self.notebook,
                claim,
                comparison.threshold,
                comparison.holds_if,
                comparison.value.value,
            )
            if floor > comparison.floor:
                comparison = dataclasses.replace(comparison, floor=floor)
                holds = comparison
        row = Claim(claim, source, measured, _as_verdict(holds), where, comparison)
        self.claims.append(row)
        if comparison is not None:
            fields = dict(
                value=comparison.value.value,
                unit=comparison.value.unit,
                spread=comparison.value.spread,
                threshold=comparison.threshold,
                holds_if=comparison.holds_if,
                holds_if_text=comparison.holds_if_text(),
                margin=comparison.margin,
                floor=comparison.floor,
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
        """The rows as a ``tables.Table``: claim, source, measured, value ± spread, holds if, where, verdict."""
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
                # a count, or a single sample, has no spread: no "± 0" beside it
                number = f"{v.number()} ± {v.spread_text()}" if v.spread else v.without_spread()
                value = f"{number}{' ' + v.unit if v.unit else ''}"
                if c.comparison.floor > v.spread:
                    value += f" (runs differ by ± {_floor_text(v.value, c.comparison.floor)})"
                side = c.comparison.holds_if_text()
            table.add(c.text, c.source, c.measured, value, side, c.where, c.verdict)
        return table

    def to_markdown(self) -> str:
        """The rows as a Markdown pipe table (verdicts in bold), without title or note."""
        table = self.table()
        table.title = table.caption = ""
        return table.to_markdown()

    def _note(self) -> str:
        """The footnote on borderline verdicts, only under a table that has one."""
        return _BORDERLINE_NOTE if any(c.verdict == BORDERLINE for c in self.claims) else ""

    def _repr_markdown_(self) -> str:
        note = f"\n\n*{self._note()}*" if self._note() else ""
        return f"### Claims tested in {self.notebook}\n\n" + self.to_markdown() + note

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __str__(self) -> str:
        return self.table().to_text()

    def __repr__(self) -> str:  # Jupyter's plain-text form: the table, never <ClaimsTable at 0x...>
        return str(self)


_BORDERLINE_NOTE = (
    f"borderline here: the value is within its noise of the threshold (its spread, or how far "
    f"it moved between recorded runs of this machine kind, and at least {SPREAD_FLOOR:.0%} of the "
    "threshold), so another run could call it either way."
)

RUN_TO_RUN_FILE = (
    "run_to_run.json"  # under results/: written by tools/run_to_run.py from the index's history
)


def run_to_run_floor(
    machine: str,
    notebook: str,
    claim: str,
    threshold: float | None = None,
    holds_if: str | None = None,
    value: float | None = None,
) -> float:
    """How far a claim's value moved between the recorded runs of a machine kind: half the range
    of its values in the history of ``results/index.jsonl`` (``results/run_to_run.json``, written
    by ``tools/run_to_run.py``); 0 where it was recorded once. Given this run's ``value`` and the
    ``threshold``, at least the distance to the farthest recorded run on the threshold's other
    side, so that no two recorded runs get opposite verdicts (half the range alone left the
    extremes outside: runs of 0.707 and 0.874 against 0.8 read "does not hold" and "holds"). A
    verdict's band is at least this wide. A claim tested against another ``threshold`` or side
    than its history's is another test: 0.

    Used by claims.ClaimsTable.
    """
    found = _run_to_run().get(machine, {}).get(notebook, {}).get(claim, {})
    if threshold is not None and found.get("threshold", threshold) != threshold:
        return 0.0
    if holds_if is not None and found.get("holds_if", holds_if) != holds_if:
        return 0.0
    floor = float(found.get("floor", 0.0))
    if value is not None and threshold is not None:
        across = [
            abs(value - v)
            for v in found.get("values", [])
            if (v - threshold) * (value - threshold) < 0
        ]
        floor = max([floor, *across])
    return floor


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


# ---------------------------------------------------------------- what we see


@dataclass(frozen=True)
class CurveShape:
    """How a curve of values against sizes ends: ``kind`` is "levels off", "still rising",
    "peaks, then falls" or "uneven" (no trend over the last three sizes); ``words`` says it with
    the numbers.

    Used by claims.describe_curve.
    """

    kind: str
    words: str
    plateau_from: int | None = None


def describe_curve(
    sizes: Sequence[int], values: Sequence[float], unit: str = "GB/s", tolerance: float = 0.05
) -> CurveShape:
    """How a bandwidth curve ends, in words with its numbers, ``tolerance`` being the relative
    change still called flat (sizes in bytes, said with binary prefixes).

    Used by the lessons (helpers/lessons/).
    """
    if len(sizes) != len(values) or len(values) < 3:
        raise ValueError("describe_curve needs as many sizes as values, at least 3 of each")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance is a share between 0 and 1, e.g. 0.05; got {tolerance!r}")
    values = [float(v) for v in values]
    peak_at = max(range(len(values)), key=values.__getitem__)
    peak, last = values[peak_at], values[-1]

    def fig(v: float) -> str:
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:#.3g}"  # 52.0 beside 51.9, not 52

    def at(i: int) -> str:
        return f"{fig(values[i])} {unit} at {format_bytes(sizes[i])}"

    if last < peak * (1 - tolerance):
        return CurveShape(
            "peaks, then falls", f"peaks at {at(peak_at)}, then falls to {at(len(values) - 1)}"
        )
    start = len(values) - 1
    while start > 0 and abs(values[start - 1] - last) <= tolerance * last:
        start -= 1
    if start >= len(values) - 2:
        tail = (
            f"{', '.join(fig(v) for v in values[-3:])} {unit} at {format_bytes(sizes[-3])}, "
            f"{format_bytes(sizes[-2])} and {format_bytes(sizes[-1])}"
        )
        if values[-3] < values[-2] <= values[-1] * (1 + tolerance):
            return CurveShape("still rising", f"is still rising at the largest sizes ({tail})")
        return CurveShape("uneven", f"does not settle at the largest sizes ({tail})")
    flat = values[start:]
    words = f"levels off from {format_bytes(sizes[start])} on, at {fig(min(flat))} to {fig(max(flat))} {unit}"
    dips = [i for i in range(start) if values[i] > values[i + 1] * (1 + tolerance)]
    if dips:
        i = dips[0]
        words += f" (after a dip from {at(i)} to {at(i + 1)})"
    return CurveShape("levels off", words, start)


@dataclass
class Check:
    """A statement made in markdown, checked against the measurement.

    Used by claims.WhatWeSee (one per statement its ``check`` tests).
    """

    statement: str
    holds: bool
    measured: str


class WhatWeSee:
    """What a section's numbers show, said by code: ``say`` adds a sentence built from the
    values, ``check`` tests a statement the markdown makes. Renders as Markdown in Jupyter.

    Taught in 00_start_here.
    """

    def __init__(self, notebook: str, run: Run | None = None) -> None:
        if not isinstance(notebook, str) or not notebook:
            raise TypeError("WhatWeSee needs the notebook's name, e.g. WhatWeSee(NOTEBOOK, run)")
        self.notebook = notebook
        self.run = run
        self.sentences: list[str] = []
        self.checks: list[Check] = []

    def say(self, sentence: str) -> WhatWeSee:
        """Add a sentence; build it from the measured values (an f-string), never type a result."""
        if not isinstance(sentence, str) or not sentence.strip():
            raise TypeError("say() takes a non-empty sentence, built from the measured values")
        self.sentences.append(sentence.strip())
        return self

    def check(self, statement: str, holds: object, measured: str, run: Run | None = None) -> bool:
        """Test ``statement`` (a sentence the markdown makes) with ``holds``, a bool computed from
        the data; ``measured`` says the numbers. Returns ``holds``. A check that fails is shown,
        not raised: on the machine at hand it is a finding (the truth check fails on it). Pass
        ``run`` when the check reads another run than the section's (e.g. a gloo part measured
        live here): a live check is not written to the index, whose rows must replay the same."""
        if type(holds).__name__ not in ("bool", "bool_"):
            raise TypeError(f"check() needs holds as a bool computed from the data, got {holds!r}")
        if (
            not isinstance(statement, str)
            or not statement
            or not isinstance(measured, str)
            or not measured
        ):
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

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __str__(self) -> str:
        return self.to_markdown()
