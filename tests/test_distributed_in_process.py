"""Tests of helpers.distributed that run in this process: a worker's body in a gloo world of one
rank, the checks of launch's arguments, and what a launch gives back.

test_distributed.py and test_collectives.py launch real ranks, whose code mutation testing cannot
follow; these tests reach the same code here, in well under a second each.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing as mp
import os
import signal
import tempfile
import threading
import time
import types

import cloudpickle
import numpy as np
import pytest
import torch
import torch.distributed as dist

from helpers import distributed, forkserver, hardware
from helpers.distributed import (
    in_rank,
    launch_checks,
    nccl_calls,
    rank_process,
    spin_barrier,
    supervisor,
    timed_collectives,
)

SWEEP = dict(sizes=[64], warmup=0, iters=2, samples=2)


@pytest.fixture
def world_of_one():
    """This process as rank 0 of a gloo group of one, for the test's length."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------- a worker's body, one rank


def test_collective_timings_times_every_op_and_finds_no_wrong_element(world_of_one):
    ops = list(distributed.COLLECTIVE_OPS)
    result = distributed.collective_timings(0, 1, ops=ops, **SWEEP | {"sizes": [64, 128]})
    assert result["wrong"] == {op: [0, 0] for op in ops}
    for op in ops:
        timings = result["timings"][op]
        assert [t.nbytes for t in timings] == [64, 128]
        assert [t.label for t in timings] == [f"{op} 64 B", f"{op} 128 B"]
        assert all(len(t.samples_s) == 2 and t.calls_per_sample == 2 for t in timings)


def test_collective_sweep_sends_devices_then_each_op_in_both_placements(world_of_one):
    sent = []
    distributed.collective_sweep(
        0,
        1,
        ops=["all_reduce", "all_gather", "all_to_all"],
        per_iter=True,
        emit=sent.append,
        **SWEEP,
    )
    devices, *rows = sent
    [me] = devices["devices"]
    assert (me["rank"], me["pid"], me["device"], me["name"]) == (0, os.getpid(), -1, "CPU (gloo)")
    assert [(row["op"], row["size"]) for row in rows] == [
        ("all_reduce", 64),
        ("all_gather", 64),
        ("all_to_all", 64),
    ]
    groups = {row["op"]: row["groups"] for row in rows}
    # gloo has no out-of-place all_reduce, and nobody an in-place all_to_all: each says why
    assert set(groups["all_reduce"]["out_of_place"]) == {"refused"}
    assert "NCCL" in groups["all_reduce"]["out_of_place"]["refused"]
    assert set(groups["all_to_all"]["in_place"]) == {"refused"}
    timed = [
        (op, placement)
        for op, by_placement in groups.items()
        for placement, group in by_placement.items()
        if "timing" in group
    ]
    assert timed == [
        ("all_reduce", "in_place"),
        ("all_gather", "out_of_place"),
        ("all_gather", "in_place"),
        ("all_to_all", "out_of_place"),
    ]
    for op, placement in timed:
        group = groups[op][placement]
        assert group["wrong"] == 0
        assert group["timing"].nbytes == 64 and len(group["timing"].samples_s) == 2
        assert len(group["per_iter_s"]) == 2 and all(s > 0 for s in group["per_iter_s"])


def test_in_place_all_gather_sends_the_rank_slice_of_its_output(world_of_one, monkeypatch):
    """nccl-tests' in place: all_gather's input is this rank's part of the output buffer."""
    real, shared = dist.all_gather_into_tensor, []

    def watched(output, input, *args, **kwargs):
        shared.append(input.untyped_storage().data_ptr() == output.untyped_storage().data_ptr())
        return real(output, input, *args, **kwargs)

    monkeypatch.setattr(dist, "all_gather_into_tensor", watched)
    distributed.collective_sweep(0, 1, ops=["all_gather"], emit=lambda _: None, **SWEEP)
    assert shared[0] is False and shared[-1] is True  # out of place first, then in place


def test_sweep_arguments_are_checked_with_their_names(world_of_one):
    with pytest.raises(ValueError, match="graph_launches must be a whole number of graph replays"):
        distributed.collective_sweep(0, 1, ops=["all_gather"], graph_launches=-1, **SWEEP)
    with pytest.raises(ValueError, match="gloo backend runs on the CPU .* pass graph_launches=0"):
        distributed.collective_sweep(0, 1, ops=["all_gather"], graph_launches=2, **SWEEP)


def test_graph_replays_are_accepted_under_nccl(world_of_one, monkeypatch):
    class Started(Exception):
        pass

    def stop(_):
        raise Started

    monkeypatch.setattr(timed_collectives, "backend_here", lambda: "nccl")
    with pytest.raises(Started):  # past the checks: the devices are sent
        distributed.collective_sweep(0, 1, ops=["all_gather"], graph_launches=2, emit=stop, **SWEEP)


def test_a_rank_under_nccl_runs_on_its_current_gpu(monkeypatch):
    monkeypatch.setattr(in_rank, "backend_here", lambda: "nccl")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert distributed.rank_device() == torch.device("cuda", 3)


def test_a_rank_joins_the_group_through_the_launchers_store(monkeypatch):
    environ, threads = dict(os.environ), torch.get_num_threads()
    monkeypatch.setattr(os, "environ", environ)  # the rank replaces its environment
    store = supervisor._serve_store(1, 5.0)
    assert store.timeout == datetime.timedelta(seconds=5)
    spec = dict(port=store.port, world_size=1, backend="gloo", group_timeout_s=5.0)
    try:
        rank_process._join_group(0, spec | dict(parent_env={"HOME": "/h"}, env={"A": "b"}))
        assert (dist.get_backend(), dist.get_rank(), dist.get_world_size()) == ("gloo", 0, 1)
        assert environ["HOME"] == "/h" and environ["A"] == "b" and environ["WORLD_SIZE"] == "1"
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- launch's arguments


def _nothing(rank, world_size):
    return rank


def _takes_one(rank, world_size, value):
    return value


def test_good_arguments_pass_the_checks():
    assert launch_checks.check_launch(_nothing, np.int64(2), "gloo", 1, 1, (), None, None) == (
        2,
        "gloo",
    )
    assert launch_checks.check_launch(
        _takes_one, 4, "gloo", 86400, 0.5, [7], None, {"NCCL_DEBUG": "INFO"}
    ) == (4, "gloo")
    assert launch_checks.check_launch(_takes_one, 2, "gloo", 1, 1, (), {"value": 7}, None) == (
        2,
        "gloo",
    )
    assert launch_checks.check_launch(print, 2, "gloo", 1, 1, ("any", "thing"), None, None) == (
        2,
        "gloo",
    )


def test_default_backend_and_world_size_follow_the_hardware():
    gpus = hardware.gpu_count()
    assert distributed.default_world_size() == (gpus if gpus >= 2 else 2)
    assert distributed.choose_backend(2) == ("nccl" if gpus >= 2 else "gloo")
    assert distributed.choose_backend(gpus + 1) == "gloo"


def test_helpers_do_nothing_outside_a_worker():
    distributed.mark("outside")  # no parent to tell: no error
    assert distributed.rank_device() == torch.device("cpu")
    assert distributed.device_idle() is True
    with pytest.raises(TypeError):
        distributed.mark(3)
    with pytest.raises(ValueError):
        distributed.delay(-1)


def test_nccl_without_nccl_in_torch_says_to_pass_gloo(monkeypatch):
    monkeypatch.setattr(dist, "is_nccl_available", lambda: False)
    with pytest.raises(ValueError, match="needs a PyTorch build with NCCL"):
        launch_checks.check_launch(print, 1, "nccl", 1, 1, (), None, None)
    monkeypatch.setattr(distributed.launch_checks.hardware, "gpu_count", lambda: 8)
    assert distributed.choose_backend(2) == "gloo"


def test_default_backend_is_gloo_without_a_gpu_per_rank(monkeypatch):
    monkeypatch.setattr(distributed.launch_checks.hardware, "gpu_count", lambda: 1)
    assert distributed.choose_backend(2) == "gloo"


@pytest.mark.parametrize(
    ("name", "what"),
    [("timeout_s", "seconds the workers may run"), ("startup_timeout_s", "seconds to start")],
)
def test_a_bad_deadline_is_named_with_its_unit(name, what):
    values = dict(timeout_s=1, startup_timeout_s=1) | {name: -1}
    with pytest.raises(ValueError, match=f"^{name} must be a positive, finite number \\({what}"):
        launch_checks.check_launch(
            print, 1, "gloo", values["timeout_s"], values["startup_timeout_s"], (), None, None
        )


def test_bandwidth_errors_name_the_argument_and_its_unit():
    with pytest.raises(ValueError, match="^nbytes must be a positive"):
        distributed.algbw_gbps(0, 1.0)
    with pytest.raises(ValueError, match="world_size must be a whole number of ranks"):
        distributed.bus_factor("all_reduce", 0)


