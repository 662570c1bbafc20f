"""What notebook 05 shows of its copies: which GPUs reach which and how fast their links are
rated, the bandwidth of copies within one GPU and between two (one way, both ways at once, every
pair at once), the time of tiny copies, and the expected values of two exercises.

What the current device decides, the blog post's experiment and the events across GPUs are in
``peer_streams``; the claims table in ``peer_claims``. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested on every recorded machine in
tests/test_lesson_05.py.
"""

from __future__ import annotations

import re
import statistics
import textwrap

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, hardware, plotting, records, tables, timing
from ..records import Run

NOTEBOOK = "05_device_to_device"

# NVLink's rate per link and per direction, in decimal GB/s, from NVIDIA's datasheets, used only
# where `nvidia-smi nvlink --status` does not say it: NVLink 1 (P100), 2 (V100), 3 (A100),
# 4 (H100, H200), 5 (B200).
NVLINK_DATASHEET_GBPS = {"6.0": 20.0, "7.0": 25.0, "8.0": 25.0, "9.0": 25.0, "10.0": 50.0}
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


# ---------------------------------------------------------------- small helpers


def _pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(n) if i != j]


def _pair_name(pair: str) -> str:
    """'0->1' -> 'cuda:0 -> cuda:1', '0<->1' -> 'cuda:0 <-> cuda:1'."""
    arrow = "<->" if "<->" in pair else "->"
    return "cuda:" + pair.replace(arrow, f" {arrow} cuda:")


def _ends(pair: str) -> tuple[int, int]:
    i, j = re.split(r"<?->", pair)
    return int(i), int(j)


def _span(low: str, high: str) -> str:
    """'99%' when both ends print alike, else '98% to 99%'."""
    return low if low == high else f"{low} to {high}"


def _nvlink_gbps(link: str, status: str | None, capability: str) -> tuple[float | None, str]:
    """One direction of an ``NV#`` link in GB/s (links x rate per link), and where the rate is from."""
    bonded = re.fullmatch(r"NV(\d+)", link)
    if not bonded:
        return None, f"{link} is not NVLink"
    speeds = [float(s) for s in re.findall(r"Link \d+: ([\d.]+) GB/s", status or "")]
    if speeds:
        per_link, source = statistics.median(speeds), "nvidia-smi nvlink --status"
    elif capability in NVLINK_DATASHEET_GBPS:
        per_link, source = NVLINK_DATASHEET_GBPS[capability], "NVIDIA datasheet"
    else:
        return None, f"no NVLink rate known for compute capability {capability}"
    return int(
        bonded.group(1)
    ) * per_link, f"{bonded.group(1)} links x {per_link:.2f} GB/s ({source})"


def _link_of(links: Run) -> dict[tuple[int, int], str]:
    return hardware.gpu_links(links.value["gpu_links"])  # nvidia-smi topo -m, read


def _link_rates(links: Run) -> tuple[dict[tuple[int, int], float | None], list[str]]:
    """{(i, j): rated GB/s one direction or None}, and where the rates come from (distinct)."""
    value, link_of = links.value, _link_of(links)
    rates: dict[tuple[int, int], float | None] = {}
    hows: list[str] = []
    for i, j in _pairs(value["gpus"]):
        rates[(i, j)], how = _nvlink_gbps(
            link_of.get((i, j), "unknown"), value["nvlink_status"], value["capability"][i]
        )
        hows += [how] if how not in hows else []
    return rates, hows


def _pcie_limit(links: Run) -> float | None:
    pcie = links.value["pcie_gbps"]
    return min(pcie) if pcie and all(pcie) else None


def _all_peer(links: Run) -> bool:
    return all(links.value["peer_access"][i][j] for i, j in _pairs(links.value["gpus"]))


def link_facts(links: Run) -> dict:
    """What the claims table needs of section 1: ``all_peer`` (every ordered pair has peer
    access), ``pcie_gbps`` (the raw one-way PCIe rate of the slower GPU, the most a copy staged
    through the host reaches, decimal GB/s, or None), ``rated_gbps`` (the rated one-way speed of
    the link cuda:0 - cuda:1, GB/s, or None when it is not NVLink) and ``link`` (its name in
    ``nvidia-smi topo -m``).

    Used by peer_claims.claims_table.
    """
    return {
        "all_peer": _all_peer(links),
        "pcie_gbps": _pcie_limit(links),
        "rated_gbps": _link_rates(links)[0].get((0, 1)),
        "link": _link_of(links).get((0, 1), "unknown"),
    }


