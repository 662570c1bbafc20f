"""Notebook 05, sections 3-6: a copy within one GPU (the memory's figure), peer copies one way
and both ways at once (GB/s, against the link's rated speed), and the time of tiny copies (us)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, hardware, plotting, tables, timing
from ...records import Run
from . import NOTEBOOK, matrix, pair_ends, pair_name, span
from .links import Links
from .links import facts as link_facts

DUPLEX = 0.9  # both ways at once keeping this share of the one-way rates added: "hardly slowed"
PLATEAU_TOLERANCE = 0.05  # the largest sizes within this share of the largest size's rate: plateau
# a tiny peer copy's time changing by more, smallest size to largest: the size matters
SIZE_MATTERS = 0.25
NEAR_MEMORY = 0.75  # "near the memory's bandwidth": at least this share of the datasheet
BIG = 2**28  # "large" one-way copies: 256 MiB and up
# packet headers and flow control take a share of the rated speed: "close" is above this
NEAR_LINK = 0.75
NVLINK_FAST = f"NVLink makes peer copies fast: close to the link's rated speed (at least {NEAR_LINK:.0%} of it)"
PLURAL = {
    "levels off": "level off",
    "still rising": "are still rising",
    "peaks, then falls": "peak, then fall",
    "uneven": "do not settle",
}
NEAR_SHEET = f"large copies run near the memory's bandwidth (at least {NEAR_MEMORY:.0%} of the datasheet), small ones slower"
BELOW_RATED = "no peer copy reaches its link's rated speed"
KEEP_RATE = "two copies in opposite directions each keep close to their one-way rate"
COSTS_MORE = "a copy between GPUs costs more than one within a GPU"
BEYOND = ", above what the link can carry: a measurement problem, not a result"  # share > 100%


def plateau(rates: list[float]) -> tuple[int, float, float, float]:
    """The largest sizes within ``PLATEAU_TOLERANCE`` of the last: (first index, low, high, median)."""
    if not rates:
        raise ValueError("a plateau needs at least one rate")
    start = len(rates) - 1
    while start > 0 and abs(rates[start - 1] - rates[-1]) <= PLATEAU_TOLERANCE * rates[-1]:
        start -= 1
    flat = rates[start:]
    return start, min(flat), max(flat), statistics.median(flat)


def rates_of(ts: list[timing.Timing]) -> list[float]:
    return [t.gbps for t in ts]


def say_leaks(seen: claims.WhatWeSee, consequence: str, *runs: Run) -> list[str]:
    """Says where queueing a sample's copies took longer than the hold before them; returns where."""
    found = []
    for run in runs:
        value = run.value if isinstance(run.value, dict) else {"0->0": run.value}  # same_gpu_copy
        for pair, ts in value.items():
            for size, t in zip(run.params["sizes"], ts, strict=True):
                queued, hold = t.extra.get("enqueue_us"), t.extra.get("hold_us")
                if queued is not None and hold and queued > hold:
                    where = f"{pair_name(pair)} at {timing.format_bytes(size)}"
                    found.append(f"{where} ({queued:.0f} us of queueing, {hold:.0f} us of hold)")
    if found:
        seen.say(
            f"Launch time leaked into {'; '.join(found)}: queueing the sample's copies took longer "
            "than the spin kernel held the stream, so the GPU waited for the host, that rate is too "
            f"low, {consequence}."
        )
    return found


def size_table(
    sizes: list[int], rows: dict, fmt: str, caption: str, title: str = "", extra: tuple = ()
) -> tables.Table:
    """A row per pair, a column per size (and the ``extra`` columns after them)."""
    columns = ["pair", *[(timing.format_bytes(s), "", fmt) for s in sizes], *extra]
    table = tables.Table(columns, title=title, caption=caption)
    for pair, cells in rows.items():
        table.add(pair_name(pair), *cells)
    return table


