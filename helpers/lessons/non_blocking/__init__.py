"""Notebook 02's runs shown, one module per section: returns, loops, six_ways, hazards, pinning, timers."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import hazards, loops, pinning, returns, six_ways, timers

__all__ = ["claims_table", "hazards", "loops", "pinning", "returns", "six_ways", "timers"]


def claims_table(
    run_small: Run, run_ret: Run, run_six: Run, run_haz: Run, run_td: Run, run_dl: Run
) -> claims.ClaimsTable:
    """The tutorial's and the forum thread's claims tested by sections 1-6."""
    table = claims.ClaimsTable(returns.NOTEBOOK)
    loops.add_claims(table, run_small)
    returns.add_claims(table, run_ret)
    six_ways.add_claims(table, run_small, run_six)
    hazards.add_claims(table, run_haz)
    pinning.add_claims(table, run_td, run_dl)
    return table
