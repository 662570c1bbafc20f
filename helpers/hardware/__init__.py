"""What is here: GPUs, their memory and PCIe link, peer access between GPUs, CPU, RAM, versions.

``describe()`` returns a plain dict, the environment header of every recording; ``report()``
turns it into a table for people. ``machine``: what the machine is; ``memory``: what PyTorch's
allocators hold; ``topology``: links between GPUs, NUMA nodes and CPUs; ``health``: what
``datamove doctor`` checks; ``smi``: asking nvidia-smi and NVML.
"""

from __future__ import annotations

from .health import (
    driver_cuda_version,
    driver_present,
    driver_version,
    free_disk_bytes,
    gpu_activity,
    pcie_links,
    pinned_memory_limit_bytes,
)
from .machine import (
    MEMORY_GBPS,
    UNKNOWN_GPU_CEILING_GBPS,
    cache_bytes,
    cache_ceiling_gbps,
    ceiling_gbps,
    copy_engine_count,
    describe,
    gpu_count,
    gpu_name,
    machine_name,
    pcie_theoretical_gbps,
    peer_access,
    report,
)
from .memory import (
    Footprint,
    footprint,
    free_memory,
    limit_gpu_memory,
    memory_in_use,
    pinned_host_bytes,
    start_footprint,
)
from .topology import (
    cpu_affinity,
    gpu_links,
    gpu_numa_node,
    gpu_topology,
    numa_node_cpus,
    parse_cpulist,
)

__all__ = [
    "MEMORY_GBPS",
    "UNKNOWN_GPU_CEILING_GBPS",
    "cache_bytes",
    "cache_ceiling_gbps",
    "ceiling_gbps",
    "copy_engine_count",
    "cpu_affinity",
    "describe",
    "driver_cuda_version",
    "driver_version",
    "driver_present",
    "free_disk_bytes",
    "Footprint",
    "footprint",
    "free_memory",
    "limit_gpu_memory",
    "start_footprint",
    "gpu_activity",
    "gpu_count",
    "gpu_links",
    "gpu_name",
    "gpu_numa_node",
    "gpu_topology",
    "machine_name",
    "memory_in_use",
    "numa_node_cpus",
    "parse_cpulist",
    "pcie_links",
    "pcie_theoretical_gbps",
    "peer_access",
    "pinned_host_bytes",
    "pinned_memory_limit_bytes",
    "report",
]
