"""Notebook 04, sections 2, 7 and 8: which wait blocks what; a stream or GPU waiting for another."""

from __future__ import annotations

from ... import analysis, claims, plotting, tables, trace
from ...records import Run
from .common import NOTEBOOK, Row, bars

CASES = ("no wait", "wait_event")  # the two cases of each ordering run
ROLES = {"streams": ("producer", "consumer"), "GPUs": ("GPU 0 producer", "GPU 1 consumer")}
ABOUT = 0.1  # section 2's "about" a kernel: within this share of the kernel's length
ORDERS = {  # each ordering claim, by what it orders
    "streams": "Record an event in stream A and wait for it in stream B: B's later work waits for A's",
    "GPUs": "Events synchronise streams across GPUs (record on GPU 0, wait on GPU 1)",
}


def poll_us(run: Run) -> float:
    """One ``event.query()`` poll on average (us): polling time over the polls (at least 1)."""
    return run.value["poll_wait_s"] / max(run.value["polls"], 1) * 1e6


def medians_ms(run: Run) -> tuple[float, float]:
    """The event's wait and the device's wait, medians (ms)."""
    return run.value["event.synchronize"].median_ms, run.value["torch.cuda.synchronize"].median_ms


def show_wait(run: Run) -> None:
    """The two waits (median ms), the side stream's state, the polls printed; bars of the waits."""
    (ev_ms, dev_ms), wait, params = medians_ms(run), run.value, run.params
    busy = wait["side_busy_after_event"]
    print(  # one line of source per printed line
        f"kernels queued: {params['side_us'] / 1e3:.1f} ms on the side stream, {params['main_us'] / 1e3:.1f} ms on the current one\n"
        f"host waited in main_done.synchronize():   {ev_ms:8.3f} ms (median)\n"
        f"host waited until torch.cuda.synchronize() returned: {dev_ms:8.3f} ms (median, same start)\n"
        f"side stream still busy when the event wait returned: {sum(busy)} of {len(busy)} times\n\n"
        f"event.query() right after record(): {query_word(run)}; {wait['polls']} polls in {wait['poll_wait_s'] * 1e3:.2f} ms until the {params['poll_us'] / 1e3:.0f} ms kernel finished"
    )
    waits = {"event.synchronize()": ev_ms, "torch.cuda.synchronize()": dev_ms}
    what = "Waiting for one event or for the device"
    bars(run, what, waits, "host wait from the same start (ms)")


def query_word(run: Run) -> str:
    """What ``event.query()`` answered right after ``record()``."""
    return "not done" if run.value["not_done_at_once"] else "done"


def see_wait(run: Run) -> claims.WhatWeSee:
    """Each median wait (ms) over the kernel it waited for; the side stream; ``query()``."""
    (ev_ms, dev_ms), wait, busy = medians_ms(run), run.value, run.value["side_busy_after_event"]
    main_ms, side_ms = run.params["main_us"] / 1e3, run.params["side_us"] / 1e3
    ev_x, dev_x = ev_ms / main_ms, dev_ms / side_ms  # each wait over the kernel it waited for
    seen = claims.WhatWeSee(NOTEBOOK, run).say(
        f"`main_done.synchronize()` returned after {ev_ms:.2f} ms, {ev_x:.2f} times the {main_ms:.0f} ms short kernel, with the side stream still busy in {sum(busy)} of {len(busy)} runs; `torch.cuda.synchronize()` returned after {dev_ms:.2f} ms, {dev_x:.2f} times the {side_ms:.0f} ms long kernel on the other stream (medians of {len(busy)} runs).",
        f'`query()` answered "{query_word(run)}" right after the record, and the host polled {wait["polls"]} times before the {run.params["poll_us"] / 1e3:.0f} ms kernel finished (one run).',
    )
    near = abs(ev_x - 1) < ABOUT and abs(dev_x - 1) < ABOUT
    about = f"{ev_x:.2f} and {dev_x:.2f} times; {ABOUT:.0%} allowed"
    seen.check("each wait lasts about the kernel it waits for", near, about)
    return seen


def wait_claims(run: Run) -> list[Row]:
    """What the two waits block: the device wait all streams, an event's wait only its own."""
    wait, side_us, busy = run.value, run.params["side_us"], run.value["side_busy_after_event"]
    device = claims.measured(wait["torch.cuda.synchronize"])
    share = claims.Value(device.value / side_us * 1e6, device.spread / side_us * 1e6, "x")
    waited = claims.compare(share, 0.9, holds_if="above")
    blocks = "torch.cuda.synchronize() blocks the host until all work on all streams of the device is done"
    marks = "An event marks a point in one stream: waiting for it leaves other streams running"
    device_said = f"host wait in torch.cuda.synchronize() / the {side_us / 1e3:.0f} ms side-stream kernel ({waited.in_words()} counts); the event wait took {wait['event.synchronize'].median_ms:.2f} ms"
    busy_said = f"side stream still busy after event.synchronize() in {sum(busy)} of {len(busy)} runs (all counts)"
    return [Row(blocks, run, device_said, waited), Row(marks, run, busy_said, all(busy))]


