"""02, section 1: when ``.to()`` returns against when the copy is done (ms, medians)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

from ... import analysis, claims, plotting, tables, timing
from ...records import Run

NOTEBOOK = "02_non_blocking"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
FORUM = "NVIDIA forum thread on pageable copies"
PINNED_NB, PAGEABLE_NB = "H2D from pinned, non_blocking", "H2D from pageable, non_blocking"
PIN_THEN_NB = "H2D pin_memory() then non_blocking"
D2H_BLOCKING, D2H_NB = "D2H, blocking", "D2H, non_blocking"
COLUMNS = [
    "copy",
    (".to() returns", "ms", ".3f"),
    ("copy finished", "ms", ".3f"),
    ("share of the copy the host waited", "", ".1%"),
    "result in pinned memory",
]


@dataclass(frozen=True)
class Returns:
    """Section 1's facts: per copy, the share of its time the host waited, and its times (ms)."""

    waited: dict[str, claims.Value]  # returned / finished medians, spread of per-sample shares
    returned_ms: dict[str, float]
    finished_ms: dict[str, float]
    d2h_pinned: bool
    pin_wait: claims.Value  # pin_memory().to() returned / an already pinned copy finished
    size: str

    @property
    def blocking(self) -> list[float]:
        return [w.value for label, w in self.waited.items() if label.endswith(", blocking")]


def facts(run: Run) -> Returns:
    ret = run.value
    waited = {
        label: claims.Value(
            r["returned"].median_s / r["finished"].median_s,
            analysis.paired(r["returned"].samples_s, r["finished"].samples_s).spread,
            "of the copy",
            len(r["returned"].samples_s),
        )
        for label, r in ret.items()
    }
    return Returns(
        waited,
        {label: r["returned"].median_ms for label, r in ret.items()},
        {label: r["finished"].median_ms for label, r in ret.items()},
        ret[D2H_NB]["result_pinned"],
        # against the copy it launches, not the near-zero return of a pinned copy (15-124 us)
        claims.ratio(ret[PIN_THEN_NB]["returned"], ret[PINNED_NB]["finished"], unit="of a copy"),
        timing.format_bytes(run.params["nbytes"]),
    )


def show(run: Run) -> tables.Table:
    """Each copy's return and finish (ms) and share waited, as a table and log-scale bars."""
    f = facts(run)
    _, ax = plt.subplots(figsize=(11, 4.5))
    plotting.grouped_bars(
        {
            label.replace("from ", "").replace(" then ", "\nthen ").replace(", ", "\n"): {
                ".to() returned": f.returned_ms[label],
                "copy finished": f.finished_ms[label],
            }
            for label in run.value
        },
        ax=ax,
        ylabel="ms after a synchronised start (median, log)",
        title=plotting.machine_title(
            f"when .to() returns vs when the copy is done, {f.size}", run.machine, run.live
        ),
    )
    plotting.log_axis(ax, "y")
    ax.tick_params(axis="x", labelsize=8)
    plt.tight_layout()
    rows = [
        (k, f.returned_ms[k], f.finished_ms[k], f.waited[k].value, r["result_pinned"])
        for k, r in run.value.items()
    ]
    return tables.Table(
        COLUMNS,
        [(*row[:4], row[4] if row[0].startswith("D2H") else None) for row in rows],
        caption=f"{f.size} per copy; medians of {f.waited[PINNED_NB].samples} samples",
    )


def see(run: Run) -> claims.WhatWeSee:
    """The shares waited, the cost of pinning on the calling thread, and D2H blocking vs not."""
    f = facts(run)
    share = {label: w.value for label, w in f.waited.items()}
    low, high, pinned_ms = min(f.blocking), max(f.blocking), f.finished_ms[PINNED_NB]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    for sentence in (
        f"The blocking copies returned after {low:.1%} to {high:.1%} of the copy's time"
        + (": they return when they finish." if low >= 0.9 else "."),
        f"From pinned memory, `non_blocking=True` returned after {f.returned_ms[PINNED_NB]:.3f} "
        f"ms, {share[PINNED_NB]:.1%} of the copy's {pinned_ms:.2f} ms; the GPU-to-host "
        f"`non_blocking` copy after {share[D2H_NB]:.1%}, its result in "
        f"{'pinned' if f.d2h_pinned else 'pageable'} memory.",
        f"From pageable memory, `non_blocking=True` returned after {share[PAGEABLE_NB]:.1%} of "
        "the copy's time: "
        + (
            "the host still waited for (nearly) the whole copy."
            if share[PAGEABLE_NB] >= 0.8
            else "the host got control back before the copy was done."
        ),
        f"`pin_memory().to(non_blocking=True)` kept the host {f.returned_ms[PIN_THEN_NB]:.2f} ms "
        f"({share[PIN_THEN_NB]:.0%} of its {f.finished_ms[PIN_THEN_NB]:.2f} ms), "
        f"{f.pin_wait.value:.2f} times the time the copy of an already pinned tensor takes to "
        f"finish ({pinned_ms:.2f} ms), whose `non_blocking` call returned after "
        f"{f.returned_ms[PINNED_NB]:.3f} ms: the pinning runs on the calling thread.",
        f"The blocking GPU-to-host copy took {f.finished_ms[D2H_BLOCKING]:.1f} ms, "
        f"{f.finished_ms[D2H_BLOCKING] / f.finished_ms[D2H_NB]:.1f} times as long as the "
        f"`non_blocking` one ({f.finished_ms[D2H_NB]:.2f} ms).",
    ):
        seen.say(sentence)
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """Whether the host is blocked by non_blocking copies and by pinning on the main thread."""
    f = facts(run)
    for claim, source, measured, holds in [
        *(
            (
                f"With non_blocking=True the main thread on the host is not blocked [{kind} source]",
                f"{TUTORIAL} (background)",
                f".to() returned after this share of the copy's time ({f.size}); not blocked: "
                "under 10%",
                claims.compare(f.waited[f"H2D from {kind}, non_blocking"], 0.1, holds_if="below"),
            )
            for kind in ("pinned", "pageable")
        ),
        (
            "A copy from pageable memory does not unblock the host until (nearly) all of it is "
            "staged",
            FORUM,
            ".to(non_blocking=True) from pageable returned after this share of the copy's "
            "time; nearly all: over 80%",
            claims.compare(f.waited[PAGEABLE_NB], 0.8, holds_if="above"),
        ),
        (
            "Pinning on the main thread blocks the host",
            f"{TUTORIAL} (advice)",
            f"pin_memory().to(non_blocking=True) returned after {f.returned_ms[PIN_THEN_NB]:.2f} "
            f"ms, over the {f.finished_ms[PINNED_NB]:.2f} ms that the copy of an already pinned "
            "tensor takes to finish (whose non_blocking call returns after "
            f"{f.waited[PINNED_NB].value:.1%} of that); blocked: at least half",
            claims.compare(f.pin_wait, 0.5, holds_if="above"),
        ),
    ]:
        table.add(claim, source=source, measured=measured, holds=holds, run=run)
