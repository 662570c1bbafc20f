"""What notebook 05 shows of its copies: the bandwidth of copies within one GPU and between two
(one way, both ways at once), the time of tiny copies, and the expected values of two exercises.

Which GPUs reach which, how fast their links are rated and the copies of every pair at once are
in ``peer_links``;
what the current device decides, the blog post's experiment and the events across GPUs are in
``peer_streams``; the claims table in ``peer_claims``. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested on every recorded machine in
tests/test_lesson_05.py.
"""

from __future__ import annotations

import statistics

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, plotting, tables, timing
from ..records import Run
from .peer_links import (
    NOTEBOOK,
    link_rates,
    links_of,
    ordered_pairs,
    pair_ends,
    pair_name,
    span,
)

DUPLEX = (
    0.9  # both at once keeps at least this share of the two one-way rates added: "hardly slowed"
)
PLATEAU_TOLERANCE = (
    0.05  # sizes whose rates lie within this share of the largest size's form the plateau
)
_PLURAL = {
    "levels off": "level off",
    "still rising": "are still rising",
    "peaks, then falls": "peak, then fall",
    "uneven": "do not settle",
}


# ---------------------------------------------------------------- 3. a copy within one GPU


def _plateau(
    rates: list[float], tolerance: float = PLATEAU_TOLERANCE
) -> tuple[int, float, float, float]:
    """The largest sizes whose rates lie within ``tolerance`` of the largest size's: (index of the
    first of them, lowest, highest, median rate). A bump at a middle size is left out."""
    if not rates:
        raise ValueError("a plateau needs at least one rate")
    start = len(rates) - 1
    while start > 0 and abs(rates[start - 1] - rates[-1]) <= tolerance * rates[-1]:
        start -= 1
    flat = rates[start:]
    return start, min(flat), max(flat), statistics.median(flat)


def memory_gbps(same: Run) -> float:
    """The same-GPU copy's plateau: the median rate of its largest sizes, those within
    ``PLATEAU_TOLERANCE`` of the largest size's (decimal GB/s, bytes read plus written).
    """
    return _plateau([t.gbps for t in same.value])[3]


def show_same_gpu(same: Run) -> None:
    """Prints the same-GPU copy's rate at each size: decimal GB/s counting bytes read plus
    written, median and the slowest and fastest sample. Returns nothing.
    """
    print(
        "same-GPU copy on cuda:0, decimal GB/s counting bytes read + written (median; slowest-fastest sample)"
    )
    for size, t in zip(same.params["sizes"], same.value, strict=True):
        slowest, fastest = t.gbps_range
        print(
            f"  {timing.format_bytes(size):>9}: {t.gbps:8.1f} GB/s  ({slowest:.1f}-{fastest:.1f})"
        )


def see_same_gpu(same: Run) -> claims.WhatWeSee:
    """The same-GPU copy's rate at the smallest size, its plateau over the largest sizes (the
    memory's figure, GB/s read + write) and a middle size above it, if any.
    """
    sizes, rates = same.params["sizes"], [t.gbps for t in same.value]
    start, low, high, memory = _plateau(rates)
    best = max(rates)
    peak_at = rates.index(best)
    seen = claims.WhatWeSee(NOTEBOOK, same)
    seen.say(
        f"The same-GPU copy runs at {rates[0]:.0f} GB/s at {timing.format_bytes(sizes[0])}. Its largest sizes, "
        f"{timing.format_bytes(sizes[start])} to {timing.format_bytes(sizes[-1])}, lie within "
        f"{PLATEAU_TOLERANCE:.0%} of each other at {low:.0f} to {high:.0f} GB/s: we take their median, "
        f"{memory:.0f} GB/s, as the memory's figure for a read-plus-write stream."
    )
    if peak_at < start:
        seen.say(
            f"The best point, {best:.0f} GB/s at {timing.format_bytes(sizes[peak_at])}, lies above that "
            f"plateau by {best / memory - 1:.0%} (source and destination together: "
            f"{timing.format_bytes(2 * sizes[peak_at])}; see the L2 cache below)."
        )
    else:
        seen.say("No middle size rises above the plateau here.")
    _say_hold_leaks(seen, _hold_leaks(same), "and so is the memory's figure if it is one of them")
    return seen


