"""Section 3 of notebook 06: where the host stops with no ``send``; ``wait(timeout)`` with none."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from ... import claims
from ...records import Run
from .common import ARTICLE, NOTEBOOK, where

RECV_LINE, FINISHED = "torch.distributed.recv(t, src=0)", "nothing: it finished"
# the line after each mark: where a rank that reached that mark and no further stopped
NEXT_LINE = {"start": RECV_LINE, "recv returned": "print(t)", "print(t) returned": FINISHED}
# where the notebook says rank 1's host stops: {(backend, warm_up): line}
EXPECTED = {("nccl", True): "print(t)", ("nccl", False): RECV_LINE, ("gloo", True): RECV_LINE}
CHECKS = {
    ("nccl", True): "After a warm-up, NCCL's recv returns and the host stops at print(t)",
    ("nccl", False): "Without the warm-up, NCCL's first recv itself blocks",
    ("gloo", True): "Under gloo the host stops at the recv line",
}
CUT = 120  # the experiment keeps the first 120 characters of the error's first line
BOUNDED = "No case outlasts its deadline: the hang is real, but bounded, and the notebook goes on"


def stopped_at(case: dict[str, Any], rank: int) -> str:
    """The source's line ``rank``'s host was on at the deadline, read from its last mark."""
    marks = case["marks"][rank]
    if case["status"][rank] == "returned":
        return FINISHED
    return NEXT_LINE.get(marks[-1][1] if marks else "", "before the first mark")


def stops(*runs: Run) -> dict[tuple[str, bool], str]:
    """``{(backend, warm_up): line}``: where rank 1's host stopped in each ``missing_send`` case."""
    return {(r.params["backend"], c["warm_up"]): stopped_at(c, 1) for r in runs for c in r.value}


def case_name(run: Run, case: dict[str, Any]) -> str:
    return f"{run.params['backend']}, {'after a warm-up' if case['warm_up'] else 'no warm-up'}"


def show_missing_send(*runs: Run) -> None:
    """Each case: how it ended, its marks (s after the worker started), where rank 1 stopped."""
    for run in runs:
        for case in run.value:
            print(f"{case_name(run, case)} ({where(run)}):\n  {case['reason']};")
            ran = f"{case['elapsed_s']:.2f} s against a deadline of {case['timeout_s']:g} s"
            print(f"  the ranks ran {ran}")
            for rank, status in enumerate(case["status"]):
                reached = ", ".join(f"{label!r} at {t:.3f} s" for t, label in case["marks"][rank])
                lines = case["printed"][rank].splitlines()
                printed = " | ".join(line for line in lines if line.strip()) or "(nothing)"
                print(f"  rank {rank}: {status}; reached {reached};\n    printed: {printed}")
            print(f"  -> rank 1's host stopped at: {stopped_at(case, 1)}\n")


