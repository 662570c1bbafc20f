"""Notebook 03's runs shown, one module per section: ordering, copies, engines, prefetching."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import copies, engines, ordering, prefetching
from .common import NOTEBOOK


def claims_table(
    run_streams: Run, run_tutorial: Run, run_engines: Run, run_order: Run, run_db: Run
) -> claims.ClaimsTable:
    """The article's, tutorial's and forum thread's claims, in the order the notebook tests them."""
    table = claims.ClaimsTable(NOTEBOOK)
    ordering.add_claims(table, run_streams)
    copies.add_tutorial_claims(table, run_tutorial)
    copies.add_pinned_claims(table, run_tutorial, run_order)
    engines.add_claims(table, run_engines)
    copies.add_order_claims(table, run_order)
    prefetching.add_claims(table, run_db)
    return table