# ---------------------------------------------------------------- 4. peer copies, one way


def _one_way_peak(peer: Run) -> float:
    return max(t.gbps for ts in peer.value.values() for t in ts)


def show_peer_bandwidth(peer: Run, same: Run, links: Run) -> None:
    """Shows each pair's one-way rate at every size (decimal GB/s) with its best over the link's
    rated speed, the matrix of every pair at the largest size, the slowest large copy, and plots
    every pair beside the same-GPU copy under the link's rated speed. Returns nothing.
    """
    sizes, value = peer.params["sizes"], peer.value
    rates, link_of = link_rates(links)[0], links_of(links)
    n = links.value["gpus"]
    table = tables.Table(
        [
            "pair",
            *[(timing.format_bytes(size), "", ".1f") for size in sizes],
            ("best / rated", "", ".0%"),
        ],
        title=plotting.machine_title("Peer copies, one direction, GB/s", peer.machine, peer.live),
        caption="decimal GB/s, median of the samples; best / rated: the pair's best rate over its link's rated speed",
    )
    for p, ts in value.items():
        rate = rates.get(pair_ends(p))
        table.add(
            pair_name(p), *[t.gbps for t in ts], max(t.gbps for t in ts) / rate if rate else None
        )
    matrix = tables.Table(
        ["from", *[(f"to cuda:{j}", "", ".1f") for j in range(n)]],
        caption=f"GB/s, every pair at {timing.format_bytes(sizes[-1])}, one at a time",
    )
    for i in range(n):
        matrix.add(
            f"cuda:{i}", *[value[f"{i}->{j}"][-1].gbps if i != j else None for j in range(n)]
        )
    display(table, matrix)
    big = [
        t.gbps for ts in value.values() for size, t in zip(sizes, ts, strict=True) if size >= 2**28
    ]
    if big:
        print(f"slowest one-way result at 256 MiB and up, over all pairs: {min(big):.1f} GB/s")
    memory, peak = memory_gbps(same), _one_way_peak(peer)
    print(
        f"the same-GPU copy's plateau (its largest sizes), {memory:.0f} GB/s read + write,\n"
        f"is {memory / peak:.1f} times the best peer copy's {peak:.1f} GB/s"
    )
    series = {pair_name(p): (sizes, [t.gbps for t in ts]) for p, ts in value.items()}
    own = "cuda:0 -> cuda:0 (same GPU, read + write)"
    series[own] = (same.params["sizes"], [t.gbps for t in same.value])
    groups = {
        pair_name(p): f"GPU to GPU, {link_of.get(pair_ends(p), 'link unknown')}" for p in value
    }
    plotting.bandwidth_vs_size(
        series,
        title=plotting.machine_title("Copies between GPUs and within one", peer.machine, peer.live),
        ceiling_gbps=rates.get((0, 1)),
        ceiling_label=f"link {link_of.get((0, 1), '?')}, rated, one direction",
        groups=groups | {own: "same GPU (read + write)"},
    )
    plt.show()


