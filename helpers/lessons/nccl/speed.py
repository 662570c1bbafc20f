"""Sections 4 and 5 of notebook 06: all_reduce overlapping matmuls, and the busbw sweep (GB/s)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, distributed, hardware, plotting, tables, timing, trace
from ...records import Run
from .common import ARTICLE, NOTEBOOK

NO_OVERLAP, OVERLAP = 0.1, 0.5  # overlap ratios: below the first is none, above the second is
HELPER_WITHIN = 0.03  # the helper's busbw is "nccl-tests' loop" within this share of the loop's
FIXED_COST = 2  # an all_reduce "costs the same" while within this many times the shortest
NEAR_CEILING = 0.7  # "close to the link's ceiling": busbw above this share of the peer copy's
SIZE, COPY = ("size", "", timing.format_bytes), "GPU0 -> GPU1 copy"
NCCL_TESTS = [SIZE, "count", "type", "redop", ("time", "us", ".1f"), ("algbw", "GB/s", ".2f")]
NCCL_TESTS += [("busbw", "GB/s", ".2f"), "#wrong", ("IQR/median", "", ".1%")]
ON_STREAMS = "A blocking all_reduce ran on the matmuls' (current) stream; with async_op=True on a stream of its own"
CEILING = "NCCL finds the fastest path between the GPUs: busbw close to the link's ceiling"
ALL_RIGHT = "Every collective gave the right result at every size and number of ranks (nccl-tests' #wrong is 0)"


def split_kernels(profile: trace.Profile) -> tuple[list[trace.Interval], list[trace.Interval]]:
    """(NCCL's kernels, every other kernel) of a profile, told apart by 'nccl' in the name."""
    kernels = profile.select(kind="kernel")
    comm = [k for k in kernels if "nccl" in k.name.lower()]
    return comm, [k for k in kernels if k not in comm]


def step_overlap(intervals: list[trace.Interval]) -> float:
    """Overlap ratio of one step's NCCL kernels and its others (0.0 when either is missing)."""
    comm, compute = split_kernels(trace.Profile(intervals))
    return trace.overlap_ratio(comm, compute) if comm and compute else 0.0


@dataclass(frozen=True)
class Overlap:
    """One mode of an ``overlap`` run, its times in ms per profiled step."""

    ratio: claims.Value  # overlap, one per step (0: never together, 1: the shorter hidden)
    nccl_ms: float  # NCCL's kernels ran
    other_ms: float  # the other kernels ran
    busy_ms: float  # either ran
    steps: int
    streams: tuple[list[int], list[int]]  # the CUDA stream ids of NCCL's kernels, of the others


def overlap_of(run: Run) -> dict[str, Overlap]:
    out = {}
    for mode, p in run.value.items():
        comm, compute = split_kernels(p)
        ms = [trace.covered_us(k) / p.steps / 1e3 for k in (comm, compute, comm + compute)]
        c, o = (sorted({k.stream for k in ks if k.stream is not None}) for ks in (comm, compute))
        out[mode] = Overlap(
            analysis.per_step(p, step_overlap), ms[0], ms[1], ms[2], p.steps, (c, o)
        )
    return out


def show_overlap(run: Run) -> None:
    """Per mode, kernel and busy times (ms per step) and overlap; rank 0's two timelines."""
    found, fig, axes = overlap_of(run), *plt.subplots(2, 1, figsize=(10, 6))
    longest = max(trace.span_us(p.select(kind=trace.GPU_KINDS)) for p in run.value.values())
    for ax, (mode, profile), f in zip(axes, run.value.items(), found.values(), strict=True):
        said = f"{mode}: all_reduce kernels {f.nccl_ms:.3f} ms, other kernels {f.other_ms:.3f} ms,\n  GPU busy {f.busy_ms:.3f} ms per step; overlap ratio {f.ratio.value:.2f} (median of the steps)"
        print(said)
        plotting.timeline(profile.intervals, title=mode, ax=ax, include_host=False, unit="ms")
        ax.set_xlim(0, longest / 1e3 * 1.02)  # the same time scale for both
        ends = tuple(f" {k.stream}" for k in split_kernels(profile)[0])
        names = [t.get_text() for t in ax.get_yticklabels()]
        ax.set_yticks(ax.get_yticks(), [n + " (NCCL)" if n.endswith(ends) else n for n in names])
    what = f"Rank 0: all_reduce and matmuls, {max(f.steps for f in found.values())} profiled steps"
    fig.suptitle(plotting.titled(what, run))
    fig.tight_layout()
    plt.show()


def see_overlap(run: Run) -> claims.WhatWeSee:
    """Per mode, the overlap ratio and whether GPU busy is nearer the longer kernel or the sum."""
    seen, found = claims.WhatWeSee(NOTEBOOK, run), overlap_of(run)
    for mode, f in found.items():
        longer, total = max(f.nccl_ms, f.other_ms), f.nccl_ms + f.other_ms
        near = [f"the longer of the two ({longer:.3f} ms)", f"their sum ({total:.3f} ms)"]
        near = near if f.busy_ms - longer < total - f.busy_ms else near[::-1]
        ratio = f.ratio if f.ratio.spread else f"{f.ratio.value:.2f} in every step"
        nccl, others = (", ".join(map(str, ids)) for ids in f.streams)
        matmuls = "the matmuls too" if nccl == others else f"the matmuls on {others}"
        said = f"{mode} ({f.steps} profiled steps): overlap ratio {ratio}; GPU busy {f.busy_ms:.3f} ms per step, closer to {near[0]} than to {near[1]}; NCCL's kernels ran on stream {nccl}, {matmuls}."
        seen.say(said)
    b, a = found.values()
    said = f"Side by side, the matmuls took {a.other_ms:.3f} ms per step against {b.other_ms:.3f} ms one after the other ({a.other_ms / b.other_ms - 1:+.0%}), the all_reduce {a.nccl_ms:.3f} against {b.nccl_ms:.3f} ms ({a.nccl_ms / b.nccl_ms - 1:+.0%}; {analysis.plural(a.steps, 'profiled step')} each)."
    seen.say(said)
    alone = max(b.nccl_ms, b.other_ms)  # the longer kernel at its speed one after the other
    said = f"The GPU's busy time per step went from {b.busy_ms:.3f} ms one after the other to {a.busy_ms:.3f} ms side by side ({a.busy_ms / b.busy_ms - 1:+.0%}); a full overlap with neither kernel slowed would have left the longer one's {alone:.3f} ms ({alone / b.busy_ms - 1:+.0%})."
    seen.say(said)
    same = b.streams[0] == b.streams[1] and not set(a.streams[0]) & set(a.streams[1])
    said = f"blocking: streams {b.streams[0]} and {b.streams[1]}; async_op=True: {a.streams[0]} and {a.streams[1]}"
    seen.check(ON_STREAMS, same, f"NCCL's and the other kernels' {said}")
    return seen


@dataclass(frozen=True)
class Sweep:
    """A ``bandwidth`` run; rates in decimal GB/s."""

    sizes: list[int]  # bytes
    busbw: dict[int, dict[str, list[float]]]  # by world size, collective and size
    ranks: int  # the most ranks, which the next three are of
    all_reduce: list[timing.Timing]
    algbw: list[float]  # of all_reduce
    plain: timing.Timing  # the hand-written all_reduce loop's, at the largest size
    ceiling: float  # the peer copy's rate
    wrong: int  # elements, over every check


def sweep(run: Run) -> Sweep:
    sizes, most = run.params["sizes"], run.value["sweep"][-1]
    busbw, gbps = {}, distributed.busbw_gbps
    for e in run.value["sweep"]:
        n, ts = e["world_size"], e["timings"]
        busbw[n] = {
            op: [gbps(op, b, ts[op][i].median_s, n) for i, b in enumerate(sizes)] for op in ts
        }
    ar = most["timings"]["all_reduce"]
    algbw = [distributed.algbw_gbps(b, t.median_s) for b, t in zip(sizes, ar, strict=True)]
    plain = timing.Timing(most["plain_s"], "cuda events", sizes[-1], "hand-written loop")
    wrong = sum(sum(w) for e in run.value["sweep"] for w in e["wrong"].values())
    ceiling = run.value["ceiling"].gbps
    return Sweep(sizes, busbw, most["world_size"], ar, algbw, plain, ceiling, wrong)


def show_bandwidth(run: Run) -> None:
    """all_reduce in nccl-tests' columns, busbw per collective and factors (GB/s), and its plots."""
    s, ops = sweep(run), distributed.COLLECTIVE_OPS
    print(f"Measured on {', '.join(map(str, s.busbw))} ranks ({run.where()});")
    print(f"wrong elements over every check: {s.wrong}.")
    samples = f"median of {len(s.all_reduce[0].samples_s)} samples of {run.params['iters']} calls"
    title = f"all_reduce on {s.ranks} ranks ({run.where()}), in nccl-tests' columns"
    caption = f"{samples}; count: float32 elements; IQR/median: the spread of the samples"
    table = tables.Table(NCCL_TESTS, title=title, caption=caption)
    wrong, busbw = run.value["sweep"][-1]["wrong"]["all_reduce"], s.busbw[s.ranks]
    bus = busbw["all_reduce"]
    for i, (n, t) in enumerate(zip(s.sizes, s.all_reduce, strict=True)):
        table.add(n, n // 4, "float", "sum", t.median_us, s.algbw[i], bus[i], wrong[i], t.spread)
    by_op = [(n, *[v[i] for v in busbw.values()]) for i, n in enumerate(s.sizes)]
    title = f"busbw of each collective on {s.ranks} ranks"
    display(table, tables.Table([SIZE, *[(op, "GB/s", ".2f") for op in busbw]], by_op, title=title))
    factors = [(n, *[distributed.bus_factor(op, n) for op in ops]) for n in s.busbw]
    title = "nccl-tests' factor busbw / algbw for each collective and number of ranks n"
    display(tables.Table(["n", *[(op, "", ".4g") for op in ops]], factors, title=title))
    copy = f"a GPU0 -> GPU1 copy of {timing.format_bytes(run.params['ceiling_bytes'])}"
    print(f"The link's ceiling, {copy}: {s.ceiling:.1f} GB/s.")
    n = len(s.busbw)
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.5), sharey=True, squeeze=False)
    for ax, (n, values) in zip(axes[0], s.busbw.items(), strict=True):
        series = {op: (s.sizes, v) for op, v in values.items()}
        plotting.bandwidth_vs_size(
            series, title=f"{n} ranks", ax=ax, ceiling_gbps=s.ceiling, ceiling_label=COPY
        )
        ax.set_ylabel("busbw (decimal GB/s)")
    what = "NCCL busbw by message size and number of ranks"
    fig.suptitle(plotting.titled(what, run))
    fig.tight_layout()
    plt.show()