# ---------------------------------------------------------------- 1. which GPU reaches which


def show_links(links: Run) -> None:
    """Prints the machine's report, shows a table of every ordered pair of GPUs (peer access,
    the link ``nvidia-smi topo -m`` names, its rated speed in decimal GB/s per direction) and
    says whether copies between them can go straight over the link, and the PCIe bound of a
    copy staged through the host (GB/s). Returns nothing.

    Taught in 05_device_to_device.
    """
    value = links.value
    # the recorded machine, formatted as today (an older recording's text kept nvidia-smi's colour codes)
    print(hardware.report(links.header["machine"]), "\n")
    link_of, (rates, hows) = _link_of(links), _link_rates(links)
    table = tables.Table(
        [
            "pair",
            "peer access",
            "link (nvidia-smi topo -m)",
            ("rated, one direction", "GB/s", ".0f"),
        ],
        title=plotting.machine_title("Peer access and links", links.machine, links.live),
        caption="rated speed: " + "; ".join(hows),
    )
    for i, j in _pairs(value["gpus"]):
        table.add(
            f"cuda:{i} -> cuda:{j}",
            bool(value["peer_access"][i][j]),
            link_of.get((i, j), "unknown"),
            rates[(i, j)],
        )
    display(table)
    if _all_peer(links):
        print(
            f"Every pair of GPUs of {links.machine} has peer access: every copy between them below goes\n"
            "straight over the link between them, none is staged through host memory."
        )
    else:
        print("Some pairs have no peer access: copies between them are staged through host memory.")
    pcie = _pcie_limit(links)
    if pcie:
        print(
            f"A copy staged through host memory crosses PCIe twice: at most {pcie:.1f} GB/s\n"
            "(the slower GPU's PCIe link, raw, one direction)."
        )


