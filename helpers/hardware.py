"""What is here: GPUs, their memory and PCIe link, peer access between GPUs, CPU, RAM, versions.

``describe()`` returns a plain dict (it is the environment header of every recording);
``report()`` turns such a dict into a table for people. The argument checks that the other
helpers share (``require_gpus``, ``check_cuda_tensor``, ``check_device``) live here too,
because they are questions about the hardware.

Taught in 00_start_here.
"""

from __future__ import annotations

import gc
import numbers
import os
import platform
import re
import shutil
import subprocess
from typing import Any

import torch


def gpu_count() -> int:
    """Number of CUDA GPUs PyTorch can use here (0 on a machine without CUDA).

    Taught in 00_start_here.
    """
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def require_gpus(n: int, what: str = "this experiment") -> None:
    """Raise ``ValueError`` unless at least ``n`` CUDA GPUs are present.

    The message says what was needed, what is here, and what to do instead.

    Taught in 00_start_here.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise TypeError(f"require_gpus needs a whole number of GPUs >= 0, got {n!r}")
    have = gpu_count()
    if have < n:
        raise ValueError(
            f"{what} needs {n} CUDA GPU(s) but this machine has {have}; run it on a machine "
            f"with {n} GPU(s), or replay a recording with helpers.records.run_or_replay"
        )


def check_device(device: torch.device | str | int) -> torch.device:
    """Return ``device`` as a ``torch.device`` that exists here, or raise a clear error.

    Accepts ``"cpu"``, ``"cuda"``, ``"cuda:1"``, an int GPU index or a ``torch.device``.

    Taught in 00_start_here.
    """
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int)):
        raise TypeError(
            f"expected a device such as 'cuda:0', 'cpu' or an int GPU index, got {type(device).__name__}"
        )
    try:
        dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    except RuntimeError as err:
        raise ValueError(f"unknown device {device!r}: pass 'cpu', 'cuda' or 'cuda:N'") from err
    if dev.type == "cuda":
        index = 0 if dev.index is None else dev.index
        if index >= gpu_count():
            raise ValueError(
                f"device {device!r} does not exist: this machine has {gpu_count()} CUDA GPU(s); "
                f"pass one of {[f'cuda:{i}' for i in range(gpu_count())] or ['cpu']}"
            )
        return torch.device("cuda", index)
    if dev.type != "cpu":
        raise ValueError(f"unsupported device {device!r}: pass 'cpu' or 'cuda:N'")
    return dev


def check_cuda_tensor(tensor: Any, name: str = "tensor") -> torch.Tensor:
    """Raise ``TypeError`` unless ``tensor`` is a tensor on a CUDA device; return it.

    Taught in 00_start_here.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor on a CUDA device, got {type(tensor).__name__}")
    if not tensor.is_cuda:
        raise TypeError(
            f"{name} is on {tensor.device}, but a CUDA tensor is needed: move it with "
            f"{name}.to('cuda') or create it with device='cuda'"
        )
    return tensor


def check_count(value: Any, name: str, least: int = 0, unit: str = "") -> int:
    """Raise ``ValueError`` unless ``value`` is a whole number (an int) of at least ``least``.

    ``unit`` names what is counted in the message (``"steps"``: "a whole number of steps >= 1").

    Taught in 04_event_timing (repeats, warm-up and calls per sample are counts).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        of = f" of {unit}" if unit else ""
        raise ValueError(f"{name} must be a whole number{of} >= {least}, got {value!r}")
    return int(value)


def check_size(nbytes: Any, name: str = "size") -> int:
    """Raise unless ``nbytes`` is a positive whole number of bytes; return it as an int.

    Taught in 00_start_here.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral):
        raise TypeError(f"{name} must be a whole number of bytes (an int), got {nbytes!r}")
    if nbytes <= 0:
        raise ValueError(f"{name} must be a positive number of bytes, got {nbytes}; pass e.g. 2**20 for 1 MiB")
    return int(nbytes)


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
        "index", "driver_version", "pcie.link.gen.current", "pcie.link.gen.max",
        "pcie.link.width.current", "pcie.link.width.max", "pci.bus_id",
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

    Taught in 05_device_to_device.
    """
    if topo is not None and not isinstance(topo, str):
        raise TypeError(f"gpu_links reads the text of `nvidia-smi topo -m` (or None), got {type(topo).__name__}")
    lines = [_TERMINAL_ESCAPES.sub("", line) for line in (topo or "").splitlines()]
    start = next((n for n, line in enumerate(lines) if "GPU0" in line.split("\t")[:2]), None)
    if start is None:
        return {}
    columns = [field.strip() for field in lines[start].split("\t") if field.strip()]
    links: dict[tuple[int, int], str] = {}
    for line in lines[start + 1:]:
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
        gpus.append({
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
        })
    peer = [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(n)] for i in range(n)]
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

    Taught in 00_start_here.
    """
    _check_info(info, "machine_name")
    gpus = info.get("gpus") or []
    if not gpus:
        return "cpu-only"
    names = sorted({g["name"] for g in gpus})
    label = "+".join(re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") for name in names)
    return f"{len(gpus)}x{label}"


def _check_info(info: Any, what: str) -> None:
    if not isinstance(info, dict):
        raise TypeError(f"{what} reads a machine's description, the dict hardware.describe() returns (or a "
                        f"recording's header['machine']), got {type(info).__name__}")


def _gib(nbytes: int | None) -> str:
    return "?" if nbytes is None else f"{nbytes / 2**30:.1f} GiB"


def pcie_theoretical_gbps(gen: int | None, width: int | None) -> float | None:
    """The PCIe link's raw one-way rate in decimal GB/s (gen 3: 8 GT/s/lane with 128b/130b ...).

    Real copies reach about 80-90% of it: packet headers and flow control take the rest.

    Taught in 01_pinned_memory.
    """
    per_lane_gts = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
    if gen is None or width is None:
        return None  # not reported by nvidia-smi
    if gen not in per_lane_gts:
        raise ValueError(f"gen is a PCIe generation 1-6 (or None when unknown), got {gen!r}")
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"width is a PCIe link width of 1, 2, 4, 8, 16 or 32 lanes (or None), got {width!r}")
    encoding = 0.8 if gen <= 2 else 128 / 130
    return per_lane_gts[gen] * encoding * width / 8


