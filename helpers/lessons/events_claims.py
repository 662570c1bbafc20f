"""The rows of notebook 04's claims table, each with its verdict from the runs: timing needs
synchronisation, events measure GPU work, which wait blocks what, events order streams and GPUs,
warm-up, what many streams cost on the GPU and the host, and errors surfacing later.

``events.claims_table`` adds them in that order. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested through ``events`` in
tests/test_lesson_04.py.
"""

from __future__ import annotations

from .. import claims
from ..records import Run
from .events_analysis import (
    by_profiler,
    first_over_later,
    launch_share,
    ordering_counts,
    outran_hold,
    raised_at,
    short,
    stream_counts,
    stream_ratios,
)

SOURCE = 'article "PyTorch CUDA Streams Introduction"'
METHOD = "measurement method (nvbandwidth, nccl-tests)"


def _share_of(value: claims.Value, seconds: float) -> claims.Value:
    """A measured time over a planned one (``seconds``), with its spread."""
    return claims.Value(value.value / seconds, value.spread / seconds, "x", value.samples)


def add_timing(table: claims.ClaimsTable, run_timers: Run, run_tools: Run) -> None:
    """That timing GPU work needs synchronisation (the unsynchronised clock against the events),
    and that events measure GPU work (against the profiler's kernel time).
    """
    missed = claims.compare(launch_share(run_timers), 0.5, holds_if="below")
    table.add(
        "To measure the execution time of GPU operations, we need to synchronise",
        source=SOURCE,
        run=run_timers,
        measured="perf_counter without synchronize / CUDA events, one matmul "
        f"({missed.in_words()}: it missed most of the work)",
        holds=missed,
    )
    agree = claims.within(by_profiler(run_tools, "events"), 0.9, 1.1)
    table.add(
        "Events measure the time of GPU work (start.record, end.synchronize, start.elapsed_time(end))",
        source=SOURCE,
        run=run_tools,
        measured=f"events / profiler kernel time, one matmul ({agree.in_words()} counts)",
        holds=agree,
    )


def add_waits(table: claims.ClaimsTable, run_wait: Run) -> None:
    """What the two waits block: ``torch.cuda.synchronize()`` the host until every stream is done,
    an event's ``synchronize()`` only until its point in its stream.
    """
    wait, side_us = run_wait.value, run_wait.params["side_us"]
    busy = wait["side_busy_after_event"]
    waited = claims.compare(
        _share_of(claims.measured(wait["torch.cuda.synchronize"]), side_us / 1e6),
        0.9,
        holds_if="above",
    )
    table.add(
        "torch.cuda.synchronize() blocks the host until all work on all streams of the device is done",
        source=SOURCE,
        run=run_wait,
        measured=f"host wait in torch.cuda.synchronize() / the {side_us / 1e3:.0f} ms side-stream kernel "
        f"({waited.in_words()} counts); the event wait took {wait['event.synchronize'].median_ms:.2f} ms",
        holds=waited,
    )
    table.add(
        "An event marks a point in one stream: waiting for it leaves other streams running",
        source=SOURCE,
        run=run_wait,
        measured=f"side stream still busy after event.synchronize() in {sum(busy)} of "
        f"{len(busy)} runs (all counts)",
        holds=all(busy),
    )


def add_ordering(table: claims.ClaimsTable, run_streams: Run, run_gpus: Run) -> None:
    """That an event orders two streams, and two GPUs (``events_analysis.ordering_counts``), and that
    ``torch.cuda.synchronize(device_id)`` waits for that one device.
    """
    for claim, run, first in (
        (
            "Record an event in stream A and wait for it in stream B: B's later work waits for A's",
            run_streams,
            "producer",
        ),
        (
            "Events synchronise streams across GPUs (record on GPU 0, wait on GPU 1)",
            run_gpus,
            "GPU 0",
        ),
    ):
        w, nw = (ordering_counts(run)[label] for label in ("wait_event", "no wait"))
        table.add(
            claim,
            source=SOURCE,
            run=run,
            measured=f"with wait_event: {first} done first {w['done_first']}/{w['checks']}, ordered in trace "
            f"{w['after']}/{w['steps']}; without: {nw['done_first']}/{nw['checks']} (all, and none "
            "without, count)",
            holds=w["done_first"] == w["checks"]
            and w["after"] == w["steps"]
            and nw["done_first"] == 0,
        )
    gpu1_busy = run_gpus.value["gpu1_busy_after_sync0"]
    table.add(
        "torch.cuda.synchronize(device_id) synchronises that one device",
        source=SOURCE,
        run=run_gpus,
        measured=f"synchronize(0) returned while GPU 1 was busy in {sum(gpu1_busy)} of {len(gpu1_busy)} "
        "checks (all count)",
        holds=all(gpu1_busy),
    )


