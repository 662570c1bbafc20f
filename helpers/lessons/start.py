"""What notebook 00 shows: where each notebook's numbers come from, how to read a bandwidth
curve, a timeline and a claims table. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested in tests/test_lesson_00.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import claims, config, hardware, plotting, records, tables, timing, trace
from ..records import Run

NOTEBOOK = "00_start_here"
DIP = 0.95  # a rate below this share of the size before's is a dip
FLAT = 0.05  # the relative change between sizes that describe_curve calls flat
SLOW, NEAR_LINK = 0.1, 0.8  # the two expectations: below a tenth of the best; 80% of the raw rate


def sizes_line() -> str:
    """What a set-up cell says of the sizes its numbers come from: quick mode only shrinks what
    runs live here; a replay is always a full-size recording."""
    if not hardware.gpu_count() or config.replay_forced():
        return "every number below replays a full-size recording" + (
            " (quick mode changes only what runs live)" if config.quick_mode() else ""
        )
    if config.quick_mode():
        return "quick mode: what runs here uses smaller sizes and fewer samples; what replays is full size"
    return "full size"


def plan(folder: Path | str = ".") -> tables.Table:
    """For every notebook in ``folder``: how many experiments run live here, how many replay, and
    from which recorded machines."""
    table = tables.Table(
        ["notebook", "experiments live", "experiments replayed", "replayed from"],
        title=f"this machine has {hardware.gpu_count()} GPU(s)",
    )
    for path in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb")):
        live, replay, source = records.replay_plan(path)
        table.add(path.stem, len(live), len(replay), source)
    return table


def replaying_notebooks(table: tables.Table) -> int:
    """How many notebooks of ``plan()``'s table replay at least one experiment here."""
    return sum(1 for row in table.rows if row[2])


@dataclass(frozen=True)
class Curve:
    """The first curve: sizes (bytes), median rates (GB/s), copies per sample at each size, the
    best rate, the first size at half of it, and the first dip (index of the size before it, or
    None): a rate below ``DIP`` of the size before's."""

    sizes: list[int]
    rates: list[float]
    calls: list[int]
    samples: list[list[float]]
    best: float
    half_size: int
    dip: int | None


def curve_facts(run: Run) -> Curve:
    sizes, rates = list(run.params["sizes"]), [t.gbps for t in run.value]
    best = max(rates)
    dips = [i for i in range(len(rates) - 1) if rates[i + 1] < rates[i] * DIP]
    return Curve(
        sizes,
        rates,
        [t.calls_per_sample for t in run.value],
        [[t.nbytes / s / 1e9 for s in t.samples_s] for t in run.value],
        best,
        next(s for s, r in zip(sizes, rates, strict=True) if r >= best / 2),
        dips[0] if dips else None,
    )


def show_curve(run: Run) -> tables.Table:
    """The first curve: a table (size, median us, spread, samples, GB/s) and its plot on log axes,
    the best rate dashed. Returns the table."""
    f = curve_facts(run)
    table = tables.Table(
        [
            ("size", "", timing.format_bytes),
            ("median", "us", ".2f"),
            ("IQR / median", "", ".1%"),
            "samples",
            ("bandwidth", "GB/s", ".2f"),
        ],
        [
            (n, t.median_us, t.spread, len(t.samples_s), t.gbps)
            for n, t in zip(f.sizes, run.value, strict=True)
        ],
        caption="CUDA events; decimal GB/s",
    )
    plotting.bandwidth_vs_size(
        {"pinned host -> GPU": (f.sizes, f.rates)},
        title=plotting.machine_title("Pinned H2D copy", run.machine, run.live),
        ceiling_gbps=f.best,
        ceiling_label="best measured",
    )
    return table


def see_curve(run: Run) -> claims.WhatWeSee:
    """The smallest and the best rate, where the curve first reaches half the best, how it ends
    (``claims.describe_curve``), and its first dip with the copies per sample around it."""
    f = curve_facts(run)
    shape = claims.describe_curve(f.sizes, f.rates, tolerance=FLAT)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The smallest copy ({timing.format_bytes(f.sizes[0])}) moves {f.rates[0]:.3g} GB/s, the best "
        f"{f.best:.3g} GB/s; the copy first reaches half of its best rate at {timing.format_bytes(f.half_size)}."
    )
    seen.say(f"Pinned H2D {shape.words}.")
    last_rise = f.rates[-1] / f.rates[-2] - 1
    if shape.kind == "still rising" and last_rise > FLAT:
        seen.say(
            "So this sweep has not found the link's limit: the largest copy is a lower bound on it."
        )
    elif shape.kind == "still rising":  # the rise is before the last two sizes, e.g. after a dip
        seen.say(
            f"Its last two sizes differ by {last_rise:.1%}, within the {FLAT:.0%} called flat: the "
            "curve may be levelling off there, but two points cannot show a level, so the largest "
            "copy is only a lower bound on the link's limit."
        )
    if f.dip is not None and shape.kind != "levels off":  # describe_curve names a dip only there
        i, j = f.dip, f.dip + 1
        seen.say(
            f"On the way it dips from {f.rates[i]:.3g} GB/s at {timing.format_bytes(f.sizes[i])} to "
            f"{f.rates[j]:.3g} GB/s at {timing.format_bytes(f.sizes[j])}, where its {len(f.samples[j])} samples "
            f"ranged from {min(f.samples[j]):.3g} to {max(f.samples[j]):.3g} GB/s."
        )
        if f.calls[j] == 1 < f.calls[i]:
            seen.say(
                f"{timing.format_bytes(f.sizes[j])} is the first size at which each sample timed a single copy "
                f"({f.calls[i]} copies per sample at {timing.format_bytes(f.sizes[i])}): the dip comes with "
                "this way of timing, so read the link's rate at that size from notebook 01, which "
                "times every size with longer samples."
            )
    return seen


