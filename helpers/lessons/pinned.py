"""What notebook 01 shows of its copies: where the host waits for a pageable and a pinned copy,
the bandwidth of both kinds in both directions, the tutorial's four statements under its Timer,
what pinned allocations cost and what PyTorch's cache keeps; the expected values of two
exercises; and the notebook's claims table.

The sweep of the tutorial's statements across sizes, and the verdicts on its claim "up to twice
as slow" per size range, are in ``pinned_sizes``. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested on every recorded machine in
tests/test_lesson_01.py.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, hardware, plotting, tables, timing, trace
from ..records import Run
from . import pinned_sizes
from .pinned_sizes import (
    FEW,
    TUT_PAGEABLE,
    TUT_PIN,
    TUT_PIN_TO,
    TUT_PINNED,
    _few,
    _tutorial_ratio,
    _us,
)

NOTEBOOK = "01_pinned_memory"
MiB = 2**20
FORUM = "NVIDIA forum thread on pageable copies"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
STAGED = 0.8  # the host inside cudaMemcpyAsync for at least this share of the copy: "(nearly) all staged"
GOES_ON = 0.1  # ... for less than this share: the host "goes on"
RARE = 0.25  # "in rare cases": at no more than this share of the sizes measured
COPIES = {
    "h2d_pinned": "H2D from pinned",
    "h2d_pageable": "H2D from pageable",
    "d2h_pinned": "D2H to pinned",
    "d2h_pageable": "D2H to pageable",
}
FLAT = {"h2d_pinned": 0.05, "d2h_pinned": 0.05, "h2d_pageable": 0.15, "d2h_pageable": 0.15}
CLAIM_IS = {
    claims.HOLDS: "holds",
    claims.DOES_NOT_HOLD: "does not hold here",
    claims.BORDERLINE: "is borderline here",
}


# ---------------------------------------------------------------- small helpers


def _samples(samples: int | None) -> str:
    """'; N samples' when a number rests on fewer than ``FEW`` samples, else nothing."""
    return f"; {analysis.few(samples)}" if analysis.few(samples) else ""


def _bytes(value: int | None) -> str:
    return "?" if value is None else timing.format_bytes(value)


def _part_of(part: float, whole: float, whole_words: str) -> str:
    """``part`` against ``whole`` in words: '0.7% of the GPU's copy' or '1.02 times the GPU's copy'."""
    share = part / whole
    return f"{share:.1%} of {whole_words}" if share < 1 else f"{share:.2f} times {whole_words}"


# ---------------------------------------------------------------- 1. where the host waits


def _staging(run: Run) -> dict[str, dict[str, Any]]:
    """Per kind of memory: the GPU's copy time, the host's time inside cudaMemcpyAsync and in the
    synchronize call (us), and the copies' names."""
    found = {}
    for label, case in run.value.items():
        prof = case["profile"]
        copies = prof.select(kind="memcpy", copy_kind="HtoD")
        found[label] = {
            "copy_us": trace.covered_us(copies),
            "memcpy_call_us": trace.host_blocked_us(prof.intervals, "cudaMemcpyAsync"),
            "sync_us": trace.host_blocked_us(prof.intervals, "Synchronize"),
            "names": " and ".join(sorted({c.name for c in copies})),
        }
    return found


def _host_call_share(run: Run) -> dict[str, float]:
    """Per kind of host memory: the host's time inside cudaMemcpyAsync over the GPU's copy time."""
    return {label: s["memcpy_call_us"] / s["copy_us"] for label, s in _staging(run).items()}


