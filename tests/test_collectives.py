"""Tests of distributed.collective_timings and the nccl-tests factors, with gloo ranks on the CPU.

Each launch starts real gloo process groups of 2 and 4 ranks (a few seconds each); the ``gpu2``
test runs the same on NCCL.
"""

from __future__ import annotations

import sys

import cloudpickle
import pytest
import torch.distributed as dist

from helpers import distributed, hardware, timing

cloudpickle.register_pickle_by_value(sys.modules[__name__])

SIZES = [64, 4096]  # bytes: multiples of 4 x 4 ranks


def _timings(world_size, backend="gloo", ops=distributed.COLLECTIVE_OPS, sizes=SIZES):
    return distributed.launch(
        distributed.collective_timings,
        world_size,
        backend=backend,
        timeout_s=120,
        kwargs=dict(ops=list(ops), sizes=sizes, warmup=1, iters=2, samples=3),
    )


@pytest.mark.parametrize("world_size", [2, 4])
def test_every_op_gives_right_results_and_timings_per_size(world_size):
    per_rank = _timings(world_size)
    assert len(per_rank) == world_size
    for result in per_rank:
        assert set(result) == {"timings", "wrong"}
        assert list(result["timings"]) == list(distributed.COLLECTIVE_OPS)
        for op in distributed.COLLECTIVE_OPS:
            assert result["wrong"][op] == [0, 0], op
            timings = result["timings"][op]
            assert [t.nbytes for t in timings] == SIZES
            assert all(isinstance(t, timing.Timing) and len(t.samples_s) == 3 for t in timings)
            assert all(
                t.calls_per_sample == 2 and t.method == "synchronised host clock" for t in timings
            )
            assert all(t.median_s > 0 for t in timings)


def test_wrong_elements_are_counted():
    def broken(rank, world_size):
        real = dist.all_reduce

        def half_reduce(tensor, *args, **kwargs):  # a reduction that forgets the second half
            real(tensor, *args, **kwargs)
            tensor[tensor.numel() // 2 :] = -1.0

        dist.all_reduce = half_reduce
        return distributed.collective_timings(
            rank,
            world_size,
            ops=["all_reduce", "broadcast"],
            sizes=[256],
            warmup=0,
            iters=1,
            samples=1,
        )

    for result in distributed.launch(broken, 4, backend="gloo", timeout_s=60):
        assert result["wrong"] == {"all_reduce": [32], "broadcast": [0]}


def test_the_n_sweep_runs_on_four_gloo_ranks_end_to_end():
    sweep = {n: _timings(n, ops=["all_reduce", "all_to_all"], sizes=[4096])[0] for n in (2, 4)}
    for n, result in sweep.items():
        for op, timings in result["timings"].items():
            busbw = distributed.busbw_gbps(op, timings[0].nbytes, timings[0].median_s, n)
            algbw = distributed.algbw_gbps(timings[0].nbytes, timings[0].median_s)
            assert busbw == pytest.approx(algbw * distributed.bus_factor(op, n))


@pytest.mark.parametrize("n", range(1, 17))
def test_bus_factor_covers_every_collective_for_any_world_size(n):
    factors = {op: distributed.bus_factor(op, n) for op in distributed.COLLECTIVE_OPS}
    assert factors["all_reduce"] == pytest.approx(2 * (n - 1) / n)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert factors[op] == pytest.approx((n - 1) / n)
    assert factors["broadcast"] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (dict(ops=["allreduce"]), ValueError, "unknown collective"),
        (dict(ops="all_reduce"), TypeError, "list of collective names"),
        (dict(ops=[]), TypeError, "non-empty"),
        (dict(sizes=[100]), ValueError, "multiple of 4 x world_size = 16"),
        (dict(sizes=[8]), ValueError, "multiple of 4 x world_size"),
        (dict(sizes=[0]), ValueError, "positive"),
        (dict(sizes=[]), TypeError, "non-empty list"),
        (dict(sizes=[64.0]), TypeError, "whole number of bytes"),
        (dict(warmup=-1), ValueError, "warmup"),
        (dict(iters=0), ValueError, "iters"),
        (dict(samples=0), ValueError, "samples"),
        (dict(rank=4), ValueError, "rank must be 0 to"),
        (dict(world_size=0), ValueError, "world_size"),
    ],
)
def test_bad_arguments_say_what_to_pass(kwargs, error, words):
    args = (
        dict(rank=0, world_size=4, ops=["all_reduce"], sizes=[64], warmup=0, iters=1, samples=1)
        | kwargs
    )
    with pytest.raises(error, match=words):
        distributed.collective_timings(args.pop("rank"), args.pop("world_size"), **args)


def test_outside_a_process_group_it_says_how_to_start_one():
    with pytest.raises(ValueError, match="distributed.launch"):
        distributed.collective_timings(
            0, 2, ops=["all_reduce"], sizes=[64], warmup=0, iters=1, samples=1
        )


@pytest.mark.gpu2
@pytest.mark.skipif(hardware.gpu_count() < 2, reason="needs two CUDA GPUs")
def test_nccl_timings_use_cuda_events_and_are_right():
    for result in _timings(2, backend="nccl", sizes=[2**20]):
        for op in distributed.COLLECTIVE_OPS:
            assert result["wrong"][op] == [0]
            assert result["timings"][op][0].method == "cuda events"
