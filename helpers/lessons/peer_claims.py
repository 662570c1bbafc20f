"""Notebook 05's claims table: the blog post's claims on overlapping a copy between GPUs with a
kernel, and the streams article's on peer copies, events across GPUs, NVLink and ``set_device``,
each decided from the runs that ``peer`` and ``peer_streams`` show.

Measures nothing. Tested on every recorded machine in tests/test_lesson_05.py.
"""

from __future__ import annotations

from .. import claims
from ..records import Run
from . import peer, peer_combinations, peer_links, peer_streams

NOTEBOOK = "05_device_to_device"
BLOG_POST = 'blog post "Transferring data between GPUs in fully parallel fashion in PyTorch"'
STREAMS_ARTICLE = 'article "PyTorch CUDA Streams Introduction"'
NEAR_LINK = (
    0.75  # packet headers and flow control take a share of the rated speed: "close" is above this
)


def claims_table(
    seed: Run, one_way: Run, events: Run, links: Run, current: Run, same: Run
) -> claims.ClaimsTable:
    """The sources' claims tested: the blog post's three on overlap (ratios 0 to 1 from the 8
    traces), and the streams article's on direct peer copies (the best one-way rate in GB/s
    against the PCIe bound), events across GPUs (us), NVLink's speed (the best copy as a share of
    the rated speed) and ``set_device`` (a bool from the states).
    """
    overlap = peer_combinations.overlap_summary(seed)
    high, low = peer_combinations.HIGH, peer_combinations.LOW
    table = claims.ClaimsTable(NOTEBOOK)
    table.add(
        "A GPU-to-GPU copy overlaps a kernel on the receiving GPU when it is issued under side streams on both GPUs",
        source=BLOG_POST,
        measured=(
            f"the lower overlap ratio of the two runs with s0 and s1 current ({overlap.both_side_text}, each over "
            f"{overlap.steps} profiled steps), from the traces; {high} and up counts as overlap"
        ),
        holds=claims.compare(min(overlap.both_side), high, holds_if="above"),
        run=seed,
    )
    table.add(
        "... and only then: under any other choice of streams it does not overlap",
        source=BLOG_POST,
        measured=f"the highest overlap ratio of the other {len(overlap.others)} runs, from the traces; {low} and below "
        "counts as none",
        holds=claims.compare(max(overlap.others), low, holds_if="below"),
        run=seed,
    )
    table.add(
        "non_blocking makes no difference to that overlap",
        source=BLOG_POST,
        measured=(
            f"the largest change of the overlap ratio when only non_blocking changes (a change below {low} "
            f"counts as none); {overlap.host_syncs} cudaStreamSynchronize calls in the {overlap.runs} traces"
        ),
        holds=claims.compare(overlap.nb_change, low, holds_if="below"),
        run=seed,
    )

    facts = peer_links.link_facts(links)
    pcie = facts["pcie_gbps"]
    best_one_way = claims.measured(
        max((t for ts in one_way.value.values() for t in ts), key=lambda t: t.gbps), as_rate=True
    )  # GB/s, with the spread of its samples
    direct = facts["all_peer"] and not overlap.host_copies
    table.add(
        "Peer-to-peer copies go directly from GPU to GPU, without the host",
        source=STREAMS_ARTICLE,
        measured=(
            f"peer access on all pairs: {facts['all_peer']}; copy kinds in the traces: "
            f"{', '.join(overlap.copy_kinds)}; the best one-way copy in GB/s"
            + (
                f", against the {pcie:.0f} GB/s a copy through the host's PCIe reaches at most"
                if pcie
                else ""
            )
        ),
        holds=claims.compare(best_one_way, pcie, holds_if="above") if direct and pcie else direct,
        run=one_way,
    )

    gaps, ran_free = peer_streams.event_gaps_us(events), peer_streams.ran_free(events)
    with_wait, tolerance = gaps["with_wait"], peer_streams.TOLERANCE_US
    table.add(
        "An event recorded on one GPU's stream can make another GPU's stream wait",
        source=STREAMS_ARTICLE,
        measured=(
            f"microseconds from the end of cuda:0's kernel to the start of cuda:1's with the wait (earliest of "
            f"{len(with_wait)} steps; -{tolerance:.0f} us allowed for the GPUs' clocks); without the wait "
            f"{max(gaps['without_wait'], default=float('nan')):+.1f} us"
            + (
                ""
                if ran_free
                else ": without the wait cuda:1's kernel did not run early either, so the wait "
                "cannot be told apart"
            )
        ),
        holds=(
            claims.compare(
                claims.Value(min(with_wait), 0.0, "us", len(with_wait)),
                -tolerance,
                holds_if="above",
            )
            if with_wait and ran_free
            else None
        ),
        run=events,
    )

    rate = facts["rated_gbps"]
    table.add(
        f"NVLink makes peer copies fast: close to the link's rated speed (at least {NEAR_LINK:.0%} of it)",
        source=STREAMS_ARTICLE,
        measured=(
            (
                f"the best one-way copy, {best_one_way.value:.0f} GB/s, as a share of the link's rated "
                f"{rate:.0f} GB/s per direction; the same-GPU copy's plateau {peer.memory_gbps(same):.0f} GB/s"
            )
            if rate
            else f"the link is {facts['link']}, not NVLink"
        ),
        holds=(
            claims.compare(
                claims.Value(
                    best_one_way.value / rate, best_one_way.spread / rate, "", best_one_way.samples
                ),
                NEAR_LINK,
                holds_if="above",
            )
            if rate
            else None
        ),
        run=one_way,
    )

    after_1 = next(
        s for s in current.value["states"] if s["where"] == "after torch.cuda.set_device(1)"
    )
    op = current.value["operator_on_cuda1"]
    table.add(
        "torch.cuda.set_device(device_id) makes sure you are interacting with the right GPU",
        source=STREAMS_ARTICLE,
        measured=(
            f'after set_device(1): current device cuda:{after_1["current_device"]}, device="cuda" on '
            f"{after_1['empty_on']}, current stream on {after_1['current_stream_on']}; it decides only what is "
            f"not named: x * 2 + 1 on a cuda:1 tensor ran on {op['result_on']} with "
            f"cuda:{op['current_device_before']} current"
        ),
        holds=peer_streams.set_device_decides(current),
        run=current,
    )
    return table
