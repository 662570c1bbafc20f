"""Section 2 of notebook 01: H2D and D2H rates by size, pageable and pinned (decimal GB/s)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, hardware, plotting, tables, timing
from ...records import Run
from .common import TUTORIAL, MiB, noisy_words, seen

COPIES = {
    "h2d_pinned": "H2D from pinned",
    "h2d_pageable": "H2D from pageable",
    "d2h_pinned": "D2H to pinned",
    "d2h_pageable": "D2H to pageable",
}
FLAT = {"h2d_pinned": 0.05, "d2h_pinned": 0.05, "h2d_pageable": 0.15, "d2h_pageable": 0.15}
LARGE = 64 * MiB  # "at 64 MiB and up": the sizes whose range is printed against the link
COLUMNS = [("size", "", timing.format_bytes)] + [(c, "GB/s", ".2f") for c in COPIES.values()]
COLUMNS += [("pinned / pageable H2D", "x", ".2f")]
CAPTION = "decimal GB/s, the median of the samples at each size"
ABOVE = "above it: the copies did not take that link"
ABOVE_RAW = "above the reported link's raw rate: the copies did not take that link as reported"
MEASURED = "the smallest pinned / pageable H2D bandwidth ratio from 1 MiB up (at {}; the largest is {:.2f}x); faster: {}"
FASTER = "Page-locked memory lets the device read it directly, much faster than pageable memory, which must first be copied to a page-locked buffer"
EXPECTED = "pinned copies level off in both directions, pageable ones stay below half the pinned copies' rate"  # the section's "what we expect", checked in see()


@dataclass(frozen=True)
class Bandwidth:
    """A bandwidth sweep; rates in decimal GB/s."""

    sizes: list[int]  # bytes
    gbps: dict[str, list[float]]  # each copy's median rate per size, keyed like COPIES
    ceiling: float  # the best pinned rate
    gen: int | None  # GPU 0's PCIe generation at most (None: not reported)
    width: int | None  # and width
    link: float | None  # the link's raw one-way rate
    fewest: int  # samples of any timing

    def gain(self, direction: str) -> list[float]:
        """Pinned over pageable rate at every size, ``direction`` "h2d" or "d2h"."""
        pin, page = self.gbps[f"{direction}_pinned"], self.gbps[f"{direction}_pageable"]
        return [a / b for a, b in zip(pin, page, strict=True)]


def facts(run: Run) -> Bandwidth:
    rows = run.value["rows"]
    gbps = {key: [row[key].gbps for row in rows] for key in COPIES}
    gpu0 = (run.header["machine"].get("gpus") or [{}])[0]
    gen, width = gpu0.get("pcie_gen_max"), gpu0.get("pcie_width_max")
    link = hardware.pcie_theoretical_gbps(gen, width)
    fewest = min(len(row[key].samples_s) for row in rows for key in COPIES)
    ceiling = max(gbps["h2d_pinned"] + gbps["d2h_pinned"])
    return Bandwidth(run.value["sizes"], gbps, ceiling, gen, width, link, fewest)


def of_link(low: float, high: float, link: float) -> str:
    """' (85%-87% of the raw link rate)', or that a rate passed the raw rate."""
    a, b = f"{low / link:.0%}", f"{high / link:.0%}"
    share = f"{a if a == b else a + '-' + b} of the raw link rate"
    return f" ({share if high <= link else ABOVE_RAW})"


def show(run: Run) -> None:
    """The four rates and the H2D gain by size, the ceiling against the link, the curves."""
    f, title = facts(run), plotting.titled("copy bandwidth", run)
    rows = [(n, *[f.gbps[k][i] for k in COPIES], f.gain("h2d")[i]) for i, n in enumerate(f.sizes)]
    display(tables.Table(COLUMNS, rows, title=title, caption=CAPTION))
    print(f"\nmeasured ceiling (best pinned copy, either direction): {f.ceiling:.1f} GB/s")
    link = "PCIe link: not reported by nvidia-smi on the recorded machine"
    if f.link:
        share = f"{f.ceiling / f.link:.0%} of it" if f.ceiling <= f.link else ABOVE
        link = f"PCIe link: gen {f.gen} x{f.width}, raw rate {f.link:.1f} GB/s per direction; the ceiling is {share}"
    print(link)
    large = [i for i, n in enumerate(f.sizes) if n >= LARGE]
    for key in ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable") if large else ():
        low, high = min(f.gbps[key][i] for i in large), max(f.gbps[key][i] for i in large)
        link = of_link(low, high, f.link) if f.link else ""
        print(f"{COPIES[key]:18} at 64 MiB and up: {low:6.2f} to {high:6.2f} GB/s{link}")
    title = plotting.titled("copy bandwidth, pinned vs pageable", run)
    series = {COPIES[key]: (f.sizes, f.gbps[key]) for key in COPIES}
    ax = plotting.bandwidth_vs_size(
        series, title=title, ceiling_gbps=f.ceiling, ceiling_label="measured ceiling"
    )
    if f.link:
        label = f"PCIe gen {f.gen} x{f.width} raw rate ({f.link:.0f} GB/s)"
        ax.axhline(f.link, linestyle=":", color="black", label=label)
        ax.legend(fontsize=8)
    plt.show()


def median_spread(run: Run, kind: str) -> float:
    """The median half-IQR over median of the "pinned" or "pageable" timings."""
    rows, keys = run.value["rows"], [key for key in COPIES if key.endswith(kind)]
    shares = sorted(claims.measured(row[k]).spread / row[k].median_s for row in rows for k in keys)
    return shares[len(shares) // 2]


def see(run: Run) -> claims.WhatWeSee:
    """The smallest size against the ceiling, the curves, the clocks' noise, the gains (GB/s)."""
    f, size = facts(run), timing.format_bytes
    fastest = max(f.gbps[key][0] for key in COPIES)
    shapes = {k: claims.describe_curve(f.sizes, f.gbps[k], tolerance=FLAT[k]) for k in COPIES}
    page, pin = median_spread(run, "pageable"), median_spread(run, "pinned")
    noisier = f", whose samples vary more: a median half-interquartile range of {page:.1%} of the value against {pin:.1%} for the pinned ones.)"
    few = f"Each rate is the median of as few as {f.fewest} samples at the largest sizes."
    gains = [(direction.upper(), f.gain(direction)) for direction in ("h2d", "d2h")]
    kinds = {shape.kind for k, shape in shapes.items() if "pinned" in k}
    big = {k: [r for n, r in zip(f.sizes, f.gbps[k], strict=True) if n >= LARGE] for k in COPIES}
    slow = max(big["h2d_pageable"] + big["d2h_pageable"])
    fast = min(big["h2d_pinned"] + big["d2h_pinned"])
    measured = f"pinned: {', '.join(sorted(kinds))}; from {size(LARGE)} up, pageable at most {slow:.3g} GB/s, pinned at least {fast:.3g} GB/s"
    return seen(
        run,
        f"At {size(f.sizes[0])} the fastest of the four copies moves {fastest:.2g} GB/s, {fastest / f.ceiling:.1%} of the measured ceiling ({f.ceiling:.1f} GB/s).",
        *(f"{name} {shapes[k].words}." for k, name in COPIES.items()),
        f"(Changes within {FLAT['h2d_pinned']:.0%} count as flat for the pinned curves and within {FLAT['h2d_pageable']:.0%} for the pageable ones{noisier if page > pin else '.)'}",
        few if f.fewest < analysis.FEW_SAMPLES else "",
        noisy_words(f.sizes, run.value["rows"], COPIES),
        *(
            f"{d}: the pinned copy moved {min(g):.1f} to {max(g):.1f} times the pageable copy's GB/s over all sizes, {g[-1]:.1f} times at {size(f.sizes[-1])}."
            for d, g in gains
        ),
        check=(EXPECTED, kinds == {"levels off"} and slow < fast / 2, measured),
    )


def copy_ms(run: Run, nbytes: int) -> float:
    """Milliseconds a pinned H2D copy of ``nbytes`` takes at the sweep's largest size's rate."""
    return nbytes / (facts(run).gbps["h2d_pinned"][-1] * 1e9) * 1e3


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """ "Much faster than pageable": the least pinned / pageable H2D rate ratio from 1 MiB up."""
    gains = {}
    for n, row in zip(run.value["sizes"], run.value["rows"], strict=True):
        pin, page = (claims.measured(row[k], as_rate=True) for k in ("h2d_pinned", "h2d_pageable"))
        if n >= MiB:
            gains[n] = claims.ratio(pin, page)
    measured, faster = "no size of 1 MiB or more", None
    if gains:
        least = min(gains, key=lambda n: gains[n].value)
        faster = claims.compare(gains[least], 1, holds_if="above")
        most = max(g.value for g in gains.values())
        measured = MEASURED.format(timing.format_bytes(least), most, faster.in_words())
    table.add(FASTER, source=f"{TUTORIAL} (background)", measured=measured, holds=faster, run=run)
