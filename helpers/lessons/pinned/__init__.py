"""What notebook 01 shows of its runs, one module per section (``records.Run``, live or
replayed; nothing measured here). Tested in tests/test_lesson_01.py."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import allocator, bandwidth, staging, sweep, timer
from .common import NOTEBOOK


def claims_table(
    run_trace: Run, run_bw: Run, run_tut: Run, run_pin: Run, run_alloc: Run
) -> claims.ClaimsTable:
    """The notebook's claims, each with its verdict from the runs, in the sections' order."""
    table = claims.ClaimsTable(NOTEBOOK)
    runs = (run_trace, run_bw, run_tut, run_pin, run_alloc)
    for section, run in zip((staging, bandwidth, timer, sweep, allocator), runs, strict=True):
        section.add_claims(table, run)
    return table
