"""The launcher's settings: the environment every rank gets, deadlines, limits, the backends."""

from __future__ import annotations

# Environment every rank gets, on every machine: NVLink SHARP (NVLS) and multicast objects
# stay off. The shared GPU machines require it; elsewhere it changes nothing we measure.
RANK_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

STARTUP_TIMEOUT_S = 180.0  # importing torch and joining the group, per launch
FAILURE_GRACE_S = 1.0  # after one rank fails, how long the others may still report
DEATH_NEWS_S = 0.5  # how late a rank's death may show after the exceptions it caused elsewhere
TEARDOWN_S = 1.5  # how long ranks that all returned may take to end (0.13-0.21 s on two H200s)
OUTPUT_KIB = 20  # how much of the end of each rank's stdout / stderr is read back
MAX_WORLD_SIZE = 64  # more ranks than a demonstration needs on one machine
# Variables every rank gets from the launcher itself (torchrun's), which env= may not change.
LAUNCHER_ENV = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
)

BACKENDS = ("nccl", "gloo")

MAX_TIMEOUT_S = 24 * 3600.0  # longer than any demonstration; bigger values overflow the clocks
