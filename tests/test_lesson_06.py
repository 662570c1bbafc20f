"""Notebook 06's analysis (helpers/lessons/nccl/) on the NCCL recordings of every recorded machine, on gloo runs built here by hand
(the notebook measures them live, they are never recorded), on one real gloo launch of
``wait(timeout)`` with no ``send``, and on synthetic values for the branches the recordings do not
reach.

Each sentence's numbers and words are checked against values computed here from ``run.value``.
"""

import dataclasses
import re
import statistics
from datetime import timedelta

import matplotlib.pyplot as plt
import pytest
import torch
import torch.distributed as dist

from helpers import analysis, claims, distributed, records, timing, trace
from helpers.lessons import nccl
from helpers.lessons.nccl import collectives, common, hangs, host, speed

NOTEBOOK = "06_nccl_point_to_point_and_collectives"
NAMES = (
    "seven_collectives_nccl",
    "host_timing_nccl",
    "missing_send_nccl",
    "wait_timeout_nccl",
    "overlap",
    "bandwidth",
)
RUNS = {name: records.recorded_runs(NOTEBOOK, name) for name in NAMES}
HOST, MISS, OVERLAP = RUNS["host_timing_nccl"], RUNS["missing_send_nccl"], RUNS["overlap"]
COLL, WAIT, BW = RUNS["seven_collectives_nccl"], RUNS["wait_timeout_nccl"], RUNS["bandwidth"]
MACHINES = sorted(HOST)
NUMBER = r"([-+]?\d+(?:\.\d+)?)"
RECV_LINE, PRINT_LINE, FINISHED = (
    "torch.distributed.recv(t, src=0)",
    "print(t)",
    "nothing: it finished",
)
P2P = [
    "first recv",
    "recv",
    "irecv + wait()",
    "irecv + wait(timeout)",
    "irecv + poll is_completed()",
]
CLAIMS = [
    "A blocking recv of a CUDA tensor (NCCL, after the first) returns once the receive is enqueued, before the data "
    "has arrived",
    "The very first recv blocks much longer than later ones (NCCL warm-up)",
    "The very first recv waits for the transfer to complete",
    "isend/irecv return immediately; the transfer goes on in the background",
    "A blocking collective (async_op=False) returns once it is enqueued; the host does not wait for the transfer",
    "work.wait() blocks the host only until the operation is enqueued, not until the data has arrived",
    "work.wait(timeout) blocks the host until the operation ends (or the timeout passes)",
    "work.is_completed() is True once the operation is enqueued; it does not mean the data has arrived",
    "An NCCL operation waits for the work queued before it on the current stream",
    "torch.cuda.synchronize() blocks the host until all queued GPU work has finished",
    "work.wait(timeout) raises an exception once the timeout passes, if the operation has not ended (nccl)",
    "work.wait(timeout) raises an exception once the timeout passes, if the operation has not ended (gloo)",
    "A recv without a send hangs the receiver; after warm-up recv returns and the host stops at print(t)",
    "Without warm-up, the first recv itself blocks (the warm-up line is not printed)",
    "The seven collectives leave each rank the data the source shows (nccl)",
    "The seven collectives leave each rank the data the source shows (gloo)",
    "A blocking collective holds back the work queued after it on the current stream (no overlap)",
    "Asynchronous operations let communication overlap computation",
    "NCCL finds the fastest path between the GPUs: busbw close to the link's ceiling",
]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(autouse=True)
def _full_size(monkeypatch):
    """The sentences of a live part say ", quick mode" in quick mode (make test sets
    COURSE_QUICK=1); these tests read them as a full-size run's unless they set it themselves."""
    monkeypatch.setenv("COURSE_QUICK", "0")


def fake_run(value, live=False, machine="2xFAKE", **params):
    return records.Run(
        value, live, {"machine": {"machine": machine}, "params": params, "date": "2026-01-01"}
    )


def gloo_run(value, **params):
    return fake_run(value, live=True, machine="cpu-only", backend="gloo", **params)


def numbers(pattern, text):
    """The numbers of the first match of ``pattern`` (written with NUMBER groups) in ``text``."""
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return [float(g) for g in match.groups()]


def ms(run, call, key):
    """Median of one column of a host_timing run, in ms, computed here."""
    return statistics.median(r[key] for r in run.value if r["call"] == call) * 1e3


def arrived(run, call):
    rows = [r for r in run.value if r["call"] == call]
    return sum(bool(r["arrived"]) for r in rows) / len(rows)


def test_every_machine_that_recorded_06_is_tested():
    assert MACHINES == ["2xNVIDIA-H100-80GB-HBM3", "2xNVIDIA-H200", "4xNVIDIA-H200"]
    assert sorted(MISS) == sorted(OVERLAP) == MACHINES
    assert sorted(COLL) == sorted(WAIT) == sorted(BW) == MACHINES


def test_where_it_runs_says_live_or_replayed_and_how_many_ranks(monkeypatch):
    monkeypatch.delenv("COURSE_QUICK", raising=False)
    assert "replay full-size recordings" in nccl.where_it_runs(
        0, 8
    ) and "replay full-size recordings" in nccl.where_it_runs(1, 8)
    assert "gloo experiments run live on this machine's CPU, at full size" in nccl.where_it_runs(
        0, 8
    )
    monkeypatch.setenv("COURSE_QUICK", "1")
    assert "CPU, in quick mode (fewer repeats" in nccl.where_it_runs(0, 8)
    assert "run live, on up to 4 ranks" in nccl.where_it_runs(4, 8)
    assert "run live, on up to 8 ranks" in nccl.where_it_runs(16, 8)
    assert "This machine has 16 GPU(s)" in nccl.where_it_runs(16, 8)


# ---------------------------------------------------------------- 1. the seven collectives


def simulated_collectives(n, reduce_scratch=False):
    """What n ranks hold before and after each collective, computed element by element here; with
    ``reduce_scratch`` the non-destination ranks of reduce hold a partial sum, as gloo leaves them."""
    data = {}
    data["broadcast"] = {"before": [[1, 2, 3]] + [[0, 0, 0]] * (n - 1), "after": [[1, 2, 3]] * n}
    pieces = [[i, i + 1] for i in range(0, 2 * n, 2)]
    data["scatter"] = {"before": [pieces] + [None] * (n - 1), "after": pieces}
    own = [[r + 1, r + 2, r + 3] for r in range(n)]
    summed = [sum(own[r][k] for r in range(n)) for k in range(3)]
    partial = [[sum(own[q][k] for q in range(r, n)) for k in range(3)] for r in range(n)]
    data["reduce"] = {
        "before": own,
        "after": [summed] + (partial[1:] if reduce_scratch else own[1:]),
    }
    gathered = [[r, r + 1, r + 2] for r in range(n)]
    data["gather"] = {"before": gathered, "after": [gathered] + [None] * (n - 1)}
    data["all_reduce"] = {
        "before": [[float(x) for x in o] for o in own],
        "after": [[float(x) for x in summed]] * n,
    }
    data["all_gather"] = {
        "before": [[float(r)] for r in range(n)],
        "after": [[[float(r)] for r in range(n)]] * n,
    }
    inputs = [[[float(r + i)] for i in range(n)] for r in range(n)]
    data["reduce_scatter"] = {
        "before": inputs,
        "after": [[sum(inputs[r][i][0] for r in range(n))] for i in range(n)],
    }
    return data


def gloo_collectives(n=4, reduce_scratch=True, pids=None, ports=None):
    who = [
        {
            "rank": r,
            "world_size": n,
            "backend": "gloo",
            "device": "cpu",
            "pid": (pids or list(range(100, 100 + n)))[r],
            "MASTER_PORT": (ports or [5000] * n)[r],
        }
        for r in range(n)
    ]
    data = simulated_collectives(n, reduce_scratch)
    return gloo_run(
        {"who": who, "blocking": data, "async_op=True": simulated_collectives(n, reduce_scratch)},
        max_world_size=n,
    )


