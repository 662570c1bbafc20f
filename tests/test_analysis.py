"""helpers/analysis.py: the per-step statistics the lessons share (ported from notebook 03's
own copies, which the lessons now call here)."""

import warnings
from pathlib import Path

import pytest

from helpers import analysis, claims, records, trace

ROOT = Path(__file__).resolve().parent.parent


def kernel(start, end, stream=7, name="gemm"):
    return trace.Interval("kernel", name, start, end, device=0, stream=stream)


def copy(start, end, stream=9):
    return trace.Interval(
        "memcpy",
        "Memcpy HtoD (Pinned -> Device)",
        start,
        end,
        device=0,
        stream=stream,
        copy_kind="HtoD",
    )


def host_step(n, start, end):
    return trace.Interval("annotation", f"ProfilerStep#{n}", start, end, thread=1)


def two_step_profile():
    """Step 3: the copy entirely under the kernel; step 4: half of it. The GPU-lane copy of the
    step range must not start a step."""
    intervals = [
        host_step(3, 0, 100),
        trace.Interval("annotation", "ProfilerStep#3", 5, 95, device=0, stream=7),
        kernel(10, 60),
        copy(20, 40),
        host_step(4, 100, 200),
        kernel(110, 150),
        copy(140, 160),
    ]
    return trace.Profile(intervals=intervals, steps=2)


def test_steps_of_splits_at_the_host_step_ranges():
    steps = analysis.steps_of(two_step_profile())
    assert len(steps) == 2
    assert {iv.start_us for iv in steps[0]} == {0, 5, 10, 20}
    assert {iv.start_us for iv in steps[1]} == {100, 110, 140}
    # a profile without step ranges is one step
    assert analysis.steps_of(trace.Profile(intervals=[kernel(0, 1)], steps=1)) == [[kernel(0, 1)]]
    with pytest.raises(TypeError, match="trace.Profile"):
        analysis.steps_of([kernel(0, 1)])


def test_across_gives_the_median_and_half_the_interquartile_range():
    v = analysis.across([1.0, 2.0, 3.0, 4.0, 100.0], "x")
    assert (v.value, v.samples, v.unit) == (3.0, 5, "x")
    assert v.spread == pytest.approx((4.0 - 2.0) / 2)  # as claims.measured does for a Timing
    one = analysis.across([0.5])
    assert (one.value, one.spread, one.samples, one.unit) == (0.5, 0.0, 1, "")
    with pytest.raises(ValueError):
        analysis.across([])


def test_per_step_measures_each_step_apart():
    ratio = analysis.per_step(
        two_step_profile(),
        lambda step: trace.overlap_ratio(
            trace.select(step, kind="memcpy"), trace.select(step, kind="kernel")
        ),
        "x",
    )
    assert (ratio.value, ratio.samples, ratio.unit) == (
        pytest.approx(0.75),
        2,
        "x",
    )  # steps 1.0 and 0.5
    assert ratio.spread == pytest.approx(0.125)
    assert analysis.per_step(two_step_profile(), len).unit == ""  # a count has no unit


def test_weakest_picks_the_deciding_comparison():
    far = claims.compare(claims.Value(0.99, 0.001), 0.95, holds_if="above")
    near = claims.compare(claims.Value(0.97, 0.001), 0.95, holds_if="above")
    edge = claims.compare(claims.Value(0.951, 0.001), 0.95, holds_if="above")
    fails = claims.compare(claims.Value(0.3, 0.001), 0.2, holds_if="below")
    assert analysis.weakest({"far": far, "near": near})[0] == "near"
    assert analysis.weakest({"far": far, "edge": edge, "near": near}) == ("edge", edge)
    assert analysis.weakest({"edge": edge, "fails": fails, "far": far}) == ("fails", fails)
    # nearest in margins, not in the value's unit: 1.0 above with a spread of 0.4 (2.5 margins)
    # is nearer than 0.5 above with a spread of 0.01 (50 margins)
    wide = claims.compare(claims.Value(2.0, 0.4), 1.0, holds_if="above")
    tight = claims.compare(claims.Value(1.5, 0.01), 1.0, holds_if="above")
    assert analysis.weakest({"tight": tight, "wide": wide})[0] == "wide"
    zero = claims.compare(0.0, 0.0, holds_if="above")  # a margin of 0 must not divide by zero
    assert analysis.weakest({"zero": zero, "far": far})[0] == "zero"
    with pytest.raises(ValueError):
        analysis.weakest({})