def show_staging(run: Run) -> tables.Table:
    """The profiled H2D copy from each kind of memory: a table (is_pinned(), the profiler's copy
    names, the GPU's copy time, the host's time inside cudaMemcpyAsync and in the synchronize
    call, all in us) and both timelines. Returns the table.

    Taught in 01_pinned_memory.
    """
    staging = _staging(run)
    table = tables.Table(
        [
            "memory",
            "is_pinned()",
            "copy names",
            ("GPU copy", "us", ".0f"),
            ("host inside cudaMemcpyAsync", "us", ".0f"),
            ("call / copy", "x", ".3f"),
            ("host in synchronize", "us", ".0f"),
        ],
        title=plotting.machine_title("one H2D copy", run.machine, run.live),
        caption="one profiled copy of each kind; call / copy: the host's time inside "
        "cudaMemcpyAsync over the GPU's copy time",
    )
    for label, case in run.value.items():
        s = staging[label]
        table.add(
            label,
            case["is_pinned"],
            s["names"],
            s["copy_us"],
            s["memcpy_call_us"],
            s["memcpy_call_us"] / s["copy_us"],
            s["sync_us"],
        )
    size = timing.format_bytes(run.params["nbytes"])
    plotting.timelines(
        {
            f"one {size} H2D copy from {label} memory": case["profile"]
            for label, case in run.value.items()
        },
        title=plotting.machine_title(
            "H2D copies from pageable and pinned memory", run.machine, run.live
        ),
    )
    return table


def see_staging(run: Run) -> claims.WhatWeSee:
    """What the two profiled copies show: the copies' names, how long the host sat inside
    ``cudaMemcpyAsync`` against the GPU's copy time for each kind of memory, where the host waited
    for the pinned copy, and which copy took longer on the GPU (times in us).

    Taught in 01_pinned_memory.
    """
    s = _staging(run)
    page, pin = s["pageable"], s["pinned"]
    share = _host_call_share(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The profiler names the first copy `{page['names']}` and the second `{pin['names']}` "
        "(one profiled copy of each, so every number here is a single sample)."
    )
    gpu_copy, copy_time = "the GPU's copy time", "the copy's time"
    seen.say(
        f"From pageable memory the host sat inside `cudaMemcpyAsync` for {page['memcpy_call_us']:.0f} us, "
        f"{_part_of(page['memcpy_call_us'], page['copy_us'], gpu_copy)} ({page['copy_us']:.0f} us), although "
        "we passed `non_blocking=True`: "
        + (
            "the call returned only when (nearly) all the data had been staged."
            if share["pageable"] >= STAGED
            else "the call returned well before the copy ended, so here the driver did not stage (nearly) all of it first."
        )
    )
    seen.say(
        f"From pinned memory `cudaMemcpyAsync` took {pin['memcpy_call_us']:.0f} us, "
        f"{_part_of(pin['memcpy_call_us'], pin['copy_us'], copy_time)}, and the host waited "
        f"{pin['sync_us']:.0f} us in the synchronize call instead, where we asked for it."
    )
    longer = page["copy_us"] / pin["copy_us"]
    seen.say(
        f"On the GPU the pinned copy took {pin['copy_us']:.0f} us against {page['copy_us']:.0f} us from pageable "
        "memory: "
        + (
            f"the pageable copy took {longer:.1f} times as long as the pinned one."
            if longer > 1
            else f"the pinned copy took {1 / longer:.1f} times as long as the pageable one."
        )
    )
    return seen


# ---------------------------------------------------------------- 2. bandwidth by size


def _gbps(run: Run) -> dict[str, list[float]]:
    return {key: [row[key].gbps for row in run.value["rows"]] for key in COPIES}


def _link(run: Run) -> tuple[int | None, int | None, float | None]:
    """GPU 0's PCIe generation and width at most, and the link's raw one-way rate in GB/s."""
    gpu0 = (run.header["machine"].get("gpus") or [{}])[0]
    gen, width = gpu0.get("pcie_gen_max"), gpu0.get("pcie_width_max")
    return gen, width, hardware.pcie_theoretical_gbps(gen, width)


def _of_link(low: float, high: float, link: float) -> str:
    """' (85%-87% of the raw link rate)', or where a rate passes the raw rate, that it does (a
    share of a bound above 100% is no result)."""
    if high > link:
        return (
            " (above the reported link's raw rate: the copies did not take that link as reported)"
        )
    shares = (
        f"{low / link:.0%}"
        if f"{low / link:.0%}" == f"{high / link:.0%}"
        else f"{low / link:.0%}-{high / link:.0%}"
    )
    return f" ({shares} of the raw link rate)"


def _ceiling_gbps(run: Run) -> float:
    """The measured ceiling: the best median rate of a pinned copy, either direction (GB/s)."""
    gbps = _gbps(run)
    return max(gbps["h2d_pinned"] + gbps["d2h_pinned"])


