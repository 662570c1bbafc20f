"""Argument checks every helper shares: what counts as a number, a count, a size in bytes.

The bottom floor with ``codec``. A ``bool`` is never a number here (``repeats=True`` is a
mistake); numpy's numbers are.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (int, float, numpy's) and not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_whole(value: Any) -> bool:
    """Whether ``value`` is a whole number (int, numpy's integers) and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_finite_at_least(value: Any, least: float = 0.0) -> bool:
    """Whether ``value`` is a finite real number (not a bool) of at least ``least``."""
    return is_number(value) and math.isfinite(value) and value >= least


def check_count(value: Any, name: str, least: int = 0, unit: str = "") -> int:
    """Raise ``ValueError`` unless ``value`` is a whole number of at least ``least`` (``unit``:
    what is counted, for the message); return it as an int."""
    if not is_whole(value) or value < least:
        of = f" of {unit}" if unit else ""
        raise ValueError(f"{name} must be a whole number{of} >= {least}, got {value!r}")
    return int(value)


def check_size(nbytes: Any, name: str = "size") -> int:
    """Raise unless ``nbytes`` is a positive whole number of bytes; return it as an int."""
    if not is_whole(nbytes):
        raise TypeError(f"{name} must be a whole number of bytes (an int), got {nbytes!r}")
    if nbytes <= 0:
        raise ValueError(
            f"{name} must be a positive number of bytes, got {nbytes}; pass e.g. 2**20 for 1 MiB"
        )
    return int(nbytes)
