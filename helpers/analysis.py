"""Statistics the lessons share: a number read once per profiled step (its spread across the
steps is the noise a verdict must beat), values combined with their spreads, the deciding one of
several comparisons, and a comparison said in words.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence

from . import claims, trace

FEW_SAMPLES = claims.FEW_SAMPLES  # fewer samples than this: a statement says how many


def steps_of(profile: trace.Profile) -> list[list[trace.Interval]]:
    """The profile's intervals, one list per host range ``ProfilerStep#N`` up to the next one
    (the whole profile when it has no steps)."""
    if not isinstance(profile, trace.Profile):
        raise TypeError(f"steps_of takes a trace.Profile, got {type(profile).__name__}")
    starts = sorted(
        iv.start_us
        for iv in profile.select(kind="annotation")
        if iv.name.startswith("ProfilerStep#") and iv.device is None
    )
    if not starts:
        return [list(profile.intervals)]
    ends = [*starts[1:], math.inf]
    return [
        [iv for iv in profile.intervals if start <= iv.start_us < end]
        for start, end in zip(starts, ends, strict=True)
    ]


def across(values: Sequence[float], unit: str = "") -> claims.Value:
    """Several samples of one number as a ``claims.Value``: median, half the IQR, and count."""
    values = list(values)
    if not values:
        raise ValueError("across() needs at least one value")
    if len(values) < 2:
        q1 = q3 = values[0]
    else:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return claims.Value(statistics.median(values), (q3 - q1) / 2, unit, len(values))


def paired(
    numerators: Sequence[float], denominators: Sequence[float], unit: str = "x"
) -> claims.Value:
    """The i-th numerator over the i-th denominator, ``across`` the pairs: unlike
    ``claims.ratio``, what a pair shares (a slow sample is slow on both sides) is no spread."""
    numerators, denominators = list(numerators), list(denominators)
    if len(numerators) != len(denominators):
        raise ValueError(
            f"paired() needs as many numerators as denominators, got {len(numerators)} and "
            f"{len(denominators)}"
        )
    if any(d == 0 for d in denominators):
        raise ValueError("paired(): a denominator is 0; pair non-zero measurements")
    return across([n / d for n, d in zip(numerators, denominators, strict=True)], unit)


def per_step(
    profile: trace.Profile, measure: Callable[[list[trace.Interval]], float], unit: str = ""
) -> claims.Value:
    """``measure(intervals of one step)`` for every profiled step, as a ``claims.Value``."""
    return across([measure(step) for step in steps_of(profile)], unit)


def added(a: claims.Value, b: claims.Value) -> claims.Value:
    """The sum of two measured values, their spreads added (a cautious bound)."""
    samples = min((v.samples for v in (a, b) if v.samples is not None), default=None)
    return claims.Value(a.value + b.value, a.spread + b.spread, a.unit, samples)


def propagated(f: Callable[..., float], *values: claims.Value, unit: str = "x") -> claims.Value:
    """``f`` of measured values; its spread is half the range ``f`` takes at the corners
    value ± spread, its samples the fewest of the inputs'."""
    if not values:
        raise ValueError("propagated() needs at least one claims.Value")
    corners = [
        f(*combo)
        for combo in itertools.product(*((v.value - v.spread, v.value + v.spread) for v in values))
    ]
    samples = min((v.samples for v in values if v.samples is not None), default=None)
    return claims.Value(
        f(*(v.value for v in values)), (max(corners) - min(corners)) / 2, unit, samples
    )


_RANK = {claims.DOES_NOT_HOLD: 0, claims.BORDERLINE: 1, claims.HOLDS: 2}


def weakest(named: Mapping[str, claims.Comparison]) -> tuple[str, claims.Comparison]:
    """Of named comparisons that must all hold, the one that decides: the first that does not
    hold, else the first borderline one, else the one nearest its threshold (in margins)."""
    if not named:
        raise ValueError("weakest() needs at least one named comparison")
    return min(
        named.items(),
        key=lambda item: (
            _RANK[item[1].verdict],
            abs(item[1].value.value - item[1].threshold) / (item[1].margin or 1.0),
        ),
    )


def in_words(comparison: claims.Comparison, above: str, same: str, below: str) -> str:
    """``above``, ``same`` (borderline) or ``below``: where a value lies against its threshold."""
    if comparison.verdict == claims.BORDERLINE:
        return same
    return above if comparison.value.value > comparison.threshold else below


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an s unless n is 1: ``'2 profiled steps'``, ``'1 pair'``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def few(n: int | None, word: str = "sample") -> str:
    """``'3 samples'`` when a number rests on fewer than ``FEW_SAMPLES`` of them, else ``''``."""
    return plural(n, word) if n is not None and n < FEW_SAMPLES else ""


def times(ratio: claims.Value) -> str:
    """A ratio and its spread, rounded alike: ``'1.29x ± 0.06'``."""
    return f"{ratio.number()}x ± {ratio.spread_text()}"
