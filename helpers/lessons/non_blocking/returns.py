"""02, section 1: when ``.to()`` returns against when the copy is done (ms, medians)."""

from __future__ import annotations

import dataclasses
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
CLAIMS = (
    "With non_blocking=True the main thread on the host is not blocked [pinned source]",
    "With non_blocking=True the main thread on the host is not blocked [pageable source]",
    "A copy from pageable memory does not unblock the host until (nearly) all of it is staged",
    "Pinning on the main thread blocks the host",
)
PAGEABLE_MEASURED = ".to(non_blocking=True) from pageable returned after this share of the copy's time; nearly all: over 80%"
AT_ONCE, NEARLY, HALF = 0.1, 0.8, 0.5  # shares of a copy's time: "at once", "nearly done", half
TIMES = ("returned", "finished")
COLUMNS = ["copy", (".to() returns", "ms", ".3f"), ("copy finished", "ms", ".3f")]
COLUMNS += [("share of the copy the host waited", "", ".1%"), "result in pinned memory"]


@dataclass(frozen=True)
class Returns:
    """Section 1's facts: per copy, the share of its time the host waited and its times (ms)."""

    waited: dict[str, claims.Value]  # returned / finished medians, spread of per-sample shares
    returned_ms: dict[str, float]
    finished_ms: dict[str, float]
    pin_wait: claims.Value  # pin_memory().to() returned / an already pinned copy finished
    holds: tuple[claims.Comparison, ...]  # each claim of CLAIMS, judged with the recorded runs
    size: str


def facts(run: Run) -> Returns:
    """Section 1's numbers, computed once from a run."""
    ret, waited = run.value, {}
    for k, r in ret.items():  # one copy gives both times: the per-sample shares' spread
        back, done = r["returned"], r["finished"]
        shares = analysis.paired(back.samples_s, done.samples_s, unit="of the copy")
        waited[k] = dataclasses.replace(shares, value=back.median_s / done.median_s)
    # against the copy it launches, not the near-zero return of a pinned copy (15-124 us)
    pin = claims.ratio(ret[PIN_THEN_NB]["returned"], ret[PINNED_NB]["finished"], unit="of a copy")
    holds = (
        *(claims.compare(waited[k], AT_ONCE, holds_if="below") for k in (PINNED_NB, PAGEABLE_NB)),
        claims.compare(waited[PAGEABLE_NB], NEARLY, holds_if="above"),
        claims.compare(pin, HALF, holds_if="above"),
    )
    judged = tuple(claims.judged(c, run, NOTEBOOK, t) for t, c in zip(CLAIMS, holds, strict=True))
    back_ms, done_ms = ({k: r[t].median_ms for k, r in ret.items()} for t in TIMES)
    return Returns(waited, back_ms, done_ms, pin, judged, timing.format_bytes(run.params["nbytes"]))


def show(run: Run) -> tables.Table:
    """Each copy's return and finish (ms) and share waited, as a table and log-scale bars."""
    f, ret = facts(run), run.value
    _, ax = plt.subplots(figsize=(11, 4.5))
    name = {k: k.replace("from ", "").replace(" then ", "\nthen ").replace(", ", "\n") for k in ret}
    times = {
        k: {".to() returned": f.returned_ms[k], "copy finished": f.finished_ms[k]} for k in ret
    }
    title = f"when .to() returns vs when the copy is done, {f.size}"
    title = plotting.titled(title, run)
    ylabel = "ms after a synchronised start (median, log)"
    plotting.grouped_bars({name[k]: t for k, t in times.items()}, ax=ax, ylabel=ylabel, title=title)
    plotting.log_axis(ax, "y")
    ax.tick_params(axis="x", labelsize=8)
    plt.tight_layout()
    pinned = {k: r["result_pinned"] if k.startswith("D2H") else None for k, r in ret.items()}
    rows = [(k, f.returned_ms[k], f.finished_ms[k], f.waited[k].value, pinned[k]) for k in ret]
    caption = f"{f.size} per copy; medians of {f.waited[PINNED_NB].samples} samples"
    return tables.Table(COLUMNS, rows, caption=caption)


