"""Checkers for the exercises at the end of each notebook: the reader's answer against the value
computed from the notebook's measurements. ``None`` is not answered yet, so notebooks run
unattended."""

from __future__ import annotations

import math

from . import checks


def check_number(
    answer: float | None, expected: float, *, rel_tol: float = 0.15, unit: str = "", hint: str = ""
) -> bool | None:
    """Print whether ``answer`` is within ``rel_tol`` of ``expected``; return True/False/None.
    A first wrong answer gets the hint, the next one the measured value."""
    if answer is None:
        print(
            f"Not answered yet. Replace None with your estimate{f' (in {unit})' if unit else ''}."
        )
        return None
    if not checks.is_number(answer):
        raise TypeError(
            f"the answer must be a number{f' in {unit}' if unit else ''}, got {answer!r}"
        )
    ok = math.isclose(answer, expected, rel_tol=rel_tol)
    u = f" {unit}" if unit else ""
    said = (
        f"you said {answer:.4g}{u}, the measurement gives {expected:.4g}{u} "
        f"(within {rel_tol:.0%} counts)."
    )
    if ok:
        print(f"Right: {said}")
    elif _first_miss(("number", expected, hint)) and hint:
        print(
            f"Not quite: {answer:.4g}{u} is not within {rel_tol:.0%} of the measurement. "
            f"Hint: {hint}. Change your answer and run the cell again."
        )
    else:
        print(f"Not quite: {said}")
    return ok


_MISSED: set[tuple[object, ...]] = set()  # questions answered wrongly once in this kernel


def _first_miss(question: tuple[object, ...]) -> bool:
    """True the first time ``question`` is answered wrongly: then a hint, and the answer after."""
    first = question not in _MISSED
    _MISSED.add(question)
    return first


def check_choice(
    answer: str | None, expected: str, *, choices: list[str], hint: str = ""
) -> bool | None:
    """Print whether ``answer`` is the expected one of ``choices``; return True/False/None (not
    answered, or not a choice). A first wrong answer gets the hint, the next one the answer."""
    if not isinstance(choices, (list, tuple)) or not all(isinstance(c, str) for c in choices):
        raise TypeError(
            f"choices is a list of strings, e.g. ['below 1 MiB', '1-64 MiB'], got {choices!r}"
        )
    if expected not in choices:
        raise ValueError(f"expected {expected!r} is not one of the choices {choices}")
    if answer is None:
        print(f"Not answered yet. Replace None with one of {choices}.")
        return None
    if answer not in choices:
        print(
            f"{answer!r} is not one of the choices; copy one of them exactly: "
            + ", ".join(repr(c) for c in choices)
            + "."
        )
        return None
    ok = answer == expected
    if ok:
        print(f"Right: the measurement says {expected!r}.")
    elif _first_miss(("choice", expected, hint)) and hint:
        print(f"Not quite. Hint: {hint}. Change your answer and run the cell again.")
    else:
        print(f"Not quite: the measurement says {expected!r}.")
    return ok
