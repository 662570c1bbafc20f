"""Section 1 of notebook 01: where the host waits for one H2D copy, pageable and pinned (us)."""

from __future__ import annotations

from dataclasses import dataclass

from ... import claims, plotting, tables, timing, trace
from ...records import Run
from .common import NOTEBOOK, seen

FORUM = "NVIDIA forum thread on pageable copies"
STAGED = 0.8  # the host inside cudaMemcpyAsync for at least this share of the copy: "(nearly) all staged"
GOES_ON = 0.1  # the host inside cudaMemcpyAsync for less than this share of the copy: it "goes on"
COLUMNS = ["memory", "is_pinned()", "copy names", ("GPU copy", "us", ".0f")]
COLUMNS += [("host inside cudaMemcpyAsync", "us", ".0f"), ("call / copy", "x", ".3f")]
COLUMNS += [("host in synchronize", "us", ".0f")]
CLAIMS = {  # the forum's claim on each copy; what was measured: the host's share of the copy
    "pageable": "A copy from pageable memory does not return to the host until (nearly) all of it has been staged",
    "pinned": "From pinned memory the copy is queued and the host goes on (pinned memory is the reliable way to async copies)",
}
THRESHOLD = {"pageable": (STAGED, "above"), "pinned": (GOES_ON, "below")}
MEASURED = {
    "pageable": "time the host spent inside cudaMemcpyAsync over the pageable copy's GPU time (non_blocking=True; one profiled copy, so no spread); 'nearly all': at least {}",
    "pinned": "time the host spent inside cudaMemcpyAsync, as a share of the pinned copy's GPU time (one profiled copy, so no spread); 'goes on': below {}",
}


@dataclass(frozen=True)
class Copy:
    """One profiled H2D copy; times in us."""

    names: str  # the profiler's copy names
    is_pinned: bool
    copy_us: float  # the GPU's copy
    call_us: float  # the host inside cudaMemcpyAsync
    sync_us: float  # the host in the synchronize call

    @property
    def share(self) -> float:
        return self.call_us / self.copy_us


def facts(run: Run) -> dict[str, Copy]:
    """{"pageable": Copy, "pinned": Copy} from the two profiles."""
    found = {}
    for label, case in run.value.items():
        prof, calls = case["profile"], ("cudaMemcpyAsync", "Synchronize")
        copies = prof.select(kind="memcpy", copy_kind="HtoD")
        names = " and ".join(sorted({c.name for c in copies}))
        host = [trace.host_blocked_us(prof.intervals, call) for call in calls]
        found[label] = Copy(names, case["is_pinned"], trace.covered_us(copies), *host)
    return found


def part_of(part: float, whole: float, whole_words: str) -> str:
    """'0.7% of the GPU's copy time' or '1.02 times the GPU's copy time'."""
    share = part / whole
    return f"{share:.1%} of {whole_words}" if share < 1 else f"{share:.2f} times {whole_words}"


def show(run: Run) -> tables.Table:
    """A table of the two copies (us) and both timelines. Returns the table."""
    rows = [
        (k, c.is_pinned, c.names, c.copy_us, c.call_us, c.share, c.sync_us)
        for k, c in facts(run).items()
    ]
    size = timing.format_bytes(run.params["nbytes"])
    profiles = {f"one {size} H2D copy from {k} memory": c["profile"] for k, c in run.value.items()}
    plotting.timelines(
        profiles, title=plotting.titled("H2D copies from pageable and pinned memory", run)
    )
    caption = "one profiled copy of each kind; call / copy: the host's time inside cudaMemcpyAsync over the GPU's copy time"
    return tables.Table(COLUMNS, rows, title=plotting.titled("one H2D copy", run), caption=caption)


def see(run: Run) -> claims.WhatWeSee:
    """The copies' names, where the host waited for each, and which copy was longer (us)."""
    f, gpu_copy, copy_time = facts(run), "the GPU's copy time", "the copy's time"
    page, pin = f["pageable"], f["pinned"]
    longer = page.copy_us / pin.copy_us
    staged = "the call returned only when (nearly) all the data had been staged."
    if page.share < STAGED:
        staged = "the call returned well before the copy ended, so here the driver did not stage (nearly) all of it first."
    which = f"the pageable copy took {longer:.1f} times as long as the pinned one."
    if longer <= 1:
        which = f"the pinned copy took {1 / longer:.1f} times as long as the pageable one."
    judged = [claims.judged(c, run, NOTEBOOK, claim) for claim, c in comparisons(f).items()]
    return seen(
        run,
        f"The profiler names the first copy `{page.names}` and the second `{pin.names}` (one profiled copy of each, so every number here is a single sample).",
        f"From pageable memory the host sat inside `cudaMemcpyAsync` for {page.call_us:.0f} us, {part_of(page.call_us, page.copy_us, gpu_copy)} ({page.copy_us:.0f} us), although we passed `non_blocking=True`: {staged}",
        f"From pinned memory `cudaMemcpyAsync` took {pin.call_us:.0f} us, {part_of(pin.call_us, pin.copy_us, copy_time)}, and the host waited {pin.sync_us:.0f} us in the synchronize call instead, where we asked for it.",
        f"On the GPU the pinned copy took {pin.copy_us:.0f} us against {page.copy_us:.0f} us from pageable memory: {which}",
        f"What we expected is the forum thread's two claims, judged in the claims table below: pageable, **{claims.stated(judged[0], run)}**; pinned, **{claims.stated(judged[1], run)}**.",
    )


def comparisons(f: dict[str, Copy]) -> dict[str, claims.Comparison]:
    """Each of the forum's claims with the comparison that decides it (the host's share)."""
    return {
        claim: claims.compare(f[key].share, THRESHOLD[key][0], holds_if=THRESHOLD[key][1])
        for key, claim in CLAIMS.items()
    }


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The forum's two claims, on the host's share of the GPU's copy time."""
    for (claim, holds), key in zip(comparisons(facts(run)).items(), CLAIMS, strict=True):
        at = THRESHOLD[key][0]
        table.add(claim, source=FORUM, measured=MEASURED[key].format(at), holds=holds, run=run)
