"""Tests of helpers.trace (profiler traces as intervals, overlap) and plotting.timeline.

The synthetic events below copy the shape of torch.profiler (Kineto) Chrome traces: GPU
events with ``pid`` = device and ``tid`` = stream, ``args`` with device, stream, correlation
and bytes; peer copies with fromDevice/toDevice instead of device; runtime calls on a host
thread joined to their GPU work by ``args.correlation``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from helpers import plotting, records, trace
from helpers.codec import Attachment
from helpers.trace import Interval

REPO = Path(__file__).resolve().parent.parent
REAL_TRACES = sorted((REPO / "results").glob("**/*.trace.json.gz")) + sorted(
    (REPO / "tests" / "fixtures").glob("*.trace.json.gz")
)

PID, TID = 5006, 5006  # the Python process and its main thread, as Kineto writes them
T0 = 4436584775000.0  # Kineto's ts: microseconds on its own clock, large numbers


# ---------------------------------------------------------------- synthetic Kineto events


def runtime(
    name: str, ts: float, dur: float, correlation: int, cbid: int = 41, tid: int = TID
) -> dict:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": T0 + ts,
        "dur": dur,
        "args": {"External id": 17, "cbid": cbid, "correlation": correlation},
    }


def copy(
    name: str,
    ts: float,
    dur: float,
    correlation: int,
    nbytes: int,
    stream: int = 7,
    device: int = 0,
) -> dict:
    return {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": name,
        "pid": device,
        "tid": stream,
        "ts": T0 + ts,
        "dur": dur,
        "args": {
            "External id": 17,
            "device": device,
            "context": 1,
            "stream": stream,
            "correlation": correlation,
            "bytes": nbytes,
            "memory bandwidth (GB/s)": nbytes / (dur * 1e3),
        },
    }


def peer_copy(ts: float, dur: float, correlation: int, nbytes: int, pid: object = 0) -> dict:
    """A peer copy as Kineto writes CUpti_ActivityMemcpyPtoP: no args.device."""
    return {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy PtoP (Device -> Device)",
        "pid": pid,
        "tid": 13,
        "ts": T0 + ts,
        "dur": dur,
        "args": {
            "External id": 21,
            "fromDevice": 0,
            "inDevice": 0,
            "toDevice": 1,
            "fromContext": 1,
            "inContext": 1,
            "toContext": 2,
            "stream": 13,
            "correlation": correlation,
            "bytes": nbytes,
            "memory bandwidth (GB/s)": nbytes / (dur * 1e3),
        },
    }


def kernel(ts: float, dur: float, correlation: int, stream: int = 7, device: int = 0) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2, T3)",
        "pid": device,
        "tid": stream,
        "ts": T0 + ts,
        "dur": dur,
        "args": {
            "External id": 9,
            "queued": 0,
            "device": device,
            "context": 1,
            "stream": stream,
            "correlation": correlation,
            "registers per thread": 16,
            "shared memory": 0,
            "blocks per SM": 1.5,
            "warps per SM": 6.0,
            "grid": [132, 1, 1],
            "block": [128, 1, 1],
            "est. achieved occupancy %": 9,
        },
    }


def other_events() -> list[dict]:
    """Events a parser must skip: metadata, flows, spans, instants, Python functions."""
    return [
        {
            "ph": "M",
            "name": "process_name",
            "ts": T0,
            "pid": 0,
            "tid": 0,
            "args": {"name": "python"},
        },
        {
            "ph": "M",
            "name": "thread_name",
            "ts": T0,
            "pid": 0,
            "tid": 7,
            "args": {"name": "stream 7 "},
        },
        {"ph": "s", "id": 12, "pid": PID, "tid": TID, "ts": T0 + 1, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "f",
            "id": 12,
            "pid": 0,
            "tid": 7,
            "ts": T0 + 4,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
        {
            "ph": "X",
            "cat": "Trace",
            "ts": T0,
            "dur": 900.0,
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "name": "PyTorch Profiler (0)",
            "args": {"Op count": 0},
        },
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": T0 + 999},
        {
            "ph": "X",
            "cat": "python_function",
            "name": "test.py(1): f",
            "pid": PID,
            "tid": TID,
            "ts": T0,
            "dur": 5.0,
            "args": {"Python id": 1},
        },
    ]


def sample_trace() -> dict:
    """Pageable and pinned H2D on stream 7, a D2H, a kernel on streams 7 and 20, a peer copy."""
    events = other_events() + [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#3",
            "pid": PID,
            "tid": TID,
            "ts": T0,
            "dur": 600.0,
            "args": {"External id": 1, "Record function id": 0},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::copy_",
            "pid": PID,
            "tid": TID,
            "ts": T0 + 1.0,
            "dur": 110.0,
            "args": {"External id": 17, "Record function id": 0},
        },
        runtime("cudaMemcpyAsync", 2.0, 100.0, correlation=101),
        copy("Memcpy HtoD (Pageable -> Device)", 10.0, 90.0, correlation=101, nbytes=1 << 20),
        runtime("cudaMemcpyAsync", 120.0, 4.0, correlation=102),
        copy("Memcpy HtoD (Pinned -> Device)", 125.0, 40.0, correlation=102, nbytes=4 << 20),
        runtime("cudaLaunchKernel", 126.0, 3.0, correlation=103, cbid=211),
        kernel(130.0, 50.0, correlation=103, stream=20),
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "ProfilerStep#3",
            "pid": 0,
            "tid": 20,
            "ts": T0 + 130.0,
            "dur": 50.0,
            "args": {"External id": 1},
        },
        runtime("cudaMemcpyAsync", 200.0, 3.0, correlation=104),
        copy("Memcpy DtoH (Device -> Pinned)", 205.0, 30.0, correlation=104, nbytes=2 << 20),
        runtime("cudaStreamSynchronize", 204.0, 32.0, correlation=105, cbid=131),
        runtime("cudaMemcpyPeerAsync", 300.0, 5.0, correlation=106, cbid=47),
        peer_copy(310.0, 20.0, correlation=106, nbytes=8 << 20),
        kernel(310.0, 10.0, correlation=107, stream=7),
    ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1700000000000000000,
        "traceEvents": events,
        "traceName": "x.json",
    }


@pytest.fixture
def intervals() -> list[Interval]:
    return trace.intervals_from_chrome_trace(sample_trace())


@pytest.fixture(autouse=True)
def _agg_backend_and_private_tmp(tmp_path, monkeypatch):
    """Plots on Agg; profile() writes its trace folder under the test's tmp_path."""
    plt.switch_backend("Agg")
    monkeypatch.setenv("COURSE_TRACES_DIR", str(tmp_path))
    yield
    plt.close("all")


