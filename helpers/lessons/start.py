"""What notebook 00 shows: where each notebook's numbers come from, how to read a bandwidth
curve, a timeline and a claims table.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures nothing.
Tested on every recorded machine in tests/test_lesson_00.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import claims, hardware, plotting, records, tables, timing, trace
from ..records import Run

NOTEBOOK = "00_start_here"


def plan(folder: Path | str = ".") -> tables.Table:
    """For every notebook in ``folder``: how many experiments run live on this machine, how many
    replay, and from which recorded machines. ``replaying_notebooks(table)`` counts the rows that
    replay.
    """
    have = hardware.gpu_count()
    table = tables.Table(
        ["notebook", "experiments live", "experiments replayed", "replayed from"],
        title=f"this machine has {have} GPU(s)",
    )
    for path in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb")):
        live, replay, source = records.replay_plan(path)
        table.add(path.stem, len(live), len(replay), source)
    return table


def replaying_notebooks(table: tables.Table) -> int:
    """How many notebooks of ``plan()``'s table replay at least one experiment here."""
    return sum(1 for row in table.rows if row[2])


def _rates(run: Run) -> tuple[list[int], list[float]]:
    return list(run.params["sizes"]), [t.gbps for t in run.value]


def show_curve(run: Run) -> tables.Table:
    """The first bandwidth curve: a table (size, median time in us, spread, samples, decimal GB/s)
    and its plot on log axes, the best rate drawn as a dashed line. Returns the table.
    """
    sizes, rates = _rates(run)
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
            for n, t in zip(sizes, run.value, strict=True)
        ],
        caption="CUDA events; decimal GB/s",
    )
    plotting.bandwidth_vs_size(
        {"pinned host -> GPU": (sizes, rates)},
        title=plotting.machine_title("Pinned H2D copy", run.machine, run.live),
        ceiling_gbps=max(rates),
        ceiling_label="best measured",
    )
    return table


def see_curve(run: Run) -> claims.WhatWeSee:
    """What the curve shows, from its numbers: the smallest and the best rate, where it first
    reaches half the best, how it ends (``claims.describe_curve``), and its first dip.
    """
    sizes, rates = _rates(run)
    best = max(rates)
    half_size = next(s for s, r in zip(sizes, rates, strict=True) if r >= best / 2)
    shape = claims.describe_curve(sizes, rates)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The smallest copy ({timing.format_bytes(sizes[0])}) moves {rates[0]:.3g} GB/s, the best "
        f"{best:.3g} GB/s; the copy first reaches half of its best rate at {timing.format_bytes(half_size)}."
    )
    seen.say(f"Pinned H2D {shape.words}.")
    if shape.kind == "still rising":
        seen.say(
            "So this sweep has not found the link's limit: the largest copy is a lower bound on it."
        )
    dips = [i for i in range(len(rates) - 1) if rates[i + 1] < rates[i] * 0.95]
    if (
        dips and shape.kind != "levels off"
    ):  # describe_curve names a dip only on a curve that levels off
        i = dips[0]
        seen.say(
            f"On the way it dips from {rates[i]:.3g} GB/s at {timing.format_bytes(sizes[i])} to "
            f"{rates[i + 1]:.3g} GB/s at {timing.format_bytes(sizes[i + 1])}: a single point is noisy "
            f"(notebook 01 repeats the sweep with more sizes)."
        )
    return seen


def best_rate_gbps(run: Run) -> float:
    """The best rate of the curve, in decimal GB/s."""
    return max(_rates(run)[1])


def show_timeline(run: Run) -> None:
    """The timeline of a copy beside a kernel, then where its Chrome trace file is."""
    plotting.timeline(
        trace.relative(run.value.intervals),
        title=plotting.machine_title("Copy beside a kernel", run.machine, run.live),
    )
    print(
        "the Chrome trace, openable in https://ui.perfetto.dev :",
        os.path.relpath(run.value.chrome_trace.path),
    )


def hidden_share(run: Run) -> float:
    """The overlap ratio of the timeline's copies and kernels: the share of the shorter activity
    that ran while the other was running (0 to 1).
    """
    intervals = run.value.intervals
    return trace.overlap_ratio(
        trace.select(intervals, kind="memcpy"), trace.select(intervals, kind="kernel")
    )


def see_timeline(run: Run) -> claims.WhatWeSee:
    """How much of the shorter activity (the copy or the kernel) ran beside the other, in words."""
    intervals = run.value.intervals
    copies, kernels = trace.select(intervals, kind="memcpy"), trace.select(intervals, kind="kernel")
    hidden = hidden_share(run)
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
    """This notebook's two expectations as a claims table: small copies are slow (below a tenth
    of the best rate), large copies come close to the link (80% of the PCIe raw rate that the
    recorded machine's report gives).
    """
    sizes = curve.params["sizes"]
    rate_of = {s: claims.measured(t, as_rate=True) for s, t in zip(sizes, curve.value, strict=True)}
    smallest, largest = rate_of[sizes[0]], rate_of[sizes[-1]]
    best = max(rate_of.values(), key=lambda v: v.value)
    gpu0 = machine.value["gpus"][0]
    gen, width = gpu0.get("pcie_gen_current"), gpu0.get("pcie_width_current")
    link = hardware.pcie_theoretical_gbps(gen, width)
    table = claims.ClaimsTable(NOTEBOOK)
    table.add(
        f"Small copies are slow: a {timing.format_bytes(sizes[0])} copy moves less than a tenth of the best rate",
        source="this notebook's expectation",
        measured=f"{timing.format_bytes(sizes[0])}: {smallest}, the best: {best} (their ratio)",
        holds=claims.compare(claims.ratio(smallest, best), 0.1, holds_if="below"),
        run=curve,
    )
    share = (
        claims.Value(
            largest.value / link, largest.spread / link, "of the raw rate", largest.samples
        )
        if link
        else None
    )
    table.add(
        f"Large copies come close to the link's speed: {timing.format_bytes(sizes[-1])} reaches 80% of the "
        "PCIe link's raw rate",
        source="this notebook's expectation (notebook 01 tests the link in full)",
        measured=(
            f"{timing.format_bytes(sizes[-1])}: {largest}, against the raw rate of PCIe gen {gen} x{width}, "
            f"{link:.3g} GB/s (share shown)"
            if link
            else "the PCIe link's generation and width were not reported"
        ),
        holds=claims.compare(share, 0.8, holds_if="above") if share else None,
        run=curve,
    )
    return table