def fixed_cost_words(sizes: list[int], us: list[float]) -> str:
    """Up to which size an ``all_reduce`` costs the same (within ``FIXED_COST`` of the shortest)."""
    floor, first = min(us), timing.format_bytes(sizes[0])
    flat = [i for i in range(len(us)) if max(us[: i + 1]) <= FIXED_COST * floor]
    if not flat:
        shortest = f"{floor:.1f} us at {timing.format_bytes(sizes[us.index(floor)])}"
        return f"an `all_reduce` of {first} takes {us[0]:.1f} us, more than {FIXED_COST} times the shortest ({shortest}): the smallest sizes' times are out of order here; from there"
    if flat[-1] == 0:
        return f"an `all_reduce` of {first} takes {us[0]:.1f} us; from the smallest size on"
    last, most = timing.format_bytes(sizes[flat[-1]]), max(us[: flat[-1] + 1])
    return f"from {first} to {last} an `all_reduce` takes {floor:.1f} to {most:.1f} us, within {FIXED_COST} times the shortest; from there"


def see_bandwidth(run: Run) -> claims.WhatWeSee:
    """The fixed cost (us), the busbw curves and shares of the peer copy, and two checks."""
    s, seen = sweep(run), claims.WhatWeSee(NOTEBOOK, run)
    us, largest = [t.median_us for t in s.all_reduce], timing.format_bytes(s.sizes[-1])
    busbw = s.busbw[s.ranks]
    samples = f"medians of {len(s.all_reduce[0].samples_s)} samples"
    grows = f"the time grows with the size, to {us[-1]:.0f} us at {largest}"
    seen.say(f"On {s.ranks} ranks ({samples}), {fixed_cost_words(s.sizes, us)} {grows}.")
    rate, floor = s.algbw[-1], min(us)  # GB/s at the largest size; us
    cheap = [timing.format_bytes(b) for b in s.sizes if b / rate / 1e3 < floor]
    said = f"At the {largest} algbw ({rate:.0f} GB/s), moving the bytes alone takes less than the shortest call ({floor:.1f} us) up to {cheap[-1] if cheap else 'no size measured'}: there the fixed cost of a call is most of the time."
    curves = [f"`{op}` {claims.describe_curve(s.sizes, v).words}" for op, v in busbw.items()]
    seen.say(said, f"busbw on {s.ranks} ranks: " + "; ".join(curves) + ".")
    for n, values in s.busbw.items():
        shares = [
            f"{v[-1] / s.ceiling:.0%}" if v[-1] <= s.ceiling else f"{v[-1]:.0f} GB/s, above it"
            for v in values.values()
        ]
        said = ", ".join(f"{share} (`{op}`)" for share, op in zip(shares, values, strict=True))
        copy = f"the dashed line of the peer copy ({s.ceiling:.0f} GB/s)"
        seen.say(f"{n} ranks, {largest} messages, busbw against {copy}: {said}.")
    helper = busbw["all_reduce"][-1]
    plain = distributed.busbw_gbps("all_reduce", s.sizes[-1], s.plain.median_s, s.ranks)
    spread = f"{helper / plain - 1:+.1%}; IQR {s.plain.spread:.1%} of the loop's median"
    near = f"At {largest} on {s.ranks} ranks, the helper's all_reduce busbw is within {HELPER_WITHIN:.0%} of an events loop written out by hand"
    said = f"collective_timings {helper:.1f} GB/s, hand-written loop {plain:.1f} GB/s ({spread})"
    seen.check(near, abs(helper / plain - 1) <= HELPER_WITHIN, said)
    wrong = f"{s.wrong} wrong elements over {analysis.plural(len(s.busbw), 'world size')}"
    seen.check(ALL_RIGHT, s.wrong == 0, wrong)
    verdict = claims.stated(claims.judged(near_ceiling(run)[1], run, NOTEBOOK, CEILING), run)
    said = f"The source's “{CEILING}”, as the claims table below judges it: **{verdict}**."
    return seen.say(said)


