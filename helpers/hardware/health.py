"""The machine's health, as ``datamove doctor`` checks it: the driver, PCIe links now, what else
runs on each GPU, the locked-memory limit and free disk. NVML where installed, else nvidia-smi.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from typing import Any

from .smi import as_int, as_text, nvidia_smi, nvml_handles, nvml_module, smi_gpu_rows


def driver_present() -> bool:
    """Whether an NVIDIA driver answers here, whatever PyTorch sees."""
    return nvml_module() is not None or nvidia_smi("-L") is not None


def driver_version() -> str | None:
    """The NVIDIA driver's version (``"580.95.05"``); None without one."""
    nvml = nvml_module()
    with contextlib.suppress(Exception):  # NVML missing (None) or refusing: read nvidia-smi
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    match = re.search(r"Driver Version:\s*([\d.]+)", nvidia_smi() or "")
    return match.group(1) if match else None


def driver_cuda_version() -> str | None:
    """The newest CUDA version the installed driver supports (``"12.4"``); None without a driver."""
    nvml = nvml_module()
    with contextlib.suppress(Exception):  # NVML missing (None) or refusing: read nvidia-smi
        version = nvml.nvmlSystemGetCudaDriverVersion()  # e.g. 12040
        return f"{version // 1000}.{version % 1000 // 10}"
    match = re.search(r"CUDA Version:\s*(\d+\.\d+)", nvidia_smi() or "")
    return match.group(1) if match else None


def pcie_links() -> list[dict[str, Any]]:
    """Each GPU's PCIe link generation and width in lanes, now and at most (None where unknown).
    An idle GPU lowers its generation: read it while the GPU works."""
    nvml = nvml_module()
    try:
        return [
            {
                "index": i,
                "bus_id": as_text(nvml.nvmlDeviceGetPciInfo(h).busId),
                "gen_current": nvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                "gen_max": nvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                "width_current": nvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                "width_max": nvml.nvmlDeviceGetMaxPcieLinkWidth(h),
            }
            for i, h in nvml_handles(nvml)
        ]
    except Exception:  # noqa: BLE001 - NVML missing or refusing a query: ask nvidia-smi
        pass
    return [
        {
            "index": int(row["index"]),
            "bus_id": row["pci.bus_id"],
            "gen_current": as_int(row["pcie.link.gen.current"]),
            "gen_max": as_int(row["pcie.link.gen.max"]),
            "width_current": as_int(row["pcie.link.width.current"]),
            "width_max": as_int(row["pcie.link.width.max"]),
        }
        for row in smi_gpu_rows()
    ]


def gpu_activity() -> list[dict[str, Any]]:
    """What runs on each GPU: its busy percentage over the last sample period and the process ids
    of its compute processes (this one included)."""
    nvml = nvml_module()
    try:
        return [
            {
                "index": i,
                "utilization_pct": nvml.nvmlDeviceGetUtilizationRates(h).gpu,
                "pids": sorted(p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)),
            }
            for i, h in nvml_handles(nvml)
        ]
    except Exception:  # noqa: BLE001 - NVML missing or refusing a query: ask nvidia-smi
        pass
    text = (
        nvidia_smi("--query-gpu=index,utilization.gpu,pci.bus_id", "--format=csv,noheader,nounits")
        or ""
    )
    apps = nvidia_smi("--query-compute-apps=gpu_bus_id,pid", "--format=csv,noheader,nounits") or ""
    pids: dict[str, list[int]] = {}
    for line in apps.strip().splitlines():
        bus, _, pid = (v.strip() for v in line.partition(","))
        if pid.isdigit():
            pids.setdefault(bus, []).append(int(pid))
    found = []
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == 3 and values[0].isdigit():
            found.append(
                {
                    "index": int(values[0]),
                    "utilization_pct": as_int(values[1]),
                    "pids": sorted(pids.get(values[2], [])),
                }
            )
    return found


def pinned_memory_limit_bytes() -> int | None:
    """The locked-memory limit of this process (``ulimit -l``) in bytes; None when unlimited."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def free_disk_bytes(path: str | os.PathLike[str]) -> int:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"free_disk_bytes needs a folder path, got {type(path).__name__}")
    where = os.path.abspath(path)
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    return shutil.disk_usage(where).free
