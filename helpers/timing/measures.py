"""What a measurement gives: ``Timing``; and the sizes it is taken at and printed with."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from .. import checks
from ..codec import register

NOISY_SPREAD = 0.10  # relative IQR above which a Timing warns


def format_bytes(nbytes: float) -> str:
    """``1536`` -> ``'1.5 KiB'``: binary prefixes throughout the course."""
    if not checks.is_number(nbytes):
        raise TypeError(f"format_bytes takes a number of bytes, got {nbytes!r}")
    nbytes = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            whole = unit == "B" or nbytes.is_integer() or abs(nbytes) >= 999.5  # no 1.02e+03
            return f"{nbytes:.0f} {unit}" if whole else f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def sizes_pow2(smallest: int, largest: int, factor: int = 4) -> list[int]:
    """Sizes in bytes from ``smallest`` to ``largest``, each ``factor`` times the one before.

    >>> sizes_pow2(2**10, 2**20, factor=32)
    [1024, 32768, 1048576]
    """
    smallest = checks.check_size(smallest, "smallest")
    largest = checks.check_size(largest, "largest")
    if largest < smallest:
        raise ValueError(f"largest ({largest}) must be at least smallest ({smallest})")
    factor = checks.check_count(factor, "factor", 2)
    sizes = [smallest]
    while sizes[-1] * factor <= largest:
        sizes.append(sizes[-1] * factor)
    return sizes


@register
@dataclass
class Timing:
    """Repeated samples of one measurement, in seconds per call; ``nbytes`` moved per call (as the
    experiment counts them), ``method`` the clock."""

    samples_s: list[float]
    method: str
    nbytes: int | None = None
    label: str = ""
    calls_per_sample: int = 1
    warmup: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.samples_s, (str, bytes)) or not hasattr(self.samples_s, "__len__"):
            raise TypeError(f"samples_s is a list of seconds, got {self.samples_s!r}")
        if not len(self.samples_s):
            raise ValueError("a Timing needs at least one sample")
        for s in self.samples_s:
            if not checks.is_finite_at_least(s, 0):
                raise ValueError(f"every sample is a finite number of seconds >= 0, got {s!r}")
        if self.nbytes is not None:
            self.nbytes = checks.check_size(self.nbytes, "nbytes")

    @property
    def median_s(self) -> float:
        """Median seconds per call: the number the course reports."""
        return statistics.median(self.samples_s)

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    @property
    def quartiles_s(self) -> tuple[float, float]:
        """First and third quartiles of the samples."""
        if len(self.samples_s) < 2:
            return self.samples_s[0], self.samples_s[0]
        q = statistics.quantiles(self.samples_s, n=4, method="inclusive")
        return q[0], q[2]

    @property
    def spread(self) -> float:
        """Interquartile range over median (0.05: +-2.5% around it)."""
        q1, q3 = self.quartiles_s
        return (q3 - q1) / self.median_s if self.median_s > 0 else 0.0

    @property
    def median_ms(self) -> float:
        return self.median_s * 1e3

    @property
    def median_us(self) -> float:
        return self.median_s * 1e6

    @property
    def gbps(self) -> float:
        """Decimal GB/s at the median time; needs ``nbytes``."""
        return self._gbps_at(self.median_s, "a median")

    @property
    def gbps_range(self) -> tuple[float, float]:
        """(slowest, fastest) sample as decimal GB/s."""
        return self._gbps_at(self.max_s, "a sample"), self._gbps_at(self.min_s, "a sample")

    def _gbps_at(self, seconds: float, which: str) -> float:
        if not self.nbytes:
            raise ValueError(
                f"Timing {self.label!r} has no nbytes; pass nbytes= when timing to get a rate"
            )
        if seconds == 0:
            raise ValueError(
                f"Timing {self.label!r} has {which} of 0 s, below the clock's resolution: "
                f"time more calls per sample to get a rate"
            )
        return self.nbytes / seconds / 1e9

    def is_noisy(self, limit: float = NOISY_SPREAD) -> bool:
        return self.spread > limit

    def __str__(self) -> str:
        text = f"{self.label + ': ' if self.label else ''}{_format_seconds(self.median_s)} median"
        text += f" (IQR {self.spread:.1%} of it, {len(self.samples_s)} samples, {self.method})"
        if self.nbytes:
            text += f" = {self.gbps:.2f} GB/s for {format_bytes(self.nbytes)}"
        return text


def _format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} us"