@pytest.mark.parametrize("machine", sorted(COLL))
def test_the_recorded_collectives_hold_what_the_source_says(machine):
    run = COLL[machine]
    n = len(run.value["who"])
    assert collectives.facts(run).wrong == []
    for mode in collectives.MODES:
        for name, data in simulated_collectives(n).items():
            if name not in ("reduce", "gather"):
                assert run.value[mode][name]["after"] == data["after"], (mode, name)
            assert run.value[mode][name]["after"][0] == data["after"][0], (mode, name)


def test_mismatches_finds_a_wrong_rank_and_ignores_the_ranks_that_are_not_the_destination():
    run = gloo_collectives(2)
    assert collectives.facts(run).wrong == []
    run.value["blocking"]["all_reduce"]["after"][1] = [0, 0, 0]
    run.value["async_op=True"]["reduce"]["after"][1] = [
        9,
        9,
        9,
    ]  # not the destination: anything goes
    run.value["async_op=True"]["gather"]["after"][1] = [[1]]
    assert collectives.facts(run).wrong == ["blocking all_reduce rank 1: [0, 0, 0] != [3, 5, 7]"]
    run.value["async_op=True"]["gather"]["after"][0] = [[0, 1, 2]]
    assert len(collectives.facts(run).wrong) == 2


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_expected_after_agrees_with_the_element_by_element_simulation(n):
    for name, data in simulated_collectives(n).items():
        for rank in range(n):
            want = collectives.expected_after(name, rank, n)
            if want is None:
                assert name in ("reduce", "gather") and rank > 0
            else:
                assert want == data["after"][rank], (name, rank)


@pytest.mark.parametrize("machine", sorted(COLL))
def test_the_collectives_sentences_say_where_the_ranks_ran_and_what_reduce_left(machine, capsys):
    run, gloo = COLL[machine], gloo_collectives(4)
    collectives.show_ranks(gloo, run)
    collectives.show(gloo, run)
    out = capsys.readouterr().out
    assert out.count("rank=") == 4 + len(run.value["who"]) and "pid=100" in out
    for r in (gloo, run):  # each run's ranks under its backend and where it ran
        assert f"{r.params['backend']} ({common.where(r)}):" in out
    assert out.count("after all seven, blocking and async_op=True: True") == 2
    assert f"holds afterwards: {run.value['blocking']['reduce']['after'][1]}" in out
    seen = collectives.see(run, gloo)
    nccl_who, nccl_reduce, gloo_who, gloo_reduce = seen.sentences
    devices = [w["device"] for w in run.value["who"]]
    assert "on " + ", ".join(devices) in nccl_who and len(set(devices)) == len(devices)
    assert "each in a process of its own, met at one store port" in nccl_who
    assert "every rank holds what the source says" in nccl_who
    before, after = (
        run.value["blocking"]["reduce"]["before"][1],
        run.value["blocking"]["reduce"]["after"][1],
    )
    assert str(after) in nccl_reduce and ("what it had before" in nccl_reduce) == (before == after)
    assert "all on cpu" in gloo_who and "(live on cpu-only)" in gloo_who
    assert (
        f"holds {gloo.value['blocking']['reduce']['after'][1]}, no longer its own [2, 3, 4]"
        in gloo_reduce
    )
    assert not seen.checks


def test_the_collectives_sentences_say_a_shared_process_another_port_and_wrong_results():
    run = gloo_collectives(2, reduce_scratch=False, pids=[7, 7], ports=[1, 2])
    run.value["blocking"]["broadcast"]["after"][1] = [0, 0, 0]
    seen = collectives.see(run, run)
    assert "sharing a process, at different ports; 1 results differ" in seen.sentences[0]
    assert "what it had before" in seen.sentences[1]


# ---------------------------------------------------------------- 2 and 4. what returns when


def gloo_host_rows(repeats=2, late_ms=50.0, first_ms=300.0, early=False):
    """A gloo host_timing run as the notebook measures it live: every wait holds the host for the
    delay (or, with ``early``, recv returns at once without the data: a broken backend)."""
    rows = []

    def row(call, late, returned, waited, done, got, **more):
        rows.append(
            dict(
                call=call,
                backend="gloo",
                late_s=late / 1e3,
                returned_s=returned / 1e3,
                waited_s=waited / 1e3,
                done_s=done / 1e3,
                arrived=got,
                value_ok=True,
                **more,
            )
        )

    row("first recv", first_ms, first_ms + 1, first_ms + 1, first_ms + 1.3, True)
    for i in range(repeats):
        wait = 0.05 if early else late_ms + 0.5 + i / 10
        row("recv", late_ms, wait, wait, late_ms + 0.8, not early)
        for how in ("wait()", "wait(timeout)", "poll is_completed()"):
            poll = how.startswith("poll")
            row(
                f"irecv + {how}",
                late_ms,
                0.05,
                4 * late_ms if poll else late_ms + 0.6 + i / 10,
                late_ms + 0.9,
                None if poll else True,
                completed_at_return=False,
                completed_by_poll=False if poll else None,
            )
        row("all_reduce", late_ms, late_ms + 3 + i, late_ms + 3 + i, late_ms + 3.2 + i, True)
        row(
            "all_reduce(async_op=True) + wait()",
            late_ms,
            0.1,
            late_ms + 1 + i,
            late_ms + 1.2 + i,
            True,
        )
    return gloo_run(rows, first_delay_s=first_ms / 1e3, delay_s=late_ms / 1e3, repeats=repeats)


@pytest.mark.parametrize("machine", MACHINES)
def test_summary_is_the_median_of_the_repeats_in_ms(machine):
    run = HOST[machine]
    rows = host.summary(run)
    assert list(rows) == P2P + list(host.COLL_CALLS)
    for call, s in rows.items():
        assert s.returned.value == pytest.approx(ms(run, call, "returned_s"))
        assert s.waited.value == pytest.approx(ms(run, call, "waited_s"))
        assert s.done.value == pytest.approx(ms(run, call, "done_s"))
        assert s.returned.unit == "ms" and s.returned.samples == s.n
        assert s.n == sum(r["call"] == call for r in run.value)
        assert s.late_ms == pytest.approx(
            run.params["first_delay_s" if call == "first recv" else "delay_s"] * 1e3
        )
        if call != "irecv + poll is_completed()":
            assert s.arrived == pytest.approx(arrived(run, call))
    assert rows["first recv"].n == 1 and rows["recv"].n == run.params["repeats"]
    assert rows["irecv + poll is_completed()"].arrived is None
    assert rows["irecv + wait()"].by_poll is None and rows["recv"].at_return is None
    assert rows["irecv + poll is_completed()"].by_poll == [True] * run.params["repeats"]


def test_summary_refuses_wrong_data():
    run = gloo_host_rows()
    run.value[1]["value_ok"] = False
    with pytest.raises(ValueError, match="recv: the data received is wrong"):
        host.summary(run, ["recv"])


def call(late_ms=50.0, arrived=1.0, *ms):
    """A host.Call of one repeat whose returned, waited and done times are ``ms``."""
    values = [claims.Value(m, 0.0, "ms", 1) for m in ms]
    return host.Call(late_ms, *values, arrived, None, None, 1)


def test_how_soon_says_at_once_or_after_how_long_and_whether_the_data_was_there():
    for arrived, waited, said in [
        (0, 0.08, "at once (0.080 ms)"),
        (1, 50.8, "only after 50.8 ms with the data there"),
        (0.5, 30.0, "only after 30.0 ms with the data there in 50% of repeats"),
        (None, 200.0, "only after 200.0 ms"),
        (1, 9.9, "at once (9.900 ms)"),  # within a fifth of the 50 ms delay
        (1, 10.0, "only after 10.0 ms with the data there"),
    ]:
        s = call(50.0, arrived, 0.01, waited, waited)
        assert host.how_soon(s, s.waited) == said


