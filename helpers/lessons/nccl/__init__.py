"""What notebook 06 shows of its ranks, one module per section: ``collectives`` (1. the ranks and
the seven collectives), ``host`` (2 and 4. what returns to the host when), ``hangs`` (3. the
missing ``send``, ``wait(timeout)`` with none), ``speed`` (4. overlap, 5. the bandwidth sweep).
Each computes its numbers once into a frozen dataclass, says them in sentences and declares its
claims (``add_claims``); ``claims_table`` adds them in the notebook's order. Every function takes
the notebook's runs (``records.Run``, live or replayed: the gloo runs are measured live on every
machine) and measures nothing. Tested in tests/test_lesson_06.py.
"""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import collectives, hangs, host, speed
from .common import NOTEBOOK


def where_it_runs(gpus: int, max_ranks: int) -> str:
    """Which experiments run live on a machine of ``gpus`` GPUs (NCCL on at most ``max_ranks``)."""
    nccl = f"run live, on up to {min(gpus, max_ranks)} ranks" if gpus >= 2 else "replay recordings"
    return (
        f"This machine has {gpus} GPU(s): the NCCL experiments (two GPUs or more) {nccl};\n"
        "the gloo experiments run live on this machine's CPU."
    )


def claims_table(*runs: Run) -> claims.ClaimsTable:
    """The article's claims in the notebook's order, from its runs: NCCL's host timings,
    wait(timeout) on NCCL and gloo, NCCL's missing send, the collectives on NCCL and gloo, the
    overlap profiles and the bandwidth sweep."""
    host_nccl, wait_nccl, wait_gloo, miss_nccl, coll_nccl, coll_gloo, overlap, bandwidth = runs
    table = claims.ClaimsTable(NOTEBOOK)
    host.add_claims(table, host_nccl)
    hangs.add_claims(table, wait_nccl, wait_gloo, miss_nccl)
    collectives.add_claims(table, coll_nccl, coll_gloo)
    speed.add_claims(table, overlap, bandwidth)
    return table
