"""How a bandwidth curve ends, in words computed from its points: ``describe_curve``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..timing import format_bytes


@dataclass(frozen=True)
class CurveShape:
    """How a curve ends: ``kind`` "levels off", "still rising", "peaks, then falls" or "uneven"
    (no trend over the last three sizes); ``words`` says it with the numbers."""

    kind: str
    words: str
    plateau_from: int | None = None


def describe_curve(
    sizes: Sequence[int], values: Sequence[float], unit: str = "GB/s", tolerance: float = 0.05
) -> CurveShape:
    """How a curve of values against sizes (bytes) ends; ``tolerance``: the relative change
    still called flat."""
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
            words = f"is still rising at the largest sizes ({tail})"
            dips = [
                i for i in range(len(values) - 3) if values[i] > values[i + 1] * (1 + tolerance)
            ]
            if dips:  # a fall on the way is said, not hidden by the rise after it
                words += f", after a dip from {at(dips[-1])} to {at(dips[-1] + 1)}"
            return CurveShape("still rising", words)
        return CurveShape("uneven", f"does not settle at the largest sizes ({tail})")
    flat = values[start:]
    words = f"levels off from {format_bytes(sizes[start])} on, at {fig(min(flat))} to {fig(max(flat))} {unit}"
    dips = [i for i in range(start) if values[i] > values[i + 1] * (1 + tolerance)]
    if dips:
        i = dips[0]
        words += f" (after a dip from {at(i)} to {at(i + 1)})"
    return CurveShape("levels off", words, start)