def see_missing_send(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """Where rank 1 stopped in each case; checks: within the deadline, stopped at ``EXPECTED``."""
    seen, stop = claims.WhatWeSee(NOTEBOOK, nccl), stops(gloo, nccl)
    cases = [(run, case) for run in (gloo, nccl) for case in run.value]
    said = (f"`{stopped_at(c, 1)}` ({case_name(run, c)}, {where(run)})" for run, c in cases)
    seen.say("Rank 1's host stopped at (one run of each case): " + "; ".join(said) + ".")
    longest = max(case["elapsed_s"] - case["timeout_s"] for _, case in cases)
    past = f"the longest case ran {longest:+.2f} s past its deadline"
    seen.check(BOUNDED, longest < 1.0, past, run=gloo)
    for key, statement in CHECKS.items():
        if key in stop:
            run = gloo if key[0] == "gloo" else nccl
            seen.check(statement, stop[key] == EXPECTED[key], f"stopped at {stop[key]}", run=run)
    return seen


@dataclass(frozen=True)
class Wait:
    """What rank 1's ``wait(timeout)`` did with no ``send``."""

    reached: bool  # whether rank 1 got into wait()
    raised: bool
    waited: float | None  # s from "waiting" to the raise or return (None: neither)
    sentence: str  # all that, in words


def whole_words(error: str) -> str:
    """The recorded error ("Type: text", text cut at ``CUT`` characters), a cut text ending at a
    whole word with an ellipsis."""
    kind, _, text = error.partition(": ")
    return error if len(text) < CUT else f"{kind}: {text.rsplit(' ', 1)[0]} …"


def wait_of(run: Run) -> Wait:
    case, timeout_s, deadline_s = run.value, run.params["wait_timeout_s"], run.params["deadline_s"]
    marks, call = {label: t for t, label in case["marks"][1]}, f"wait(timeout={timeout_s:g} s)"
    stopped = f"was {case['status'][1]} at the {deadline_s:g} s deadline ({case['reason']})"
    end = next((m for m in ("wait raised", "wait returned") if m in marks), None)
    waited = marks[end] - marks["waiting"] if end else None
    if end == "wait raised":
        said = f"{call} raised after {waited:.2f} s: {whole_words(case['results'][1])}"
    elif end:
        said = f"{call} returned after {waited:.2f} s without an error, with no data sent"
    elif "waiting" in marks:
        said = f"{call} neither raised nor returned: rank 1 was inside wait() and {stopped}"
    else:
        inside = "the irecv call" if "connected" in marks else "irecv (its pair not connected yet)"
        said = f"rank 1 never reached {call}: it was inside {inside} and {stopped}; "
        said += "this measured the connection, not the wait"
    return Wait("waiting" in marks, end == "wait raised", waited, said)


def show_wait_timeout(*runs: Run) -> None:
    """Prints what each run's ``wait(timeout)`` did, wrapped at 100 characters."""
    for run in runs:
        text = f"{run.params['backend']} ({where(run)}): {wait_of(run).sentence}"
        print(textwrap.fill(text, 100, subsequent_indent="  ", break_long_words=True))


def see_wait_timeout(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """Per backend: when the wait raised (s after it began, against its timeout), or what it did."""
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for run in (gloo, nccl):
        w, timeout_s = wait_of(run), run.params["wait_timeout_s"]
        head = f"{run.params['backend']} ({where(run)}, one run): "
        if w.raised and w.waited is not None:
            off = w.waited - timeout_s
            when = f"{abs(off):.2f} s {'before' if off < 0 else 'after'} its timeout of {timeout_s:g} s ({off / timeout_s:+.0%})"
            raised = f"the wait raised {w.waited:.2f} s after it began"
            seen.say(f"{head}{raised}, {when}, and the host went on.")
        else:
            alone = " The timeout given to `wait()` did not, by itself, give the host back."
            seen.say(f"{head}{w.sentence}.{alone if w.reached else ''}")
    return seen


def add_claims(table: claims.ClaimsTable, wait_nccl: Run, wait_gloo: Run, miss_nccl: Run) -> None:
    """``wait(timeout)`` raising (per backend) and where the missing ``send`` stops the host."""
    for run in (wait_nccl, wait_gloo):
        w, backend = wait_of(run), run.params["backend"]
        text = "work.wait(timeout) raises an exception once the timeout passes, if the operation has not ended"
        holds, said = w.raised if w.reached else None, w.sentence + " (one run)"
        table.add(f"{text} ({backend})", source=ARTICLE, measured=said, holds=holds, run=run)
    stop, warm = stops(miss_nccl), next(c for c in miss_nccl.value if c["warm_up"])
    labels = [label for _, label in warm["marks"][1]]
    reached = f"rank 1 reached {labels}, status {warm['status'][1]}; "
    rows = {
        True: "A recv without a send hangs the receiver; after warm-up recv returns and the host stops at print(t)",
        False: "Without warm-up, the first recv itself blocks (the warm-up line is not printed)",
    }
    for warm_up, text in rows.items():
        if (key := ("nccl", warm_up)) in stop:
            said = f"{reached if warm_up else 'rank 1 '}stopped at {stop[key]} (one run)"
            holds = stop[key] == EXPECTED[key]
            table.add(text, source=ARTICLE, measured=said, holds=holds, run=miss_nccl)