def best_rate_gbps(run: Run) -> float:
    """The best rate of the curve, in decimal GB/s."""
    return curve_facts(run).best


def show_timeline(run: Run) -> None:
    """The timeline of a copy beside a kernel, then where its Chrome trace file is."""
    plotting.timeline(
        trace.relative(run.value.intervals),
        title=plotting.machine_title("Copy beside a kernel", run.machine, run.live),
    )
    print(
        "the Chrome trace, openable in https://ui.perfetto.dev :",
        config.shown_path(run.value.chrome_trace.path),
    )


def hidden_share(run: Run) -> float:
    """The overlap ratio of the timeline's copies and kernels: the share of the shorter activity
    that ran while the other was running (0 to 1)."""
    intervals = run.value.intervals
    return trace.overlap_ratio(
        trace.select(intervals, kind="memcpy"), trace.select(intervals, kind="kernel")
    )


def see_timeline(run: Run) -> claims.WhatWeSee:
    """How much of the shorter activity (the copy or the kernel) ran beside the other, in words."""
    intervals, hidden = run.value.intervals, hidden_share(run)
    copies, kernels = trace.select(intervals, kind="memcpy"), trace.select(intervals, kind="kernel")
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The profiled steps hold {len(copies)} copies and {len(kernels)} kernels. {hidden:.0%} of the "
        "shorter activity ran while the other was running: the copy "
        + (
            "ran beside the kernel, as expected."
            if hidden >= 0.9
            else "overlapped the kernel only in part."
            if hidden > 0.1
            else "did not overlap the kernel."
        )
    )
    return seen


def claims_table(curve: Run, machine: Run) -> claims.ClaimsTable:
    """This notebook's two expectations: small copies are slow (below ``SLOW`` of the best rate),
    large copies come close to the link (``NEAR_LINK`` of the PCIe raw rate in the recorded
    machine's report)."""
    sizes = curve.params["sizes"]
    rates = [claims.measured(t, as_rate=True) for t in curve.value]
    smallest, largest = rates[0], rates[-1]
    best = max(rates, key=lambda v: v.value)
    gpu0 = machine.value["gpus"][0]
    gen, width = gpu0.get("pcie_gen_current"), gpu0.get("pcie_width_current")
    link = hardware.pcie_theoretical_gbps(gen, width)
    table = claims.ClaimsTable(NOTEBOOK)
    table.add(
        f"Small copies are slow: a {timing.format_bytes(sizes[0])} copy moves less than a tenth of the best rate",
        source="this notebook's expectation",
        measured=f"{timing.format_bytes(sizes[0])}: {smallest}, the best: {best} (their ratio)",
        holds=claims.compare(claims.ratio(smallest, best), SLOW, holds_if="below"),
        run=curve,
    )
    share = (
        claims.Value(
            largest.value / link, largest.spread / link, "of the raw rate", largest.samples
        )
        if link and largest.value - largest.spread <= link  # no share of a bound above 100%
        else None
    )
    table.add(
        f"Large copies come close to the link's speed: {timing.format_bytes(sizes[-1])} reaches {NEAR_LINK:.0%} "
        "of the PCIe link's raw rate",
        source="this notebook's expectation (notebook 01 tests the link in full)",
        measured=(
            f"{timing.format_bytes(sizes[-1])}: {largest}, against the raw rate of PCIe gen {gen} x{width}, "
            f"{link:.3g} GB/s (share shown)"
            if share
            else f"{timing.format_bytes(sizes[-1])}: {largest}, above the raw rate of the reported PCIe gen {gen} "
            f"x{width}, {link:.3g} GB/s: the copies did not take that link as reported (a measurement problem)"
            if link
            else "the PCIe link's generation and width were not reported"
        ),
        holds=claims.compare(share, NEAR_LINK, holds_if="above") if share else None,
        run=curve,
    )
    return table