def show_bandwidth(run: Run) -> None:
    """The four copies' bandwidth by size: a table (decimal GB/s, and the pinned over pageable H2D
    ratio), the measured ceiling against the PCIe link's raw rate, each copy's range from 64 MiB
    up, and the curves on log axes.

    Taught in 01_pinned_memory.
    """
    sizes, gbps, ceiling = run.value["sizes"], _gbps(run), _ceiling_gbps(run)
    gen, width, link = _link(run)
    table = tables.Table(
        [("size", "", timing.format_bytes)]
        + [(name, "GB/s", ".2f") for name in COPIES.values()]
        + [("pinned / pageable H2D", "x", ".2f")],
        title=plotting.machine_title("copy bandwidth", run.machine, run.live),
        caption="decimal GB/s, the median of the samples at each size",
    )
    for i, n in enumerate(sizes):
        table.add(
            n, *[gbps[key][i] for key in COPIES], gbps["h2d_pinned"][i] / gbps["h2d_pageable"][i]
        )
    display(table)
    print(f"\nmeasured ceiling (best pinned copy, either direction): {ceiling:.1f} GB/s")
    if link:
        print(
            f"PCIe link: gen {gen} x{width}, raw rate {link:.1f} GB/s per direction; the ceiling is "
            + (
                f"{ceiling / link:.0%} of it"
                if ceiling <= link
                else "above it: the copies did not take that link"
            )
        )
    else:
        print("PCIe link: not reported by nvidia-smi on the recorded machine")
    large = [i for i, n in enumerate(sizes) if n >= 64 * MiB]
    for key in ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"):
        if large:
            worst, best = min(gbps[key][i] for i in large), max(gbps[key][i] for i in large)
            print(
                f"{COPIES[key]:18} at 64 MiB and up: {worst:6.2f} to {best:6.2f} GB/s"
                + (_of_link(worst, best, link) if link else "")
            )
    ax = plotting.bandwidth_vs_size(
        {COPIES[key]: (sizes, gbps[key]) for key in COPIES},
        title=plotting.machine_title("copy bandwidth, pinned vs pageable", run.machine, run.live),
        ceiling_gbps=ceiling,
        ceiling_label="measured ceiling",
    )
    if link:
        ax.axhline(
            link,
            linestyle=":",
            color="black",
            label=f"PCIe gen {gen} x{width} raw rate ({link:.0f} GB/s)",
        )
        ax.legend(fontsize=8)
    plt.show()