# ---------------------------------------------------------------- algbw / busbw


def test_algbw_is_bytes_per_second_in_decimal_gb():
    assert distributed.algbw_gbps(2**30, 0.00325) == pytest.approx(330.382, rel=1e-5)
    assert distributed.algbw_gbps(1e9, 1.0) == 1.0


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 1, 0.0),
        ("all_gather", 2, 0.5),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 8, 0.875),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("send_recv", 2, 1.0),
    ],
)
def test_bus_factors_are_nccl_tests_ones(op, n, factor):
    assert distributed.bus_factor(op, n) == pytest.approx(factor)


def test_busbw_matches_hand_computed_nccl_tests_numbers():
    # nccl-tests, 8 GPUs, all_reduce of 1 GiB in 5 ms: algbw 214.75 GB/s, busbw x 14/8
    assert distributed.busbw_gbps("all_reduce", 2**30, 0.005, 8) == pytest.approx(
        214.748 * 1.75, rel=1e-5
    )
    # all_gather of a 1 GiB output on 2 ranks in 1.5 ms: algbw 715.83 GB/s, busbw half of it
    assert distributed.busbw_gbps("all_gather", 2**30, 0.0015, 2) == pytest.approx(
        715.828 / 2, rel=1e-5
    )
    assert distributed.busbw_gbps("broadcast", 4e9, 0.01, 2) == pytest.approx(400.0)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: distributed.busbw_gbps("allreduce", 1024, 1.0, 2), ValueError),
        (lambda: distributed.busbw_gbps("all_reduce", 1024, 1.0, 0), ValueError),
        (lambda: distributed.bus_factor("all_reduce", 2.0), ValueError),
        (lambda: distributed.algbw_gbps(0, 1.0), ValueError),
        (lambda: distributed.algbw_gbps(-5, 1.0), ValueError),
        (lambda: distributed.algbw_gbps(1024, 0.0), ValueError),
        (lambda: distributed.algbw_gbps(1024, float("nan")), ValueError),
        (lambda: distributed.algbw_gbps("1024", 1.0), TypeError),
        (lambda: distributed.algbw_gbps(True, 1.0), TypeError),
    ],
)
def test_bandwidth_helpers_reject_bad_input(call, error):
    with pytest.raises(error):
        call()


# ---------------------------------------------------------------- what an Outcome says


def _outcome(status, errors=None, failure_order=(), startup_s=0.5, elapsed_s=2.0):
    n = len(status)
    return distributed.Outcome(
        "gloo",
        n,
        2.0,
        list(status),
        [None] * n,
        errors or [None] * n,
        [[] for _ in status],
        [""] * n,
        [""] * n,
        "r",
        startup_s,
        elapsed_s,
        startup_timeout_s=30.0,
        failure_order=list(failure_order),
    )


def test_the_rank_that_failed_first_is_blamed_not_the_lowest():
    outcome = _outcome(
        ["raised", "died"], ["Traceback: peer closed", "died with SIGKILL before returning"], [1, 0]
    )
    with pytest.raises(
        distributed.WorkerError, match="rank 1 of 2 .gloo. died with SIGKILL"
    ) as caught:
        outcome.raise_for_status()
    assert caught.value.rank == 1
    with pytest.raises(distributed.WorkerError, match=r"^rank 0 of 1 \(gloo\) died$"):
        _outcome(["died"]).raise_for_status()  # no words from the rank: it died
    with pytest.raises(distributed.WorkerError, match=r"^rank 0 of 1 \(gloo\) raised:\nValueError"):
        _outcome(["raised"], ["ValueError: x\n"]).raise_for_status()
    # without an order (an Outcome made by hand), the lowest failed rank
    assert _outcome(["stopped", "raised", "died"], failure_order=[]).first_failure == 1
    assert _outcome(["returned", "stopped"]).first_failure is None


def test_a_timeout_says_which_deadline_with_its_value():
    late = _outcome(["returned", "stopped"])
    with pytest.raises(
        distributed.LaunchTimeout, match=r"ranks \[1\] .* within timeout_s=2 s"
    ) as caught:
        late.raise_for_status()
    assert caught.value.outcome is late  # its marks, for who reached what
    at_start = _outcome(["stopped", "stopped"], startup_s=None, elapsed_s=30.2)
    with pytest.raises(
        distributed.LaunchTimeout, match=r"startup_timeout_s=30 s .* stopped after 30.2 s"
    ):
        at_start.raise_for_status()
    assert _outcome(["returned", "returned"]).raise_for_status() == [None, None]


@pytest.mark.parametrize(
    ("exitcode", "words"),
    [
        (3, "exited with code 3"),
        (0, "exited with code 0"),
        (-9, "died with SIGKILL"),
        (-11, "died with SIGSEGV"),
        (-200, "died with signal 200"),
        (None, "could not be read"),
    ],
)
def test_an_exit_code_is_said_in_words(exitcode, words):
    assert words in supervisor._exit_words(exitcode)


def test_only_the_end_of_a_long_output_is_read(tmp_path):
    limit = distributed.OUTPUT_KIB * 1024
    path = tmp_path / "rank0.stdout"
    lines = [f"line {i:06d} " + "é" * 20 for i in range(20_000)]  # about 1 MB, two-byte characters
    path.write_text("\n".join(lines) + "\n")
    text = supervisor._tail(path)
    kept = text.splitlines()
    assert kept[0].startswith("[... the first ") and kept[0].endswith(" bytes are not kept]")
    assert kept[1:] == lines[-len(kept) + 1 :]  # whole lines, the last ones
    assert limit - 100 < len("\n".join(kept[1:]).encode()) <= limit
    assert int(kept[0].split()[3]) + len(text.split("\n", 1)[1].encode()) == path.stat().st_size
    path.write_text("short\n")
    assert supervisor._tail(path) == "short\n"
    assert supervisor._tail(tmp_path / "missing") == ""


class _Ended:
    """A rank's process that has ended (``exitcode``); ``sentinel`` fires when it is readable."""

    def __init__(self, exitcode=0, sentinel=None, alive=False):
        self.exitcode, self.sentinel, self.alive = exitcode, sentinel, alive

    def is_alive(self):
        return self.alive


def test_a_result_sent_just_before_the_end_counts_as_returned():
    reader, writer = mp.Pipe(duplex=False)
    writer.send(("result", cloudpickle.dumps(7)))
    writer.close()
    rank = supervisor._Rank(_Ended(exitcode=0), reader)
    supervisor._notice_exit(rank)
    assert (rank.status, rank.result, rank.exit_seen) == ("returned", 7, True)
    silent = supervisor._Rank(_Ended(exitcode=-9), None)
    supervisor._notice_exit(silent)
    assert silent.status == "died" and silent.error.startswith("died with SIGKILL before returning")


def test_waiting_for_exits_stops_at_its_deadline():
    never, ends_late = os.pipe()  # a sentinel that fires only once written to
    late = threading.Timer(2.0, os.write, (ends_late, b"x"))
    late.start()
    try:
        start = time.monotonic()
        supervisor._wait_for_exits(
            [supervisor._Rank(_Ended(sentinel=never, alive=True), None)], 0.1
        )
        assert time.monotonic() - start < 1.0
    finally:
        late.cancel()
        os.close(never)
        os.close(ends_late)


# ---------------------------------------------------------------- every word of launch's errors

ARGUMENT_ERRORS = [
    (
        dict(worker="not a function"),
        TypeError,
        "worker must be a function worker(rank, world_size, ...), got str",
    ),
    (
        dict(args=5),
        TypeError,
        "args must be a tuple of extra positional arguments for the worker, got int",
    ),
    (
        dict(args="ab"),
        TypeError,
        "args must be a tuple of extra positional arguments for the worker, got str",
    ),
    (
        dict(kwargs={1: 2}),
        TypeError,
        "kwargs must be a dict of keyword arguments for the worker (names as strings), got {1: 2}",
    ),
    (
        dict(args=(1,), kwargs={"b": 2, "a": 1}),
        TypeError,
        "worker(rank, world_size) cannot be called as worker(rank, world_size, *args, **kwargs) "
        "with 1 args and kwargs ['a', 'b'] (too many positional arguments): it must take the rank "
        "and the world size first, then what args and kwargs pass",
    ),
    (
        dict(worker=_takes_one),
        TypeError,
        "worker(rank, world_size, value) cannot be called as worker(rank, world_size, *args, "
        "**kwargs) with 0 args and kwargs [] (missing a required argument: 'value'): it must take "
        "the rank and the world size first, then what args and kwargs pass",
    ),
    (dict(world_size=0), ValueError, "world_size must be a whole number of ranks >= 1, got 0"),
    (
        dict(world_size=65),
        ValueError,
        "world_size=65 would start 65 processes on this machine; pass at most 64 "
        "(a demonstration needs 2 to 8)",
    ),
    (
        dict(backend="mpi"),
        ValueError,
        "backend must be 'nccl' (GPUs), 'gloo' (CPU) or None to choose, got 'mpi'",
    ),
    (
        dict(timeout_s=86401),
        ValueError,
        "timeout_s=86401 s is longer than a demonstration may hold the machine (at most 86400 s, "
        "a day); pass the seconds you would wait, e.g. 60",
    ),
    (
        dict(startup_timeout_s=1e6),
        ValueError,
        "startup_timeout_s=1000000.0 s is longer than a demonstration may hold the machine",
    ),
    (
        dict(env={"A": 1}),
        TypeError,
        "env must be a dict of environment variables, names and values as strings, "
        "e.g. {'NCCL_DEBUG': 'INFO'}",
    ),
    (
        dict(env={"RANK": "3", "NCCL_NVLS_ENABLE": "1", "A": "b"}),
        ValueError,
        "env may not set ['NCCL_NVLS_ENABLE', 'RANK']: the launcher sets them for every rank "
        "(LAUNCHER_ENV, and RANK_ENV, which the shared GPU machines require); pass other "
        "variables, e.g. {'NCCL_DEBUG': 'INFO'}",
    ),
]


