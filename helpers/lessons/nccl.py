"""What notebook 06 shows of its ranks: the seven collectives and the data each rank holds after
them, what each point-to-point call and each ``all_reduce`` gives back to the host and when, where
the host stops when a ``send`` is missing, and what ``work.wait(timeout)`` does with no ``send``.

The overlap of an asynchronous ``all_reduce`` with computation and the bandwidth sweep are in
``nccl_speed``; the claims table in ``nccl_claims``; the numbers and facts behind the tables and
sentences in ``nccl_analysis`` (re-exported here). Every function takes the notebook's runs
(``records.Run``, live or replayed: the gloo runs are measured live on every machine) and measures
nothing. Tested on every recorded machine in tests/test_lesson_06.py.
"""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, config, plotting, tables
from ..records import Run
from .nccl_analysis import (
    COLL_CALLS,
    HELD,
    MODES,  # noqa: F401  re-exported for the tests
    NEXT_LINE,
    P2P_CALLS,
    QUICK_BACK,
    expected_after,  # noqa: F401  re-exported for the tests
    mismatches,
    reached_wait,
    stopped_at,
    stops,
    summary,
    wait_timeout_outcome,
)

NOTEBOOK = "06_nccl_point_to_point_and_collectives"
CALLS = {  # how the notebook calls each collective, shown left of its row in the drawing
    "broadcast": "broadcast(tensor, src=0)",
    "scatter": "scatter(tensor, scatter_list, src=0)",
    "reduce": "reduce(tensor, dst=0, op=SUM)",
    "gather": "gather(t, gather_list, dst=0)",
    "all_reduce": "all_reduce(tensor, op=SUM)",
    "all_gather": "all_gather(tensor_list, input_tensor)",
    "reduce_scatter": "reduce_scatter(output, input_list)",
}
ON_TIME_SHARE = (
    0.25  # a wait(timeout) that raised within this share of its timeout raised "as it came due"
)


def where(run: Run) -> str:
    """``run.where()``, and for a live run in quick mode ", quick mode": its sizes, repeats and
    deadlines are the small ones (the sentences and tables say how many repeats)."""
    return run.where() + (", quick mode" if run.live and config.quick_mode() else "")


def where_it_runs(gpus: int, max_ranks: int) -> str:
    """A sentence on which experiments run live on this machine (``gpus`` GPUs, NCCL on at most
    ``max_ranks`` of them) and which replay recordings.
    """
    nccl = f"run live, on up to {min(gpus, max_ranks)} ranks" if gpus >= 2 else "replay recordings"
    return (
        f"This machine has {gpus} GPU(s): the NCCL experiments (two GPUs or more) {nccl};\n"
        "the gloo experiments run live on this machine's CPU."
    )


# ---------------------------------------------------------------- 1. the seven collectives


def show_ranks(*runs: Run) -> None:
    """Prints, for each ``seven_collectives`` run, who each rank was: rank, world size, backend,
    device, process id and the store's port. Returns nothing.
    """
    for run in runs:
        print(f"{run.params['backend']} ({where(run)}):")
        for who in run.value["who"]:
            print("   ", ", ".join(f"{key}={value}" for key, value in who.items()))


def show_collectives(*runs: Run) -> None:
    """Draws, for each ``seven_collectives`` run, every rank's data before and after each blocking
    collective, and prints whether every rank holds what the source says (blocking and
    ``async_op=True``) and what ``reduce`` left on rank 1, which is not its destination. Returns
    nothing.
    """
    for run in runs:
        drawn = {
            name: {**data, "call": CALLS[name]} for name, data in run.value["blocking"].items()
        }
        plotting.draw_before_after(
            drawn,
            title=plotting.machine_title(
                f"Seven collectives, {run.params['backend']}, {len(run.value['who'])} ranks",
                run.machine,
                run.live,
            ),
        )
        plt.show()
        wrong = mismatches(run)
        print(
            f"{run.params['backend']}: every rank holds what the source says after all seven, blocking and "
            f"async_op=True: {not wrong}" + "".join(f"\n  {w}" for w in wrong)
        )
        reduce_data = run.value["blocking"]["reduce"]
        print(
            f"  reduce, on the rank that is not the destination, holds afterwards: "
            f"{reduce_data['after'][1]} (it had {reduce_data['before'][1]})"
        )