def check_invariants(intervals: list[Interval]) -> None:
    """What every parsed trace must satisfy."""
    for iv in intervals:
        assert iv.kind in trace.KINDS
        assert iv.end_us >= iv.start_us, iv
        if iv.on_gpu:
            assert iv.device is not None and iv.stream is not None, iv
        if iv.kind == "memcpy":
            assert iv.nbytes is not None and iv.copy_kind is not None, iv


# ---------------------------------------------------------------- parsing


def test_kinds_and_order(intervals):
    check_invariants(intervals)
    assert [iv.start_us for iv in intervals] == sorted(iv.start_us for iv in intervals)
    assert trace.count(intervals, "memcpy") == 4
    assert trace.count(intervals, "kernel") == 2
    assert trace.count(intervals, "runtime") == 6
    assert trace.count(intervals, "op", "aten::copy_") == 1
    assert trace.count(intervals, "annotation", "ProfilerStep#") == 2
    assert all(iv.name != "PyTorch Profiler (0)" for iv in intervals)  # spans are not kept
    assert trace.count(intervals, name="test.py") == 0  # nor python functions


def test_times_stay_on_the_trace_clock(intervals):
    pageable = trace.select(intervals, kind="memcpy", name="Pageable")[0]
    assert pageable.start_us == pytest.approx(T0 + 10.0)
    assert pageable.duration_us == pytest.approx(90.0)