def see_peer_bandwidth(peer: Run, same: Run, links: Run) -> claims.WhatWeSee:
    """How the one-way curves end (``claims.describe_curve``), the range of every pair's plateau
    (GB/s), the same-GPU plateau against the best peer copy, and the best copy as a share of the
    link's rated speed; checks that no copy reaches its link's rated speed.
    """
    sizes, value = peer.params["sizes"], peer.value
    shapes = {p: claims.describe_curve(sizes, [t.gbps for t in ts]) for p, ts in value.items()}
    flats = {p: _plateau([t.gbps for t in ts]) for p, ts in value.items()}
    first = next(iter(value))
    same_kind = sum(shape.kind == shapes[first].kind for shape in shapes.values())
    others = (
        ""
        if len(shapes) == 1
        else "; so does the other direction's curve"
        if len(shapes) == 2 == same_kind
        else f"; so do the other {len(shapes) - 1} curves"
        if same_kind == len(shapes)
        else f"; {same_kind - 1} of the other {len(shapes) - 1} curves {_PLURAL[shapes[first].kind]} too"
    )
    seen = claims.WhatWeSee(NOTEBOOK, peer)
    seen.say(f"The peer copy {pair_name(first)} {shapes[first].words}{others}.")
    low = min(flat[1] for flat in flats.values())
    high = max(flat[2] for flat in flats.values())
    memory, peak = memory_gbps(same), _one_way_peak(peer)
    seen.say(
        f"At the largest sizes every pair runs at {low:.0f} to {high:.0f} GB/s; the same-GPU copy's plateau, "
        f"{memory:.0f} GB/s, is {memory / peak:.1f} times the best peer copy's {peak:.0f} GB/s."
    )
    rates = link_rates(links)[0]
    ceiling = rates.get((0, 1))
    if ceiling:
        seen.say(
            f"The dashed line is the rated speed of the link cuda:0 - cuda:1, {ceiling:.0f} GB/s per direction: "
            f"the best peer copy reaches {peak / ceiling:.0%} of it."
        )
    else:
        seen.say(
            "No rated speed is known for the link cuda:0 - cuda:1, so the plot has no line for it."
        )
    rated = {
        pair: rate for pair, rate in rates.items() if rate and f"{pair[0]}->{pair[1]}" in value
    }
    if rated:
        best_share = max(
            max(t.gbps for t in value[f"{i}->{j}"]) / rate for (i, j), rate in rated.items()
        )
        seen.check(
            "no peer copy reaches its link's rated speed",
            best_share < 1,
            f"the best copy of any pair reaches {best_share:.0%} of its link's rated speed",
        )
    return seen


def one_way_ms(peer: Run, nbytes: int, src: int, dst: int) -> float:
    """Milliseconds to copy ``nbytes`` from cuda:``src`` to cuda:``dst`` at the one-way rate
    measured there at the largest size.
    """
    return nbytes / (peer.value[f"{src}->{dst}"][-1].gbps * 1e9) * 1e3


# ---------------------------------------------------------------- 5. both directions at once


def _duplex_shares(both: Run, peer: Run) -> dict[tuple[str, int], float]:
    """{(pair, size): total both ways / (one-way rate there + one-way rate back)}, where both were measured."""
    one_way_at = {
        p: dict(zip(peer.params["sizes"], ts, strict=True)) for p, ts in peer.value.items()
    }
    shares = {}
    for pair, ts in both.value.items():
        i, j = pair_ends(pair)
        for size, t in zip(both.params["sizes"], ts, strict=True):
            there, back = (
                one_way_at.get(f"{i}->{j}", {}).get(size),
                one_way_at.get(f"{j}->{i}", {}).get(size),
            )
            if there and back:
                shares[(pair, size)] = t.gbps / (there.gbps + back.gbps)
    return shares


def show_both_ways(both: Run, peer: Run, links: Run) -> None:
    """Shows the total rate of both directions at once for each pair and size (decimal GB/s,
    the bytes of both copies over the time for both), that total over the two one-way rates
    added, and plots both ways beside one way under the link's rated speed. Returns nothing.
    """
    sizes = both.params["sizes"]
    columns = [(timing.format_bytes(size), "", ".1f") for size in sizes]
    totals = tables.Table(
        ["pair", *columns],
        title=plotting.machine_title(
            "Both directions at once, total GB/s (size: each way)", both.machine, both.live
        ),
        caption="decimal GB/s: the bytes of both copies over the time for both",
    )
    shares_table = tables.Table(
        ["pair", *[(name, "", ".0%") for name, _, _ in columns]],
        caption="the total over the two one-way rates of section 4 added (not a bound: above "
        "100%, the two copies at once beat the two timed apart)",
    )
    shares = _duplex_shares(both, peer)
    for pair, ts in both.value.items():
        totals.add(pair_name(pair), *[t.gbps for t in ts])
        shares_table.add(pair_name(pair), *[shares.get((pair, size)) for size in sizes])
    display(totals, shares_table)
    rates, link_of = link_rates(links)[0], links_of(links)
    ceiling = rates.get((0, 1))
    series = {
        f"{pair_name(p)}, both at once (total)": (sizes, [t.gbps for t in ts])
        for p, ts in both.value.items()
    }
    series.update(
        {
            f"{pair_name(p)}, alone": (peer.params["sizes"], [t.gbps for t in peer.value[p]])
            for p in ("0->1", "1->0")
        }
    )
    plotting.bandwidth_vs_size(
        series,
        title=plotting.machine_title(
            "Peer copies: one way and both ways at once", both.machine, both.live
        ),
        ceiling_gbps=2 * ceiling if ceiling else None,
        ceiling_label=f"link {link_of.get((0, 1), '?')}, rated, both directions",
        groups={
            label: "both ways at once, total" if "<->" in label else "one way alone"
            for label in series
        },
    )
    plt.show()


