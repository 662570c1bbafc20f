"""What is here: GPUs, their memory and PCIe link, peer access between GPUs, CPU, RAM, versions.

``describe()`` returns a plain dict (it is the environment header of every recording);
``report()`` turns such a dict into a table for people.

Taught in 00_start_here.
"""

from __future__ import annotations

import gc
import os
import platform
import re
import shutil
import subprocess
from typing import Any

import torch

# The shared argument checks live in helpers/checks.py; distributed.py and cli.py still call
# them as hardware.check_count / hardware.check_size (issue 26 moves those modules to checks).
from .checks import check_count, is_whole
from .checks import check_size as check_size


def gpu_count() -> int:
    """Number of CUDA GPUs PyTorch can use here (0 on a machine without CUDA).

    Used by the lessons (helpers/lessons/).
    """
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _nvidia_smi(*args: str) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _smi_gpu_rows() -> list[dict[str, str]]:
    fields = [
        "index",
        "driver_version",
        "pcie.link.gen.current",
        "pcie.link.gen.max",
        "pcie.link.width.current",
        "pcie.link.width.max",
        "pci.bus_id",
    ]
    text = _nvidia_smi(f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits")
    if not text:
        return []
    rows = []
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values, strict=True)))
    return rows


def _as_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
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
    text = _nvidia_smi("topo", "-m")
    return text.strip() if text else None


_TERMINAL_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def gpu_links(topo: str | None) -> dict[tuple[int, int], str]:
    """``{(i, j): 'NV18' | 'PIX' | 'SYS' | ...}`` for every ordered pair of GPUs, read from
    ``nvidia-smi topo -m`` (as ``describe()['gpu_links']`` keeps it); empty when unknown.

    The table's columns are tab-separated; terminal escapes (nvidia-smi underlines the header
    row with ``ESC[4m``, even when its output is not a terminal) are dropped first.

    Used by the lessons (helpers/lessons/).
    """
    if topo is not None and not isinstance(topo, str):
        raise TypeError(
            f"gpu_links reads the text of `nvidia-smi topo -m` (or None), got {type(topo).__name__}"
        )
    lines = [_TERMINAL_ESCAPES.sub("", line) for line in (topo or "").splitlines()]
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


