"""Values with their noise (``Value``), and comparisons that turn them into verdicts."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .. import checks
from ..timing import Timing

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold here"
BORDERLINE = "borderline here"
NOT_TESTABLE = "not testable here"
VERDICTS = (HOLDS, DOES_NOT_HOLD, BORDERLINE, NOT_TESTABLE)
FAILED_CHECK = "✗ **not on this machine**"  # how WhatWeSee shows a check that failed (the truth check looks for it)

# A difference smaller than this share of the threshold is never called either way: the next
# run on the same machine moves by about that much.
SPREAD_FLOOR = 0.01
FEW_SAMPLES = 5  # a statement resting on fewer samples than this says how many (the course's rule)
_SIDES = ("above", "below")

# The rule as Comparison.borderline() computes it, in the words the claims table, 00 and README say
BORDERLINE_RULE = (
    "A verdict is borderline here when another run on this kind of machine could call it the "
    "other way: the value is within its own noise of the threshold (its spread, and at least "
    f"{SPREAD_FLOOR:.0%} of the threshold); or the recorded runs of this kind, this one among "
    "them, lie on both sides of the threshold; or, on a kind recorded once, the value is nearer "
    "the threshold than the claim moved between runs on a kind recorded several times (half the "
    "range of its values: as a factor for a ratio or a time, as a difference for a share or a "
    "count). Otherwise the side of the threshold decides: holds, or does not hold here."
)


# ---------------------------------------------------------------- values with their noise


@dataclass(frozen=True)
class Value:
    """A measured number with its noise: ``spread`` is half the interquartile range, in ``unit``."""

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
        one, but the value to no more than 4 (and at most 6 places)."""

        def places(x: float, digits: int) -> int:
            return digits - 1 - math.floor(math.log10(abs(x))) if x else 0

        most = places(self.value, 4) if self.value else 6
        return max(0, min(6, most, max(places(self.value, 3), places(self.spread, 1))))

    def number(self) -> str:
        """The value, rounded as ``decimals()`` says (large values keep no decimals)."""
        return _fixed(self.value, self.decimals())

    def without_spread(self) -> str:
        """The value where it has no spread (a count, a single sample): whole numbers bare."""
        if float(self.value).is_integer() and abs(self.value) < 1e6:
            return str(int(self.value))
        return self.number()

    def spread_text(self) -> str:
        """The spread, rounded to the value's decimal places; ``<0.0001`` where it rounds to 0."""
        places = self.decimals()
        if self.spread and round(self.spread, places) == 0 and not abs(self.value) >= 1e6:
            return f"<{_fixed(10.0**-places, places)}"
        return _fixed(self.spread, places)

    def few(self) -> str:
        """``'3 samples'`` where the value rests on fewer than ``FEW_SAMPLES`` samples, else ``''``."""
        n = self.samples
        return f"{n} sample{'' if n == 1 else 's'}" if n is not None and n < FEW_SAMPLES else ""

    def __str__(self) -> str:
        """``0.940 ± 0.002 x``, or ``0 in every sample`` where several samples were all alike."""
        unit = f" {self.unit}" if self.unit else ""
        if not self.spread and (self.samples or 0) > 1:
            return f"{self.without_spread()}{unit} in every sample"
        return f"{self.number()}{unit} ± {self.spread_text()}"