def see(run: Run) -> claims.WhatWeSee:
    """The shares waited, the cost of pinning on the calling thread, and D2H blocking vs not."""
    f, seen = facts(run), claims.WhatWeSee(NOTEBOOK, run)
    share, back, ms = {k: w.value for k, w in f.waited.items()}, f.returned_ms, f.finished_ms
    blocking = [w for k, w in share.items() if k.endswith(", blocking")]
    low, high = min(blocking), max(blocking)
    finish = ": they return when they finish." if low >= 0.9 else "."
    whole = "the host still waited for (nearly) the whole copy."
    if share[PAGEABLE_NB] < 0.8:
        whole = "the host got control back before the copy was done."
    seen.say(
        f"The blocking copies returned after {low:.1%} to {high:.1%} of the copy's time{finish}",
        f"From pinned memory, `non_blocking=True` returned after {back[PINNED_NB]:.3f} ms, {share[PINNED_NB]:.1%} of the copy's {ms[PINNED_NB]:.2f} ms; the GPU-to-host `non_blocking` copy after {share[D2H_NB]:.1%}, its result in {'pinned' if run.value[D2H_NB]['result_pinned'] else 'pageable'} memory.",
        f"From pageable memory, `non_blocking=True` returned after {share[PAGEABLE_NB]:.1%} of the copy's time: {whole}",
        f"`pin_memory().to(non_blocking=True)` kept the host {back[PIN_THEN_NB]:.2f} ms ({share[PIN_THEN_NB]:.0%} of its {ms[PIN_THEN_NB]:.2f} ms), {f.pin_wait.value:.2f} times the time the copy of an already pinned tensor takes to finish ({ms[PINNED_NB]:.2f} ms), whose `non_blocking` call returned after {back[PINNED_NB]:.3f} ms: the pinning runs on the calling thread.",
        f"The blocking GPU-to-host copy took {ms[D2H_BLOCKING]:.1f} ms, {ms[D2H_BLOCKING] / ms[D2H_NB]:.1f} times as long as the `non_blocking` one ({ms[D2H_NB]:.2f} ms).",
    )
    done = f"blocking copies return when (nearly) done: after over {NEARLY:.0%} of the copy's time"
    seen.check(done, low > NEARLY, f"{low:.1%} to {high:.1%}")
    d2h = f"a non_blocking copy to the host returns almost at once: under {AT_ONCE:.0%} of the copy's time"
    seen.check(d2h, share[D2H_NB] < AT_ONCE, f"{share[D2H_NB]:.1%}")
    said = [claims.stated(c, run) for c in f.holds]
    line = f"The claims table below judges the sources' claims on these returns (the tutorial's, that `non_blocking=True` does not block the host, and the forum's, that a pageable copy does): not blocked, pinned source, **{said[0]}**; not blocked, pageable source, **{said[1]}**; a pageable copy holds the host until (nearly) staged, **{said[2]}**; pinning on the main thread blocks the host, **{said[3]}**."
    return seen.say(line)


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """Whether the host is blocked by non_blocking copies and by pinning on the main thread."""
    f, background = facts(run), f"{TUTORIAL} (background)"
    not_blocked = f".to() returned after this share of the copy's time ({f.size}); not blocked: under {AT_ONCE:.0%}"
    pin_measured = f"pin_memory().to(non_blocking=True) returned after {f.returned_ms[PIN_THEN_NB]:.2f} ms, {f.pin_wait.value:.2f} times the {f.finished_ms[PINNED_NB]:.2f} ms that the copy of an already pinned tensor takes to finish (whose non_blocking call returns after {f.waited[PINNED_NB].value:.1%} of that); blocked: at least half"
    sources = (background, background, FORUM, f"{TUTORIAL} (advice)")
    measured = (not_blocked, not_blocked, PAGEABLE_MEASURED, pin_measured)
    for claim, held, source, said in zip(CLAIMS, f.holds, sources, measured, strict=True):
        table.add(claim, source=source, measured=said, holds=held, run=run)