@pytest.mark.parametrize(("change", "error", "words"), ARGUMENT_ERRORS)
def test_each_bad_launch_argument_is_named_with_what_to_pass(change, error, words):
    call = dict(
        worker=_nothing,
        world_size=2,
        backend="gloo",
        timeout_s=1,
        startup_timeout_s=1,
        args=(),
        kwargs=None,
        env=None,
    )
    call.update(change)
    with pytest.raises(error) as caught:
        launch_checks.check_launch(**call)
    assert str(caught.value).startswith(words)


def test_nccl_needs_a_gpu_per_rank_and_says_how_many_there_are(monkeypatch):
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(launch_checks.hardware, "gpu_count", lambda: 1)
    with pytest.raises(ValueError) as caught:
        launch_checks.check_launch(_nothing, 2, "nccl", 1, 1, (), None, None)
    assert str(caught.value) == (
        "backend='nccl' needs one GPU per rank: world_size=2 but this machine has 1 GPU(s); "
        "pass backend='gloo' (CPU ranks) or fewer ranks"
    )
    monkeypatch.setattr(launch_checks.hardware, "gpu_count", lambda: 2)
    assert launch_checks.check_launch(_nothing, 2, "nccl", 1, 1, (), None, None) == (2, "nccl")
    assert launch_checks.check_launch(_nothing, None, None, 1, 1, (), None, None) == (2, "nccl")
    assert launch_checks.check_launch(_nothing, 3, None, 1, 1, (), None, None) == (3, "gloo")
    assert launch_checks.check_launch(_nothing, 64, "gloo", 86400, 1, (), None, None) == (
        64,
        "gloo",
    )


# ---------------------------------------------------------------- the NCCL version nccl-tests writes


@pytest.mark.parametrize(
    ("version", "code"),
    [((2, 21, 5), 22105), ((2, 27), 22700), ((3,), 30000), (22004, 22004)],
)
def test_the_nccl_version_is_coded_as_nccl_tests_writes_it(monkeypatch, version, code):
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: version)
    assert distributed.nccl_version_code() == code


def test_without_nccl_the_version_code_is_zero(monkeypatch):
    def no_nccl():
        raise RuntimeError("no NCCL in a CPU build")

    monkeypatch.setattr(torch.cuda.nccl, "version", no_nccl)
    assert distributed.nccl_version_code() == 0


# ---------------------------------------------------------------- what an Outcome says, word for word


def test_describe_says_each_ranks_status_or_how_it_died_and_its_marks():
    outcome = _outcome(["returned", "died", "stopped"], [None, "died with SIGKILL", None])
    outcome.marks[0] = [[0.0, "start"], [1.25, "sent"]]
    assert outcome.describe() == (
        "gloo, 3 ranks: r\n"
        "  rank 0: returned; reached 'start' at 0.000 s, 'sent' at 1.250 s\n"
        "  rank 1: died with SIGKILL; reached no marks\n"
        "  rank 2: stopped; reached no marks"
    )
    assert str(outcome) == outcome.describe()
    assert outcome.reached(0) == ["start", "sent"] and outcome.last_mark(0) == "sent"
    assert outcome.last_mark(1) is None


def test_a_worker_error_ends_with_the_end_of_the_ranks_stderr():
    outcome = _outcome(["raised"], ["Traceback: boom\n"])
    outcome.log[0] = "\n" + "x" * 5000 + "END\n"
    message = str(distributed.WorkerError(outcome, 0))
    head, tail = message.split("\n--- end of rank 0's stderr ---\n")
    assert head == "rank 0 of 1 (gloo) raised:\nTraceback: boom"
    assert tail == ("x" * 5000 + "END")[-3000:]  # the last 3000 characters, stripped
    outcome.log[0] = "  \n"  # nothing but blanks: no stderr part
    assert str(distributed.WorkerError(outcome, 0)) == "rank 0 of 1 (gloo) raised:\nTraceback: boom"


# ---------------------------------------------------------------- the parent's watch, in-process


def _run(*ranks, launched=100.0, all_started=None, finished=None, failures=(), folder="."):
    spec = dict(backend="gloo", world_size=len(ranks), folder=str(folder))
    return supervisor._Launch(
        spec,
        None,
        ranks=list(ranks),
        launched=launched,
        all_started=all_started,
        finished=finished,
        failures=list(failures),
    )


def _rank(status=None, error=None, started_at=None):
    return supervisor._Rank(_Ended(), None, status=status, error=error, started_at=started_at)


def test_the_reason_names_the_first_failure_then_the_deadline_that_passed():
    raised, died = _rank("raised", "Traceback ..."), _rank("died", "died with SIGKILL")
    assert supervisor._reason(_run(raised, died, failures=[1, 0]), 30, 2) == (
        "rank 1 died with SIGKILL; ranks still running were stopped"
    )
    assert supervisor._reason(_run(raised, died, failures=[0, 1]), 30, 2) == (
        "rank 0 raised; ranks still running were stopped"
    )
    assert supervisor._reason(_run(raised, failures=[0]), 30, 2) == (
        "rank 0 raised; ranks still running were stopped"
    )
    done = _rank("returned")
    assert supervisor._reason(_run(done, done), 30, 2) == "every rank returned"
    at_start = _run(done, _rank("stopped"), finished=130.04)
    assert supervisor._reason(at_start, 30, 2) == (
        "start-up took longer than startup_timeout_s=30 s (waited 30.0 s); the ranks were stopped"
    )
    late = _run(done, _rank("stopped"), all_started=101.0, finished=103.0)
    assert supervisor._reason(late, 30, 2.5) == (
        "the deadline (2.5 s) passed; ranks still running were stopped"
    )


def test_collect_times_start_up_from_the_launch_and_the_run_from_the_start(tmp_path):
    (tmp_path / "rank0.stdout").write_text("hello\n")
    (tmp_path / "rank1.stderr").write_text("warning\n")
    run = _run(
        _rank("returned", started_at=100.2),
        _rank(),
        all_started=100.5,
        finished=103.0,
        folder=tmp_path,
    )
    run.ranks[0].result = 7
    outcome = supervisor._collect(run, 2, 30)
    assert (outcome.startup_s, outcome.elapsed_s) == (0.5, 2.5)
    assert outcome.status == ["returned", "stopped"] and outcome.results == [7, None]
    assert (outcome.printed, outcome.log) == (["hello\n", ""], ["", "warning\n"])
    assert (outcome.timeout_s, outcome.startup_timeout_s) == (2.0, 30.0)
    never = supervisor._collect(_run(_rank(), finished=130.0, folder=tmp_path), 2, 30)
    assert (never.startup_s, never.elapsed_s) == (None, 30.0)


def test_a_rank_that_failed_before_starting_counts_as_started(monkeypatch):
    """timeout_s runs from when every rank started its worker or ended: a rank that raised while
    joining does not keep the others under start-up's deadline."""
    monkeypatch.setattr(supervisor, "DEATH_NEWS_S", 0.01)
    reader, writer = mp.Pipe(duplex=False)
    writer.send(("error", "Traceback: could not join"))
    never, _ = os.pipe()
    rank = supervisor._Rank(_Ended(sentinel=never, alive=True), reader)
    run = supervisor._Launch({}, None, ranks=[rank])
    supervisor._watch(run, 60.0, 5.0)
    assert run.all_started is not None and run.finished >= run.all_started
    assert rank.status == "raised" and run.failures == [0]
    reader.close()
    writer.close()
    os.close(never)