def check_how_soon(text, call, run, key="waited_s"):
    """The words of one call in a sentence agree with its median, computed here."""
    value, late = ms(run, call, key), run.value[-1]["late_s"] * 1e3
    if value < host.QUICK_BACK * late:
        assert numbers(rf"`?{re.escape(call)}`? gave the host back at once \({NUMBER} ms\)", text)[
            0
        ] == pytest.approx(value, abs=0.0005)
    else:
        assert numbers(rf"`?{re.escape(call)}`? gave the host back only after {NUMBER} ms", text)[
            0
        ] == pytest.approx(value, abs=0.05)


@pytest.mark.parametrize("machine", MACHINES)
def test_the_point_to_point_sentences_agree_with_the_medians(machine, capsys):
    run, gloo = HOST[machine], gloo_host_rows()
    host.show(gloo, run, "point-to-point")
    out = capsys.readouterr().out
    for ax in plt.gcf().axes:  # bars in ms, on a log scale from 1 us up: every bar shows
        low = min(p.get_height() for p in ax.patches)
        assert "ms" in ax.get_ylabel() and ax.get_ylim()[0] == pytest.approx(1e-3)
        assert low >= 1e-3
    completed = sum(r["completed_at_return"] for r in run.value if r["call"] == "irecv + wait()")
    assert (
        f"irecv + wait(): is_completed() right after irecv returned: True in {completed} of "
        f"{run.params['repeats']} repeats" in out
    )
    assert "first recv: 1 call; every other call: 5 repeats;" in out
    assert "first recv: 1 call; every other call: 2 repeats;" in out
    seen = host.see_point_to_point(gloo, run)
    with_gloo, with_nccl, first, verdicts = seen.sentences
    assert numbers(
        rf"against a sender {NUMBER} ms late \(medians of {NUMBER} repeats\)", with_nccl
    ) == [run.params["delay_s"] * 1e3, run.params["repeats"]]
    assert "medians of 2 repeats" in with_gloo and "(live on cpu-only)" in with_gloo
    for call in P2P[1:4]:
        check_how_soon(with_nccl, call, run)
        check_how_soon(with_gloo, call, gloo)
    assert numbers(rf"`synchronize\(\)` returned after {NUMBER} ms", with_nccl)[0] == pytest.approx(
        ms(run, "recv", "done_s"), abs=0.05
    )
    first_ms, later_ms = ms(run, "first recv", "returned_s"), ms(run, "recv", "returned_s")
    said_first, times, said_later = numbers(
        rf"returned after {NUMBER} ms, {NUMBER} times a later one's {NUMBER} ms", first
    )
    assert said_first == pytest.approx(first_ms, abs=0.05) and said_later == pytest.approx(
        later_ms, abs=0.0005
    )
    assert times == pytest.approx(first_ms / later_ms, abs=0.5) and "one call" in first
    first_there = arrived(run, "first recv") == 1
    assert ("already there" in first) == first_there and ("not there yet" in first) == (
        not first_there
    )
    assert seen.checks[0].holds and "medians of 2 repeats" in seen.checks[0].measured
    assert "data there" not in with_gloo and "`synchronize()` has no GPU" in with_gloo
    assert len(seen.checks) == 1 and arrived(run, "first recv") < 1
    check_source_rows(verdicts, run, [0, 1, 2, 3, 5, 6, 7])
    assert f"“{CLAIMS[2]}”: **does not hold here**" in verdicts


def check_source_rows(sentence, run, rows):
    """The sentence gives the source's statements ``rows`` with the claims table's verdicts."""
    table = claims.ClaimsTable(host.NOTEBOOK)
    host.add_claims(table, run)
    verdicts = table.verdicts()
    said = "; ".join(f"“{CLAIMS[i]}”: **{verdicts[CLAIMS[i]]}**" for i in rows)
    assert sentence == f"The source's statements, as the claims table below judges them: {said}."


def test_the_gloo_check_fails_when_recv_returns_before_the_data():
    seen = host.see_point_to_point(gloo_host_rows(early=True), HOST[MACHINES[0]])
    assert not seen.checks[0].holds
    assert seen.checks[0].measured.startswith("recv: 0.1 ms;")


@pytest.mark.parametrize("machine", MACHINES)
def test_waits_for_data_is_the_call_that_most_often_had_the_data(machine):
    run = HOST[machine]
    candidates = ["recv", "irecv + wait()", "irecv + wait(timeout)"]
    assert host.waits_for_data(run, candidates) == max(candidates, key=lambda c: arrived(run, c))
    assert host.waits_for_data(run, candidates) == "irecv + wait(timeout)"


@pytest.mark.parametrize("machine", MACHINES)
def test_the_collective_timing_sentences_agree_with_the_medians(machine, capsys):
    run, gloo = HOST[machine], gloo_host_rows()
    host.show(gloo, run, "all_reduce")
    out = capsys.readouterr().out
    assert f"{run.params['repeats']} repeats per call;" in out and "2 repeats per call;" in out
    with_gloo, with_nccl, verdicts = host.see_collective_timing(gloo, run).sentences
    for text, r in ((with_gloo, gloo), (with_nccl, run)):
        late = r.value[-1]["late_s"] * 1e3
        for phrase, call, key in (
            ("blocking `all_reduce` gave the host back", "all_reduce", "returned_s"),
            ("the call returned", "all_reduce(async_op=True) + wait()", "returned_s"),
            ("`work.wait()` gave the host back", "all_reduce(async_op=True) + wait()", "waited_s"),
        ):
            value = ms(r, call, key)
            if value < host.QUICK_BACK * late:
                assert numbers(rf"{re.escape(phrase)} at once \({NUMBER} ms\)", text)[
                    0
                ] == pytest.approx(value, abs=5e-4)
            else:
                assert numbers(rf"{re.escape(phrase)} only after {NUMBER} ms", text)[
                    0
                ] == pytest.approx(value, abs=0.05)
    done = max(ms(run, c, "done_s") for c in host.COLL_CALLS)
    assert numbers(rf"`synchronize\(\)` returned after {NUMBER} ms", with_nccl)[0] == pytest.approx(
        done, abs=0.05
    )
    assert "`synchronize()` has no GPU to wait for under gloo" in with_gloo
    check_source_rows(verdicts, run, [4, 5, 8])
    assert "at once" not in with_gloo.split("async_op=True")[0]  # gloo's blocking call waits
    assert with_nccl.count("at once") == 3 and "medians of 5 repeats" in with_nccl


# ---------------------------------------------------------------- 3. the missing send


def gloo_missing(status1="stopped", marks1=(("start", 0.002),), elapsed_s=0.5, timeout_s=0.5):
    case = {
        "warm_up": True,
        "status": ["returned", status1],
        "marks": [[[0.001, "start"]], [[t, m] for m, t in marks1]],
        "printed": ["", ""],
        "reason": "the deadline (0.5 s) passed; ranks still running were stopped",
        "timeout_s": timeout_s,
        "startup_s": 0.1,
        "elapsed_s": elapsed_s,
    }
    return gloo_run([case], warm_ups=[True], timeout_s=timeout_s)


def test_stopped_at_reads_the_last_mark():
    assert (
        hangs.stopped_at({"marks": [[], [[0.0, "start"]]], "status": ["returned", "stopped"]}, 1)
        == RECV_LINE
    )
    assert (
        hangs.stopped_at(
            {
                "marks": [[], [[0.0, "start"], [0.1, "recv returned"]]],
                "status": ["returned", "stopped"],
            },
            1,
        )
        == PRINT_LINE
    )
    assert hangs.stopped_at({"marks": [[], []], "status": ["returned", "returned"]}, 1) == FINISHED
    assert (
        hangs.stopped_at({"marks": [[], []], "status": ["returned", "stopped"]}, 1)
        == "before the first mark"
    )


