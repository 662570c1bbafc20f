"""Notebook 04, section 9: what many streams cost, on the GPU and on the host."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import matplotlib.pyplot as plt

from ... import analysis, claims, plotting, tables
from ...records import Run
from ...timing import Timing
from .common import NOTEBOOK, Row, times, vs_one

PARALLEL = "Tasks from different streams can be executed in parallel"
PLOTTED = (("launch", "host launch"), ("device", "device time"))  # Count field, its words
RIGHT = "every stream's element holds the number of kernels that stream ran"
MANY = "Too many streams can lead to contention or scheduling issues, affecting efficiency"
HOST = f"{MANY} (host)"


@dataclass(frozen=True)
class Count:
    """One count of streams: launch and device per kernel (device: queued within the hold)."""

    launch: Timing
    device: Timing
    samples: int
    outran: int
    longest_us: float
    contents_ok: bool


@dataclass(frozen=True)
class Many:
    """Section 9's facts: each count; the most streams over one ("device", "launch"), over half."""

    by: dict[int, Count]
    counts: list[int]  # the counts of streams, fewest first
    few_before_most: tuple[int, int, int]  # the fewest streams, the second most and the most
    longest_ms: float  # the longest launch of a batch
    device: claims.Value
    doubling: claims.Value
    launch: claims.Value


def count_of(recorded: dict, kernels: int, hold_us: float) -> Count:
    device, launch = recorded["device"], recorded["launch"]
    pairs = zip(device.samples_s, launch.samples_s, strict=True)
    kept = [d for d, up in pairs if up * kernels * 1e6 < hold_us]
    n, longest_us = len(device.samples_s), max(launch.samples_s) * kernels * 1e6
    within = dataclasses.replace(device, samples_s=kept) if kept else device
    return Count(launch, within, n, n - len(kept), longest_us, recorded["contents_ok"])


def facts(run: Run) -> Many:
    """Section 9's numbers, computed once from a ``many_streams`` run."""
    kernels, hold_us, recorded = run.params["kernels"], run.params["hold_us"], run.value["by count"]
    counts = sorted(map(int, recorded))
    by = {c: count_of(recorded[str(c)], kernels, hold_us) for c in counts}
    few, before, most = counts[0], counts[-2], counts[-1]
    ratios = ((most, few, "device"), (most, before, "device"), (most, few, "launch"))
    values = (claims.ratio(getattr(by[a], k), getattr(by[b], k)) for a, b, k in ratios)
    longest_ms = max(b.longest_us for b in by.values()) / 1e3
    return Many(by, counts, (few, before, most), longest_ms, *values)


