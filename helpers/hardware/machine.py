"""What the machine is (``describe``: the dict every recording's header keeps), its short name,
the fastest rates it can move data at, and a table for people (``report``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
from typing import Any

import torch

from ..checks import check_count, is_whole
from .smi import TERMINAL_ESCAPES, as_int, nvidia_smi, smi_gpu_rows


def gpu_count() -> int:
    """Number of CUDA GPUs PyTorch can use here."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _ram_bytes() -> int | None:
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def _nccl_version() -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - CPU builds have no NCCL at all
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    return str(version)


def _gpu_links() -> str | None:
    """``nvidia-smi topo -m`` as text (NV18 = 18 NVLinks, PIX/PHB/SYS = through PCIe)."""
    text = nvidia_smi("topo", "-m")
    return text.strip() if text else None


def describe() -> dict[str, Any]:
    """The machine as a plain, JSON-ready dict: the environment header of every recording."""
    n = gpu_count()
    smi = {row["index"]: row for row in smi_gpu_rows()}
    gpus = []
    for i in range(n):
        props = torch.cuda.get_device_properties(i)
        row = smi.get(str(i), {})
        gpus.append(
            {
                "index": i,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "capability": f"{props.major}.{props.minor}",
                "sm_count": int(props.multi_processor_count),
                "l2_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
                "pci_bus_id": row.get("pci.bus_id"),
                "pcie_gen_current": as_int(row.get("pcie.link.gen.current")),
                "pcie_gen_max": as_int(row.get("pcie.link.gen.max")),
                "pcie_width_current": as_int(row.get("pcie.link.width.current")),
                "pcie_width_max": as_int(row.get("pcie.link.width.max")),
            }
        )
    driver = next(iter(smi.values()), {}).get("driver_version")
    info = {
        "gpus": gpus,
        "peer_access": peer_access(),
        "gpu_links": _gpu_links() if n > 1 else None,
        "cpu": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_bytes": _ram_bytes(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": _nccl_version() if n else None,
        "driver": driver,
    }
    info["machine"] = machine_name(info)
    return info


def peer_access() -> list[list[bool]]:
    """``[i][j]``: can GPU i read and write GPU j's memory directly (True on the diagonal)."""
    n = gpu_count()
    return [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(n)] for i in range(n)]


