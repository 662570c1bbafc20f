"""02, section 1: when ``.to()`` returns against when the copy is done (ms after a synchronised
start, medians), and the claims on blocking the host."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

from ... import analysis, claims, plotting, tables, timing
from ...records import Run

NOTEBOOK = "02_non_blocking"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
FORUM = "NVIDIA forum thread on pageable copies"
PINNED_NB = "H2D from pinned, non_blocking"
PAGEABLE_NB = "H2D from pageable, non_blocking"
PIN_THEN_NB = "H2D pin_memory() then non_blocking"
D2H_BLOCKING, D2H_NB = "D2H, blocking", "D2H, non_blocking"


@dataclass(frozen=True)
class Returns:
    """Section 1's facts: per copy, the share of its time the host waited (returned over finished
    medians, with the spread of the per-sample shares), and the times in ms the sentences name."""

    waited: dict[str, claims.Value]
    returned_ms: dict[str, float]
    finished_ms: dict[str, float]
    d2h_pinned: bool
    pin_wait: claims.Value  # pin_memory().to() returned / an already pinned copy finished

    @property
    def blocking(self) -> list[float]:
        return [w.value for label, w in self.waited.items() if label.endswith(", blocking")]


def facts(run: Run) -> Returns:
    ret = run.value
    waited = {}
    for label, r in ret.items():
        # both times of a sample come from one copy: the spread is that of the per-sample shares
        per_sample = analysis.paired(
            r["returned"].samples_s, r["finished"].samples_s, unit="of the copy"
        )
        share = r["returned"].median_s / r["finished"].median_s
        waited[label] = claims.Value(share, per_sample.spread, "of the copy", per_sample.samples)
    return Returns(
        waited,
        {label: r["returned"].median_ms for label, r in ret.items()},
        {label: r["finished"].median_ms for label, r in ret.items()},
        ret[D2H_NB]["result_pinned"],
        # against the copy it launches, not the near-zero return of a pinned copy (15-124 us)
        claims.ratio(ret[PIN_THEN_NB]["returned"], ret[PINNED_NB]["finished"], unit="of a copy"),
    )


def show(run: Run) -> tables.Table:
    """A table of each copy's return and finish (ms), the share waited and where a D2H result
    lives, and the two times as grouped bars on a log axis."""
    f, size = facts(run), timing.format_bytes(run.params["nbytes"])
    samples = len(next(iter(run.value.values()))["returned"].samples_s)
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
            f"when .to() returns vs when the copy is done, {size}", run.machine, run.live
        ),
    )
    plotting.log_axis(ax, "y")
    ax.tick_params(axis="x", labelsize=8)
    plt.tight_layout()
    return tables.Table(
        [
            "copy",
            (".to() returns", "ms", ".3f"),
            ("copy finished", "ms", ".3f"),
            ("share of the copy the host waited", "", ".1%"),
            "result in pinned memory",
        ],
        [
            (
                label,
                f.returned_ms[label],
                f.finished_ms[label],
                f.waited[label].value,
                r["result_pinned"] if label.startswith("D2H") else None,
            )
            for label, r in run.value.items()
        ],
        caption=f"{size} per copy; medians of {samples} samples",
    )


def see(run: Run) -> claims.WhatWeSee:
    """The shares waited by the blocking, pinned, D2H and pageable copies, the cost of pinning on
    the calling thread, and the blocking D2H copy against the ``non_blocking`` one."""
    f = facts(run)
    share = {label: w.value for label, w in f.waited.items()}
    low, high = min(f.blocking), max(f.blocking)
    pinned_ms = f.finished_ms[PINNED_NB]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The blocking copies returned after {low:.1%} to {high:.1%} of the copy's time"
        + (": they return when they finish." if low >= 0.9 else ".")
    )
    seen.say(
        f"From pinned memory, `non_blocking=True` returned after {f.returned_ms[PINNED_NB]:.3f} ms, "
        f"{share[PINNED_NB]:.1%} of the copy's {pinned_ms:.2f} ms; the GPU-to-host `non_blocking` "
        f"copy after {share[D2H_NB]:.1%}, its result in "
        f"{'pinned' if f.d2h_pinned else 'pageable'} memory."
    )
    seen.say(
        f"From pageable memory, `non_blocking=True` returned after {share[PAGEABLE_NB]:.1%} of the "
        "copy's time: "
        + (
            "the host still waited for (nearly) the whole copy."
            if share[PAGEABLE_NB] >= 0.8
            else "the host got control back before the copy was done."
        )
    )
    seen.say(
        f"`pin_memory().to(non_blocking=True)` kept the host {f.returned_ms[PIN_THEN_NB]:.2f} ms "
        f"({share[PIN_THEN_NB]:.0%} of its {f.finished_ms[PIN_THEN_NB]:.2f} ms), "
        f"{f.pin_wait.value:.2f} times the time the copy of an already pinned tensor takes to "
        f"finish ({pinned_ms:.2f} ms), whose `non_blocking` call returned after "
        f"{f.returned_ms[PINNED_NB]:.3f} ms: the pinning runs on the calling thread."
    )
    seen.say(
        f"The blocking GPU-to-host copy took {f.finished_ms[D2H_BLOCKING]:.1f} ms, "
        f"{f.finished_ms[D2H_BLOCKING] / f.finished_ms[D2H_NB]:.1f} times as long as the "
        f"`non_blocking` one ({f.finished_ms[D2H_NB]:.2f} ms)."
    )
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """Whether the host is blocked: by a pinned and a pageable ``non_blocking`` copy (the
    tutorial, the forum thread), and by pinning on the main thread."""
    f, size = facts(run), timing.format_bytes(run.params["nbytes"])
    for kind in ("pinned", "pageable"):
        table.add(
            f"With non_blocking=True the main thread on the host is not blocked [{kind} source]",
            source=f"{TUTORIAL} (background)",
            measured=f".to() returned after this share of the copy's time ({size}); not blocked: "
            "under 10%",
            holds=claims.compare(f.waited[f"H2D from {kind}, non_blocking"], 0.1, holds_if="below"),
            run=run,
        )
    table.add(
        "A copy from pageable memory does not unblock the host until (nearly) all of it is staged",
        source=FORUM,
        measured=".to(non_blocking=True) from pageable returned after this share of the copy's "
        "time; nearly all: over 80%",
        holds=claims.compare(f.waited[PAGEABLE_NB], 0.8, holds_if="above"),
        run=run,
    )
    table.add(
        "Pinning on the main thread blocks the host",
        source=f"{TUTORIAL} (advice)",
        measured=f"pin_memory().to(non_blocking=True) returned after "
        f"{f.returned_ms[PIN_THEN_NB]:.2f} ms, over the {f.finished_ms[PINNED_NB]:.2f} ms that the "
        "copy of an already pinned tensor takes to finish (whose non_blocking call returns after "
        f"{f.waited[PINNED_NB].value:.1%} of that); blocked: at least half",
        holds=claims.compare(f.pin_wait, 0.5, holds_if="above"),
        run=run,
    )