def add_warm_up(table: claims.ClaimsTable, run_first: Run) -> None:
    """That the first call of an operation can be far slower than the later ones: the operation
    whose first call stands out most.
    """
    first = run_first.value
    slowest = max(first, key=lambda name: first_over_later(first[name]).value)
    far = claims.compare(first_over_later(first[slowest]), 10, holds_if="above")
    table.add(
        "Warm up first: the first call of an operation can be far slower than later ones",
        source=METHOD,
        run=run_first,
        measured=f"first call / median of the later ones, {short(slowest)}, the largest of "
        f"{len(first)} operations ({far.in_words()} counts as far slower)",
        holds=far,
    )


def add_many_streams(table: claims.ClaimsTable, run_many: Run) -> None:
    """What many streams do: overlap tiny kernels on the GPU, cost time on it at the last
    doubling, and cost the host launch time (``events_analysis.stream_ratios``).
    """
    many = stream_ratios(run_many)
    counts = stream_counts(run_many)
    few, most, kernels = counts[0], counts[-1], run_many.params["kernels"]
    outran = sum(outran_hold(run_many).values())
    left_out = f"; {outran} samples launched for longer than the hold left out" if outran else ""
    overlapped = claims.compare(many["device"], 1, holds_if="below")
    doubling = claims.compare(many["last doubling"], 1, holds_if="above")
    launch = claims.compare(many["launch"], 1, holds_if="above")
    table.add(
        "Tasks from different streams can be executed in parallel",
        source=SOURCE,
        run=run_many,
        measured=f"device time of {kernels} tiny kernels on {most} streams / on {few} ({overlapped.in_words()}: "
        f"they overlapped{left_out})",
        holds=overlapped,
    )
    table.add(
        "Too many streams can lead to contention or scheduling issues, affecting efficiency (GPU)",
        source=SOURCE,
        run=run_many,
        measured=f"device time of the batch on {most} streams / on {counts[-2]} ({doubling.in_words()}: the "
        f"last doubling cost time; {most} is PyTorch's pool{left_out})",
        holds=doubling,
    )
    table.add(
        "Too many streams can lead to contention or scheduling issues, affecting efficiency (host)",
        source=SOURCE,
        run=run_many,
        measured=f"host launch time per kernel on {most} streams / on {few} ({launch.in_words()}: more streams "
        "cost the host)",
        holds=launch,
    )


def add_errors(table: claims.ClaimsTable, run_errors: Run) -> None:
    """Where a bad launch's error surfaces, without ``CUDA_LAUNCH_BLOCKING`` (at a later call)
    and with it (at the launch itself), by ``events_analysis.raised_at``.
    """
    raised = raised_at(run_errors)
    for blocking, claim, holds in (
        (
            False,
            "Errors reported asynchronously might not be correct: they surface at a later call",
            lambda at: at in ("next launch", "synchronize"),
        ),
        (
            True,
            "Enabling synchronisation helps in pinpointing issues (CUDA_LAUNCH_BLOCKING=1)",
            lambda at: at == "bad launch",
        ),
    ):
        cases = [
            case for case, out in run_errors.value.items() if out["launch_blocking"] == blocking
        ]
        table.add(
            claim,
            source=SOURCE,
            run=run_errors,
            measured=f"{'with CUDA_LAUNCH_BLOCKING=1' if blocking else 'without CUDA_LAUNCH_BLOCKING'}: "
            + "; ".join(f"{run_errors.value[c]['scenario']} raised at {raised[c]}" for c in cases),
            holds=all(holds(raised[c]) for c in cases),
        )
