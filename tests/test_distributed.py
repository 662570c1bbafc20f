"""Tests of helpers.distributed: launching ranks with deadlines, and nccl-tests' bandwidths.

The CPU tests start real gloo process groups (two ranks, a few seconds each); the ``gpu2``
tests need two CUDA GPUs and use NCCL.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

import cloudpickle
import matplotlib
import pytest
import torch
import torch.distributed as dist

from helpers import distributed, hardware, plotting

matplotlib.use("Agg")
# Workers travel to the ranks by value, as notebook functions do: the ranks need not import
# this module (nor pytest and matplotlib with it), which keeps each launch short.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

needs_two_gpus = pytest.mark.skipif(hardware.gpu_count() < 2, reason="needs two CUDA GPUs")


# ---------------------------------------------------------------- algbw / busbw


def test_algbw_is_bytes_per_second_in_decimal_gb():
    assert distributed.algbw_gbps(2**30, 0.00325) == pytest.approx(330.382, rel=1e-5)
    assert distributed.algbw_gbps(1e9, 1.0) == 1.0


@pytest.mark.parametrize(("op", "n", "factor"), [
    ("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75), ("all_reduce", 1, 0.0),
    ("all_gather", 2, 0.5), ("all_gather", 8, 0.875), ("reduce_scatter", 4, 0.75),
    ("all_to_all", 8, 0.875), ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("send_recv", 2, 1.0),
])
def test_bus_factors_are_nccl_tests_ones(op, n, factor):
    assert distributed.bus_factor(op, n) == pytest.approx(factor)


def test_busbw_matches_hand_computed_nccl_tests_numbers():
    # nccl-tests, 8 GPUs, all_reduce of 1 GiB in 5 ms: algbw 214.75 GB/s, busbw x 14/8
    assert distributed.busbw_gbps("all_reduce", 2**30, 0.005, 8) == pytest.approx(214.748 * 1.75, rel=1e-5)
    # all_gather of a 1 GiB output on 2 ranks in 1.5 ms: algbw 715.83 GB/s, busbw half of it
    assert distributed.busbw_gbps("all_gather", 2**30, 0.0015, 2) == pytest.approx(715.828 / 2, rel=1e-5)
    assert distributed.busbw_gbps("broadcast", 4e9, 0.01, 2) == pytest.approx(400.0)


@pytest.mark.parametrize(("call", "error"), [
    (lambda: distributed.busbw_gbps("allreduce", 1024, 1.0, 2), ValueError),
    (lambda: distributed.busbw_gbps("all_reduce", 1024, 1.0, 0), ValueError),
    (lambda: distributed.bus_factor("all_reduce", 2.0), ValueError),
    (lambda: distributed.algbw_gbps(0, 1.0), ValueError),
    (lambda: distributed.algbw_gbps(-5, 1.0), ValueError),
    (lambda: distributed.algbw_gbps(1024, 0.0), ValueError),
    (lambda: distributed.algbw_gbps(1024, float("nan")), ValueError),
    (lambda: distributed.algbw_gbps("1024", 1.0), TypeError),
    (lambda: distributed.algbw_gbps(True, 1.0), TypeError),
])
def test_bandwidth_helpers_reject_bad_input(call, error):
    with pytest.raises(error):
        call()


# ---------------------------------------------------------------- launch: arguments


def _nothing(rank, world_size):
    return rank


@pytest.mark.parametrize(("kwargs", "error"), [
    (dict(worker="not a function"), TypeError),
    (dict(world_size=0), ValueError),
    (dict(world_size=1.5), ValueError),
    (dict(backend="mpi"), ValueError),
    (dict(timeout_s=0), ValueError),
    (dict(timeout_s=-1.0), ValueError),
    (dict(startup_timeout_s=0), ValueError),
    (dict(args=5), TypeError),
    (dict(kwargs=[1]), TypeError),
    (dict(env={"A": 1}), TypeError),
])
def test_launch_rejects_bad_arguments_before_starting_anything(kwargs, error):
    call = dict(worker=_nothing, world_size=2, backend="gloo")
    call.update(kwargs)
    with pytest.raises(error):
        distributed.launch(call.pop("worker"), **call)


@pytest.mark.skipif(hardware.gpu_count() >= 2, reason="this machine has the GPUs NCCL needs")
def test_nccl_without_enough_gpus_says_what_to_do():
    with pytest.raises(ValueError, match="gloo"):
        distributed.launch(_nothing, 2, backend="nccl")


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


# ---------------------------------------------------------------- launch: gloo ranks


def _report(rank, world_size, greeting):
    distributed.mark("started")
    print(f"{greeting} from rank {rank}")
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": dist.get_backend(),
            "tensor": torch.tensor([rank, 10 * rank]), "device": str(distributed.rank_device())}


def test_results_come_back_in_rank_order_with_marks_and_output():
    outcome = distributed.supervise(_report, 3, backend="gloo", timeout_s=60, args=("hello",))
    assert outcome.ok, outcome.describe()
    assert [r["rank"] for r in outcome.results] == [0, 1, 2]
    assert all(r["world_size"] == 3 and r["backend"] == "gloo" and r["device"] == "cpu" for r in outcome.results)
    assert outcome.results[2]["tensor"] == [2, 20]  # tensors come back as lists
    assert [outcome.reached(r) for r in range(3)] == [["started"]] * 3
    assert [p.strip() for p in outcome.printed] == [f"hello from rank {r}" for r in range(3)]
    assert outcome.startup_s is not None and outcome.elapsed_s is not None


def _collectives(rank, world_size):
    total = torch.tensor([rank + 1.0, 10.0 * (rank + 1)])
    dist.all_reduce(total)
    shared = torch.tensor([7, 8, 9]) if rank == 0 else torch.zeros(3, dtype=torch.int64)
    work = dist.broadcast(shared, src=0, async_op=True)
    work.wait()
    message = torch.zeros(4)
    if rank == 0:
        dist.send(torch.arange(4.0), dst=1)
    else:
        dist.recv(message, src=0)
    return {"all_reduce": total, "broadcast": shared, "recv": message}


def test_gloo_all_reduce_broadcast_and_send_recv_are_right():
    results = distributed.launch(_collectives, 2, backend="gloo", timeout_s=60)
    assert [r["all_reduce"] for r in results] == [[3.0, 30.0]] * 2
    assert [r["broadcast"] for r in results] == [[7, 8, 9]] * 2
    assert results[1]["recv"] == [0.0, 1.0, 2.0, 3.0]


def _fails_on_rank_1(rank, world_size):
    if rank == 1:
        raise ValueError("rank one is unhappy")
    time.sleep(60)  # rank 0 would wait: it must be stopped, not waited for


def test_an_exception_in_a_worker_is_reported_with_its_rank():
    start = time.monotonic()
    with pytest.raises(distributed.WorkerError, match="rank one is unhappy") as caught:
        distributed.launch(_fails_on_rank_1, 2, backend="gloo", timeout_s=60)
    assert caught.value.rank == 1
    assert caught.value.outcome.status == ["stopped", "raised"]
    assert time.monotonic() - start < 30


def _recv_without_send(rank, world_size):
    distributed.mark("before recv")
    if rank == 1:
        dist.recv(torch.zeros(3), src=0)  # rank 0 never sends
        distributed.mark("after recv")
    return rank


def test_a_hanging_rank_is_stopped_at_the_deadline():
    timeout_s = 2.0
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"\[1\]") as caught:
        distributed.launch(_recv_without_send, 2, backend="gloo", timeout_s=timeout_s)
    outcome = caught.value.outcome
    assert outcome.status == ["returned", "stopped"]
    assert outcome.last_mark(1) == "before recv"
    assert outcome.elapsed_s < timeout_s + 1.0
    assert time.monotonic() - start < timeout_s + 30  # start-up of two ranks included


def _dies(rank, world_size):
    import os

    if rank == 0:
        os._exit(3)
    time.sleep(60)


def test_a_rank_that_dies_is_reported_at_once():
    outcome = distributed.supervise(_dies, 2, backend="gloo", timeout_s=60)
    assert outcome.status == ["died", "stopped"]
    assert "exit code 3" in outcome.errors[0]
    assert outcome.elapsed_s < 10
    with pytest.raises(distributed.WorkerError):
        outcome.raise_for_status()


# ---------------------------------------------------------------- drawing


def test_draw_before_after_draws_one_row_per_collective():
    data = {
        "broadcast": {"before": [[1, 2, 3], [0, 0, 0]], "after": [[1, 2, 3], [1, 2, 3]], "call": "broadcast(t, src=0)"},
        "gather": {"before": [[0, 1], [1, 2]], "after": [[[0, 1], [1, 2]], None]},
    }
    fig = plotting.draw_before_after(data, title="test")
    assert len(fig.axes) == 4
    with pytest.raises(ValueError):
        plotting.draw_before_after({"x": {"before": [1], "after": [1, 2]}}, title="bad")
    with pytest.raises(ValueError):
        plotting.draw_before_after({}, title="empty")


# ---------------------------------------------------------------- NCCL (two GPUs)


def _nccl_all_reduce(rank, world_size):
    device = distributed.rank_device()
    t = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(t)
    return {"device": str(device), "values": sorted(set(t.tolist()))}


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_all_reduce_on_two_gpus():
    results = distributed.launch(_nccl_all_reduce, 2, backend="nccl", timeout_s=120)
    assert [r["device"] for r in results] == ["cuda:0", "cuda:1"]
    assert [r["values"] for r in results] == [[3.0], [3.0]]


def _nccl_missing_send(rank, world_size):
    device = distributed.rank_device()
    warm = torch.zeros(3, device=device)
    if rank == 0:
        dist.send(warm, dst=1)
    else:
        dist.recv(warm, src=0)
    torch.cuda.synchronize()
    distributed.mark("warmed up")
    if rank == 1:
        t = torch.empty(3, device=device)
        dist.recv(t, src=0)  # no matching send
        distributed.mark("recv returned")
        t.tolist()  # the host waits for data that never comes
        distributed.mark("data read")
    return rank


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_missing_send_ends_within_its_timeout():
    timeout_s = 5.0
    start = time.monotonic()
    outcome = distributed.supervise(_nccl_missing_send, 2, backend="nccl", timeout_s=timeout_s)
    assert outcome.status == ["returned", "stopped"], outcome.describe()
    assert outcome.reached(1)[0] == "warmed up"  # notebook 06 shows where it stopped after that
    assert outcome.elapsed_s < timeout_s + 1.0
    assert time.monotonic() - start < timeout_s + 120


def _nccl_wait_timeout(rank, world_size):
    device = distributed.rank_device()
    if rank == 1:
        work = dist.irecv(torch.empty(3, device=device), src=0)
        try:
            work.wait(timeout=timedelta(seconds=2))
        except Exception as err:  # noqa: BLE001 - the point is that it raises
            return type(err).__name__
        return "wait returned"
    time.sleep(5)
    return None


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_wait_with_timeout_on_a_missing_send_is_bounded_by_the_launcher():
    """wait(timeout=2 s) on a recv nobody sends: whatever NCCL does with that timeout (on 2xH200 with
    torch 2.11 it never gave the host back: seen 2026-11-21), the launcher's deadline ends it."""
    start = time.perf_counter()
    outcome = distributed.supervise(_nccl_wait_timeout, 2, backend="nccl", timeout_s=10)
    assert time.perf_counter() - start < 10 + 60  # the deadline, plus start-up and the kill
    assert outcome.status[0] == "returned"
    assert outcome.status[1] in ("returned", "raised", "died", "stopped"), outcome.describe()
    print(outcome.describe())
