"""CPU tests of notebook 06's analysis functions and of its wait(timeout) experiment under gloo
(read from the notebook itself)."""

import json
import statistics
import textwrap
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from notebook_code import definitions

from helpers import claims, distributed, records, timing

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "06_nccl_point_to_point_and_collectives.ipynb"
RECORDED = ROOT / "results" / "2xNVIDIA-H200" / "06_nccl_point_to_point_and_collectives" / "wait_timeout_nccl.json"
WANTED_FUNCTIONS = {"wait_timeout_without_send", "wait_timeout_outcome", "stopped_at", "expected_after",
                    "mismatches", "how_soon", "when_data_absent", "host_value", "collectives_sweep", "sweep_worker",
                    "plain_all_reduce", "sweep_of", "busbw_of"}
WANTED_NAMES = {"NEXT_LINE", "QUICK_BACK"}


@pytest.fixture(scope="module")
def nb06() -> dict:
    """The notebook's functions, executed from its own source in a fresh namespace."""
    return definitions(NOTEBOOK, WANTED_FUNCTIONS | WANTED_NAMES, {"claims": claims, "distributed": distributed, "records": records, "timing": timing,
                       "torch": torch, "dist": dist, "timedelta": timedelta, "statistics": statistics,
                       "textwrap": textwrap, "NOTEBOOK": NOTEBOOK.stem})


def _run(value: dict, wait_timeout_s: float = 2.0, deadline_s: float = 10.0) -> SimpleNamespace:
    return SimpleNamespace(value=value, params={"backend": "nccl", "wait_timeout_s": wait_timeout_s,
                                                "deadline_s": deadline_s})


def _case(marks1: list, status1: str = "returned", result1: object = None) -> dict:
    return {"status": ["returned", status1], "marks": [[[0.1, "connected"]], marks1],
            "results": ["sent nothing", result1], "reason": "r", "elapsed_s": 2.1}


def test_wait_timeout_outcome_raised_measures_from_waiting(nb06):
    case = _case([[0.1, "connected"], [0.2, "waiting"], [2.25, "wait raised"]], result1="DistBackendError: timed out")
    raised, sentence, waited = nb06["wait_timeout_outcome"](_run(case))
    assert raised is True and waited == pytest.approx(2.05)
    assert "raised after 2.05 s" in sentence and "DistBackendError" in sentence


def test_wait_timeout_outcome_returned_and_stuck_in_wait(nb06):
    raised, sentence, waited = nb06["wait_timeout_outcome"](
        _run(_case([[0.1, "connected"], [0.2, "waiting"], [0.5, "wait returned"]], result1="wait returned")))
    assert raised is False and waited == pytest.approx(0.3) and "returned after" in sentence
    raised, sentence, waited = nb06["wait_timeout_outcome"](
        _run(_case([[0.1, "connected"], [0.2, "waiting"]], status1="stopped")))
    assert raised is False and waited is None and "inside wait()" in sentence and "stopped" in sentence


def test_wait_timeout_outcome_on_the_2xh200_recording_raised_after_the_wait_began(nb06):
    """Recorded on 2xH200 with the pair connected first: the wait itself is timed, and it raised."""
    recorded = json.loads(RECORDED.read_text())["result"]
    raised, sentence, waited = nb06["wait_timeout_outcome"](_run(recorded))
    assert raised is True and waited >= 2.0 and "raised after" in sentence


def test_wait_timeout_outcome_says_when_rank_1_never_reached_the_wait(nb06):
    """The old recording's shape (git history before c4805d33e12e): rank 1 was stopped inside
    irecv's connection set-up, with no mark at all."""
    recorded = {"status": ["returned", "stopped"], "marks": [[], []], "results": [None, None],
                "reason": "the deadline (10 s) passed; ranks still running were stopped", "elapsed_s": 10.0}
    raised, sentence, waited = nb06["wait_timeout_outcome"](_run(recorded))
    assert raised is False and waited is None
    assert "never reached wait" in sentence and "not connected" in sentence
    raised, sentence, _ = nb06["wait_timeout_outcome"](_run(_case([[0.1, "connected"]], status1="died")))
    assert raised is False and "inside the irecv call" in sentence and "died" in sentence


def test_stopped_at_reads_the_last_mark(nb06):
    stopped_at = nb06["stopped_at"]
    assert stopped_at({"marks": [[], [[0.0, "start"]]], "status": ["returned", "stopped"]}, 1) == \
        "torch.distributed.recv(t, src=0)"
    assert stopped_at({"marks": [[], [[0.0, "start"], [0.1, "recv returned"]]],
                       "status": ["returned", "stopped"]}, 1) == "print(t)"
    assert stopped_at({"marks": [[], []], "status": ["returned", "returned"]}, 1) == "nothing: it finished"
    assert stopped_at({"marks": [[], []], "status": ["returned", "stopped"]}, 1) == "before the first mark"