def test_pageable_and_pinned_h2d(intervals):
    pageable, pinned = trace.select(intervals, kind="memcpy", copy_kind="HtoD")
    assert (pageable.src_memory, pageable.dst_memory) == ("Pageable", "Device")
    assert (pinned.src_memory, pinned.dst_memory) == ("Pinned", "Device")
    assert pageable.nbytes == 1 << 20 and pinned.nbytes == 4 << 20
    assert (pinned.device, pinned.stream, pinned.correlation) == (0, 7, 102)
    assert pinned.thread is None


def test_d2h(intervals):
    (d2h,) = trace.select(intervals, copy_kind="DtoH")
    assert (d2h.copy_kind, d2h.src_memory, d2h.dst_memory, d2h.nbytes) == (
        "DtoH",
        "Device",
        "Pinned",
        2 << 20,
    )


def test_peer_copy_without_args_device(intervals):
    (peer,) = trace.select(intervals, copy_kind="PtoP")
    assert peer.device == 0  # the lane the profiler put it on: its pid
    assert (peer.src_device, peer.dst_device) == (0, 1)
    assert peer.stream == 13 and peer.nbytes == 8 << 20


def test_peer_copy_device_without_an_integer_pid():
    event = peer_copy(0.0, 5.0, correlation=1, nbytes=64, pid="GPU")
    (peer,) = trace.intervals_from_chrome_trace([event])
    assert peer.device == 0  # args.inDevice: where the copy ran
    del event["args"]["inDevice"]
    (peer,) = trace.intervals_from_chrome_trace([event])
    assert peer.device == 1  # then args.toDevice


def test_events_are_kept_by_category_and_read_leniently():
    events = [
        {"ph": "X", "cat": "Kernel", "ts": 5, "dur": 2, "pid": 0, "tid": 7},  # no name
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": "1", "tid": 3},
        {
            "ph": "X",
            "cat": "gpu_memset",
            "name": "Memset",
            "ts": 9,
            "dur": -1,
            "args": {"bytes": 8},
        },
        {"ph": "X", "cat": "kernel", "name": "no start", "dur": 1},
        {"ph": "i", "cat": "kernel", "name": "an instant", "ts": 1},
        {"ph": "X", "cat": "python_function", "name": "not kept", "ts": 1},
        "not an event",
    ]
    runtime, kernel, memset = trace.intervals_from_chrome_trace(events)
    assert (kernel.kind, kernel.name, kernel.start_us, kernel.end_us) == ("kernel", "", 5.0, 7.0)
    assert (kernel.device, kernel.stream, kernel.thread) == (0, 7, None)
    assert (runtime.kind, runtime.name, runtime.start_us, runtime.end_us) == (
        "runtime",
        "cudaLaunchKernel",
        1.0,
        1.0,
    )
    assert runtime.thread == 3 and runtime.device is None
    assert (memset.kind, memset.start_us, memset.end_us, memset.nbytes) == ("memset", 9.0, 9.0, 8)
    same_start = [
        {"ph": "X", "cat": "kernel", "name": n, "ts": 0, "dur": d, "args": {"correlation": c}}
        for n, d, c in (("long", 5, "7"), ("short", 1, 7.0), ("odd", 3, True), ("half", 4, 2.5))
    ]
    ordered = trace.intervals_from_chrome_trace(same_start)
    assert [iv.name for iv in ordered] == ["short", "odd", "half", "long"]  # by start, then end
    assert [iv.correlation for iv in ordered] == [7, None, None, 7]  # "7", 7.0: 7; True, 2.5: no


def test_kernels_on_two_streams(intervals):
    kernels = trace.select(intervals, kind="kernel")
    assert sorted(iv.stream for iv in kernels) == [7, 20]
    assert trace.select(intervals, kind="kernel", stream=20)[0].correlation == 103
    assert trace.select(intervals, kind="kernel", device=1) == []


def test_host_events_carry_their_thread(intervals):
    for iv in trace.select(intervals, kind=("runtime", "op")):
        assert iv.thread == TID and iv.device is None and iv.stream is None


def test_gpu_annotation_sits_on_a_gpu_lane(intervals):
    (gpu_step,) = [iv for iv in intervals if iv.kind == "annotation" and iv.device is not None]
    assert (gpu_step.device, gpu_step.stream) == (0, 20)


