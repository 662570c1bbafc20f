"""Notebook 05's claims table: the blog post's claims on overlapping a copy between GPUs with a
kernel, and the streams article's on peer copies, events across GPUs, NVLink and ``set_device``,
each decided from the facts the section modules compute."""

from __future__ import annotations

from ... import claims
from ...records import Run
from . import NOTEBOOK, copies, devices, links, overlap

BLOG_POST = 'blog post "Transferring data between GPUs in fully parallel fashion in PyTorch"'
STREAMS_ARTICLE = 'article "PyTorch CUDA Streams Introduction"'
NEAR_LINK = (
    0.75  # packet headers and flow control take a share of the rated speed: "close" is above this
)


def claims_table(
    seed: Run, one_way: Run, events: Run, link_run: Run, current: Run, same: Run
) -> claims.ClaimsTable:
    """The sources' claims tested: the blog post's three on overlap (ratios 0 to 1 from the 8
    traces), and the streams article's on direct peer copies (the best one-way rate in GB/s
    against the PCIe bound), events across GPUs (us), NVLink's speed (the best copy as a share of
    the rated speed) and ``set_device`` (a bool from the states)."""
    o, high, low = overlap.summary(seed), overlap.HIGH, overlap.LOW
    table = claims.ClaimsTable(NOTEBOOK)
    table.add(
        "A GPU-to-GPU copy overlaps a kernel on the receiving GPU when it is issued under side streams on both GPUs",
        source=BLOG_POST,
        measured=f"the lower overlap ratio of the two runs with s0 and s1 current ({o.both_side_text}, each over "
        f"{o.steps} profiled steps), from the traces; {high} and up counts as overlap",
        holds=claims.compare(min(o.both_side), high, holds_if="above"),
        run=seed,
    )
    table.add(
        "... and only then: under any other choice of streams it does not overlap",
        source=BLOG_POST,
        measured=f"the highest overlap ratio of the other {len(o.others)} runs, from the traces; {low} and "
        "below counts as none",
        holds=claims.compare(max(o.others), low, holds_if="below"),
        run=seed,
    )
    table.add(
        "non_blocking makes no difference to that overlap",
        source=BLOG_POST,
        measured=f"the largest change of the overlap ratio when only non_blocking changes (a change below "
        f"{low} counts as none); {o.host_syncs} cudaStreamSynchronize calls in the {o.runs} traces",
        holds=claims.compare(o.nb_change, low, holds_if="below"),
        run=seed,
    )

    f = links.facts(link_run)
    best = max((t for ts in one_way.value.values() for t in ts), key=lambda t: t.gbps)
    best_one_way = claims.measured(best, as_rate=True)  # GB/s, with the spread of its samples
    direct, pcie = f.all_peer and not o.host_copies, f.pcie_gbps
    than_pcie = f", against the {pcie:.0f} GB/s a copy through the host's PCIe reaches at most"
    table.add(
        "Peer-to-peer copies go directly from GPU to GPU, without the host",
        source=STREAMS_ARTICLE,
        measured=f"peer access on all pairs: {f.all_peer}; copy kinds in the traces: "
        f"{', '.join(o.copy_kinds)}; the best one-way copy in GB/s" + (than_pcie if pcie else ""),
        holds=claims.compare(best_one_way, pcie, holds_if="above") if direct and pcie else direct,
        run=one_way,
    )

    e, tolerance = devices.event_facts(events), devices.TOLERANCE_US
    cannot_tell = ": without the wait cuda:1's kernel did not run early either, so the wait cannot be told apart"
    earliest = claims.Value(min(e.with_wait), 0.0, "us", len(e.with_wait)) if e.with_wait else None
    table.add(
        "An event recorded on one GPU's stream can make another GPU's stream wait",
        source=STREAMS_ARTICLE,
        measured=f"microseconds from the end of cuda:0's kernel to the start of cuda:1's with the wait "
        f"(earliest of {len(e.with_wait)} steps; -{tolerance:.0f} us allowed for the GPUs' clocks); "
        f"without the wait {max(e.without_wait, default=float('nan')):+.1f} us"
        + ("" if e.ran_free else cannot_tell),
        holds=claims.compare(earliest, -tolerance, holds_if="above")
        if earliest is not None and e.ran_free
        else None,
        run=events,
    )

    rate, link = f.rated_gbps, f.link.get((0, 1), "unknown")
    share = (
        claims.Value(
            best_one_way.value / rate, best_one_way.spread / rate, "", best_one_way.samples
        )
        if rate
        else None
    )
    table.add(
        f"NVLink makes peer copies fast: close to the link's rated speed (at least {NEAR_LINK:.0%} of it)",
        source=STREAMS_ARTICLE,
        measured=f"the best one-way copy, {best_one_way.value:.0f} GB/s, as a share of the link's rated "
        f"{rate:.0f} GB/s per direction; the same-GPU copy's plateau {copies.memory_gbps(same):.0f} GB/s"
        if rate
        else f"the link is {link}, NVLink of a rate not known here ({'; '.join(f.rated_from)})"
        if link.startswith("NV")
        else f"the link is {link}, not NVLink",
        holds=claims.compare(share, NEAR_LINK, holds_if="above") if share is not None else None,
        run=one_way,
    )

    state = devices.current_facts(current).states["after torch.cuda.set_device(1)"]
    op = current.value["operator_on_cuda1"]
    table.add(
        "torch.cuda.set_device(device_id) makes sure you are interacting with the right GPU",
        source=STREAMS_ARTICLE,
        measured=f'after set_device(1): current device cuda:{state["current_device"]}, device="cuda" on '
        f"{state['empty_on']}, current stream on {state['current_stream_on']}; it decides only what is "
        f"not named: x * 2 + 1 on a cuda:1 tensor ran on {op['result_on']} with "
        f"cuda:{op['current_device_before']} current",
        holds=devices.set_device_decides(current),
        run=current,
    )
    return table
