"""Notebook 05, section 1 (which GPU reaches which, through what, rated how fast) and section 5's
"every pair at once", set against those links."""

from __future__ import annotations

import re
import statistics
import textwrap
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import claims, hardware, plotting, records, tables, timing
from ...records import Run
from . import NOTEBOOK, matrix, pair_ends, span

# NVLink's one-way GB/s per link from NVIDIA's datasheets, used only where `nvidia-smi nvlink
# --status` does not say it: NVLink 1 (P100), 2 (V100), 3 (A100), 4 (H100, H200), 5 (B200).
NVLINK_DATASHEET_GBPS = {"6.0": 20.0, "7.0": 25.0, "8.0": 25.0, "9.0": 25.0, "10.0": 50.0}
Pair = tuple[int, int]
NVLINK = "peer access both ways over NVLink (an NV# entry)"
SAME_NVLINKS = "NVML and nvidia-smi topo -m name the same NVLinks for every pair"
SHARED = "with several destinations per source, each pair at once runs below one pair alone and the total above it"


def nvlink_gbps(link: str, status: str | None, capability: str) -> tuple[float | None, str]:
    """One direction of an ``NV#`` link in GB/s (links x rate per link), and where it is from."""
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
    count = int(bonded.group(1))
    return count * per_link, f"{count} links x {per_link:.2f} GB/s ({source})"


@dataclass(frozen=True)
class Links:
    """Section 1's facts per ordered pair: peer access, the link ``nvidia-smi topo -m`` names, its
    rated one-way GB/s (None: not NVLink); the slower GPU's raw one-way PCIe GB/s (None: unknown)."""

    gpus: int
    peer: dict[Pair, bool]
    link: dict[Pair, str]
    rated: dict[Pair, float | None]
    rated_from: list[str]  # where the rates are from
    pcie_gbps: float | None

    @property
    def all_peer(self) -> bool:
        return all(self.peer.values())

    @property
    def rated_gbps(self) -> float | None:
        """The rated one-way GB/s of the link cuda:0 - cuda:1, None where not NVLink."""
        return self.rated.get((0, 1))

    @property
    def ceiling(self) -> tuple[float | None, str]:
        """What bounds a copy cuda:0 -> cuda:1 (GB/s one way, None: unknown) and its name."""
        link = self.link.get((0, 1), "?")
        if self.rated_gbps or link.startswith("NV") or not self.pcie_gbps:
            return self.rated_gbps, f"link {link}, rated"
        return self.pcie_gbps, f"link {link} (PCIe, not NVLink), raw PCIe rate"


def facts(links: Run) -> Links:
    value, n = links.value, links.value["gpus"]
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    found = hardware.gpu_links(value["gpu_links"])
    link = {pair: found.get(pair, "unknown") for pair in pairs}
    status, capability = value["nvlink_status"], value["capability"]
    rated = {p: nvlink_gbps(link[p], status, capability[p[0]]) for p in pairs}
    pcie, access = value["pcie_gbps"], value["peer_access"]
    return Links(
        n,
        {(i, j): bool(access[i][j]) for i, j in pairs},
        link,
        {pair: rate for pair, (rate, _) in rated.items()},
        list(dict.fromkeys(how for _, how in rated.values())),
        min(pcie) if pcie and all(pcie) else None,
    )


def show_links(links: Run) -> None:
    """The machine's report; every ordered pair's peer access, link and rated GB/s one way."""
    f = facts(links)
    # the recorded machine, formatted as today (an older recording kept nvidia-smi's colour codes)
    print(hardware.report(links.header["machine"]), "\n")
    rated = ("rated, one direction", "GB/s", ".0f")
    columns = ["pair", "peer access", "link (nvidia-smi topo -m)", rated]
    caption = "rated speed: " + "; ".join(f.rated_from)
    table = tables.Table(
        columns, title=plotting.titled("Peer access and links", links), caption=caption
    )
    for i, j in f.peer:
        table.add(f"cuda:{i} -> cuda:{j}", f.peer[(i, j)], f.link[(i, j)], f.rated[(i, j)])
    display(table)


def see_links(links: Run) -> claims.WhatWeSee:
    """Peer access (how copies travel), what joins the GPUs, the rated GB/s against PCIe's."""
    f = facts(links)
    with_peer, pcie = sum(f.peer.values()), f.pcie_gbps
    rated = sorted({round(rate) for rate in f.rated.values() if rate})
    straight = ": every copy between them below goes straight over the link, none is staged through host memory"
    than = (
        f", {min(rated or [0]) / pcie:.1f} times the {pcie:.1f} GB/s a copy staged through the host could reach at most"
        if pcie
        else ""
    )
    seen = claims.WhatWeSee(NOTEBOOK, links).say(
        f"{links.machine} has {f.gpus} GPUs: peer access on {with_peer} of the {len(f.peer)} ordered "
        f"pairs, joined by {', '.join(sorted(set(f.link.values())))} (`nvidia-smi topo -m`)"
        + (straight if f.all_peer else "")
        + ".",
        f"The links' rated speed is {' or '.join(map(str, rated))} GB/s per direction{than}."
        if rated
        else "No rated speed is known for these links, so the peer copies below are not measured "
        "against one (and their plots have no line for it).",
    )
    nvlink = all(link.startswith("NV") for link in f.link.values())
    joined = ", ".join(f"cuda:{i} -> cuda:{j}: {f.link[(i, j)]}" for i, j in f.peer)
    seen.check(NVLINK, f.all_peer and nvlink, joined)
    if not f.all_peer:
        seen.say(
            f"Without peer access on {len(f.peer) - with_peer} pairs, their copies are staged through "
            f"host memory ({f'at most {pcie:.1f} GB/s, ' if pcie else ''}the PCIe link crossed twice): "
            "what this machine shows below is that path, not a direct copy between GPUs."
        )
    return seen


