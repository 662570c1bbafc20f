"""Timing device work honestly: CUDA events, a synchronised host clock, warm-up, several samples.

Every function returns a ``Timing``: the samples (seconds, one per sample, already divided by
the number of calls in a batch), their median and spread, and a rate in decimal GB/s when the
number of bytes moved is given. A wide spread gives a warning instead of a quiet bad number.

| function | clock | right for |
| --- | --- | --- |
| ``cuda_events`` | CUDA events on the current stream | copies and kernels that do not block the host |
| ``host_clock`` | ``perf_counter`` between two ``synchronize()`` | anything that blocks the host (pageable copies, ``pin_memory()``) |
| ``benchmark`` | ``torch.utils.benchmark.Timer.adaptive_autorange`` | what the PyTorch tutorial times |
"""

from __future__ import annotations

from .clocks import (
    AUTO_HOLD_FLOOR_US,
    LONGEST_TARGET_S,
    MOST_CALLS_PER_SAMPLE,
    benchmark,
    calls_for,
    cuda_events,
    hold_stream,
    host_clock,
    load_spin_kernel,
    sleep_cycles_per_us,
    synchronize_all,
    verify_copy,
)
from .measures import (
    NOISY_SPREAD,
    Timing,
    format_bytes,
    sizes_pow2,
)

__all__ = [
    "NOISY_SPREAD",
    "MOST_CALLS_PER_SAMPLE",
    "LONGEST_TARGET_S",
    "AUTO_HOLD_FLOOR_US",
    "format_bytes",
    "sizes_pow2",
    "Timing",
    "sleep_cycles_per_us",
    "hold_stream",
    "load_spin_kernel",
    "cuda_events",
    "synchronize_all",
    "host_clock",
    "benchmark",
    "calls_for",
    "verify_copy",
]