def test_runtime_calls_join_gpu_work_by_correlation(intervals):
    calls = trace.select(intervals, kind="runtime", name="cudaMemcpyAsync")
    assert len(calls) == 3
    (work,) = trace.gpu_work_of(intervals, calls[1])
    assert work.name == "Memcpy HtoD (Pinned -> Device)"
    launch = trace.select(intervals, kind="runtime", name="cudaLaunchKernel")[0]
    assert [iv.kind for iv in trace.gpu_work_of(intervals, launch)] == ["kernel"]
    by_name = trace.gpu_work_of(intervals, "cudaMemcpyAsync")
    assert sorted(iv.correlation for iv in by_name) == [101, 102, 104]
    assert trace.gpu_work_of(intervals, "cudaStreamSynchronize") == []


def test_old_kineto_categories_and_string_tids():
    old = [
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 405,
            "dur": 10,
            "args": {
                "device": 0,
                "context": 1,
                "stream": 7,
                "correlation": 334,
                "external id": 4,
                "bytes": 4096,
                "memory bandwidth (GB/s)": 0.4,
            },
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaMemcpyAsync",
            "pid": 13721,
            "tid": "456",
            "ts": 360,
            "dur": 20,
            "args": {"correlation": 334, "external id": 4},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "volta_sgemm_128x64_nn",
            "pid": 0,
            "tid": "stream 9",
            "ts": 420,
            "dur": 5,
            "args": {"correlation": 335, "external id": 5},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 430,
            "dur": 5,
            "args": {"stream": 7, "correlation": 40344, "external id": 4, "bytes": 64},
        },
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::to",
            "pid": 13721,
            "tid": "456",
            "ts": 350,
            "dur": 40,
        },
    ]
    ivs = trace.intervals_from_chrome_trace({"traceEvents": old})
    check_invariants(ivs)
    assert [iv.kind for iv in ivs] == ["op", "runtime", "memcpy", "kernel", "memset"]
    op, call, h2d, k, memset = ivs
    assert call.thread == 456 and op.thread == 456
    assert (h2d.device, h2d.stream, h2d.copy_kind, h2d.src_memory) == (0, 7, "HtoD", "Pageable")
    assert (k.device, k.stream) == (0, 9)  # no args.device/stream: pid and "stream 9"
    assert memset.nbytes == 64
    assert trace.gpu_work_of(ivs, call) == [h2d]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Memcpy HtoD (Pinned -> Device)", ("HtoD", "Pinned", "Device")),
        ("Memcpy DtoH (Device -> Pageable)", ("DtoH", "Device", "Pageable")),
        ("Memcpy DtoD (Device -> Device)", ("DtoD", "Device", "Device")),
        ("Memcpy PtoP (Device -> Device)", ("PtoP", "Device", "Device")),
        (
            "Memcpy HtoD (Managed Static -> Device Static)",
            ("HtoD", "Managed Static", "Device Static"),
        ),
        ("Memcpy DtoH", ("DtoH", None, None)),
        ("hipMemcpyAsync", (None, None, None)),
    ],
)
def test_parse_copy_name(name, expected):
    assert trace.parse_copy_name(name) == expected


def test_load_plain_gz_and_bare_list(tmp_path):
    data = sample_trace()
    plain = tmp_path / "a.json"
    plain.write_text(json.dumps(data))
    packed = tmp_path / "a.trace.json.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        json.dump(data, f)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data["traceEvents"]))
    expected = trace.intervals_from_chrome_trace(data)
    for path in (plain, packed, str(bare)):
        loaded = trace.load_chrome_trace(path)
        assert isinstance(loaded["traceEvents"], list)
        assert trace.intervals_from_chrome_trace(loaded) == expected


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match="no trace file"):
        trace.load_chrome_trace(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable Chrome trace"):
        trace.load_chrome_trace(broken)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="no trace events"):
        trace.load_chrome_trace(other)
    with pytest.raises(TypeError):
        trace.load_chrome_trace(42)
    with pytest.raises(TypeError, match="needs a trace dict or a list of events, got str"):
        trace.intervals_from_chrome_trace("trace.json")
    with pytest.raises(ValueError, match="traceEvents"):
        trace.intervals_from_chrome_trace({"events": []})


