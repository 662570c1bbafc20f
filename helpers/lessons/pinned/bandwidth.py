"""Section 2 of notebook 01: H2D and D2H bandwidth from pageable and pinned memory by size
(decimal GB/s) against the PCIe link, the first exercise, and the tutorial's "much faster"."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, hardware, plotting, tables, timing
from ...records import Run

NOTEBOOK = "01_pinned_memory"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
MiB = 2**20
COPIES = {
    "h2d_pinned": "H2D from pinned",
    "h2d_pageable": "H2D from pageable",
    "d2h_pinned": "D2H to pinned",
    "d2h_pageable": "D2H to pageable",
}
FLAT = {"h2d_pinned": 0.05, "d2h_pinned": 0.05, "h2d_pageable": 0.15, "d2h_pageable": 0.15}
LARGE = 64 * MiB  # "at 64 MiB and up": the sizes whose range is printed against the link


@dataclass(frozen=True)
class Bandwidth:
    """The sweep's sizes (bytes), each copy's median rate per size (GB/s, keyed like ``COPIES``),
    the measured ceiling (best pinned rate, GB/s), GPU 0's PCIe generation and width at most and
    the link's raw one-way rate (GB/s, None where not reported), and the fewest samples."""

    sizes: list[int]
    gbps: dict[str, list[float]]
    ceiling: float
    gen: int | None
    width: int | None
    link: float | None
    fewest: int

    def gain(self, direction: str) -> list[float]:
        """Pinned over pageable rate at every size, ``direction`` "h2d" or "d2h"."""
        pin, page = self.gbps[f"{direction}_pinned"], self.gbps[f"{direction}_pageable"]
        return [a / b for a, b in zip(pin, page, strict=True)]


def facts(run: Run) -> Bandwidth:
    rows = run.value["rows"]
    gbps = {key: [row[key].gbps for row in rows] for key in COPIES}
    gpu0 = (run.header["machine"].get("gpus") or [{}])[0]
    gen, width = gpu0.get("pcie_gen_max"), gpu0.get("pcie_width_max")
    return Bandwidth(
        run.value["sizes"],
        gbps,
        max(gbps["h2d_pinned"] + gbps["d2h_pinned"]),
        gen,
        width,
        hardware.pcie_theoretical_gbps(gen, width),
        min(len(row[key].samples_s) for row in rows for key in COPIES),
    )


def of_link(low: float, high: float, link: float) -> str:
    """' (85%-87% of the raw link rate)', or that a rate passed the raw rate (no share above 100%)."""
    if high > link:
        return (
            " (above the reported link's raw rate: the copies did not take that link as reported)"
        )
    a, b = f"{low / link:.0%}", f"{high / link:.0%}"
    return f" ({a if a == b else a + '-' + b} of the raw link rate)"


def show(run: Run) -> None:
    """A table of the four rates by size and the pinned / pageable H2D ratio, the ceiling against
    the link's raw rate, each copy's range from ``LARGE`` up, and the curves on log axes."""
    f = facts(run)
    table = tables.Table(
        [("size", "", timing.format_bytes)]
        + [(name, "GB/s", ".2f") for name in COPIES.values()]
        + [("pinned / pageable H2D", "x", ".2f")],
        [(n, *[f.gbps[key][i] for key in COPIES], f.gain("h2d")[i]) for i, n in enumerate(f.sizes)],
        title=plotting.machine_title("copy bandwidth", run.machine, run.live),
        caption="decimal GB/s, the median of the samples at each size",
    )
    display(table)
    print(f"\nmeasured ceiling (best pinned copy, either direction): {f.ceiling:.1f} GB/s")
    if f.link:
        share = (
            f"{f.ceiling / f.link:.0%} of it"
            if f.ceiling <= f.link
            else "above it: the copies did not take that link"
        )
        print(
            f"PCIe link: gen {f.gen} x{f.width}, raw rate {f.link:.1f} GB/s per direction; the ceiling is {share}"
        )
    else:
        print("PCIe link: not reported by nvidia-smi on the recorded machine")
    large = [i for i, n in enumerate(f.sizes) if n >= LARGE]
    for key in ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"):
        if large:
            low, high = min(f.gbps[key][i] for i in large), max(f.gbps[key][i] for i in large)
            print(
                f"{COPIES[key]:18} at 64 MiB and up: {low:6.2f} to {high:6.2f} GB/s"
                + (of_link(low, high, f.link) if f.link else "")
            )
    ax = plotting.bandwidth_vs_size(
        {COPIES[key]: (f.sizes, f.gbps[key]) for key in COPIES},
        title=plotting.machine_title("copy bandwidth, pinned vs pageable", run.machine, run.live),
        ceiling_gbps=f.ceiling,
        ceiling_label="measured ceiling",
    )
    if f.link:
        label = f"PCIe gen {f.gen} x{f.width} raw rate ({f.link:.0f} GB/s)"
        ax.axhline(f.link, linestyle=":", color="black", label=label)
        ax.legend(fontsize=8)
    plt.show()