# Memory bandwidth of each GPU model in decimal GB/s, from NVIDIA's datasheets; matched by the
# longest key found in the GPU's name. Only recordings' plausibility checks use it.
MEMORY_GBPS = {"H100 80GB HBM3": 3350.0, "H100 PCIe": 2000.0, "H100 NVL": 3900.0, "H200": 4800.0,
               "A100-SXM4-80GB": 2039.0, "A100-SXM4-40GB": 1555.0, "A100 80GB PCIe": 1935.0,
               "L40S": 864.0, "B200": 8000.0}
# Above every GPU memory NVIDIA shipped by 2026: the bound for a GPU missing from MEMORY_GBPS.
UNKNOWN_GPU_CEILING_GBPS = 10_000.0


def ceiling_gbps(info: dict[str, Any]) -> float:
    """The fastest rate anything on a machine (``describe()`` or a recording's header) can move
    data, in decimal GB/s: its GPUs' memory bandwidth, which a same-GPU copy counting read plus
    write approaches, and which no PCIe or NVLink copy exceeds. A GPU not in ``MEMORY_GBPS``
    gets ``UNKNOWN_GPU_CEILING_GBPS``, and so does a machine without GPUs.

    Taught in 00_start_here (recordings are checked against it when they are unpacked).
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
            link = (f"PCIe gen {g.get('pcie_gen_current')}/{g.get('pcie_gen_max')} "
                    f"x{g.get('pcie_width_current')}/{g.get('pcie_width_max')} (now/max"
                    + (f"; max {peak:.1f} GB/s raw per direction)" if peak else ")"))
        lines.append(
            f"gpu {g['index']}          {g['name']}, {_gib(g['memory_bytes'])}, sm_{g['capability'].replace('.', '')}, "
            f"{g['sm_count']} SMs, {link}"
        )
    peer = info.get("peer_access") or []
    if len(peer) > 1:
        lines.append("peer access    " + "  ".join(
            f"{i}->{j}:{'yes' if peer[i][j] else 'no'}" for i in range(len(peer)) for j in range(len(peer)) if i != j
        ))
    if info.get("gpu_links"):
        lines.append("gpu links (nvidia-smi topo -m):")
        lines.extend("    " + row for row in info["gpu_links"].splitlines())
    return "\n".join(lines)


def memory_in_use() -> dict[str, int]:
    """Bytes held now: ``gpu<i>_allocated`` / ``gpu<i>_reserved`` by PyTorch's caching allocator
    on each GPU, and ``pinned_host`` held by its caching host (pinned) allocator.

    Taught in 00_start_here.
    """
    used: dict[str, int] = {}
    for i in range(gpu_count()):
        used[f"gpu{i}_allocated"] = int(torch.cuda.memory_allocated(i))
        used[f"gpu{i}_reserved"] = int(torch.cuda.memory_reserved(i))
    if gpu_count():
        stats = torch.cuda.host_memory_stats()
        used["pinned_host"] = int(stats.get("allocated_bytes.current", stats.get("reserved_bytes.current", 0)))
    return used


def free_memory() -> dict[str, int]:
    """Give cached GPU and pinned host memory back to the driver; return ``memory_in_use()`` after.

    Called after every live experiment, so one experiment's memory never burdens the next.

    Taught in 00_start_here.
    """
    gc.collect()
    if gpu_count():
        for i in range(gpu_count()):
            torch.cuda.synchronize(i)
        torch.cuda.empty_cache()
        torch._C._host_emptyCache()
    return memory_in_use()