def test_mismatches_finds_a_wrong_rank(nb06):
    n = 2
    good = {mode: {name: {"after": [nb06["expected_after"](name, r, n) for r in range(n)]}
                   for name in ("broadcast", "all_reduce", "reduce")} for mode in ("blocking", "async_op=True")}
    run = SimpleNamespace(value={"who": [{}, {}], **good})
    assert nb06["mismatches"](run) == []
    good["blocking"]["all_reduce"]["after"][1] = [0, 0, 0]
    good["async_op=True"]["reduce"]["after"][1] = [9, 9, 9]  # not the destination: anything goes
    assert nb06["mismatches"](run) == ["blocking all_reduce rank 1: [0, 0, 0] != [3, 5, 7]"]


def test_how_soon_and_when_data_absent(nb06):
    assert nb06["how_soon"]({"waited_ms": 0.08, "late_ms": 50.0, "arrived": 0}).startswith("at once")
    assert nb06["how_soon"]({"waited_ms": 50.8, "late_ms": 50.0, "arrived": 1}) == \
        "only after 50.8 ms with the data there"
    comparison = claims.compare(claims.Value(0.08, 0.01, "ms"), 10, holds_if="below")
    assert nb06["when_data_absent"]([0, 0.0], comparison) is comparison
    assert nb06["when_data_absent"]([0, 0.2], comparison) is False


def test_host_value_is_median_and_half_iqr_in_ms(nb06):
    rows = [{"call": "recv", "returned_s": s} for s in (0.001, 0.002, 0.003, 0.004, 0.005)]
    rows.append({"call": "other", "returned_s": 9.0})
    value = nb06["host_value"](SimpleNamespace(value=rows), "recv", "returned_s")
    assert value.value == pytest.approx(3.0) and value.spread == pytest.approx(1.0)
    assert value.unit == "ms" and value.samples == 5


def test_wait_timeout_experiment_connects_first_then_raises_under_gloo(nb06):
    """The experiment itself, live on the CPU: the pair is connected before the wait is timed."""
    result = nb06["wait_timeout_without_send"]("gloo", 0.5, 20.0)
    labels = [label for _, label in result["marks"][1]]
    assert labels[:2] == ["connected", "waiting"], result
    assert [label for _, label in result["marks"][0]] == ["connected"]
    run = SimpleNamespace(value=result, params={"backend": "gloo", "wait_timeout_s": 0.5, "deadline_s": 20.0})
    raised, _, waited = nb06["wait_timeout_outcome"](run)
    assert raised and 0.4 < waited < 5.0


def test_the_collectives_sweep_runs_end_to_end_on_2_and_4_gloo_ranks(nb06):
    """The notebook's N-sweep itself, with gloo ranks on the CPU: every op, right results, rank 0's timings."""
    ops = list(distributed.COLLECTIVE_OPS)
    sweep = nb06["collectives_sweep"]([2, 4], "gloo", ops, [64, 1024], 1, 2, 3, False)
    assert [entry["world_size"] for entry in sweep] == [2, 4]
    for entry in sweep:
        assert entry["plain_s"] is None
        assert entry["wrong"] == {op: [0, 0] for op in ops}
        assert [t.nbytes for t in entry["timings"]["all_to_all"]] == [64, 1024]
        busbw = nb06["busbw_of"](entry, [64, 1024])
        t = entry["timings"]["all_reduce"][1]
        assert busbw["all_reduce"][1] == pytest.approx(distributed.busbw_gbps("all_reduce", 1024, t.median_s,
                                                                              entry["world_size"]))


def test_sweep_of_reads_the_sweep_and_the_recording_made_before_it(nb06, capsys):
    timings = {"all_reduce": [timing.Timing([1e-3], "cuda events", 1024)]}
    new = SimpleNamespace(value={"sweep": [{"world_size": 2, "timings": timings, "wrong": None, "plain_s": None}]})
    assert nb06["sweep_of"](new) == new.value["sweep"]
    old = SimpleNamespace(value={"world_size": 2, "timings": timings}, machine="2xNVIDIA-H200")
    assert nb06["sweep_of"](old) == [{"world_size": 2, "timings": timings, "wrong": None, "plain_s": None}]
    assert "predates the sweep" in capsys.readouterr().out
