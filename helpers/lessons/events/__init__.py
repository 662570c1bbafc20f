"""Notebook 04's lessons by section: ``timers`` (1, 3, 4), ``waits`` (2, 7, 8), ``tools`` (5, 6),
``many`` (9), ``errors`` (10). They read runs, measure nothing; tests/test_lesson_04.py."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import errors, many, timers, tools, waits
from .common import NOTEBOOK


def claims_table(
    run_timers: Run,
    run_tools: Run,
    run_wait: Run,
    run_streams: Run,
    run_gpus: Run,
    run_first: Run,
    run_many: Run,
    run_errors: Run,
) -> claims.ClaimsTable:
    """The notebook's claims, each with its verdict, in the order the notebook tests them."""
    table = claims.ClaimsTable(NOTEBOOK)
    for row in (
        *timers.timer_claims(run_timers),
        *tools.tools_claims(run_tools),
        *waits.wait_claims(run_wait),
        *waits.ordering_claims(run_streams, run_gpus),
        *timers.warm_up_claims(run_first),
        *many.claims_of(run_many),
        *errors.claims_of(run_errors),
    ):
        table.add(row.claim, source=row.source, run=row.run, measured=row.measured, holds=row.holds)
    return table
