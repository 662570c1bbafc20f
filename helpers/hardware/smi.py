"""Asking the NVIDIA driver: ``nvidia-smi``'s text and NVML's module, each None where it cannot answer."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any


def nvidia_smi(*args: str) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def smi_gpu_rows() -> list[dict[str, str]]:
    fields = [
        "index",
        "driver_version",
        "pcie.link.gen.current",
        "pcie.link.gen.max",
        "pcie.link.width.current",
        "pcie.link.width.max",
        "pci.bus_id",
    ]
    text = nvidia_smi(f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits")
    if not text:
        return []
    rows = []
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values, strict=True)))
    return rows


def as_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


TERMINAL_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def nvml_module() -> Any:
    """The ``pynvml`` module, initialised, or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - not installed, no driver, or no permission: use nvidia-smi
        return None
    return pynvml


def nvml_handles(nvml: Any | None) -> list[tuple[int, Any]]:
    """``(index, handle)`` of every GPU NVML sees; LookupError where NVML is None."""
    if nvml is None:
        raise LookupError("no NVML here")
    return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