def plot(run: Run, title: str, curves: list[tuple], ceiling: float | None, label: str) -> None:
    """GB/s against size, ``curves`` as (name, sizes, GB/s, group), a dashed line at ``ceiling``."""
    plotting.bandwidth_vs_size(
        {name: (sizes, rates) for name, sizes, rates, _ in curves},
        title=plotting.titled(title, run),
        ceiling_gbps=ceiling,
        ceiling_label=label,
        groups={name: group for name, _, _, group in curves},
    )
    plt.show()


@dataclass(frozen=True)
class SameGpu:
    """Section 3's facts: the plateau (GB/s, read + write), the best size, L2 bytes, datasheet GB/s."""

    start: int
    low: float
    high: float
    memory: float
    best_at: int
    cache: int | None
    datasheet: float | None


def same_facts(same: Run) -> SameGpu:
    rates, machine = rates_of(same.value), same.header["machine"]
    sheet = hardware.ceiling_gbps(machine)
    cache_known = all(gpu.get("l2_bytes") for gpu in machine.get("gpus") or [{}])
    return SameGpu(
        *plateau(rates),
        rates.index(max(rates)),
        hardware.cache_bytes(machine) if cache_known else None,
        None if sheet == hardware.UNKNOWN_GPU_CEILING_GBPS else sheet,
    )


def show_same_gpu(same: Run) -> None:
    """Prints the same-GPU copy's GB/s (read + written) per size: median, slowest-fastest."""
    print("same-GPU copy on cuda:0, decimal GB/s counting bytes read + written", end=" ")
    print("(median; slowest-fastest sample)")
    for size, t in zip(same.params["sizes"], same.value, strict=True):
        low, high = t.gbps_range
        print(f"  {timing.format_bytes(size):>9}: {t.gbps:8.1f} GB/s  ({low:.1f}-{high:.1f})")


def see_same_gpu(same: Run) -> claims.WhatWeSee:
    """The smallest size's rate, the plateau against the datasheet, a bump above it (L2?)."""
    f, size = same_facts(same), timing.format_bytes
    sizes, rates = same.params["sizes"], rates_of(same.value)
    best, both = rates[f.best_at], 2 * sizes[f.best_at]  # both: source and destination
    in_cache = None if f.cache is None else both <= f.cache
    l2 = f"this GPU's {size(f.cache)} L2 cache" if f.cache else ""
    cache = {
        True: f"within {l2}: part of it can have been served from the cache, not from memory",
        False: f"more than {l2}",
        None: "the recording does not say this GPU's L2 cache size",
    }[in_cache]
    over = ""
    if f.datasheet and best > f.datasheet:
        over = f"; it is {best / f.datasheet:.0%} of the datasheet's memory bandwidth, " + (
            "which no copy can exceed: a measurement problem, not a result"
            if in_cache is False
            else "which only a copy served from the cache can exceed"
        )
    sheet = (
        f.datasheet
        and f", {f.memory / f.datasheet:.0%} of the {f.datasheet:.0f} GB/s of NVIDIA's datasheet"
    )
    seen = claims.WhatWeSee(NOTEBOOK, same).say(
        f"The same-GPU copy runs at {rates[0]:.0f} GB/s at {size(sizes[0])}. Its largest sizes, "
        f"{size(sizes[f.start])} to {size(sizes[-1])}, lie within {PLATEAU_TOLERANCE:.0%} of "
        f"each other at {f.low:.0f} to {f.high:.0f} GB/s: we take their median, {f.memory:.0f} "
        f"GB/s, as the memory's figure for a read-plus-write stream{sheet or ''}.",
        f"The best point, {best:.0f} GB/s at {size(sizes[f.best_at])}, lies above that "
        f"plateau by {best / f.memory - 1:.0%} (source and destination together: "
        f"{size(both)}, {cache}){over}."
        if f.best_at < f.start
        else "No middle size rises above the plateau here.",
    )
    if f.datasheet:  # the expectation: near the memory's bandwidth; small copies pay a fixed cost
        near = f.memory >= NEAR_MEMORY * f.datasheet and rates[0] < f.low
        measured = f"{f.memory:.0f} GB/s, {f.memory / f.datasheet:.0%} of {f.datasheet:.0f}; {rates[0]:.0f} GB/s at {size(sizes[0])}"
        seen.check(NEAR_SHEET, near, measured)
    say_leaks(seen, "and so is the memory's figure if it is one of them", same)
    return seen


