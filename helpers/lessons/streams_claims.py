"""Notebook 03's verdicts: the tutorial's requirements tested one at a time, and the claims
table of the whole notebook.

The numbers come from ``streams`` (the per-step statistics of each run); every function takes the
notebook's runs (``records.Run``, live or replayed) and measures nothing. Tested on every
recorded machine in tests/test_lesson_03.py.
"""

from __future__ import annotations

from typing import Any

from .. import analysis, claims, tables
from ..records import Run
from .streams import ENGINES_CLAIM, TWO_ENGINES, engine_facts, gains, order_facts, parallel_facts
from .streams_copies import (
    DOES_NOT,
    NOTEBOOK,
    OVERLAPS,
    PINNED_RELIABLE,
    pinned_in_both_orders,
    prefetch,
    profile_stats,
)

ARTICLE = 'article "PyTorch CUDA Streams Introduction"'
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
FORUM = "NVIDIA forum thread on pageable copies"


def _over(value: claims.Value) -> str:
    """``' over 2 profiled steps'`` for a value read from a trace's steps."""
    return f" over {analysis.plural(value.samples, 'profiled step')}" if value.samples else ""


OVERLAP_CLAIM = "An asynchronous copy on one stream and compute on another overlap"
ONLY_CLAIM = (
    "Only a pinned source copied on a side stream overlaps with the kernel on the main stream"
)
HELD = 0.8  # host time in cudaMemcpyAsync over the GPU's copy time: the copy held the host
SIDE_STREAM_CLAIM = "Requirement (1): the copy must be on a separate, non-default stream"


def _requirements(run: Run) -> dict[str, Any]:
    """The tutorial's verdicts: the working case overlaps (``works``); each other case does not
    (``apart``); and, each with the name of the comparison that decides it, requirement (1),
    requirement (2) with the copy launched first, and "only pinned + side stream overlaps". Those
    that are claims of the table are ``claims.judged`` as such, so its rows and
    ``show_requirements`` read one verdict."""
    ov = {label: s["overlap"] for label, s in profile_stats(run).items()}
    works = claims.compare(ov["pinned, side stream"], OVERLAPS, holds_if="above")
    apart = {
        label: claims.compare(v, DOES_NOT, holds_if="below")
        for label, v in ov.items()
        if label != "pinned, side stream"
    }
    side = analysis.weakest(
        {"pinned, side stream": works, "pinned, current stream": apart["pinned, current stream"]}
    )
    only = analysis.weakest({"pinned, side stream": works, **apart})
    return {
        "overlap": ov,
        "works": claims.judged(works, run, NOTEBOOK, OVERLAP_CLAIM),
        "apart": apart,
        "needs_side_stream": (side[0], claims.judged(side[1], run, NOTEBOOK, SIDE_STREAM_CLAIM)),
        "pageable_blocks": analysis.weakest(
            {"pinned, side stream": works, "pageable, side stream": apart["pageable, side stream"]}
        ),
        "only_pinned_side": (only[0], claims.judged(only[1], run, NOTEBOOK, ONLY_CLAIM)),
    }


def show_requirements(run: Run) -> tables.Table:
    """The first two requirements tested on section 2's runs: a table of each statement, the
    overlap ratio it rests on, its threshold and its verdict. Returns the table.
    """
    req = _requirements(run)
    works, apart = req["works"], req["apart"]
    steps = works.value.samples
    table = tables.Table(
        ["statement", "run", f"overlap ratio ({steps} profiled steps)", "holds if", "verdict"],
        bold=["verdict"],
        caption="a requirement holds when the working case (pinned, side stream) overlaps and the "
        "case without the requirement does not",
    )
    table.add(
        "pinned + side stream overlaps",
        "pinned, side stream",
        str(works.value),
        f"> {OVERLAPS}",
        claims.stated(works, run),
    )
    table.add(
        "(1) without the side stream it does not",
        "pinned, current stream",
        str(apart["pinned, current stream"].value),
        f"< {DOES_NOT}",
        claims.stated(req["needs_side_stream"][1], run),
    )
    table.add(
        "(2) without pinned memory, copy launched first, it does not",
        "pageable, side stream",
        str(apart["pageable, side stream"].value),
        f"< {DOES_NOT}",
        req["pageable_blocks"][1].verdict,
    )
    only = req["only_pinned_side"]
    table.add(
        "only pinned + side stream overlaps",
        f"all four (decided by {only[0]})",
        str(only[1].value),
        "",
        claims.stated(only[1], run),
    )
    return table


