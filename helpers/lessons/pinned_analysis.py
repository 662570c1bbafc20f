"""The numbers notebook 01's tables, sentences and claims rest on: the host's time inside
``cudaMemcpyAsync`` against the GPU's copy, the copies' rates and the link's raw rate, the timings'
spread, and what ``host_memory_stats()`` reported at each stage of the allocator run.

``pinned`` shows them and ``pinned_claims`` judges the claims by them. Every function takes the
notebook's runs (``records.Run``, live or replayed) and measures nothing. Tested through
``pinned`` in tests/test_lesson_01.py.
"""

from __future__ import annotations

from typing import Any

from .. import analysis, claims, hardware, timing, trace
from ..records import Run

MiB = 2**20
STAGED = 0.8  # the host inside cudaMemcpyAsync for at least this share of the copy: "(nearly) all staged"
COPIES = {
    "h2d_pinned": "H2D from pinned",
    "h2d_pageable": "H2D from pageable",
    "d2h_pinned": "D2H to pinned",
    "d2h_pageable": "D2H to pageable",
}
FLAT = {"h2d_pinned": 0.05, "d2h_pinned": 0.05, "h2d_pageable": 0.15, "d2h_pageable": 0.15}


def samples_note(samples: int | None) -> str:
    """'; N samples' when a number rests on fewer than ``FEW`` samples, else nothing."""
    return f"; {analysis.few(samples)}" if analysis.few(samples) else ""


def bytes_or_unknown(value: int | None) -> str:
    return "?" if value is None else timing.format_bytes(value)


def part_of(part: float, whole: float, whole_words: str) -> str:
    """``part`` against ``whole`` in words: '0.7% of the GPU's copy' or '1.02 times the GPU's copy'."""
    share = part / whole
    return f"{share:.1%} of {whole_words}" if share < 1 else f"{share:.2f} times {whole_words}"


def staging_times(run: Run) -> dict[str, dict[str, Any]]:
    """Per kind of memory: the GPU's copy time, the host's time inside cudaMemcpyAsync and in the
    synchronize call (us), and the copies' names."""
    found = {}
    for label, case in run.value.items():
        prof = case["profile"]
        copies = prof.select(kind="memcpy", copy_kind="HtoD")
        found[label] = {
            "copy_us": trace.covered_us(copies),
            "memcpy_call_us": trace.host_blocked_us(prof.intervals, "cudaMemcpyAsync"),
            "sync_us": trace.host_blocked_us(prof.intervals, "Synchronize"),
            "names": " and ".join(sorted({c.name for c in copies})),
        }
    return found


def host_call_share(run: Run) -> dict[str, float]:
    """Per kind of host memory: the host's time inside cudaMemcpyAsync over the GPU's copy time."""
    return {label: s["memcpy_call_us"] / s["copy_us"] for label, s in staging_times(run).items()}


def rates_gbps(run: Run) -> dict[str, list[float]]:
    return {key: [row[key].gbps for row in run.value["rows"]] for key in COPIES}


def pcie_link(run: Run) -> tuple[int | None, int | None, float | None]:
    """GPU 0's PCIe generation and width at most, and the link's raw one-way rate in GB/s."""
    gpu0 = (run.header["machine"].get("gpus") or [{}])[0]
    gen, width = gpu0.get("pcie_gen_max"), gpu0.get("pcie_width_max")
    return gen, width, hardware.pcie_theoretical_gbps(gen, width)


def of_link(low: float, high: float, link: float) -> str:
    """' (85%-87% of the raw link rate)', or where a rate passes the raw rate, that it does (a
    share of a bound above 100% is no result)."""
    if high > link:
        return (
            " (above the reported link's raw rate: the copies did not take that link as reported)"
        )
    shares = (
        f"{low / link:.0%}"
        if f"{low / link:.0%}" == f"{high / link:.0%}"
        else f"{low / link:.0%}-{high / link:.0%}"
    )
    return f" ({shares} of the raw link rate)"


def best_pinned_gbps(run: Run) -> float:
    """The measured ceiling: the best median rate of a pinned copy, either direction (GB/s)."""
    gbps = rates_gbps(run)
    return max(gbps["h2d_pinned"] + gbps["d2h_pinned"])


def median_spread(run: Run, kind: str) -> float:
    """The median relative spread (half the IQR over the median) of the pinned or pageable timings."""
    shares = sorted(
        claims.measured(row[key]).spread / row[key].median_s
        for row in run.value["rows"]
        for key in COPIES
        if key.endswith(kind)
    )
    return shares[len(shares) // 2]


def stage_bytes(run: Run) -> dict[str, tuple[int | None, int | None]]:
    """{stage: (bytes the cache holds, bytes in live tensors)}; live is None where the counter
    reported more than the cache holds (it cannot be)."""
    found = {}
    for label, stats in run.value["stages"]:
        held, live = hardware.pinned_host_bytes(stats)
        found[label] = (
            held,
            None if held is not None and live is not None and live > held else live,
        )
    return found


def live_counter_broken(run: Run) -> bool:
    """Whether ``host_memory_stats()`` reported, at some stage, more bytes in live tensors than
    its cache held (which cannot be: that counter is then not shown)."""
    return any(
        held is not None and live is not None and live > held
        for held, live in (hardware.pinned_host_bytes(stats) for _, stats in run.value["stages"])
    )


def new_blocks_for_smaller(run: Run) -> int:
    stages = dict(run.value["stages"])
    return stages["holding a smaller tensor"].get("num_host_alloc", 0) - stages[
        "tensor deleted"
    ].get("num_host_alloc", 0)