def median_spread(run: Run, kind: str) -> float:
    """The median relative spread (half the IQR over the median) of the pinned or pageable timings."""
    shares = sorted(
        claims.measured(row[key]).spread / row[key].median_s
        for row in run.value["rows"]
        for key in COPIES
        if key.endswith(kind)
    )
    return shares[len(shares) // 2]


def see(run: Run) -> claims.WhatWeSee:
    """The smallest size's best rate against the ceiling, how each curve ends
    (``claims.describe_curve``), how noisy the two clocks were, and the pinned copy's rate over
    the pageable copy's in each direction (GB/s)."""
    f = facts(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    smallest = max(f.gbps[key][0] for key in COPIES)
    seen.say(
        f"At {timing.format_bytes(f.sizes[0])} the fastest of the four copies moves {smallest:.2g} GB/s, "
        f"{smallest / f.ceiling:.1%} of the measured ceiling ({f.ceiling:.1f} GB/s)."
    )
    for key in COPIES:
        shape = claims.describe_curve(f.sizes, f.gbps[key], tolerance=FLAT[key])
        seen.say(f"{COPIES[key]} {shape.words}.")
    page, pin = median_spread(run, "pageable"), median_spread(run, "pinned")
    noisier = (
        f", whose samples vary more: a median spread of {page:.1%} of the value against "
        f"{pin:.1%} for the pinned ones.)"
    )
    seen.say(
        f"(Changes within {FLAT['h2d_pinned']:.0%} count as flat for the pinned curves and within "
        f"{FLAT['h2d_pageable']:.0%} for the pageable ones" + (noisier if page > pin else ".)")
    )
    if f.fewest < analysis.FEW_SAMPLES:
        seen.say(f"Each rate is the median of as few as {f.fewest} samples at the largest sizes.")
    for direction in ("h2d", "d2h"):
        gain = f.gain(direction)
        seen.say(
            f"{direction.upper()}: the pinned copy moved {min(gain):.1f} to {max(gain):.1f} times the pageable "
            f"copy's GB/s over all sizes, {gain[-1]:.1f} times at {timing.format_bytes(f.sizes[-1])}."
        )
    return seen


def copy_ms(run: Run, nbytes: int) -> float:
    """Milliseconds a pinned H2D copy of ``nbytes`` takes at the rate of the sweep's largest size."""
    return nbytes / (facts(run).gbps["h2d_pinned"][-1] * 1e9) * 1e3


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's "much faster than pageable memory": the least pinned / pageable H2D rate
    ratio from 1 MiB up."""
    sizes, rows = run.value["sizes"], run.value["rows"]
    gains = {
        n: claims.ratio(
            claims.measured(row["h2d_pinned"], as_rate=True),
            claims.measured(row["h2d_pageable"], as_rate=True),
        )
        for n, row in zip(sizes, rows, strict=True)
        if n >= MiB
    }
    least = min(gains, key=lambda n: gains[n].value) if gains else None
    faster = claims.compare(gains[least], 1, holds_if="above") if least is not None else None
    table.add(
        "Page-locked memory lets the device read it directly, much faster than pageable memory, "
        "which must first be copied to a page-locked buffer",
        source=f"{TUTORIAL} (background)",
        measured=(
            f"the smallest pinned / pageable H2D bandwidth ratio from 1 MiB up (at "
            f"{timing.format_bytes(least)}; the largest is "
            f"{max(g.value for g in gains.values()):.2f}x); faster: {faster.in_words()}"
            if least is not None and faster is not None
            else "no size of 1 MiB or more"
        ),
        holds=faster,
        run=run,
    )