@pytest.mark.parametrize("machine", MACHINES)
def test_the_missing_send_stops_where_the_marks_say(machine, capsys):
    run, gloo = MISS[machine], gloo_missing()
    for case in run.value:
        labels = [label for _, label in case["marks"][1]]
        want = PRINT_LINE if labels[-1] == "recv returned" else RECV_LINE
        assert hangs.stops(run)[("nccl", case["warm_up"])] == want
    assert hangs.stops(run) == {("nccl", True): PRINT_LINE, ("nccl", False): RECV_LINE}
    assert hangs.stops(gloo, run) == {
        ("gloo", True): RECV_LINE,
        ("nccl", False): RECV_LINE,
        ("nccl", True): PRINT_LINE,
    }
    hangs.show_missing_send(gloo, run)
    out = capsys.readouterr().out
    assert (
        out.count("-> rank 1's host stopped at:") == 3
        and "This WILL print if NCCL is warmed-up" in out
    )
    assert (
        f"the ranks ran {run.value[0]['elapsed_s']:.2f} s against a deadline of {run.params['timeout_s']:g} s"
        in out
    )
    seen = hangs.see_missing_send(gloo, run)
    assert seen.sentences == [
        f"Rank 1's host stopped at (one run of each case): `{RECV_LINE}` (gloo, after a warm-up, "
        f"{gloo.where()}); `{RECV_LINE}` (nccl, no warm-up, {run.where()}); `{PRINT_LINE}` (nccl, "
        f"after a warm-up, {run.where()})."
    ]
    longest = max(c["elapsed_s"] - c["timeout_s"] for c in [*run.value, *gloo.value])
    assert numbers(rf"ran {NUMBER} s past", seen.checks[0].measured)[0] == pytest.approx(
        longest, abs=0.005
    )
    assert [c.holds for c in seen.checks] == [True] * 4
    assert [c.measured for c in seen.checks[1:]] == [  # each check names its own case's line
        f"stopped at {PRINT_LINE}",
        f"stopped at {RECV_LINE}",
        f"stopped at {RECV_LINE}",
    ]


def test_the_missing_send_checks_fail_where_the_hang_is_not_bounded_or_stops_elsewhere():
    run = MISS[MACHINES[0]]
    late = hangs.see_missing_send(gloo_missing(elapsed_s=2.0), run)
    assert [c.holds for c in late.checks] == [False, True, True, True]
    assert "+1.50 s past its deadline" in late.checks[0].measured
    finished = hangs.see_missing_send(gloo_missing(status1="returned"), run)
    assert finished.checks[-1].holds is False and FINISHED in finished.checks[-1].measured
    warm_only = fake_run(
        [c for c in run.value if c["warm_up"]], backend="nccl", warm_ups=[True], timeout_s=4.0
    )
    assert len(hangs.see_missing_send(gloo_missing(), warm_only).checks) == 3


# ---------------------------------------------------------------- 3. wait(timeout) with no send


def wait_run(
    marks1, status1="returned", result1=None, backend="nccl", wait_timeout_s=2.0, deadline_s=10.0
):
    value = {
        "status": ["returned", status1],
        "marks": [[[0.1, "connected"]], [[t, m] for m, t in marks1]],
        "results": ["sent nothing", result1],
        "reason": "r",
        "elapsed_s": 2.1,
    }
    return fake_run(
        value,
        live=backend == "gloo",
        machine="cpu-only" if backend == "gloo" else "2xFAKE",
        backend=backend,
        wait_timeout_s=wait_timeout_s,
        deadline_s=deadline_s,
    )


def outcome(run):
    """What hangs.wait_of read: (raised, sentence, seconds waited)."""
    w = hangs.wait_of(run)
    return w.raised, w.sentence, w.waited


def test_wait_timeout_outcome_raised_measures_from_waiting():
    run = wait_run(
        [("connected", 0.1), ("waiting", 0.2), ("wait raised", 2.25)],
        result1="DistBackendError: timed out",
    )
    raised, sentence, waited = outcome(run)
    assert raised is True and waited == pytest.approx(2.05)
    assert "raised after 2.05 s" in sentence and "DistBackendError" in sentence
    assert hangs.wait_of(run).reached


def test_wait_timeout_outcome_returned_and_stuck_in_wait():
    raised, sentence, waited = outcome(
        wait_run(
            [("connected", 0.1), ("waiting", 0.2), ("wait returned", 0.5)], result1="wait returned"
        )
    )
    assert raised is False and waited == pytest.approx(0.3) and "returned after 0.30 s" in sentence
    raised, sentence, waited = outcome(wait_run([("connected", 0.1), ("waiting", 0.2)], "stopped"))
    assert (
        raised is False and waited is None and "inside wait()" in sentence and "stopped" in sentence
    )


def test_wait_timeout_outcome_says_when_rank_1_never_reached_the_wait():
    """The old recording's shape (before the pair was connected first): rank 1 was stopped inside
    irecv's connection set-up, with no mark at all."""
    value = {
        "status": ["returned", "stopped"],
        "marks": [[], []],
        "results": [None, None],
        "reason": "the deadline (10 s) passed; ranks still running were stopped",
        "elapsed_s": 10.0,
    }
    run = fake_run(value, backend="nccl", wait_timeout_s=2.0, deadline_s=10.0)
    raised, sentence, waited = outcome(run)
    assert raised is False and waited is None and not hangs.wait_of(run).reached
    assert "never reached wait" in sentence and "not connected" in sentence
    raised, sentence, _ = outcome(wait_run([("connected", 0.1)], status1="died"))
    assert raised is False and "inside the irecv call" in sentence and "died" in sentence


@pytest.mark.parametrize("machine", sorted(WAIT))
def test_the_recorded_wait_raised_after_the_wait_began_and_the_sentence_says_how_late(
    machine, capsys
):
    run = WAIT[machine]
    marks = {label: t for t, label in run.value["marks"][1]}
    waited, timeout_s = marks["wait raised"] - marks["waiting"], run.params["wait_timeout_s"]
    raised, sentence, said = outcome(run)
    assert raised is True and said == pytest.approx(waited) and waited >= timeout_s
    gloo = wait_run(
        [("connected", 0.1), ("waiting", 0.2), ("wait raised", 0.71)],
        backend="gloo",
        wait_timeout_s=0.5,
        result1="RuntimeError: Timed out waiting 500ms for recv operation",
    )
    hangs.show_wait_timeout(gloo, run)
    out = capsys.readouterr().out
    assert "gloo (live on cpu-only): wait(timeout=0.5 s) raised after 0.51 s" in out
    assert f"raised after {waited:.2f} s" in out
    on_gloo, on_nccl = hangs.see_wait_timeout(gloo, run).sentences
    assert numbers(rf"the wait raised {NUMBER} s after it began", on_nccl)[0] == pytest.approx(
        waited, abs=0.005
    )
    side = "after" if waited >= timeout_s else "before"
    off = numbers(rf"{NUMBER} s {side} its timeout of {timeout_s:g} s \(", on_nccl)[0]
    assert off == pytest.approx(abs(waited - timeout_s), abs=0.005)
    assert (
        "0.01 s after its timeout of 0.5 s (+2%)" in on_gloo
        and f"({gloo.where()}, one run)" in on_gloo
    )


def test_a_cut_error_text_ends_at_a_whole_word_with_an_ellipsis():
    cut = "DistBackendError: " + ("word " * 30)[: hangs.CUT - 3] + "(ms"
    assert hangs.whole_words(cut).endswith("word …") and "(ms" not in hangs.whole_words(cut)
    assert hangs.whole_words("E: short text") == "E: short text"
    for run in WAIT.values():  # the recorded NCCL errors were cut at 120 characters
        sentence = hangs.wait_of(run).sentence
        assert sentence.endswith(" …") and "Timeout(ms" not in sentence