# ---------------------------------------------------------------- selection and time shifts


def test_select_by_several_kinds_and_errors(intervals):
    gpu_work = trace.select(intervals, kind=trace.GPU_KINDS)
    assert len(gpu_work) == 6 and all(iv.on_gpu for iv in gpu_work)
    with pytest.raises(ValueError, match="unknown interval kind"):
        trace.select(intervals, kind="copy")
    with pytest.raises(TypeError):
        trace.select("not intervals")
    with pytest.raises(TypeError):
        trace.select([1, 2])
    with pytest.raises(TypeError, match="name must be a substring to look for, got int"):
        trace.select(intervals, name=3)


def test_relative(intervals):
    shifted = trace.relative(intervals)
    assert min(iv.start_us for iv in shifted) == 0.0
    assert [iv.duration_us for iv in shifted] == pytest.approx([iv.duration_us for iv in intervals])
    assert intervals[0].start_us == pytest.approx(T0)  # the originals are untouched
    assert trace.relative(intervals, t0=T0 + 10.0)[0].start_us == pytest.approx(-10.0)
    assert trace.relative([]) == []


# ---------------------------------------------------------------- overlap arithmetic


def iv(start: float, end: float, kind: str = "kernel") -> Interval:
    return Interval(kind=kind, name=kind, start_us=start, end_us=end, device=0, stream=7)


def test_merge_nested_touching_and_disjoint():
    assert trace.merge([iv(0, 10), iv(2, 5)]) == [(0, 10)]  # nested
    assert trace.merge([iv(0, 10), iv(10, 20)]) == [(0, 20)]  # touching
    assert trace.merge([iv(30, 40), iv(0, 10)]) == [(0, 10), (30, 40)]  # disjoint, unsorted
    assert trace.merge([iv(0, 10), iv(5, 15), iv(14, 16)]) == [(0, 16)]  # chained
    assert trace.merge([]) == []
    assert trace.merge([(0.0, 1.0), (0.5, 2.0)]) == [(0.0, 2.0)]  # plain pairs work too


def test_covered_overlap_and_ratio():
    a = [iv(0, 10), iv(2, 5), iv(20, 30)]  # covers 20
    b = [iv(5, 25)]  # covers 20
    assert trace.covered_us(a) == 20
    assert trace.overlap_us(a, b) == 10  # 5..10 and 20..25
    assert trace.overlap_us(b, a) == 10
    assert trace.overlap_ratio(a, b) == pytest.approx(0.5)
    assert trace.overlap_us([iv(0, 10)], [iv(10, 20)]) == 0  # touching is not overlapping
    assert trace.overlap_ratio([iv(0, 100)], [iv(10, 20), iv(30, 40)]) == 1.0  # hidden entirely
    assert trace.overlap_ratio([iv(0, 10)], [iv(50, 60)]) == 0.0
    assert trace.span_us(a) == 30


def test_overlap_errors():
    with pytest.raises(ValueError, match="empty"):
        trace.overlap_ratio([], [iv(0, 1)])
    with pytest.raises(ValueError, match="empty"):
        trace.overlap_ratio([iv(0, 1)], [])
    with pytest.raises(ValueError, match="no time"):
        trace.overlap_ratio([iv(1, 1)], [iv(0, 2)])
    with pytest.raises(ValueError):
        trace.span_us([])
    with pytest.raises(ValueError, match="ends before"):
        trace.merge([iv(5, 1)])
    with pytest.raises(TypeError):
        trace.merge([(1, 2, 3)])
    with pytest.raises(TypeError):
        trace.covered_us(5)


def test_overlap_in_the_sample_trace(intervals):
    copies = trace.select(intervals, kind="memcpy", copy_kind="HtoD")
    kernels = trace.select(intervals, kind="kernel")
    # the pinned copy (125..165) runs beside the kernel on stream 20 (130..180)
    assert trace.overlap_us(copies, kernels) == pytest.approx(35.0)


