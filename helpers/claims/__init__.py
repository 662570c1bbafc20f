"""Claims and observations: what a source says, what was measured, and words computed from it.

A claim is tested by a ``Comparison`` (``compare``, ``within``), or by a bool computed from the
measurement (None: not testable here); ``ClaimsTable.add`` turns that into a verdict.
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
    stated,
)
from .verdicts import (
    BORDERLINE,
    BORDERLINE_RULE,
    DOES_NOT_HOLD,
    FAILED_CHECK,
    FEW_SAMPLES,
    HOLDS,
    NOT_TESTABLE,
    SPREAD_FLOOR,
    VERDICTS,
    Comparison,
    Value,
    as_verdict,
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
    "FEW_SAMPLES",
    "SPREAD_FLOOR",
    "Value",
    "measured",
    "ratio",
    "Comparison",
    "compare",
    "within",
    "worded",
    "verdict_of",
    "as_verdict",
    "Claim",
    "ClaimsTable",
    "RUN_TO_RUN_FILE",
    "judged",
    "stated",
    "CurveShape",
    "describe_curve",
    "Check",
    "WhatWeSee",
]