def describe() -> dict[str, Any]:
    """The machine as a plain, JSON-ready dict: the environment header of every recording.

    Keys: ``machine`` (a short name such as ``1xNVIDIA-H100-80GB-HBM3`` or ``cpu-only``),
    ``gpus`` (one dict per GPU: name, memory_bytes, capability, sm_count, pcie link),
    ``peer_access`` (matrix of bools), ``gpu_links`` (``nvidia-smi topo -m``), ``cpu``,
    ``cpu_cores``, ``ram_bytes``, ``python``, ``torch``, ``cuda``, ``nccl``, ``driver``.

    Taught in 00_start_here.
    """
    n = gpu_count()
    smi = {row["index"]: row for row in _smi_gpu_rows()}
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
                "pci_bus_id": row.get("pci.bus_id"),
                "pcie_gen_current": _as_int(row.get("pcie.link.gen.current")),
                "pcie_gen_max": _as_int(row.get("pcie.link.gen.max")),
                "pcie_width_current": _as_int(row.get("pcie.link.width.current")),
                "pcie_width_max": _as_int(row.get("pcie.link.width.max")),
            }
        )
    peer = peer_access()
    driver = next(iter(smi.values()), {}).get("driver_version")
    info = {
        "gpus": gpus,
        "peer_access": peer,
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


def machine_name(info: dict[str, Any]) -> str:
    """A short folder-safe name for a machine, from ``describe()``: ``2xNVIDIA-H200``, ``cpu-only``.

    Used by hardware.describe (its ``machine`` key).
    """
    _check_info(info, "machine_name")
    gpus = info.get("gpus") or []
    if not gpus:
        return "cpu-only"
    names = sorted({g["name"] for g in gpus})
    label = "+".join(re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") for name in names)
    return f"{len(gpus)}x{label}"


def gpu_name(info: dict[str, Any]) -> str | None:
    """The name of a machine's first GPU, from ``describe()`` or a recording's header; None
    without GPUs.

    Used by records.index_row and records.Run."""
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
    """The PCIe link's raw one-way rate in decimal GB/s (gen 3: 8 GT/s/lane with 128b/130b ...).

    Real copies reach about 80-90% of it: packet headers and flow control take the rest.

    Taught in 05_device_to_device.
    """
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
    """The fastest rate anything on a machine (``describe()`` or a recording's header) can move
    data, in decimal GB/s: its GPUs' memory bandwidth, which a same-GPU copy counting read plus
    write approaches, and which no PCIe or NVLink copy exceeds. A GPU not in ``MEMORY_GBPS``
    gets ``UNKNOWN_GPU_CEILING_GBPS``, and so does a machine without GPUs.

    Used by records.validate_recording (recordings are checked against it when they are
    unpacked) and the command line (datamove).
    """
    _check_info(info, "ceiling_gbps")
    rates = []
    for gpu in info.get("gpus") or []:
        keys = [key for key in MEMORY_GBPS if key in gpu.get("name", "")]
        rates.append(MEMORY_GBPS[max(keys, key=len)] if keys else UNKNOWN_GPU_CEILING_GBPS)
    return max(rates, default=UNKNOWN_GPU_CEILING_GBPS)


def report(info: dict[str, Any] | None = None) -> str:
    """A plain-text table of a machine (this one by default, or a recording's header).

    Taught in 00_start_here.
    """
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
        lines.append(
            "peer access    "
            + "  ".join(
                f"{i}->{j}:{'yes' if peer[i][j] else 'no'}"
                for i in range(len(peer))
                for j in range(len(peer))
                if i != j
            )
        )
    if info.get("gpu_links"):
        lines.append(
            "gpu links (nvidia-smi topo -m; NV# = # NVLinks, PIX/PXB/PHB/NODE/SYS = through PCIe):"
        )
        lines.extend("    " + row for row in _topology_matrix(info["gpu_links"]))
    return "\n".join(lines)


def _topology_matrix(topo: str) -> list[str]:
    """The matrix rows of ``nvidia-smi topo -m``, without its legend or terminal colour codes."""
    rows = []
    for line in topo.splitlines():
        line = _TERMINAL_ESCAPES.sub("", line).expandtabs().rstrip()
        if line.strip().startswith("Legend"):
            break
        if line.strip():
            rows.append(line)
    return rows


def memory_in_use() -> dict[str, int]:
    """Bytes held now: ``gpu<i>_allocated`` / ``gpu<i>_reserved`` by PyTorch's caching allocator
    on each GPU, and ``pinned_host`` held by its caching host (pinned) allocator.

    Used by hardware.free_memory and records.run_or_replay (before each live experiment).
    """
    used: dict[str, int] = {}
    for i in range(gpu_count()):
        used[f"gpu{i}_allocated"] = int(torch.cuda.memory_allocated(i))
        used[f"gpu{i}_reserved"] = int(torch.cuda.memory_reserved(i))
    if gpu_count():
        stats = torch.cuda.host_memory_stats()
        used["pinned_host"] = int(
            stats.get("allocated_bytes.current", stats.get("reserved_bytes.current", 0))
        )
    return used


def free_memory(baseline: dict[str, int] | None = None) -> dict[str, int]:
    """Give cached GPU and pinned host memory back to the driver; return ``memory_in_use()`` after.

    Called after every live experiment, so one experiment's memory never burdens the next. Memory
    that only a reference cycle still holds is freed by a garbage collection (``gc.collect``),
    which takes about 0.15 s in a kernel that has imported torch and matplotlib: it runs only
    when, once the caches are emptied, more memory is in use than ``baseline`` (a
    ``memory_in_use()`` taken before the experiment; always, without one).

    Used by records.run_or_replay.
    """
    _empty_caches()
    used = memory_in_use()
    if baseline is None or any(
        used[key] > baseline.get(key, 0) for key in used if not key.endswith("_reserved")
    ):
        gc.collect()
        _empty_caches()
        used = memory_in_use()
    return used


def _empty_caches() -> None:
    """Wait for every GPU, then return the cached device and pinned host blocks to the driver."""
    if gpu_count():
        for i in range(gpu_count()):
            torch.cuda.synchronize(i)
        torch.cuda.empty_cache()
        torch._C._host_emptyCache()


# ---------------------------------------------------------------- machine health (datamove doctor)
# Facts the preflight check reads: NVML (nvidia-ml-py) where it is installed, else nvidia-smi.


def _nvml() -> Any:
    """The ``pynvml`` module, initialised; None where nvidia-ml-py is missing or NVML cannot start."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - not installed, no driver, or no permission: use nvidia-smi
        return None
    return pynvml


def _nvml_handles(nvml: Any | None) -> list[tuple[int, Any]]:
    """``(index, handle)`` of every GPU NVML sees; raises where NVML is missing (None)."""
    if nvml is None:
        raise LookupError("no NVML here")
    return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def pcie_links() -> list[dict[str, Any]]:
    """Each GPU's PCIe link now and at most: ``[{"index", "bus_id", "gen_current", "gen_max",
    "width_current", "width_max"}]`` (generations 1-6, widths in lanes; None where unknown);
    empty without an NVIDIA driver. GPUs lower the generation when idle to save power, so read
    it while the GPU works.

    Used by the command line (datamove).
    """
    nvml = _nvml()
    try:
        return [
            {
                "index": i,
                "bus_id": _text(nvml.nvmlDeviceGetPciInfo(h).busId),
                "gen_current": nvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                "gen_max": nvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                "width_current": nvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                "width_max": nvml.nvmlDeviceGetMaxPcieLinkWidth(h),
            }
            for i, h in _nvml_handles(nvml)
        ]
    except Exception:  # noqa: BLE001 - NVML missing or refusing a query: ask nvidia-smi
        pass
    return [
        {
            "index": int(row["index"]),
            "bus_id": row["pci.bus_id"],
            "gen_current": _as_int(row["pcie.link.gen.current"]),
            "gen_max": _as_int(row["pcie.link.gen.max"]),
            "width_current": _as_int(row["pcie.link.width.current"]),
            "width_max": _as_int(row["pcie.link.width.max"]),
        }
        for row in _smi_gpu_rows()
    ]


def parse_cpulist(text: str) -> set[int]:
    """The CPUs of a Linux CPU list such as ``"0-3,8,10-11"`` (as /sys writes them) as a set.

    Used by hardware.numa_node_cpus.
    """
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
    """The NUMA node a GPU is attached to, from its PCI bus id (``00000000:18:00.0``, as NVML and
    nvidia-smi write it); None on a machine with one node or where Linux does not say.

    Used by the command line (datamove).
    """
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
    """The CPUs of NUMA node ``node`` (empty where Linux does not say).

    Used by the command line (datamove).
    """
    node = check_count(node, "node", 0)
    try:
        with open(
            os.path.join(sys_root, "devices", "system", "node", f"node{node}", "cpulist")
        ) as f:
            return parse_cpulist(f.read())
    except OSError:
        return set()


def cpu_affinity() -> set[int]:
    """The CPUs this process may run on (``taskset``/``numactl`` narrow it).

    Used by the command line (datamove).
    """
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def gpu_activity() -> list[dict[str, Any]]:
    """What else runs on each GPU: ``[{"index", "utilization_pct", "pids"}]``, the GPU's busy
    percentage over the last sample period and the process ids of the compute processes on it
    (this process included); empty without an NVIDIA driver.

    Used by the command line (datamove).
    """
    nvml = _nvml()
    try:
        return [
            {
                "index": i,
                "utilization_pct": nvml.nvmlDeviceGetUtilizationRates(h).gpu,
                "pids": sorted(p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)),
            }
            for i, h in _nvml_handles(nvml)
        ]
    except Exception:  # noqa: BLE001 - NVML missing or refusing a query: ask nvidia-smi
        pass
    text = (
        _nvidia_smi("--query-gpu=index,utilization.gpu,pci.bus_id", "--format=csv,noheader,nounits")
        or ""
    )
    apps = _nvidia_smi("--query-compute-apps=gpu_bus_id,pid", "--format=csv,noheader,nounits") or ""
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
                    "utilization_pct": _as_int(values[1]),
                    "pids": sorted(pids.get(values[2], [])),
                }
            )
    return found


def pinned_memory_limit_bytes() -> int | None:
    """The locked-memory limit of this process (``ulimit -l``) in bytes; None when unlimited.

    Used by the command line (datamove).
    """
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def free_disk_bytes(path: str | os.PathLike[str]) -> int:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent).

    Used by the command line (datamove).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"free_disk_bytes needs a folder path, got {type(path).__name__}")
    where = os.path.abspath(path)
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    return shutil.disk_usage(where).free


def peer_access() -> list[list[bool]]:
    """``[i][j]``: can GPU i read and write GPU j's memory directly (True on the diagonal).

    Used by the command line (datamove).
    """
    n = gpu_count()
    return [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(n)] for i in range(n)]


def driver_cuda_version() -> str | None:
    """The newest CUDA version the installed driver supports (``"12.4"``); None without a driver.

    Used by the command line (datamove).
    """
    nvml = _nvml()
    try:
        version = nvml.nvmlSystemGetCudaDriverVersion()  # e.g. 12040
        return f"{version // 1000}.{version % 1000 // 10}"
    except Exception:  # noqa: BLE001 - NVML missing (None) or refusing: read nvidia-smi's header
        pass
    match = re.search(r"CUDA Version:\s*(\d+\.\d+)", _nvidia_smi() or "")
    return match.group(1) if match else None


def driver_present() -> bool:
    """Whether an NVIDIA driver answers here (NVML or ``nvidia-smi``), whatever PyTorch sees.

    Used by the command line (datamove).
    """
    return _nvml() is not None or _nvidia_smi("-L") is not None


def pinned_host_bytes(stats: dict[str, Any]) -> tuple[int | None, int | None]:
    """(bytes PyTorch's caching host allocator holds, bytes of them in live tensors), read from
    ``torch.cuda.host_memory_stats()``; None for a figure this PyTorch does not report.

    The key names changed between PyTorch versions: older ones report held memory as
    'reserved_bytes' and live memory as 'allocated_bytes'; newer ones report held memory as
    'allocated_bytes' (live + cached) and live memory as 'active_bytes'.

    Used by the lessons (helpers/lessons/).
    """
    if not isinstance(stats, dict):
        raise TypeError(
            f"pinned_host_bytes takes the dict of torch.cuda.host_memory_stats(), got {type(stats).__name__}"
        )
    if "reserved_bytes.current" in stats:
        return stats["reserved_bytes.current"], stats.get(
            "active_bytes.current", stats.get("allocated_bytes.current")
        )
    if "active_bytes.current" in stats:
        return stats.get("allocated_bytes.current"), stats["active_bytes.current"]
    return None, None


# ---------------------------------------------------------------- the GPUs' topology (NVML, else nvidia-smi)


def _nvml_link_counts(nvml: Any) -> list[list[int]]:
    """``[i][j]``: the NVLinks from GPU i to GPU j that NVML reports up, a pair through an NVSwitch
    counting the fewer of the two GPUs' links to switches (what ``nvidia-smi topo -m`` prints)."""
    n = nvml.nvmlDeviceGetCount()
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    index_of = {_text(nvml.nvmlDeviceGetPciInfo(h).busId).lower(): i for i, h in enumerate(handles)}
    direct = [[0] * n for _ in range(n)]
    to_switch = [0] * n
    for i, h in enumerate(handles):
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                if nvml.nvmlDeviceGetNvLinkState(h, link) != nvml.NVML_FEATURE_ENABLED:
                    continue
                kind = nvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
                remote = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId).lower()
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
    """What joins each pair of GPUs: ``{"source": "NVML" | "nvidia-smi topo -m" | None,
    "links": [[...]]}``, where ``links[i][j]`` is ``"NV<k>"`` (k NVLinks, direct or through an
    NVSwitch), a PCIe path as ``nvidia-smi topo -m`` names it (``PIX``, ``PXB``, ``PHB``,
    ``NODE``, ``SYS``; NVML says ``PCIe``) or ``"X"`` on the diagonal. NVML (nvidia-ml-py,
    ``import pynvml``) is read where it is installed, else ``nvidia-smi topo -m``; without an
    NVIDIA driver the source is None and the list empty.

    Taught in 05_device_to_device.
    """
    nvml = _nvml()
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
    pairs = gpu_links(_nvidia_smi("topo", "-m"))
    if not pairs:
        return {"source": None, "links": []}
    n = max(max(pair) for pair in pairs) + 1
    return {
        "source": "nvidia-smi topo -m",
        "links": [
            ["X" if i == j else pairs.get((i, j), "unknown") for j in range(n)] for i in range(n)
        ],
    }


def copy_engine_count(device: int = 0) -> int | None:
    """The number of copy (DMA) engines the CUDA driver reports for GPU ``device``: an int, or
    None where no CUDA driver answers (no ``libcuda``, or a call that fails).

    This is ``CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT`` (40 in cuda.h), read through the driver
    API with ctypes because ``torch.cuda.get_device_properties`` does not carry it. With one
    engine, copies in one direction at a time run beside kernels; with two or more, a
    host-to-device and a device-to-host copy can also run at the same time.

    Taught in 03_streams_and_overlap.
    """
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