def machine_name(info: dict[str, Any]) -> str:
    """A short folder-safe name for a machine: ``2xNVIDIA-H200``, ``cpu-only``."""
    _check_info(info, "machine_name")
    gpus = info.get("gpus") or []
    if not gpus:
        return "cpu-only"
    names = sorted({g["name"] for g in gpus})
    label = "+".join(re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") for name in names)
    return f"{len(gpus)}x{label}"


def gpu_name(info: dict[str, Any]) -> str | None:
    """The name of a machine's first GPU, or None."""
    _check_info(info, "gpu_name")
    gpus = info.get("gpus") or []
    return gpus[0]["name"] if gpus else None


def _check_info(info: Any, what: str) -> None:
    if not isinstance(info, dict):
        raise TypeError(
            f"{what} reads a machine's description, the dict hardware.describe() returns (or a "
            f"recording's header['machine']), got {type(info).__name__}"
        )


def _gib(nbytes: int | None) -> str:
    return "?" if nbytes is None else f"{nbytes / 2**30:.1f} GiB"


def pcie_theoretical_gbps(gen: int | None, width: int | None) -> float | None:
    """The PCIe link's raw one-way rate in decimal GB/s; copies reach about 80-90% of it."""
    per_lane_gts = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
    if gen is None or width is None:
        return None  # not reported by nvidia-smi
    if gen not in per_lane_gts:
        raise ValueError(f"gen is a PCIe generation 1-6 (or None when unknown), got {gen!r}")
    if not is_whole(width) or width not in (1, 2, 4, 8, 16, 32):
        raise ValueError(
            f"width is a PCIe link width of 1, 2, 4, 8, 16 or 32 lanes (or None), got {width!r}"
        )
    encoding = 0.8 if gen <= 2 else 128 / 130
    return per_lane_gts[gen] * encoding * width / 8


# Memory bandwidth of each GPU model in decimal GB/s, from NVIDIA's datasheets; matched by the
# longest key found in the GPU's name. Only recordings' plausibility checks use it.
MEMORY_GBPS = {
    "H100 80GB HBM3": 3350.0,
    "H100 PCIe": 2000.0,
    "H100 NVL": 3900.0,
    "H200": 4800.0,
    "A100-SXM4-80GB": 2039.0,
    "A100-SXM4-40GB": 1555.0,
    "A100 80GB PCIe": 1935.0,
    "L40S": 864.0,
    "B200": 8000.0,
}


# Above every GPU memory NVIDIA shipped by 2026: the bound for a GPU missing from MEMORY_GBPS.
UNKNOWN_GPU_CEILING_GBPS = 10_000.0


def ceiling_gbps(info: dict[str, Any]) -> float:
    """The fastest rate anything on a machine can move data, in decimal GB/s: its GPUs' memory
    bandwidth (``MEMORY_GBPS``), which no PCIe or NVLink copy exceeds."""
    _check_info(info, "ceiling_gbps")
    rates = []
    for gpu in info.get("gpus") or []:
        keys = [key for key in MEMORY_GBPS if key in gpu.get("name", "")]
        rates.append(MEMORY_GBPS[max(keys, key=len)] if keys else UNKNOWN_GPU_CEILING_GBPS)
    return max(rates, default=UNKNOWN_GPU_CEILING_GBPS)


# Where a header does not say its GPUs' L2 size (recordings before it did): above any GPU's
# L2 or last-level cache by 2026 (H100 50 MB, H200 60 MB, as PyTorch reports them), so a copy
# that might have run from cache is never held to the memory's rate.
UNKNOWN_CACHE_BYTES = 256 * 2**20
# Bounds on what SMs can move through their caches, generous so that only the impossible is
# refused: one 128-byte cache line per SM per clock, at 3 GHz (above every GPU's boost clock).
SM_BYTES_PER_CLOCK = 128
MAX_CLOCK_HZ = 3.0e9


def cache_bytes(info: dict[str, Any]) -> int:
    """The smallest L2 cache of a machine's GPUs in bytes, or ``UNKNOWN_CACHE_BYTES``."""
    _check_info(info, "cache_bytes")
    sizes = [gpu.get("l2_bytes") for gpu in info.get("gpus") or []]
    return min(sizes) if sizes and all(sizes) else UNKNOWN_CACHE_BYTES


def cache_ceiling_gbps(info: dict[str, Any]) -> float:
    """The most a machine's GPUs could move through their caches, in decimal GB/s (50,688 for an
    H100's 132 SMs)."""
    _check_info(info, "cache_ceiling_gbps")
    sms = [gpu.get("sm_count") or 0 for gpu in info.get("gpus") or []]
    if not sms or not all(sms):
        return 10 * UNKNOWN_GPU_CEILING_GBPS
    return max(sms) * SM_BYTES_PER_CLOCK * MAX_CLOCK_HZ / 1e9


def report(info: dict[str, Any] | None = None) -> str:
    """A plain-text table of a machine (this one by default)."""
    info = describe() if info is None else info
    lines = [
        f"machine        {info.get('machine')}",
        f"cpu            {info.get('cpu')} ({info.get('cpu_cores')} cores), RAM {_gib(info.get('ram_bytes'))}",
        f"python / torch {info.get('python')} / {info.get('torch')}",
        f"cuda / nccl    {info.get('cuda') or '-'} / {info.get('nccl') or '-'}",
        f"driver         {info.get('driver') or '-'}",
    ]
    gpus = info.get("gpus") or []
    if not gpus:
        lines.append("gpus           none (CUDA not available): GPU experiments replay recordings")
    for g in gpus:
        link = "PCIe link unknown"
        if g.get("pcie_gen_max"):
            peak = pcie_theoretical_gbps(g.get("pcie_gen_max"), g.get("pcie_width_max"))
            link = (
                f"PCIe gen {g.get('pcie_gen_current')}/{g.get('pcie_gen_max')} "
                f"x{g.get('pcie_width_current')}/{g.get('pcie_width_max')} (now/max"
                + (f"; max {peak:.1f} GB/s raw per direction)" if peak else ")")
            )
        lines.append(
            f"gpu {g['index']}          {g['name']}, {_gib(g['memory_bytes'])}, sm_{g['capability'].replace('.', '')}, "
            f"{g['sm_count']} SMs, {link}"
        )
    peer = info.get("peer_access") or []
    if len(peer) > 1:
        pairs = (
            f"{i}->{j}:{'yes' if can else 'no'}"
            for i, row in enumerate(peer)
            for j, can in enumerate(row)
            if i != j
        )
        lines.append("peer access    " + "  ".join(pairs))
    if info.get("gpu_links"):
        lines.append(
            "gpu links (nvidia-smi topo -m; NV# = # NVLinks, PIX/PXB/PHB/NODE/SYS = through PCIe):"
        )
        lines.extend("    " + row for row in _topology_matrix(info["gpu_links"]))
    return "\n".join(lines)


def _topology_matrix(topo: str) -> list[str]:
    """The matrix rows of ``nvidia-smi topo -m``, without its legend or colour codes."""
    rows = []
    for line in topo.splitlines():
        line = TERMINAL_ESCAPES.sub("", line).expandtabs().rstrip()
        if line.strip().startswith("Legend"):
            break
        if line.strip():
            rows.append(line)
    return rows


def copy_engine_count(device: int = 0) -> int | None:
    """The number of copy (DMA) engines the CUDA driver reports for GPU ``device``, or None.

    ``CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT`` (40), which torch's device properties lack."""
    import ctypes

    device = check_count(device, "device", 0)
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    handle, value = ctypes.c_int(), ctypes.c_int()
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGet(ctypes.byref(handle), device) != 0:
        return None
    if libcuda.cuDeviceGetAttribute(ctypes.byref(value), 40, handle) != 0:
        return None
    return value.value
