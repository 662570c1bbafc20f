"""The programs people point at nccl-tests' and nvbandwidth's output read datamove's output.

Their parsers are kept under tests/fixtures/consumers/ with their licences (README.md there names
each source and commit): superbench's nccl-bw benchmark (``_process_raw_result``), nccl-tests'
``tools/analyze_perf_json.py``, DCGM's nvbandwidth result parser (a Python port), and FlagPerf's
``grep "# Avg bus bandwidth" | awk '{print $NF}'``. Each is fed a real log of the tool and
datamove's output (gloo ranks on this CPU where the measurement runs without a GPU, else
datamove's formatter given rows), and must give the fields datamove's own JSON holds.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from helpers import cli, distributed
from helpers.cli import nccl_tests_format, nvbandwidth_cmd

CONSUMERS = Path(__file__).parent / "fixtures" / "consumers"
SUPERBENCH_OPS = {  # superbench's --operation for each datamove op (its nccl-tests binaries)
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "broadcast": "broadcast",
    "all_to_all": "alltoall",
}


def datamove(capsys, *argv: str) -> tuple[int, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().out


# ---------------------------------------------------------------- superbench's nccl-bw parser


def _superbench_class() -> Any:
    """superbench's CudaNcclBwBenchmark from the kept file, its package's imports stubbed."""
    stubs = {
        "superbench": types.ModuleType("superbench"),
        "superbench.common": types.ModuleType("superbench.common"),
        "superbench.common.utils": types.ModuleType("superbench.common.utils"),
        "superbench.benchmarks": types.ModuleType("superbench.benchmarks"),
        "superbench.benchmarks.micro_benchmarks": types.ModuleType("micro_benchmarks"),
    }
    stubs["superbench.common.utils"].logger = types.SimpleNamespace(  # type: ignore[attr-defined]
        error=lambda *a, **k: None, info=lambda *a, **k: None
    )
    stubs["superbench.benchmarks"].BenchmarkRegistry = types.SimpleNamespace(  # type: ignore[attr-defined]
        register_benchmark=lambda *a, **k: None
    )
    stubs["superbench.benchmarks"].Platform = types.SimpleNamespace(CUDA="cuda", ROCM="rocm")  # type: ignore[attr-defined]
    stubs["superbench.benchmarks"].ReturnCode = types.SimpleNamespace(INVALID_ARGUMENT=1)  # type: ignore[attr-defined]
    stubs["superbench.benchmarks.micro_benchmarks"].MicroBenchmarkWithInvoke = object  # type: ignore[attr-defined]
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        path = CONSUMERS / "superbench" / "cuda_nccl_bw_performance.py"
        spec = importlib.util.spec_from_file_location("superbench_nccl_bw", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module.CudaNcclBwBenchmark


def superbench_reads(raw: str, operation: str, in_place: bool = False) -> dict[str, float] | None:
    """superbench's ``_process_raw_result`` on ``raw``: the results it adds, None where it fails."""
    bench = object.__new__(_superbench_class())
    added: dict[str, float] = {}
    bench._args = types.SimpleNamespace(operation=operation, in_place=in_place, log_raw_data=False)
    bench._result = types.SimpleNamespace(
        add_raw_data=lambda *a: None, add_result=lambda k, v: added.__setitem__(k, v)
    )
    bench._curr_run_index, bench._name = 0, "nccl-bw"
    return added if bench._process_raw_result(0, raw) else None


def _expected_by_superbench(doc: dict[str, Any], operation: str, group: str) -> dict[str, float]:
    """What superbench should read from datamove's text, from datamove's JSON of the same run."""
    expected = {}
    for row in doc["results"]:
        g = row[group]
        name = f"{operation}_{row['size']}_"
        expected[name + "busbw"] = float(nccl_tests_format.float_str(g["bus_bw"], 6))
        expected[name + "algbw"] = float(nccl_tests_format.float_str(g["alg_bw"], 6))
        expected[name + "time"] = float(nccl_tests_format.time_str(g["time"]))
    return expected