def test_timeout_s_counts_from_when_the_workers_started():
    reader, writer = mp.Pipe(duplex=False)
    writer.send(("start", time.monotonic()))
    never, other = os.pipe()
    rank = supervisor._Rank(_Ended(sentinel=never, alive=True), reader)
    run = supervisor._Launch({}, None, ranks=[rank])
    supervisor._watch(run, 60.0, 0.05)  # start-up's 60 s no longer apply once it started
    assert run.all_started is not None and rank.started_at is not None
    assert run.all_started <= run.finished < run.all_started + 5.0
    assert rank.status is None  # still running: the caller stops it
    for end in (reader, writer):
        end.close()
    os.close(never)
    os.close(other)


def test_invalid_utf8_in_a_ranks_output_is_replaced_not_raised(tmp_path):
    path = tmp_path / "rank0.stderr"
    path.write_bytes(b"bad \xff byte\n")
    assert supervisor._tail(path) == "bad \ufffd byte\n"
    limit = distributed.OUTPUT_KIB * 1024
    path.write_bytes(b"x" * limit + b"\nlast \xfe\n")
    assert supervisor._tail(path).endswith("\nlast \ufffd\n")


def test_clean_up_closes_the_pipes_and_removes_the_folder(tmp_path):
    folder = tmp_path / "course-ranks-x"
    folder.mkdir()
    (folder / "rank0.stdout").write_text("x")
    reader, writer = mp.Pipe(duplex=False)
    unstarted = supervisor._Rank(_Ended(), reader)
    unstarted.process.pid = None  # never started: nothing to kill
    run = supervisor._Launch({}, None, ranks=[unstarted])
    supervisor._clean_up(run, str(folder))
    assert run.killed and reader.closed and not folder.exists()
    supervisor._clean_up(None, str(folder))  # already gone: nothing to say
    writer.close()


def test_supervise_starts_ranks_with_the_checked_backend_and_cleans_up(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(launch_checks.hardware, "gpu_count", lambda: 8)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    seen = {}

    class Stop(Exception):
        pass

    def start(run, ctx):
        seen.update(run.spec)
        seen["exists"] = os.path.isdir(run.spec["folder"])
        raise Stop

    monkeypatch.setattr(supervisor, "_start_ranks", start)
    with pytest.raises(Stop):
        supervisor.supervise(
            _nothing, 2, backend="gloo", timeout_s=5, startup_timeout_s=10, env={"A": "b"}
        )
    assert (seen["backend"], seen["world_size"], seen["env"]) == ("gloo", 2, {"A": "b"})
    assert seen["group_timeout_s"] == seen["release_wait_s"] == 75.0
    assert seen["exists"] and list(tmp_path.iterdir()) == []


def test_a_failure_before_the_ranks_start_is_raised_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def no_port(world_size, patience_s):
        raise OSError("no free port")

    monkeypatch.setattr(supervisor, "_serve_store", no_port)
    with pytest.raises(OSError, match="^no free port$"):
        supervisor.supervise(_nothing, 2, backend="gloo")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- the forkserver's context


def test_ranks_start_from_a_preloaded_forkserver_where_there_is_one(monkeypatch):
    preloaded = []
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["fork", "spawn", "forkserver"])
    monkeypatch.setattr(
        type(mp.get_context("forkserver")),
        "set_forkserver_preload",
        lambda self, m: preloaded.append(m),
    )
    assert forkserver.context().get_start_method() == "forkserver"
    assert preloaded == [["helpers.distributed"]]
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["spawn"])  # e.g. Windows
    assert forkserver.context().get_start_method() == "spawn"
    assert forkserver.start() is False  # nothing to start: ranks are spawned
    assert preloaded == [["helpers.distributed"]]


# ---------------------------------------------------------------- collectives' buffers and calls


def _as_the_collective_would(op, sent, n):
    """What each of ``n`` ranks holds after ``op``, computed by hand from every rank's buffers."""
    fulls = [buffers["full"] for buffers, _ in sent]
    share = fulls[0].numel() // n
    if op == "all_reduce":
        return [sum(fulls)] * n
    if op == "all_gather":
        return [torch.cat([buffers["part"] for buffers, _ in sent])] * n
    if op == "reduce_scatter":
        return [sum(fulls)[r * share : (r + 1) * share] for r in range(n)]
    if op == "broadcast":
        return [fulls[0]] * n
    return [torch.cat([full[r * share : (r + 1) * share] for full in fulls]) for r in range(n)]


@pytest.mark.parametrize("op", distributed.COLLECTIVE_OPS)
@pytest.mark.parametrize("placement", [None, "out_of_place", "in_place"])
def test_every_rank_expects_what_the_collective_gives_from_everyones_buffers(op, placement):
    if timed_collectives.placement_refused(op, placement or "out_of_place", "nccl"):
        placement = "out_of_place"  # all_to_all has no in-place call
    n, numel = 4, 4 * 5
    sent = [
        timed_collectives._collective_buffers(op, r, n, numel, torch.device("cpu"), placement)
        for r in range(n)
    ]
    for r, (got, (_, expected)) in enumerate(
        zip(_as_the_collective_would(op, sent, n), sent, strict=True)
    ):
        assert torch.equal(got, expected), (op, placement, r)
        assert expected.dtype == torch.float32
    in_place = (placement or timed_collectives.NOTEBOOK_PLACEMENT[op]) == "in_place"
    for r, (buffers, _) in enumerate(sent):
        if "part" in buffers:  # in place, the rank's part is its slice of the full buffer
            at = buffers["full"].data_ptr() + r * 5 * 4
            assert (buffers["part"].data_ptr() == at) == in_place


@pytest.mark.parametrize("op", distributed.COLLECTIVE_OPS)
@pytest.mark.parametrize("placement", ["out_of_place", "in_place"])
def test_a_collectives_buffers_are_float32_on_the_ranks_device(op, placement):
    cpu = torch.device("cpu")
    torch.set_default_device("meta")  # a buffer made without the rank's device lands here
    torch.set_default_dtype(torch.float64)  # and one made without float32 is float64
    try:
        buffers, expected = timed_collectives._collective_buffers(op, 1, 2, 8, cpu, placement)
    finally:
        torch.set_default_device(None)
        torch.set_default_dtype(torch.float32)
    for name, tensor in [*buffers.items(), ("expected", expected)]:
        assert (tensor.device, tensor.dtype) == (cpu, torch.float32), name
    in_place = placement == "in_place" and op != "all_to_all"
    assert ("out" in buffers) == (not in_place and op in ("all_reduce", "broadcast", "all_to_all"))


class _Direct:
    """NcclOutOfPlace's calls done by hand in a world of one: the output is the input."""

    def __init__(self):
        self.calls = []

    def all_reduce(self, send, recv):
        self.calls.append(("all_reduce", send, recv))
        recv.copy_(send)

    def broadcast(self, send, recv, root):
        self.calls.append(("broadcast", send, recv, root))
        recv.copy_(send)


@pytest.mark.parametrize("op", ["all_reduce", "broadcast"])
def test_out_of_place_all_reduce_and_broadcast_go_through_nccls_own_call(world_of_one, op):
    direct = _Direct()
    loop = timed_collectives._Loop(0, 2, 2)
    timed, wrong, per_iter = timed_collectives._time_one(op, 0, 1, 64, "out_of_place", loop, direct)
    assert wrong == 0 and per_iter is None and timed.label == f"{op} 64 B"
    kind, send, recv, *root = direct.calls[0]
    assert kind == op and send.numel() == recv.numel() == 16 and root in ([], [0])
    assert send.data_ptr() != recv.data_ptr()
    assert len(direct.calls) == 1 + 2 * 2  # the checked call, then samples x iters


def test_graph_timing_gets_the_call_the_size_and_the_label(world_of_one, monkeypatch):
    got = {}

    def graph_timing(call, loop, size, label):
        got.update(loop=loop, size=size, label=label)
        call()  # the op itself, with its buffers
        return "timed"

    monkeypatch.setattr(timed_collectives, "_graph_timing", graph_timing)
    loop = timed_collectives._Loop(1, 2, 3, graph_launches=4)
    direct = _Direct()
    result = timed_collectives._time_one("all_reduce", 0, 1, 128, "out_of_place", loop, direct)
    assert result == ("timed", 0, None)
    assert got == dict(loop=loop, size=128, label="all_reduce 128 B")
    assert len(direct.calls) == 2


class _Graph:
    """A captured graph's stand-in: counts replay() and hands out its exec handle."""

    def __init__(self, handle=None):
        self.replays = 0
        if handle is not None:
            self.raw_cuda_graph_exec = lambda: handle

    def replay(self):
        self.replays += 1


class _Stream:
    cuda_stream = 5678