def test_host_blocked_us(intervals):
    assert trace.host_blocked_us(intervals, "cudaMemcpyAsync") == pytest.approx(100.0 + 4.0 + 3.0)
    assert trace.host_blocked_us(intervals, "cudaStreamSynchronize") == pytest.approx(32.0)
    assert trace.host_blocked_us(intervals, "cudaDeviceSynchronize") == 0.0
    # the pageable copy's 90 us on the GPU are not host time
    assert trace.host_blocked_us(intervals, "Memcpy HtoD") == 0.0


def test_host_blocked_counts_nested_calls_once_per_thread():
    calls = [
        Interval(kind="runtime", name="cudaStreamSynchronize", start_us=0, end_us=10, thread=1),
        Interval(kind="runtime", name="cudaStreamSynchronize", start_us=2, end_us=4, thread=1),
        Interval(kind="runtime", name="cudaStreamSynchronize", start_us=0, end_us=10, thread=2),
    ]
    assert trace.host_blocked_us(calls, "Synchronize") == 20.0
    with pytest.raises(TypeError):
        trace.host_blocked_us(calls, "")


# ---------------------------------------------------------------- profiling and recordings


def test_profile_on_cpu_writes_a_gz_trace_of_the_active_steps():
    x = torch.randn(64, 64)

    def step():
        with torch.profiler.record_function("course_step"):
            (x @ x).sum()

    prof = trace.profile(step, wait=1, warmup=1, active=2, skip_first=1, name="cpu_test")
    assert prof.steps == 2
    path = Path(prof.chrome_trace.path)
    assert path.name == "cpu_test.trace.json.gz" and path.read_bytes()[:2] == b"\x1f\x8b"
    assert not list(path.parent.glob("*.json"))  # only the gzipped trace is left
    assert (
        trace.count(prof.intervals, "op", "aten::mm") == 2
    )  # one per active step, none from warm-up
    assert trace.count(prof.intervals, "annotation", "course_step") == 2
    assert trace.count(prof.intervals, "annotation", "ProfilerStep#") == 2
    assert trace.intervals_from_chrome_trace(trace.load_chrome_trace(path)) == prof.intervals
    check_invariants(prof.intervals)
    if not torch.cuda.is_available():
        assert not any(iv.on_gpu for iv in prof.intervals)


def test_profile_bad_arguments():
    with pytest.raises(TypeError):
        trace.profile("not a function")
    with pytest.raises(ValueError, match="active"):
        trace.profile(lambda: None, active=0)
    with pytest.raises(ValueError, match="wait"):
        trace.profile(lambda: None, wait=-1)
    with pytest.raises(ValueError, match="warmup must be a whole number of steps >= 0"):
        trace.profile(lambda: None, warmup=-1)
    with pytest.raises(ValueError, match="name"):
        trace.profile(lambda: None, name="../escape")


def test_profile_round_trips_through_a_recording(tmp_path, intervals):
    source = tmp_path / "made" / "demo.trace.json.gz"
    source.parent.mkdir()
    with gzip.open(source, "wt", encoding="utf-8") as f:
        json.dump(sample_trace(), f)
    original = trace.Profile(intervals=intervals, chrome_trace=Attachment(str(source)), steps=2)
    saved = records.save(
        "03_streams_and_overlap",
        "demo",
        {"profile": original, "note": "x"},
        fp="0" * 16,
        root=tmp_path / "results",
    )
    _, value = records.load(saved)
    loaded = value["profile"]
    assert isinstance(loaded, trace.Profile)
    assert loaded.intervals == original.intervals and loaded.steps == 2
    copied = Path(loaded.chrome_trace.path)
    assert copied.parent == saved.parent and copied != source
    assert copied.name.endswith(".trace.json.gz")
    assert copied.read_bytes() == source.read_bytes()
    assert trace.intervals_from_chrome_trace(trace.load_chrome_trace(copied)) == intervals
    assert loaded.select(kind="memcpy", copy_kind="PtoP")[0].dst_device == 1


def test_profile_without_trace_file_round_trips(tmp_path):
    saved = records.save(
        "03_streams_and_overlap",
        "bare",
        trace.Profile(intervals=[iv(0, 1)]),
        fp="0" * 16,
        root=tmp_path,
    )
    _, loaded = records.load(saved)
    assert loaded.chrome_trace is None and loaded.intervals == [iv(0, 1)]


