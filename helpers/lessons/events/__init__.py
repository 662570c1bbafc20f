"""What notebook 04 shows of its experiments, one module per section: ``timers`` (1 three
timers, 3 first calls, 4 spread), ``waits`` (2 which wait, 7 and 8 one stream or GPU waiting
for another), ``tools`` (5 resolution, 6 three tools), ``many`` (9 many streams), ``errors``
(10), and ``common``. Each takes the notebook's runs (``records.Run``, live or replayed) and
measures nothing. Tested on every recorded machine in tests/test_lesson_04.py."""

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
