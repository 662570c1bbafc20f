"""What joins what: the links between GPUs, each GPU's NUMA node and its CPUs, this process's CPUs."""

from __future__ import annotations

import os
import re
from typing import Any

from ..checks import check_count
from .smi import TERMINAL_ESCAPES, as_text, nvidia_smi, nvml_module


def gpu_links(topo: str | None) -> dict[tuple[int, int], str]:
    """``{(i, j): 'NV18' | 'PIX' | 'SYS' | ...}`` for every ordered pair of GPUs, read from
    ``nvidia-smi topo -m``, whose header row is underlined with terminal escapes."""
    if topo is not None and not isinstance(topo, str):
        raise TypeError(
            f"gpu_links reads the text of `nvidia-smi topo -m` (or None), got {type(topo).__name__}"
        )
    lines = [TERMINAL_ESCAPES.sub("", line) for line in (topo or "").splitlines()]
    start = next((n for n, line in enumerate(lines) if "GPU0" in line.split("\t")[:2]), None)
    if start is None:
        return {}
    columns = [field.strip() for field in lines[start].split("\t") if field.strip()]
    links: dict[tuple[int, int], str] = {}
    for line in lines[start + 1 :]:
        row = re.match(r"GPU(\d+)\t", line)
        if not row:
            continue
        for column, cell in zip(columns, (f.strip() for f in line.split("\t")[1:]), strict=False):
            other = re.fullmatch(r"GPU(\d+)", column)
            if other and other.group(1) != row.group(1):
                links[(int(row.group(1)), int(other.group(1)))] = cell
    return links


def _nvml_link_counts(nvml: Any) -> list[list[int]]:
    """``[i][j]``: NVLinks up from GPU i to GPU j; through an NVSwitch, the fewer of the two GPUs'
    links to switches (what ``nvidia-smi topo -m`` prints)."""
    n = nvml.nvmlDeviceGetCount()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    index_of = {
        as_text(nvml.nvmlDeviceGetPciInfo(h).busId).lower(): i for i, h in enumerate(handles)
    }
    direct = [[0] * n for _ in range(n)]
    to_switch = [0] * n
    for i, h in enumerate(handles):
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                if nvml.nvmlDeviceGetNvLinkState(h, link) != nvml.NVML_FEATURE_ENABLED:
                    continue
                kind = nvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
                remote = as_text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId).lower()
            except nvml.NVMLError:
                continue  # a link this GPU does not have
            if kind == nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                to_switch[i] += 1
            elif remote in index_of:
                direct[i][index_of[remote]] += 1
    return [
        [0 if i == j else direct[i][j] + min(to_switch[i], to_switch[j]) for j in range(n)]
        for i in range(n)
    ]


def gpu_topology() -> dict[str, Any]:
    """What joins each pair of GPUs: ``{"source": "NVML" | "nvidia-smi topo -m" | None, "links"}``,
    ``links[i][j]`` ``"NV<k>"`` (k NVLinks), a PCIe path (``PIX`` ... ``SYS``; NVML: ``PCIe``) or ``"X"``."""
    nvml = nvml_module()
    if nvml is not None:
        try:
            counts = _nvml_link_counts(nvml)
        except nvml.NVMLError:
            counts = None
        if counts is not None:
            return {
                "source": "NVML",
                "links": [
                    ["X" if i == j else f"NV{k}" if k else "PCIe" for j, k in enumerate(row)]
                    for i, row in enumerate(counts)
                ],
            }
    pairs = gpu_links(nvidia_smi("topo", "-m"))
    if not pairs:
        return {"source": None, "links": []}
    n = max(max(pair) for pair in pairs) + 1
    return {
        "source": "nvidia-smi topo -m",
        "links": [
            ["X" if i == j else pairs.get((i, j), "unknown") for j in range(n)] for i in range(n)
        ],
    }


def parse_cpulist(text: str) -> set[int]:
    """The CPUs of a Linux CPU list such as ``"0-3,8,10-11"``."""
    if not isinstance(text, str):
        raise TypeError(
            f"parse_cpulist reads a CPU list such as '0-3,8', got {type(text).__name__}"
        )
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(
                f"{part!r} in the CPU list {text!r} is not N or N-M; pass e.g. '0-3,8'"
            )
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def gpu_numa_node(bus_id: str, sys_root: str = "/sys") -> int | None:
    """The NUMA node of the GPU at PCI bus id ``00000000:18:00.0``; None where Linux does not say."""
    if not isinstance(bus_id, str) or bus_id.count(":") != 2:
        raise ValueError(f"bus_id is a PCI bus id such as '00000000:18:00.0', got {bus_id!r}")
    domain, rest = bus_id.split(":", 1)
    try:
        path = os.path.join(
            sys_root, "bus", "pci", "devices", f"{int(domain, 16):04x}:{rest.lower()}", "numa_node"
        )
        with open(path) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def numa_node_cpus(node: int, sys_root: str = "/sys") -> set[int]:
    """The CPUs of NUMA node ``node`` (empty where Linux does not say)."""
    node = check_count(node, "node", 0)
    path = os.path.join(sys_root, "devices", "system", "node", f"node{node}", "cpulist")
    try:
        with open(path) as f:
            return parse_cpulist(f.read())
    except OSError:
        return set()


def cpu_affinity() -> set[int]:
    """The CPUs this process may run on (``taskset``/``numactl`` narrow it)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))
