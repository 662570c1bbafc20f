"""What notebook 01 shows of its copies: where the host waits for a pageable and a pinned copy,
the bandwidth of both kinds in both directions, the tutorial's four statements under its Timer,
what pinned allocations cost and what PyTorch's cache keeps; the expected values of two
exercises; and the notebook's claims table.

The sweep of the tutorial's statements across sizes, and the verdicts on its claim "up to twice
as slow" per size range, are in ``pinned_sizes``; the numbers behind the tables and sentences in
``pinned_analysis``; the rows of the claims table in ``pinned_claims``. Every function takes the
notebook's runs (``records.Run``, live or replayed) and measures nothing. Tested on every recorded
machine in tests/test_lesson_01.py.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, plotting, tables, timing
from ..records import Run
from . import pinned_claims
from .pinned_analysis import (
    COPIES,
    FLAT,
    STAGED,
    MiB,
    best_pinned_gbps,
    bytes_or_unknown,
    host_call_share,
    live_counter_broken,
    median_spread,
    new_blocks_for_smaller,
    of_link,
    part_of,
    pcie_link,
    rates_gbps,
    stage_bytes,
    staging_times,
)
from .pinned_sizes import (
    FEW,
    TUT_PAGEABLE,
    TUT_PIN,
    TUT_PIN_TO,
    TUT_PINNED,
    few_note,
    tutorial_ratio,
    us_words,
)

NOTEBOOK = "01_pinned_memory"


# ---------------------------------------------------------------- 1. where the host waits


def show_staging(run: Run) -> tables.Table:
    """The profiled H2D copy from each kind of memory: a table (is_pinned(), the profiler's copy
    names, the GPU's copy time, the host's time inside cudaMemcpyAsync and in the synchronize
    call, all in us) and both timelines. Returns the table.
    """
    staging = staging_times(run)
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
    """
    s = staging_times(run)
    page, pin = s["pageable"], s["pinned"]
    share = host_call_share(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The profiler names the first copy `{page['names']}` and the second `{pin['names']}` "
        "(one profiled copy of each, so every number here is a single sample)."
    )
    gpu_copy, copy_time = "the GPU's copy time", "the copy's time"
    seen.say(
        f"From pageable memory the host sat inside `cudaMemcpyAsync` for {page['memcpy_call_us']:.0f} us, "
        f"{part_of(page['memcpy_call_us'], page['copy_us'], gpu_copy)} ({page['copy_us']:.0f} us), although "
        "we passed `non_blocking=True`: "
        + (
            "the call returned only when (nearly) all the data had been staged."
            if share["pageable"] >= STAGED
            else "the call returned well before the copy ended, so here the driver did not stage (nearly) all of it first."
        )
    )
    seen.say(
        f"From pinned memory `cudaMemcpyAsync` took {pin['memcpy_call_us']:.0f} us, "
        f"{part_of(pin['memcpy_call_us'], pin['copy_us'], copy_time)}, and the host waited "
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


def show_bandwidth(run: Run) -> None:
    """The four copies' bandwidth by size: a table (decimal GB/s, and the pinned over pageable H2D
    ratio), the measured ceiling against the PCIe link's raw rate, each copy's range from 64 MiB
    up, and the curves on log axes.
    """
    sizes, gbps, ceiling = run.value["sizes"], rates_gbps(run), best_pinned_gbps(run)
    gen, width, link = pcie_link(run)
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
                + (of_link(worst, best, link) if link else "")
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


def see_bandwidth(run: Run) -> claims.WhatWeSee:
    """What the curves show: the smallest size's best rate against the ceiling, how each curve ends
    (``claims.describe_curve``), how noisy the two clocks were, and how many times the pageable
    copy's rate the pinned copy reached in each direction (rates in decimal GB/s).
    """
    sizes, gbps, ceiling = run.value["sizes"], rates_gbps(run), best_pinned_gbps(run)
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
    page, pin = median_spread(run, "pageable"), median_spread(run, "pinned")
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
    """
    return nbytes / (rates_gbps(run)["h2d_pinned"][-1] * 1e9) * 1e3


# ---------------------------------------------------------------- 3. the tutorial's statements


def show_tutorial(run: Run) -> tables.Table:
    """The four statements under ``torch.utils.benchmark``: a table (median and spread in us,
    samples, decimal GB/s) and bars of the medians in ms with their ratios. Returns the table.
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
    """
    tut = run.value
    seen = claims.WhatWeSee(NOTEBOOK, run)
    fastest = min(tut, key=lambda text: tut[text].median_s)
    seen.say(f"The fastest of the four is `{fastest}`, at {us_words(tut[fastest])}.")
    pin_alone = claims.compare(claims.ratio(tut[TUT_PIN], tut[TUT_PAGEABLE]), 1, holds_if="above")
    words = analysis.in_words(
        pin_alone,
        "longer than the whole pageable copy",
        "as long as the whole pageable copy, within the noise",
        "less than the whole pageable copy",
    )
    seen.say(
        f"`pin_memory()` alone took {us_words(tut[TUT_PIN])} against {us_words(tut[TUT_PAGEABLE])} for the pageable copy: "
        f"{analysis.times(pin_alone.value)} the pageable copy's time, {words}."
    )
    parts = tut[TUT_PIN].median_s + tut[TUT_PINNED].median_s
    seen.say(
        f"`pin_memory().to('cuda:0')` took {us_words(tut[TUT_PIN_TO])}; `pin_memory()` and the pinned copy timed "
        f"apart add up to {parts * 1e6:.1f} us, and the statement took {tut[TUT_PIN_TO].median_s / parts:.2f} "
        "times that sum."
    )
    twice = tutorial_ratio(run)
    seen.say(
        f"So at the tutorial's size, statements and Timer, pinning first and then copying took "
        f"{analysis.times(twice.value)} the plain pageable copy's time{few_note(twice.value.samples)}: the claim "
        f"'slower, but at most twice as slow' ({twice.in_words()}) **{claims.worded(claims.stated(twice, run), 'holds', 'does not hold here', 'is borderline here')}**."
    )
    return seen


# ---------------------------------------------------------------- 5. pinned allocations and the cache


def show_allocator(run: Run) -> None:
    """Pinned allocations: a table per size (first pinned allocation, reuse from the cache and a
    pageable ``torch.zeros`` in ms, their ratios, the pinning rate in GB/s), then what
    ``host_memory_stats()`` reported at each stage of holding and freeing a tensor.
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
        held, live = stage_bytes(run)[label]
        stages.add(
            label,
            bytes_or_unknown(held),
            bytes_or_unknown(live),
            stats.get("num_host_alloc"),
            stats.get("num_host_free"),
        )
    if live_counter_broken(run):
        stages.caption = (
            f"?: torch {torch_version} reported more bytes in live tensors than its cache holds, so that "
            "counter is not shown"
        )
    display(stages)


def held_mib(run: Run) -> float:
    """MiB the cache held while one tensor of the ``request`` size was alive (NaN where this
    PyTorch's ``host_memory_stats()`` does not report it).
    """
    held = stage_bytes(run)["holding one tensor"][0]
    return math.nan if held is None else held / MiB


def see_allocator(run: Run) -> claims.WhatWeSee:
    """What the allocations show: how many times a reuse's or a pageable allocation's time the
    first pinned allocation took, its time (ms) and pinning rate (GB/s) at the smallest and largest
    size, and what the cache held (bytes) while a tensor lived, after it was freed and after
    ``_host_emptyCache()``.
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
    bytes_at = stage_bytes(run)
    holding = bytes_at["holding one tensor"][0]
    if holding is None:
        seen.say(f"torch {run.value['torch']} does not report the bytes its cache holds.")
        return seen
    request, new_blocks = run.params["request"], new_blocks_for_smaller(run)
    power_of_two = holding & (holding - 1) == 0 and holding >= request
    seen.say(
        f"Holding one {timing.format_bytes(request)} tensor, the cache held {bytes_or_unknown(holding)}"
        + (" (the request rounded up to a power of two)" if power_of_two else "")
        + "; after the tensor was "
        f"deleted it still held {bytes_or_unknown(bytes_at['tensor deleted'][0])}; the smaller request needed "
        f"{new_blocks} new `cudaHostAlloc` call(s)"
        + (" (it was served from the held block)" if new_blocks == 0 else "")
        + f"; after `_host_emptyCache()` it held {bytes_or_unknown(bytes_at['after _host_emptyCache()'][0])}."
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
    """
    table = claims.ClaimsTable(NOTEBOOK)
    pinned_claims.add_staging(table, run_trace)
    pinned_claims.add_bandwidth(table, run_bw)
    pinned_claims.add_twice_as_slow(table, run_tut, run_pin)
    pinned_claims.add_rare_and_large(table, run_pin)
    pinned_claims.add_limited(table, run_alloc)
    return table
