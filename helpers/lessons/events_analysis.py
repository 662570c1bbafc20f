"""The numbers notebook 04's tables, sentences and claims rest on: the timers' ratios, how far the
first call of an operation stands from the later ones and when the calls settle, the profiler's
time per matmul that the events and ``torch.utils.benchmark`` are held against; which consumer
waited for its producer, what many streams cost, and which statement raised the error.

``events`` and ``events_sync`` show them (``events_sync`` re-exports its own) and
``events_claims`` judges the claims by them. Every function takes the
notebook's runs (``records.Run``, live or replayed) or their values and measures nothing. Tested
through ``events`` in tests/test_lesson_04.py.
"""

from __future__ import annotations

import dataclasses
import statistics

from .. import analysis, claims, trace
from ..records import Run

CASES = ("no wait", "wait_event")  # the two cases of each ordering run
STATEMENTS = (  # the child's statements in order, each with the marker it prints once it returned
    ("bad launch", "launched bad kernel"),
    ("next launch", "next launch returned"),
    ("synchronize", "synchronize returned"),
)


def short(name: str) -> str:
    """An operation's name without its explanation: ``'torch.erf (CUDA loads ...)'`` -> ``'torch.erf'``."""
    return name.split(" (")[0]


def launch_share(run: Run) -> claims.Value:
    """The unsynchronised clock's median over the events' (below 1: it missed the work)."""
    return claims.ratio(run.value["perf_counter, no sync"], run.value["CUDA events"])


def sync_over_events(run: Run) -> claims.Value:
    return claims.ratio(run.value["perf_counter + synchronize"], run.value["CUDA events"])


def first_over_later(times: list[float]) -> claims.Value:
    """First call / median of the later calls, with the later calls' relative spread."""
    later = analysis.across(times[1:])
    ratio = times[0] / later.value
    return claims.Value(ratio, ratio * later.spread / later.value, "x", len(times))


def settled_from(times: list[float], within: float = 2.0) -> int:
    """The call number (1-based) from which every call takes at most ``within`` times the median
    of the calls after the first."""
    later = statistics.median(times[1:])
    call = len(times)
    while call > 1 and times[call - 1] <= within * later:
        call -= 1
    return call + 1


def kernels_of(run: Run) -> list[trace.Interval]:
    return run.value["profiler"].select(kind="kernel")


def profiler_us(run: Run) -> float:
    """Time covered by the profiled kernels, per matmul (a matmul may be more than one kernel)."""
    tools = run.value
    return trace.covered_us(kernels_of(run)) / (tools["matmuls_per_step"] * tools["profiler"].steps)


def _profiler_time(run: Run) -> claims.Value:
    """The profiler's time per matmul in seconds, with the relative spread of its kernels' durations."""
    durations = analysis.across([iv.duration_us for iv in kernels_of(run)])
    seconds = profiler_us(run) / 1e6
    return claims.Value(
        seconds, seconds * durations.spread / durations.value, "s", durations.samples
    )


def by_profiler(run: Run, tool: str) -> claims.Value:
    return claims.ratio(run.value[tool], _profiler_time(run))


def _producer_then_consumer(profile: trace.Profile, slack_us: float = 5.0) -> tuple[int, int]:
    """Steps where the consumer kernel started after the producer kernel ended, out of all steps.

    The producer is the longer kernel of each step; steps are told apart by start order.
    ``slack_us`` allows for timestamps of two GPUs not being exactly on one clock.
    """
    kernels = sorted(profile.select(kind="kernel"), key=lambda iv: iv.start_us)
    pairs = [kernels[i : i + 2] for i in range(0, len(kernels) - 1, 2)]
    ordered = 0
    for pair in pairs:
        producer = max(pair, key=lambda iv: iv.duration_us)
        consumer = min(pair, key=lambda iv: iv.duration_us)
        ordered += consumer.start_us >= producer.end_us - slack_us
    return ordered, len(pairs)


def ordering_counts(run: Run) -> dict[str, dict[str, int]]:
    """For each case (``'no wait'``, ``'wait_event'``) of a producer/consumer run (two streams or
    two GPUs): ``done_first``, how many of the ``checks`` found the producer done when the
    consumer was, and ``after``, in how many of the traced ``steps`` the consumer's kernel started
    after the producer's ended (within 5 us).
    """
    counts = {}
    for label in CASES:
        part = run.value[label]
        after, steps = _producer_then_consumer(part["trace"])
        done_first = part["producer_done_first"]
        counts[label] = {
            "after": after,
            "steps": steps,
            "done_first": sum(done_first),
            "checks": len(done_first),
        }
    return counts


def stream_counts(run: Run) -> list[int]:
    """The numbers of streams the batch of tiny kernels was spread over, smallest first."""
    return sorted(int(c) for c in run.value["by count"])


def by_streams(run: Run) -> dict[int, dict]:
    """Per count of streams, the recorded results with ``device`` keeping only the samples whose
    batch the host queued within the hold (a batch launched for longer than the hold has launch
    time in its device time), ``all device`` every sample, and ``outran``, how many were left out."""
    kernels, hold_us = run.params["kernels"], run.params["hold_us"]
    found = {}
    for c in stream_counts(run):
        recorded = run.value["by count"][str(c)]
        device, launch = recorded["device"], recorded["launch"]
        kept = [
            d
            for d, up in zip(device.samples_s, launch.samples_s, strict=True)
            if up * kernels * 1e6 < hold_us
        ]
        found[c] = {
            **recorded,
            "all device": device,
            "outran": len(device.samples_s) - len(kept),
            "device": dataclasses.replace(device, samples_s=kept) if kept else device,
        }
    return found


def outran_hold(run: Run) -> dict[int, int]:
    """Per count of streams, how many samples' batches the host took longer to launch than the
    hold lasted: ``by_streams`` leaves their device times out.
    """
    return {c: b["outran"] for c, b in by_streams(run).items()}


def stream_ratios(run: Run) -> dict[str, claims.Value]:
    """Ratios of medians, each with its spread: ``'device'``, the batch's device time on the most
    streams over one stream's (below 1: the streams ran side by side); ``'last doubling'``, the
    most streams over half as many; ``'launch'``, the host's launch time per kernel on the most
    streams over one stream's.
    """
    counts, by = stream_counts(run), by_streams(run)
    few, most = counts[0], counts[-1]
    return {
        "device": claims.ratio(by[most]["device"], by[few]["device"]),
        "last doubling": claims.ratio(by[most]["device"], by[counts[-2]]["device"]),
        "launch": claims.ratio(by[most]["launch"], by[few]["launch"]),
    }


def longest_launch_us(run: Run) -> dict[int, float]:
    """The slowest sample's whole launch loop, per count of streams, in us."""
    kernels = run.params["kernels"]
    return {c: max(b["launch"].samples_s) * kernels * 1e6 for c, b in by_streams(run).items()}


def _statement_that_raised(markers: list[str]) -> str:
    """The first statement of the child's script whose "returned" marker is missing: the one
    that raised (checked against the child's own "<statement> raised:" line); "none" if every
    statement returned."""
    for statement, returned in STATEMENTS:
        if returned not in markers:
            said = any(line.startswith(f"{statement} raised:") for line in markers)
            return statement if said else f"{statement} (no error printed: the child stopped)"
    return "none"


def raised_at(run: Run) -> dict[str, str]:
    """``{case: statement}``: for each child process, the statement of its script that raised
    (``'bad launch'``, ``'next launch'``, ``'synchronize'``; ``'none'`` if none did).
    """
    return {case: _statement_that_raised(out["markers"]) for case, out in run.value.items()}
