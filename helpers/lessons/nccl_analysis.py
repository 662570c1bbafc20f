"""The numbers and facts notebook 06's tables, sentences and claims rest on: what each rank should
hold after each collective and which do not, each timed call's medians over its repeats, where
rank 1's host stopped with a ``send`` missing, and what its ``wait(timeout)`` did with none sent.

``nccl`` shows them and ``nccl_claims`` judges the claims by them; ``nccl`` re-exports them. Every
function takes the notebook's runs (``records.Run``, live or replayed) and measures nothing.
Tested through ``nccl`` in tests/test_lesson_06.py.
"""

from __future__ import annotations

import statistics
from typing import Any

from ..records import Run

MODES = ("blocking", "async_op=True")
P2P_CALLS = [
    "first recv",
    "recv",
    "irecv + wait()",
    "irecv + wait(timeout)",
    "irecv + poll is_completed()",
]
COLL_CALLS = ["all_reduce", "all_reduce(async_op=True) + wait()"]
QUICK_BACK = 0.2  # "returns at once": the host is back within a fifth of the delay
HELD = 0.8  # "held until the data came": the host was held for at least this share of the delay
NEXT_LINE = {  # the line after each mark: where a rank that reached that mark and no further stopped
    "start": "torch.distributed.recv(t, src=0)",
    "recv returned": "print(t)",
    "print(t) returned": "nothing: it finished",
}


def expected_after(name: str, rank: int, n: int) -> Any:
    """What the source says rank ``rank`` of ``n`` holds after the collective ``name`` (a list of
    numbers, or of lists for ``gather`` and ``all_gather``), or None where nothing is defined (the
    ranks that are not ``reduce``'s or ``gather``'s destination).
    """
    total = [
        sum(r + k for r in range(1, n + 1)) for k in range(3)
    ]  # sum over ranks of [r+1, r+2, r+3]
    return {
        "broadcast": [1, 2, 3],
        "scatter": [2 * rank, 2 * rank + 1],
        "reduce": total if rank == 0 else None,  # only the destination's result is defined
        "gather": [[r, r + 1, r + 2] for r in range(n)] if rank == 0 else None,
        "all_reduce": total,
        "all_gather": [[float(r)] for r in range(n)],
        "reduce_scatter": [float(sum(r + rank for r in range(n)))],
    }[name]


def mismatches(run: Run) -> list[str]:
    """Every (mode, collective, rank) of a ``seven_collectives`` run whose data after the call is
    not what the source says, one line each (``'blocking all_reduce rank 1: [0, 0, 0] != [3, 5, 7]'``);
    empty when every rank holds what it should.
    """
    n = len(run.value["who"])
    wrong = []
    for mode in MODES:
        for name, data in run.value[mode].items():
            for rank in range(n):
                want = expected_after(name, rank, n)
                if want is not None and data["after"][rank] != want:
                    wrong.append(f"{mode} {name} rank {rank}: {data['after'][rank]} != {want}")
    return wrong


def summary(run: Run, calls: list[str]) -> dict[str, dict[str, Any]]:
    """Per call of a ``host_timing`` run: ``late_ms`` (the other rank's delay), the medians over the
    repeats of ``returned_ms``, ``waited_ms`` (host back) and ``done_ms`` (``synchronize()``
    returned), in ms after the call; ``arrived``, the share (0 to 1) of repeats with the data there
    when the host went on (None where it was not asked); ``completed_at_return`` and
    ``completed_by_poll``, what ``is_completed()`` said in each repeat (None where not asked); ``n``,
    the repeats. Raises AssertionError if any repeat received wrong data.
    """
    out = {}
    for call in calls:
        rows = [r for r in run.value if r["call"] == call]
        assert all(r["value_ok"] for r in rows), f"{call}: the data received is wrong"
        out[call] = {
            "late_ms": rows[0]["late_s"] * 1e3,
            "returned_ms": statistics.median(r["returned_s"] for r in rows) * 1e3,
            "waited_ms": statistics.median(r["waited_s"] for r in rows) * 1e3,
            "done_ms": statistics.median(r["done_s"] for r in rows) * 1e3,
            "arrived": (
                statistics.mean(bool(r["arrived"]) for r in rows)
                if rows[0]["arrived"] is not None
                else None
            ),
            "completed_at_return": (
                [bool(r["completed_at_return"]) for r in rows]
                if "completed_at_return" in rows[0]
                else None
            ),
            "completed_by_poll": (
                [bool(r["completed_by_poll"]) for r in rows]
                if rows[0].get("completed_by_poll") is not None
                else None
            ),
            "n": len(rows),
        }
    return out


def stopped_at(case: dict[str, Any], rank: int) -> str:
    """The line of the source's example that ``rank``'s host was on when the deadline came, read
    from the last mark it reached: one of ``NEXT_LINE``'s values, or 'before the first mark'.
    """
    last: Any = case["marks"][rank][-1][1] if case["marks"][rank] else None
    if case["status"][rank] == "returned":
        return "nothing: it finished"
    return NEXT_LINE.get(last, "before the first mark")


def stops(*runs: Run) -> dict[tuple[str, bool], str]:
    """``{(backend, warm_up): line}``: where rank 1's host stopped in each case of the
    ``missing_send`` runs.
    """
    return {
        (run.params["backend"], case["warm_up"]): stopped_at(case, 1)
        for run in runs
        for case in run.value
    }


def wait_timeout_outcome(run: Run) -> tuple[bool, str, float | None]:
    """What rank 1's ``wait(timeout)`` did in a ``wait_timeout_without_send`` run, read from its
    marks: (whether it raised, a sentence, seconds from "waiting" to the raise or the return, or
    None when it did neither).
    """
    case, timeout_s = run.value, run.params["wait_timeout_s"]
    marks = {label: t for t, label in case["marks"][1]}
    status = case["status"][1]
    if "wait raised" in marks:
        waited = marks["wait raised"] - marks["waiting"]
        return (
            True,
            f"wait(timeout={timeout_s:g} s) raised after {waited:.2f} s: {case['results'][1]}",
            waited,
        )
    if "wait returned" in marks:
        waited = marks["wait returned"] - marks["waiting"]
        return (
            False,
            (
                f"wait(timeout={timeout_s:g} s) returned after {waited:.2f} s without an error, "
                "with no data sent"
            ),
            waited,
        )
    if "waiting" in marks:
        return (
            False,
            (
                f"wait(timeout={timeout_s:g} s) neither raised nor returned: rank 1 was inside wait() "
                f"and was {status} at the {run.params['deadline_s']:g} s deadline "
                f"({case['reason']})"
            ),
            None,
        )
    before = "the irecv call" if "connected" in marks else "irecv (its pair not connected yet)"
    return (
        False,
        (
            f"rank 1 never reached wait(timeout={timeout_s:g} s): it was inside {before} and was {status} at "
            f"the {run.params['deadline_s']:g} s deadline ({case['reason']}); this measured the "
            "connection, not the wait"
        ),
        None,
    )


def reached_wait(run: Run) -> bool:
    """Whether rank 1 of a ``wait_timeout_without_send`` run reached ``wait(timeout)`` (else the
    wait was not tested).
    """
    return any(label == "waiting" for _, label in run.value["marks"][1])