def see_collectives(nccl: Run, gloo: Run) -> claims.WhatWeSee:
    """What the seven collectives show, for each backend: where the ranks ran (devices, processes,
    one store port), whether every rank holds what the source says, and whether ``reduce`` left
    rank 1's buffer as it was.
    """
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for run in (nccl, gloo):
        who, backend = run.value["who"], run.params["backend"]
        pids, ports = {w["pid"] for w in who}, {w["MASTER_PORT"] for w in who}
        wrong = mismatches(run)
        devices = [w["device"] for w in who]
        placed = (
            "on " + ", ".join(devices)
            if len(set(devices)) == len(devices)
            else "all on " + devices[0]
        )
        processes = "each in a process of its own" if len(pids) == len(who) else "sharing a process"
        port = "met at one store port" if len(ports) == 1 else "at different ports"
        result = (
            "every rank holds what the source says after all seven collectives, blocking and async_op=True."
            if not wrong
            else f"{len(wrong)} results differ from what the source says."
        )
        seen.say(f"{backend} ({where(run)}): the ranks ran {placed}, {processes}, {port}; {result}")
        reduce_data = run.value["blocking"]["reduce"]
        other_before, other_after = reduce_data["before"][1], reduce_data["after"][1]
        seen.say(
            f"After `reduce`, {backend}'s rank 1 (not the destination) holds {other_after}, "
            + (
                "what it had before."
                if other_after == other_before
                else f"no longer its own {other_before}: the backend used the buffer on the way."
            )
        )
    return seen


# ---------------------------------------------------------------- 2 and 4. what returns when


def _show_summary(run: Run, calls: list[str]) -> dict[str, dict[str, Any]]:
    """The summary of ``calls`` as a table, and what is_completed() said; returns the summary."""
    rows = summary(run, calls)
    counts = {s["n"] for call, s in rows.items() if call != "first recv"}
    repeats = " or ".join(str(n) for n in sorted(counts)) + " repeats"
    if "first recv" in rows:
        repeats = f"first recv: {analysis.plural(rows['first recv']['n'], 'call')}; every other call: {repeats}"
    else:
        repeats += " per call"
    shown = tables.Table(
        [
            "call",
            ("late by", "ms", ".1f"),
            ("call returned", "ms", ".3f"),
            ("host back", "ms", ".3f"),
            ("data there", "", ".0%"),
            ("synchronize() returned", "ms", ".1f"),
        ],
        title=f"{run.params['backend']} ({where(run)}): median of the repeats",
        caption=(
            f"{repeats}; data there: share of repeats where the data had arrived when the "
            "host went on"
        ),
    )
    for call, s in rows.items():
        shown.add(call, s["late_ms"], s["returned_ms"], s["waited_ms"], s["arrived"], s["done_ms"])
    display(shown)
    for call, s in rows.items():
        if s["completed_at_return"] is not None:
            print(
                f"{call}: is_completed() right after irecv returned: "
                f"True in {sum(s['completed_at_return'])} of {s['n']} repeats"
                + (
                    f";\n  polling it turned True within {4 * s['late_ms']:.0f} ms in "
                    f"{sum(s['completed_by_poll'])} of {s['n']}"
                    if s["completed_by_poll"]
                    else ""
                )
            )
    return rows