def see_both_ways(both: Run, peer: Run, links: Run) -> claims.WhatWeSee:
    """The total both ways at the largest size as a share of the two one-way rates added (did
    the directions slow each other down?), the lowest share at any size, and the largest total
    against twice the link's rated speed.
    """
    sizes = both.params["sizes"]
    shares = _duplex_shares(both, peer)
    at_largest = [share for (_, size), share in shares.items() if size == sizes[-1]]
    (low_pair, low_size), lowest = min(shares.items(), key=lambda item: item[1])
    largest = both_ways_largest_gbps(both)
    ceiling = link_rates(links)[0].get((0, 1))
    seen = claims.WhatWeSee(NOTEBOOK, both)
    pairs = analysis.plural(len(at_largest), "pair")
    seen.say(
        f"At {timing.format_bytes(sizes[-1])} each way the total is "
        f"{span(f'{min(at_largest):.0%}', f'{max(at_largest):.0%}')} of the two one-way rates added, over "
        f"{pairs} of GPUs: the two directions "
        f"{'hardly slowed each other down' if min(at_largest) >= DUPLEX else 'slowed each other down'} "
        f"(at least {DUPLEX:.0%} counts as hardly). The lowest share at any size is {lowest:.0%}, "
        f"{pair_name(low_pair)} at {timing.format_bytes(low_size)} each way."
    )
    if ceiling:
        seen.say(
            f"The dashed line is twice the one-way rated speed, {2 * ceiling:.0f} GB/s; the largest total, "
            f"{largest:.0f} GB/s (cuda:0 <-> cuda:1), is {largest / (2 * ceiling):.0%} of it."
        )
    else:
        seen.say("No rated speed is known for the link, so the plot has no line for it.")
    above = {key: share for key, share in shares.items() if share > 1}
    if above:
        (pair, size), top = max(above.items(), key=lambda item: item[1])
        seen.say(
            f"{len(above)} share{'s are' if len(above) > 1 else ' is'} above 100% (the highest {top:.0%}, "
            f"{pair_name(pair)} at {timing.format_bytes(size)} each way): two copies sharing a link cannot "
            "beat the same two timed apart, so that is a measurement problem, not a result; the samples' "
            "spread, or launch time leaking into a one-way sample, is the likely cause."
        )
    _say_hold_leaks(
        seen,
        _hold_leaks(both) + _hold_leaks(peer),
        "and a share computed from it is no measure of the link",
    )
    return seen


def _say_hold_leaks(seen: claims.WhatWeSee, leaks: list[str], consequence: str) -> None:
    """Say where launch time leaked into a held sample (``_hold_leaks``), or that none did."""
    if leaks:
        seen.say(
            "Launch time leaked into "
            + "; ".join(leaks)
            + ": queueing the sample's copies took longer than "
            f"the spin kernel held the stream, so the GPU waited for the host, that rate is too low, {consequence}."
        )


