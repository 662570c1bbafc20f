"""What notebook 05 shows of what joins its GPUs: which GPU reaches which and how fast their
links are rated (section 1, and ``link_facts`` for the claims table), and the copies of every
pair at once, set against those links. It also holds what the copy sections share (the
notebook's name, the pairs and their names, the link rates), so ``peer``, which re-exports its
public names, builds on it.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures
nothing. Tested on every recorded machine in tests/test_lesson_05.py.
"""

from __future__ import annotations

import re
import statistics
import textwrap

import matplotlib.pyplot as plt
from IPython.display import display

from .. import claims, hardware, plotting, records, tables, timing
from ..records import Run

NOTEBOOK = "05_device_to_device"

# NVLink's rate per link and per direction, in decimal GB/s, from NVIDIA's datasheets, used only
# where `nvidia-smi nvlink --status` does not say it: NVLink 1 (P100), 2 (V100), 3 (A100),
# 4 (H100, H200), 5 (B200).
NVLINK_DATASHEET_GBPS = {"6.0": 20.0, "7.0": 25.0, "8.0": 25.0, "9.0": 25.0, "10.0": 50.0}


# ---------------------------------------------------------------- small helpers


def ordered_pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(n) if i != j]


def pair_name(pair: str) -> str:
    """'0->1' -> 'cuda:0 -> cuda:1', '0<->1' -> 'cuda:0 <-> cuda:1'."""
    arrow = "<->" if "<->" in pair else "->"
    return "cuda:" + pair.replace(arrow, f" {arrow} cuda:")


def pair_ends(pair: str) -> tuple[int, int]:
    i, j = re.split(r"<?->", pair)
    return int(i), int(j)


def span(low: str, high: str) -> str:
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


def links_of(links: Run) -> dict[tuple[int, int], str]:
    return hardware.gpu_links(links.value["gpu_links"])  # nvidia-smi topo -m, read


def link_rates(links: Run) -> tuple[dict[tuple[int, int], float | None], list[str]]:
    """{(i, j): rated GB/s one direction or None}, and where the rates come from (distinct)."""
    value, link_of = links.value, links_of(links)
    rates: dict[tuple[int, int], float | None] = {}
    hows: list[str] = []
    for i, j in ordered_pairs(value["gpus"]):
        rates[(i, j)], how = _nvlink_gbps(
            link_of.get((i, j), "unknown"), value["nvlink_status"], value["capability"][i]
        )
        hows += [how] if how not in hows else []
    return rates, hows


def _pcie_limit(links: Run) -> float | None:
    pcie = links.value["pcie_gbps"]
    return min(pcie) if pcie and all(pcie) else None


def _all_peer(links: Run) -> bool:
    return all(links.value["peer_access"][i][j] for i, j in ordered_pairs(links.value["gpus"]))


def link_facts(links: Run) -> dict:
    """What the claims table needs of section 1: ``all_peer`` (every ordered pair has peer
    access), ``pcie_gbps`` (the raw one-way PCIe rate of the slower GPU, the most a copy staged
    through the host reaches, decimal GB/s, or None), ``rated_gbps`` (the rated one-way speed of
    the link cuda:0 - cuda:1, GB/s, or None when it is not NVLink) and ``link`` (its name in
    ``nvidia-smi topo -m``).
    """
    return {
        "all_peer": _all_peer(links),
        "pcie_gbps": _pcie_limit(links),
        "rated_gbps": link_rates(links)[0].get((0, 1)),
        "link": links_of(links).get((0, 1), "unknown"),
    }


# ---------------------------------------------------------------- 1. which GPU reaches which


def show_links(links: Run) -> None:
    """Prints the machine's report, shows a table of every ordered pair of GPUs (peer access,
    the link ``nvidia-smi topo -m`` names, its rated speed in decimal GB/s per direction) and
    says whether copies between them can go straight over the link, and the PCIe bound of a
    copy staged through the host (GB/s). Returns nothing.
    """
    value = links.value
    # the recorded machine, formatted as today (an older recording's text kept nvidia-smi's colour codes)
    print(hardware.report(links.header["machine"]), "\n")
    link_of, (rates, hows) = links_of(links), link_rates(links)
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
    for i, j in ordered_pairs(value["gpus"]):
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
    """
    value = links.value
    pairs, link_of = ordered_pairs(value["gpus"]), links_of(links)
    kinds = sorted({link_of.get(pair, "unknown") for pair in pairs})
    with_peer = sum(bool(value["peer_access"][i][j]) for i, j in pairs)
    seen = claims.WhatWeSee(NOTEBOOK, links)
    seen.say(
        f"{links.machine} has {value['gpus']} GPUs: peer access on {with_peer} of the {len(pairs)} ordered "
        f"pairs, joined by {', '.join(kinds)} (`nvidia-smi topo -m`)."
    )
    rated = sorted({round(rate) for rate in link_rates(links)[0].values() if rate})
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


# ---------------------------------------------------------------- every pair at once


def show_all_pairs(pairs: Run | None, peer: Run) -> None:
    """Shows each pair's rate while every pair copies (decimal GB/s), that rate over the pair's
    one-way rate of section 4 (where both come from one machine), what joins each pair, and bars
    of one pair alone, each pair at once and the total. With no run, prints why there is none.
    Returns nothing.
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
    n = 1 + max(pair_ends(p)[0] for p in at_once)
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
    pair_list = [pair_ends(p) for p in at_once]
    n = 1 + max(i for i, _ in pair_list)
    rates = [t.gbps for t in at_once.values()]
    seen = claims.WhatWeSee(NOTEBOOK, pairs)
    seen.say(
        f"With all {len(at_once)} ordered pairs of {n} GPUs copying {timing.format_bytes(size)} at once, each "
        f"pair ran at {span(f'{min(rates):.1f}', f'{max(rates):.1f}')} GB/s, "
        f"{span(f'{min(rates) / alone.gbps:.0%}', f'{max(rates) / alone.gbps:.0%}')} of the single pair's "
        f"{alone.gbps:.1f} GB/s measured by the same code; the machine moved {total.gbps:.0f} GB/s in total, "
        f"{total.gbps / alone.gbps:.1f} times the single pair's rate."
    )
    smi_links = (
        links_of(links) if links.machine == pairs.machine else {}
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