def test_the_wait_sentences_say_before_stuck_and_never_reached():
    early = wait_run([("connected", 0.1), ("waiting", 0.2), ("wait raised", 0.7)], result1="E: x")
    stuck = wait_run([("connected", 0.1), ("waiting", 0.2)], status1="stopped")
    never = wait_run([("connected", 0.1)], status1="stopped")
    before, in_wait = hangs.see_wait_timeout(early, stuck).sentences
    assert "raised 0.50 s after it began, 1.50 s before its timeout of 2 s (-75%)" in before
    assert (
        "neither raised nor returned" in in_wait
        and "did not, by itself, give the host back" in in_wait
    )
    assert "never reached wait(timeout=2 s)" in hangs.see_wait_timeout(never, never).sentences[0]
    on_time = wait_run([("connected", 0.1), ("waiting", 0.2), ("wait raised", 2.6)], result1="E: x")
    slightly_early = wait_run(
        [("connected", 0.1), ("waiting", 0.2), ("wait raised", 1.8)], result1="E: x"
    )
    late, early = hangs.see_wait_timeout(on_time, slightly_early).sentences  # 2.40 and 1.60 s
    assert (
        "0.40 s after its timeout of 2 s (+20%)" in late
        and "0.40 s before its timeout of 2 s (-20%)" in early
    )


def _wait_without_send(rank, world_size, wait_timeout_s):
    """The notebook's wait_timeout_without_send worker, for gloo: connect, then wait for an irecv no send matches."""
    w = torch.zeros(3)
    if rank == 0:
        dist.send(w, dst=1)
    else:
        dist.recv(w, src=0)
    distributed.mark("connected")
    if rank == 1:
        work = dist.irecv(torch.empty(3), src=0)
        distributed.mark("waiting")
        try:
            work.wait(timeout=timedelta(seconds=wait_timeout_s))
        except Exception as err:
            distributed.mark("wait raised")
            return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:120]}"
        distributed.mark("wait returned")
        return "wait returned"
    return "sent nothing"


def test_a_real_gloo_wait_timeout_is_read_as_raised_at_its_timeout():
    ended = distributed.supervise(
        _wait_without_send, 2, backend="gloo", timeout_s=20.0, args=(0.5,)
    )
    value = {
        "status": ended.status,
        "marks": ended.marks,
        "results": ended.results,
        "reason": ended.reason,
        "elapsed_s": ended.elapsed_s,
    }
    run = gloo_run(value, wait_timeout_s=0.5, deadline_s=20.0)
    assert [label for _, label in value["marks"][1]][:2] == ["connected", "waiting"]
    raised, _, waited = outcome(run)
    assert raised and 0.4 < waited < 5.0
    table = nccl.claims_table(
        HOST[MACHINES[0]],
        WAIT["2xNVIDIA-H200"],
        run,
        MISS[MACHINES[0]],
        COLL["2xNVIDIA-H200"],
        gloo_collectives(),
        OVERLAP[MACHINES[0]],
        BW["2xNVIDIA-H200"],
    )
    assert table.verdicts()[CLAIMS[11]] == claims.HOLDS


# ---------------------------------------------------------------- 4. overlap


def _union(spans):
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _length(spans):
    return sum(end - start for start, end in _union(spans))


def _together(a, b):
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in _union(a) for s2, e2 in _union(b))


def kernel(name, start, end, stream=7):
    return trace.Interval("kernel", name, start, end, device=0, stream=stream)


def test_split_kernels_and_overlap_of_on_a_profile_built_by_hand():
    blocking = trace.Profile(
        [
            kernel("ncclDevKernel_AllReduce", 0, 100, 20),
            kernel("gemm", 100, 250),
            trace.Interval("memcpy", "Memcpy DtoD", 0, 5, device=0, stream=7),
        ],
        steps=1,
    )
    hidden = trace.Profile(
        [
            trace.Interval("annotation", "ProfilerStep#3", 0, 190),
            kernel("ncclDevKernel_AllReduce", 0, 100, 20),
            kernel("gemm", 20, 170),
            trace.Interval("annotation", "ProfilerStep#4", 200, 390),
            kernel("ncclDevKernel_AllReduce", 200, 300, 20),
            kernel("gemm", 200, 350),
        ],
        steps=2,
    )
    nccl_kernels, others = speed.split_kernels(blocking)
    assert [k.name for k in nccl_kernels] == ["ncclDevKernel_AllReduce"] and [
        k.name for k in others
    ] == ["gemm"]
    found = speed.overlap_of(fake_run({"blocking": blocking, "async_op=True": hidden}))
    assert found["blocking"] == speed.Overlap(
        claims.Value(0.0, 0.0, "", 1), 0.1, 0.15, 0.25, 1, ([20], [7])
    )
    # one ratio per step, 80/100 and 100/100: their median, not the pooled 180/200 of the whole profile
    ratio = found["async_op=True"].ratio
    assert (ratio.value, ratio.samples) == (pytest.approx(0.9), 2) and ratio.spread > 0
    assert found["async_op=True"].busy_ms == pytest.approx(320 / 2 / 1e3)
    seen = speed.see_overlap(fake_run({"blocking": blocking, "async_op=True": hidden}))
    said = seen.sentences
    assert [c.holds for c in seen.checks] == [
        False
    ]  # here the blocking all_reduce had a stream of its own
    assert said[0].endswith("NCCL's kernels ran on stream 20, the matmuls on 7.")
    assert "closer to their sum (0.250 ms) than to the longer of the two (0.150 ms)" in said[0]
    assert "overlap ratio 0.00 in every step" in said[0]
    assert (
        f"(2 profiled steps): overlap ratio {ratio}; " in said[1]
        and "closer to the longer of the two" in said[1]
    )


@pytest.mark.parametrize("machine", MACHINES)
def test_the_overlap_sentences_agree_with_the_kernels(machine, capsys):
    run = OVERLAP[machine]
    speed.show_overlap(run)
    assert capsys.readouterr().out.count("overlap ratio") == 2
    assert "2 profiled steps" in plt.gcf()._suptitle.get_text()
    seen, streams = speed.see_overlap(run), {}
    for sentence, (mode, profile) in zip(seen.sentences, run.value.items(), strict=False):
        kernels = [k for k in profile.intervals if k.kind == "kernel"]
        comm = [(k.start_us, k.end_us) for k in kernels if "nccl" in k.name.lower()]
        comp = [(k.start_us, k.end_us) for k in kernels if "nccl" not in k.name.lower()]
        ratio = _together(comm, comp) / min(_length(comm), _length(comp))
        busy = _length(comm + comp) / profile.steps / 1e3
        longer = max(_length(comm), _length(comp)) / profile.steps / 1e3
        total = (_length(comm) + _length(comp)) / profile.steps / 1e3
        assert sentence.startswith(f"{mode} ({profile.steps} profiled steps)")
        assert numbers(rf"overlap ratio {NUMBER}", sentence)[0] == pytest.approx(ratio, abs=0.005)
        assert numbers(rf"GPU busy {NUMBER} ms per step", sentence)[0] == pytest.approx(
            busy, abs=0.0005
        )
        near_longer = busy - longer < total - busy
        assert sentence.split("closer to ")[1].startswith(
            "the longer" if near_longer else "their sum"
        )
        assert (ratio > 0.5) == (mode == "async_op=True") and (ratio < 0.1) == (mode == "blocking")
        ids = [
            sorted({k.stream for k in kernels if ("nccl" in k.name.lower()) == c})
            for c in (True, False)
        ]
        nccl, others = (", ".join(map(str, i)) for i in ids)
        where = "the matmuls too" if nccl == others else f"the matmuls on {others}"
        said = f"NCCL's kernels ran on stream {nccl}, {where}."
        assert sentence.endswith(said)
        streams[mode] = ids
        ms_ = (_length(comm) / profile.steps / 1e3, _length(comp) / profile.steps / 1e3)
        streams[mode + " ms"] = ms_
    (nb, ob), (na, oa) = streams["blocking ms"], streams["async_op=True ms"]
    slower = numbers(
        rf"matmuls took {NUMBER} ms per step against {NUMBER} ms .*?\(\+?{NUMBER}%\), the all_reduce {NUMBER} against {NUMBER} ms",
        seen.sentences[2],
    )
    assert slower[:2] == pytest.approx([oa, ob], abs=5e-4) and slower[3:] == pytest.approx(
        [na, nb], abs=5e-4
    )
    assert (
        slower[2] == pytest.approx((oa / ob - 1) * 100, abs=0.5)
        and "2 profiled steps each" in seen.sentences[2]
    )
    busy_b, busy_a = (speed.overlap_of(run)[m].busy_ms for m in ("blocking", "async_op=True"))
    alone = max(nb, ob)  # finding 11: the step's busy time beside the overlap ratio
    got = numbers(
        rf"busy time per step went from {NUMBER} ms one after the other to {NUMBER} ms side by side \({NUMBER}%\); "
        rf"a full overlap with neither kernel slowed would have left the longer one's {NUMBER} ms \({NUMBER}%\)",
        seen.sentences[3],
    )
    assert got[:2] == pytest.approx([busy_b, busy_a], abs=5e-4)
    assert got[2] == pytest.approx((busy_a / busy_b - 1) * 100, abs=0.5)
    assert got[3:] == pytest.approx([alone, (alone / busy_b - 1) * 100], abs=0.5)
    (b_nccl, b_other), (a_nccl, a_other) = streams["blocking"], streams["async_op=True"]
    apart = b_nccl == b_other and not set(a_nccl) & set(a_other)
    assert [c.holds for c in seen.checks] == [apart] == [True]