# ---------------------------------------------------------------- 7 and 8. ordering


def producer_then_consumer(profile: trace.Profile, slack_us: float = 5.0) -> tuple[int, int]:
    """Steps (kernel pairs) whose shorter kernel started after the longer ended, of all steps."""
    kernels = sorted(profile.select(kind="kernel"), key=lambda iv: iv.start_us)
    pairs = [
        sorted(kernels[i : i + 2], key=lambda iv: iv.duration_us)
        for i in range(0, len(kernels) - 1, 2)
    ]
    return sum(c.start_us >= p.end_us - slack_us for c, p in pairs), len(pairs)


def ordering_counts(run: Run) -> dict[str, dict[str, int]]:
    """Per case: producer ``done_first`` of ``checks``; consumer ``after`` it of ``steps``."""
    counts = {}
    for label in CASES:
        after, steps = producer_then_consumer(run.value[label]["trace"])
        done = run.value[label]["producer_done_first"]
        counts[label] = dict(after=after, steps=steps, done_first=sum(done), checks=len(done))
    return counts


def show_ordering(run: Run, across: str) -> tables.Table:
    """Both cases' timelines (ms) and a table of the counts; ``across``: "streams" or "GPUs"."""
    (first, second), counts = ROLES[across], ordering_counts(run)
    traces = {f"{first}, {second}, {label}": run.value[label]["trace"] for label in CASES}
    what = plotting.titled(f"two {across}, with and without an event to wait for", run)
    plotting.timelines(traces, unit="ms", title=what)
    checks = [f"{c['done_first']} of {c['checks']} checks" for c in counts.values()]
    steps = [f"{c['after']} of {c['steps']} traced steps" for c in counts.values()]
    header = ["case", f"{first} done first", f"{second} started after {first} ended"]
    return tables.Table(header, list(zip(counts, checks, steps, strict=True)))


def see_ordering(run: Run, across: str) -> claims.WhatWeSee:
    """Both cases' counts; the host's ``cudaStreamWaitEvent`` (us) or the device waits (ms)."""
    (first, second), v = ROLES[across], run.value
    no_wait, wait = ordering_counts(run).values()
    nw, w = (
        f"the {second} was done before the {first} was in {c['checks'] - c['done_first']} of {c['checks']} checks, and its kernel started after the {first}'s ended in {c['after']} of {c['steps']} traced steps"
        for c in (no_wait, wait)
    )
    seen = claims.WhatWeSee(NOTEBOOK, run).say(f"Without the wait, {nw}. With `wait_event`, {w}.")
    ordered = no_wait["after"] == 0 and wait["after"] == wait["steps"]
    traced = f"{no_wait['after']} and {wait['after']} of {wait['steps']} steps"
    seen.check(f"the {second}'s kernel: alongside without the wait, after with it", ordered, traced)
    host = v["wait_event"]["trace"].select(kind="runtime")
    waits_us = [iv.duration_us for iv in host if iv.name == "cudaStreamWaitEvent"]
    if across == "streams" and waits_us:
        line = f"On the host lane, `cudaStreamWaitEvent` took {max(waits_us):.1f} us at most (of {analysis.plural(len(waits_us), 'call')}): it returns at once, the GPU waits."
        seen.say(line)
    if across == "GPUs":
        busy, s0, s1 = (v[k] for k in ("gpu1_busy_after_sync0", "synchronize(0)", "synchronize(1)"))
        line = f"`torch.cuda.synchronize(0)` returned after {s0.median_ms:.3f} ms with GPU 1 still busy in {sum(busy)} of {len(busy)} checks; `torch.cuda.synchronize(1)` after {s1.median_ms:.3f} ms (medians of {len(busy)} checks)."
        seen.say(line)
    return seen


def ordering_claims(run_streams: Run, run_gpus: Run) -> list[Row]:
    """That an event orders two streams, and two GPUs; that synchronize(device) waits for one."""
    rows = []
    for (across, claim), run in zip(ORDERS.items(), (run_streams, run_gpus), strict=True):
        (w, nw), first = (ordering_counts(run)[k] for k in CASES[::-1]), ROLES[across][0]
        said = f"with wait_event: {first} done first {w['done_first']}/{w['checks']}, ordered in trace {w['after']}/{w['steps']}; without: {nw['done_first']}/{nw['checks']} (all, and none without, count)"
        ordered = w["done_first"] == w["checks"] and w["after"] == w["steps"]
        rows.append(Row(claim, run, said, ordered and not nw["done_first"]))
    busy = run_gpus.value["gpu1_busy_after_sync0"]
    claim = "torch.cuda.synchronize(device_id) synchronises that one device"
    said = f"synchronize(0) returned while GPU 1 was busy in {sum(busy)} of {len(busy)} checks (all count)"
    return [*rows, Row(claim, run_gpus, said, all(busy))]