# ---------------------------------------------------------------- timeline


def test_timeline_lanes_axis_and_legend(intervals):
    ax = plotting.timeline(intervals, title="sample - test machine")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [
        "GPU 0: default stream",
        "GPU 0: stream 13",
        "GPU 0: stream 20",
        f"host thread {TID}: CUDA runtime calls",
    ]
    named = plotting.timeline(intervals, title="t", stream_names={13: "side", 20: "s_1"})
    assert [t.get_text() for t in named.get_yticklabels()][:3] == [
        "GPU 0: default stream",
        "GPU 0: side",
        "GPU 0: s_1",
    ]
    with pytest.raises(TypeError, match="stream_names"):
        plotting.timeline(intervals, title="t", stream_names={"side": 13})
    assert ax.get_xlabel() == "time (us)"
    assert ax.get_xlim()[0] == 0
    assert ax.get_title() == "sample - test machine"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for wanted in (
        "kernel",
        "copy HtoD (host to GPU)",
        "copy DtoH (GPU to host)",
        "copy PtoP (GPU to GPU)",
        "CUDA runtime call",
        "host waits (synchronize)",
    ):
        assert wanted in legend
    assert "memset" not in legend  # only what is drawn
    assert all(t.get_fontsize() == 8 for t in ax.get_legend().get_texts())
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # the key sits right of the slices, not over them
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_timeline_draws_named_host_ranges_in_lanes_of_their_own(intervals):
    ranges = [
        Interval(kind="annotation", name="S1 copy", start_us=T0 + 10, end_us=T0 + 40),
        Interval(kind="annotation", name="S0 compute", start_us=T0 + 20, end_us=T0 + 60),
        Interval(
            kind="annotation", name="on the GPU", start_us=T0, end_us=T0 + 9, device=0, stream=7
        ),
    ]
    ax = plotting.timeline(
        intervals + ranges, title="t", ranges=["S0 compute", "S1 copy", "absent"]
    )
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-2:] == ["host range: S0 compute", "host range: S1 copy"]
    assert "host range (record_function / nvtx)" in [
        t.get_text() for t in ax.get_legend().get_texts()
    ]
    without = plotting.timeline(intervals + ranges, title="t")
    assert not any("range" in t.get_text() for t in without.get_yticklabels())


def test_timeline_without_host_and_in_ms(intervals):
    long = intervals + [
        Interval(
            kind="kernel", name="long", start_us=T0 + 5000, end_us=T0 + 9000, device=1, stream=7
        )
    ]
    fig, ax = plt.subplots()
    out = plotting.timeline(long, title="t", ax=ax, include_host=False)
    assert out is ax
    assert ax.get_xlabel() == "time (ms)"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == "GPU 1: default stream" and not any("host" in s for s in labels)
    assert plotting.timeline(long, title="t", unit="us").get_xlabel() == "time (us)"


def test_timeline_accepts_a_profile(intervals):
    ax = plotting.timeline(trace.Profile(intervals=intervals), title="t")
    assert len(ax.get_yticklabels()) == 4


def test_timeline_bad_input(intervals):
    with pytest.raises(ValueError, match="empty"):
        plotting.timeline([], title="t")
    with pytest.raises(TypeError):
        plotting.timeline("trace.json", title="t")
    with pytest.raises(TypeError):
        plotting.timeline([{"name": "x"}], title="t")
    with pytest.raises(TypeError, match="title"):
        plotting.timeline(intervals, title=None)
    with pytest.raises(ValueError, match="unit"):
        plotting.timeline(intervals, title="t", unit="s")
    ops_only = trace.select(intervals, kind="op")
    with pytest.raises(
        ValueError,
        match=r"^timeline found no GPU work \(kernels, copies, memsets\) and no runtime calls to "
        "draw: pass the intervals of a profile that ran CUDA work$",
    ):
        plotting.timeline(ops_only, title="t")


# ---------------------------------------------------------------- real recorded traces