# ---------------------------------------------------------------- 5. algbw and busbw

FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "all_to_all": lambda n: (n - 1) / n,
}


def busbw_here(size, t, op, n):
    return size / t.median_s / 1e9 * FACTOR[op](n)


def synthetic_bandwidth(
    sizes=(1024, 2**20, 2**24, 2**30),
    fixed_us=(20.0, 25.0, 90.0, 3000.0),
    wrong=0,
    ceiling_gbps=300.0,
    world_sizes=(2, 4),
):
    """A bandwidth run: all_reduce and broadcast taking ``fixed_us`` at each size (broadcast twice as fast)."""
    sweep = []
    for n in world_sizes:
        timings = {
            op: [
                timing.Timing(
                    [us * f * 1e-6, us * f * 1.01e-6, us * f * 0.99e-6], "cuda events", size
                )
                for size, us in zip(sizes, fixed_us, strict=True)
            ]
            for op, f in (("all_reduce", 1.0), ("broadcast", 0.5))
        }
        sweep.append(
            {
                "world_size": n,
                "timings": timings,
                "wrong": {op: [wrong] + [0] * (len(sizes) - 1) for op in timings},
                "plain_s": [fixed_us[-1] * 1e-6] * 3 if n == world_sizes[-1] else None,
            }
        )
    ceiling = timing.Timing([2**30 / ceiling_gbps / 1e9] * 3, "cuda events", 2**30)
    return fake_run(
        {
            "ceiling": ceiling,
            "gpus": world_sizes[-1],
            "world_sizes": list(world_sizes),
            "sweep": sweep,
        },
        sizes=list(sizes),
        ops=["all_reduce", "broadcast"],
        warmup=1,
        iters=20,
        samples=3,
        ceiling_bytes=2**30,
        max_world_size=8,
    )


@pytest.mark.parametrize("machine", sorted(BW))
def test_busbw_and_the_exercise_agree_with_nccl_tests_factors(machine):
    run = BW[machine]
    sizes, entry = run.params["sizes"], run.value["sweep"][-1]
    n = entry["world_size"]
    busbw = speed.sweep(run).busbw[n]
    for op, ts in entry["timings"].items():
        assert busbw[op] == pytest.approx(
            [busbw_here(s, t, op, n) for s, t in zip(sizes, ts, strict=True)]
        )
    largest = entry["timings"]["all_reduce"][-1]
    assert speed.busbw_if_ranks(run, 16) == pytest.approx(
        sizes[-1] / largest.median_s / 1e9 * 30 / 16
    )
    found = speed.sweep(run)
    ranks = [2, 4] if machine.startswith("4x") else [2]  # N = 2, 4, ... up to every GPU
    assert list(found.busbw) == [e["world_size"] for e in run.value["sweep"]] == ranks
    assert found.ranks == n and found.all_reduce == entry["timings"]["all_reduce"]
    assert found.plain.samples_s == entry["plain_s"] and found.wrong == 0
    assert found.ceiling == run.value["ceiling"].gbps


@pytest.mark.parametrize("machine", sorted(BW))
def test_the_bandwidth_sentences_agree_with_the_timings(machine, capsys):
    run = BW[machine]
    speed.show_bandwidth(run)
    out = capsys.readouterr().out
    assert f"a GPU0 -> GPU1 copy of 1 GiB: {run.value['ceiling'].gbps:.1f} GB/s" in out
    assert "wrong elements over every check: 0." in out
    seen = speed.see_bandwidth(run)
    sizes, entry = run.params["sizes"], run.value["sweep"][-1]
    n, ceiling = entry["world_size"], run.value["ceiling"].gbps
    us = [t.median_s * 1e6 for t in entry["timings"]["all_reduce"]]
    low, high = numbers(
        rf"an `all_reduce` takes {NUMBER} to {NUMBER} us, within 2 times the shortest",
        seen.sentences[0],
    )
    algbw = sizes[-1] / entry["timings"]["all_reduce"][-1].median_s / 1e9
    cheap = [s for s in sizes if s / algbw / 1e3 < min(us)]
    rate, floor = numbers(
        rf"algbw \({NUMBER} GB/s\), moving the bytes alone takes less than the shortest call \({NUMBER} us\)",
        seen.sentences[1],
    )
    assert rate == pytest.approx(algbw, abs=0.5) and floor == pytest.approx(min(us), abs=0.05)
    assert f"up to {timing.format_bytes(cheap[-1])}: there the fixed cost" in seen.sentences[1]
    flat = [u for u in us if u <= 2 * min(us)]
    assert low == pytest.approx(min(us), abs=0.05) and high == pytest.approx(
        max(us[: len(flat)]), abs=0.05
    )
    assert all(u <= 2 * min(us) for u in us[: len(flat)]) and us[len(flat)] > 2 * min(us)
    assert (
        f"to {us[-1]:.0f} us at 1 GiB" in seen.sentences[0]
        and "medians of 5 samples" in seen.sentences[0]
    )
    shares = seen.sentences[-2]
    for op, ts in entry["timings"].items():
        share = busbw_here(sizes[-1], ts[-1], op, n) / ceiling
        assert share < 1
        assert numbers(rf"{NUMBER}% \(`{op}`\)", shares)[0] == pytest.approx(share * 100, abs=0.5)
    plain = statistics.median(entry["plain_s"])
    helper_gbps = busbw_here(sizes[-1], entry["timings"]["all_reduce"][-1], "all_reduce", n)
    plain_gbps = sizes[-1] / plain / 1e9 * FACTOR["all_reduce"](n)
    near = table_for(machine).verdicts()[CLAIMS[-1]]
    assert seen.sentences[-1].endswith(f"as the claims table below judges it: **{near}**.")
    assert [c.holds for c in seen.checks] == [abs(helper_gbps / plain_gbps - 1) <= 0.03, True]
    assert (
        f"collective_timings {helper_gbps:.1f} GB/s, hand-written loop {plain_gbps:.1f} GB/s"
        in seen.checks[0].measured
    )
    sizes_n = len(run.value["sweep"])
    assert f"over {analysis.plural(sizes_n, 'world size')}" in seen.checks[1].measured


def test_the_bandwidth_sentences_on_a_sweep_built_by_hand():
    run = synthetic_bandwidth(ceiling_gbps=300.0)
    speed.show_bandwidth(run)
    seen = speed.see_bandwidth(run)
    assert "from 1 KiB to 1 MiB an `all_reduce` takes 20.0 to 25.0 us" in seen.sentences[0]
    # 4 ranks: all_reduce 1 GiB in 3 ms is 358 GB/s algbw, x 1.5 busbw: above the 300 GB/s copy, said in GB/s
    all_reduce = 2**30 / 3000e-6 / 1e9 * 1.5
    assert f"{all_reduce:.0f} GB/s, above it (`all_reduce`)" in seen.sentences[-2]
    assert not re.search(r"\b(1\d\d|[2-9]\d\d)%", " ".join(seen.sentences))
    assert [c.holds for c in seen.checks] == [True, True] and "over 2 world sizes" in seen.checks[
        1
    ].measured
    assert speed.busbw_if_ranks(run, 16) == pytest.approx(2**30 / 3000e-6 / 1e9 * 30 / 16)