def _stream_rows(table: claims.ClaimsTable, run: Run) -> None:
    """The streams article's claims on section 1's run: default stream, order, parallelism, resources."""
    facts, spin_us = run.value["facts"], run.params["spin_us"]
    _, in_order, never_overlap = order_facts(run)
    parallel = parallel_facts(run)
    spin_gain, mm_gain = gains(parallel)
    spins_two = parallel["spins, two streams"]["overlap"]
    gap = parallel["spins, two streams"]["start_gap_us"]
    together = claims.compare(spins_two, 0.5, holds_if="above")
    table.add(
        "PyTorch's CUDA operations run on the device's default stream unless another is chosen",
        source=ARTICLE,
        run=run,
        measured=f"current stream is the default: {facts['current_is_default']}",
        holds=bool(facts["current_is_default"]),
    )
    table.add(
        "Tasks on one stream execute strictly in the order they were submitted",
        source=ARTICLE,
        run=run,
        measured=f"spin kernels of {', '.join(f'{us:.0f}' for us in spin_us)} us: in order "
        f"{in_order}, never overlapping {never_overlap}",
        holds=in_order and never_overlap,
    )
    table.add(
        "Tasks on different streams can run in parallel",
        source=ARTICLE,
        run=run,
        measured=f"two spin kernels on two side streams: overlap ratio{_over(spins_two)} (parallel: together "
        f"for more than half a kernel, {together.in_words()}; the second started {gap.value:.0f} us after "
        "the first)",
        holds=together,
    )
    gain_holds = {
        "spin kernels": claims.compare(spin_gain, 0.6, holds_if="below"),
        "matmuls": claims.compare(mm_gain, 0.85, holds_if="above"),
    }
    resources = analysis.weakest(gain_holds)
    table.add(
        "The actual degree of parallelism depends on the GPU's resources",
        source=ARTICLE,
        run=run,
        measured=f"GPU busy time on two streams over that on one: spin kernels {spin_gain.value:.2f} (should be "
        f"{gain_holds['spin kernels'].in_words()}), SM-filling matmuls {mm_gain.value:.2f} (should be "
        f"{gain_holds['matmuls'].in_words()}); shown: {resources[0]}",
        holds=resources[1],
    )


