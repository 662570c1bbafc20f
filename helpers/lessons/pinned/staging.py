"""Section 1 of notebook 01: where the host waits for one H2D copy from pageable and from pinned
memory (the profiler's intervals, in us), and the NVIDIA forum's two claims about it."""

from __future__ import annotations

from dataclasses import dataclass

from ... import claims, plotting, tables, timing, trace
from ...records import Run

NOTEBOOK = "01_pinned_memory"
FORUM = "NVIDIA forum thread on pageable copies"
STAGED = 0.8  # the host inside cudaMemcpyAsync for at least this share of the copy: "(nearly) all staged"
GOES_ON = 0.1  # the host inside cudaMemcpyAsync for less than this share of the copy: it "goes on"


@dataclass(frozen=True)
class Copy:
    """One profiled H2D copy: the profiler's copy names, ``is_pinned()``, the GPU's copy time and
    the host's time inside ``cudaMemcpyAsync`` and in the synchronize call (us)."""

    names: str
    is_pinned: bool
    copy_us: float
    call_us: float
    sync_us: float

    @property
    def share(self) -> float:
        """The host's time inside cudaMemcpyAsync over the GPU's copy time."""
        return self.call_us / self.copy_us


def facts(run: Run) -> dict[str, Copy]:
    """{"pageable": Copy, "pinned": Copy} from the two profiles."""
    found = {}
    for label, case in run.value.items():
        prof = case["profile"]
        copies = prof.select(kind="memcpy", copy_kind="HtoD")
        found[label] = Copy(
            " and ".join(sorted({c.name for c in copies})),
            case["is_pinned"],
            trace.covered_us(copies),
            trace.host_blocked_us(prof.intervals, "cudaMemcpyAsync"),
            trace.host_blocked_us(prof.intervals, "Synchronize"),
        )
    return found


def part_of(part: float, whole: float, whole_words: str) -> str:
    """'0.7% of the GPU's copy time' or '1.02 times the GPU's copy time'."""
    share = part / whole
    return f"{share:.1%} of {whole_words}" if share < 1 else f"{share:.2f} times {whole_words}"


def show(run: Run) -> tables.Table:
    """A table of the two copies (us) and both timelines. Returns the table."""
    table = tables.Table(
        [
            "memory",
            "is_pinned()",
            "copy names",
            ("GPU copy", "us", ".0f"),
            ("host inside cudaMemcpyAsync", "us", ".0f"),
            ("call / copy", "x", ".3f"),
            ("host in synchronize", "us", ".0f"),
        ],
        [
            (label, c.is_pinned, c.names, c.copy_us, c.call_us, c.share, c.sync_us)
            for label, c in facts(run).items()
        ],
        title=plotting.machine_title("one H2D copy", run.machine, run.live),
        caption="one profiled copy of each kind; call / copy: the host's time inside "
        "cudaMemcpyAsync over the GPU's copy time",
    )
    size = timing.format_bytes(run.params["nbytes"])
    plotting.timelines(
        {
            f"one {size} H2D copy from {label} memory": c["profile"]
            for label, c in run.value.items()
        },
        title=plotting.machine_title(
            "H2D copies from pageable and pinned memory", run.machine, run.live
        ),
    )
    return table


def see(run: Run) -> claims.WhatWeSee:
    """The copies' names, the host inside ``cudaMemcpyAsync`` against the GPU's copy for each
    kind of memory, where the host waited for the pinned copy, and which copy was longer (us)."""
    f = facts(run)
    page, pin = f["pageable"], f["pinned"]
    longer = page.copy_us / pin.copy_us
    gpu_copy, copy_time = "the GPU's copy time", "the copy's time"
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"The profiler names the first copy `{page.names}` and the second `{pin.names}` "
        "(one profiled copy of each, so every number here is a single sample)."
    )
    seen.say(
        f"From pageable memory the host sat inside `cudaMemcpyAsync` for {page.call_us:.0f} us, "
        f"{part_of(page.call_us, page.copy_us, gpu_copy)} ({page.copy_us:.0f} us), "
        "although we passed `non_blocking=True`: "
        + (
            "the call returned only when (nearly) all the data had been staged."
            if page.share >= STAGED
            else "the call returned well before the copy ended, so here the driver did not stage (nearly) all of it first."
        )
    )
    seen.say(
        f"From pinned memory `cudaMemcpyAsync` took {pin.call_us:.0f} us, "
        f"{part_of(pin.call_us, pin.copy_us, copy_time)}, and the host waited "
        f"{pin.sync_us:.0f} us in the synchronize call instead, where we asked for it."
    )
    seen.say(
        f"On the GPU the pinned copy took {pin.copy_us:.0f} us against {page.copy_us:.0f} us from pageable "
        "memory: "
        + (
            f"the pageable copy took {longer:.1f} times as long as the pinned one."
            if longer > 1
            else f"the pinned copy took {1 / longer:.1f} times as long as the pageable one."
        )
    )
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The forum's claims: a pageable copy returns when (nearly) all of it is staged, a pinned one
    is queued and the host goes on (the host's share of the GPU's copy time)."""
    f = facts(run)
    table.add(
        "A copy from pageable memory does not return to the host until (nearly) all of it has been staged",
        source=FORUM,
        measured="time the host spent inside cudaMemcpyAsync over the pageable copy's GPU time "
        f"(non_blocking=True; one profiled copy, so no spread); 'nearly all': at least {STAGED}",
        holds=claims.compare(f["pageable"].share, STAGED, holds_if="above"),
        run=run,
    )
    table.add(
        "From pinned memory the copy is queued and the host goes on (pinned memory is the reliable way to async copies)",
        source=FORUM,
        measured="time the host spent inside cudaMemcpyAsync, as a share of the pinned copy's GPU time "
        f"(one profiled copy, so no spread); 'goes on': below {GOES_ON}",
        holds=claims.compare(f["pinned"].share, GOES_ON, holds_if="below"),
        run=run,
    )