def test_the_bandwidth_checks_fail_on_wrong_elements_and_a_slow_helper_and_say_a_missing_loop():
    run = synthetic_bandwidth(wrong=3)
    run.value["sweep"][-1]["plain_s"] = [
        2000e-6
    ] * 3  # the hand-written loop is faster than the helper
    seen = speed.see_bandwidth(run)
    assert [c.holds for c in seen.checks][:2] == [False, False]
    assert "12 wrong elements over 2 world sizes" in seen.checks[1].measured
    growing = speed.see_bandwidth(synthetic_bandwidth(fixed_us=(20.0, 50.0, 200.0, 3000.0)))
    assert (
        "an `all_reduce` of 1 KiB takes 20.0 us; from the smallest size on the time grows"
        in growing.sentences[0]
    )


# ---------------------------------------------------------------- the claims table


def test_a_call_is_the_median_and_half_iqr_in_ms():
    rows = [
        dict(
            call="recv",
            late_s=0.05,
            returned_s=x,
            waited_s=2 * x,
            done_s=3 * x,
            arrived=x > 0.002,
            value_ok=True,
        )
        for x in (0.001, 0.002, 0.003, 0.004, 0.005)
    ]
    rows.append(dict(rows[0], call="other", returned_s=9.0))
    s = host.summary(fake_run(rows), ("recv",))["recv"]
    assert (s.returned.value, s.returned.spread, s.returned.unit, s.returned.samples) == (
        pytest.approx(3.0),
        pytest.approx(1.0),
        "ms",
        5,
    )
    assert s.waited.value == pytest.approx(6.0) and s.done.spread == pytest.approx(3.0)
    assert s.arrived == pytest.approx(0.6) and s.late_ms == pytest.approx(50.0)


def table_for(machine, host=None, wait_gloo=None, miss=None):
    """The claims table as the notebook builds it on ``machine`` (what it did not record from 2xNVIDIA-H200)."""
    two = "2xNVIDIA-H200"
    wait_gloo = wait_gloo or wait_run(
        [("connected", 0.1), ("waiting", 0.2), ("wait raised", 0.71)],
        backend="gloo",
        wait_timeout_s=0.5,
        result1="RuntimeError: timed out",
    )
    return nccl.claims_table(
        host or HOST[machine],
        WAIT[two],
        wait_gloo,
        miss or MISS[machine],
        COLL[two],
        gloo_collectives(),
        OVERLAP[machine],
        BW[two],
    )


def side(value, spread, threshold, holds_if):
    """The verdict of a comparison, computed here."""
    if abs(value - threshold) <= max(spread, 0.01 * abs(threshold)):
        return claims.BORDERLINE
    return claims.HOLDS if (value > threshold) == (holds_if == "above") else claims.DOES_NOT_HOLD


@pytest.mark.parametrize("machine", MACHINES)
def test_the_claims_table_on_the_recordings(machine):
    table = table_for(machine)
    verdicts = table.verdicts()
    assert list(verdicts) == CLAIMS
    run = HOST[machine]
    rows = {c.text: c for c in table.claims}
    late = run.params["delay_s"] * 1e3
    recv = rows[CLAIMS[0]].comparison
    assert recv.value.value == pytest.approx(
        ms(run, "recv", "returned_s")
    ) and recv.threshold == pytest.approx(late / 5)
    assert (
        verdicts[CLAIMS[0]]
        == side(recv.value.value, recv.value.spread, late / 5, "below")
        == claims.HOLDS
    )
    first = rows[CLAIMS[2]].comparison
    assert (
        first.value.value == pytest.approx(ms(run, "first recv", "returned_s"))
        and first.value.samples == 1
    )
    assert (
        verdicts[CLAIMS[2]] == claims.DOES_NOT_HOLD
        and "one call, no spread" in rows[CLAIMS[2]].measured
    )
    ratio = rows[CLAIMS[1]].comparison.value
    assert ratio.value == pytest.approx(
        ms(run, "first recv", "returned_s") / ms(run, "recv", "returned_s")
    )
    assert verdicts[CLAIMS[1]] == claims.HOLDS
    completed = [r["completed_at_return"] for r in run.value if "completed_at_return" in r]
    assert not any(completed) and f"True in 0 of {len(completed)} calls" in rows[CLAIMS[7]].measured
    assert rows[CLAIMS[7]].comparison.value.value == pytest.approx(
        ms(run, "irecv + poll is_completed()", "waited_s")
    )
    assert verdicts[CLAIMS[7]] == claims.DOES_NOT_HOLD
    wait_timeout = rows[CLAIMS[6]].comparison
    assert wait_timeout.value.value == pytest.approx(ms(run, "irecv + wait(timeout)", "waited_s"))
    assert verdicts[CLAIMS[6]] == claims.HOLDS
    done = min(ms(run, c, "done_s") for c in host.COLL_CALLS)
    assert (
        rows[CLAIMS[8]].comparison.value.value == pytest.approx(done)
        and verdicts[CLAIMS[8]] == claims.HOLDS
    )
    for text in CLAIMS[3:6] + CLAIMS[9:]:
        assert verdicts[text] == claims.HOLDS, text
    overlap = rows[CLAIMS[17]].comparison.value.value
    assert overlap > 0.5 and rows[CLAIMS[16]].comparison.value.value < 0.1
    busbw = rows[CLAIMS[18]].comparison.value
    bw = BW["2xNVIDIA-H200"]
    entry = bw.value["sweep"][-1]
    here = busbw_here(
        bw.params["sizes"][-1],
        entry["timings"]["all_reduce"][-1],
        "all_reduce",
        entry["world_size"],
    )
    assert busbw.value == pytest.approx(here / bw.value["ceiling"].gbps)
    assert (
        f"busbw {here:.0f} GB/s over a GPU0 -> GPU1 copy's {bw.value['ceiling'].gbps:.0f} GB/s"
        in rows[CLAIMS[18]].measured
    )


def test_the_claims_that_do_not_hold_or_cannot_be_tested():
    host = HOST[MACHINES[0]]
    changed = []
    for row in host.value:
        row = dict(row)
        if row["call"] in ("recv", "all_reduce"):
            row["arrived"] = True  # the data was there: no time can make "before the data" hold
        if row["call"] == "irecv + wait(timeout)":
            row["arrived"] = False
        if row["call"] == "irecv + wait()":
            row["completed_at_return"] = True
        changed.append(row)
    never = wait_run([("connected", 0.1)], status1="stopped", backend="gloo", wait_timeout_s=0.5)
    warm_only = fake_run(
        [c for c in MISS[MACHINES[0]].value if c["warm_up"]],
        backend="nccl",
        warm_ups=[True],
        timeout_s=4.0,
    )
    verdicts = table_for(
        MACHINES[0], host=fake_run(changed, **host.params), wait_gloo=never, miss=warm_only
    ).verdicts()
    assert verdicts[CLAIMS[0]] == verdicts[CLAIMS[4]] == verdicts[CLAIMS[6]] == claims.DOES_NOT_HOLD
    assert (
        verdicts[CLAIMS[7]] == claims.HOLDS
    )  # is_completed() said True right after irecv returned
    assert verdicts[CLAIMS[11]] == claims.NOT_TESTABLE
    assert CLAIMS[13] not in verdicts


def test_the_bandwidth_sentence_when_the_smallest_size_is_slower_than_twice_the_shortest():
    """Quick mode's few samples can leave the smallest size slower than twice the shortest time
    (a live quick run on 2xH200 raised there): the sentence says so instead of a flat stretch."""
    run = synthetic_bandwidth(fixed_us=(60.0, 25.0, 90.0, 3000.0))
    seen = speed.see_bandwidth(run)
    assert seen.sentences[0].startswith(
        "On 4 ranks (medians of 3 samples), an `all_reduce` of 1 KiB takes 60.0 us, more than "
        "2 times the shortest (25.0 us at 1 MiB): the smallest sizes' times are out of order here;"
    )
    assert "to 3000 us at 1 GiB." in seen.sentences[0]


