"""``datamove topo``: what joins each pair of GPUs (``NV<k>``: k NVLinks; a PCIe path as
``nvidia-smi topo -m`` names it), each GPU's PCIe link and NUMA node, each link's ceiling in GB/s.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from .. import hardware
from .cli_output import say

# One NVLink's rate per direction in decimal GB/s by generation (NVIDIA's datasheets): NVLink 3
# (A100) and 4 (H100, H200) 25 GB/s, NVLink 5 (B200, GB200) 50 GB/s. Matched in the GPU's name.
NVLINK_GBPS_PER_LINK = {"A100": 25.0, "H100": 25.0, "H200": 25.0, "B200": 50.0, "GB200": 50.0}


def nvlink_ceiling_gbps(link: str, gpu_name: str) -> float | None:
    """``"NV18"`` on an H100 -> 450.0 (GB/s one way); None for a PCIe path or an unknown GPU."""
    m = re.fullmatch(r"NV(\d+)", link)
    keys = [key for key in NVLINK_GBPS_PER_LINK if key in gpu_name]
    if not m or not keys:
        return None
    return int(m.group(1)) * NVLINK_GBPS_PER_LINK[max(keys, key=len)]


def topo_facts() -> dict[str, Any]:
    """Links, PCIe links, NUMA nodes and ceilings of every GPU (empty ``gpus`` without a driver)."""
    topo = hardware.gpu_topology()
    links = hardware.pcie_links() if hardware.driver_present() else []
    names = [gpu.get("name", "") for gpu in hardware.describe().get("gpus") or []]
    gpus = [
        {
            "index": link["index"],
            "name": names[link["index"]] if link["index"] < len(names) else "",
            "bus_id": link.get("bus_id"),
            "pcie": f"gen {link['gen_max']} x{link['width_max']}",
            "pcie_gbps": hardware.pcie_theoretical_gbps(link["gen_max"], link["width_max"]),
            "numa": hardware.gpu_numa_node(link["bus_id"]) if link.get("bus_id") else None,
        }
        for link in links
    ]
    n = len(topo["links"])
    ceilings = [
        [None if i == j else _pair_ceiling(topo["links"][i][j], gpus, i, j) for j in range(n)]
        for i in range(n)
    ]
    return {
        "source": topo["source"],
        "links": topo["links"],
        "ceilings_gbps": ceilings,
        "gpus": gpus,
    }


def _pair_ceiling(link: str, gpus: list[dict[str, Any]], i: int, j: int) -> float | None:
    name = gpus[i]["name"] if i < len(gpus) else ""
    nv = nvlink_ceiling_gbps(link, name)
    if nv is not None:
        return nv
    rates = [gpus[k]["pcie_gbps"] for k in (i, j) if k < len(gpus) and gpus[k]["pcie_gbps"]]
    return min(rates) if rates else None


def topo_text(facts: dict[str, Any]) -> str:
    """The matrix (link and ceiling per pair) and one line per GPU, as people read it."""
    n = len(facts["links"])
    lines = [
        f"GPU x GPU links ({facts['source']}), ceiling in GB/s one way:",
        "        " + "".join(f"{f'GPU{j}':>14}" for j in range(n)),
    ]
    for i in range(n):
        cells = []
        for j in range(n):
            c = facts["ceilings_gbps"][i][j]
            cells.append(f"{facts['links'][i][j] + ('' if c is None else f' {c:.0f}'):>14}")
        lines.append(f"{f'GPU{i}':<8}" + "".join(cells))
    lines.append("")
    for g in facts["gpus"]:
        raw = "" if g["pcie_gbps"] is None else f" ({g['pcie_gbps']:.1f} GB/s one way)"
        lines.append(
            f"GPU{g['index']} {g['name']}  {g['bus_id']}  PCIe {g['pcie']}{raw}  NUMA node "
            f"{'-' if g['numa'] is None else g['numa']}"
        )
    return "\n".join(lines)


def cmd_topo(args: argparse.Namespace) -> int:
    """``datamove topo``; on a machine without a GPU it says so and exits 0."""
    if not hardware.driver_present() or hardware.gpu_count() == 0:
        if args.json:
            say(json.dumps({"source": None, "links": [], "ceilings_gbps": [], "gpus": []}))
        else:
            say(
                "CPU only: no NVIDIA GPU here, so no links to show (the notebooks replay recorded machines)"
            )
        return 0
    facts = topo_facts()
    say(json.dumps(facts, indent=2) if args.json else topo_text(facts))
    return 0
