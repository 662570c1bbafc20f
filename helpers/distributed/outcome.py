"""What a launch gives back: ``Outcome``, and the two exceptions ``launch`` raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codec import register

RETURNED, RAISED, DIED, STOPPED = "returned", "raised", "died", "stopped"


@register
@dataclass
class Outcome:
    """What ``supervise`` saw of each rank; times in seconds.

    ``status[rank]``: 'returned' (``results[rank]``), 'raised' (``errors[rank]``: the traceback),
    'died' (``errors[rank]``: "died with SIGKILL") or 'stopped' (killed at a deadline or after
    another rank failed). ``marks[rank]``: ``[seconds since its worker started, label]`` per
    ``mark()``; ``printed`` / ``log``: the end of its stdout / stderr. ``startup_s`` is None when
    start-up did not finish; ``elapsed_s`` runs from then (else from the launch) to the end.
    ``exited[rank]``: it ended by itself before the clean-up killed it.
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
        return all(s == RETURNED for s in self.status)

    @property
    def unfinished(self) -> list[int]:
        """The ranks that did not return."""
        return [rank for rank, s in enumerate(self.status) if s != RETURNED]

    @property
    def first_failure(self) -> int | None:
        """The rank that raised or died first, or None."""
        failed = [r for r in self.failure_order if self.status[r] in (RAISED, DIED)]
        failed += [r for r, s in enumerate(self.status) if s in (RAISED, DIED) and r not in failed]
        return failed[0] if failed else None

    def reached(self, rank: int) -> list[str]:
        return [label for _, label in self.marks[rank]]

    def last_mark(self, rank: int) -> str | None:
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
        """The results in rank order; else ``WorkerError`` for the rank that failed first, or
        ``LaunchTimeout`` for ranks still running at a deadline."""
        rank = self.first_failure
        if rank is not None:
            raise WorkerError(self, rank)
        if self.unfinished:
            raise LaunchTimeout(self)
        return list(self.results)


class WorkerError(RuntimeError):
    """A rank raised or its process died; the message names it, with its traceback or signal."""

    def __init__(self, outcome: Outcome, rank: int) -> None:
        self.outcome, self.rank = outcome, rank
        error = (outcome.errors[rank] or "").rstrip()
        what = f"raised:\n{error}" if outcome.status[rank] == RAISED else error or "died"
        log = outcome.log[rank].strip()
        tail = f"\n--- end of rank {rank}'s stderr ---\n{log[-3000:]}" if log else ""
        super().__init__(f"rank {rank} of {outcome.world_size} ({outcome.backend}) {what}{tail}")


class LaunchTimeout(TimeoutError):
    """Ranks still running at a deadline were killed; ``.outcome`` has their marks."""

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
