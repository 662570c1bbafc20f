"""Notebook 05's claims: the blog post's on overlap, the streams article's on peer copies,
events across GPUs, NVLink and ``set_device``, each decided from the sections' facts."""

from __future__ import annotations

from functools import partial

from ... import claims
from ...records import Run
from . import NOTEBOOK, copies, devices, overlap

BLOG_POST = 'blog post "Transferring data between GPUs in fully parallel fashion in PyTorch"'
STREAMS_ARTICLE = 'article "PyTorch CUDA Streams Introduction"'


def claims_table(
    seed: Run, one_way: Run, events: Run, link_run: Run, current: Run, same: Run
) -> claims.ClaimsTable:
    """The sources' claims, each tested on the facts of its section."""
    o, high, low = overlap.summary(seed), overlap.HIGH, overlap.LOW
    w = copies.one_way_facts(one_way, same, link_run)
    f, e, tol = w.links, devices.event_facts(events), devices.TOLERANCE_US
    v = claims.measured(w.best, as_rate=True)  # GB/s, with the spread of its samples
    direct, pcie, rate = f.all_peer and not o.host_copies, f.pcie_gbps, f.rated_gbps
    link = f.link.get((0, 1), "unknown")
    earliest = claims.Value(min(e.with_wait), 0.0, "us", len(e.with_wait)) if e.with_wait else None
    state = devices.current_facts(current)
    after, op = state.states["after torch.cuda.set_device(1)"], current.value["operator_on_cuda1"]
    than_pcie = (
        f", against the {pcie:.0f} GB/s a copy through the host's PCIe reaches at most"
        if pcie
        else ""
    )
    cannot_tell = ": without the wait cuda:1's kernel did not run early either, so the wait cannot be told apart"
    rated = (
        f"the best one-way copy, {v.value:.0f} GB/s, as a share of the link's rated {rate:.0f} GB/s per direction; the same-GPU copy's plateau {w.memory:.0f} GB/s counting bytes read + written"
        if rate
        else ""
    )
    unrated = f"NVLink of a rate not known here ({'; '.join(f.rated_from)})"
    table = claims.ClaimsTable(NOTEBOOK)
    blog_post = partial(table.add, source=BLOG_POST, run=seed)  # its claims: all on the seed run
    article = partial(table.add, source=STREAMS_ARTICLE)
    blog_post(
        "A GPU-to-GPU copy overlaps a kernel on the receiving GPU when it is issued under side streams on both GPUs",
        measured=f"the lower overlap ratio of the two runs with s0 and s1 current ({o.both_side_text}, each over "
        f"{o.steps} profiled steps), from the traces; {high} and up counts as overlap",
        holds=claims.compare(min(o.both_side), high, holds_if="above"),
    )
    blog_post(
        "... and only then: under any other choice of streams it does not overlap",
        measured=f"the highest overlap ratio of the other {len(o.others)} runs, from the traces; {low} and below counts as none",
        holds=claims.compare(max(o.others), low, holds_if="below"),
    )
    blog_post(
        "non_blocking makes no difference to that overlap",
        measured=f"the largest change of the overlap ratio when only non_blocking changes (a change below {low} counts "
        f"as none); {o.host_syncs} cudaStreamSynchronize calls in the {o.runs} traces",
        holds=claims.compare(o.nb_change, low, holds_if="below"),
    )
    article(
        "Peer-to-peer copies go directly from GPU to GPU, without the host",
        measured=f"peer access on all pairs: {f.all_peer}; copy kinds in the traces: {', '.join(o.copy_kinds)}; "
        "the best one-way copy in GB/s" + than_pcie,
        holds=claims.compare(v, pcie, holds_if="above") if direct and pcie else direct,
        run=one_way,
    )
    article(
        "An event recorded on one GPU's stream can make another GPU's stream wait",
        measured=f"microseconds from the end of cuda:0's kernel to the start of cuda:1's with the wait (earliest of "
        f"{len(e.with_wait)} steps; -{tol:.0f} us allowed for the GPUs' clocks); without the wait, the "
        f"latest start of {len(e.without_wait)} steps: {max(e.without_wait, default=float('nan')):+.1f} us"
        + ("" if e.ran_free else cannot_tell),
        holds=claims.compare(earliest, -tol, holds_if="above") if e.ran_free and earliest else None,
        run=events,
    )
    near = copies.near_link(w)
    article(
        copies.NVLINK_FAST,
        measured=rated
        or f"the link is {link}, " + (unrated if link.startswith("NV") else "not NVLink"),
        holds=near,
        run=one_way,
    )
    article(
        "torch.cuda.set_device(device_id) makes sure you are interacting with the right GPU",
        measured=f'after set_device(1): current device cuda:{after["current_device"]}, device="cuda" on {after["empty_on"]}, '
        f"current stream on {after['current_stream_on']}; it decides only what is not named: `x * 2 + 1` on a "
        f"cuda:1 tensor ran on {op['result_on']} with cuda:{op['current_device_before']} current",
        holds=state.set_device_decides,
        run=current,
    )
    return table
