"""Notebook 04, section 10: where a bad launch's error surfaces, with the variable or not."""

from __future__ import annotations

from ... import claims
from ...records import Run
from .common import NOTEBOOK, Row

STATEMENTS = (  # the child's statements in order, each with the marker it prints once it returned
    ("bad launch", "launched bad kernel"),
    ("next launch", "next launch returned"),
    ("synchronize", "synchronize returned"),
)
WHERE = {  # with CUDA_LAUNCH_BLOCKING=1 or without: where the error should surface, the check, claim
    False: (
        ("next launch", "synchronize"),
        "without CUDA_LAUNCH_BLOCKING the bad launch itself returns, and a later statement raises",
        "Errors reported asynchronously might not be correct: they surface at a later call",
    ),
    True: (
        ("bad launch",),
        "with CUDA_LAUNCH_BLOCKING=1 the bad launch raises",
        "Enabling synchronisation helps in pinpointing issues (CUDA_LAUNCH_BLOCKING=1)",
    ),
}


def statement_that_raised(markers: list[str]) -> str:
    """The first statement whose "returned" marker is missing and that said it raised; or "none"."""
    for statement, returned in STATEMENTS:
        if returned not in markers:
            said = any(line.startswith(f"{statement} raised:") for line in markers)
            return statement if said else f"{statement} (no error printed: the child stopped)"
    return "none"


def raised_at(run: Run) -> dict[str, str]:
    """``{case: statement}``: for each child process, the statement that raised."""
    return {case: statement_that_raised(out["markers"]) for case, out in run.value.items()}


def surfaced(run: Run, blocking: bool) -> tuple[list[str], bool]:
    """The cases run with (``blocking``) or without; whether all raised at ``WHERE``."""
    raised = raised_at(run)
    found = [case for case, out in run.value.items() if out["launch_blocking"] == blocking]
    return found, all(raised[case] in WHERE[blocking][0] for case in found)


def show(run: Run) -> None:
    """Each child printed: the statement that raised, its markers, its error, the assertion."""
    raised = raised_at(run)
    for case, out in run.value.items():
        assertion = out["device_assert"][0] if out["device_assert"] else ""
        error = " / ".join(out["error_text"][:1] + out["error_text"][2:])  # line 2 is a link
        device = assertion[assertion.find("Assertion") :] or "no assertion printed"
        print(f"{case}\n    raised at: {raised[case]}; markers: {out['markers'][1:]}")
        print(f"    error: {error}\n    device: {device}")


def see(run: Run) -> claims.WhatWeSee:
    """Where each scenario's error surfaced, checked; how often PyTorch suggests the variable."""
    errors, raised, seen = run.value, raised_at(run), claims.WhatWeSee(NOTEBOOK, run)
    for scenario in dict.fromkeys(out["scenario"] for out in errors.values()):
        at = {
            o["launch_blocking"]: raised[c] for c, o in errors.items() if o["scenario"] == scenario
        }
        line = f"Bad kernel {scenario}: without `CUDA_LAUNCH_BLOCKING` the error surfaced at **{at[False]}**; with `CUDA_LAUNCH_BLOCKING=1`, at **{at[True]}**."
        seen.say(line)
    for blocking, (_, statement, _) in WHERE.items():
        found, holds = surfaced(run, blocking)
        seen.check(statement, holds, "; ".join(f"{c}: {raised[c]}" for c in found))
    found = surfaced(run, False)[0]
    hint = [c for c in found if "CUDA_LAUNCH_BLOCKING" in " ".join(errors[c]["error_text"])]
    line = f"PyTorch's own error text suggests `CUDA_LAUNCH_BLOCKING=1` in {len(hint)} of the {len(found)} asynchronous cases (each case ran once)."
    return seen.say(line)


def claims_of(run: Run) -> list[Row]:
    """Where the error surfaces: at a later call without the variable, at the launch with it."""
    raised, rows = raised_at(run), []
    for blocking, (_, _, claim) in WHERE.items():
        found, holds = surfaced(run, blocking)
        where = "with CUDA_LAUNCH_BLOCKING=1" if blocking else "without CUDA_LAUNCH_BLOCKING"
        said = "; ".join(f"{run.value[c]['scenario']} raised at {raised[c]}" for c in found)
        rows.append(Row(claim, run, f"{where}: {said} (each once)", holds))
    return rows