def _floor_text(value: float, floor: float) -> str:
    """A run-to-run floor (> 0) rounded as the value's spread, to 2 significant digits at most."""
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
    half its interquartile range."""
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
    """``numerator / denominator`` (timings by their medians), relative spreads added."""
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
    """A measured ``Value`` against a ``threshold``: the claim holds when the value is on the
    ``holds_if`` side ("above" or "below"), and is borderline when the evidence straddles it
    (``borderline()``); ``claims.judged`` adds the recorded runs' evidence."""

    value: Value
    threshold: float
    holds_if: str
    runs: tuple[float, ...] = ()  # the claim's value in each recorded run of this machine kind
    band: float = 0.0  # on a kind run once: the most it moved between runs on another kind
    claim: tuple[str, str] | None = None  # (notebook, claim) once judged(): whose verdict it is
    between: tuple[float, float] | None = None  # set by within(): both bounds, for display

    def in_factors(self) -> bool:
        """Whether the claim's scale is a factor (a positive threshold, and a unit other than
        "of ..."); else it is a difference (a share, a count, a signed measure)."""
        unit = self.value.unit
        return self.threshold > 0 and bool(unit) and not unit.startswith("of ")

    def distance(self, x: float, to: float | None = None) -> float:
        """How far ``x`` lies above the threshold (or ``to``) in the claim's scale: in factors,
        log(x / threshold) (-inf for x <= 0); else the difference, in the value's unit."""
        to = self.threshold if to is None else to
        if self.in_factors():
            return math.log(x / to) if x > 0 else -math.inf
        return x - to

    @property
    def margin(self) -> float:
        """This run's own noise: its spread, at least ``SPREAD_FLOOR`` of the threshold."""
        return max(self.value.spread, SPREAD_FLOOR * abs(self.threshold))

    def borderline(self) -> str | None:
        """Why another run on this kind could call it the other way (``BORDERLINE_RULE``):
        "noise", "runs" or "band"; None where it could not. For ``within``, either bound counts."""
        v = self.value.value
        if abs(v - self.threshold) <= self.margin:
            return "noise"
        bounds = self.between or (self.threshold,)
        values = {*self.runs, v}
        if len(values) >= 2:
            return "runs" if any(min(values) <= b <= max(values) for b in bounds) else None
        near = min(abs(self.distance(v, b)) for b in bounds)
        return "band" if near <= self.band else None

    @property
    def verdict(self) -> str:
        if self.borderline():
            return BORDERLINE
        above = self.value.value > self.threshold
        return HOLDS if above == (self.holds_if == "above") else DOES_NOT_HOLD

    def evidence(self) -> str:
        """The runs behind a verdict they decided ("6 runs here: 32.3 to 116"); "" otherwise."""
        why = self.borderline()
        if why == "runs":
            values = sorted({*self.runs, self.value.value})
            low, high = (_fixed(x, Value(x).decimals()) for x in (values[0], values[-1]))
            return f"{len(values)} runs here: {low} to {high}"
        if why == "band":
            if self.in_factors():
                return f"runs elsewhere differ by a factor {math.exp(self.band):.3g}"
            return f"runs elsewhere differ by ± {_floor_text(self.value.value, self.band)}"
        return ""

    def __bool__(self) -> bool:
        raise TypeError("a Comparison is not a bool: it can be borderline; read .verdict instead")

    def holds_if_text(self) -> str:
        """The claim's side in symbols: "> 0.8", "< 2", or "between 1 and 2" for ``within``."""
        if self.between is not None:
            return f"between {_number(self.between[0])} and {_number(self.between[1])}"
        return f"{'>' if self.holds_if == 'above' else '<'} {_number(self.threshold)}"

    def in_words(self) -> str:
        """The claim's side in words, for a sentence: "above 0.8", "below 2", "between 1 and 2"."""
        if self.between is not None:
            return self.holds_if_text()
        return f"{self.holds_if} {_number(self.threshold)}"

    def __str__(self) -> str:
        return f"{self.value} (holds if {self.holds_if_text()}{' ' + self.value.unit if self.value.unit else ''})"


def worded(verdict: str, holds: str, does_not: str, borderline: str) -> str:
    """What a sentence says for ``verdict`` (``HOLDS``, ``DOES_NOT_HOLD`` or ``BORDERLINE``)."""
    return {HOLDS: holds, DOES_NOT_HOLD: does_not, BORDERLINE: borderline}[verdict]


def compare(value: Value | Timing | float, threshold: float, *, holds_if: str) -> Comparison:
    """The claim holds when ``value`` (a ``Value``, a ``Timing`` or a bare count) is ``holds_if``
    ("above" or "below") ``threshold``."""
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
    """The claim holds when ``low < value < high``, decided at the nearer bound."""
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


def as_verdict(holds: object) -> str:
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
    """The verdict an index row's numbers give (None without a value or threshold): what the
    truth check recomputes."""
    if row.get("threshold") is None or row.get("value") is None:
        return None
    value = Value(row["value"], row.get("spread") or 0.0, row.get("unit") or "")
    runs = tuple(float(v) for v in row.get("runs") or ())
    between = row.get("between")
    return Comparison(
        value,
        row["threshold"],
        row["holds_if"],
        runs,
        float(row.get("band") or 0.0),
        between=(float(between[0]), float(between[1])) if between else None,
    ).verdict
