"""Section 1 of notebook 06: the ranks, and what each holds after the seven collectives."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt

from ... import claims, plotting
from ...records import Run
from .common import ARTICLE, NOTEBOOK, where

MODES = ("blocking", "async_op=True")
ALL_HOLD = (
    "every rank holds what the source says after all seven collectives, blocking and async_op=True."
)
CALLS = {  # how the notebook calls each collective, shown left of its row in the drawing
    "broadcast": "broadcast(tensor, src=0)",
    "scatter": "scatter(tensor, scatter_list, src=0)",
    "reduce": "reduce(tensor, dst=0, op=SUM)",
    "gather": "gather(t, gather_list, dst=0)",
    "all_reduce": "all_reduce(tensor, op=SUM)",
    "all_gather": "all_gather(tensor_list, input_tensor)",
    "reduce_scatter": "reduce_scatter(output, input_list)",
}


def expected_after(name: str, rank: int, n: int) -> Any:
    """What the source says rank ``rank`` of ``n`` holds after ``name`` (None: not defined)."""
    total = [sum(r + k for r in range(1, n + 1)) for k in range(3)]  # sum of every [r+1, r+2, r+3]
    return {
        "broadcast": [1, 2, 3],
        "scatter": [2 * rank, 2 * rank + 1],
        "reduce": total if rank == 0 else None,
        "gather": [[r, r + 1, r + 2] for r in range(n)] if rank == 0 else None,
        "all_reduce": total,
        "all_gather": [[float(r)] for r in range(n)],
        "reduce_scatter": [float(sum(r + rank for r in range(n)))],
    }[name]


@dataclass(frozen=True)
class Ranks:
    """One ``seven_collectives`` run."""

    backend: str
    n: int  # ranks
    placed: str  # where the ranks ran: their devices, processes and the store's port, in words
    wrong: list[str]  # the results unlike the source's, one line each
    reduce: tuple[Any, Any]  # rank 1's buffer before and after reduce (it is not the destination)


def facts(run: Run) -> Ranks:
    who, n, wrong = run.value["who"], len(run.value["who"]), []
    for mode, name, rank in itertools.product(MODES, CALLS, range(n)):
        got, want = run.value[mode][name]["after"][rank], expected_after(name, rank, n)
        if want is not None and got != want:
            wrong.append(f"{mode} {name} rank {rank}: {got} != {want}")
    devices, pids, ports = ([w[key] for w in who] for key in ("device", "pid", "MASTER_PORT"))
    placed = "on " + ", ".join(devices) if len(set(devices)) == n else "all on " + devices[0]
    processes = "each in a process of its own" if len(set(pids)) == n else "sharing a process"
    port = "met at one store port" if len(set(ports)) == 1 else "at different ports"
    before, after = (run.value["blocking"]["reduce"][k][1] for k in ("before", "after"))
    return Ranks(run.params["backend"], n, f"{placed}, {processes}, {port}", wrong, (before, after))


def show_ranks(*runs: Run) -> None:
    """Prints who each rank of each run was: rank, world size, backend, device, pid, store port."""
    for run in runs:
        print(f"{run.params['backend']} ({where(run)}):")
        for who in run.value["who"]:
            print("   ", ", ".join(f"{key}={value}" for key, value in who.items()))


def show(*runs: Run) -> None:
    """Each run's data before and after each blocking collective, and whether it is the source's."""
    for run in runs:
        f = facts(run)
        drawn = {name: {**d, "call": CALLS[name]} for name, d in run.value["blocking"].items()}
        what = f"Seven collectives, {f.backend}, {f.n} ranks"
        plotting.draw_before_after(drawn, title=plotting.titled(what, run))
        plt.show()
        holds = "every rank holds what the source says after all seven, blocking and async_op=True"
        print(f"{f.backend}: {holds}: {not f.wrong}" + "".join(f"\n  {w}" for w in f.wrong))
        other = "reduce, on rank 1 (not the destination), holds afterwards"
        print(f"  {other}: {f.reduce[1]} (it had {f.reduce[0]})")


def see(nccl: Run, gloo: Run) -> claims.WhatWeSee:
    """Per backend: where the ranks ran, whether each holds the source's data, what reduce left."""
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for run in (nccl, gloo):
        f = facts(run)
        before, after = f.reduce
        differ = f"{len(f.wrong)} results differ from what the source says."
        changed = f"no longer its own {before}: the backend used the buffer on the way."
        kept = "what it had before." if after == before else changed
        seen.say(
            f"{f.backend} ({where(run)}): the ranks ran {f.placed}; {differ if f.wrong else ALL_HOLD}",
            f"After `reduce`, {f.backend}'s rank 1 (not the destination) holds {after}, {kept}",
        )
    return seen


def add_claims(table: claims.ClaimsTable, *runs: Run) -> None:
    """Per run: whether the seven collectives left every rank the source's data (a bool)."""
    for run in runs:
        f = facts(run)
        text = f"The seven collectives leave each rank the data the source shows ({f.backend})"
        said = f"{len(f.wrong)} mismatches over {len(CALLS)} collectives x {f.n} ranks x ({', '.join(MODES)})"
        table.add(text, source=ARTICLE, measured=said, holds=not f.wrong, run=run)
