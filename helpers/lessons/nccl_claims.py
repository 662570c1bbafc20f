"""Notebook 06's claims table: the article's claims on what ``recv``, ``irecv``, ``wait()``,
``wait(timeout)``, ``is_completed()``, collectives and ``torch.cuda.synchronize()`` give back to
the host, on the missing ``send``, on the seven collectives, on overlap and on NCCL's speed, each
decided from the runs that ``nccl`` and ``nccl_speed`` show.

Measures nothing. Tested on every recorded machine in tests/test_lesson_06.py.
"""

from __future__ import annotations

from .. import analysis, claims, timing
from ..records import Run
from . import nccl, nccl_speed

NOTEBOOK = "06_nccl_point_to_point_and_collectives"
ARTICLE = 'article "AI on Multiple GPUs", part 2 (point-to-point and collective operations)'
WARM_UP_TIMES = 10  # "much longer": the first recv takes at least this many times a later one
NO_OVERLAP, OVERLAP = (
    0.1,
    0.5,
)  # overlap ratios: below the first is none, above the second is overlap
NEAR_CEILING = 0.7  # "close to the link's ceiling": busbw above this share of the peer copy's rate


def host_value(run: Run, call: str, key: str) -> claims.Value:
    """One column of the host-timing rows of ``call`` in a ``host_timing`` run (``key``:
    'returned_s', 'waited_s' or 'done_s') as a Value in ms: the median over the repeats and half
    their interquartile range.
    """
    seconds = claims.measured(
        timing.Timing([r[key] for r in run.value if r["call"] == call], method="host clock")
    )
    return claims.Value(seconds.value * 1e3, seconds.spread * 1e3, "ms", seconds.samples)


def when_data_absent(
    arrived: list[float], comparison: claims.Comparison
) -> claims.Comparison | bool:
    """A claim "returns before the data has arrived": the time's comparison if the data was absent
    at every return (every share 0), else a plain does-not-hold (False: the data was there, no
    threshold can save it).
    """
    return comparison if all(share == 0 for share in arrived) else False


