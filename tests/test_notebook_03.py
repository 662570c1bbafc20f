"""CPU tests of the analysis functions defined in notebook 03 (read from the notebook itself)."""

import itertools
import math
import statistics
import warnings
from pathlib import Path

import pytest
from notebook_code import definitions

from helpers import claims, records, trace

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "03_streams_and_overlap.ipynb"
WANTED_FUNCTIONS = {"steps_of", "across_steps", "per_step", "weakest", "added", "propagated",
                    "copy_and_kernel", "lane_overlap", "copy_lanes_overlap", "range_ms", "hidden_share"}



@pytest.fixture(scope="module")
def nb03() -> dict:
    """The notebook's analysis functions, executed from its own source in a fresh namespace."""
    return definitions(NOTEBOOK, WANTED_FUNCTIONS, {"math": math, "statistics": statistics, "itertools": itertools,
                       "claims": claims, "trace": trace})


def kernel(start, end, stream=7, name="gemm"):
    return trace.Interval("kernel", name, start, end, device=0, stream=stream)


def copy(start, end, stream=9):
    return trace.Interval("memcpy", "Memcpy HtoD (Pinned -> Device)", start, end, device=0, stream=stream,
                          copy_kind="HtoD")


def host_step(n, start, end):
    return trace.Interval("annotation", f"ProfilerStep#{n}", start, end, thread=1)


def memcpy_call(start, end):
    return trace.Interval("runtime", "cudaMemcpyAsync", start, end, thread=1)


def two_step_profile():
    """Step 3: the copy entirely under the kernel; step 4: half of it. The hold's spin kernel
    and the GPU-lane copy of the step range must not count."""
    intervals = [
        host_step(3, 0, 100), trace.Interval("annotation", "ProfilerStep#3", 5, 95, device=0, stream=7),
        kernel(0, 10, name="at::cuda::spin_kernel"), memcpy_call(1, 3),
        kernel(10, 60), copy(20, 40),
        host_step(4, 100, 200), memcpy_call(101, 121),
        kernel(110, 150), copy(140, 160),
    ]
    return trace.Profile(intervals=intervals, steps=2)


def test_steps_of_splits_at_the_host_step_ranges(nb03):
    steps = nb03["steps_of"](two_step_profile())
    assert len(steps) == 2
    assert {iv.start_us for iv in steps[1]} == {100, 101, 110, 140}
    # a profile without step ranges is one step
    assert nb03["steps_of"](trace.Profile(intervals=[kernel(0, 1)], steps=1)) == [[kernel(0, 1)]]


def test_across_steps_median_and_half_iqr(nb03):
    v = nb03["across_steps"]([1.0, 2.0, 3.0, 4.0, 100.0], "x")
    assert (v.value, v.samples, v.unit) == (3.0, 5, "x")
    assert v.spread == pytest.approx((4.0 - 2.0) / 2)  # as claims.measured does for a Timing
    assert nb03["across_steps"]([0.5]).spread == 0.0
    with pytest.raises(ValueError):
        nb03["across_steps"]([])


def test_copy_and_kernel_per_step_overlap_and_host_hold(nb03):
    stats = nb03["copy_and_kernel"](two_step_profile())
    assert stats["overlap"].value == pytest.approx(0.75)  # steps 1.0 and 0.5, spin kernel left out
    assert stats["overlap"].spread == pytest.approx(0.125) and stats["overlap"].samples == 2
    assert stats["held"].value == pytest.approx((2 / 20 + 20 / 20) / 2)
    assert stats["copy_us"] == pytest.approx(20) and stats["kernel_us"] == pytest.approx(45)


def test_lane_overlaps(nb03):
    assert nb03["lane_overlap"]([kernel(0, 10, stream=1), kernel(5, 15, stream=2)]) == pytest.approx(0.5)
    assert nb03["lane_overlap"]([kernel(0, 10, stream=1), kernel(10, 20, stream=1)]) == 0.0
    assert nb03["copy_lanes_overlap"]([copy(0, 10, stream=1), copy(0, 10, stream=2)]) == pytest.approx(1.0)


def test_weakest_picks_the_deciding_comparison(nb03):
    weakest = nb03["weakest"]
    far = claims.compare(claims.Value(0.99, 0.001), 0.95, holds_if="above")
    near = claims.compare(claims.Value(0.97, 0.001), 0.95, holds_if="above")
    edge = claims.compare(claims.Value(0.951, 0.001), 0.95, holds_if="above")
    fails = claims.compare(claims.Value(0.3, 0.001), 0.2, holds_if="below")
    assert weakest({"far": far, "near": near})[0] == "near"
    assert weakest({"far": far, "edge": edge, "near": near}) == ("edge", edge)
    assert weakest({"edge": edge, "fails": fails, "far": far})[1].verdict == claims.DOES_NOT_HOLD
    zero = claims.compare(0.0, 0.0, holds_if="above")  # a margin of 0 must not divide by zero
    assert weakest({"zero": zero, "far": far})[0] == "zero"


def test_added_and_propagated(nb03):
    total = nb03["added"](claims.Value(1.0, 0.1, "s", 5), claims.Value(2.0, 0.2, "s", 3))
    assert (total.value, total.spread, total.unit, total.samples) == (3.0, pytest.approx(0.3), "s", 3)
    best = nb03["propagated"](lambda c, k: (c + k) / max(c, k), claims.Value(1.0, 0.1), claims.Value(1.0, 0.0))
    assert best.value == pytest.approx(2.0)
    assert best.spread == pytest.approx((2.1 / 1.1 - 1.9 / 1.0) / 2)  # half the range at the corners
    assert best.unit == "x"


def test_hidden_share_is_a_share_of_the_copy_time_not_of_the_shorter(nb03):
    # the copies (40 us) are longer than the kernel (10 us): 10 of their 40 us are hidden
    profile = trace.Profile(intervals=[copy(0, 20), copy(30, 50), kernel(35, 45)], steps=1)
    assert nb03["hidden_share"](profile) == pytest.approx(0.25)


def test_range_ms(nb03):
    profile = trace.Profile(intervals=[trace.Interval("annotation", "S1 copy", 0, 3000, thread=1),
                                       trace.Interval("annotation", "S1 copy", 0, 3000, device=0, stream=1),
                                       trace.Interval("annotation", "S1 copy", 5000, 6000, thread=1)], steps=2)
    assert nb03["range_ms"](profile, "S1 copy") == pytest.approx(2.0)


@pytest.mark.parametrize("machine", ["1xNVIDIA-H100-80GB-HBM3", "1xNVIDIA-H200", "2xNVIDIA-H200"])
def test_every_recorded_profile_splits_into_its_steps(nb03, machine):
    folder = ROOT / "results" / machine / "03_streams_and_overlap"
    if not folder.is_dir():
        pytest.skip(f"no recordings of notebook 03 on {machine}")
    for path in sorted(folder.glob("*.json")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, value = records.load(path)
        profiles = [v for v in (value.values() if isinstance(value, dict) else []) if isinstance(v, trace.Profile)]
        profiles += [v for v in (value.get("profiles", {}).values() if isinstance(value, dict) else [])]
        for profile in profiles:
            assert len(nb03["steps_of"](profile)) == profile.steps, f"{path.name}: steps"