def test_graph_launch_calls_the_drivers_cuGraphLaunch_on_the_graph_and_stream(monkeypatch):
    calls, results = [], iter([0, 1])

    class Driver:
        class cuGraphLaunch:  # ctypes' function object: argtypes is set on it, then it is called
            def __new__(cls, handle, stream):
                calls.append((handle, stream))
                return next(results)

    monkeypatch.setattr(timed_collectives.ctypes, "CDLL", lambda name: Driver)
    graph = _Graph(handle=1234)
    launch, name = timed_collectives._graph_launch(graph, _Stream())
    launch()
    assert name == "cuGraphLaunch calls" and calls == [(1234, 5678)] and graph.replays == 0
    with pytest.raises(RuntimeError, match="cuGraphLaunch failed: run without -G"):
        launch()  # a CUresult other than CUDA_SUCCESS (0)


@pytest.mark.parametrize("missing", ["driver library", "raw exec handle"])
def test_graph_launch_falls_back_to_replay(monkeypatch, missing):
    def no_library(name):
        raise OSError(f"{name}: cannot open shared object file")

    if missing == "driver library":
        monkeypatch.setattr(timed_collectives.ctypes, "CDLL", no_library)
    graph = _Graph(handle=1234 if missing == "driver library" else None)
    launch, name = timed_collectives._graph_launch(graph, _Stream())
    launch()
    assert name == "graph.replay() calls" and graph.replays == 1


def test_per_iteration_times_under_nccl_are_cuda_event_milliseconds_in_seconds(
    world_of_one, monkeypatch
):
    clock = iter([0.0, 2.0, 5.0, 9.0])  # milliseconds at each recorded event

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing

        def record(self):
            self.ms = next(clock)

        def elapsed_time(self, end):
            return end.ms - self.ms

    calls = []
    monkeypatch.setattr(timed_collectives, "backend_here", lambda: "nccl")
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    times = timed_collectives._per_iteration_s(lambda: calls.append(1), 3)
    assert times == pytest.approx([0.002, 0.003, 0.004]) and len(calls) == 3


def test_a_rank_on_a_gpu_names_it_and_its_pci_address(world_of_one, monkeypatch):
    class Props:
        name, pci_domain_id, pci_bus_id, pci_device_id = "NVIDIA H100", 1, 0x1B, 3

    def properties(device):
        assert device == torch.device("cuda", 2)
        return Props()

    monkeypatch.setattr(timed_collectives, "rank_device", lambda: torch.device("cuda", 2))
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    facts = timed_collectives._rank_facts(5)
    assert (facts["rank"], facts["device"], facts["name"]) == (5, 2, "NVIDIA H100")
    assert facts["pci"] == [1, 0x1B, 3] and facts["pid"] == os.getpid()


@pytest.mark.parametrize(("ops", "made"), [(["all_gather"], 0), (["all_gather", "broadcast"], 1)])
def test_nccls_own_calls_are_opened_only_for_all_reduce_and_broadcast(
    world_of_one, monkeypatch, ops, made
):
    from helpers import timing

    directs = []

    def open_direct():
        directs.append(_Direct())
        return directs[-1]

    monkeypatch.setattr(timed_collectives, "backend_here", lambda: "nccl")
    monkeypatch.setattr(timed_collectives, "NcclOutOfPlace", open_direct)
    monkeypatch.setattr(timing, "cuda_events", timing.host_clock)  # no GPU here: the host clock
    sent = []
    distributed.collective_sweep(0, 1, ops=ops, emit=sent.append, **SWEEP)
    assert len(directs) == made
    rows = {row["op"]: row["groups"] for row in sent[1:]}
    if made:  # under NCCL, broadcast is timed out of place too, through NCCL's call
        assert rows["broadcast"]["out_of_place"]["wrong"] == 0
        assert {call[0] for call in directs[0].calls} == {"broadcast"}


OPS_NAMED = "['all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'all_to_all']"


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (
            dict(ops=["allreduce"]),
            ValueError,
            f"unknown collective 'allreduce': pass names from {OPS_NAMED}",
        ),
        (
            dict(ops="all_reduce"),
            TypeError,
            f"ops must be a non-empty list of collective names from {OPS_NAMED}, got 'all_reduce'",
        ),
        (dict(ops=[]), TypeError, "ops must be a non-empty list"),
        (
            dict(sizes=[]),
            TypeError,
            "sizes must be a non-empty list of message sizes in bytes, got []",
        ),
        (
            dict(sizes=b"\x08"),
            TypeError,
            "sizes must be a non-empty list of message sizes in bytes",
        ),
        (
            dict(sizes=[8, 20]),
            ValueError,
            "size 20 bytes is not a multiple of 4 x world_size = 8 bytes: a message of float32 elements splits into 2 equal parts; pass e.g. 16 bytes",
        ),
        (
            dict(sizes=[4]),
            ValueError,
            "size 4 bytes is not a multiple of 4 x world_size = 8 bytes: a message of float32 elements splits into 2 equal parts; pass e.g. 8 bytes",
        ),
        (dict(rank=2), ValueError, "rank must be 0 to world_size - 1 = 1, got 2"),
        (dict(iters=0), ValueError, "iters must be a whole number of calls per sample >= 1, got 0"),
        (dict(warmup=-1), ValueError, "warmup must be a whole number of calls >= 0, got -1"),
        (dict(samples=0), ValueError, "samples must be a whole number >= 1, got 0"),
    ],
)
def test_each_bad_collective_argument_is_named_with_what_to_pass(change, error, words):
    call = dict(rank=1, world_size=2, ops=["all_reduce"], sizes=[8], warmup=0, iters=1, samples=1)
    call.update(change)
    with pytest.raises(error) as caught:
        timed_collectives._check_collective_args(**call)
    assert str(caught.value).startswith(words)
    call.update(rank=1, world_size=2, ops=("broadcast", "all_reduce"), sizes=[8, 16])
    call.update(warmup=0, iters=1, samples=1)
    assert timed_collectives._check_collective_args(**call) == (
        ["broadcast", "all_reduce"],
        [8, 16],
    )


# ---------------------------------------------------------------- a rank's own process, in-process


class _Store:
    def __init__(self, host, port, world_size, is_master, timeout):
        self.args = (host, port, world_size, is_master, timeout)


def _spec(backend, world_size=2):
    return dict(
        port=29511,
        world_size=world_size,
        backend=backend,
        group_timeout_s=7.0,
        parent_env={"HOME": "/h"},
        env={"NCCL_DEBUG": "INFO"},
    )


def test_an_nccl_rank_joins_on_its_own_gpu_while_the_spin_kernel_loads(monkeypatch):
    from helpers import timing

    calls = []
    monkeypatch.setattr(os, "environ", dict(os.environ))
    monkeypatch.setattr(dist, "TCPStore", _Store)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(timing, "load_spin_kernel", lambda d: calls.append(("load", d)))
    monkeypatch.setattr(timing, "sleep_cycles_per_us", lambda: calls.append(("calibrate",)))

    def init(backend, **group):
        calls.append(("init", backend, group))

    monkeypatch.setattr(dist, "init_process_group", init)
    rank_process._join_group(1, _spec("nccl"))
    assert calls[0] == ("set_device", 1) and calls[-1] == ("calibrate",)
    assert ("load", 1) in calls
    [(_, backend, group)] = [c for c in calls if c[0] == "init"]
    store = group.pop("store")
    assert backend == "nccl" and group == dict(
        device_id=torch.device("cuda", 1),
        rank=1,
        world_size=2,
        timeout=datetime.timedelta(seconds=7),
    )
    assert store.args == ("127.0.0.1", 29511, 2, False, datetime.timedelta(seconds=7))
    assert (os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["MASTER_PORT"]) == (
        "1",
        "1",
        "29511",
    )
    assert os.environ["NCCL_NVLS_ENABLE"] == "0" and os.environ["NCCL_DEBUG"] == "INFO"
    assert os.environ["HOME"] == "/h" and os.environ["LOCAL_WORLD_SIZE"] == "2"


@pytest.mark.parametrize(
    ("cpus", "world_size", "threads"), [(8, 2, 4), (8, 3, 2), (2, 4, 1), (None, 2, 1)]
)
def test_gloo_ranks_share_the_cpu_cores(monkeypatch, cpus, world_size, threads):
    got = []
    monkeypatch.setattr(os, "environ", dict(os.environ))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(dist, "TCPStore", _Store)
    monkeypatch.setattr(torch, "set_num_threads", got.append)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **group: got.append(backend))
    rank_process._join_group(0, _spec("gloo", world_size))
    assert got == [threads, "gloo"]


class _Pipe:
    """The rank's end of its pipe to the parent: what it sent; ``broken`` once the parent left."""

    def __init__(self, broken=False):
        self.sent, self.broken, self.closed = [], broken, False

    def send(self, message):
        if self.broken:
            raise BrokenPipeError("the parent has gone")
        self.sent.append(message)

    def close(self):
        self.closed = True