def _host_claims(table: claims.ClaimsTable, host: Run) -> None:
    """The article's claims on what each call gives back to the host, from the NCCL host timings."""
    p2p, coll = nccl.summary(host, nccl.P2P_CALLS), nccl.summary(host, nccl.COLL_CALLS)
    later, first = p2p["recv"], p2p["first recv"]
    late_ms = later["late_ms"]
    quick_ms, held_ms = (
        nccl.QUICK_BACK * late_ms,
        nccl.HELD * late_ms,
    )  # back within a fifth; held for most of it
    irecv_wait, irecv_timeout, irecv_poll = (p2p[c] for c in nccl.P2P_CALLS[2:])
    async_ar, blocking_ar = coll["all_reduce(async_op=True) + wait()"], coll["all_reduce"]
    completed_flags = [flag for c in nccl.P2P_CALLS[2:] for flag in p2p[c]["completed_at_return"]]
    table.add(
        "A blocking recv of a CUDA tensor (NCCL, after the first) returns once the receive is "
        "enqueued, before the data has arrived",
        source=ARTICLE,
        measured=(
            f"recv's return (ms; threshold: a fifth of the sender's {late_ms:.0f} ms delay); the data came "
            f"{later['done_ms']:.1f} ms after the call, there at return in {later['arrived']:.0%} of {later['n']}"
        ),
        holds=when_data_absent(
            [later["arrived"]],
            claims.compare(host_value(host, "recv", "returned_s"), quick_ms, holds_if="below"),
        ),
        run=host,
    )
    table.add(
        "The very first recv blocks much longer than later ones (NCCL warm-up)",
        source=ARTICLE,
        measured=(
            f"first recv's return (one call) over a later one's (median of {later['n']}; threshold: "
            f"{WARM_UP_TIMES} times): {first['returned_ms']:.1f} against {later['returned_ms']:.3f} ms; the ± is "
            "the later ones' spread alone (one first call has none)"
        ),
        holds=claims.compare(
            claims.ratio(
                host_value(host, "first recv", "returned_s"), host_value(host, "recv", "returned_s")
            ),
            WARM_UP_TIMES,
            holds_if="above",
        ),
        run=host,
    )
    table.add(
        "The very first recv waits for the transfer to complete",
        source=ARTICLE,
        measured=(
            f"first recv's return (ms, one call, no spread; threshold: the sender's delay); the data was "
            f"{'already there' if first['arrived'] else 'not there yet'} when it returned"
        ),
        holds=claims.compare(
            host_value(host, "first recv", "returned_s"), first["late_ms"], holds_if="above"
        ),
        run=host,
    )
    slowest_irecv = max(
        (host_value(host, c, "returned_s") for c in nccl.P2P_CALLS[2:]), key=lambda v: v.value
    )
    table.add(
        "isend/irecv return immediately; the transfer goes on in the background",
        source=ARTICLE,
        measured=f"the slowest irecv kind's return (ms; threshold: a fifth of the sender's {late_ms:.0f} ms delay)",
        holds=claims.compare(slowest_irecv, quick_ms, holds_if="below"),
        run=host,
    )
    table.add(
        "A blocking collective (async_op=False) returns once it is enqueued; the host does not wait "
        "for the transfer",
        source=ARTICLE,
        measured=(
            f"all_reduce's return (ms; threshold: a fifth of the other rank's {late_ms:.0f} ms delay); data there "
            f"in {blocking_ar['arrived']:.0%} of repeats"
        ),
        holds=when_data_absent(
            [blocking_ar["arrived"]],
            claims.compare(
                host_value(host, "all_reduce", "returned_s"), quick_ms, holds_if="below"
            ),
        ),
        run=host,
    )
    slowest_wait = max(
        (host_value(host, c, "waited_s") for c in ("irecv + wait()", nccl.COLL_CALLS[1])),
        key=lambda v: v.value,
    )
    table.add(
        "work.wait() blocks the host only until the operation is enqueued, not until the data has arrived",
        source=ARTICLE,
        measured=(
            f"host back after wait(), the slower of irecv and all_reduce(async_op=True) (ms; threshold: a fifth of "
            f"the delay); data there in {irecv_wait['arrived']:.0%} and {async_ar['arrived']:.0%} of repeats"
        ),
        holds=when_data_absent(
            [irecv_wait["arrived"], async_ar["arrived"]],
            claims.compare(slowest_wait, quick_ms, holds_if="below"),
        ),
        run=host,
    )
    table.add(
        "work.wait(timeout) blocks the host until the operation ends (or the timeout passes)",
        source=ARTICLE,
        measured=(
            f"host back after irecv + wait(timeout) (ms; threshold: 80% of the sender's {late_ms:.0f} ms delay); "
            f"data there in {irecv_timeout['arrived']:.0%} of repeats"
        ),
        holds=(
            claims.compare(
                host_value(host, "irecv + wait(timeout)", "waited_s"), held_ms, holds_if="above"
            )
            if irecv_timeout["arrived"] == 1
            else False
        ),
        run=host,
    )
    poll_ok = all(irecv_poll["completed_by_poll"])
    table.add(
        "work.is_completed() is True once the operation is enqueued; it does not mean the data has arrived",
        source=ARTICLE,
        measured=(
            f"is_completed() right after irecv returned: True in {sum(completed_flags)} of {len(completed_flags)} "
            f"calls; polled, the time until it turned True (ms; threshold: a fifth of the {late_ms:.0f} ms delay), "
            f"True in the end in {sum(irecv_poll['completed_by_poll'])} of {irecv_poll['n']} repeats"
        ),
        holds=(
            True
            if any(completed_flags)
            else claims.compare(
                host_value(host, "irecv + poll is_completed()", "waited_s"),
                quick_ms,
                holds_if="below",
            )
            if poll_ok
            else False
        ),
        run=host,
    )
    quickest_done = min(
        (host_value(host, c, "done_s") for c in nccl.COLL_CALLS), key=lambda v: v.value
    )
    table.add(
        "An NCCL operation waits for the work queued before it on the current stream",
        source=ARTICLE,
        measured=(
            f"synchronize() on the punctual rank, the earlier of blocking and async all_reduce (ms; threshold: 80% "
            f"of the late rank's {late_ms:.0f} ms spin kernel)"
        ),
        holds=claims.compare(quickest_done, held_ms, holds_if="above"),
        run=host,
    )
    table.add(
        "torch.cuda.synchronize() blocks the host until all queued GPU work has finished",
        source=ARTICLE,
        measured=f"after recv, when synchronize() returned (ms; threshold: 80% of the data's {late_ms:.0f} ms delay)",
        holds=claims.compare(host_value(host, "recv", "done_s"), held_ms, holds_if="above"),
        run=host,
    )


