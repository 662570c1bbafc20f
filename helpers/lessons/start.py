"""Notebook 00's lessons: where the numbers come from, a bandwidth curve, a timeline, claims."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import analysis, claims, config, hardware, plotting, records, tables, trace
from ..records import Run
from ..timing import Timing
from ..timing import format_bytes as size

NOTEBOOK = "00_start_here"
DIP = 0.95  # a rate below this share of the size before's is a dip
FLAT = 0.05  # the relative change between sizes that describe_curve calls flat
SLOW, NEAR_LINK = 0.1, 0.8  # the two expectations: below a tenth of the best; 80% of the raw rate
COLUMNS = [("size", "", size), ("median", "us", ".2f"), ("IQR / median", "", ".1%"), "samples"]
COLUMNS += [("bandwidth", "GB/s", ".2f")]  # the curve's table
BESIDE = "the copy's bar sits inside the kernel's span"  # the timeline's check


def sizes_line() -> str:
    """What a set-up cell says of its sizes: quick mode shrinks only what runs live here."""
    if not hardware.gpu_count() or config.replay_forced():
        quick = " (quick mode changes only what runs live)" if config.quick_mode() else ""
        return "every number below replays a full-size recording" + quick
    if config.quick_mode():
        return "quick mode: what runs here uses smaller sizes and fewer samples; what replays is full size"
    return "full size"


def plan(folder: Path | str | None = None) -> tables.Table:
    """Per notebook in ``folder`` (default: the course's notebooks, wherever the page runs): its
    experiments live here, replayed, and from which machines."""
    table = tables.Table(
        ["notebook", "experiments live", "experiments replayed", "replayed from"],
        title=f"this machine has {analysis.plural(hardware.gpu_count(), 'GPU')}",
    )
    for path in sorted(Path(folder or config.notebooks_dir()).glob("[0-9][0-9]_*.ipynb")):
        live, replay, source = records.replay_plan(path)
        table.add(path.stem, len(live), len(replay), source)
    return table


def replaying_notebooks(table: tables.Table) -> int:
    """How many notebooks of ``plan()``'s table replay at least one experiment here."""
    return sum(1 for row in table.rows if row[2])


@dataclass(frozen=True)
class Curve:
    """The first curve's facts, computed once from its run."""

    timings: list[Timing]
    sizes: list[int]  # bytes
    rates: list[float]  # median GB/s per size
    best: float  # GB/s
    half: int  # the index of the first size at half the best rate
    dip: int | None  # the index of the size before the first rate below DIP of its predecessor's
    low: int | None  # the index of the lowest rate after the dip


def curve_facts(run: Run) -> Curve:
    """The curve's sizes (bytes) and rates (GB/s), its half point, best rate and first dip."""
    sizes, rates = list(run.params["sizes"]), [t.gbps for t in run.value]
    best, dips = max(rates), [i for i in range(len(rates) - 1) if rates[i + 1] < rates[i] * DIP]
    half = next(i for i, (_, r) in enumerate(zip(sizes, rates, strict=True)) if r >= best / 2)
    dip = dips[0] if dips else None
    low = None if dip is None else min(range(dip + 1, len(rates)), key=rates.__getitem__)
    return Curve(list(run.value), sizes, rates, best, half, dip, low)


def show_curve(run: Run) -> tables.Table:
    """The curve's table (us, GB/s) and its plot on log axes, the best rate dashed."""
    f = curve_facts(run)
    plotting.bandwidth_vs_size(
        {"pinned host -> GPU": (f.sizes, f.rates)},
        title=plotting.titled("Pinned H2D copy", run),
        ceiling_gbps=f.best,
        ceiling_label="best measured",
    )
    rows = [
        (n, t.median_us, t.spread, len(t.samples_s), t.gbps)
        for n, t in zip(f.sizes, f.timings, strict=True)
    ]
    return tables.Table(COLUMNS, rows, caption="CUDA events; decimal GB/s")


def see_curve(run: Run) -> claims.WhatWeSee:
    """The smallest and best rates, the half point, the curve's shape, its first dip."""
    f, seen = curve_facts(run), claims.WhatWeSee(NOTEBOOK, run)
    shape = claims.describe_curve(f.sizes, f.rates, tolerance=FLAT)
    seen.say(
        f"The smallest copy ({size(f.sizes[0])}) moves {f.rates[0]:.3g} GB/s, the best {f.best:.3g} "
        f"GB/s; the copy first reaches half of its best rate at {size(f.sizes[f.half])}.",
        f"Pinned H2D {shape.words}.",
    )
    h, top = f.half, f.rates.index(f.best)  # growth per size step: up to h, then from h to top
    up = (f.rates[h] / f.rates[0]) ** (1 / max(h, 1))
    on = (f.best / f.rates[h]) ** (1 / max(top - h, 1))
    dip, low, fall = f.dip, f.low, ""
    if dip is not None and low is not None:  # a fall on the way: the check's words name it
        (a, b), (i, j) = (f.timings[dip], f.timings[low]), (size(f.sizes[dip]), size(f.sizes[low]))
        fall = f"; not at every step: it falls from {a.gbps:.3g} GB/s at {i} to {b.gbps:.3g} GB/s at {j}"
    seen.check(
        "the rate climbs with size overall, more and more slowly",
        up > on > 1,
        f"{up:.3g}x per size step up to {size(f.sizes[h])}, {on:.3g}x per step from there to the "
        f"best at {size(f.sizes[top])}{fall}",
    )
    rise = f.rates[-1] / f.rates[-2] - 1
    if shape.kind == "still rising":  # at the end, or before the last two sizes (after a dip)
        seen.say(
            "So this sweep has not found the link's limit: the largest copy is a lower bound on it."
            if rise > FLAT
            else f"Its last two sizes differ by {rise:.1%}, within the {FLAT:.0%} called flat: the "
            "curve may be levelling off there, but two points cannot show a level, so the largest "
            "copy is only a lower bound on the link's limit."
        )
    if dip is None or low is None or shape.kind == "levels off":  # no dip, or not named here
        return seen
    samples = [f.sizes[low] / s / 1e9 for s in b.samples_s]
    seen.say(
        f"On the way it dips from {a.gbps:.3g} GB/s at {i} to its low point, {b.gbps:.3g} GB/s at "
        f"{j}, where its {len(samples)} samples ranged from {min(samples):.3g} to "
        f"{max(samples):.3g} GB/s (interquartile range {b.spread:.1%} of the median)."
    )
    same = [k for k in range(low + 1, len(f.rates)) if f.rates[k] >= a.gbps * DIP]
    same = [k for k in same if f.timings[k].calls_per_sample == b.calls_per_sample]
    why, copies = "Nothing on this page shows why the rate dips", b.calls_per_sample
    if same:
        why = (
            f"{size(f.sizes[same[0]])} is timed the same way ({copies} "
            f"{'copy' if copies == 1 else 'copies'} per sample) and reaches {f.rates[same[0]]:.3g} "
            "GB/s, so the way of timing alone does not explain the dip, and nothing on this page "
            "shows what does"
        )
    seen.say(f"{why}: read the link's rate at {j} from notebook 01, which times every size longer.")
    return seen


def show_timeline(run: Run) -> None:
    """The timeline of a copy beside a kernel, then where its Chrome trace file is."""
    title = plotting.titled("Copy beside a kernel", run)
    plotting.timeline(trace.relative(run.value.intervals), title=title)
    trace_file = config.shown_path(run.value.chrome_trace.path)
    print("the Chrome trace, openable in https://ui.perfetto.dev :", trace_file)


def see_timeline(run: Run) -> claims.WhatWeSee:
    """How much of the shorter activity (the copy or the kernel) ran beside the other, in words."""
    copies, kernels = (trace.select(run.value.intervals, kind=k) for k in ("memcpy", "kernel"))
    hidden = trace.overlap_ratio(copies, kernels)
    how = "ran beside the kernel" if hidden >= 0.9 else "did not overlap the kernel"
    how = "overlapped the kernel only in part" if 0.1 < hidden < 0.9 else how
    seen = claims.WhatWeSee(NOTEBOOK, run).say(
        f"The profiled steps hold {len(copies)} copies and {len(kernels)} kernels. {hidden:.0%} of "
        f"the shorter activity ran while the other was running: the copy {how}."
    )
    seen.check(BESIDE, hidden >= 0.9, f"{hidden:.0%} overlap")
    return seen


def claims_table(curve: Run, machine: Run) -> claims.ClaimsTable:
    """Small copies below ``SLOW`` of the best rate; large ones at ``NEAR_LINK`` of PCIe's raw rate."""
    first, last = size(curve.params["sizes"][0]), size(curve.params["sizes"][-1])
    rates = [claims.measured(t, as_rate=True) for t in curve.value]
    smallest, largest, best = rates[0], rates[-1], max(rates, key=lambda v: v.value)
    gpu0 = machine.value["gpus"][0]
    gen, width = gpu0.get("pcie_gen_current"), gpu0.get("pcie_width_current")
    link = hardware.pcie_theoretical_gbps(gen, width)
    table = claims.ClaimsTable(NOTEBOOK)
    table.add(
        f"Small copies are slow: a {first} copy moves less than a tenth of the best rate",
        source="this notebook's expectation",
        measured=f"{first}: {smallest}, the best: {best} (their ratio)",
        holds=claims.compare(claims.ratio(smallest, best), SLOW, holds_if="below"),
        run=curve,
    )
    measured, share = "the PCIe link's generation and width were not reported", None
    if link:
        raw = f"PCIe gen {gen} x{width}, {link:.3g} GB/s"
        measured = f"{last}: {largest}, above the raw rate of the reported {raw}: the copies did not take that link as reported (a measurement problem)"
    if link and largest.value - largest.spread <= link:  # no share of a bound above 100%
        share = claims.Value(
            largest.value / link, largest.spread / link, "of the raw rate", largest.samples
        )
        measured = f"{last}: {largest}, against the raw rate of {raw} (share shown)"
    table.add(
        f"Large copies come close to the link's speed: {last} reaches {NEAR_LINK:.0%} of the PCIe "
        "link's raw rate",
        source="this notebook's expectation (notebook 01 tests the link in full)",
        measured=measured,
        holds=claims.compare(share, NEAR_LINK, holds_if="above") if share else None,
        run=curve,
    )
    return table
