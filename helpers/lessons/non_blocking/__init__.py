"""What notebook 02 (``non_blocking=True``) shows of its runs, one module per section: ``returns``
(1: when ``.to()`` returns), ``loops`` (2: 1000 small copies), ``six_ways`` (3: the tutorial's six
timings), ``hazards`` (4), ``pinning`` (5 and 6: tensordict, DataLoader). Each takes the
notebook's runs (``records.Run``, live or replayed), measures nothing, and holds its section's
facts, table and figure, "what we see" sentences and claims. Tested in tests/test_lesson_02.py.
"""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import hazards, loops, pinning, returns, six_ways


def claims_table(
    run_small: Run, run_ret: Run, run_six: Run, run_haz: Run, run_td: Run, run_dl: Run
) -> claims.ClaimsTable:
    """The claims of the tutorial and the forum thread tested by sections 1-6, each row's verdict
    from its value, threshold and spread."""
    table = claims.ClaimsTable(returns.NOTEBOOK)
    loops.add_claims(table, run_small)
    returns.add_claims(table, run_ret)
    six_ways.add_claims(table, run_small, run_six)
    hazards.add_claims(table, run_haz)
    pinning.add_claims(table, run_td, run_dl)
    return table
