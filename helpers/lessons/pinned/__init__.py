"""What notebook 01 shows of its runs, one module per section: ``staging`` (1. where the host
waits), ``bandwidth`` (2. copies by size), ``timer`` (3. the tutorial's statements under its
Timer), ``sweep`` (4. the statements across sizes, the two clocks, "up to twice as slow" per size
range) and ``allocator`` (5. pinned allocations and PyTorch's cache). Each computes its numbers
once into a frozen dataclass, says them in sentences and declares its claims (``add_claims``);
``claims_table`` adds them in the notebook's order. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested in tests/test_lesson_01.py.
"""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import allocator, bandwidth, staging, sweep, timer

NOTEBOOK = "01_pinned_memory"


def claims_table(
    run_trace: Run, run_bw: Run, run_tut: Run, run_pin: Run, run_alloc: Run
) -> claims.ClaimsTable:
    """The notebook's claims, each with its verdict from the runs, in the sections' order."""
    table = claims.ClaimsTable(NOTEBOOK)
    staging.add_claims(table, run_trace)
    bandwidth.add_claims(table, run_bw)
    timer.add_claims(table, run_tut)
    sweep.add_claims(table, run_pin)
    allocator.add_claims(table, run_alloc)
    return table