def _run_rank(monkeypatch, worker, conn, args=(), kwargs=None):
    """rank_main in this process: no new process group, output or group; _leave recorded."""
    left = []
    monkeypatch.setattr(rank_process, "_own_process_group", lambda: None)
    monkeypatch.setattr(rank_process, "_exit_with_parent", lambda: None)
    monkeypatch.setattr(rank_process, "_redirect_output", lambda folder, rank: None)
    monkeypatch.setattr(rank_process, "_join_group", lambda rank, spec: None)
    monkeypatch.setattr(rank_process, "_leave", lambda spec, release, conn: left.append(conn))
    payload = cloudpickle.dumps((worker, tuple(args), dict(kwargs or {})))
    spec = dict(payload=payload, world_size=3, folder="unused")
    rank_process.rank_main(spec, 2, conn, None)
    assert left == [conn] and in_rank._pipe is None
    return conn.sent


def test_a_rank_calls_the_worker_with_its_rank_and_the_world_size(monkeypatch):
    def worker(rank, world_size, a, b=0):
        return {"who": (rank, world_size, a, b), "t": torch.tensor([1.5])}

    sent = _run_rank(monkeypatch, worker, _Pipe(), args=(4,), kwargs={"b": 5})
    assert sent[0][0] == "start" and sent[1][0] == "result" and len(sent) == 2
    assert cloudpickle.loads(sent[1][1]) == {"who": (2, 3, 4, 5), "t": [1.5]}


def test_a_rank_sends_its_traceback_or_why_its_result_cannot_travel(monkeypatch):
    def fails(rank, world_size):
        raise KeyError("missing")

    [start, (kind, text)] = _run_rank(monkeypatch, fails, _Pipe())
    assert kind == "error" and text.rstrip().endswith("KeyError: 'missing'")
    [start, (kind, text)] = _run_rank(monkeypatch, lambda r, n: threading.Lock(), _Pipe())
    assert kind == "error" and "TypeError: the worker's result (lock) cannot be sent back" in text
    assert "return numbers, lists, dicts or tensors" in text


def test_a_rank_whose_parent_has_gone_still_leaves_quietly(monkeypatch):
    def fails(rank, world_size):
        raise KeyError("missing")

    assert _run_rank(monkeypatch, fails, _Pipe(broken=True)) == []


def test_leaving_waits_for_the_release_flushes_the_output_then_exits(monkeypatch):
    class Exited(Exception):
        pass

    class Stream:
        flushed = 0

        def flush(self):
            self.flushed += 1

    waited, out, err = [], Stream(), Stream()
    release = threading.Event()
    release.wait = waited.append
    monkeypatch.setattr(rank_process.sys, "stdout", out)
    monkeypatch.setattr(rank_process.sys, "stderr", err)

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(rank_process.os, "_exit", exit_)
    conn = _Pipe()
    with pytest.raises(Exited) as caught:
        rank_process._leave(dict(release_wait_s=9.0), release, conn)
    assert caught.value.args == (0,) and waited == [9.0] and conn.closed
    assert (out.flushed, err.flushed) == (1, 1)
    monkeypatch.setattr(rank_process.sys, "stderr", None)  # pythonw: no stream to flush
    with pytest.raises(Exited):
        rank_process._leave(dict(release_wait_s=9.0), release, conn)
    assert out.flushed == 2


def test_a_ranks_output_goes_to_its_files_line_by_line(monkeypatch, tmp_path):
    import io

    duped = []
    monkeypatch.setattr(rank_process.os, "dup2", lambda fd, to: duped.append(to))
    text = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(rank_process.sys, "stdout", text)
    monkeypatch.setattr(rank_process.sys, "stderr", io.StringIO())  # no reconfigure: left alone
    rank_process._redirect_output(str(tmp_path), 3)
    assert duped == [1, 2] and text.line_buffering
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank3.stderr", "rank3.stdout"]
    monkeypatch.setattr(rank_process.sys, "stderr", None)
    rank_process._redirect_output(str(tmp_path), 3)


# ---------------------------------------------------------------- CUDA graphs and NCCL's own calls, faked


class _FakeCuda:
    """The torch.cuda calls _graph_timing and NcclOutOfPlace make, noted instead of run."""

    def __init__(self, monkeypatch):
        self.log, self.capturing, self.on = [], None, "main"
        self.now, self.replay_s = 0.0, 0.0  # a replay takes replay_s on the host clock
        cuda = self

        class Stream:
            def __init__(self, name="side"):
                self.name, self.cuda_stream = name, 4242

            def wait_stream(self, other):
                cuda.log.append(("wait", self.name, other.name))

            def synchronize(self):
                cuda.log.append(("sync", self.name))

        class CUDAGraph:
            def replay(self):
                cuda.log.append(("replay", self, cuda.on))
                cuda.now += cuda.replay_s

        @contextlib.contextmanager
        def stream(s):
            cuda.log.append(("on", s.name))
            before, cuda.on = cuda.on, s.name
            yield
            cuda.on = before

        @contextlib.contextmanager
        def graph(g, stream=None, capture_error_mode="global"):
            assert isinstance(g, CUDAGraph), "a capture needs the graph to capture into"
            cuda.log.append(("capture", stream and stream.name, capture_error_mode))
            cuda.capturing = g
            yield
            cuda.capturing = None

        self.main = Stream("main")
        for name, value in dict(
            Stream=Stream,
            CUDAGraph=CUDAGraph,
            stream=stream,
            graph=graph,
            current_stream=lambda: self.main,
            synchronize=lambda device=None: self.log.append(("sync", device)),
            current_device=lambda: 1,
        ).items():
            monkeypatch.setattr(torch.cuda, name, value)

    def call(self):
        self.log.append(("call", self.capturing))


def test_graph_timing_times_the_first_launches_of_a_new_graph_each_sample(monkeypatch):
    cuda = _FakeCuda(monkeypatch)
    monkeypatch.setattr(dist, "barrier", lambda: cuda.log.append(("barrier",)))
    monkeypatch.setattr(
        timed_collectives, "time", types.SimpleNamespace(perf_counter=lambda: cuda.now)
    )
    monkeypatch.setattr(timed_collectives, "rank_device", lambda: torch.device("cpu"))
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    spin = types.SimpleNamespace(wait=lambda: cuda.log.append(("spin",)))
    reduced = []

    def all_reduce(t):  # the other rank took 2 ms a call in both samples
        reduced.append(t.tolist())
        t += 0.002

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    cuda.replay_s = 0.012  # 3 calls a replay: 4 ms a call
    loop = timed_collectives._Loop(warmup=0, iters=3, samples=2, graph_launches=4, together=spin)
    timed = timed_collectives._graph_timing(cuda.call, loop, 4096, "all_reduce 4 KiB")
    assert reduced == [pytest.approx([0.004, 0.004])]  # this rank's samples, summed over ranks
    calls = [entry[1] for entry in cuda.log if entry[0] == "call"]
    first, second = calls[1], calls[4]
    # one uncaptured warm-up call, then iters captured into a new graph for each sample
    assert calls == [None, first, first, first, second, second, second]
    assert first is not None and second is not None and first is not second
    assert cuda.log.index(("on", "side")) < cuda.log.index(("call", None))
    # nccl-tests: captured on its own stream, thread-local, then a barrier before the timing
    captures = [entry for entry in cuda.log if entry[0] == "capture"]
    assert captures == [("capture", "side", "thread_local")] * 2
    at = [n for n, entry in enumerate(cuda.log) if entry[0] == "capture"]
    sample = cuda.log[at[0] : at[1]]
    assert [e[:2] for e in sample if e[0] in ("capture", "barrier", "replay", "sync", "spin")] == (
        [("capture", "side"), ("barrier",), ("sync", None), ("spin",)]
        + [("replay", first)] * 4
        + [("sync", "side")]  # the clock stops when the side stream is done, as in nccl-tests
    )
    # no launch before the timed ones (the first uploads the graph, as in nccl-tests), all on side
    replays = [entry[1:] for entry in cuda.log if entry[0] == "replay"]
    assert replays == [(first, "side")] * 4 + [(second, "side")] * 4
    assert (timed.nbytes, timed.label, timed.calls_per_sample, timed.warmup) == (
        4096,
        "all_reduce 4 KiB",
        12,
        0,
    )
    assert timed.method == (
        "host clock around the first 4 graph.replay() calls of a new CUDA graph of 3 calls, one "
        "graph a sample, mean over ranks"  # no libcuda here: replay() stands in for cuGraphLaunch
    )
    assert timed.samples_s == pytest.approx([0.003, 0.003])  # nccl-tests: the mean over ranks
    # the side stream starts after the work queued so far
    waits = [entry for entry in cuda.log if entry[0] == "wait"]
    assert waits == [("wait", "side", "main")]
    assert cuda.log.index(waits[0]) < cuda.log.index(("call", None))
    warm = timed_collectives._graph_timing(cuda.call, timed_collectives._Loop(5, 1, 1, 1), 8, "x")
    assert warm.warmup == 5 and sum(1 for e in cuda.log if e == ("call", None)) == 1 + 5