def _host_vs_data_bars(summaries: dict[str, dict[str, dict[str, Any]]], title: str) -> None:
    """Bars of when the host got control back and when synchronize() returned, log scale."""
    fig, axes = plt.subplots(1, len(summaries), figsize=(7 * len(summaries), 4.8), squeeze=False)
    for ax, (label, table) in zip(axes[0], summaries.items(), strict=True):
        groups = {
            call.replace(" + ", "\n+ "): {
                "host got control back": max(s["waited_ms"], 1e-3),
                "synchronize() returned": s["done_ms"],
            }
            for call, s in table.items()
        }
        plotting.grouped_bars(
            groups, title=label, ylabel="time after the call (ms, log scale)", ax=ax
        )
        ax.set_yscale("log")
        ax.set_ylim(1e-3, 5 * max(s["done_ms"] for s in table.values()))  # decades from 1 us up
        for late, style in zip(
            sorted({s["late_ms"] for s in table.values()}), ["--", ":"], strict=False
        ):
            ax.axhline(
                late,
                color="grey",
                linestyle=style,
                label=f"the other rank was late by {late:.0f} ms",
            )
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        ax.tick_params(axis="x", labelsize=8, labelrotation=0)
    fig.suptitle(title)
    fig.tight_layout()
    plt.show()


def show_point_to_point(gloo: Run, nccl: Run) -> None:
    """Shows, for gloo and NCCL, a table of each point-to-point call (ms: the delay, when the call
    returned, when the host got control back, when ``synchronize()`` returned; the share of
    repeats with the data there), prints what ``is_completed()`` said, and draws the host's times
    against ``synchronize()``'s on a log scale. Returns nothing.
    """
    summaries = {
        f"gloo ({where(gloo)})": _show_summary(gloo, P2P_CALLS),
        f"NCCL ({where(nccl)})": _show_summary(nccl, P2P_CALLS),
    }
    _host_vs_data_bars(
        summaries, "Point-to-point: when the host gets control back vs when the data has arrived"
    )


def how_soon(s: dict[str, Any], key: str = "waited_ms") -> str:
    """When one call of a ``summary`` gave the host back, in words with its ms: 'at once (0.080 ms)'
    (within a fifth of the delay) or 'only after 50.8 ms with the data there'.
    """
    ms = s[key]
    if ms < QUICK_BACK * s["late_ms"]:
        return f"at once ({ms:.3f} ms)"
    there = (
        ""
        if s["arrived"] is None
        else (
            " with the data there"
            if s["arrived"] == 1
            else f" with the data there in {s['arrived']:.0%} of repeats"
        )
    )
    return f"only after {ms:.1f} ms{there}"


def _repeats(s: dict[str, Any]) -> str:
    return "one call" if s["n"] == 1 else f"medians of {s['n']} repeats"


