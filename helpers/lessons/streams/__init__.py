"""What notebook 03 shows of its experiments, one module per section: ``ordering`` (1, kernels on
streams), ``copies`` (2 to 4, a copy beside a kernel: the tutorial's experiment, its requirements
(1) and (2), the launch order), ``engines`` (3, the copy engines), ``prefetching`` (5), and what
they share in ``common``. Each takes the notebook's runs (``records.Run``, live or replayed) and
measures nothing; a number read from a trace is computed once per profiled step
(``analysis.per_step``). Tested on every recorded machine in tests/test_lesson_03.py."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import copies, engines, ordering, prefetching
from .common import NOTEBOOK


def claims_table(
    run_streams: Run, run_tutorial: Run, run_engines: Run, run_order: Run, run_db: Run
) -> claims.ClaimsTable:
    """The notebook's claims, each with its verdict: the streams article's, the tutorial's and
    the forum thread's, in the order the notebook tests them."""
    table = claims.ClaimsTable(NOTEBOOK)
    ordering.add_claims(table, run_streams)
    copies.add_tutorial_claims(table, run_tutorial)
    copies.add_gpu_claim(table, run_order)
    copies.add_host_claim(table, run_tutorial)
    engines.add_claims(table, run_engines)
    copies.add_order_claims(table, run_order)
    prefetching.add_claims(table, run_db)
    return table