@dataclass(frozen=True)
class OneWay:
    """Section 4's facts: GB/s per pair and size, curve shapes, plateaus, the bound, rated shares."""

    rates: dict[str, list[float]]
    shapes: dict[str, claims.CurveShape]
    flat_low: float
    flat_high: float
    memory: float  # the same-GPU copy's plateau
    best: timing.Timing  # the fastest pair and size
    ceiling: float | None
    ceiling_label: str
    rated_shares: dict[str, float | None]  # None: no rated speed for the pair's link
    links: Links  # section 1's facts


def one_way_facts(peer: Run, same: Run, links: Run) -> OneWay:
    sizes, f = peer.params["sizes"], link_facts(links)
    rates = {p: rates_of(ts) for p, ts in peer.value.items()}
    flats = [plateau(r) for r in rates.values()]
    rated = {p: f.rated.get(pair_ends(p)) for p in rates}
    return OneWay(
        rates,
        {p: claims.describe_curve(sizes, r) for p, r in rates.items()},
        min(x[1] for x in flats),
        max(x[2] for x in flats),
        same_facts(same).memory,
        max((t for ts in peer.value.values() for t in ts), key=lambda t: t.gbps),
        *f.ceiling,
        {p: max(rates[p]) / rate if rate else None for p, rate in rated.items()},
        f,
    )


def show_peer_bandwidth(peer: Run, same: Run, links: Run) -> None:
    """One-way GB/s per pair and size, every pair at the largest, and the plot."""
    o, sizes, size = one_way_facts(peer, same, links), peer.params["sizes"], timing.format_bytes
    big = [x for r in o.rates.values() for s, x in zip(sizes, r, strict=True) if s >= BIG]
    largest = f"GB/s, every pair at {size(sizes[-1])}, one at a time"
    if big:
        largest += f"; the slowest at {size(BIG)} and up, over all pairs: {min(big):.1f}"
    cells = {p: [*r, o.rated_shares[p]] for p, r in o.rates.items()}
    caption = "decimal GB/s, median of the samples; best / rated: the pair's best rate over its link's rated speed"
    title = plotting.titled("Peer copies, one direction, GB/s", peer)
    display(
        size_table(sizes, cells, ".1f", caption, title=title, extra=(("best / rated", "", ".0%"),)),
        matrix(o.links.gpus, {p: r[-1] for p, r in o.rates.items()}, ".1f", largest),
    )
    curves = [
        (pair_name(p), sizes, r, f"GPU to GPU, {o.links.link.get(pair_ends(p), 'link unknown')}")
        for p, r in o.rates.items()
    ]
    own = "cuda:0 -> cuda:0 (same GPU, read + write)"
    curves.append((own, same.params["sizes"], rates_of(same.value), "same GPU (read + write)"))
    title, label = "Copies between GPUs and within one", f"{o.ceiling_label}, one direction"
    plot(peer, title, curves, o.ceiling, label)


