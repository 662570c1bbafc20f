"""Claims and observations: what a source says, what was measured, and words computed from it.

A verdict is never typed in. A claim is tested either by a ``Comparison`` (a measured value,
its spread, a threshold and the side on which the claim holds: ``claims.compare``) or, when
the claim is not a number, by a bool computed from the measurement (``None`` when it cannot be
tested on this hardware). ``ClaimsTable.add`` turns that into "holds", "does not hold here",
"borderline here" (another run on this kind of machine could call it the other way:
``BORDERLINE_RULE`` says when, ``Comparison.borderline`` computes it)
or "not testable here". Every notebook ends with its table, which shows value, threshold and
spread for each row.

What a notebook *sees* is printed from its data too: ``WhatWeSee`` gathers sentences built
from the measured values (``describe_curve`` says how a bandwidth curve ends) and ``check``-s
of statements made in markdown. ``make test`` replays every notebook on every recorded machine
and fails on any check that does not hold or any verdict that disagrees with its numbers.
"""

from __future__ import annotations

from .curves import CurveShape, describe_curve
from .table import (
    RUN_TO_RUN_FILE,
    Check,
    Claim,
    ClaimsTable,
    WhatWeSee,
    judged,
    recorded_runs,
    stated,
)
from .verdicts import (
    BORDERLINE,
    BORDERLINE_RULE,
    DOES_NOT_HOLD,
    FAILED_CHECK,
    HOLDS,
    NOT_TESTABLE,
    SPREAD_FLOOR,
    VERDICTS,
    Comparison,
    Value,
    compare,
    measured,
    ratio,
    verdict_of,
    within,
    worded,
)

__all__ = [
    "HOLDS",
    "DOES_NOT_HOLD",
    "BORDERLINE",
    "BORDERLINE_RULE",
    "NOT_TESTABLE",
    "VERDICTS",
    "FAILED_CHECK",
    "SPREAD_FLOOR",
    "Value",
    "measured",
    "ratio",
    "Comparison",
    "compare",
    "within",
    "worded",
    "verdict_of",
    "Claim",
    "ClaimsTable",
    "RUN_TO_RUN_FILE",
    "recorded_runs",
    "judged",
    "stated",
    "CurveShape",
    "describe_curve",
    "Check",
    "WhatWeSee",
]
