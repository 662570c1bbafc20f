"""What notebook 01 shows of its runs, one module per section (``records.Run``, live or
replayed; nothing measured here). Tested in tests/test_lesson_01.py."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import allocator, bandwidth, staging, sweep, timer
from .common import NOTEBOOK


def claims_table(*runs: Run) -> claims.ClaimsTable:
    """The claims of the runs of sections 1 to 5, with their verdicts, in the sections' order."""
    table = claims.ClaimsTable(NOTEBOOK)
    for section, run in zip((staging, bandwidth, timer, sweep, allocator), runs, strict=True):
        section.add_claims(table, run)
    return table