def test_superbench_reads_a_real_nccl_tests_log():
    log = (CONSUMERS / "superbench" / "nccl_allreduce.log").read_text()
    out = superbench_reads(log, "allreduce")
    inside = superbench_reads(log, "allreduce", in_place=True)
    assert out is not None and inside is not None
    assert out["allreduce_8388608_busbw"] == 90.63 and out["allreduce_8388608_time"] == 162.0
    assert inside["allreduce_8388608_busbw"] == 91.77 and inside["allreduce_8388608_time"] == 160.0


@pytest.mark.parametrize("op", distributed.COLLECTIVE_OPS)
def test_superbench_reads_datamove_collectives_under_gloo(capsys, tmp_path, op):
    """One op a run, as superbench runs its binaries with its own flags (-c -n -w -G 0 -d float).
    Both groups where gloo times both; where it cannot (placement_refused), superbench fails on
    that group's N/A as it would on any unusable log, and reads the other."""
    path = tmp_path / "run.json"
    code, text = datamove(
        capsys,
        "collectives",
        "--backend",
        "gloo",
        "--ops",
        op,
        *("-b", "1K", "-e", "16K", "-f", "4", "-c", "1", "-n", "2", "-w", "1"),
        *("-G", "0", "-d", "float", "--samples", "2", "-J", str(path)),
    )
    doc = json.loads(path.read_text())
    assert code == 0 and text.count("# Collective test starting") == 1
    operation = SUPERBENCH_OPS[op]
    for group, in_place in (("out_of_place", False), ("in_place", True)):
        read = superbench_reads(text, operation, in_place)
        why = distributed.placement_refused(op, group, "gloo")
        if why is None:
            assert read == _expected_by_superbench(doc, operation, group), text
        else:
            assert read is None and all(r[group] is None for r in doc["results"])
            assert f"# Not measured         : {group}: {why}" in text


def _formatted_run(op: str, groups: tuple[str, ...]) -> tuple[str, list[dict[str, Any]]]:
    """nccl-tests' text for ``op`` from datamove's formatter, given made-up times for ``groups``
    (the NCCL path, where every op's both groups are measured, needs GPUs)."""
    device = {"rank": 0, "pid": 1, "hostname": "node", "device": 0, "pci": [0, 0x19, 0]}
    rows = []
    for k, size in enumerate((1024, 1 << 20, 1 << 30)):
        seconds = 20e-6 + size / 300e9
        rows.append(
            nccl_tests_format.result(
                op,
                size,
                2,
                20,
                {
                    g: nccl_tests_format.group_result(op, size, seconds * (1 + k / 10), 0, 2)
                    for g in groups
                },
            )
        )
    header = nccl_tests_format.header_lines(
        op=op,
        world=2,
        min_bytes=1024,
        max_bytes=1 << 30,
        step="1024(factor)",
        warmup=5,
        iters=20,
        check=1,
        graph=0,
        per_iter=False,
        per_iter_skip=0,
        devices=[{**device, "name": "GPU"}, {**device, "rank": 1, "device": 1, "name": "GPU"}],
        version="test",
        note="formatter test",
    )
    lines = header + [nccl_tests_format.row_line(r) for r in rows]
    return "\n".join(lines + nccl_tests_format.trailer_lines(op, rows)), rows


@pytest.mark.parametrize("op", ["all_reduce", "broadcast"])
def test_superbench_reads_both_groups_of_the_nccl_rows_datamove_prints(op):
    text, rows = _formatted_run(op, nccl_tests_format.GROUPS)
    doc = {"results": rows}
    for group, in_place in (("out_of_place", False), ("in_place", True)):
        read = superbench_reads(text, SUPERBENCH_OPS[op], in_place)
        assert read == _expected_by_superbench(doc, SUPERBENCH_OPS[op], group)


def test_superbench_reads_both_groups_of_every_op_datamove_measured_on_two_gpus():
    """datamove's own output from 2xH200 (NCCL: both groups of every op measured), one block
    per op as separate runs print them: superbench reads each group as datamove's JSON has it."""
    folder = Path(__file__).parent / "fixtures" / "datamove_collectives_2xH200"
    docs = json.loads((folder / "collectives.json").read_text())
    blocks = (folder / "collectives.log").read_text().split("# Writing JSON output to")[1:]
    ops = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
    assert len(blocks) == len(docs) == len(ops)
    for op, block, doc in zip(ops, blocks, docs, strict=True):
        rows = [line for line in block.splitlines()[1:] if line[:1] == " "]
        assert f"# Collective test starting: {op}_perf" in block
        assert len(rows) == 28 and not any("N/A" in row for row in rows)
        for group, in_place in (("out_of_place", False), ("in_place", True)):
            read = superbench_reads(block, SUPERBENCH_OPS[op], in_place)
            assert read == _expected_by_superbench(doc, SUPERBENCH_OPS[op], group)
            assert len(read) == 3 * 28  # busbw, algbw, time at each of 28 sizes, 8 B to 1 GiB