def see_point_to_point(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """What the point-to-point calls show: when ``recv``, ``irecv + wait()`` and ``irecv +
    wait(timeout)`` gave the host back (ms, against the sender's delay) under each backend, how
    much longer NCCL's very first ``recv`` took than a later one, and a check that under gloo all
    three hold the host until the data is there.
    """
    p2p_gloo, p2p_nccl = summary(gloo, P2P_CALLS), summary(nccl, P2P_CALLS)
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for backend, run, table in (("gloo", gloo, p2p_gloo), ("NCCL", nccl, p2p_nccl)):
        seen.say(
            f"With {backend} ({where(run)}), against a sender {table['recv']['late_ms']:.0f} ms late "
            f"({_repeats(table['recv'])}): "
            + "; ".join(
                f"`{call}` gave the host back {how_soon(table[call])}" for call in P2P_CALLS[1:4]
            )
            + f"; `synchronize()` returned after {table['recv']['done_ms']:.1f} ms."
        )
    first, later = p2p_nccl["first recv"], p2p_nccl["recv"]
    seen.say(
        f"NCCL's very first `recv` (one call, sender {first['late_ms']:.0f} ms late) returned after "
        f"{first['returned_ms']:.1f} ms, {first['returned_ms'] / later['returned_ms']:.0f} times a later one's "
        f"{later['returned_ms']:.3f} ms, "
        + (
            "with the data already there."
            if first["arrived"] == 1
            else "with the data not there yet: it did not wait for the transfer."
        )
    )
    seen.check(
        "With gloo, recv, irecv + wait() and irecv + wait(timeout) give the host back only once the data is there",
        all(
            p2p_gloo[c]["arrived"] == 1
            and p2p_gloo[c]["waited_ms"] >= HELD * p2p_gloo[c]["late_ms"]
            for c in P2P_CALLS[1:4]
        ),
        "; ".join(
            f"{c}: {p2p_gloo[c]['waited_ms']:.1f} ms, data there {p2p_gloo[c]['arrived']:.0%}"
            for c in P2P_CALLS[1:4]
        )
        + f"; {_repeats(p2p_gloo['recv'])}",
        run=gloo,
    )
    return seen


def waits_for_data(run: Run, calls: list[str]) -> str:
    """Of ``calls`` of a ``host_timing`` run, the one whose host most often went on with the data
    already there (the highest 'data there' share).
    """
    rows = summary(run, calls)
    return max(calls, key=lambda c: rows[c]["arrived"])


def show_collective_timing(gloo: Run, nccl: Run) -> None:
    """Shows, for gloo and NCCL, the table of ``all_reduce`` blocking and ``async_op=True`` +
    ``wait()`` with the other rank late (ms), and bars of when the host got control back against
    when ``synchronize()`` returned. Returns nothing.
    """
    summaries = {
        f"gloo ({where(gloo)})": _show_summary(gloo, COLL_CALLS),
        f"NCCL ({where(nccl)})": _show_summary(nccl, COLL_CALLS),
    }
    _host_vs_data_bars(summaries, "all_reduce with the other rank late: host back vs data there")


def see_collective_timing(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """What the timed ``all_reduce`` calls show under each backend: when the blocking call, the
    ``async_op=True`` call and its ``work.wait()`` gave the host back, and when ``synchronize()``
    returned (ms, against the other rank's delay).
    """
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for backend, run in (("gloo", gloo), ("NCCL", nccl)):
        table = summary(run, COLL_CALLS)
        blocking, async_ = table["all_reduce"], table["all_reduce(async_op=True) + wait()"]
        seen.say(
            f"With {backend} ({where(run)}), the other rank {blocking['late_ms']:.0f} ms late "
            f"({_repeats(blocking)}): the "
            f"blocking `all_reduce` gave the host back {how_soon(blocking, 'returned_ms')}; with "
            f"`async_op=True` the call returned {how_soon(async_, 'returned_ms')} and `work.wait()` gave the "
            f"host back {how_soon(async_)}; `synchronize()` returned after "
            f"{max(blocking['done_ms'], async_['done_ms']):.1f} ms."
        )
    return seen


# ---------------------------------------------------------------- 3. the missing send


def stopped_line(run: Run, warm_up: bool) -> str:
    """Where rank 1's host stopped in the case of a ``missing_send`` run with (or without) the
    warm-up: the line of the source's example.
    """
    return stopped_at(next(c for c in run.value if c["warm_up"] == warm_up), 1)


def _case_name(run: Run, case: dict[str, Any]) -> str:
    return f"{run.params['backend']}, {'after a warm-up' if case['warm_up'] else 'no warm-up'}"


def show_missing_send(*runs: Run) -> None:
    """Prints each case of the ``missing_send`` runs: how the launch ended, how long the ranks ran
    (s) against the deadline, each rank's status, the marks it reached (s after its worker
    started) and what it printed, and the line where rank 1's host stopped. Returns nothing.
    """
    for run in runs:
        for case in run.value:
            print(
                f"{_case_name(run, case)} ({where(run)}):\n  {case['reason']};\n  the ranks ran "
                f"{case['elapsed_s']:.2f} s against a deadline of {case['timeout_s']:g} s"
            )
            for rank in (0, 1):
                reached = ", ".join(f"{label!r} at {t:.3f} s" for t, label in case["marks"][rank])
                printed = " | ".join(
                    line for line in case["printed"][rank].splitlines() if line.strip()
                )
                print(
                    f"  rank {rank}: {case['status'][rank]}; reached {reached};\n    printed: {printed or '(nothing)'}"
                )
            print(f"  -> rank 1's host stopped at: {stopped_at(case, 1)}\n")


def see_missing_send(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """What the missing ``send`` shows: the line where rank 1's host stopped in each case, and
    checks that no case outlasted its deadline by a second or more and that each backend and
    warm-up stopped where the notebook says.
    """
    stop = stops(gloo, nccl)
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    cases = [(run, case) for run in (gloo, nccl) for case in run.value]
    seen.say(
        "Rank 1's host stopped at (one run of each case): "
        + "; ".join(
            f"`{stop[(run.params['backend'], case['warm_up'])]}` ({_case_name(run, case)}, {where(run)})"
            for run, case in cases
        )
        + "."
    )
    longest = max(case["elapsed_s"] - case["timeout_s"] for _, case in cases)
    seen.check(
        "No case outlasts its deadline: the hang is real, but bounded, and the notebook goes on",
        longest < 1.0,
        f"the longest case ran {longest:+.2f} s past its deadline",
        run=gloo,
    )
    seen.check(
        "After a warm-up, NCCL's recv returns and the host stops at print(t)",
        stop[("nccl", True)] == "print(t)",
        f"stopped at {stop[('nccl', True)]}",
    )
    if ("nccl", False) in stop:
        seen.check(
            "Without the warm-up, NCCL's first recv itself blocks",
            stop[("nccl", False)] == NEXT_LINE["start"],
            f"stopped at {stop[('nccl', False)]}",
        )
    seen.check(
        "Under gloo the host stops at the recv line",
        stop[("gloo", True)] == NEXT_LINE["start"],
        f"stopped at {stop[('gloo', True)]}",
        run=gloo,
    )
    return seen


# ---------------------------------------------------------------- 3. wait(timeout) with no send


def show_wait_timeout(*runs: Run) -> None:
    """Prints, for each ``wait_timeout_without_send`` run, what rank 1's ``wait(timeout)`` did
    (raised, returned or was stopped, after how many seconds, with the error's first line).
    Returns nothing.
    """
    for run in runs:
        print(
            textwrap.fill(
                f"{run.params['backend']} ({where(run)}): {wait_timeout_outcome(run)[1]}",
                100,
                subsequent_indent="  ",
                break_long_words=True,
            )
        )


def see_wait_timeout(gloo: Run, nccl: Run) -> claims.WhatWeSee:
    """What ``wait(timeout)`` with no ``send`` shows under each backend (one run each): when the
    wait raised (s after it began, against its timeout), or that it neither raised nor returned.
    """
    seen = claims.WhatWeSee(NOTEBOOK, nccl)
    for run in (gloo, nccl):
        raised, sentence, waited = wait_timeout_outcome(run)
        timeout_s = run.params["wait_timeout_s"]
        if raised:
            when = (
                "as the timeout came due"
                if abs(waited - timeout_s) <= ON_TIME_SHARE * timeout_s
                else f"{'before' if waited < timeout_s else 'well after'} its timeout of {timeout_s:g} s"
            )
            seen.say(
                f"{run.params['backend']} ({where(run)}, one run): the wait raised {waited:.2f} s after it began, {when}, "
                "and the host went on."
            )
        elif reached_wait(run):
            seen.say(
                f"{run.params['backend']} ({where(run)}, one run): {sentence}. The timeout given to `wait()` did not, by "
                "itself, give the host back."
            )
        else:
            seen.say(f"{run.params['backend']} ({where(run)}, one run): {sentence}.")
    return seen