def see_links(links: Run) -> claims.WhatWeSee:
    """How many GPUs, how many ordered pairs have peer access, what joins them, and the links'
    rated speed (GB/s per direction) against the PCIe bound of a copy staged through the host.

    Taught in 05_device_to_device.
    """
    value = links.value
    pairs, link_of = _pairs(value["gpus"]), _link_of(links)
    kinds = sorted({link_of.get(pair, "unknown") for pair in pairs})
    with_peer = sum(bool(value["peer_access"][i][j]) for i, j in pairs)
    seen = claims.WhatWeSee(NOTEBOOK, links)
    seen.say(
        f"{links.machine} has {value['gpus']} GPUs: peer access on {with_peer} of the {len(pairs)} ordered "
        f"pairs, joined by {', '.join(kinds)} (`nvidia-smi topo -m`)."
    )
    rated = sorted({round(rate) for rate in _link_rates(links)[0].values() if rate})
    pcie = _pcie_limit(links)
    if rated:
        seen.say(
            f"The links' rated speed is {' or '.join(str(r) for r in rated)} GB/s per direction"
            + (
                f", {min(rated) / pcie:.1f} times the {pcie:.1f} GB/s a copy staged through the host could "
                "reach at most."
                if pcie
                else "."
            )
        )
    else:
        seen.say(
            "No rated speed is known for these links, so the peer copies below are not measured "
            "against one (and their plots have no line for it)."
        )
    return seen


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

    Used by peer_claims.claims_table.
    """
    return _plateau([t.gbps for t in same.value])[3]


def show_same_gpu(same: Run) -> None:
    """Prints the same-GPU copy's rate at each size: decimal GB/s counting bytes read plus
    written, median and the slowest and fastest sample. Returns nothing.

    Taught in 05_device_to_device.
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

    Taught in 05_device_to_device.
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

    Taught in 05_device_to_device.
    """
    sizes, value = peer.params["sizes"], peer.value
    rates, link_of = _link_rates(links)[0], _link_of(links)
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
        rate = rates.get(_ends(p))
        table.add(
            _pair_name(p), *[t.gbps for t in ts], max(t.gbps for t in ts) / rate if rate else None
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
    series = {_pair_name(p): (sizes, [t.gbps for t in ts]) for p, ts in value.items()}
    own = "cuda:0 -> cuda:0 (same GPU, read + write)"
    series[own] = (same.params["sizes"], [t.gbps for t in same.value])
    groups = {_pair_name(p): f"GPU to GPU, {link_of.get(_ends(p), 'link unknown')}" for p in value}
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

    Taught in 05_device_to_device.
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
    seen.say(f"The peer copy {_pair_name(first)} {shapes[first].words}{others}.")
    low = min(flat[1] for flat in flats.values())
    high = max(flat[2] for flat in flats.values())
    memory, peak = memory_gbps(same), _one_way_peak(peer)
    seen.say(
        f"At the largest sizes every pair runs at {low:.0f} to {high:.0f} GB/s; the same-GPU copy's plateau, "
        f"{memory:.0f} GB/s, is {memory / peak:.1f} times the best peer copy's {peak:.0f} GB/s."
    )
    rates = _link_rates(links)[0]
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

    Taught in 05_device_to_device.
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
        i, j = _ends(pair)
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

    Taught in 05_device_to_device.
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
        totals.add(_pair_name(pair), *[t.gbps for t in ts])
        shares_table.add(_pair_name(pair), *[shares.get((pair, size)) for size in sizes])
    display(totals, shares_table)
    rates, link_of = _link_rates(links)[0], _link_of(links)
    ceiling = rates.get((0, 1))
    series = {
        f"{_pair_name(p)}, both at once (total)": (sizes, [t.gbps for t in ts])
        for p, ts in both.value.items()
    }
    series.update(
        {
            f"{_pair_name(p)}, alone": (peer.params["sizes"], [t.gbps for t in peer.value[p]])
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

    Taught in 05_device_to_device.
    """
    sizes = both.params["sizes"]
    shares = _duplex_shares(both, peer)
    at_largest = [share for (_, size), share in shares.items() if size == sizes[-1]]
    (low_pair, low_size), lowest = min(shares.items(), key=lambda item: item[1])
    largest = both_ways_largest_gbps(both)
    ceiling = _link_rates(links)[0].get((0, 1))
    seen = claims.WhatWeSee(NOTEBOOK, both)
    pairs = analysis.plural(len(at_largest), "pair")
    seen.say(
        f"At {timing.format_bytes(sizes[-1])} each way the total is "
        f"{_span(f'{min(at_largest):.0%}', f'{max(at_largest):.0%}')} of the two one-way rates added, over "
        f"{pairs} of GPUs: the two directions "
        f"{'hardly slowed each other down' if min(at_largest) >= DUPLEX else 'slowed each other down'} "
        f"(at least {DUPLEX:.0%} counts as hardly). The lowest share at any size is {lowest:.0%}, "
        f"{_pair_name(low_pair)} at {timing.format_bytes(low_size)} each way."
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
            f"{_pair_name(pair)} at {timing.format_bytes(size)} each way): two copies sharing a link cannot "
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
                    f"{_pair_name(pair)} at {timing.format_bytes(size)} ({queued:.0f} us of queueing, "
                    f"{hold:.0f} us of hold)"
                )
    return found


def both_ways_largest_gbps(both: Run) -> float:
    """The total rate of cuda:0 <-> cuda:1 both ways at once at the largest size, decimal GB/s.

    Taught in 05_device_to_device.
    """
    return both.value["0<->1"][-1].gbps


# ---------------------------------------------------------------- every pair at once


