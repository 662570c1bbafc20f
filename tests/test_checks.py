"""The argument checks every helper shares (helpers/checks.py)."""

import fractions
import math

import numpy as np
import pytest

from helpers import checks


@pytest.mark.parametrize(
    "value, number, whole",
    [
        (3, True, True),
        (np.int64(3), True, True),
        (2.5, True, False),
        (np.float32(0.5), True, False),
        (fractions.Fraction(1, 3), True, False),
        (math.inf, True, False),
        (True, False, False),
        (False, False, False),
        ("3", False, False),
        (None, False, False),
        ([1], False, False),
    ],
)
def test_a_bool_is_never_a_number_and_numpys_numbers_are(value, number, whole):
    assert checks.is_number(value) is number
    assert checks.is_whole(value) is whole


@pytest.mark.parametrize(
    "value, least, ok",
    [
        (0, 0, True),
        (0.0, 0, True),
        (1e-9, 0, True),
        (-1e-9, 0, False),
        (math.inf, 0, False),
        (math.nan, 0, False),
        (True, 0, False),
        (2, 2.5, False),
        (3, 2.5, True),
        ("1", 0, False),
    ],
)
def test_finite_at_least(value, least, ok):
    assert checks.is_finite_at_least(value, least) is ok


def test_check_count_says_what_is_counted():
    assert checks.check_count(3, "repeats", 1) == 3
    assert checks.check_count(0, "warmup") == 0
    assert type(checks.check_count(np.int64(2), "n", 2)) is int
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1, got 0"):
        checks.check_count(0, "repeats", 1)
    with pytest.raises(ValueError, match="active must be a whole number of steps >= 1, got 1.5"):
        checks.check_count(1.5, "active", 1, "steps")
    with pytest.raises(ValueError, match=r"warmup must be a whole number >= 0, got True"):
        checks.check_count(True, "warmup")
    with pytest.raises(ValueError, match=">= 0, got -1"):
        checks.check_count(-1, "warmup")


def test_check_size():
    assert checks.check_size(4) == 4
    assert checks.check_size(1) == 1
    assert type(checks.check_size(np.int64(4))) is int
    for bad in (0, -1):
        with pytest.raises(
            ValueError,
            match=rf"size must be a positive number of bytes, got {bad}; pass e.g. 2\*\*20",
        ):
            checks.check_size(bad)
    with pytest.raises(
        TypeError, match=r"nbytes must be a whole number of bytes \(an int\), got 1.5"
    ):
        checks.check_size(1.5, "nbytes")
    with pytest.raises(TypeError):
        checks.check_size(True)