def _hold_leaks(run: Run) -> list[str]:
    """Where a run's event-timed samples were queued behind a hold that did not cover their
    launches (``enqueue_us`` over ``hold_us``, as ``timing.cuda_events`` records them): one
    phrase each, "cuda:1 <-> cuda:3 at 2 MiB (2722 us of queueing, 2700 us of hold)"."""
    found = []
    value = (
        run.value if isinstance(run.value, dict) else {"0->0": run.value}
    )  # same_gpu_copy: one list
    for pair, ts in value.items():
        for size, t in zip(run.params["sizes"], ts, strict=True):
            queued, hold = t.extra.get("enqueue_us"), t.extra.get("hold_us")
            if queued is not None and hold and queued > hold:
                found.append(
                    f"{pair_name(pair)} at {timing.format_bytes(size)} ({queued:.0f} us of queueing, "
                    f"{hold:.0f} us of hold)"
                )
    return found


def both_ways_largest_gbps(both: Run) -> float:
    """The total rate of cuda:0 <-> cuda:1 both ways at once at the largest size, decimal GB/s."""
    return both.value["0<->1"][-1].gbps


# ---------------------------------------------------------------- 6. latency of small copies


def _latency_grid(latency: Run) -> tuple[int, list[tuple[int, int]]]:
    n = round(len(latency.value) ** 0.5)
    return n, ordered_pairs(n)


def show_latency(latency: Run) -> None:
    """Prints, for each size, the time per copy in microseconds from every GPU to every GPU (the
    diagonal: within one GPU), and the medians over the pairs at the smallest size. Returns nothing.
    """
    value, (n, pairs) = latency.value, _latency_grid(latency)
    for k, size in enumerate(latency.params["sizes"]):
        print(
            f"time per copy of {size} B, microseconds (row: from, column: to; median of the samples)"
        )
        print("        " + "".join(f"{'cuda:' + str(j):>10}" for j in range(n)))
        for i in range(n):
            print(
                f"  cuda:{i}"
                + "".join(f"{value[f'{i}->{j}'][k].median_us:>10.2f}" for j in range(n))
            )
        print()
    peer_us = statistics.median(value[f"{i}->{j}"][0].median_us for i, j in pairs)
    local_us = statistics.median(value[f"{i}->{i}"][0].median_us for i in range(n))
    print(
        f"smallest size: a peer copy takes {peer_us:.2f} us, a copy within one GPU {local_us:.2f} us "
        "(medians over the pairs)"
    )


def see_latency(latency: Run) -> claims.WhatWeSee:
    """The time of a tiny copy between GPUs against one within a GPU (us), how it changes with
    size, and whether the fastest peer copy is slower than the slowest local one.
    """
    value, sizes, (n, pairs) = latency.value, latency.params["sizes"], _latency_grid(latency)
    peer_by_size = [
        statistics.median(value[f"{i}->{j}"][k].median_us for i, j in pairs)
        for k in range(len(sizes))
    ]
    local_us = statistics.median(value[f"{i}->{i}"][0].median_us for i in range(n))
    slowest_local = max(
        value[f"{i}->{i}"][k].median_us for i in range(n) for k in range(len(sizes))
    )
    fastest_peer = min(value[f"{i}->{j}"][k].median_us for i, j in pairs for k in range(len(sizes)))
    seen = claims.WhatWeSee(NOTEBOOK, latency)
    seen.say(
        f"At {sizes[0]} B a copy between GPUs takes {peer_by_size[0]:.1f} us, {peer_by_size[0] / local_us:.1f} "
        f"times as long as a copy within one GPU ({local_us:.1f} us)."
    )
    if len(sizes) > 1:
        seen.say(
            f"From {sizes[0]} B to {sizes[-1]} B the peer copy's median time goes from {peer_by_size[0]:.1f} to "
            f"{peer_by_size[-1]:.1f} us: the size "
            f"{'hardly matters here' if abs(peer_by_size[-1] / peer_by_size[0] - 1) < 0.25 else 'matters already'}."
        )
    seen.say(
        f"The fastest peer copy of any pair and size ({fastest_peer:.1f} us) is "
        f"{'slower' if fastest_peer > slowest_local else 'not slower'} than the slowest copy within one GPU "
        f"({slowest_local:.1f} us)."
    )
    _say_hold_leaks(seen, _hold_leaks(latency), "and its time per copy too high")
    return seen