def test_added_and_propagated():
    total = analysis.added(claims.Value(1.0, 0.1, "s", 5), claims.Value(2.0, 0.2, "s", 3))
    assert (total.value, total.spread, total.unit, total.samples) == (
        3.0,
        pytest.approx(0.3),
        "s",
        3,
    )
    assert analysis.added(claims.Value(1.0), claims.Value(2.0)).samples is None
    best = analysis.propagated(
        lambda c, k: (c + k) / max(c, k),
        claims.Value(1.0, 0.1, samples=5),
        claims.Value(1.0, 0.0, samples=4),
    )
    assert best.value == pytest.approx(2.0)
    assert best.spread == pytest.approx(
        (2.1 / 1.1 - 1.9 / 1.0) / 2
    )  # half the range at the corners
    assert (best.unit, best.samples) == ("x", 4)
    with pytest.raises(ValueError):
        analysis.propagated(lambda: 1.0)


def test_in_words_and_times():
    above = claims.compare(claims.Value(2.0, 0.1), 1.0, holds_if="above")
    below = claims.compare(claims.Value(0.5, 0.1), 1.0, holds_if="above")
    inside = claims.compare(claims.Value(1.05, 0.1), 1.0, holds_if="above")
    assert [
        analysis.in_words(c, "faster", "as fast", "slower") for c in (above, inside, below)
    ] == ["faster", "as fast", "slower"]
    assert analysis.times(claims.Value(1.2912, 0.0634, "x")) == "1.29x ± 0.06"


def test_counts_are_worded_and_few_samples_are_said():
    assert [analysis.plural(n, "pair") for n in (0, 1, 2)] == ["0 pairs", "1 pair", "2 pairs"]
    assert analysis.few(4) == "4 samples" and analysis.few(1, "run") == "1 run"
    assert analysis.few(analysis.FEW_SAMPLES) == "" and analysis.few(None) == ""


@pytest.mark.parametrize("machine", records.recorded_machine_names())
def test_every_recorded_profile_of_03_splits_into_its_steps(machine):
    folder = ROOT / "results" / machine / "03_streams_and_overlap"
    if not folder.is_dir():
        pytest.skip(f"no recordings of notebook 03 on {machine}")
    for path in sorted(folder.glob("*.json")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, value = records.load(path)
        profiles = [v for v in value.values() if isinstance(v, trace.Profile)]
        profiles += list(value.get("profiles", {}).values())
        for profile in profiles:
            assert len(analysis.steps_of(profile)) == profile.steps, f"{path.name}: steps"


def test_paired_takes_the_spread_of_the_ratios_not_of_each_side():
    # each side varies by a factor of 2, the ratio of each pair not at all
    value = analysis.paired([1.0, 2.0, 4.0, 8.0], [2.0, 4.0, 8.0, 16.0], unit="of the copy")
    assert value.value == pytest.approx(0.5) and value.spread == 0 and value.samples == 4
    assert value.unit == "of the copy"
    by_default = analysis.paired([1.0, 3.0], [2.0, 2.0])
    assert by_default.value == pytest.approx(1.0) and by_default.unit == "x"
    with pytest.raises(ValueError, match="as many numerators as denominators, got 1 and 2"):
        analysis.paired([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="denominator is 0"):
        analysis.paired([1.0], [0.0])