def see_peer_bandwidth(peer: Run, same: Run, links: Run) -> claims.WhatWeSee:
    """The curves' shapes, plateaus against the same-GPU copy's, shares of the rated speed."""
    o = one_way_facts(peer, same, links)
    first, peak = next(iter(o.shapes.values())), o.best.gbps
    alike, others = sum(s.kind == first.kind for s in o.shapes.values()), len(o.shapes) - 1
    if not others:
        tail = ""
    elif others == 1 and alike == 2:
        tail = "; so does the other direction's curve"
    elif alike == len(o.shapes):
        tail = f"; so do the other {others} curves"
    else:
        tail = f"; {alike - 1} of the other {others} curves {PLURAL[first.kind]} too"
    what = "rated speed" if o.links.rated_gbps else "raw PCIe rate (the link is not NVLink)"
    seen = claims.WhatWeSee(NOTEBOOK, peer).say(
        f"The peer copy {pair_name(next(iter(o.shapes)))} {first.words}{tail}.",
        f"At the largest sizes every pair runs at {o.flat_low:.0f} to {o.flat_high:.0f} GB/s; the "
        f"same-GPU copy's plateau, {o.memory:.0f} GB/s counting each byte read and written, is "
        f"{o.memory / 2:.0f} GB/s of bytes copied: {o.memory / 2 / peak:.1f} times the best peer "
        f"copy's {peak:.0f} GB/s.",
        f"The dashed line is the {what} of the link cuda:0 - cuda:1, {o.ceiling:.0f} GB/s per "
        f"direction: the best peer copy reaches {peak / o.ceiling:.0%} of it"
        f"{BEYOND if peak > o.ceiling else ''}."
        if o.ceiling
        else "No rated speed is known for the link cuda:0 - cuda:1, so the plot has no line for it.",
    )
    best = max(filter(None, o.rated_shares.values()), default=None)
    if best:
        measured = f"the best copy of any pair reaches {best:.0%} of its link's rated speed"
        seen.check(BELOW_RATED, best < 1, measured)
    near = near_link(o)
    if near is not None:
        verdict = claims.stated(claims.judged(near, peer, NOTEBOOK, NVLINK_FAST), peer)
        seen.say(
            f"The streams article's “{NVLINK_FAST}”, as the claims table below judges it: **{verdict}**."
        )
    return seen


def near_link(o: OneWay) -> claims.Comparison | None:
    """The best one-way copy's share of cuda:0 - cuda:1's rated speed against ``NEAR_LINK``."""
    rate, v = o.links.rated_gbps, claims.measured(o.best, as_rate=True)  # GB/s and its spread
    if not rate:
        return None
    share = claims.Value(v.value / rate, v.spread / rate, "", v.samples)
    return claims.compare(share, NEAR_LINK, holds_if="above")


def one_way_ms(peer: Run, nbytes: int, src: int, dst: int) -> float:
    """Milliseconds for ``nbytes`` from cuda:``src`` to cuda:``dst`` at its largest size's rate."""
    return nbytes / (peer.value[f"{src}->{dst}"][-1].gbps * 1e9) * 1e3


@dataclass(frozen=True)
class Share:
    """One pair and size both ways: total over one-way rates added; slowest over fastest samples."""

    pair: str
    size: int
    share: float
    lowest: float


def duplex_shares(both: Run, peer: Run) -> list[Share]:
    """Every pair and size measured both ways and one way (in each direction)."""
    one_way = {p: dict(zip(peer.params["sizes"], ts, strict=True)) for p, ts in peer.value.items()}
    found = []
    for pair, ts in both.value.items():
        i, j = pair_ends(pair)
        for size, t in zip(both.params["sizes"], ts, strict=True):
            there, back = (one_way.get(f"{a}->{b}", {}).get(size) for a, b in ((i, j), (j, i)))
            if there and back:
                fastest = there.gbps_range[1] + back.gbps_range[1]
                share = t.gbps / (there.gbps + back.gbps)
                found.append(Share(pair, size, share, t.gbps_range[0] / fastest))
    return found


@dataclass(frozen=True)
class BothWays:
    """Section 5's facts: shares of the one-way rates added (largest size, lowest, above 100%), GB/s."""

    shares: list[Share]
    at_largest: list[float]
    low: Share
    above: list[Share]
    noise: list[Share]
    top: tuple[float, str, int]  # the largest total: GB/s, pair, size each way
    bound: float | None  # twice the one-way bound, GB/s
    label: str
    what: str  # what the bound is twice of


