"""Section 5 of notebook 01: pinned allocations (ms, GB/s) and what PyTorch's cache holds (bytes)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from IPython.display import display

from ... import analysis, claims, hardware, plotting, tables, timing
from ...records import Run
from .common import TUTORIAL, MiB, seen

COSTS = [("size", "", timing.format_bytes), ("first pinned", "ms", ".3f")]
COSTS += [("reuse (cache)", "ms", ".4f"), ("pageable zeros", "ms", ".3f")]
COSTS += [("first / reuse", "x", ".0f"), ("first / pageable", "x", ".1f")]
COSTS += [("pinning rate", "GB/s", ".2f")]
STATS = ["stage", "held by the cache", "in live tensors", "cudaHostAlloc calls"]
STATS += ["cudaFreeHost calls"]
KEPT = ("tensor deleted", "after _host_emptyCache()")
LIMITED = "Pinned memory is more limited than pageable memory: a limited resource"
EXPECTED = "the first pinned allocation costs more than a reuse, and at the largest size more than a pageable one"  # "what we expect", checked in see()


@dataclass(frozen=True)
class Stage:
    """``host_memory_stats()`` at one stage (bytes; None: not reported, or live passed held)."""

    held: int | None  # by the cache
    live: int | None  # in live tensors
    allocs: int | None  # cudaHostAlloc calls
    frees: int | None  # cudaFreeHost calls
    live_broken: bool  # live passed held, which cannot be


def stages(run: Run) -> dict[str, Stage]:
    found = {}
    for label, stats in run.value["stages"]:
        held, live = hardware.pinned_host_bytes(stats)
        broken = held is not None and live is not None and live > held
        counts = stats.get("num_host_alloc"), stats.get("num_host_free")
        found[label] = Stage(held, None if broken else live, *counts, broken)
    return found


def bytes_or_unknown(value: int | None) -> str:
    return "?" if value is None else timing.format_bytes(value)


def show(run: Run) -> None:
    """Per size the first, reused and pageable allocations (ms, ratios, GB/s); then the stats."""
    rows = []
    for row in run.value["rows"]:
        first, reuse, plain = row["first"], row["reuse"], row["pageable"]
        times = first.median_ms, reuse.median_ms, plain.median_ms
        ratios = first.median_s / reuse.median_s, first.median_s / plain.median_s
        rows.append((row["nbytes"], *times, *ratios, first.gbps))
    caption = f"median of {run.params['repeats']} samples per size, synchronised host clock"
    display(
        tables.Table(COSTS, rows, title=plotting.titled("pinned allocations", run), caption=caption)
    )
    version, found, size = run.value["torch"], stages(run), timing.format_bytes
    title = f"host_memory_stats() on torch {version}, requests of {size(run.params['request'])}, then {size(run.params['smaller_request'])}"
    known = any(s.live is not None for s in found.values())  # else that column is left out
    live = [[bytes_or_unknown(s.live)] if known else [] for s in found.values()]
    stats = [
        (k, bytes_or_unknown(s.held), *v, s.allocs, s.frees)
        for (k, s), v in zip(found.items(), live, strict=True)
    ]
    columns = STATS if known else [c for c in STATS if c != "in live tensors"]
    caption = f"{'?: ' if known else ''}torch {version} reported more bytes in live tensors than its cache holds, so that counter is not shown"
    broken = any(s.live_broken for s in found.values())
    display(tables.Table(columns, stats, title=title, caption=caption if broken else ""))


def held_mib(run: Run) -> float:
    """MiB the cache held while one ``request``-sized tensor lived (NaN where not reported)."""
    held = stages(run)["holding one tensor"].held
    return math.nan if held is None else held / MiB


def see(run: Run) -> claims.WhatWeSee:
    """The first allocation against a reuse and a pageable one, its rate, the cache's bytes."""
    rows, at, size = run.value["rows"], stages(run), timing.format_bytes
    over_reuse = [row["first"].median_s / row["reuse"].median_s for row in rows]
    over_pageable = [row["first"].median_s / row["pageable"].median_s for row in rows]
    samples = min(len(row[k].samples_s) for row in rows for k in ("first", "reuse", "pageable"))
    few = f" (medians of {samples} samples each)" if samples < analysis.FEW_SAMPLES else ""
    slower = [r for r, o in zip(rows, over_pageable, strict=True) if o <= 1]  # expected: none
    where = ", ".join(
        f"{size(r['nbytes'])} the pageable `torch.zeros` took {r['pageable'].median_ms:.3g} ms against {r['first'].median_ms:.3g} ms"
        for r in slower
    )
    unlike = f"At {where} for the first pinned allocation, which was not the slower one there; this page does not show why."
    (a, b), (n, m) = (rows[0]["first"], rows[-1]["first"]), (rows[0]["nbytes"], rows[-1]["nbytes"])
    held, (deleted, emptied) = at["holding one tensor"].held, (at[k].held for k in KEPT)
    new_blocks = (at["holding a smaller tensor"].allocs or 0) - (at["tensor deleted"].allocs or 0)
    request = run.params["request"]
    pow2 = held is not None and held & (held - 1) == 0 and held >= request
    rounded = " (the request rounded up to a power of two)" if pow2 else ""
    served = " (it was served from the held block)" if new_blocks == 0 else ""
    cache = f"torch {run.value['torch']} does not report the bytes its cache holds."
    if held is not None:
        cache = f"Holding one {size(request)} tensor, the cache held {bytes_or_unknown(held)}{rounded}; after the tensor was deleted it still held {bytes_or_unknown(deleted)}; the smaller request needed {analysis.plural(new_blocks, 'new `cudaHostAlloc` call')}{served}; after `_host_emptyCache()` it held {bytes_or_unknown(emptied)}."
    measured = f"{min(over_reuse):.0f} times a reuse or more; {size(rows[-1]['nbytes'])}: {over_pageable[-1]:.1f} times a pageable one"
    return seen(
        run,
        f"The first pinned allocation took {min(over_reuse):.0f} to {max(over_reuse):.0f} times as long as a reuse from the cache, and {min(over_pageable):.1f} to {max(over_pageable):.1f} times as long as a pageable `torch.zeros` of the same size{few}.",
        unlike if slower else "",
        f"It took {a.median_ms:.3g} ms at {size(n)} and {b.median_ms:.4g} ms at {size(m)}: the OS pinned {a.gbps:.2g} GB/s at the smallest size and {b.gbps:.2g} GB/s at the largest.",
        cache,
        check=(EXPECTED, min(over_reuse) > 1 and over_pageable[-1] > 1, measured),
    )


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "A limited resource": not exhausted on purpose, so the row says what pinning cost."""
    last, kept = run.value["rows"][-1], bytes_or_unknown(stages(run)["tensor deleted"].held)
    times = last["first"].median_s / last["pageable"].median_s
    few = analysis.few(min(len(last[k].samples_s) for k in ("first", "pageable")))
    measured = f"not exhausted on purpose (that would starve the machine); its cost was measured instead: the first pinned allocation of {timing.format_bytes(last['nbytes'])} took {times:.1f} times as long as a pageable one{f' (medians of {few} each)' if few else ''}, and the cache kept {kept} pinned after the tensor was deleted"
    source = f"{TUTORIAL} (background and advice)"
    table.add(LIMITED, source=source, measured=measured, holds=None, run=run)