def claims_table(
    host: Run,
    wait_nccl: Run,
    wait_gloo: Run,
    miss_nccl: Run,
    coll_nccl: Run,
    coll_gloo: Run,
    overlap: Run,
    bandwidth: Run,
) -> claims.ClaimsTable:
    """The article's claims tested: what each call gives back to the host (times in ms against the
    sender's delay, from the NCCL host timings), ``wait(timeout)`` raising (a bool per backend),
    where the missing ``send`` stops the host (a bool per warm-up), the seven collectives' data (a
    bool per backend), overlap (ratios 0 to 1 from rank 0's profiles) and the largest
    ``all_reduce``'s busbw as a share of the peer copy's rate.
    """
    table = claims.ClaimsTable(NOTEBOOK)
    _host_claims(table, host)
    for backend, run in (("nccl", wait_nccl), ("gloo", wait_gloo)):
        raised, sentence, _ = nccl.wait_timeout_outcome(run)
        table.add(
            f"work.wait(timeout) raises an exception once the timeout passes, if the operation has not ended ({backend})",
            source=ARTICLE,
            measured=sentence + " (one run)",
            holds=raised if nccl.reached_wait(run) else None,
            run=run,
        )

    stops = nccl.stops(miss_nccl)
    warm = next(c for c in miss_nccl.value if c["warm_up"])
    table.add(
        "A recv without a send hangs the receiver; after warm-up recv returns and the host stops at print(t)",
        source=ARTICLE,
        measured=(
            f"rank 1 reached {[label for _, label in warm['marks'][1]]}, status {warm['status'][1]}; "
            f"stopped at {stops[('nccl', True)]} (one run)"
        ),
        holds=stops[("nccl", True)] == "print(t)",
        run=miss_nccl,
    )
    if ("nccl", False) in stops:
        table.add(
            "Without warm-up, the first recv itself blocks (the warm-up line is not printed)",
            source=ARTICLE,
            measured=f"rank 1 stopped at {stops[('nccl', False)]} (one run)",
            holds=stops[("nccl", False)] == "torch.distributed.recv(t, src=0)",
            run=miss_nccl,
        )
    for run in (coll_nccl, coll_gloo):
        wrong = nccl.mismatches(run)
        table.add(
            f"The seven collectives leave each rank the data the source shows ({run.params['backend']})",
            source=ARTICLE,
            measured=(
                f"{len(wrong)} mismatches over 7 collectives x {len(run.value['who'])} ranks x "
                "(blocking, async_op=True)"
            ),
            holds=not wrong,
            run=run,
        )

    overlaps = {mode: f["ratio"] for mode, f in nccl_speed.overlap_of(overlap).items()}
    table.add(
        "A blocking collective holds back the work queued after it on the current stream (no overlap)",
        source=ARTICLE,
        measured=(
            f"overlap ratio of all_reduce and matmul kernels, blocking, over "
            f"{analysis.plural(overlaps['blocking'].samples or 1, 'profiled step')} (threshold: {NO_OVERLAP})"
        ),
        holds=claims.compare(overlaps["blocking"], NO_OVERLAP, holds_if="below"),
        run=overlap,
    )
    table.add(
        "Asynchronous operations let communication overlap computation",
        source=ARTICLE,
        measured=(
            f"overlap ratio with async_op=True, over "
            f"{analysis.plural(overlaps['async_op=True'].samples or 1, 'profiled step')} "
            f"(threshold: {OVERLAP}, half the shorter hidden)"
        ),
        holds=claims.compare(overlaps["async_op=True"], OVERLAP, holds_if="above"),
        run=overlap,
    )

    full_n = nccl_speed.sweep_of(bandwidth)[-1]
    largest = nccl_speed.largest_all_reduce_busbw(bandwidth)
    ceiling = claims.measured(bandwidth.value["ceiling"], as_rate=True)
    size = timing.format_bytes(bandwidth.params["sizes"][-1])
    table.add(
        "NCCL finds the fastest path between the GPUs (here NVLink): busbw close to the link's ceiling",
        source=ARTICLE,
        measured=(
            f"all_reduce of {size} on {full_n['world_size']} ranks: busbw {largest.value:.0f} GB/s over a GPU0 -> "
            f"GPU1 copy's {ceiling.value:.0f} GB/s (threshold: {NEAR_CEILING} of it)"
        ),
        holds=claims.compare(claims.ratio(largest, ceiling), NEAR_CEILING, holds_if="above"),
        run=bandwidth,
    )
    return table