def both_facts(both: Run, peer: Run, links: Run) -> BothWays:
    shares, f = duplex_shares(both, peer), link_facts(links)
    above, (rated, label) = [s for s in shares if s.share > 1], f.ceiling
    return BothWays(
        shares,
        [s.share for s in shares if s.size == both.params["sizes"][-1]],
        min(shares, key=lambda s: s.share),
        above,
        [s for s in above if s.lowest <= 1],
        max(
            (t.gbps, p, size)
            for p, ts in both.value.items()
            for size, t in zip(both.params["sizes"], ts, strict=True)
        ),
        2 * rated if rated else None,
        label,
        "rated speed" if f.rated_gbps else "raw PCIe rate",
    )


def show_both_ways(both: Run, peer: Run, links: Run) -> None:
    """Both ways' total GB/s per pair and size, over the one-way rates added, and the plot."""
    sizes, b = both.params["sizes"], both_facts(both, peer, links)
    shares = {(s.pair, s.size): s.share for s in b.shares}
    totals = {p: rates_of(ts) for p, ts in both.value.items()}
    title = plotting.titled("Both directions at once, total GB/s (size: each way)", both)
    caption = "decimal GB/s: the bytes of both copies over the time for both"
    over = (
        "the total over the two one-way rates of section 4 added: neither copy can run faster than "
        "it does alone, so a share above 100% is the samples' noise or a measurement problem "
        "(said below)"
    )
    display(
        size_table(sizes, totals, ".1f", caption, title=title),
        size_table(sizes, {p: [shares.get((p, s)) for s in sizes] for p in totals}, ".0%", over),
    )
    curves = [
        (f"{pair_name(p)}, both at once (total)", sizes, r, "both ways at once, total")
        for p, r in totals.items()
    ] + [
        (f"{pair_name(p)}, alone", peer.params["sizes"], rates_of(peer.value[p]), "one way alone")
        for p in ("0->1", "1->0")
    ]
    title = "Peer copies: one way and both ways at once"
    plot(both, title, curves, b.bound, f"{b.label}, both directions")


def see_both_ways(both: Run, peer: Run, links: Run) -> claims.WhatWeSee:
    """Whether the directions slowed each other, the largest total against the bound, shares above 100%."""
    b, size, largest = both_facts(both, peer, links), timing.format_bytes, both.params["sizes"][-1]
    close, below = min(b.at_largest) >= DUPLEX, [s for s in b.shares if s.share < DUPLEX]
    where = ", ".join(size(n) for n in sorted({s.size for s in below}))
    most, most_pair, most_size = b.top
    seen = claims.WhatWeSee(NOTEBOOK, both).say(
        f"At {size(largest)} each way the total is "
        f"{span(f'{min(b.at_largest):.0%}', f'{max(b.at_largest):.0%}')} of the two one-way rates added, "
        f"over {analysis.plural(len(b.at_largest), 'pair')} of GPUs: the two directions "
        f"{'hardly ' if close else ''}slowed each other down (at least {DUPLEX:.0%} counts as "
        f"hardly). The lowest share at any size is {b.low.share:.0%}, {pair_name(b.low.pair)} at "
        f"{size(b.low.size)} each way"
        + (
            f"; {len(below)} of the {len(b.shares)} shares {'lies' if len(below) == 1 else 'lie'} "
            f"below {DUPLEX:.0%}, at {where} each way: there, by that measure, the directions "
            "did slow each other down."
            if below
            else "."
        ),
        f"The dashed line is twice the one-way {b.what}, {b.bound:.0f} GB/s; the largest total, "
        f"{most:.0f} GB/s ({pair_name(most_pair)} at {size(most_size)} each way), is "
        f"{most / b.bound:.0%} of it{BEYOND if most > b.bound else ''}."
        if b.bound
        else "No rated speed is known for the link, so the plot has no line for it.",
    )
    if b.above:
        top = max(b.above, key=lambda s: s.share)
        seen.say(
            f"{analysis.plural(len(b.above), 'share')} {'is' if len(b.above) == 1 else 'are'} above "
            f"100% (the highest {top.share:.0%}, {pair_name(top.pair)} at {size(top.size)} each "
            "way), although neither copy can run faster than it does alone: "
            + (
                "within the samples' spread (the slowest both-ways sample over the fastest one-way "
                f"samples gives at most {max(s.lowest for s in b.noise):.0%}): noise around 100%, not a gain."
                if len(b.noise) == len(b.above)
                else f"{len(b.above) - len(b.noise)} of them stay above 100% even from the slowest "
                "both-ways sample over the fastest one-way samples, a measurement problem, not a "
                "result."
            )
        )
    least = f"at {size(largest)} the total is at least {min(b.at_largest):.1%} of the two one-way rates added, {DUPLEX:.0%} counting as close"
    seen.check(KEEP_RATE, close, least)
    say_leaks(seen, "and a share computed from it is no measure of the link", both, peer)
    return seen


