import time
import warnings

import pytest
import torch

from helpers import timing


def test_timing_statistics():
    t = timing.Timing([1.0, 2.0, 3.0, 4.0, 100.0], "synchronised host clock", nbytes=int(3e9))
    assert t.median_s == 3.0
    assert t.min_s == 1.0 and t.max_s == 100.0
    assert t.gbps == pytest.approx(1.0)
    assert t.gbps_range == pytest.approx((0.03, 3.0))
    assert t.quartiles_s == (2.0, 4.0)
    assert t.spread == pytest.approx(2 / 3)
    assert t.is_noisy()
    assert "GB/s" in str(t)
    assert timing.Timing.from_dict(t.to_dict()) == t


def test_timing_needs_samples_and_bytes_for_a_rate():
    with pytest.raises(ValueError):
        timing.Timing([], "x")
    with pytest.raises(ValueError, match="nbytes"):
        _ = timing.Timing([1.0], "x").gbps


def test_host_clock_measures_the_work():
    t = timing.host_clock(lambda: time.sleep(0.002), repeats=5, warmup=1)
    assert 0.0018 < t.median_s < 0.05
    assert len(t.samples_s) == 5
    assert t.method == "synchronised host clock"


@pytest.mark.filterwarnings("ignore:.*spread")  # a loaded CI machine may spread 1 ms sleeps
def test_calls_per_sample_divides():
    t = timing.host_clock(lambda: time.sleep(0.001), repeats=3, warmup=0, calls_per_sample=4)
    assert 0.0009 < t.median_s < 0.02
    assert t.calls_per_sample == 4


def test_noisy_samples_warn(monkeypatch):
    delays = iter([0.001, 0.001, 0.001, 0.02, 0.001, 0.02, 0.001, 0.02])
    with pytest.warns(UserWarning, match="spread"):
        timing.host_clock(lambda: time.sleep(next(delays)), repeats=8, warmup=0)


def test_bad_counts_are_rejected():
    for kwargs in ({"repeats": 0}, {"warmup": -1}, {"calls_per_sample": 0}, {"repeats": 1.5}):
        with pytest.raises(ValueError):
            timing.host_clock(lambda: None, **kwargs)


def test_cuda_events_without_cuda_says_what_to_use():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="host_clock"):
        timing.cuda_events(lambda: None)


def test_benchmark_uses_torch_utils_benchmark():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = timing.benchmark(lambda: sum(range(100)), min_run_time=0.05, max_run_time=0.2)
    assert t.method == "torch.utils.benchmark"
    assert t.median_s > 0
    with pytest.raises(ValueError):
        timing.benchmark(lambda: None, min_run_time=0)


def test_sizes_and_formatting():
    assert timing.sizes_pow2(2**10, 2**30) == [2**k for k in range(10, 31, 2)]
    assert timing.sizes_pow2(1, 1) == [1]
    with pytest.raises(ValueError):
        timing.sizes_pow2(0, 10)
    with pytest.raises(ValueError):
        timing.sizes_pow2(10, 1)
    assert timing.format_bytes(1024) == "1 KiB"
    assert timing.format_bytes(3 * 2**29) == "1.5 GiB"
    assert timing.format_bytes(100) == "100 B"
    assert timing.calls_for(1e-6) == 1000
    assert timing.calls_for(1.0) == 1


def test_verify_copy():
    a = torch.arange(10)
    timing.verify_copy(a, a.clone())
    with pytest.raises(AssertionError, match="contents"):
        timing.verify_copy(a, a + 1)
    with pytest.raises(AssertionError, match="shape"):
        timing.verify_copy(a, a[:5])


@pytest.mark.gpu
def test_cuda_events_agree_with_a_plain_event_loop():
    """The issue's acceptance check: a pinned 256 MiB H2D copy, helpers vs a bare loop, within 3%.

    The bare loop is the textbook one: two events around ten back-to-back copies, after warm-up.
    """
    nbytes = 256 * 2**20
    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        dst.copy_(src, non_blocking=True)
    end.record()
    end.synchronize()
    plain_s = start.elapsed_time(end) / 1e3 / 10

    helper = timing.cuda_events(lambda: dst.copy_(src, non_blocking=True), repeats=5, warmup=3,
                                calls_per_sample=10, nbytes=nbytes)
    timing.verify_copy(src, dst, "pinned H2D")
    print(f"helper {helper.gbps:.2f} GB/s (samples {[round(nbytes / s / 1e9, 1) for s in helper.samples_s]}), "
          f"plain loop {nbytes / plain_s / 1e9:.2f} GB/s")
    assert helper.median_s == pytest.approx(plain_s, rel=0.03)


@pytest.mark.gpu
def test_held_stream_hides_launch_cost_of_small_copies():
    src = torch.ones(1024, dtype=torch.uint8).pin_memory()
    dst = torch.empty(1024, dtype=torch.uint8, device="cuda")
    held = timing.cuda_events(lambda: dst.copy_(src, non_blocking=True), repeats=5, calls_per_sample=50, hold_us=2000)
    assert held.median_s < 50e-6
    assert held.extra["hold_us"] == 2000 and held.extra["enqueue_us"] < 2000
    assert timing.sleep_cycles_per_us() > 100  # GPU clocks run at hundreds of MHz or more
