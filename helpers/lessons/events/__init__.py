"""Notebook 04's lessons by section: ``timers`` (1, 3, 4), ``waits`` (2, 7, 8), ``tools`` (5, 6),
``many`` (9), ``errors`` (10). They read runs, measure nothing; tests/test_lesson_04.py."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import errors, many, timers, tools, waits
from .common import NOTEBOOK


def claims_table(*runs: Run) -> claims.ClaimsTable:
    """The claims with verdicts from the runs timers, tools, wait, streams, GPUs, first, many,
    errors, in the order the notebook tests them."""
    timed, tooled, wait, streams, gpus, first, spread_over, failed = runs
    table = claims.ClaimsTable(NOTEBOOK)
    for row in (
        *timers.timer_claims(timed),
        *tools.tools_claims(tooled),
        *waits.wait_claims(wait),
        *waits.ordering_claims(streams, gpus),
        *timers.warm_up_claims(first),
        *many.claims_of(spread_over),
        *errors.claims_of(failed),
    ):
        table.add(row.claim, source=row.source, run=row.run, measured=row.measured, holds=row.holds)
    return table