def both_ways_largest_gbps(both: Run) -> float:
    """cuda:0 <-> cuda:1's total GB/s both ways at once at the largest size."""
    return both.value["0<->1"][-1].gbps


@dataclass(frozen=True)
class Latency:
    """Section 6's facts (us per copy): peer median per size, local median, slowest local, fastest peer."""

    peer_us: list[float]
    local_us: float
    slowest_local: float
    fastest_peer: float


def latency_facts(latency: Run) -> Latency:
    us = {pair_ends(p): [t.median_us for t in ts] for p, ts in latency.value.items()}
    peer = [per_size for (i, j), per_size in us.items() if i != j]
    local = [per_size for (i, j), per_size in us.items() if i == j]
    return Latency(
        [statistics.median(at_size) for at_size in zip(*peer, strict=True)],
        statistics.median(per_size[0] for per_size in local),
        max(map(max, local)),
        min(map(min, peer)),
    )


def show_latency(latency: Run) -> None:
    """Time per copy (us) from every GPU to every GPU, per size (the diagonal: within one)."""
    value, shown = latency.value, []
    for k, size in enumerate(latency.params["sizes"]):
        us = {p: ts[k].median_us for p, ts in value.items()}
        caption = f"time per copy of {size} B (row: from, column: to; median of the samples)"
        title = plotting.titled("Small copies", latency) if not k else ""
        shown.append(matrix(round(len(value) ** 0.5), us, ".2f", caption, unit="us", title=title))
    display(*shown)


def see_latency(latency: Run) -> claims.WhatWeSee:
    """A tiny copy between GPUs against one within a GPU (us), and how it changes with size."""
    f, sizes = latency_facts(latency), latency.params["sizes"]
    first, last = f.peer_us[0], f.peer_us[-1]
    seen = claims.WhatWeSee(NOTEBOOK, latency).say(
        f"At {sizes[0]} B a copy between GPUs takes {first:.1f} us, {first / f.local_us:.1f} "
        f"times as long as a copy within one GPU ({f.local_us:.1f} us)."
    )
    if len(sizes) > 1:
        changed = abs(last / first - 1)
        matters = "hardly matters here" if changed < SIZE_MATTERS else "matters already"
        seen.say(
            f"From {sizes[0]} B to {sizes[-1]} B the peer copy's median time goes from "
            f"{first:.1f} to {last:.1f} us: the size {matters}."
        )
    took = f"the fastest peer copy of any pair and size took {f.fastest_peer:.1f} us, the slowest within one GPU {f.slowest_local:.1f} us"
    seen.check(COSTS_MORE, f.fastest_peer > f.slowest_local, took)
    say_leaks(seen, "and its time per copy too high", latency)
    return seen
