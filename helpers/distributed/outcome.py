"""What a launch gives back: ``Outcome`` (each rank's status, result, marks, output) and the
two exceptions ``launch`` raises, ``WorkerError`` and ``LaunchTimeout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codec import register

RETURNED, RAISED, DIED, STOPPED = "returned", "raised", "died", "stopped"


@register
@dataclass
class Outcome:
    """What ``supervise`` saw of each rank: its status, result, marks, output and error.

    ``status[rank]`` is 'returned' (the worker returned; ``results[rank]`` holds it), 'raised'
    (``errors[rank]`` holds the traceback), 'died' (the process ended without a word:
    ``errors[rank]`` says how, e.g. "died with SIGKILL" or "exited with code 3") or 'stopped'
    (still running when the deadline passed or another rank failed, and killed).
    ``failure_order`` lists the ranks that raised or died in the order they failed (a death
    before the errors it caused in the other ranks). ``marks[rank]`` lists ``[seconds since that
    rank's worker started, label]`` for each ``mark()`` it reached. ``printed`` / ``log`` hold the
    last ``OUTPUT_KIB`` KiB of what each rank wrote to stdout / stderr. ``startup_s`` is the time
    to start the processes and join the group (None if start-up did not finish within
    ``startup_timeout_s``); ``elapsed_s`` the time from then (or from the launch, if start-up did
    not finish) until every rank had finished or been stopped. Times in seconds.
    ``exited[rank]`` is True when the rank's process ended by itself, before the launcher's
    clean-up had to kill it (ranks that all returned end at once; a stopped rank is killed).
    """

    backend: str
    world_size: int
    timeout_s: float
    status: list[str]
    results: list[Any]
    errors: list[str | None]
    marks: list[list[list[Any]]]
    printed: list[str]
    log: list[str]
    reason: str = ""
    startup_s: float | None = None
    elapsed_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    startup_timeout_s: float | None = None
    failure_order: list[int] = field(default_factory=list)
    exited: list[bool] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every rank returned."""
        return all(s == RETURNED for s in self.status)

    @property
    def unfinished(self) -> list[int]:
        """The ranks that did not return."""
        return [rank for rank, s in enumerate(self.status) if s != RETURNED]

    @property
    def first_failure(self) -> int | None:
        """The rank that failed (raised or died) first, or None if none failed."""
        failed = [r for r in self.failure_order if self.status[r] in (RAISED, DIED)]
        failed += [r for r, s in enumerate(self.status) if s in (RAISED, DIED) and r not in failed]
        return failed[0] if failed else None

    def reached(self, rank: int) -> list[str]:
        """The labels of the marks ``rank`` reached, in order."""
        return [label for _, label in self.marks[rank]]

    def last_mark(self, rank: int) -> str | None:
        """The last mark ``rank`` reached (None if it reached none)."""
        labels = self.reached(rank)
        return labels[-1] if labels else None

    def describe(self) -> str:
        """A few lines for people: what each rank did and the last line it reached."""
        lines = [f"{self.backend}, {self.world_size} ranks: {self.reason}"]
        for rank in range(self.world_size):
            marks = (
                ", ".join(f"{label!r} at {t:.3f} s" for t, label in self.marks[rank]) or "no marks"
            )
            how = self.errors[rank] if self.status[rank] == DIED else self.status[rank]
            lines.append(f"  rank {rank}: {how}; reached {marks}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def raise_for_status(self) -> list[Any]:
        """The results in rank order if every rank returned; else raise ``WorkerError`` naming the
        rank that failed first (it raised or died) or ``LaunchTimeout`` (ranks were still running
        at a deadline)."""
        rank = self.first_failure
        if rank is not None:
            raise WorkerError(self, rank)
        if self.unfinished:
            raise LaunchTimeout(self)
        return list(self.results)


class WorkerError(RuntimeError):
    """A rank raised an exception or its process died; ``.rank``, ``.outcome`` say which and how.

    The message names the rank and, for a death, its exit code or signal ("rank 1 of 2 (gloo)
    died with SIGKILL before returning"); for an exception, its traceback. Raised by
    ``Outcome.raise_for_status``, which ``launch`` calls.
    """

    def __init__(self, outcome: Outcome, rank: int) -> None:
        self.outcome, self.rank = outcome, rank
        error = (outcome.errors[rank] or "").rstrip()
        what = f"raised:\n{error}" if outcome.status[rank] == RAISED else error or "died"
        log = outcome.log[rank].strip()
        tail = f"\n--- end of rank {rank}'s stderr ---\n{log[-3000:]}" if log else ""
        super().__init__(f"rank {rank} of {outcome.world_size} ({outcome.backend}) {what}{tail}")


class LaunchTimeout(TimeoutError):
    """Ranks were still running at a deadline and were killed; ``.outcome`` has their marks.

    The message says which deadline: start-up (``startup_timeout_s``, with the seconds waited)
    or the workers' ``timeout_s``. Raised by ``Outcome.raise_for_status``, which ``launch`` calls.
    """

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        where = "; ".join(
            f"rank {r} last reached {outcome.last_mark(r)!r}" for r in outcome.unfinished
        )
        ranks = f"ranks {outcome.unfinished} of {outcome.world_size} ({outcome.backend})"
        if outcome.startup_s is None and outcome.startup_timeout_s is not None:
            waited = f"{outcome.elapsed_s:.1f} s" if outcome.elapsed_s is not None else "that long"
            super().__init__(
                f"{ranks} had not started their worker within startup_timeout_s="
                f"{outcome.startup_timeout_s:g} s (starting the processes, importing torch, "
                f"joining the group) and were stopped after {waited}; pass a longer "
                f"startup_timeout_s if the machine is busy ({where})"
            )
        else:
            super().__init__(
                f"{ranks} did not finish within timeout_s={outcome.timeout_s:g} s and were "
                f"stopped ({where})"
            )