def busbw_if_ranks(run: Run, n: int) -> float:
    """busbw (GB/s) of the largest ``all_reduce`` on ``n`` ranks at the measured algbw."""
    return sweep(run).algbw[-1] * distributed.bus_factor("all_reduce", n)


def add_claims(table: claims.ClaimsTable, overlap: Run, bandwidth: Run) -> None:
    """Overlap (ratios over rank 0's steps) and the largest all_reduce's busbw over the copy's."""
    o = {mode: f.ratio for mode, f in overlap_of(overlap).items()}
    steps = {mode: analysis.plural(r.samples or 1, "profiled step") for mode, r in o.items()}
    rows = {
        "A blocking collective holds back the work queued after it on the current stream (no overlap)": (
            f"overlap ratio of all_reduce and matmul kernels, blocking, over {steps['blocking']} (threshold: {NO_OVERLAP})",
            claims.compare(o["blocking"], NO_OVERLAP, holds_if="below"),
        ),
        "Asynchronous operations let communication overlap computation": (
            f"overlap ratio with async_op=True, over {steps['async_op=True']} (threshold: {OVERLAP}, half the shorter hidden)",
            claims.compare(o["async_op=True"], OVERLAP, holds_if="above"),
        ),
    }
    for text, (measured, holds) in rows.items():
        table.add(text, source=ARTICLE, measured=measured, holds=holds, run=overlap)
    said, holds = near_ceiling(bandwidth)
    table.add(CEILING, source=ARTICLE, measured=said, holds=holds, run=bandwidth)


def near_ceiling(bandwidth: Run) -> tuple[str, claims.Comparison]:
    """What is measured, and the largest all_reduce's busbw over the peer copy's rate."""
    s, copy = sweep(bandwidth), claims.measured(bandwidth.value["ceiling"], as_rate=True)
    algbw = claims.measured(s.all_reduce[-1], as_rate=True)
    factor = distributed.bus_factor("all_reduce", s.ranks)
    busbw = claims.Value(algbw.value * factor, algbw.spread * factor, "GB/s", algbw.samples)
    largest = f"all_reduce of {timing.format_bytes(s.sizes[-1])} on {s.ranks} ranks"
    link = hardware.gpu_links(bandwidth.header["machine"].get("gpu_links")).get((0, 1))
    joined = f"GPU0 and GPU1 joined by {link or 'a link it did not name'} (nvidia-smi topo -m)"
    said = f"{joined}; {largest}: busbw {busbw.value:.0f} GB/s over a GPU0 -> GPU1 copy's {copy.value:.0f} GB/s (threshold: {NEAR_CEILING} of it)"
    return said, claims.compare(claims.ratio(busbw, copy), NEAR_CEILING, holds_if="above")