def _nccl_world(monkeypatch, backend):
    """An NCCL group as NcclOutOfPlace sees it: GPU 1, a communicator, and libnccl's calls."""
    cuda = _FakeCuda(monkeypatch)
    real_zeros = torch.zeros

    def zeros(*shape, device=None, **kwargs):
        cuda.log.append(("zeros", device))
        return real_zeros(*shape, **kwargs)

    monkeypatch.setattr(torch, "zeros", zeros)
    monkeypatch.setattr(dist, "get_backend", lambda: "nccl")
    monkeypatch.setattr(dist, "all_reduce", lambda t: cuda.log.append(("all_reduce", t.tolist())))
    world = types.SimpleNamespace(_get_backend=lambda device: cuda.log.append(device) or backend)
    monkeypatch.setattr(dist, "group", types.SimpleNamespace(WORLD=world))

    class Lib:
        result = 0

        def __getattr__(self, name):
            def call(*args):
                cuda.log.append((name, args))
                return Lib.result if name != "ncclGetErrorString" else b"unhandled cuda error"

            return call

    monkeypatch.setattr(nccl_calls, "_library", Lib)
    return cuda, Lib


def test_nccls_own_calls_use_torchs_communicator_on_the_current_stream(monkeypatch):
    backend = types.SimpleNamespace(_comm_ptr=lambda: 0xC0FFEE)
    cuda, lib = _nccl_world(monkeypatch, backend)
    direct = nccl_calls.NcclOutOfPlace()
    gpu = torch.device("cuda", 1)
    assert cuda.log[:4] == [gpu, ("zeros", gpu), ("all_reduce", [0.0]), ("sync", gpu)]
    assert direct.comm.value == 0xC0FFEE
    send, recv = torch.ones(6), torch.zeros(6)
    direct.all_reduce(send, recv)
    direct.broadcast(send, recv, 1)
    (reduce, args), (broadcast, bargs) = cuda.log[-2:]
    assert (reduce, broadcast) == ("ncclAllReduce", "ncclBroadcast")
    for sent, op_or_root in ((args, nccl_calls.NCCL_SUM), (bargs, 1)):
        assert (sent[0].value, sent[1].value, sent[2].value) == (
            send.data_ptr(),
            recv.data_ptr(),
            6,
        )
        assert sent[3:5] == (nccl_calls.NCCL_FLOAT32, op_or_root) and sent[5] is direct.comm
        assert sent[6].value == 4242  # the current stream
    lib.result = 1
    with pytest.raises(RuntimeError, match="^ncclBroadcast: unhandled cuda error$"):
        direct.broadcast(send, recv)


def test_nccls_own_calls_need_an_nccl_group_and_a_torch_that_shows_its_communicator(monkeypatch):
    _nccl_world(monkeypatch, types.SimpleNamespace())
    with pytest.raises(ValueError, match=r"^this torch \(.+\) does not expose _comm_ptr\(\)$"):
        nccl_calls.NcclOutOfPlace()
    monkeypatch.setattr(dist, "get_backend", lambda: "gloo")
    with pytest.raises(
        ValueError, match=r"^NcclOutOfPlace needs an NCCL process group \(gloo has no NCCL\)$"
    ):
        nccl_calls.NcclOutOfPlace()


# ---------------------------------------------------------------- the rest of a launch's plumbing


def test_a_ranks_messages_are_read_in_order_and_its_first_end_counts():
    reader, writer = mp.Pipe(duplex=False)
    reports = []
    rank = supervisor._Rank(_Ended(), reader, on_report=reports.append)
    for message in [
        ("mark", 9.0, "before start"),  # no start yet: at 0 s
        ("start", 10.0),
        ("mark", 10.25, "sent"),
        ("report", cloudpickle.dumps({"row": 1})),
        ("result", cloudpickle.dumps([1, 2])),
        ("result", cloudpickle.dumps("second")),  # a rank ends once: later news is ignored
        ("error", "Traceback: late"),
        ("report", cloudpickle.dumps("late")),
    ]:
        writer.send(message)
    supervisor._read_messages(rank)
    assert rank.marks == [[0.0, "before start"], [0.25, "sent"]] and rank.started_at == 10.0
    assert (rank.status, rank.result, rank.error, reports) == (
        "returned",
        [1, 2],
        None,
        [{"row": 1}],
    )
    assert rank.conn is reader  # open until its end
    writer.close()
    supervisor._read_messages(rank)
    assert rank.conn is None and reader.closed


def test_a_result_that_cannot_be_read_back_is_a_raise_that_says_so():
    reader, writer = mp.Pipe(duplex=False)
    writer.send(("result", b"not a pickle"))
    rank = supervisor._Rank(_Ended(), reader)
    supervisor._read_messages(rank)
    assert rank.status == "raised"
    assert rank.error.startswith("its result could not be read back here: UnpicklingError(")
    writer.send(("error", "Traceback: x"))
    other = supervisor._Rank(_Ended(), reader)
    supervisor._read_messages(other)
    assert (other.status, other.error) == ("raised", "Traceback: x")
    reader.close()
    writer.close()


def test_deaths_are_blamed_before_the_exceptions_they_caused():
    run = _run(_rank("raised"), _rank("returned"), _rank("died"), _rank("raised"), _rank())
    supervisor._note_failures(run)
    assert run.failures == [2, 0, 3]
    run.ranks[4].status = "died"
    supervisor._note_failures(run)
    assert run.failures == [2, 0, 3, 4]  # the first failures stay first


def test_a_rank_that_ended_without_a_word_died_before_its_worker_started():
    started = _rank(started_at=1.0)
    started.process.exitcode = 3
    supervisor._notice_exit(started)
    assert (started.status, started.error) == ("died", "exited with code 3 before returning")
    early = _rank()
    early.process.exitcode = -9
    supervisor._notice_exit(early)
    assert early.error == (
        "died with SIGKILL before returning (before its worker started: from a script, call "
        "launch() under `if __name__ == '__main__':`, as multiprocessing's spawn needs)"
    )
    running = supervisor._Rank(_Ended(alive=True, sentinel=os.pipe()[0]), None)
    supervisor._notice_exit(running)
    assert (running.status, running.exit_seen) == (None, False)
    os.close(running.process.sentinel)


class _Process:
    """A rank's process that the clean-up kills: notes each kill and join."""

    def __init__(self, pid, alive=True):
        self.pid, self.alive, self.log = pid, alive, []
        self.sentinel, self.exitcode = None, None

    def is_alive(self):
        return self.alive

    def kill(self):
        self.log.append("kill")
        self.alive = False

    def join(self, seconds):
        self.log.append(("join", seconds))


def test_the_clean_up_kills_each_ranks_process_group_then_the_rank(monkeypatch):
    killed = []

    def killpg(pid, sig):
        killed.append((pid, sig))
        if pid == 202:
            raise ProcessLookupError  # no such group: the rank had not called setsid
        procs[pid].alive = False

    procs = {101: _Process(101), 202: _Process(202)}
    monkeypatch.setattr(supervisor.os, "killpg", killpg)
    unstarted = _Process(None)
    run = _run(*(supervisor._Rank(p, None) for p in [*procs.values(), unstarted]))
    supervisor._kill_all(run)
    assert killed == [(101, signal.SIGKILL), (202, signal.SIGKILL)] and run.killed
    assert procs[101].log == [("join", 3.0)]  # its group is gone: nothing more to kill
    assert procs[202].log == ["kill", ("join", 3.0)]  # no group: the rank itself
    assert unstarted.log == []


@pytest.mark.parametrize(("status", "released"), [("returned", True), ("raised", False)])
def test_ranks_that_all_returned_are_released_before_the_kill(monkeypatch, status, released):
    waited, killed = [], []
    monkeypatch.setattr(supervisor, "_wait_for_exits", lambda ranks, s: waited.append(s))
    monkeypatch.setattr(supervisor, "_kill_all", lambda run: killed.append(run))
    run = _run(_rank("returned"), _rank(status), _rank() if status == "raised" else _rank(status))
    run.release = threading.Event()
    run.ranks[1].process.alive = True
    run.ranks[1].process.sentinel = None
    monkeypatch.setattr(supervisor, "_has_ended", lambda process: not process.alive)
    supervisor._stop(run)
    assert run.release.is_set() == released and waited == (
        [supervisor.TEARDOWN_S] if released else []
    )
    assert killed == [run] and run.exited == [True, False, True]
    assert [r.status for r in run.ranks] == [
        "returned",
        status,
        "returned" if released else "stopped",
    ]


