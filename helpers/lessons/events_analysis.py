"""The numbers notebook 04's tables, sentences and claims rest on: the timers' ratios, how far the
first call of an operation stands from the later ones and when the calls settle, and the
profiler's time per matmul that the events and ``torch.utils.benchmark`` are held against.

``events`` shows them and ``events_claims`` judges the claims by them. Every function takes the
notebook's runs (``records.Run``, live or replayed) or their values and measures nothing. Tested
through ``events`` in tests/test_lesson_04.py.
"""

from __future__ import annotations

import statistics

from .. import analysis, claims, trace
from ..records import Run


def _short(name: str) -> str:
    """An operation's name without its explanation: ``'torch.erf (CUDA loads ...)'`` -> ``'torch.erf'``."""
    return name.split(" (")[0]


def _launch_share(run: Run) -> claims.Value:
    """The unsynchronised clock's median over the events' (below 1: it missed the work)."""
    return claims.ratio(run.value["perf_counter, no sync"], run.value["CUDA events"])


def _sync_over_events(run: Run) -> claims.Value:
    return claims.ratio(run.value["perf_counter + synchronize"], run.value["CUDA events"])


def _first_over_later(times: list[float]) -> claims.Value:
    """First call / median of the later calls, with the later calls' relative spread."""
    later = analysis.across(times[1:])
    ratio = times[0] / later.value
    return claims.Value(ratio, ratio * later.spread / later.value, "x", len(times))


def _settled_from(times: list[float], within: float = 2.0) -> int:
    """The call number (1-based) from which every call takes at most ``within`` times the median
    of the calls after the first."""
    later = statistics.median(times[1:])
    call = len(times)
    while call > 1 and times[call - 1] <= within * later:
        call -= 1
    return call + 1


def _kernels(run: Run) -> list[trace.Interval]:
    return run.value["profiler"].select(kind="kernel")


def _profiler_us(run: Run) -> float:
    """Time covered by the profiled kernels, per matmul (a matmul may be more than one kernel)."""
    tools = run.value
    return trace.covered_us(_kernels(run)) / (tools["matmuls_per_step"] * tools["profiler"].steps)


def _profiler_time(run: Run) -> claims.Value:
    """The profiler's time per matmul in seconds, with the relative spread of its kernels' durations."""
    durations = analysis.across([iv.duration_us for iv in _kernels(run)])
    seconds = _profiler_us(run) / 1e6
    return claims.Value(
        seconds, seconds * durations.spread / durations.value, "s", durations.samples
    )


def _by_profiler(run: Run, tool: str) -> claims.Value:
    return claims.ratio(run.value[tool], _profiler_time(run))
