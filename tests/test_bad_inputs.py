"""Every public helper answers a bad argument with ValueError or TypeError and a sentence that
says what to pass instead (DESIGN: Conventions). One case per bad input."""

import functools

import numpy as np
import pytest

from helpers import (
    claims,
    codec,
    config,
    distributed,
    exercises,
    hardware,
    plotting,
    records,
    timing,
    trace,
)


def top_level(x):
    return x


IV = [trace.Interval("memcpy", "Memcpy HtoD (Pinned -> Device)", 0.0, 1.0, copy_kind="HtoD")]
CASES = [
    # (what, call, exception, words the message must contain)
    (
        "a numpy size is a size",
        lambda: timing.sizes_pow2(np.int64(1024), 4096) == [1024, 4096],
        None,
        None,
    ),
    (
        "sizes as floats",
        lambda: timing.sizes_pow2(1024.0, 4096),
        TypeError,
        "whole number of bytes",
    ),
    ("sizes backwards", lambda: timing.sizes_pow2(4096, 1024), ValueError, "at least smallest"),
    ("a factor of 1", lambda: timing.sizes_pow2(1, 8, factor=1), ValueError, "factor"),
    ("format_bytes of a string", lambda: timing.format_bytes("1"), TypeError, "number of bytes"),
    (
        "host_clock given a string",
        lambda: timing.host_clock("x"),
        TypeError,
        "function of no arguments",
    ),
    (
        "cuda_events given None",
        lambda: timing.cuda_events(None),
        TypeError,
        "function of no arguments",
    ),
    (
        "benchmark given a string",
        lambda: timing.benchmark("x"),
        TypeError,
        "function of no arguments",
    ),
    (
        "benchmark with a string run time",
        lambda: timing.benchmark(print, min_run_time="1"),
        TypeError,
        "seconds",
    ),
    ("zero repeats", lambda: timing.host_clock(print, repeats=0), ValueError, ">= 1"),
    (
        "a numpy repeat count is a count",
        lambda: (
            timing.host_clock(lambda: None, repeats=np.int32(2), warmup=0).samples_s.__len__() == 2
        ),
        None,
        None,
    ),
    (
        "hold_stream on a machine without CUDA",
        lambda: timing.hold_stream(10),
        ValueError,
        "CUDA GPU",
    ),
    ("hold_stream for minus 1 us", lambda: timing.hold_stream(-1), ValueError, ">= 0"),
    (
        "Timing([0]) asked for a rate",
        lambda: timing.Timing([0.0], "x", nbytes=10).gbps,
        ValueError,
        "resolution",
    ),
    (
        "Timing([0]) asked for its range",
        lambda: timing.Timing([0.0], "x", nbytes=10).gbps_range,
        ValueError,
        "resolution",
    ),
    ("Timing with a negative sample", lambda: timing.Timing([-1.0], "x"), ValueError, ">= 0"),
    ("Timing with NaN", lambda: timing.Timing([float("nan")], "x"), ValueError, "finite"),
    ("Timing of a string", lambda: timing.Timing("abc", "x"), TypeError, "list of seconds"),
    ("Timing with no sample", lambda: timing.Timing([], "x"), ValueError, "at least one sample"),
    (
        "Timing moving -1 bytes",
        lambda: timing.Timing([1.0], "x", nbytes=-1),
        ValueError,
        "positive",
    ),
    ("calls_for a negative time", lambda: timing.calls_for(-1), ValueError, ">= 0"),
    ("calls_for at most 0", lambda: timing.calls_for(1e-3, most=0), ValueError, "most"),
    ("verify_copy of lists", lambda: timing.verify_copy([1], [1]), TypeError, "two tensors"),
    (
        "select a copy kind spelt otherwise",
        lambda: trace.select(IV, copy_kind="H2D"),
        ValueError,
        "'HtoD'",
    ),
    (
        "select an unknown kind",
        lambda: trace.select(IV, kind="memcopy"),
        ValueError,
        "use one or more of",
    ),
    ("select a stream by name", lambda: trace.select(IV, stream="7"), TypeError, "int index"),
    (
        "count a misspelt kind",
        lambda: trace.count(IV, kind="kernal"),
        ValueError,
        "use one or more of",
    ),
    ("covered_us of a string", lambda: trace.covered_us("x"), TypeError, "list of trace.Interval"),
    (
        "host_blocked_us with a number",
        lambda: trace.host_blocked_us(IV, 3),
        TypeError,
        "runtime call",
    ),
    (
        "overlap of nothing",
        lambda: trace.overlap_ratio([], IV),
        ValueError,
        "select some intervals",
    ),
    ("parse_copy_name of an int", lambda: trace.parse_copy_name(3), TypeError, "a string"),
    (
        "numpy arrays plot",
        lambda: (
            plotting.bandwidth_vs_size(
                {"a": (np.array([1024, 2048]), np.array([1.0, 2.0]))}, title="t"
            ).get_title()
            == "t"
        ),
        None,
        None,
    ),
    (
        "a series that is not a pair",
        lambda: plotting.bandwidth_vs_size({"a": [1, 2, 3]}, title="t"),
        TypeError,
        "pair",
    ),
    (
        "sizes as a string",
        lambda: plotting.bandwidth_vs_size({"a": ("ab", [1.0, 2.0])}, title="t"),
        TypeError,
        "sequence of numbers",
    ),
    (
        "a zero rate on a log axis",
        lambda: plotting.bandwidth_vs_size({"a": ([1, 2], [0.0, 2.0])}, title="t"),
        ValueError,
        "positive on a log axis",
    ),
    (
        "a title that is not text",
        lambda: plotting.bandwidth_vs_size({"a": ([1, 2], [1.0, 2.0])}, title=None),
        TypeError,
        "plotting.titled",
    ),
    (
        "a ceiling as text",
        lambda: plotting.bandwidth_vs_size(
            {"a": ([1, 2], [1.0, 2.0])}, title="t", ceiling_gbps="5"
        ),
        TypeError,
        "GB/s",
    ),
    (
        "bars of strings",
        lambda: plotting.bars_with_ratios({"a": "1"}, title="t", ylabel="y"),
        TypeError,
        "numbers",
    ),
    ("timeline of None", lambda: plotting.timeline(None, title="t"), TypeError, "trace.Interval"),
    (
        "an experiment as a partial",
        lambda: records.run_or_replay(functools.partial(top_level, 1), notebook="nb", gpus=0),
        TypeError,
        "def at the top",
    ),
    (
        "an experiment as a lambda",
        lambda: records.run_or_replay(lambda: 1, notebook="nb", gpus=0),
        TypeError,
        "lambda",
    ),
    (
        "minus one GPU",
        lambda: records.run_or_replay(top_level, notebook="nb", gpus=-1),
        ValueError,
        "0, 1, 2",
    ),
    (
        "params as a list",
        lambda: records.run_or_replay(top_level, notebook="nb", gpus=0, params=[1]),
        TypeError,
        "dict of keyword arguments",
    ),
    (
        "a machine name that climbs out",
        lambda: records.recording_path("..", "nb", "x"),
        ValueError,
        "cannot name a folder",
    ),
    (
        "a notebook that is not there",
        lambda: records.experiments_in_notebook("/nope.ipynb"),
        ValueError,
        "path of an .ipynb",
    ),
    (
        "check_recordings of one path",
        lambda: records.check_recordings("notebooks/01_pinned_memory.ipynb"),
        TypeError,
        "list of notebook paths; got one path, 'notebooks/01_pinned_memory.ipynb': "
        "pass ['notebooks/01_pinned_memory.ipynb']",
    ),
    (
        "machine_name of a string",
        lambda: hardware.machine_name("x"),
        TypeError,
        "hardware.describe()",
    ),
    ("ceiling_gbps of None", lambda: hardware.ceiling_gbps(None), TypeError, "hardware.describe()"),
    (
        "cache_bytes of a list",
        lambda: hardware.cache_bytes([]),
        TypeError,
        "cache_bytes reads a machine's description",
    ),
    (
        "a PCIe generation 9",
        lambda: hardware.pcie_theoretical_gbps(9, 16),
        ValueError,
        "generation 1-6",
    ),
    ("a PCIe width of -16", lambda: hardware.pcie_theoretical_gbps(4, -16), ValueError, "lanes"),
    ("gpu_links of a number", lambda: hardware.gpu_links(3), TypeError, "nvidia-smi topo -m"),
    (
        "a numpy world size",
        lambda: distributed.bus_factor("all_reduce", np.int64(4)) == 1.5,
        None,
        None,
    ),
    (
        "an unknown collective",
        lambda: distributed.bus_factor("allreduce", 2),
        ValueError,
        "all_reduce",
    ),
    (
        "a negative message size",
        lambda: distributed.busbw_gbps("all_reduce", -1, 1.0, 2),
        ValueError,
        "positive",
    ),
    (
        "a timeout of 1e12 s",
        lambda: distributed.launch(print, 2, backend="gloo", timeout_s=1e12),
        ValueError,
        "a day",
    ),
    (
        "an infinite start-up timeout",
        lambda: distributed.launch(print, 2, backend="gloo", startup_timeout_s=float("inf")),
        ValueError,
        "finite",
    ),
    ("zero ranks", lambda: distributed.launch(print, 0, backend="gloo"), ValueError, ">= 1"),
    ("a mark that is a number", lambda: distributed.mark(3), TypeError, "text label"),
    (
        "choices as one string",
        lambda: exercises.check_choice("a", "a", choices="ab"),
        TypeError,
        "list of strings",
    ),
    ("an answer as text", lambda: exercises.check_number("5", 5), TypeError, "number"),
    ("a set recorded", lambda: codec.encode({1, 2}), TypeError, "cannot be recorded"),
    (
        "a verdict typed in",
        lambda: claims.ClaimsTable("nb").add("c", source="s", measured="m", holds="holds"),
        TypeError,
        "claims.compare",
    ),
    (
        "a threshold as text",
        lambda: claims.compare(1.0, "2", holds_if="below"),
        TypeError,
        "threshold",
    ),
    (
        "a side spelt otherwise",
        lambda: claims.compare(1.0, 2.0, holds_if="less"),
        ValueError,
        "'above' or 'below'",
    ),
]


@pytest.mark.filterwarnings(
    "ignore:.*samples spread"
)  # two samples of a no-op spread widely: expected
@pytest.mark.parametrize("what, call, error, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_answered(what, call, error, words):
    if error is None:
        assert call() is True  # accepted and right: the input is not bad after all
        return
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value), f"{what}: {raised.value}"


@pytest.mark.parametrize(
    "variable", ["COURSE_RESULTS_DIR", "COURSE_TRACES_DIR", "COURSE_INDEX_OUT"]
)
def test_a_relative_folder_in_the_environment_is_refused(monkeypatch, variable):
    monkeypatch.setenv(variable, "relative/folder")
    call = {
        "COURSE_RESULTS_DIR": config.results_dir,
        "COURSE_TRACES_DIR": config.traces_dir,
        "COURSE_INDEX_OUT": config.index_out,
    }[variable]
    with pytest.raises(ValueError, match="absolute"):
        call()


def test_a_flag_that_is_neither_on_nor_off_is_refused(monkeypatch):
    monkeypatch.setenv("COURSE_QUICK", "maybe")
    with pytest.raises(ValueError, match="neither on nor off"):
        config.quick_mode()
    monkeypatch.setenv("COURSE_QUICK", "off")
    assert config.quick_mode() is False