def _tutorial_rows(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's claims on section 2's run: overlap, only pinned + side stream, requirement (1)."""
    req = _requirements(run)
    r = {label: v.value for label, v in req["overlap"].items()}
    only, needs_side_stream = req["only_pinned_side"], req["needs_side_stream"]
    table.add(
        OVERLAP_CLAIM,
        source=ARTICLE,
        run=run,
        measured=f"pinned H2D on a side stream beside matmuls: overlap ratio{_over(req['works'].value)} "
        f"(overlaps above {OVERLAPS})",
        holds=req["works"],
    )
    table.add(
        ONLY_CLAIM,
        source=TUTORIAL,
        run=run,
        measured=f"overlap ratios{_over(req['works'].value)}: "
        + "; ".join(f"{k} {v:.2f}" for k, v in r.items())
        + f" (pinned on a side stream above {OVERLAPS}, the others below {DOES_NOT}); shown: {only[0]}",
        holds=only[1],
    )
    table.add(
        SIDE_STREAM_CLAIM,
        source=f"{TUTORIAL}; {FORUM}",
        run=run,
        measured=f"pinned, overlap ratios{_over(req['works'].value)}: side stream {r['pinned, side stream']:.2f} (above {OVERLAPS}), current stream "
        f"{r['pinned, current stream']:.2f} (below {DOES_NOT}); shown: {needs_side_stream[0]}",
        holds=needs_side_stream[1],
    )


def _gpu_row(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (2) on the GPU, on section 4's run: a pageable copy launched after the kernel."""
    pageable_kf = profile_stats(run)["pageable, kernel first"]
    table.add(
        "Requirement (2), the source must be pinned, on the GPU: a pageable copy cannot overlap a kernel, "
        "even one launched before it",
        source=f"{TUTORIAL}; {FORUM}",
        run=run,
        measured=f"pageable copy on a side stream, launched after the kernel: overlap ratio"
        f"{_over(pageable_kf['overlap'])} (the requirement holds below {DOES_NOT})",
        holds=claims.compare(pageable_kf["overlap"], DOES_NOT, holds_if="below"),
    )


def _host_row(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (2) on the host, on section 2's run: the pageable copy on a side stream holds the host."""
    pageable_side = profile_stats(run)["pageable, side stream"]
    held = claims.compare(pageable_side["held"], HELD, holds_if="above")
    table.add(
        "Requirement (2), the source must be pinned, on the host: a pageable copy holds the host thread "
        "for the copy's duration, so work launched after it starts late",
        source=f"{TUTORIAL}; {FORUM}",
        run=run,
        measured=f"pageable, side stream, copy launched first: host in cudaMemcpyAsync "
        f"{pageable_side['host_in_memcpy_us'] / 1e3:.1f} ms per copy, GPU copy "
        f"{pageable_side['copy_us'] / 1e3:.1f} ms; host time over copy time (held {held.in_words()})",
        holds=held,
    )


def _engine_row(table: claims.ClaimsTable, run: Run) -> None:
    """Requirement (3) on the copy engines' run."""
    e = engine_facts(run)
    count = e["count"]
    table.add(
        ENGINES_CLAIM,
        source=TUTORIAL,
        run=run,
        measured=f"{count} copy engines; H2D + D2H on two streams: overlap ratio{_over(e['overlap']['H2D + D2H'])} "
        f"(agrees with {'two or more engines above' if (count or 0) >= 2 else 'one engine below'} {TWO_ENGINES:g}); "
        f"together they took {e['both_ways'].value:.2f} times as long as the two one after the other",
        holds=e["agree"],
    )


def _order_rows(table: claims.ClaimsTable, run: Run) -> None:
    """The forum thread's claims on section 4's run: the host held, launch order, pinned memory."""
    stats = profile_stats(run)
    pageable_kf, pageable_cf = stats["pageable, kernel first"], stats["pageable, copy first"]
    pinned_kf, pinned_cf = stats["pinned, kernel first"], stats["pinned, copy first"]
    held = analysis.weakest(
        {
            order: claims.compare(s["held"], HELD, holds_if="above")
            for order, s in (("kernel first", pageable_kf), ("copy first", pageable_cf))
        }
    )
    table.add(
        "A pageable H2D cudaMemcpyAsync holds the host thread until the copy is (nearly) done",
        source=FORUM,
        run=run,
        measured=f"host time in cudaMemcpyAsync over GPU copy time (held above {HELD:g}): pageable "
        f"{pageable_kf['held'].value:.2f} (kernel first) and {pageable_cf['held'].value:.2f} "
        f"(copy first), pinned at most {max(pinned_kf['held'].value, pinned_cf['held'].value):.3f}; "
        f"shown: pageable, {held[0]}",
        holds=held[1],
    )
    order_holds = {
        "kernel first": claims.compare(pageable_kf["overlap"], 0.5, holds_if="above"),
        "copy first": claims.compare(pageable_cf["overlap"], DOES_NOT, holds_if="below"),
    }
    order = analysis.weakest(order_holds)
    table.add(
        "With a pageable copy, overlap only happens when the kernel was launched before the copy",
        source=FORUM,
        run=run,
        measured=f"pageable, overlap ratios{_over(pageable_kf['overlap'])}: kernel first {pageable_kf['overlap'].value:.2f} "
        f"({order_holds['kernel first'].in_words()}), copy first {pageable_cf['overlap'].value:.2f} "
        f"({order_holds['copy first'].in_words()}); shown: {order[0]}",
        holds=order[1],
    )
    pinned_both = pinned_in_both_orders(stats, run)
    table.add(
        PINNED_RELIABLE,
        source=FORUM,
        run=run,
        measured=f"pinned, overlap ratios{_over(pinned_kf['overlap'])}: kernel first {pinned_kf['overlap'].value:.2f}, copy first "
        f"{pinned_cf['overlap'].value:.2f} (both above {OVERLAPS}); shown: {pinned_both[0]}",
        holds=pinned_both[1],
    )


def _half_the_gain(run: Run) -> float:
    """The speed-up (serial loop time over prefetching loop time, x) that obtains half the gain
    the copy and compute measured apart allow for the run's N batches: ``1 + (best - 1) / 2``."""
    return 1 + (prefetch(run)["ideal_n"].value - 1) / 2


def _prefetch_row(table: claims.ClaimsTable, run: Run) -> None:
    """The streams article's prefetching claim on section 5's run."""
    p, same = prefetch(run), run.value["same_results"]
    table.add(
        "Copying the next batch on a second stream while computing this one improves efficiency",
        source=ARTICLE,
        run=run,
        measured=f"speed-up (serial loop time over prefetching loop time) against half the gain the copy and "
        f"compute measured apart allow for {p['n']} batches, 1 + ({p['ideal_n'].value:.2f} - 1) / 2; "
        f"same results {same}",
        holds=claims.compare(p["speedup"], _half_the_gain(run), holds_if="above")
        if same
        else False,
    )


def claims_table(
    run_streams: Run, run_tutorial: Run, run_engines: Run, run_order: Run, run_db: Run
) -> claims.ClaimsTable:
    """The notebook's claims, each with its verdict: the streams article's (default stream, order,
    parallelism, resources, overlap, prefetching), the tutorial's (only pinned + side stream
    overlaps, its three requirements) and the forum thread's (a pageable copy holds the host,
    launch order, pinned memory). Returns the ``claims.ClaimsTable``.
    """
    table = claims.ClaimsTable(NOTEBOOK)
    _stream_rows(table, run_streams)
    _tutorial_rows(table, run_tutorial)
    _gpu_row(table, run_order)
    _host_row(table, run_tutorial)
    _engine_row(table, run_engines)
    _order_rows(table, run_order)
    _prefetch_row(table, run_db)
    return table
