"""What notebook 04 shows of its synchronisation experiments: waiting for one event or for the
device, one stream waiting for another's event, one GPU waiting for another's, what many streams
cost, and errors surfacing at a later call.

Its timing experiments and the claims table are in ``events``; the numbers behind the tables and
sentences in ``events_analysis``. Every function takes the notebook's runs (``records.Run``, live
or replayed) and measures nothing. Tested on every recorded machine in tests/test_lesson_04.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from .. import analysis, claims, plotting, tables
from ..records import Run
from .events_analysis import (
    CASES,
    by_streams,
    longest_launch_us,
    ordering_counts,
    outran_hold,  # noqa: F401  re-exported for the tests
    raised_at,
    stream_counts,
    stream_ratios,
)

NOTEBOOK = "04_event_timing"


# ---------------------------------------------------------------- 2. which wait


def poll_us(run: Run) -> float:
    """How long one ``event.query()`` poll took on average, in microseconds: the polling time
    over the number of polls (over 1 when the kernel had finished before the first poll).
    """
    return run.value["poll_wait_s"] / max(run.value["polls"], 1) * 1e6


def _query_word(run: Run) -> str:
    return "not done" if run.value["not_done_at_once"] else "done"


def show_wait(run: Run) -> None:
    """The host's waits of section 2, printed (the kernels queued, both median waits in ms, how
    often the side stream was still busy, the polls of ``event.query()``), and bars of the two
    waits in ms. Returns nothing.
    """
    wait, params = run.value, run.params
    ev_ms, dev_ms = wait["event.synchronize"].median_ms, wait["torch.cuda.synchronize"].median_ms
    busy = wait["side_busy_after_event"]
    print(
        f"kernels queued: {params['side_us'] / 1e3:.1f} ms on the side stream, {params['main_us'] / 1e3:.1f} ms "
        "on the current one"
    )
    print(f"host waited in main_done.synchronize():   {ev_ms:8.3f} ms (median)")
    print(
        f"host waited until torch.cuda.synchronize() returned: {dev_ms:8.3f} ms (median, same start)"
    )
    print(f"side stream still busy when the event wait returned: {sum(busy)} of {len(busy)} times")
    print(
        f"\nevent.query() right after record(): {_query_word(run)}; {wait['polls']} polls in "
        f"{wait['poll_wait_s'] * 1e3:.2f} ms until the {params['poll_us'] / 1e3:.0f} ms kernel finished "
        f"({poll_us(run):.2f} us per poll)"
    )
    plotting.bars_with_ratios(
        {"event.synchronize()": ev_ms, "torch.cuda.synchronize()": dev_ms},
        ylabel="host wait from the same start (ms)",
        title=plotting.machine_title(
            "Waiting for one event or for the device", run.machine, run.live
        ),
    )


def see_wait(run: Run) -> claims.WhatWeSee:
    """What the waits show: each median wait in ms as a multiple of the kernel it waited for,
    how often the side stream was still busy, and what ``query()`` answered.
    """
    wait, params = run.value, run.params
    ev_ms, dev_ms = wait["event.synchronize"].median_ms, wait["torch.cuda.synchronize"].median_ms
    main_ms, side_ms = params["main_us"] / 1e3, params["side_us"] / 1e3
    busy = wait["side_busy_after_event"]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"`main_done.synchronize()` returned after {ev_ms:.2f} ms, {ev_ms / main_ms:.2f} times the "
        f"{main_ms:.0f} ms short kernel, with the side stream still busy in {sum(busy)} of {len(busy)} runs; "
        f"`torch.cuda.synchronize()` returned after {dev_ms:.2f} ms, {dev_ms / side_ms:.2f} times the "
        f"{side_ms:.0f} ms long kernel on the other stream (medians of {len(busy)} runs)."
    )
    seen.say(
        f'`query()` answered "{_query_word(run)}" right after the record, and the host polled '
        f"{wait['polls']} times before the {params['poll_us'] / 1e3:.0f} ms kernel finished."
    )
    return seen


# ---------------------------------------------------------------- 7 and 8. one waits for another


def _ordering_words(counts: dict[str, int], first: str, second: str) -> str:
    """A sentence on one case of the ordering experiments, from its counts."""
    return (
        f"the {second} was done before the {first} was in {counts['checks'] - counts['done_first']} of "
        f"{counts['checks']} checks, and its kernel started after the {first}'s ended in {counts['after']} "
        f"of {counts['steps']} traced steps"
    )


def _ordering_table(run: Run, first: str, second: str) -> tables.Table:
    counts = ordering_counts(run)
    return tables.Table(
        ["case", f"{first} done first", f"{second} started after {first} ended"],
        [
            (
                label,
                f"{c['done_first']} of {c['checks']} checks",
                f"{c['after']} of {c['steps']} traced steps",
            )
            for label, c in counts.items()
        ],
    )


def show_streams(run: Run) -> tables.Table:
    """Two streams with and without ``wait_event``: a table of the counts (producer done first,
    consumer's kernel after the producer's) and both timelines on one time axis. Returns the
    table.
    """
    plotting.timelines(
        {f"producer and consumer streams, {label}": run.value[label]["trace"] for label in CASES},
        unit="ms",
        title=plotting.machine_title(
            "two streams, with and without an event to wait for", run.machine, run.live
        ),
    )
    return _ordering_table(run, "producer", "consumer")


def see_streams(run: Run) -> claims.WhatWeSee:
    """What the two streams show: in how many checks the consumer was done before the producer
    and in how many traced steps its kernel started after the producer's, without and with
    ``wait_event``; and how long ``cudaStreamWaitEvent`` took on the host at most (us).
    """
    counts = ordering_counts(run)
    waits_us = [
        iv.duration_us
        for iv in run.value["wait_event"]["trace"].select(kind="runtime")
        if iv.name == "cudaStreamWaitEvent"
    ]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Without the wait, {_ordering_words(counts['no wait'], 'producer', 'consumer')}. "
        f"With `wait_event`, {_ordering_words(counts['wait_event'], 'producer', 'consumer')}."
    )
    if waits_us:
        seen.say(
            f"On the host lane, `cudaStreamWaitEvent` took {max(waits_us):.1f} us at most: it returns at once, "
            "the waiting is the GPU's."
        )
    return seen


def show_gpus(run: Run) -> tables.Table:
    """Two GPUs with and without ``wait_event``: a table of the counts (GPU 0 done first, GPU 1's
    kernel after GPU 0's) and both timelines on one time axis. Returns the table.
    """
    plotting.timelines(
        {f"GPU 0 producer, GPU 1 consumer, {label}": run.value[label]["trace"] for label in CASES},
        unit="ms",
        title=plotting.machine_title(
            "two GPUs, with and without an event to wait for", run.machine, run.live
        ),
    )
    return _ordering_table(run, "GPU 0", "GPU 1")


def see_gpus(run: Run) -> claims.WhatWeSee:
    """What the two GPUs show: the ordering counts without and with ``wait_event``, then how
    long ``torch.cuda.synchronize(0)`` and ``(1)`` waited (median ms) and how often GPU 1 was
    still busy when the first returned.
    """
    gpus, counts = run.value, ordering_counts(run)
    busy = gpus["gpu1_busy_after_sync0"]
    first, second = "GPU 0 producer", "GPU 1 consumer"
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Without the wait, {_ordering_words(counts['no wait'], first, second)}. "
        f"With `wait_event`, {_ordering_words(counts['wait_event'], first, second)}."
    )
    seen.say(
        f"`torch.cuda.synchronize(0)` returned after {gpus['synchronize(0)'].median_ms:.3f} ms with GPU 1 still "
        f"busy in {sum(busy)} of {len(busy)} checks; `torch.cuda.synchronize(1)` after "
        f"{gpus['synchronize(1)'].median_ms:.3f} ms (medians of {len(busy)} checks)."
    )
    return seen


# ---------------------------------------------------------------- 9. many streams


def show_many(run: Run) -> tables.Table:
    """What many streams cost: ``torch.cuda.Stream()``'s host time and the streams it stood for,
    printed; a table per count of streams (host launch and device time per kernel in us, the
    contents' check, the longest launch loop in ms); the two times against the count, with
    their IQR. Returns the table.
    """
    many, counts, by = run.value, stream_counts(run), by_streams(run)
    kernels, hold_us = run.params["kernels"], run.params["hold_us"]
    made = many["torch.cuda.Stream()"]
    print(
        f"torch.cuda.Stream(): {made.median_us:.2f} us median on the host (IQR {made.spread:.0%} of it); "
        f"{many['objects made']} objects stood for {many['distinct CUDA streams']} distinct CUDA streams"
    )
    longest = longest_launch_us(run)
    table = tables.Table(
        [
            "streams",
            ("host launch per kernel", "us", ".2f"),
            ("device per kernel", "us", ".3f"),
            "every count right",
            ("longest launch", "ms", ".1f"),
        ],
        [
            (
                c,
                by[c]["launch"].median_us,
                by[c]["device"].median_us,
                by[c]["contents_ok"],
                longest[c] / 1e3,
            )
            for c in counts
        ],
        caption=f"launches queued behind a {hold_us / 1e3:.0f} ms hold",
    )
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, what in zip(
        axes, ("launch", "device"), ("host launch", "device time"), strict=True
    ):
        ax.errorbar(
            counts,
            [by[c][key].median_us for c in counts],
            yerr=[
                [by[c][key].median_us - by[c][key].quartiles_s[0] * 1e6 for c in counts],
                [by[c][key].quartiles_s[1] * 1e6 - by[c][key].median_us for c in counts],
            ],
            marker="o",
            capsize=3,
        )
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set_xlabel("streams the batch is spread over")
        ax.set_ylabel(f"{what} per kernel (us, median and IQR)")
        ax.set_ylim(bottom=0)
        ax.set_title(
            plotting.machine_title(f"{kernels} tiny kernels: {what}", run.machine, run.live)
        )
    fig.tight_layout()
    return table


def see_many(run: Run) -> claims.WhatWeSee:
    """What many streams cost: ``torch.cuda.Stream()``'s host time (us) and the pool its objects
    share; the batch's device time per kernel (us) on one stream and on the most, and the last
    doubling's effect; the host's launch time per kernel; checks that every count is right and
    that every batch was queued within the hold.
    """
    many, counts, by = run.value, stream_counts(run), by_streams(run)
    few, most, before = counts[0], counts[-1], counts[-2]
    ratios = stream_ratios(run)
    made, pool = many["torch.cuda.Stream()"], many["distinct CUDA streams"]
    hold_us, longest = run.params["hold_us"], longest_launch_us(run)

    def said(name: str, of: str) -> str:
        value = ratios[name]
        return f"{value.number()} ± {value.spread_text()} times {of}"

    def words(name: str, above: str, same: str, below: str) -> str:
        return analysis.in_words(
            claims.compare(ratios[name], 1, holds_if="above"), above, same, below
        )

    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Asking for a stream took {made.median_us:.2f} us on the host (median). The {many['objects made']} "
        f"objects `torch.cuda.Stream()` returned stand for {pool} CUDA streams"
        + (
            f": object {many['first repeat at'] + 1} is the first stream again, so beyond {pool} streams a "
            "program shares PyTorch's pool instead of getting new ones."
            if many["first repeat at"] >= 0
            else ", each a stream of its own."
        )
    )
    seen.say(
        f"On the GPU, the batch took {by[few]['device'].median_us:.2f} us per kernel on {few} stream and "
        f"{by[most]['device'].median_us:.2f} us on {most}, {said('device', f'the time on {few}')} ("
        + words(
            "device",
            "slower",
            "no different within the noise",
            "tiny kernels from different streams ran side by side",
        )
        + f"); on {most} streams it took {said('last doubling', f'its time on {before}')} ("
        + words("last doubling", "slower", "the same within the noise", "faster")
        + ")."
    )
    seen.say(
        f"On the host, a launch cost {by[few]['launch'].median_us:.1f} us with {few} stream and "
        f"{by[most]['launch'].median_us:.1f} us with {most}, {said('launch', f'the cost with {few}')} ("
        + words("launch", "more", "the same within the noise", "less")
        + "); the `with torch.cuda.stream(...)` around each launch is paid at every count alike."
    )
    seen.check(
        "every stream's element holds the number of kernels that stream ran",
        all(by[c]["contents_ok"] for c in counts),
        f"{len(counts)} counts of streams checked",
    )
    outran = {c: b["outran"] for c, b in by.items()}
    samples = len(by[few]["all device"].samples_s)
    kept = min(samples - n for n in outran.values())
    if any(outran.values()):
        seen.say(
            f"The host took longer than the {hold_us / 1e3:.0f} ms hold to launch "
            + ", ".join(
                f"{n} of the {samples} batches on {c} stream{'s' if c > 1 else ''}"
                for c, n in outran.items()
                if n
            )
            + f" (the longest {max(longest.values()) / 1e3:.1f} ms): the GPU waited for the launches there, so "
            "those samples are left out of the device times above."
        )
    seen.check(
        f"every count of streams keeps at least {analysis.FEW_SAMPLES} samples whose batch the host queued "
        "within the spin kernel's hold, so no launch time is in the device times",
        kept >= analysis.FEW_SAMPLES,
        f"at least {kept} of {samples} kept; longest launch {max(longest.values()) / 1e3:.1f} ms, "
        f"hold {hold_us / 1e3:.0f} ms",
    )
    return seen


# ---------------------------------------------------------------- 10. errors


def show_errors(run: Run) -> None:
    """Each child process printed: the statement that raised, its markers, the first lines of
    the error and the device-side assertion. Returns nothing.
    """
    raised = raised_at(run)
    for case, out in run.value.items():
        print(f"{case}\n    raised at: {raised[case]}; markers: {out['markers'][1:]}")
        print("    error: " + " / ".join(out["error_text"][:1] + out["error_text"][2:3]))
        assertion = out["device_assert"][0] if out["device_assert"] else ""
        print("    device: " + (assertion[assertion.find("Assertion") :] or "no assertion printed"))


def see_errors(run: Run) -> claims.WhatWeSee:
    """Where the error surfaced in each scenario, without and with ``CUDA_LAUNCH_BLOCKING=1``,
    checked against what the markdown says; and in how many of the asynchronous cases PyTorch's
    own error text suggests the variable.
    """
    errors, raised = run.value, raised_at(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    for scenario in dict.fromkeys(out["scenario"] for out in errors.values()):
        cases = {
            out["launch_blocking"]: case
            for case, out in errors.items()
            if out["scenario"] == scenario
        }
        seen.say(
            f"Bad kernel {scenario}: without `CUDA_LAUNCH_BLOCKING` the error surfaced at "
            f"**{raised[cases[False]]}**; with `CUDA_LAUNCH_BLOCKING=1`, at **{raised[cases[True]]}**."
        )
    async_cases = [case for case, out in errors.items() if not out["launch_blocking"]]
    blocking_cases = [case for case, out in errors.items() if out["launch_blocking"]]
    seen.check(
        "without CUDA_LAUNCH_BLOCKING the bad launch itself returns, and a later statement raises",
        all(raised[c] in ("next launch", "synchronize") for c in async_cases),
        "; ".join(f"{c}: {raised[c]}" for c in async_cases),
    )
    seen.check(
        "with CUDA_LAUNCH_BLOCKING=1 the bad launch raises",
        all(raised[c] == "bad launch" for c in blocking_cases),
        "; ".join(f"{c}: {raised[c]}" for c in blocking_cases),
    )
    hint = [
        c
        for c in async_cases
        if any("CUDA_LAUNCH_BLOCKING" in line for line in errors[c]["error_text"])
    ]
    seen.say(
        f"PyTorch's own error text suggests `CUDA_LAUNCH_BLOCKING=1` in {len(hint)} of the {len(async_cases)} "
        "asynchronous cases."
    )
    return seen