@pytest.mark.parametrize("path", REAL_TRACES, ids=[str(p.relative_to(REPO)) for p in REAL_TRACES])
def test_recorded_traces_parse(path):
    intervals = trace.intervals_from_chrome_trace(trace.load_chrome_trace(path))
    assert intervals, f"{path} holds no intervals"
    check_invariants(intervals)


def test_real_h100_trace_fixture():
    """A trace recorded on an H100 with torch 2.11 (tests/fixtures): one step of a pinned H2D copy on a
    side stream, a matmul, a pageable H2D copy inside an nvtx range, a D2H copy to pageable memory."""
    path = REPO / "tests" / "fixtures" / "h100_copies_kernel_nvtx.trace.json.gz"
    intervals = trace.intervals_from_chrome_trace(trace.load_chrome_trace(path))
    copies = trace.select(intervals, kind="memcpy")
    pinned = [c for c in copies if c.src_memory == "Pinned"]
    pageable = [c for c in copies if c.copy_kind == "HtoD" and c.src_memory == "Pageable"]
    d2h = trace.select(copies, copy_kind="DtoH")
    assert len(pinned) == 1 and pinned[0].nbytes == 32 * 2**20 and pinned[0].copy_kind == "HtoD"
    assert len(pageable) == 1 and d2h and d2h[0].dst_memory == "Pageable"
    kernels = trace.select(intervals, kind="kernel")
    assert any("gemm" in k.name for k in kernels)
    assert pinned[0].stream != pageable[0].stream == kernels[0].stream
    # the pinned copy's host call joins to it by correlation id
    call = next(
        i for i in intervals if i.kind == "runtime" and i.correlation == pinned[0].correlation
    )
    assert call.name == "cudaMemcpyAsync" and trace.gpu_work_of(intervals, call) == [pinned[0]]
    # the pageable copy holds the host in cudaMemcpyAsync for about as long as it runs
    host = next(
        i for i in intervals if i.kind == "runtime" and i.correlation == pageable[0].correlation
    )
    assert host.duration_us > 0.5 * pageable[0].duration_us
    assert trace.select(intervals, kind="annotation", name="nvtx_range") or trace.select(
        intervals, name="my_range"
    )


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_gpu_pinned_copy_on_a_side_stream_next_to_a_kernel():
    host = torch.ones(4 * 2**20, dtype=torch.float32).pin_memory()  # 16 MiB
    dest = torch.empty_like(host, device="cuda")
    a = torch.randn(2048, 2048, device="cuda")
    side = torch.cuda.Stream()

    def step():
        with torch.cuda.stream(side):
            dest.copy_(host, non_blocking=True)
        a @ a
        torch.cuda.synchronize()

    prof = trace.profile(step, name="gpu_side_stream")
    check_invariants(prof.intervals)
    copies = prof.select(kind="memcpy", copy_kind="HtoD")
    assert len(copies) == prof.steps, [c.name for c in copies]
    kernel_streams = {k.stream for k in prof.select(kind="kernel")}
    assert kernel_streams
    calls = prof.select(kind="runtime", name="cudaMemcpyAsync")
    for c in copies:
        assert (c.src_memory, c.dst_memory) == ("Pinned", "Device")
        assert c.nbytes == host.nbytes
        assert c.device == torch.cuda.current_device()
        assert c.stream not in kernel_streams
        launchers = [call for call in calls if trace.gpu_work_of(prof.intervals, call) == [c]]
        assert len(launchers) == 1 and launchers[0].thread is not None
    assert Path(prof.chrome_trace.path).is_file()


@pytest.mark.gpu
def test_gpu_pageable_copy_blocks_the_host():
    host = torch.ones(4 * 2**20, dtype=torch.float32)  # 16 MiB, pageable

    def step():
        host.to("cuda")
        torch.cuda.synchronize()

    prof = trace.profile(step, name="gpu_pageable")
    copies = prof.select(kind="memcpy", copy_kind="HtoD")
    assert copies and all(c.src_memory == "Pageable" for c in copies)
    assert sum(c.nbytes for c in copies) == prof.steps * host.nbytes  # the driver may split it
    assert trace.host_blocked_us(prof.intervals, "cudaMemcpyAsync") > 0