def show_all_pairs(pairs: Run | None, peer: Run) -> None:
    """Each pair's GB/s while every pair copies, over its rate alone (section 4, one machine),
    what joins each pair, and bars of one pair alone, each at once, the total. No run: why."""
    if pairs is None:
        why = (
            "all_pairs_at_once is new and no machine has recorded it yet, so this section has "
            f"nothing to show here; {records.rerecord_command(None, [NOTEBOOK])}"
        )
        print(textwrap.fill(why, 100, break_long_words=False, break_on_hyphens=False))
        return
    value, size, same = pairs.value, pairs.params["nbytes"], peer.machine == pairs.machine
    n = 1 + max(pair_ends(p)[0] for p in value["together"])
    title = plotting.titled(f"Every pair copying {timing.format_bytes(size)} at once", pairs)
    rates = {p: t.gbps for p, t in value["together"].items()}
    each = "each pair's rate"
    shown = [matrix(n, rates, ".1f", f"{each} while every pair copies", title=title, unit="GB/s")]
    if same:  # section 4 is compared on one machine only
        lone = {p: dict(zip(peer.params["sizes"], ts, strict=True)) for p, ts in peer.value.items()}
        shares = {p: r / lone[p][size].gbps for p, r in rates.items() if size in lone.get(p, {})}
        alone = "the sentence below divides by cuda:0 -> cuda:1 alone, timed by this section's code"
        shown.append(
            matrix(n, shares, ".0%", f"{each} at once over its rate alone (section 4; {alone})")
        )
    known = value["topology"]["links"] or [["?"] * n] * n
    joins = {f"{i}->{j}": row[j] for i, row in enumerate(known) for j in range(n)}
    source = value["topology"]["source"] or "nowhere (no NVIDIA driver)"
    display(*shown, matrix(n, joins, str, f"what joins them, read from {source}"))
    if not same:
        print(
            f"(each pair's rate alone, section 4, is replayed from {peer.machine} and this from "
            f"{pairs.machine}: not compared)"
        )
    bars = {
        "cuda:0 -> cuda:1 alone": {"GB/s": value["alone"].gbps},
        "each pair, all at once (median)": {"GB/s": statistics.median(rates.values())},
        "all pairs at once, total": {"GB/s": value["total"].gbps},
    }
    plotting.grouped_bars(bars, title=title, ylabel="decimal GB/s")
    plt.show()


def see_all_pairs(pairs: Run | None, links: Run) -> claims.WhatWeSee | None:
    """Each pair's GB/s with every pair copying against one pair alone, the total, and whether
    NVML and ``nvidia-smi topo -m`` name the same NVLinks (one machine). None without a run."""
    if pairs is None:
        return None
    size, value = pairs.params["nbytes"], pairs.value
    at_once, alone, total, topology = (value[k] for k in ("together", "alone", "total", "topology"))
    ends = [pair_ends(p) for p in at_once]
    rates, gpus = [t.gbps for t in at_once.values()], 1 + max(i for i, _ in ends)
    low, high = min(rates), max(rates)
    seen = claims.WhatWeSee(NOTEBOOK, pairs).say(
        f"With all {len(at_once)} ordered pairs of {gpus} GPUs copying "
        f"{timing.format_bytes(size)} at once, each pair ran at {span(f'{low:.1f}', f'{high:.1f}')} "
        f"GB/s, {span(f'{low / alone.gbps:.0%}', f'{high / alone.gbps:.0%}')} of the single pair "
        f"cuda:0 -> cuda:1 alone, {alone.gbps:.1f} GB/s, timed by the same code. All the pairs' "
        f"bytes over the slowest pair's time give {total.gbps:.0f} GB/s in total, "
        f"{total.gbps / alone.gbps:.1f} times the single pair's rate (the {len(rates)} pairs' own "
        f"rates add up to {sum(rates):.0f} GB/s)."
    )
    if gpus > 2:  # a source with a second destination: the expectation's sharing can show
        measured = f"each pair {low:.1f} to {high:.1f} GB/s, the total {total.gbps:.0f} GB/s, one pair alone {alone.gbps:.1f} GB/s"
        seen.check(SHARED, high < alone.gbps < total.gbps, measured)
    smi = facts(links).link if links.machine == pairs.machine else {}  # section 1's topo -m
    if topology["source"] != "NVML" or not smi:
        source = topology["source"] or "no source (no NVIDIA driver)"
        return seen.say(f"The topology was read from {source} on {pairs.machine}.")
    differ = []
    for i, j in ends:
        a, b = topology["links"][i][j], str(smi.get((i, j)))
        if (a if a.startswith("NV") else "PCIe") != (b if b.startswith("NV") else "PCIe"):
            differ.append(f"cuda:{i}-cuda:{j}: NVML {a}, nvidia-smi {b}")
    seen.check(SAME_NVLINKS, not differ, "; ".join(differ) or f"{len(ends)} pairs agree")
    return seen
