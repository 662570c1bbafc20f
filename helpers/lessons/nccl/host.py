"""Sections 2 and 4 of notebook 06: what each call gives back to the host, and when (ms)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import analysis, claims, plotting, tables, timing
from ...records import Run
from .common import ARTICLE, NOTEBOOK, where

P2P_CALLS: tuple[str, ...] = ("first recv", "recv", "irecv + wait()", "irecv + wait(timeout)")
P2P_CALLS += ("irecv + poll is_completed()",)
COLL_CALLS = ("all_reduce", "all_reduce(async_op=True) + wait()")
P2P_TITLE = "Point-to-point: when the host gets control back vs when the data has arrived"
COLL_TITLE = "all_reduce with the other rank late: host back vs data there"
PARTS = {"point-to-point": (P2P_CALLS, P2P_TITLE), "all_reduce": (COLL_CALLS, COLL_TITLE)}
COLUMNS = ["call", ("late by", "ms", ".1f"), ("call returned", "ms", ".3f")]
COLUMNS += [("host back", "ms", ".3f"), ("data there", "", ".0%")]
COLUMNS += [("synchronize() returned", "ms", ".1f")]
QUICK_BACK = 0.2  # "returns at once": the host is back within a fifth of the delay
HELD = 0.8  # "held until the data came": the host was held for at least this share of the delay
WARM_UP_TIMES = 10  # "much longer": the first recv takes at least this many times a later one
TIMES, FLAGS = ("returned_s", "waited_s", "done_s"), ("completed_at_return", "completed_by_poll")
BACK, DONE = "host got control back", "synchronize() returned"
P2P_ROWS, COLL_ROWS = (0, 1, 2, 3, 5, 6, 7), (4, 5, 8)  # claim_rows checked under sections 2 and 4
NO_GPU = "`synchronize()` has no GPU to wait for under gloo"
GLOO_WAITS = "With gloo, recv, irecv + wait() and irecv + wait(timeout) give the host back only once the data is there"


@dataclass(frozen=True)
class Call:
    """One call of a ``host_timing`` run over its ``n`` repeats (times in ms after the call)."""

    late_ms: float  # the other rank's delay
    returned: claims.Value  # when the call returned: median ± half the IQR
    waited: claims.Value  # when the host was back
    done: claims.Value  # when synchronize() returned
    arrived: float | None  # the share of repeats with the data there as the host went on
    at_return: list[bool] | None  # is_completed() right after the call (None: not asked)
    by_poll: list[bool] | None  # is_completed() by polling (None: not asked)
    n: int


def summary(run: Run, calls: Sequence[str] = P2P_CALLS + COLL_CALLS) -> dict[str, Call]:
    """Each of ``calls`` over its repeats; ValueError if a repeat received wrong data."""
    out = {}
    for call in calls:
        rows = [r for r in run.value if r["call"] == call]
        if not all(r["value_ok"] for r in rows):
            raise ValueError(f"{call}: the data received is wrong; this run cannot be read")
        times = [claims.measured(timing.Timing([r[k] for r in rows], "host clock")) for k in TIMES]
        ms = [claims.Value(v.value * 1e3, v.spread * 1e3, "ms", v.samples) for v in times]
        asked = {k for k, v in rows[0].items() if v is not None}  # the columns this call filled
        at_return, by_poll = ([bool(r[k]) for r in rows] if k in asked else None for k in FLAGS)
        asked -= {"arrived"} if rows[0].get("backend") == "gloo" else set()  # gloo: no GPU to ask
        arrived = statistics.mean(bool(r["arrived"]) for r in rows) if "arrived" in asked else None
        late = rows[0]["late_s"] * 1e3
        out[call] = Call(late, ms[0], ms[1], ms[2], arrived, at_return, by_poll, len(rows))
    return out


def show(gloo: Run, nccl: Run, part: str) -> None:
    """Per backend, ``part``'s table (``PARTS``; ms) and bars of host back vs ``synchronize()``."""
    calls, title = PARTS[part]
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.8))
    for ax, backend, run in zip(axes, ("gloo", "NCCL"), (gloo, nccl), strict=True):
        rows = summary(run, calls)
        others = " or ".join(map(str, sorted({s.n for c, s in rows.items() if c != "first recv"})))
        repeats = f"{others} repeats per call"
        if "first recv" in rows:
            repeats = f"first recv: {analysis.plural(rows['first recv'].n, 'call')}; every other call: {others} repeats"
        cells = [
            (c, s.late_ms, s.returned.value, s.waited.value, s.arrived, s.done.value)
            for c, s in rows.items()
        ]
        title_ = f"{run.params['backend']} ({where(run)}): median of the repeats"
        caption = f"{repeats}; data there: share of repeats where the data had arrived when the host went on"
        display(tables.Table(COLUMNS, cells, title=title_, caption=caption))
        for call, s in rows.items():
            if s.at_return is not None:
                said = f"{call}: is_completed() right after irecv returned: True in {sum(s.at_return)} of {s.n} repeats"
                polled = f";\n  polling it turned True within {4 * s.late_ms:.0f} ms in {sum(s.by_poll or [])} of {s.n}"
                print(said + (polled if s.by_poll else ""))
        groups = {
            c.replace(" + ", "\n+ "): {BACK: max(s.waited.value, 1e-3), DONE: s.done.value}
            for c, s in rows.items()
        }
        ylabel = "time after the call (ms, log scale)"
        plotting.grouped_bars(groups, title=f"{backend} ({where(run)})", ylabel=ylabel, ax=ax)
        ax.set_yscale("log")
        ax.set_ylim(1e-3, 5 * max(s.done.value for s in rows.values()))  # decades from 1 us up
        lates = sorted({s.late_ms for s in rows.values()})
        for late, style in zip(lates, ["--", ":"], strict=False):
            said = f"the other rank was late by {late:.0f} ms"
            ax.axhline(late, color="grey", linestyle=style, label=said)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        ax.tick_params(axis="x", labelsize=8, labelrotation=0)
    fig.suptitle(title)
    fig.tight_layout()
    plt.show()