def show_all_pairs(pairs: Run | None, peer: Run) -> None:
    """Shows each pair's rate while every pair copies (decimal GB/s), that rate over the pair's
    one-way rate of section 4 (where both come from one machine), what joins each pair, and bars
    of one pair alone, each pair at once and the total. With no run, prints why there is none.
    Returns nothing.

    Taught in 05_device_to_device.
    """
    if pairs is None:
        print(
            textwrap.fill(
                "all_pairs_at_once is new and no machine has recorded it yet, so this section has nothing "
                f"to show here; {records.rerecord_command(None, [NOTEBOOK])}",
                100,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
        return
    value, size = pairs.value, pairs.params["nbytes"]
    at_once, topology = value["together"], value["topology"]
    n = 1 + max(_ends(p)[0] for p in at_once)
    single = (
        {p: dict(zip(peer.params["sizes"], ts, strict=True)) for p, ts in peer.value.items()}
        if peer.machine == pairs.machine
        else {}
    )  # section 4, same machine only
    title = plotting.machine_title(
        f"Every pair copying {timing.format_bytes(size)} at once", pairs.machine, pairs.live
    )
    rates = tables.Table(
        ["from", *[(f"to cuda:{j}", "GB/s", ".1f") for j in range(n)]],
        title=title,
        caption="each pair's rate while every pair copies",
    )
    shares = tables.Table(
        ["from", *[(f"to cuda:{j}", "", ".0%") for j in range(n)]],
        caption="each pair's rate at once over its rate alone (section 4)",
    )
    joins = tables.Table(
        ["from", *[(f"to cuda:{j}", "", str) for j in range(n)]],
        caption=f"what joins them, read from {topology['source'] or 'nowhere (no NVIDIA driver)'}",
    )
    for i in range(n):
        rates.add(f"cuda:{i}", *[at_once[f"{i}->{j}"].gbps if i != j else None for j in range(n)])
        shares.add(
            f"cuda:{i}",
            *[
                at_once[f"{i}->{j}"].gbps / single[f"{i}->{j}"][size].gbps
                if i != j and size in single.get(f"{i}->{j}", {})
                else None
                for j in range(n)
            ],
        )
        joins.add(
            f"cuda:{i}", *[topology["links"][i][j] if topology["links"] else "?" for j in range(n)]
        )
    if single:
        display(rates, shares, joins)
    else:
        display(rates, joins)
        print(
            f"(each pair's rate alone, section 4, is replayed from {peer.machine} and this from {pairs.machine}: "
            "not compared)"
        )
    plotting.grouped_bars(
        {
            "cuda:0 -> cuda:1 alone": {"GB/s": value["alone"].gbps},
            "each pair, all at once (median)": {
                "GB/s": statistics.median(t.gbps for t in at_once.values())
            },
            "all pairs at once, total": {"GB/s": value["total"].gbps},
        },
        title=title,
        ylabel="decimal GB/s",
    )
    plt.show()


def see_all_pairs(pairs: Run | None, links: Run) -> claims.WhatWeSee | None:
    """Each pair's rate with every pair copying against the single pair measured by the same
    code (GB/s and shares), the machine's total, and whether NVML and ``nvidia-smi topo -m`` name
    the same NVLinks (checked where both were read on one machine). None without a run.

    Taught in 05_device_to_device.
    """
    if pairs is None:
        return None
    value, size = pairs.value, pairs.params["nbytes"]
    at_once, alone, total, topology = (
        value["together"],
        value["alone"],
        value["total"],
        value["topology"],
    )
    pair_list = [_ends(p) for p in at_once]
    n = 1 + max(i for i, _ in pair_list)
    rates = [t.gbps for t in at_once.values()]
    seen = claims.WhatWeSee(NOTEBOOK, pairs)
    seen.say(
        f"With all {len(at_once)} ordered pairs of {n} GPUs copying {timing.format_bytes(size)} at once, each "
        f"pair ran at {_span(f'{min(rates):.1f}', f'{max(rates):.1f}')} GB/s, "
        f"{_span(f'{min(rates) / alone.gbps:.0%}', f'{max(rates) / alone.gbps:.0%}')} of the single pair's "
        f"{alone.gbps:.1f} GB/s measured by the same code; the machine moved {total.gbps:.0f} GB/s in total, "
        f"{total.gbps / alone.gbps:.1f} times the single pair's rate."
    )
    smi_links = (
        _link_of(links) if links.machine == pairs.machine else {}
    )  # section 1's nvidia-smi topo -m
    if topology["source"] == "NVML" and smi_links:
        named = {
            (i, j): (topology["links"][i][j], str(smi_links.get((i, j)))) for i, j in pair_list
        }
        differ = [
            f"cuda:{i}-cuda:{j}: NVML {a}, nvidia-smi {b}"
            for (i, j), (a, b) in named.items()
            if (a if a.startswith("NV") else "PCIe") != (b if b.startswith("NV") else "PCIe")
        ]
        seen.check(
            "NVML and nvidia-smi topo -m name the same NVLinks for every pair",
            not differ,
            "; ".join(differ) or f"{len(pair_list)} pairs agree",
        )
    else:
        seen.say(
            f"The topology was read from {topology['source'] or 'no source (no NVIDIA driver)'} on "
            f"{pairs.machine}."
        )
    return seen


# ---------------------------------------------------------------- 6. latency of small copies


def _latency_grid(latency: Run) -> tuple[int, list[tuple[int, int]]]:
    n = round(len(latency.value) ** 0.5)
    return n, _pairs(n)


def show_latency(latency: Run) -> None:
    """Prints, for each size, the time per copy in microseconds from every GPU to every GPU (the
    diagonal: within one GPU), and the medians over the pairs at the smallest size. Returns nothing.

    Taught in 05_device_to_device.
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

    Taught in 05_device_to_device.
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