def _median_spread(run: Run, kind: str) -> float:
    """The median relative spread (half the IQR over the median) of the pinned or pageable timings."""
    shares = sorted(
        claims.measured(row[key]).spread / row[key].median_s
        for row in run.value["rows"]
        for key in COPIES
        if key.endswith(kind)
    )
    return shares[len(shares) // 2]


def see_bandwidth(run: Run) -> claims.WhatWeSee:
    """What the curves show: the smallest size's best rate against the ceiling, how each curve ends
    (``claims.describe_curve``), how noisy the two clocks were, and how many times the pageable
    copy's rate the pinned copy reached in each direction (rates in decimal GB/s).

    Taught in 01_pinned_memory.
    """
    sizes, gbps, ceiling = run.value["sizes"], _gbps(run), _ceiling_gbps(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    smallest_best = max(gbps[key][0] for key in COPIES)
    seen.say(
        f"At {timing.format_bytes(sizes[0])} the fastest of the four copies moves {smallest_best:.2g} GB/s, "
        f"{smallest_best / ceiling:.1%} of the measured ceiling ({ceiling:.1f} GB/s)."
    )
    for key in COPIES:
        seen.say(
            f"{COPIES[key]} {claims.describe_curve(sizes, gbps[key], tolerance=FLAT[key]).words}."
        )
    page, pin = _median_spread(run, "pageable"), _median_spread(run, "pinned")
    seen.say(
        f"(Changes within {FLAT['h2d_pinned']:.0%} count as flat for the pinned curves and within "
        f"{FLAT['h2d_pageable']:.0%} for the pageable ones"
        + (
            f", whose samples vary more: a median spread of {page:.1%} of the value against "
            f"{pin:.1%} for the pinned ones.)"
            if page > pin
            else ".)"
        )
    )
    fewest = min(len(row[key].samples_s) for row in run.value["rows"] for key in COPIES)
    if fewest < FEW:
        seen.say(f"Each rate is the median of as few as {fewest} samples at the largest sizes.")
    for direction, pinned_key, pageable_key in (
        ("H2D", "h2d_pinned", "h2d_pageable"),
        ("D2H", "d2h_pinned", "d2h_pageable"),
    ):
        times = [gbps[pinned_key][i] / gbps[pageable_key][i] for i in range(len(sizes))]
        seen.say(
            f"{direction}: the pinned copy moved {min(times):.1f} to {max(times):.1f} times the pageable copy's "
            f"GB/s over all sizes, {times[-1]:.1f} times at {timing.format_bytes(sizes[-1])}."
        )
    return seen


def copy_ms(run: Run, nbytes: int) -> float:
    """Milliseconds a pinned H2D copy of ``nbytes`` takes at the rate measured at the sweep's
    largest size (decimal GB/s: 10**9 bytes per second).

    Taught in 01_pinned_memory.
    """
    return nbytes / (_gbps(run)["h2d_pinned"][-1] * 1e9) * 1e3


# ---------------------------------------------------------------- 3. the tutorial's statements


def show_tutorial(run: Run) -> tables.Table:
    """The four statements under ``torch.utils.benchmark``: a table (median and spread in us,
    samples, decimal GB/s) and bars of the medians in ms with their ratios. Returns the table.

    Taught in 01_pinned_memory.
    """
    table = tables.Table(
        [
            "statement",
            ("median", "us", ".1f"),
            ("spread (half IQR)", "us", ".1f"),
            "samples",
            ("rate", "GB/s", ".2f"),
        ],
        caption="torch.utils.benchmark's adaptive_autorange",
    )
    for text, t in run.value.items():
        v = claims.measured(t)
        table.add(text, v.value * 1e6, v.spread * 1e6, v.samples, t.gbps)
    plotting.bars_with_ratios(
        {
            text.replace("pageable_tensor", "pageable").replace(
                "pinned_tensor", "pinned"
            ): t.median_ms
            for text, t in run.value.items()
        },
        title=plotting.machine_title(
            f"the tutorial's statements under its Timer, {run.params['numel']:,} float32",
            run.machine,
            run.live,
        ),
        ylabel="time per call (ms, median)",
    )
    return table


def see_tutorial(run: Run) -> claims.WhatWeSee:
    """What the Timer shows: the fastest statement, ``pin_memory()`` alone against the pageable
    copy (longer, shorter or the same within the noise), pin-then-copy against its two parts timed
    apart, and the verdict on "up to twice as slow" at this size (times in us, ratios of times).

    Taught in 01_pinned_memory.
    """
    tut = run.value
    seen = claims.WhatWeSee(NOTEBOOK, run)
    fastest = min(tut, key=lambda text: tut[text].median_s)
    seen.say(f"The fastest of the four is `{fastest}`, at {_us(tut[fastest])}.")
    pin_alone = claims.compare(claims.ratio(tut[TUT_PIN], tut[TUT_PAGEABLE]), 1, holds_if="above")
    words = analysis.in_words(
        pin_alone,
        "longer than the whole pageable copy",
        "as long as the whole pageable copy, within the noise",
        "less than the whole pageable copy",
    )
    seen.say(
        f"`pin_memory()` alone took {_us(tut[TUT_PIN])} against {_us(tut[TUT_PAGEABLE])} for the pageable copy: "
        f"{analysis.times(pin_alone.value)} the pageable copy's time, {words}."
    )
    parts = tut[TUT_PIN].median_s + tut[TUT_PINNED].median_s
    seen.say(
        f"`pin_memory().to('cuda:0')` took {_us(tut[TUT_PIN_TO])}; `pin_memory()` and the pinned copy timed "
        f"apart add up to {parts * 1e6:.1f} us, and the statement took {tut[TUT_PIN_TO].median_s / parts:.2f} "
        "times that sum."
    )
    twice = _tutorial_ratio(run)
    seen.say(
        f"So at the tutorial's size, statements and Timer, pinning first and then copying took "
        f"{analysis.times(twice.value)} the plain pageable copy's time{_few(twice.value.samples)}: the claim "
        f"'slower, but at most twice as slow' (between 1 and 2) **{CLAIM_IS[twice.verdict]}**."
    )
    return seen


# ---------------------------------------------------------------- 5. pinned allocations and the cache


def _stage_bytes(run: Run) -> dict[str, tuple[int | None, int | None]]:
    """{stage: (bytes the cache holds, bytes in live tensors)}; live is None where the counter
    reported more than the cache holds (it cannot be)."""
    found = {}
    for label, stats in run.value["stages"]:
        held, live = hardware.pinned_host_bytes(stats)
        found[label] = (
            held,
            None if held is not None and live is not None and live > held else live,
        )
    return found


def _live_counter_broken(run: Run) -> bool:
    """Whether ``host_memory_stats()`` reported, at some stage, more bytes in live tensors than
    its cache held (which cannot be: that counter is then not shown)."""
    return any(
        held is not None and live is not None and live > held
        for held, live in (hardware.pinned_host_bytes(stats) for _, stats in run.value["stages"])
    )


def _new_blocks_for_smaller(run: Run) -> int:
    stages = dict(run.value["stages"])
    return stages["holding a smaller tensor"].get("num_host_alloc", 0) - stages[
        "tensor deleted"
    ].get("num_host_alloc", 0)


def show_allocator(run: Run) -> None:
    """Pinned allocations: a table per size (first pinned allocation, reuse from the cache and a
    pageable ``torch.zeros`` in ms, their ratios, the pinning rate in GB/s), then what
    ``host_memory_stats()`` reported at each stage of holding and freeing a tensor.

    Taught in 01_pinned_memory.
    """
    table = tables.Table(
        [
            ("size", "", timing.format_bytes),
            ("first pinned", "ms", ".3f"),
            ("reuse (cache)", "ms", ".4f"),
            ("pageable zeros", "ms", ".3f"),
            ("first / reuse", "x", ".0f"),
            ("first / pageable", "x", ".1f"),
            ("pinning rate", "GB/s", ".2f"),
        ],
        title=plotting.machine_title("pinned allocations", run.machine, run.live),
        caption=f"median of {run.params['repeats']} samples per size, synchronised host clock",
    )
    for row in run.value["rows"]:
        first, reuse, plain = row["first"], row["reuse"], row["pageable"]
        table.add(
            row["nbytes"],
            first.median_ms,
            reuse.median_ms,
            plain.median_ms,
            first.median_s / reuse.median_s,
            first.median_s / plain.median_s,
            first.gbps,
        )
    display(table)
    torch_version = run.value["torch"]
    stages = tables.Table(
        [
            "stage",
            "held by the cache",
            "in live tensors",
            "cudaHostAlloc calls",
            "cudaFreeHost calls",
        ],
        title=f"host_memory_stats() on torch {torch_version}, requests of "
        f"{timing.format_bytes(run.params['request'])}, then "
        f"{timing.format_bytes(run.params['smaller_request'])}",
    )
    for label, stats in run.value["stages"]:
        held, live = _stage_bytes(run)[label]
        stages.add(
            label,
            _bytes(held),
            _bytes(live),
            stats.get("num_host_alloc"),
            stats.get("num_host_free"),
        )
    if _live_counter_broken(run):
        stages.caption = (
            f"?: torch {torch_version} reported more bytes in live tensors than its cache holds, so that "
            "counter is not shown"
        )
    display(stages)


def held_mib(run: Run) -> float:
    """MiB the cache held while one tensor of the ``request`` size was alive (NaN where this
    PyTorch's ``host_memory_stats()`` does not report it).

    Taught in 01_pinned_memory.
    """
    held = _stage_bytes(run)["holding one tensor"][0]
    return math.nan if held is None else held / MiB


def see_allocator(run: Run) -> claims.WhatWeSee:
    """What the allocations show: how many times a reuse's or a pageable allocation's time the
    first pinned allocation took, its time (ms) and pinning rate (GB/s) at the smallest and largest
    size, and what the cache held (bytes) while a tensor lived, after it was freed and after
    ``_host_emptyCache()``.

    Taught in 01_pinned_memory.
    """
    rows = run.value["rows"]
    over_reuse = [row["first"].median_s / row["reuse"].median_s for row in rows]
    over_pageable = [row["first"].median_s / row["pageable"].median_s for row in rows]
    samples = min(len(row[key].samples_s) for row in rows for key in ("first", "reuse", "pageable"))
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The first pinned allocation took {min(over_reuse):.0f} to {max(over_reuse):.0f} times as long as a reuse "
        f"from the cache, and {min(over_pageable):.1f} to {max(over_pageable):.1f} times as long as a pageable "
        f"`torch.zeros` of the same size{' (medians of ' + str(samples) + ' samples each)' if samples < FEW else ''}."
    )
    first, last = rows[0], rows[-1]
    seen.say(
        f"It took {first['first'].median_ms:.3g} ms at {timing.format_bytes(first['nbytes'])} and "
        f"{last['first'].median_ms:.4g} ms at {timing.format_bytes(last['nbytes'])}: the OS pinned "
        f"{first['first'].gbps:.2g} GB/s at the smallest size and {last['first'].gbps:.2g} GB/s at the largest."
    )
    bytes_at = _stage_bytes(run)
    holding = bytes_at["holding one tensor"][0]
    if holding is None:
        seen.say(f"torch {run.value['torch']} does not report the bytes its cache holds.")
        return seen
    request, new_blocks = run.params["request"], _new_blocks_for_smaller(run)
    power_of_two = holding & (holding - 1) == 0 and holding >= request
    seen.say(
        f"Holding one {timing.format_bytes(request)} tensor, the cache held {_bytes(holding)}"
        + (" (the request rounded up to a power of two)" if power_of_two else "")
        + "; after the tensor was "
        f"deleted it still held {_bytes(bytes_at['tensor deleted'][0])}; the smaller request needed "
        f"{new_blocks} new `cudaHostAlloc` call(s)"
        + (" (it was served from the held block)" if new_blocks == 0 else "")
        + f"; after `_host_emptyCache()` it held {_bytes(bytes_at['after _host_emptyCache()'][0])}."
    )
    return seen


# ---------------------------------------------------------------- the claims table


def claims_table(
    run_trace: Run, run_bw: Run, run_tut: Run, run_pin: Run, run_alloc: Run
) -> claims.ClaimsTable:
    """The notebook's claims, each with its verdict from the runs: where the host waits for a
    pageable and a pinned copy, pinned against pageable bandwidth, "up to twice as slow" at the
    tutorial's size and per size range (``pinned_sizes.twice_as_slow_verdicts``), pin-then-copy
    faster in rare cases, pinning paying off for large tensors, and pinned memory as a limited
    resource (not testable: measured by its cost).

    Taught in 01_pinned_memory.
    """
    table = claims.ClaimsTable(NOTEBOOK)
    share = _host_call_share(run_trace)
    table.add(
        "A copy from pageable memory does not return to the host until (nearly) all of it has been staged",
        source=FORUM,
        measured="time the host spent inside cudaMemcpyAsync over the pageable copy's GPU time "
        f"(non_blocking=True; one profiled copy, so no spread); 'nearly all': at least {STAGED}",
        holds=claims.compare(share["pageable"], STAGED, holds_if="above"),
        run=run_trace,
    )
    table.add(
        "From pinned memory the copy is queued and the host goes on (pinned memory is the reliable way to async copies)",
        source=FORUM,
        measured="time the host spent inside cudaMemcpyAsync, as a share of the pinned copy's GPU time "
        f"(one profiled copy, so no spread); 'goes on': below {GOES_ON}",
        holds=claims.compare(share["pinned"], GOES_ON, holds_if="below"),
        run=run_trace,
    )
    _bandwidth_claim(table, run_bw)
    twice = pinned_sizes.TWICE
    table.add(
        f"{twice} [at 1e6 float32, with the tutorial's statements and its Timer]",
        source=f"{TUTORIAL} (what you will learn)",
        measured=f"t({TUT_PIN_TO}) / t({TUT_PAGEABLE}) under torch.utils.benchmark.Timer (the tutorial's r2"
        f"{_samples(_tutorial_ratio(run_tut).value.samples)}); holds between 1 and 2",
        holds=_tutorial_ratio(run_tut),
        run=run_tut,
    )
    for label, (comparison, explanation) in pinned_sizes.twice_as_slow_verdicts(run_pin).items():
        table.add(
            f"{twice} [{label}, host clock]",
            source=f"{TUTORIAL} (what you will learn)",
            measured=f"the worst t(pin_memory().to(non_blocking=True)) / t(pageable .to()) in the range: "
            f"{explanation}; holds between 1 and 2",
            holds=comparison,
            run=run_pin,
        )
    sizes = run_pin.value["sizes"]
    for case, values in pinned_sizes.nonblocking_ratios(run_pin).items():
        best = min(range(len(values)), key=lambda i: values[i].value)
        faster = [claims.compare(v, 1, holds_if="below") for v in values]
        wins = sum(c.verdict == claims.HOLDS for c in faster)
        # "can be faster": at one size at least; "in rare cases": at no more than RARE of the sizes
        rare = claims.compare(
            claims.Value(wins / len(values), unit=f"of {len(values)} sizes"), RARE, holds_if="below"
        )
        name, decisive = analysis.weakest({"faster somewhere": faster[best], "rare": rare})
        table.add(
            "pin_memory() (a new pinned storage) followed by the copy can, in rare cases, be faster than "
            f"the driver's chunked copy from pageable memory [{case}]",
            source=TUTORIAL,
            measured=f"t(pin_memory().to(non_blocking=True)) / t(pageable .to()): smallest "
            f"{values[best].number()} at {timing.format_bytes(sizes[best])} (faster: below 1); "
            f"faster beyond this run's noise at {wins} of {len(values)} sizes ('rare': at most "
            f"{RARE:.0%} of them); shown: {name}",
            holds=decisive,
            run=run_pin,
        )
    last = run_pin.value["rows"][-1]
    table.add(
        "Pinning pays off for large tensors",
        source=f"{TUTORIAL} (advice)",
        measured=f"t(pin_memory().to()) / t(pageable .to()) at the largest size, {timing.format_bytes(sizes[-1])}, "
        "warm cache; pays: below 1",
        holds=claims.compare(
            claims.ratio(last["pin_then_to"], last["pageable_to"]), 1, holds_if="below"
        ),
        run=run_pin,
    )
    largest = run_alloc.value["rows"][-1]
    table.add(
        "Pinned memory is more limited than pageable memory: a limited resource",
        source=f"{TUTORIAL} (background and advice)",
        measured=f"not exhausted on purpose (that would starve the machine); its cost was measured instead: the first "
        f"pinned allocation of {timing.format_bytes(largest['nbytes'])} took "
        f"{largest['first'].median_s / largest['pageable'].median_s:.1f} times as long as a pageable one, "
        f"and the cache kept {_bytes(_stage_bytes(run_alloc)['tensor deleted'][0])} pinned after the tensor "
        "was deleted",
        holds=None,
        run=run_alloc,
    )
    return table


def _bandwidth_claim(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's "much faster than pageable memory": the least pinned / pageable H2D rate
    ratio from 1 MiB up."""
    sizes, rows = run.value["sizes"], run.value["rows"]
    big = [i for i, n in enumerate(sizes) if n >= MiB]
    gains = [
        claims.ratio(
            claims.measured(rows[i]["h2d_pinned"], as_rate=True),
            claims.measured(rows[i]["h2d_pageable"], as_rate=True),
        )
        for i in big
    ]
    least = min(range(len(gains)), key=lambda j: gains[j].value) if big else 0
    table.add(
        "Page-locked memory lets the device read it directly, much faster than pageable memory, "
        "which must first be copied to a page-locked buffer",
        source=f"{TUTORIAL} (background)",
        measured=(
            f"the smallest pinned / pageable H2D bandwidth ratio from 1 MiB up (at "
            f"{timing.format_bytes(sizes[big[least]])}; the largest is "
            f"{max(g.value for g in gains):.2f}x); faster: above 1"
            if big
            else "no size of 1 MiB or more"
        ),
        holds=claims.compare(gains[least], 1, holds_if="above") if big else None,
        run=run,
    )