def show(run: Run) -> tables.Table:
    """``torch.cuda.Stream()`` printed; a table per count of streams (us, ms) and its times (us)."""
    made, f = run.value["torch.cuda.Stream()"], facts(run)
    line = f"torch.cuda.Stream(): {made.median_us:.2f} us median on the host (IQR {made.spread:.0%} of it); {run.value['objects made']} objects stood for {run.value['distinct CUDA streams']} distinct CUDA streams"
    print(line)
    _, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (key, what) in zip(axes, PLOTTED, strict=True):
        ts = [getattr(b, key) for b in f.by.values()]
        yerr = [[abs(t.median_s - t.quartiles_s[i]) * 1e6 for t in ts] for i in (0, 1)]
        ax.errorbar(f.counts, [t.median_us for t in ts], yerr=yerr, marker="o", capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_xticks(f.counts, [str(c) for c in f.counts])
        ylabel = f"{what} per kernel (us, median and IQR)"
        ax.set(xlabel="streams the batch is spread over", ylabel=ylabel, ylim=(0, None))
        ax.set_title(what)
    plt.suptitle(plotting.titled(f"{run.params['kernels']} tiny kernels", run))
    plt.gcf().tight_layout()
    per_kernel = [("host launch per kernel", "us", ".2f"), ("device per kernel", "us", ".3f")]
    columns = ["streams", *per_kernel, "every element right", ("longest launch", "ms", ".1f")]
    rows = [
        (c, b.launch.median_us, b.device.median_us, b.contents_ok, b.longest_us / 1e3)
        for c, b in f.by.items()
    ]
    held = f"launches queued behind a {run.params['hold_us'] / 1e3:.0f} ms hold"
    return tables.Table(columns, rows, caption=held)


def see(run: Run) -> claims.WhatWeSee:
    """The stream pool; the batch per kernel (us), GPU and host, one stream against the most."""
    v, f, hold_ms = run.value, facts(run), run.params["hold_us"] / 1e3
    (few, before, most), pool = f.few_before_most, v["distinct CUDA streams"]
    one, top, repeat = f.by[few], f.by[most], v["first repeat at"]
    shared = (
        f": object {repeat + 1} is the first stream again, so beyond {pool} streams a program shares PyTorch's pool instead of getting new ones."
        if repeat >= 0
        else ", each a stream of its own."
    )
    side_by_side = "tiny kernels from different streams ran side by side"
    medians = [b.launch.median_us for b in f.by.values()]
    host = next(r.holds for r in claims_of(run) if r.claim == HOST)  # the claims table's row
    assert isinstance(host, claims.Comparison)
    host = claims.judged(host, run, NOTEBOOK, HOST)
    noisy = (
        ", with a spread as large as the ratio itself" if f.launch.spread >= f.launch.value else ""
    )
    seen = claims.WhatWeSee(NOTEBOOK, run).say(
        f"Asking for a stream took {v['torch.cuda.Stream()'].median_us:.2f} us on the host (median). The {v['objects made']} objects `torch.cuda.Stream()` returned stand for {pool} CUDA streams{shared}",
        f"On the GPU, the batch took {one.device.median_us:.2f} us per kernel on {few} stream and {top.device.median_us:.2f} us on {most}, {times(f.device)} the time on {few} ({vs_one(f.device, 'slower', side_by_side, 'no different within the noise')}); on {most} streams it took {times(f.doubling)} its time on {before} ({vs_one(f.doubling, 'slower', 'faster')}).",
        f"On the host, a launch cost {one.launch.median_us:.1f} us with {few} stream and {top.launch.median_us:.1f} us with {most}, {times(f.launch)} the cost with {few} (the claims table's verdict on more streams costing the host: {claims.stated(host, run)}){noisy}; over the counts the median launch ranged from {min(medians):.1f} to {max(medians):.1f} us.",
    )
    right = all(b.contents_ok for b in f.by.values())
    seen.check(RIGHT, right, f"{len(f.counts)} counts of streams checked")
    outran = [
        f"{b.outran} of the {b.samples} batches on {analysis.plural(c, 'stream')}"
        for c, b in f.by.items()
        if b.outran
    ]
    if outran:
        line = f"The host took longer than the {hold_ms:.0f} ms hold to launch {', '.join(outran)} (the longest {f.longest_ms:.1f} ms): the GPU waited for the launches there, so those samples are left out of the device times above."
        seen.say(line)
    kept = min(b.samples - b.outran for b in f.by.values())
    statement = f"every count of streams keeps at least {analysis.FEW_SAMPLES} samples whose batch the host queued within the spin kernel's hold, so no launch time is in the device times"
    said = f"at least {kept} of {one.samples} kept; longest launch {f.longest_ms:.1f} ms, hold {hold_ms:.0f} ms"
    seen.check(statement, kept >= analysis.FEW_SAMPLES, said)
    return seen


def claims_of(run: Run) -> list[Row]:
    """Many streams overlap tiny kernels, cost the GPU at the last doubling, cost the host."""
    f, kernels = facts(run), run.params["kernels"]
    few, before, most = f.few_before_most
    dropped = [sum(f.by[c].outran for c in pair) for pair in ((few, most), (before, most))]
    out = [
        f"; {n} samples launched for longer than the hold left out" if n else "" for n in dropped
    ]
    said = (  # each claim with what was measured
        (PARALLEL, f"device time of {kernels} tiny kernels on {most} streams / on {few}"),
        (f"{MANY} (GPU)", f"device time of the batch on {most} streams / on {before}"),
        (HOST, f"host launch time per kernel on {most} streams / on {few}"),
    )
    judged = (  # its ratio against 1, the side it holds on, what the verdict means
        (f.device, "below", f"they overlapped{out[0]}"),
        (f.doubling, "above", f"the last doubling cost time; {most} is PyTorch's pool{out[1]}"),
        (f.launch, "above", "more streams cost the host"),
    )
    rows = []
    for (claim, measured), (value, holds_if, meaning) in zip(said, judged, strict=True):
        verdict = claims.compare(value, 1, holds_if=holds_if)
        rows.append(Row(claim, run, f"{measured} ({verdict.in_words()}: {meaning})", verdict))
    return rows