def test_a_live_quick_run_says_quick_mode_and_a_replay_does_not(monkeypatch):
    """Issue 35: 06's gloo parts run live; in quick mode their rows and sentences say so."""
    recorded = next(iter(records.recorded_runs(NOTEBOOK, "wait_timeout_nccl").values()))
    live = records.Run(recorded.value, True, recorded.header)  # as a gloo part runs: live
    monkeypatch.setenv("COURSE_QUICK", "1")
    assert common.where(live) == f"live on {live.machine}, quick mode"
    assert common.where(recorded) == f"replayed from {recorded.machine}"
    said = hangs.see_wait_timeout(live, recorded).sentences
    assert f"(live on {live.machine}, quick mode, one run)" in said[0]
    assert "quick mode" not in said[1]
    monkeypatch.setenv("COURSE_QUICK", "0")
    assert common.where(live) == f"live on {live.machine}"


def test_the_fastest_path_claim_names_the_recorded_link_not_nvlink_by_assumption():
    bw, overlap = BW["2xNVIDIA-H200"], OVERLAP["2xNVIDIA-H200"]

    def measured(links):
        header = {**bw.header, "machine": {**bw.header["machine"], "gpu_links": links}}
        table = claims.ClaimsTable(NOTEBOOK)
        speed.add_claims(table, overlap, dataclasses.replace(bw, header=header))
        return table.claims[-1].measured

    assert "GPU0 and GPU1 joined by NV18 (nvidia-smi topo -m)" in measured(
        bw.header["machine"]["gpu_links"]
    )
    pcie = "\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tPIX\t0-31\nGPU1\tPIX\t X \t0-31\n"
    assert "joined by PIX" in measured(pcie) and "NV" not in measured(pcie)
    assert measured(None).startswith("GPU0 and GPU1 joined by a link it did not name (nvidia-smi")


def test_the_overlap_timelines_share_one_time_scale_and_say_replayed(capsys):
    run = OVERLAP[sorted(OVERLAP)[0]]
    speed.show_overlap(run)
    out = capsys.readouterr().out
    for mode, f in speed.overlap_of(run).items():
        assert (
            f"{mode}: all_reduce kernels {f.nccl_ms:.3f} ms, other kernels {f.other_ms:.3f} ms"
            in out
        )
    fig = plt.gcf()
    longest = max(trace.span_us(p.select(kind=trace.GPU_KINDS)) for p in run.value.values())
    assert [ax.get_xlim() for ax in fig.axes] == [pytest.approx((0, longest / 1e3 * 1.02))] * 2
    assert fig._suptitle.get_text().endswith(f"{run.machine} (replayed)")


def test_the_nccl_tests_table_gives_each_sizes_busbw(monkeypatch):
    shown = []
    monkeypatch.setattr(speed, "display", lambda *tables: shown.extend(tables))
    run = synthetic_bandwidth()
    speed.show_bandwidth(run)
    table, s = shown[0], speed.sweep(run)
    busbw = [row[[c[0] for c in table.columns].index("busbw")] for row in table.rows]
    assert busbw == pytest.approx(s.busbw[s.ranks]["all_reduce"])


def test_the_claims_name_the_profiled_steps_and_the_busbw_claim_its_fewer_samples():
    overlap = OVERLAP[sorted(OVERLAP)[0]]
    bandwidth = synthetic_bandwidth()  # all_reduce: 3 samples a size
    bandwidth.value["ceiling"] = timing.Timing([2**30 / 300e9] * 7, "cuda events", 2**30)
    table = claims.ClaimsTable(NOTEBOOK)
    speed.add_claims(table, overlap, bandwidth)
    blocking, async_op, ceiling = table.claims
    steps = {mode: p.steps for mode, p in overlap.value.items()}
    assert f"over {steps['blocking']} profiled steps" in blocking.measured
    assert f"over {steps['async_op=True']} profiled steps" in async_op.measured
    assert ceiling.comparison.value.samples == 3


def test_rank_1_stopped_before_the_wait_says_the_run_measured_the_connection():
    value = {
        "status": ["returned", "stopped"],
        "marks": [[], []],
        "results": [None, None],
        "reason": "the deadline (10 s) passed; ranks still running were stopped",
        "elapsed_s": 10.0,
    }
    run = fake_run(value, backend="nccl", wait_timeout_s=2.0, deadline_s=10.0)
    assert hangs.wait_of(run).sentence == (
        "rank 1 never reached wait(timeout=2 s): it was inside irecv (its pair not connected yet) "
        "and was stopped at the 10 s deadline (the deadline (10 s) passed; ranks still running "
        "were stopped); this measured the connection, not the wait"
    )


IS_COMPLETED = "work.is_completed() is True once the operation is enqueued; it does not mean the data has arrived"


@pytest.mark.parametrize("machine", MACHINES)
def test_is_completed_fails_when_no_flag_was_true_at_return_and_a_poll_never_turned_true(machine):
    run = HOST[machine]
    rows = [dict(r) for r in run.value]
    for r in rows:
        if r.get("completed_at_return") is not None:
            r["completed_at_return"] = False
    polled = [r for r in rows if r["call"] == "irecv + poll is_completed()"]
    assert polled
    for r in polled:
        r["completed_by_poll"] = True
    by_poll = records.Run(rows, run.live, run.header)
    assert host.claim_rows(by_poll)[IS_COMPLETED][1] is not False  # judged on the polling time
    polled[0]["completed_by_poll"] = False
    never = records.Run(rows, run.live, run.header)
    assert host.claim_rows(never)[IS_COMPLETED][1] is False


def test_the_host_bars_keep_small_call_names_under_the_bars_only():
    host.show(gloo_host_rows(), HOST[MACHINES[0]], "point-to-point")
    for ax in plt.gcf().axes:
        assert {t.get_fontsize() for t in ax.get_xticklabels()} == {8}
        assert 8 not in {t.get_fontsize() for t in ax.get_yticklabels()}


def test_the_host_bars_write_a_second_as_1000_not_1e_03():
    host.show(gloo_host_rows(first_ms=1000.0), HOST[MACHINES[0]], "point-to-point")
    labels = [t.get_text() for ax in plt.gcf().axes for t in ax.texts]
    assert not [label for label in labels if "e+" in label]
    assert [label for label in labels if label.isdigit() and int(label) >= 1000]


def test_a_size_whose_bytes_take_exactly_the_shortest_call_is_not_counted_as_cheaper(monkeypatch):
    run = synthetic_bandwidth()
    s = speed.sweep(run)
    floor = min(t.median_us for t in s.all_reduce)
    assert floor == 20.0
    for rate, cheapest in ((2**20 / 1e3 / floor, "1 KiB"), (2**20 / 1e3 / floor * 1.001, "1 MiB")):
        assert (2**20 / rate / 1e3 == floor) == (cheapest == "1 KiB")
        fixed = dataclasses.replace(s, algbw=[*s.algbw[:-1], rate])
        monkeypatch.setattr(speed, "sweep", lambda run, fixed=fixed: fixed)
        said = speed.see_bandwidth(run).sentences[1]
        assert f"the shortest call (20.0 us) up to {cheapest}:" in said


def test_the_nccl_tests_table_says_the_sum_and_the_plot_says_replayed(monkeypatch):
    shown = []
    monkeypatch.setattr(speed, "display", lambda *tables: shown.extend(tables))
    run = synthetic_bandwidth()
    speed.show_bandwidth(run)
    table = shown[0]
    assert {row[2:4] == ["float", "sum"] for row in table.rows} == {True}
    assert plt.gcf().get_suptitle().endswith(f"{run.machine} (replayed)")