def how_soon(s: Call, value: claims.Value) -> str:
    """When ``value`` gave the host back: 'at once (0.080 ms)' or 'only after 50.8 ms with...'."""
    if value.value < QUICK_BACK * s.late_ms:
        return f"at once ({value.value:.3f} ms)"
    there = "" if s.arrived is None else " with the data there"
    there += "" if s.arrived in (None, 1) else f" in {s.arrived:.0%} of repeats"
    return f"only after {value.value:.1f} ms{there}"


def repeats(s: Call) -> str:
    return "one call" if s.n == 1 else f"medians of {s.n} repeats"


def see_point_to_point(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """When each recv gave the host back (ms), NCCL's first recv, gloo's three waits checked."""
    seen, waits = claims.WhatWeSee(NOTEBOOK, nccl), P2P_CALLS[1:4]
    g, s = summary(gloo, P2P_CALLS), summary(nccl, P2P_CALLS)
    for backend, run, c in (("gloo", gloo, g), ("NCCL", nccl, s)):
        back = "; ".join(f"`{w}` gave the host back {how_soon(c[w], c[w].waited)}" for w in waits)
        late = f"a sender {c['recv'].late_ms:.0f} ms late ({repeats(c['recv'])})"
        done = f"`synchronize()` returned after {c['recv'].done.value:.1f} ms" if c is s else NO_GPU
        seen.say(f"With {backend} ({where(run)}), against {late}: {back}; {done}.")
    one, later = s["first recv"], s["recv"].returned.value
    not_yet = "not there yet: it did not wait for the transfer"
    there = "already there" if one.arrived == 1 else not_yet
    took = f"{one.returned.value:.1f} ms, {one.returned.value / later:.0f} times a later one's {later:.3f} ms"
    first = f"NCCL's very first `recv` (one call, sender {one.late_ms:.0f} ms late) returned after"
    seen.say(f"{first} {took}, with the data {there}.")
    held = all(g[c].waited.value >= HELD * g[c].late_ms for c in waits)
    said = "; ".join(f"{c}: {g[c].waited.value:.1f} ms" for c in waits)
    said += f" (threshold: {HELD:.0%} of the delay); the value read right after was the one sent"
    seen.check(GLOO_WAITS, held, f"{said}; {repeats(g['recv'])}", run=gloo)
    return check_claims(seen, nccl, P2P_ROWS)


def check_claims(seen: claims.WhatWeSee, run: Run, rows: Sequence[int]) -> claims.WhatWeSee:
    """Says the claims table's verdict of each source statement ``rows`` (indices of ``claim_rows``)."""
    said, head = [], "The source's statements, as the claims table below judges them: "
    for text, (_, holds) in (list(claim_rows(run).items())[i] for i in rows):
        j = claims.judged(holds, run, NOTEBOOK, text)
        v = claims.stated(j, run) if isinstance(j, claims.Comparison) else claims.as_verdict(j)
        said.append(f"“{text}”: **{v}**")
    return seen.say(f"{head}{'; '.join(said)}.")


def see_collective_timing(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """When each all_reduce and its wait() gave the host back, per backend (ms)."""
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for backend, run in (("gloo", gloo), ("NCCL", nccl)):
        b, a = summary(run, COLL_CALLS).values()
        done = f"`synchronize()` returned after {max(b.done.value, a.done.value):.1f} ms"
        seen.say(
            f"With {backend} ({where(run)}), the other rank {b.late_ms:.0f} ms late ({repeats(b)}): "
            f"the blocking `all_reduce` gave the host back {how_soon(b, b.returned)}; with "
            f"`async_op=True` the call returned {how_soon(a, a.returned)} and `work.wait()` gave "
            f"the host back {how_soon(a, a.waited)}; {done if run is nccl else NO_GPU}."
        )
    return check_claims(seen, nccl, COLL_ROWS)


def waits_for_data(run: Run, calls: list[str]) -> str:
    """Of ``calls``, the one whose host most often went on with the data already there."""
    s = summary(run, calls)
    return max(calls, key=lambda c: s[c].arrived or 0)


def claim_rows(host: Run) -> dict[str, tuple[str, claims.Comparison | bool]]:
    """{source's statement: (what is measured, its comparison or bool)}, from NCCL's host timings."""
    s = summary(host)
    first, recv, wait, timeout, poll = (s[c] for c in P2P_CALLS)
    blocking, async_ = (s[c] for c in COLL_CALLS)
    late, flags = recv.late_ms, [f for c in (wait, timeout, poll) for f in c.at_return or []]
    times = claims.ratio(first.returned, recv.returned)  # the first recv over a later one

    def held(value: claims.Value) -> claims.Comparison:
        return claims.compare(value, HELD * late, holds_if="above")

    def quick(value: claims.Value, *absent: Call) -> claims.Comparison | bool:
        """Back within a fifth of the delay, and (for ``absent``) with the data never there."""
        never = all(c.arrived == 0 for c in absent)
        return claims.compare(value, QUICK_BACK * late, holds_if="below") if never else False

    fifth = f"threshold: a fifth of the sender's {late:.0f} ms delay"
    polled = quick(poll.waited) if all(poll.by_poll or [False]) else False
    return {
        "A blocking recv of a CUDA tensor (NCCL, after the first) returns once the receive is enqueued, before the data has arrived": (
            f"recv's return (ms; {fifth}); the data came {recv.done.value:.1f} ms after the call, there at return in {recv.arrived:.0%} of {recv.n}",
            quick(recv.returned, recv),
        ),
        "The very first recv blocks much longer than later ones (NCCL warm-up)": (
            f"first recv's return (one call) over a later one's (median of {recv.n}; threshold: {WARM_UP_TIMES} times): "
            f"{first.returned.value:.1f} against {recv.returned.value:.3f} ms; the ± is the later ones' spread alone (one first call has none)",
            claims.compare(times, WARM_UP_TIMES, holds_if="above"),
        ),
        "The very first recv waits for the transfer to complete": (
            f"first recv's return (ms, one call, no spread; threshold: the sender's delay); the data was "
            f"{'already there' if first.arrived else 'not there yet'} when it returned",
            claims.compare(first.returned, first.late_ms, holds_if="above"),
        ),
        "isend/irecv return immediately; the transfer goes on in the background": (
            f"the slowest irecv kind's return (ms; {fifth}); isend's return is not timed (rank 0 calls isend(...).wait())",
            quick(max((c.returned for c in (wait, timeout, poll)), key=lambda v: v.value)),
        ),
        "A blocking collective (async_op=False) returns once it is enqueued; the host does not wait for the transfer": (
            f"all_reduce's return (ms; threshold: a fifth of the other rank's {late:.0f} ms delay); data there in {blocking.arrived:.0%} of repeats",
            quick(blocking.returned, blocking),
        ),
        "work.wait() blocks the host only until the operation is enqueued, not until the data has arrived": (
            f"host back after wait(), the slower of irecv and all_reduce(async_op=True) (ms; threshold: a fifth of "
            f"the delay); data there in {wait.arrived:.0%} and {async_.arrived:.0%} of repeats",
            quick(max(wait.waited, async_.waited, key=lambda v: v.value), wait, async_),
        ),
        "work.wait(timeout) blocks the host until the operation ends (or the timeout passes)": (
            f"host back after irecv + wait(timeout) (ms; threshold: {HELD:.0%} of the sender's {late:.0f} ms delay); data there in {timeout.arrived:.0%} of repeats",
            held(timeout.waited) if timeout.arrived == 1 else False,
        ),
        "work.is_completed() is True once the operation is enqueued; it does not mean the data has arrived": (
            f"is_completed() right after irecv returned: True in {sum(flags)} of {len(flags)} calls; polled, the time until it "
            f"turned True (ms; threshold: a fifth of the {late:.0f} ms delay), True in the end in {sum(poll.by_poll or [])} of {poll.n} repeats",
            True if any(flags) else polled,
        ),
        "An NCCL operation waits for the work queued before it on the current stream": (
            f"synchronize() on the punctual rank, the earlier of blocking and async all_reduce (ms; threshold: {HELD:.0%} of the late rank's {late:.0f} ms spin kernel)",
            held(min(blocking.done, async_.done, key=lambda v: v.value)),
        ),
        "torch.cuda.synchronize() blocks the host until all queued GPU work has finished": (
            f"after recv, when synchronize() returned (ms; threshold: {HELD:.0%} of the data's {late:.0f} ms delay)",
            held(recv.done),
        ),
    }


def add_claims(table: claims.ClaimsTable, host: Run) -> None:
    """What each call gives back to the host, from NCCL's host timings (ms against the delay)."""
    for text, (measured, holds) in claim_rows(host).items():
        table.add(text, source=ARTICLE, measured=measured, holds=holds, run=host)