def test_each_rank_starts_with_its_spec_and_its_own_pipe():
    class Ctx:
        def __init__(self):
            self.pipes, self.processes = [], []

        def Pipe(self, duplex):
            assert duplex is False
            self.pipes.append((f"reader{len(self.pipes)}", _Pipe()))
            return self.pipes[-1]

        def Process(self, **kwargs):
            process = types.SimpleNamespace(start=lambda: None, **kwargs)
            self.processes.append(process)
            return process

    ctx, reports = Ctx(), []
    run = _run(folder="f")
    run.spec["world_size"], run.release = 2, "release"
    run.on_report = lambda rank, value: reports.append((rank, value))
    supervisor._start_ranks(run, ctx)
    assert [p.name for p in ctx.processes] == ["rank0", "rank1"]
    assert all(p.daemon and p.target is rank_process.rank_main for p in ctx.processes)
    assert [p.args[1:] for p in ctx.processes] == [
        (0, ctx.pipes[0][1], "release"),
        (1, ctx.pipes[1][1], "release"),
    ]
    assert ctx.processes[0].args[0] is run.spec
    assert [r.conn for r in run.ranks] == ["reader0", "reader1"]
    assert all(writer.closed for _, writer in ctx.pipes)  # the parent keeps only the readers
    run.ranks[1].on_report("v")
    assert reports == [(1, "v")]


def test_marks_and_reports_travel_to_the_parent_only_inside_a_worker(monkeypatch):
    pipe = _Pipe()
    monkeypatch.setattr(in_rank, "_pipe", pipe)
    monkeypatch.setattr(in_rank.time, "monotonic", lambda: 12.5)
    distributed.mark("sent")
    distributed.report({"a": 1})
    assert pipe.sent[0] == ("mark", 12.5, "sent")
    assert pipe.sent[1][0] == "report" and cloudpickle.loads(pipe.sent[1][1]) == {"a": 1}
    with pytest.raises(
        TypeError, match="^mark needs a short text label such as 'recv returned', got int$"
    ):
        distributed.mark(3)


def test_delay_sleeps_under_gloo_and_holds_the_stream_under_nccl(monkeypatch):
    from helpers import timing

    slept, held = [], []
    monkeypatch.setattr(in_rank.time, "sleep", slept.append)
    monkeypatch.setattr(timing, "hold_stream", held.append)
    distributed.delay(0.25)
    distributed.delay(0)
    assert (slept, held) == ([0.25, 0.0], [])
    with pytest.raises(ValueError, match=r"^seconds must be >= 0, got nan$"):
        distributed.delay(float("nan"))
    monkeypatch.setattr(in_rank, "backend_here", lambda: "nccl")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: held.append("sync"))
    monkeypatch.setattr(
        torch.cuda, "current_stream", lambda: types.SimpleNamespace(query=lambda: False)
    )
    distributed.delay(0.002)
    distributed.synchronize()
    assert held == [pytest.approx(2000.0), "sync"] and slept == [0.25, 0.0]
    assert distributed.device_idle() is False


def test_results_travel_as_plain_values():
    value = {
        "t": torch.tensor([[1, 2]]),
        "pair": (torch.tensor(3.5), "x"),
        "list": [torch.tensor([1])],
    }
    assert rank_process._plain(value) == {"t": [[1, 2]], "pair": (3.5, "x"), "list": [[1]]}
    assert type(rank_process._plain(value)["pair"][0]) is float  # not a tensor equal to 3.5
    point = types.SimpleNamespace(x=1)
    assert rank_process._plain(point) is point


def test_a_worker_that_cannot_travel_says_what_to_pass():
    with pytest.raises(TypeError) as caught:
        launch_checks.worker_payload(_takes_one, (threading.Lock(),), None)
    assert str(caught.value).startswith(
        "the worker and its args / kwargs travel to the ranks by pickling, which failed: "
    )
    assert str(caught.value).endswith(
        "; pass plain values (numbers, strings, lists, dicts, tensors), not locks, open files "
        "or generators"
    )
    worker, args, kwargs = cloudpickle.loads(launch_checks.worker_payload(_takes_one, [7], None))
    assert (worker(0, 1, *args, **kwargs), args, kwargs) == (7, (7,), {})


def test_a_timeout_names_each_unfinished_rank_and_the_last_mark_it_reached():
    late = _outcome(["returned", "stopped", "stopped"])
    late.marks[1] = [[0.1, "sent"], [0.2, "waiting"]]
    assert str(distributed.LaunchTimeout(late)) == (
        "ranks [1, 2] of 3 (gloo) did not finish within timeout_s=2 s and were stopped "
        "(rank 1 last reached 'waiting'; rank 2 last reached None)"
    )
    at_start = _outcome(["stopped"], startup_s=None, elapsed_s=None)
    assert str(distributed.LaunchTimeout(at_start)) == (
        "ranks [0] of 1 (gloo) had not started their worker within startup_timeout_s=30 s "
        "(starting the processes, importing torch, joining the group) and were stopped after "
        "that long; pass a longer startup_timeout_s if the machine is busy (rank 0 last reached None)"
    )
    assert late.unfinished == [1, 2] and not late.ok and _outcome(["returned"]).ok


def test_a_process_has_ended_once_its_sentinel_fires_and_it_is_joined():
    fired, writer = os.pipe()
    os.write(writer, b"x")

    class Ending(_Process):
        def join(self, seconds):
            self.log.append(("join", seconds))
            self.alive = False

    ending = Ending(1)
    ending.sentinel = fired
    assert supervisor._has_ended(ending) and ending.log == [("join", 1.0)]
    stuck = _Process(4)  # its sentinel fired, but a second later it still runs
    stuck.sentinel = fired
    assert not supervisor._has_ended(stuck) and stuck.log == [("join", 1.0)]
    quiet, other = os.pipe()
    running = _Process(2)
    running.sentinel = quiet
    assert not supervisor._has_ended(running) and running.log == []
    assert supervisor._has_ended(_Process(3, alive=False))
    for fd in (fired, writer, quiet, other):
        os.close(fd)


def test_news_waits_for_deaths_only_after_a_new_exception(monkeypatch):
    waits = []
    monkeypatch.setattr(supervisor, "wait", lambda sentinels, timeout: waits.append(timeout) or [])
    run = _run(_rank("raised"), _rank())
    run.ranks[1].process.alive = True
    run.ranks[1].process.sentinel = None
    monkeypatch.setattr(supervisor, "_has_ended", lambda process: not process.alive)
    supervisor._take_news(run)
    assert waits == [supervisor.DEATH_NEWS_S] and run.failures == [0]
    supervisor._take_news(run)  # already noted: no more waiting
    assert waits == [supervisor.DEATH_NEWS_S]


def test_a_rank_ends_its_own_group_when_it_leads_one(monkeypatch):
    done = []

    class Ended(Exception):
        pass

    def exit_(code):
        done.append(("exit", code))
        raise Ended

    monkeypatch.setattr(rank_process.os, "_exit", exit_)
    monkeypatch.setattr(
        rank_process.os, "killpg", lambda pgid, sig: done.append(("killpg", pgid, sig))
    )
    monkeypatch.setattr(rank_process.os, "getpid", lambda: 77)
    monkeypatch.setattr(rank_process.os, "getpgid", lambda pid: 77)
    with pytest.raises(Ended):
        rank_process._end_my_group()
    assert done == [("killpg", 0, signal.SIGKILL), ("exit", 1)]
    monkeypatch.setattr(rank_process.os, "getpgid", lambda pid: 5)  # not a leader: itself only
    with pytest.raises(Ended):
        rank_process._end_my_group()
    assert done[2:] == [("exit", 1)]


# ---------------------------------------------------------------- the host spin barrier (-G)


def test_spin_barrier_lets_ranks_through_together_and_raises_for_a_missing_rank(tmp_path):
    page = tmp_path / "page"
    page.write_bytes(bytes(16))
    first, second = (spin_barrier.SpinBarrier(str(page), r, 2) for r in (0, 1))
    passed = []

    def rank_one():
        for n in range(3):
            second.wait(timeout_s=10)
            passed.append(("rank 1", n))

    thread = threading.Thread(target=rank_one)
    thread.start()
    for n in range(3):
        first.wait(timeout_s=10)
        passed.append(("rank 0", n))
    thread.join(timeout=10)
    assert sorted(passed) == [(f"rank {r}", n) for r in (0, 1) for n in range(3)]
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match="rank 0: not every rank reached the barrier within 0.2 s"
    ):
        first.wait(timeout_s=0.2)  # round 4: rank 1 never comes
    assert 0.2 <= time.monotonic() - start < 5


def test_spin_barrier_on_one_host_maps_a_page_and_leaves_no_file(world_of_one, monkeypatch):
    before = set(os.listdir("/dev/shm"))
    barrier = spin_barrier.on_one_host(0, 1)
    assert barrier is not None and set(os.listdir("/dev/shm")) == before  # the name is gone
    barrier.wait(timeout_s=1)  # alone: through at once
    barrier.wait(timeout_s=1)
    assert barrier.round == 2

    def hosts(out, mine):  # another rank on another host
        out[:] = [mine, "elsewhere"]

    monkeypatch.setattr(dist, "all_gather_object", hosts)
    assert spin_barrier.on_one_host(0, 2) is None