# ---------------------------------------------------------------- FlagPerf's grep


def test_flagperf_grep_finds_one_average_in_a_one_op_run(capsys, tmp_path):
    """FlagPerf: ``grep "# Avg bus bandwidth" | awk '{print $NF}'`` on a run's log."""
    path = tmp_path / "run.json"
    code, text = datamove(
        capsys,
        *("collectives", "--backend", "gloo", "--sizes", "1KiB,8KiB"),
        *("-n", "2", "-w", "1", "--samples", "2", "-J", str(path)),
    )
    log = tmp_path / "run.log"
    log.write_text(text)
    grep = subprocess.run(
        ["bash", "-c", f"grep '# Avg bus bandwidth' {log} | awk '{{print $NF}}'"],
        capture_output=True,
        text=True,
        check=True,
    )
    average = json.loads(path.read_text())["average_bus_bandwidth"]["bandwidth"]
    assert code == 0 and grep.stdout.splitlines() == [f"{average:g}"]


# ---------------------------------------------------------------- nccl-tests' analyze_perf_json.py


def _analyze(path: Path, *flags: str) -> str:
    script = CONSUMERS / "nccl_tests" / "analyze_perf_json.py"
    done = subprocess.run(
        [sys.executable, str(script), str(path), *flags], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _stats_rows(report: str) -> dict[int, list[float]]:
    """The PER-ITERATION STATS table: size -> [avg, i_min, i_max, p99, cv%]."""
    rows = {}
    for line in report.splitlines():
        cells = line.replace("%", "").replace("x", "").replace("***", "").split()
        if len(cells) == 7 and cells[0].isdigit():
            rows[int(cells[0])] = [float(c) for c in cells[1:6]]
    return rows


def _expected_stats(doc: dict[str, Any], key: str) -> dict[int, list[float]]:
    return {
        r["size"]: [round(r[key][k], 1) for k in ("avg_us", "min_us", "max_us", "p99_us", "cv_pct")]
        for r in doc["results"]
        if key in r
    }


def test_analyze_perf_json_reads_datamove_per_iteration_json(capsys, tmp_path):
    path = tmp_path / "all_gather.json"
    code, _ = datamove(
        capsys,
        *("collectives", "--backend", "gloo", "--ops", "all_gather", "--sizes", "1KiB,16KiB"),
        *("-n", "6", "-w", "1", "--samples", "2", "-I", "1", "-K", "1", "-J", str(path)),
    )
    doc = json.loads(path.read_text())
    assert code == 0 and doc["config"]["per_iter_timing"] == "true"
    for key, flags in (("out_of_place_per_iter", ()), ("in_place_per_iter", ("--in-place",))):
        report = _analyze(path, *flags)
        assert "Results:    2" in report and "Iterations: 6" in report
        assert "Summary skip: 1 leading iterations" in report
        read, expected = _stats_rows(report), _expected_stats(doc, key)
        assert read.keys() == expected.keys()
        assert all(read[k] == pytest.approx(expected[k], abs=0.051) for k in read)
        assert all(len(r[key]["times_us"]) == 6 for r in doc["results"])


def test_analyze_perf_json_reads_nccl_tests_per_iteration_json(tmp_path):
    """A JSON as nccl-tests' writer makes it with ``-I 1`` (src/util.cu ``writePerIterReport``;
    no public -I log to fetch, so built here from that code's keys): the same table."""
    times = [30.0, 21.0, 20.0, 22.0, 20.5]
    stats = nccl_tests_format.per_iter_stats([t / 1e6 for t in times], 0)
    doc = {
        "version": 3,
        "config": {"iterations": 5, "aggregated_iterations": 1, "per_iter_skip": 0},
        "results": [{"size": 8, "out_of_place_per_iter": stats}],
    }
    path = tmp_path / "nccl_tests.json"
    path.write_text(json.dumps(doc))
    report = _analyze(path)
    assert _stats_rows(report) == {8: [22.7, 20.0, 30.0, 30.0, 16.3]}
    # computeIterStats by hand: sorted[n / 2], percentileIndex(5, 95) = 4, population stdev
    assert (stats["p50_us"], stats["p95_us"], stats["p99_us"]) == pytest.approx((21.0, 30.0, 30.0))
    assert stats["stdev_us"] == pytest.approx(math.sqrt(13.76)) and stats["skipped_iterations"] == 0


# ---------------------------------------------------------------- DCGM's nvbandwidth parser


def _dcgm() -> Any:
    path = CONSUMERS / "dcgm_nvbandwidth" / "nvbandwidth_result.py"
    spec = importlib.util.spec_from_file_location("dcgm_nvbandwidth_result", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dcgm_reads_a_real_nvbandwidth_json():
    doc = json.loads(
        (CONSUMERS / "dcgm_nvbandwidth" / "nvbandwidth_verbose_output.json").read_text()
    )
    result = _dcgm().parse_result(doc)
    assert result is not None and result.cudaRuntimeVersion == 12070
    assert result.driverVersion == "565.02" and len(result.testCases) == 32
    h2d = result.testCases[0]
    assert (h2d.name, h2d.status, h2d.bandwidthMatrix) == (
        "host_to_device_memcpy_ce",
        "PASSED",
        [[12.3964]],
    )
    assert h2d.sum == pytest.approx(12.396361291250001)


def test_dcgm_reads_datamove_nvbandwidth_json_for_every_testcase():
    """Every testcase datamove offers, from its JSON writer given matrices of 2 GPUs (measuring
    them needs GPUs): DCGM's parser accepts the document and reads back each testcase's status,
    sum, description, min/max/average (-v) and matrix (N/A as NaN; the bidirectional testcase's
    three matrices one after another, as nvbandwidth's writer appends them)."""
    facts = {
        "version": "datamove test",
        "git_version": "test",
        "runtime": 12080,
        "cuda_driver": 12080,
        "driver": "570.124.06",
        "host": "node",
        "devices": [
            "NVIDIA H100 80GB HBM3 (00000000:19:00)",
            "NVIDIA H100 80GB HBM3 (00000000:3b:00)",
        ],
    }
    host = [[55.1, 55.3]]
    pair = [[None, 389.7], [390.2, None]]
    matrices = {
        "host_to_device_memcpy_ce": [host],
        "device_to_host_memcpy_ce": [host],
        "device_to_device_memcpy_write_ce": [pair],
        "device_to_device_bidirectional_memcpy_write_ce": [
            pair,
            pair,
            [[None, 779.9], [780.4, None]],
        ],
    }
    doc = {
        "nvbandwidth": {
            **nvbandwidth_cmd.json_header(facts),
            "testcases": [
                nvbandwidth_cmd.json_testcase(case, matrices[case.key], verbose=True)
                for case in nvbandwidth_cmd.TESTCASES
            ],
        }
    }
    result = _dcgm().parse_result(json.loads(json.dumps(doc)))
    assert result is not None and (result.cudaRuntimeVersion, result.driverVersion) == (
        12080,
        "570.124.06",
    )
    for case, read in zip(nvbandwidth_cmd.TESTCASES, result.testCases, strict=True):
        ours = matrices[case.key]
        assert (read.name, read.status, read.bandwidthDescription) == (
            case.key,
            "PASSED",
            case.description,
        )
        assert read.sum == pytest.approx(nvbandwidth_cmd.matrix_sum(ours[-1]))
        assert (read.min, read.max, read.avg) == pytest.approx(
            nvbandwidth_cmd.matrix_stats(ours[-1])
        )
        flat = [v for m in ours for row in m for v in row]
        got = [v for row in read.bandwidthMatrix for v in row]
        assert len(got) == len(flat)
        assert all(
            math.isnan(g) if v is None else g == pytest.approx(v)
            for g, v in zip(got, flat, strict=True)
        )
