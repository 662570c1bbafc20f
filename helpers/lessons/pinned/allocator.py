"""Section 5 of notebook 01: what a first pinned allocation costs against a reuse from PyTorch's
cache and a pageable one, what ``host_memory_stats()`` reports as a tensor is held and freed,
the third exercise, and the tutorial's "a limited resource"."""

from __future__ import annotations

import math
from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, hardware, plotting, tables, timing
from ...records import Run

NOTEBOOK = "01_pinned_memory"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
MiB = 2**20


@dataclass(frozen=True)
class Stage:
    """What ``host_memory_stats()`` said at one stage: bytes the cache holds and bytes in live
    tensors (None where not reported, or where live passed held, which cannot be), and the
    ``cudaHostAlloc`` / ``cudaFreeHost`` call counts."""

    held: int | None
    live: int | None
    allocs: int | None
    frees: int | None
    live_broken: bool


def stages(run: Run) -> dict[str, Stage]:
    found = {}
    for label, stats in run.value["stages"]:
        held, live = hardware.pinned_host_bytes(stats)
        broken = held is not None and live is not None and live > held
        found[label] = Stage(
            held,
            None if broken else live,
            stats.get("num_host_alloc"),
            stats.get("num_host_free"),
            broken,
        )
    return found


def bytes_or_unknown(value: int | None) -> str:
    return "?" if value is None else timing.format_bytes(value)


def show(run: Run) -> None:
    """A table per size (first pinned allocation, reuse, pageable ``torch.zeros`` in ms, their
    ratios, the pinning rate in GB/s), then ``host_memory_stats()`` at each stage."""
    rows = []
    for row in run.value["rows"]:
        first, reuse, plain = row["first"], row["reuse"], row["pageable"]
        rows.append(
            (
                row["nbytes"],
                first.median_ms,
                reuse.median_ms,
                plain.median_ms,
                first.median_s / reuse.median_s,
                first.median_s / plain.median_s,
                first.gbps,
            )
        )
    display(
        tables.Table(
            [
                ("size", "", timing.format_bytes),
                ("first pinned", "ms", ".3f"),
                ("reuse (cache)", "ms", ".4f"),
                ("pageable zeros", "ms", ".3f"),
                ("first / reuse", "x", ".0f"),
                ("first / pageable", "x", ".1f"),
                ("pinning rate", "GB/s", ".2f"),
            ],
            rows,
            title=plotting.machine_title("pinned allocations", run.machine, run.live),
            caption=f"median of {run.params['repeats']} samples per size, synchronised host clock",
        )
    )
    version, found = run.value["torch"], stages(run)
    table = tables.Table(
        [
            "stage",
            "held by the cache",
            "in live tensors",
            "cudaHostAlloc calls",
            "cudaFreeHost calls",
        ],
        [
            (label, bytes_or_unknown(s.held), bytes_or_unknown(s.live), s.allocs, s.frees)
            for label, s in found.items()
        ],
        title=f"host_memory_stats() on torch {version}, requests of "
        f"{timing.format_bytes(run.params['request'])}, then "
        f"{timing.format_bytes(run.params['smaller_request'])}",
    )
    if any(s.live_broken for s in found.values()):
        table.caption = (
            f"?: torch {version} reported more bytes in live tensors than its cache holds, so that "
            "counter is not shown"
        )
    display(table)


def held_mib(run: Run) -> float:
    """MiB the cache held while one tensor of the ``request`` size was alive (NaN where not reported)."""
    held = stages(run)["holding one tensor"].held
    return math.nan if held is None else held / MiB


def see(run: Run) -> claims.WhatWeSee:
    """How many times a reuse's or a pageable allocation's time the first pinned allocation took,
    its time (ms) and pinning rate (GB/s) at the smallest and largest size, and what the cache held
    while a tensor lived, after it was freed and after ``_host_emptyCache()`` (bytes)."""
    rows = run.value["rows"]
    over_reuse = [row["first"].median_s / row["reuse"].median_s for row in rows]
    over_pageable = [row["first"].median_s / row["pageable"].median_s for row in rows]
    samples = min(len(row[k].samples_s) for row in rows for k in ("first", "reuse", "pageable"))
    few = f" (medians of {samples} samples each)" if samples < analysis.FEW_SAMPLES else ""
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The first pinned allocation took {min(over_reuse):.0f} to {max(over_reuse):.0f} times as long as a reuse "
        f"from the cache, and {min(over_pageable):.1f} to {max(over_pageable):.1f} times as long as a pageable "
        f"`torch.zeros` of the same size{few}."
    )
    not_slower = [row for row, r in zip(rows, over_pageable, strict=True) if r <= 1]
    if not_slower:  # the markdown expects "far more than a pageable allocation"
        seen.say(
            "Unlike the expectation above, at "
            + ", ".join(
                f"{timing.format_bytes(row['nbytes'])} the pageable `torch.zeros` took "
                f"{row['pageable'].median_ms:.3g} ms against {row['first'].median_ms:.3g} ms"
                for row in not_slower
            )
            + " for the first pinned allocation, which was not the slower one there; this page does not show why."
        )
    first, last = rows[0], rows[-1]
    seen.say(
        f"It took {first['first'].median_ms:.3g} ms at {timing.format_bytes(first['nbytes'])} and "
        f"{last['first'].median_ms:.4g} ms at {timing.format_bytes(last['nbytes'])}: the OS pinned "
        f"{first['first'].gbps:.2g} GB/s at the smallest size and {last['first'].gbps:.2g} GB/s at the largest."
    )
    at = stages(run)
    holding = at["holding one tensor"].held
    if holding is None:
        seen.say(f"torch {run.value['torch']} does not report the bytes its cache holds.")
        return seen
    request = run.params["request"]
    new_blocks = (at["holding a smaller tensor"].allocs or 0) - (at["tensor deleted"].allocs or 0)
    power_of_two = holding & (holding - 1) == 0 and holding >= request
    seen.say(
        f"Holding one {timing.format_bytes(request)} tensor, the cache held {bytes_or_unknown(holding)}"
        + (" (the request rounded up to a power of two)" if power_of_two else "")
        + f"; after the tensor was deleted it still held {bytes_or_unknown(at['tensor deleted'].held)}; "
        f"the smaller request needed {new_blocks} new `cudaHostAlloc` call(s)"
        + (" (it was served from the held block)" if new_blocks == 0 else "")
        + f"; after `_host_emptyCache()` it held {bytes_or_unknown(at['after _host_emptyCache()'].held)}."
    )
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "Pinned memory is a limited resource": not testable (not exhausted on purpose), so the row
    says what pinning cost instead."""
    largest = run.value["rows"][-1]
    table.add(
        "Pinned memory is more limited than pageable memory: a limited resource",
        source=f"{TUTORIAL} (background and advice)",
        measured=f"not exhausted on purpose (that would starve the machine); its cost was measured instead: the first "
        f"pinned allocation of {timing.format_bytes(largest['nbytes'])} took "
        f"{largest['first'].median_s / largest['pageable'].median_s:.1f} times as long as a pageable one, "
        f"and the cache kept {bytes_or_unknown(stages(run)['tensor deleted'].held)} pinned after the tensor "
        "was deleted",
        holds=None,
        run=run,
    )
