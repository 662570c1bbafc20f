"""Notebook 06 by section: ``collectives`` (1), ``host`` (2, 4), ``hangs`` (3), ``speed`` (4, 5)."""

from __future__ import annotations

from ... import claims, config
from ...records import Run
from . import collectives, hangs, host, speed
from .common import NOTEBOOK


def where_it_runs(gpus: int, max_ranks: int) -> str:
    """Which experiments run live on a machine of ``gpus`` GPUs (NCCL on at most ``max_ranks``)."""
    live = f"run live, on up to {min(gpus, max_ranks)} ranks"
    nccl = live if gpus >= 2 else "replay full-size recordings"
    quick = "in quick mode (fewer repeats, shorter deadlines)"
    size = quick if config.quick_mode() else "at full size"
    return f"This machine has {gpus} GPU(s): the NCCL experiments (two GPUs or more) {nccl};\nthe gloo experiments run live on this machine's CPU, {size}."


def claims_table(
    host_nccl: Run,
    wait_nccl: Run,
    wait_gloo: Run,
    miss_nccl: Run,
    coll_nccl: Run,
    coll_gloo: Run,
    overlap: Run,
    bandwidth: Run,
) -> claims.ClaimsTable:
    """The article's claims, each with its verdict from the runs, in the notebook's order."""
    table = claims.ClaimsTable(NOTEBOOK)
    host.add_claims(table, host_nccl)
    hangs.add_claims(table, wait_nccl, wait_gloo, miss_nccl)
    collectives.add_claims(table, coll_nccl, coll_gloo)
    speed.add_claims(table, overlap, bandwidth)
    return table
