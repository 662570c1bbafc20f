"""Tests of ``datamove`` (helpers/cli/) and the machine facts it reads (helpers/hardware/).

On the CPU: help texts, sizes, errors (one line, exit 2), doctor, JSON/CSV shapes with injected
measurements, the copies composed call for call as notebooks 01 and 05 compose them, check
against a doctored baseline, gloo collectives spawned here and across two torchrun "nodes" on
localhost. On GPUs (``gpu`` / ``gpu2``): h2d against a plain ``tensor.to('cuda')``, collectives'
all_reduce busbw at 1 GiB.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import importlib.metadata
import io
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from helpers import cli, config, distributed, experiments, hardware, records, timing
from helpers.cli import (
    cli_args,
    cli_output,
    collectives_cmd,
    copy_cmds,
    doctor,
    nccl_tests_format,
    notebooks_cmd,
    nvbandwidth_cmd,
    record_check,
    topo,
)
from helpers.hardware import health

ROOT = Path(__file__).resolve().parent.parent
MiB, GiB = 2**20, 2**30


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``datamove argv`` in this process: (exit status, stdout, stderr)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as stop:  # argparse: --help, bad arguments
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- help and arguments


def test_every_subcommand_has_a_help_that_says_what_it_does(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("doctor", "h2d", "d2h", "p2p", "collectives", "record", "check"):
        assert command in out
        code, text, _ = run(capsys, command, "--help")
        assert code == 0 and "usage: datamove " + command in text, command
        assert len(text.split("\n\n")[1]) > 80, f"{command}'s description says too little"
    assert "nccl-tests" in run(capsys, "collectives", "--help")[1]
    assert "timed exactly as notebook 01 does" in " ".join(run(capsys, "h2d", "--help")[1].split())


def test_the_console_script_is_cli_main():
    import tomllib

    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["datamove"]
    assert script == "helpers.cli:main"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["cli"]
    assert {e.split(">")[0] for e in extras} == {"tqdm", "nvidia-ml-py"}
    help_text = subprocess.run(
        [sys.executable, "-m", "helpers.cli", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: datamove")


@pytest.mark.parametrize(
    "text, nbytes",
    [
        ("4096", 4096),
        ("4KiB", 4096),
        ("64MiB", 64 * MiB),
        ("1GiB", GiB),
        ("1GB", 10**9),
        ("2 kb", 2000),
        ("512B", 512),
        ("1gib", GiB),
    ],
)
def test_sizes_take_bytes_binary_and_decimal_units(text, nbytes):
    assert cli_args.parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "4XB", "-4", "1.5GiB", "0", "GiB", "4 KiBs"])
def test_a_bad_size_is_a_value_error_that_says_what_to_pass(text):
    with pytest.raises(ValueError, match="pass bytes"):
        cli_args.parse_size(text)


def test_size_ranges_and_lists():
    assert cli_args.parse_sizes("4KiB:1MiB") == [4096, 16384, 65536, 262144, MiB]
    assert cli_args.parse_sizes("1KiB:8KiB:2") == [1024, 2048, 4096, 8192]
    assert cli_args.parse_sizes("4KiB,64MiB") == [4096, 64 * MiB]
    for bad in ("1MiB:4KiB", "1KiB:1MiB:1", "1:2:3:4", ""):
        with pytest.raises(ValueError):
            cli_args.parse_sizes(bad)


def test_tolerances_and_ops():
    assert (
        cli_args.parse_tolerance("5%") == pytest.approx(0.05)
        and cli_args.parse_tolerance("0.1") == 0.1
    )
    for bad in ("5", "100%", "-1%", "five"):
        with pytest.raises(ValueError, match="e.g. 5%"):
            cli_args.parse_tolerance(bad)
    assert cli_args.parse_ops("all") == list(distributed.COLLECTIVE_OPS)
    assert cli_args.parse_ops("all_reduce, broadcast") == ["all_reduce", "broadcast"]
    with pytest.raises(ValueError, match="unknown collective allreduce"):
        cli_args.parse_ops("allreduce")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["h2d", "--sizes", "4XB"], "'4XB' is not a size"),
        (["d2h", "--sizes", "1MiB:4KiB"], "below the smallest"),
        (["collectives", "--ops", "all_reduce,allgather"], "unknown collective allgather"),
        (["check", "--tolerance", "5"], "is not a tolerance"),
        (["collectives", "--nproc", "0"], "'0' is not a whole number >= 1"),
        (["collectives", "--samples", "-2"], "is not a whole number >= 1"),
        (["collectives", "--backend", "gloo", "--sizes", "100"], "not a multiple of 4 x 2 ranks"),
        (
            ["h2d", "--sizes", "4KiB"] if hardware.gpu_count() < 1 else ["h2d", "--sizes", "4098"],
            "needs 1 CUDA GPU" if hardware.gpu_count() < 1 else "whole 4-byte words",
        ),
        (["p2p"], "needs 2 CUDA GPU(s)"),
        (["record"], "no NVIDIA driver"),
    ],
)
def test_a_request_that_cannot_be_served_is_one_line_and_exit_2(capsys, argv, words):
    if (
        argv == ["p2p"]
        and hardware.gpu_count() >= 2
        or argv == ["record"]
        and hardware.driver_present()
    ):
        pytest.skip("this machine can serve it")
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err, err


# ---------------------------------------------------------------- output shapes (measurements injected)


def _fake_timing(nbytes: int, seconds: float = 1e-3, label: str = "H2D pinned") -> timing.Timing:
    return timing.Timing(
        [seconds * 0.99, seconds, seconds * 1.02], "cuda events", nbytes, label, 4, 1
    )


@pytest.fixture
def fake_copies(monkeypatch):
    """h2d/d2h without a GPU: the measurement and the machine's facts injected."""
    monkeypatch.setattr(copy_cmds, "need_gpus", lambda n, why="": None)
    monkeypatch.setattr(
        copy_cmds, "host_copy", lambda direction, pinned, n: _fake_timing(n, n / 50e9)
    )
    monkeypatch.setattr(
        copy_cmds,
        "link_of_gpu0",
        lambda: {"gen": 5, "width": 16, "theoretical_gbps": 63.0, "memory_ceiling_gbps": 4800.0},
    )
    monkeypatch.setattr(
        copy_cmds,
        "machine_facts",
        lambda: {
            "machine": "1xFake",
            "gpu": "Fake GPU",
            "driver": "1",
            "torch": "2",
            "cuda": "13.0",
            "nccl": None,
            "date": "d",
        },
    )


def test_h2d_json_has_the_machine_the_link_and_a_row_per_size(capsys, fake_copies):
    code, out, _ = run(capsys, "h2d", "--sizes", "4KiB,256MiB", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["command"] == "h2d" and payload["memory"] == "pinned"
    assert payload["machine"] == "1xFake" and payload["link"]["theoretical_gbps"] == 63.0
    assert [r["size"] for r in payload["rows"]] == [4096, 256 * MiB]
    row = payload["rows"][1]
    assert row["gbps"] == pytest.approx(50.0) and row["link_share"] == pytest.approx(50 / 63)
    assert row["gbps_slowest"] < row["gbps"] < row["gbps_fastest"] and row["calls_per_sample"] == 4


def test_d2h_csv_is_a_header_and_a_line_per_size(capsys, fake_copies):
    code, out, _ = run(capsys, "d2h", "--pageable", "--sizes", "4KiB:64KiB", "--csv")
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].split(",") == list(copy_cmds.COPY_COLUMNS)
    assert [line.split(",")[0] for line in lines[1:]] == ["4 KiB", "16 KiB", "64 KiB"]


def test_the_table_names_the_memory_and_the_link(capsys, fake_copies):
    code, out, _ = run(capsys, "h2d", "--pageable", "--sizes", "1MiB")
    assert code == 0 and "from pageable memory" in out and "PCIe gen 5 x16: raw 63.0 GB/s" in out
    assert "1 MiB" in out and "50.00" in out


def _row(op, nbytes, seconds, wrong, world, groups=("in_place",), **extra):
    """A row of nccl-tests' JSON with ``groups`` measured at ``seconds`` a call (20 calls)."""
    row = nccl_tests_format.result(
        op,
        nbytes,
        world,
        20,
        {g: nccl_tests_format.group_result(op, nbytes, seconds, wrong, world) for g in groups},
    )
    return {**row, **extra}


def test_a_collective_row_has_nccl_tests_fields_and_factors():
    reduce = _row("all_reduce", GiB, 0.01, 0, 4)
    gather = _row("all_gather", GiB, 0.01, 3, 4, nccl_tests_format.GROUPS)
    group = reduce["in_place"]
    assert reduce["out_of_place"] is None and gather["in_place"]["nwrong"] == 3
    assert group["alg_bw"] == pytest.approx(GiB / 0.01 / 1e9)
    assert group["bus_bw"] == pytest.approx(group["alg_bw"] * 2 * 3 / 4)
    assert (reduce["redop"], reduce["root"].strip(), reduce["count"], reduce["type"]) == (
        "sum",
        "-1",
        GiB // 4,
        "float",
    )
    assert (
        gather["count"] == GiB // 4 // 4 and gather["out_of_place"]["nwrong"] == 3
    )  # per-rank count, as nccl-tests
    assert gather["out_of_place"]["bus_bw"] == pytest.approx(
        gather["out_of_place"]["alg_bw"] * 3 / 4
    )
    assert group["time"] == pytest.approx(1e4) and reduce["actual_iterations"] == 20
    assert list(reduce)[-2:] == ["actual_iterations", "experiment_name"]
    line = nccl_tests_format.row_line(gather)
    assert "N/A" not in line and line.split()[5] == "10000.0" and line.split()[9] == "10000.0"
    assert nccl_tests_format.row_line(reduce).split()[5:9] == ["N/A"] * 4


def test_times_print_as_nccl_tests_2_19_prints_them():
    """getFloatStr (src/util.cu): two decimals if they fit in 7 characters, else one, else none."""
    assert [
        nccl_tests_format.time_str(us)
        for us in (13.24, 135.8, 6759.0, 12646.0, 1059765.0, 123456789.0)
    ] == ["  13.24", " 135.80", "6759.00", "12646.0", "1059765", "1.2e+08"]
    assert [nccl_tests_format.float_str(v, 6) for v in (0.004, 329.2, 1234.5, 12345.6)] == [
        "  0.00",
        "329.20",
        "1234.5",
        " 12346",
    ]


def test_progress_line_goes_to_stderr_only_on_a_terminal(capsys):
    quiet = cli_output.Progress("sizes", 2)  # pytest's stderr is no terminal
    quiet.step()
    assert capsys.readouterr().err == ""
    shown = cli_output.Progress("all_reduce", 2, force=True)
    shown.step("all_reduce 1 KiB")
    shown.close()
    err = capsys.readouterr().err
    assert "all_reduce 1 KiB: 1/2 done" in err and err.endswith("\r\x1b[K")


FIXTURE_LOG = ROOT / "tests" / "fixtures" / "nccl_tests_all_reduce_2x8xH100.log"


def test_the_trailer_says_the_spread_and_which_rows_came_out_of_order():
    """nccl-tests has no column for the spread of samples: datamove says it in comment lines of
    the trailer, which nccl-tests' readers skip, with the steps where busbw fell."""
    seconds = {1024: 1e-5, 2048: 1e-5, 4096: 4e-5, 8192: 2e-5}  # 4 KiB is slower than 2 KiB
    rows = []
    for size, spread in zip(seconds, (0.01, 0.3, 0.02, 0.04), strict=True):
        rows.append(
            _row("all_reduce", size, seconds[size], 0, 2, datamove={"spread": spread, "samples": 5})
        )
    lines = nccl_tests_format.trailer_lines("all_reduce", rows)
    assert lines[:4] == [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {nccl_tests_format.summary(rows)[1]:g} ",
        "#",
        "# Collective test concluded: all_reduce_perf",
    ]
    assert lines[-2:] == ["#", ""]  # nccl-tests' finalizeFooter and writeErrors
    assert lines[4] == (
        "# Sample spread        : median 4.0%, at most 30.0% (2048 B); interquartile range "
        "over median of 5 samples a row"
    )
    assert lines[5].startswith(
        "# Out of order         : busbw fell by more than 5% as the size grew at 1 of 3 steps "
        "(most: -50% from 2048 B to 4096 B)"
    )
    assert all(line.startswith("#") for line in lines[:-1])  # comments, as nccl-tests' own
    in_order = [{**r, "in_place": {**r["in_place"], "bus_bw": 1.0 + i}} for i, r in enumerate(rows)]
    assert not any("Out of order" in x for x in nccl_tests_format.trailer_lines("x", in_order))
    plain = [_row("all_reduce", 1024, 1e-5, 0, 2)]
    assert nccl_tests_format.spread_lines(plain) == []


def test_datamove_streams_the_first_gloo_row_before_the_last_in_nccl_tests_format(tmp_path):
    """Rows stream as measured (flushed), in the columns of a real nccl-tests log; -J writes
    nccl-tests' JSON beside it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "0"}
    cmd = [
        sys.executable,
        "-m",
        "helpers.cli",
        "collectives",
        "--backend",
        "gloo",
        "-g",
        "2",
        "--ops",
        "all_reduce,all_gather,broadcast,reduce_scatter",
        "-b",
        "1K",
        "-e",
        "16K",
        "-f",
        "4",
        "-w",
        "1",
        "-n",
        "2",
        "--samples",
        "2",
        "-J",
        str(tmp_path / "out.json"),
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines, done_at_first_row = [], None
    for line in proc.stdout:
        lines.append(line)
        if done_at_first_row is None and line.strip()[:1].isdigit():
            # Order, not seconds: the last op's JSON document (out.json.2, as nccl-tests
            # names a fourth file) is written after its last row is measured, so a first row
            # that was only flushed at the end (not streamed) arrives after it has its contents.
            # Three more ops after the first row leave a reader slowed by a busy machine time.
            out = tmp_path / "out.json.2"
            done_at_first_row = out.exists() and out.stat().st_size > 0
    assert proc.wait(timeout=600) == 0, proc.stderr.read()
    assert done_at_first_row is False, "the first row came only once every row was measured"
    text = "".join(lines)
    assert (
        "# nThread 1 nGpus 2 minBytes 1024 maxBytes 16384 step: 4(factor) warmup iters: 1 iters: 2 "
        in text
    )
    rows = [line.split() for line in lines if line.strip()[:1].isdigit()]
    assert [int(row[0]) for row in rows] == [1024, 4096, 16384] * 4
    real = FIXTURE_LOG.read_text().splitlines()
    real_row = next(line.split() for line in real if line.strip()[:1].isdigit())
    assert all(len(row) == len(real_row) == 13 for row in rows)  # size..root, then 4 per group
    assert rows[0][5:9] == ["N/A"] * 4 and rows[0][12] == "0"  # all_reduce: in place only
    gather = rows[3]  # all_gather: both groups measured under gloo
    assert gather[8] == gather[12] == "0" and float(gather[7]) >= 0
    assert text.count("# Out of bounds values : 0 OK") == 4 and "# Avg bus bandwidth    : " in text
    assert text.count("# Using devices") == 4 and "#  Rank  1 Group  0 Pid" in text
    # one JSON document per op, at -J's path and then path.0, .1, .2, as nccl-tests runs write them
    names = ("out.json", "out.json.0", "out.json.1", "out.json.2")
    docs = [json.loads((tmp_path / name).read_text()) for name in names]
    assert text.count("# Writing JSON output to") == 4
    for doc in docs:
        assert doc["config"]["ngpus"] == 2 and len(doc["results"]) == 3
        assert doc["out_of_bounds"] == {"count": 0, "okay": "true"} and doc["errors"] == []
        assert doc["config"]["devices"][0]["rank"] == 0 and len(doc["config"]["devices"]) == 1
        assert doc["config"]["blocking_collectives"] == "false"
        assert all(r["actual_iterations"] == 2 for r in doc["results"])


def test_the_default_sizes_fit_the_backend():
    args = cli.build_parser().parse_args(["collectives"])
    gloo = collectives_cmd._chosen_sizes(args, "gloo", 2)
    nccl = collectives_cmd._chosen_sizes(args, "nccl", 2)
    assert gloo[-1] == 4 * MiB and nccl[-1] == GiB and gloo[0] == nccl[0] == 1024
    args = cli.build_parser().parse_args(
        ["collectives", "-b", "8", "-e", "128M", "-f", "2", "-g", "2"]
    )
    sizes = collectives_cmd._chosen_sizes(args, "nccl", 2)
    assert sizes[0] == 8 and sizes[-1] == 128 * MiB and len(sizes) == 25


def test_rank_counts_are_powers_of_two_then_every_gpu():
    assert collectives_cmd.rank_counts(1) == []
    assert collectives_cmd.rank_counts(2) == [2]
    assert collectives_cmd.rank_counts(6) == [2, 4, 6]
    assert collectives_cmd.rank_counts(8) == [2, 4, 8]


def test_version_and_topo_without_a_gpu(capsys, monkeypatch):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("datamove ")
    monkeypatch.setattr(hardware, "driver_present", lambda: False)
    code, out, _ = run(capsys, "topo")
    assert code == 0 and out.startswith("CPU only: no NVIDIA GPU here")


def test_topo_names_links_and_ceilings(monkeypatch):
    assert topo.nvlink_ceiling_gbps("NV18", "NVIDIA H100 80GB HBM3") == 450.0
    assert topo.nvlink_ceiling_gbps("SYS", "NVIDIA H100 80GB HBM3") is None
    facts = {
        "source": "NVML",
        "links": [["X", "NV18"], ["NV18", "X"]],
        "ceilings_gbps": [[None, 450.0], [450.0, None]],
        "gpus": [
            {
                "index": i,
                "name": "H100",
                "bus_id": f"0000:0{i}:00.0",
                "pcie": "gen 5 x16",
                "pcie_gbps": 63.0,
                "numa": i,
            }
            for i in range(2)
        ],
    }
    text = topo.topo_text(facts)
    assert (
        "NV18 450" in text
        and "GPU1 H100  0000:01:00.0  PCIe gen 5 x16 (63.0 GB/s one way)  NUMA node 1" in text
    )


# ---------------------------------------------------------------- the notebooks' own experiments


def test_h2d_and_d2h_run_notebook_01s_saved_timed_copy_with_its_samples(monkeypatch):
    """h2d/d2h call notebook 01's timed_copy (its #@save cell, helpers/experiments.py) with the
    samples copy_bandwidth takes at that size."""
    calls = []
    monkeypatch.setattr(
        experiments,
        "timed_copy",
        lambda n, direction, pinned, repeats: (
            calls.append((n, direction, pinned, repeats)) or _fake_timing(n)
        ),
    )
    copy_cmds.host_copy("h2d", True, 4096)
    copy_cmds.host_copy("d2h", False, copy_cmds.LARGE_BYTES)
    assert calls == [
        (4096, "h2d", True, copy_cmds.REPEATS_SMALL),
        (copy_cmds.LARGE_BYTES, "d2h", False, copy_cmds.REPEATS_LARGE),
    ]


def test_the_command_line_takes_the_notebooks_full_size_params():
    def params(notebook, name):
        return records.experiments_in_notebook(ROOT / "notebooks" / f"{notebook}.ipynb")[
            name
        ].params

    copies = params("01_pinned_memory", "copy_bandwidth")
    assert (copy_cmds.REPEATS_SMALL, copy_cmds.REPEATS_LARGE) == (
        copies["repeats_small"],
        copies["repeats_large"],
    )
    assert copy_cmds.P2P_REPEATS == params("05_device_to_device", "peer_copy_bandwidth")["repeats"]
    latency = params("05_device_to_device", "peer_copy_latency")
    assert (copy_cmds.LATENCY_REPEATS, copy_cmds.LATENCY_CALLS) == (
        latency["repeats"],
        latency["calls"],
    )
    assert copy_cmds.LATENCY_BYTES in latency["sizes"]
    collectives = params("06_nccl_point_to_point_and_collectives", "bandwidth")
    assert (
        collectives_cmd.COLLECTIVE_WARMUP,
        collectives_cmd.COLLECTIVE_ITERS,
        collectives_cmd.COLLECTIVE_SAMPLES,
    ) == (collectives["warmup"], collectives["iters"], collectives["samples"])


def test_p2p_runs_notebook_05s_saved_experiments_with_its_params(monkeypatch, capsys):
    """The peer matrices come from notebook 05's own experiments (helpers/experiments.py, its
    #@save cells), called with the notebook's full-size params, and are laid out pair by pair."""
    called = {}

    def fake(name, keys, rate):
        def experiment(**kwargs):
            called[name] = kwargs
            return {
                key: [_fake_timing(kwargs["sizes"][0], kwargs["sizes"][0] / rate)] for key in keys
            }

        return experiment

    monkeypatch.setattr(hardware, "gpu_count", lambda: 2)
    monkeypatch.setattr(hardware, "peer_access", lambda: [[True, True], [True, True]])
    monkeypatch.setattr(copy_cmds, "machine_facts", lambda: {"gpu": "FAKE", "gpus": 2})
    monkeypatch.setattr(experiments, "peer_copy_bandwidth", fake("one", ["0->1", "1->0"], 300e9))
    monkeypatch.setattr(experiments, "peer_copy_both_ways", fake("both", ["0<->1"], 600e9))
    monkeypatch.setattr(
        experiments, "peer_copy_latency", fake("latency", ["0->0", "0->1", "1->0", "1->1"], 1e6)
    )
    assert cli.main(["p2p", "--size", "64MiB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    params = records.experiments_in_notebook(ROOT / "notebooks" / "05_device_to_device.ipynb")
    assert called["one"] == {
        "sizes": [64 * 2**20],
        "repeats": params["peer_copy_bandwidth"].params["repeats"],
    }
    assert called["both"] == {
        "sizes": [64 * 2**20],
        "repeats": params["peer_copy_both_ways"].params["repeats"],
    }
    latency = params["peer_copy_latency"].params
    assert called["latency"] == {
        "sizes": [copy_cmds.LATENCY_BYTES],
        "repeats": latency["repeats"],
        "calls": latency["calls"],
    }
    assert (
        out["unidirectional_gbps"][0][1] == pytest.approx(300)
        and out["unidirectional_gbps"][0][0] is None
    )
    assert out["bidirectional_gbps"][1][0] == pytest.approx(600)
    assert out["latency_us"][1][1] == pytest.approx(copy_cmds.LATENCY_BYTES / 1e6 * 1e6)


class _Copied(torch.Tensor):
    """A tensor that notes each copy into it: (into, from, non_blocking), by the device its buffer
    was asked for ("data" for a plain tensor); ``fault``: the copies between buffers deliver
    "wrong" bytes or "nothing"."""

    copies: list[tuple[str, str, bool]] = []
    fault: str | None = None

    def copy_(self, src, non_blocking=False):
        where = getattr(src, "asked_for", "data")
        _Copied.copies.append((self.asked_for, where, non_blocking))
        if _Copied.fault == "nothing" and where != "data":
            return self
        super().copy_(src, non_blocking=non_blocking)
        return self.add_(1) if _Copied.fault == "wrong" and where != "data" else self


class _CpuGpus:
    """``torch`` for helpers/experiments.py on this CPU: two "GPUs" whose tensors live on the CPU;
    each buffer's device and pinning, each device and stream entered, and the timers' arguments
    are noted. Only the CUDA calls are faked: the experiments' own logic runs as it is."""

    def __init__(self, monkeypatch):
        self.made, self.entered, self.streams, self.timed = [], [], [], []
        _Copied.copies, _Copied.fault = [], None
        fake_cuda = types.SimpleNamespace(
            device_count=lambda: 2,
            device=self._enter,
            Stream=self._stream,
            stream=self._enter,
        )
        monkeypatch.setattr(experiments, "torch", self)
        self.cuda = fake_cuda
        for clock in ("cuda_events", "host_clock"):
            monkeypatch.setattr(timing, clock, self._timer(clock))

    def __getattr__(self, name):
        return getattr(torch, name)

    def _made(self, tensor, **noted):
        self.made.append(noted | {"dtype": tensor.dtype})
        made = tensor.as_subclass(_Copied)
        made.asked_for = noted["device"]
        return made

    def zeros(self, n, dtype=None, device="cpu", pin_memory=False):
        return self._made(torch.zeros(n, dtype=dtype), device=device, pinned=pin_memory)

    def randint(self, low, high, shape, dtype=None, device="cpu"):
        return self._made(torch.randint(low, high, shape, dtype=dtype), device=device)

    def empty(self, n, dtype=None, device="cpu"):
        return self._made(torch.empty(n, dtype=dtype), device=device)

    def empty_like(self, like):
        return self._made(torch.empty_like(like.as_subclass(torch.Tensor)), device=like.asked_for)

    def _enter(self, what):
        self.entered.append(what)
        return contextlib.nullcontext()

    def _stream(self, device):
        stream = types.SimpleNamespace(device=device, waits=[])
        stream.wait_stream = lambda other: stream.waits.append(self.streams.index(other))
        self.streams.append(stream)
        return stream

    def _timer(self, clock):
        def timer(fn, **kwargs):
            for _ in range(2):
                fn()
            self.timed.append((clock, kwargs))
            return kwargs

        return timer


@pytest.mark.parametrize(
    ("direction", "pinned", "clock", "label", "target_s", "extra"),
    [
        ("h2d", True, "cuda_events", "H2D pinned", 1e-3, {"hold_us": "auto"}),
        ("d2h", True, "cuda_events", "D2H pinned", 1e-3, {"hold_us": "auto"}),
        ("h2d", False, "host_clock", "H2D pageable", 2e-3, {}),
        ("d2h", False, "host_clock", "D2H pageable", 2e-3, {}),
    ],
)
def test_timed_copy_queues_pinned_copies_and_blocks_on_pageable_ones(
    monkeypatch, direction, pinned, clock, label, target_s, extra
):
    """Notebook 01: the host buffer is pinned or not as asked; a pinned copy is queued
    (non_blocking) and timed with CUDA events, a pageable one on the host clock; the copy holds
    the data (verify_copy would raise)."""
    fake = _CpuGpus(monkeypatch)
    result = experiments.timed_copy(4096, direction, pinned, 5)
    u8 = torch.uint8
    assert fake.made == [
        dict(device="cpu", pinned=pinned, dtype=u8),
        dict(device="cuda", pinned=False, dtype=u8),
    ]
    assert fake.timed == [
        (clock, dict(repeats=5, target_s=target_s, nbytes=4096, label=label) | extra)
    ]
    assert result == fake.timed[0][1]
    host_to_gpu = ("cuda", "cpu") if direction == "h2d" else ("cpu", "cuda")
    assert _Copied.copies == [(host_to_gpu[1], "data", False)] + [(*host_to_gpu, pinned)] * 2


def test_timed_copy_names_the_directions_it_takes():
    with pytest.raises(ValueError, match=r"^direction is 'h2d' or 'd2h', got 'H2D'$"):
        experiments.timed_copy(4096, "H2D", True, 5)


def test_peer_copies_time_each_ordered_pair_on_the_source_gpu(monkeypatch):
    fake = _CpuGpus(monkeypatch)
    sizes = [1000, 2**20]
    result = experiments.peer_copy_bandwidth(sizes, 3)
    assert list(result) == ["0->1", "1->0"]
    assert fake.entered == [0, 0, 1, 1]  # each copy is issued from its source GPU
    u8 = torch.uint8
    assert fake.made[:2] == [dict(device="cuda:0", dtype=u8), dict(device="cuda:1", dtype=u8)]
    expected = []
    for src, dst in ((0, 1), (1, 0)):
        for size in sizes:
            calls = timing.calls_for(size / 300e9, most=32)
            expected.append(
                dict(
                    repeats=3,
                    warmup=3,
                    calls_per_sample=calls,
                    nbytes=size,
                    hold_us=200 + 50 * calls,
                    label=f"cuda:{src} -> cuda:{dst}, {timing.format_bytes(size)}",
                )
            )
    assert [kwargs for _, kwargs in fake.timed] == expected
    assert result["1->0"] == expected[2:]
    assert set(_Copied.copies) == {("cuda:1", "cuda:0", True), ("cuda:0", "cuda:1", True)}


def test_peer_copies_both_ways_run_on_two_streams_the_clock_waits_for(monkeypatch):
    fake = _CpuGpus(monkeypatch)
    result = experiments.peer_copy_both_ways([2**16], 4)
    assert list(result) == ["0<->1"]
    calls = timing.calls_for(2 * 2**16 / 600e9, most=16)
    assert [kwargs for _, kwargs in fake.timed] == [
        dict(
            repeats=4,
            warmup=3,
            calls_per_sample=calls,
            nbytes=2 * 2**16,
            hold_us=300 + 150 * calls,
            label="cuda:0 <-> cuda:1, 64 KiB each way",
        )
    ]
    timed, i_to_j_dst, j_to_i, j_to_i_dst = fake.streams
    # each call: the i -> j copy with cuda:j's side current, the j -> i one on its own stream
    assert fake.entered == [0, timed] + [i_to_j_dst, j_to_i_dst, j_to_i] * 2
    assert [s.device for s in fake.streams] == [0, 1, 1, 0]
    assert j_to_i.waits == [0, 0] and timed.waits == [2, 2]  # start together, end when both end
    there, back = ("cuda:1", "cuda:0", True), ("cuda:0", "cuda:1", True)
    assert _Copied.copies == [there, back] * 2  # two calls, each a copy either way
    assert {tuple(made.values()) for made in fake.made} == {
        ("cuda:0", torch.uint8),
        ("cuda:1", torch.uint8),
    }


def test_peer_copy_latency_times_every_pair_and_each_gpu_alone(monkeypatch):
    fake = _CpuGpus(monkeypatch)
    result = experiments.peer_copy_latency([4, 64], 2, 7)
    assert list(result) == ["0->0", "0->1", "1->0", "1->1"]
    assert fake.entered == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [kwargs for _, kwargs in fake.timed][2:4] == [
        dict(
            repeats=2,
            warmup=10,
            calls_per_sample=7,
            nbytes=size,
            hold_us=500 + 50 * 7,
            label=f"cuda:0 -> cuda:1, {size} B",
        )
        for size in (4, 64)
    ]
    assert {copy[2] for copy in _Copied.copies} == {True}
    assert {made["dtype"] for made in fake.made} == {torch.uint8}


@pytest.mark.parametrize(
    ("run", "words"),
    [
        (lambda: experiments.timed_copy(4096, "h2d", True, 5), "H2D pinned copy"),
        (lambda: experiments.timed_copy(4096, "d2h", False, 5), "D2H pageable copy"),
        (lambda: experiments.peer_copy_bandwidth([64], 2), "peer copy cuda:0 -> cuda:1"),
        (lambda: experiments.peer_copy_both_ways([64], 2), "cuda:0 -> cuda:1 .both ways."),
        (lambda: experiments.peer_copy_latency([64], 2, 3), "small copy cuda:0 -> cuda:0"),
    ],
)
@pytest.mark.parametrize("fault", ["wrong", "nothing"])
def test_a_copy_that_delivers_wrong_bytes_is_named_not_timed(monkeypatch, run, words, fault):
    _CpuGpus(monkeypatch)
    _Copied.fault = fault
    with pytest.raises(AssertionError, match=f"^{words}: contents differ from the source$"):
        run()


def test_helpers_experiments_is_what_the_notebooks_save():
    """helpers/experiments.py is generated from the notebooks' #@save cells: never edited by hand."""
    save = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "save_experiments.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert save.returncode == 0, save.stderr


# ---------------------------------------------------------------- doctor


def _healthy_facts(**changes) -> dict:
    facts = {
        "gpus": 2,
        "driver": True,
        "torch": "2.11.0+cu130",
        "torch_cuda": "13.0",
        "driver_cuda": "13.0",
        "visible_devices": None,
        "links": [
            {
                "index": i,
                "bus_id": f"00000000:{i}8:00.0",
                "gen_current": 5,
                "gen_max": 5,
                "width_current": 16,
                "width_max": 16,
            }
            for i in range(2)
        ],
        "numa": {0: 0, 1: 1},
        "numa_cpus": {0: [0, 1], 1: [2, 3]},
        "affinity": [0, 1, 2, 3],
        "activity": [{"index": i, "utilization_pct": 0, "pids": [42]} for i in range(2)],
        "pid": 42,
        "memlock": None,
        "peer": [[True, True], [True, True]],
        "nccl": {"ok": True, "seen": "2 ranks returned"},
        "traces": "/tmp",
        "free_disk": 100 * GiB,
        "machine": "2xNVIDIA-H200",
        "recorded": ["2xNVIDIA-H200"],
    }
    facts.update(changes)
    return facts


def _statuses(facts) -> dict[str, str]:
    return {c.name: c.status for rule in doctor.DOCTOR_CHECKS for c in rule(facts)}


def test_a_healthy_machine_passes_every_check():
    assert set(_statuses(_healthy_facts()).values()) == {doctor.PASS}


@pytest.mark.parametrize(
    "change, name, status",
    [
        (
            {
                "links": [
                    {
                        "index": 0,
                        "bus_id": "x",
                        "gen_current": 5,
                        "gen_max": 5,
                        "width_current": 8,
                        "width_max": 16,
                    }
                ]
            },
            "GPU 0 PCIe link",
            doctor.FAIL,
        ),
        (
            {
                "links": [
                    {
                        "index": 0,
                        "bus_id": "x",
                        "gen_current": 3,
                        "gen_max": 5,
                        "width_current": 16,
                        "width_max": 16,
                    }
                ]
            },
            "GPU 0 PCIe link",
            doctor.WARN,
        ),
        ({"affinity": [2, 3]}, "GPU 0 NUMA node", doctor.WARN),
        (
            {"activity": [{"index": 1, "utilization_pct": 95, "pids": [42, 7]}]},
            "GPU 1 other work",
            doctor.WARN,
        ),
        ({"driver_cuda": "12.4"}, "driver vs torch's CUDA", doctor.FAIL),
        ({"torch_cuda": None}, "driver vs torch's CUDA", doctor.FAIL),
        ({"gpus": 0}, "GPUs visible", doctor.FAIL),
        ({"memlock": 64 * 2**10}, "pinned-memory limit (ulimit -l)", doctor.WARN),
        ({"peer": [[True, False], [True, True]]}, "peer access", doctor.WARN),
        ({"nccl": {"ok": False, "seen": "rank 1 raised"}}, "NCCL all_reduce", doctor.FAIL),
        ({"free_disk": GiB // 2}, "free disk for traces", doctor.FAIL),
        ({"recorded": []}, "recordings for this machine", doctor.WARN),
    ],
)
def test_each_check_catches_its_problem_and_gives_a_fix(change, name, status):
    checks = {c.name: c for rule in doctor.DOCTOR_CHECKS for c in rule(_healthy_facts(**change))}
    assert checks[name].status == status and checks[name].fix, checks[name]


def test_doctor_exits_1_on_a_fail_and_prints_the_fix(capsys, monkeypatch):
    monkeypatch.setattr(doctor, "_doctor_facts", lambda timeout: _healthy_facts(driver_cuda="12.4"))
    code, out, _ = run(capsys, "doctor")
    assert code == 1 and "FAIL  driver vs torch's CUDA" in out and "fix: update the driver" in out
    assert out.strip().endswith("1 FAIL on 2xNVIDIA-H200")


def test_doctor_on_this_machine(capsys):
    code, out, _ = run(capsys, "doctor", "--json", "--timeout", "120")
    payload = json.loads(out)
    assert {row["status"] for row in payload["rows"]} <= {doctor.PASS, doctor.WARN, doctor.FAIL}
    assert all(set(row) == {"name", "status", "seen", "fix"} for row in payload["rows"])
    facts = payload["facts"]  # what an issue needs to know about the machine and the course
    assert facts["course"] == importlib.metadata.version("moving-data-course")
    assert facts["python"] == platform.python_version() and facts["os"] == platform.platform()
    assert facts["torch"] == torch.__version__ and "driver_version" in facts
    assert facts["commit"] == config.course_commit()
    if hardware.gpu_count() == 0:  # says so plainly, warns about nothing that needs no fix, exits 0
        assert code == 0 and payload["machine"] == "cpu-only"
        assert payload["rows"][0]["seen"].startswith("CPU only: the notebooks replay")
        assert payload["counts"][doctor.WARN] == 0 and payload["counts"][doctor.FAIL] == 0


# ---------------------------------------------------------------- check against a baseline

MACHINE = "2xNVIDIA-H200"


def _write_index(folder: Path, scale: float) -> None:
    """results/ in ``folder``: the index with MACHINE's figures times ``scale``; notebook 06's recording
    (check reads its ranks there)."""
    bandwidth = Path(MACHINE, "06_nccl_point_to_point_and_collectives", "bandwidth.json")
    (folder / bandwidth).parent.mkdir(parents=True)
    shutil.copyfile(ROOT / "results" / bandwidth, folder / bandwidth)
    records.write_checksums(folder / MACHINE)
    rows = [
        dict(r, value=r["value"] * scale) if (r["machine"], r["kind"]) == (MACHINE, "figure") else r
        for r in records.read_index()
    ]
    records.write_index(rows, folder)


@pytest.fixture
def measured_as_recorded(monkeypatch):
    """`check` on a pretend 2xH200 whose measurements equal its recorded figures."""
    recorded = record_check.baseline_figures(records.read_index(kind="figure"), MACHINE)
    gaps = records.recording_gaps(
        ROOT / "results" / MACHINE
    )  # an experiment it could not record has no baseline
    assert set(recorded) == {
        h.key for h in record_check.HEADLINES if f"{h.notebook}/{h.experiment}" not in gaps
    }
    monkeypatch.setattr(record_check, "_this_machine", lambda: MACHINE)
    monkeypatch.setattr(record_check, "_measure_headline", lambda key, base: recorded[key]["gbps"])
    return recorded


def test_baseline_figures_are_the_recorded_headlines():
    rows = records.read_index(kind="figure")
    found = record_check.baseline_figures(rows, MACHINE)
    assert (
        found["all_reduce busbw"]["bytes"] == GiB
        and found["P2P cuda:0 -> cuda:1"]["bytes"] == 256 * MiB
    )
    ranks = found["all_reduce busbw"]["ranks"]
    assert ranks == 2 and found["all_reduce busbw"]["gbps"] > 0  # 2 GPUs: 2 ranks
    one_gpu = record_check.baseline_figures(rows, "1xNVIDIA-H200")
    assert (
        one_gpu.keys() == {"H2D pinned", "D2H pinned"}
        and one_gpu["H2D pinned"]["bytes"] == 256 * MiB
    )
    h2d = next(
        r
        for r in rows
        if r["machine"] == "1xNVIDIA-H200"
        and r["label"] == "H2D pinned"
        and r["bytes"] == 256 * MiB
    )
    assert one_gpu["H2D pinned"]["gbps"] == h2d["value"]


def test_check_passes_on_an_unchanged_machine(capsys, monkeypatch, tmp_path, measured_as_recorded):
    _write_index(tmp_path, 1.0)
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    code, out, _ = run(capsys, "check", "--tolerance", "5%", "--json")
    payload = json.loads(out)
    assert code == 0 and [r["verdict"] for r in payload["rows"]] == ["pass"] * len(
        measured_as_recorded
    )


def test_check_fails_when_the_baseline_is_raised_by_20_percent(
    capsys, monkeypatch, tmp_path, measured_as_recorded
):
    _write_index(tmp_path, 1.2)
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    code, out, _ = run(capsys, "check", "--tolerance", "5%")
    n = len(measured_as_recorded)
    assert (
        code == 1
        and out.count("REGRESSION") == n
        and "-16.7%" in out
        and f"{n} regression(s)" in out
    )
    code, _, _ = run(capsys, "check", "--tolerance", "20%")  # 1/1.2 = -16.7% is within 20%
    assert code == 0


def test_compare_figures_edges():
    base = {
        "a": {"bytes": 1, "gbps": 100.0, "date": "d"},
        "b": {"bytes": 1, "gbps": 100.0, "date": "d"},
    }
    rows = record_check.compare_figures(base, {"a": 95.0, "b": None}, 0.05)
    assert [r["verdict"] for r in rows] == ["pass", "skipped"]
    assert record_check.compare_figures(base, {"a": 94.9}, 0.05)[0]["verdict"] == "REGRESSION"
    assert (
        record_check.compare_figures(base, {"a": 150.0}, 0.05)[0]["verdict"] == "pass"
    )  # faster is no regression


# ---------------------------------------------------------------- record


def test_record_runs_tools_gpu_run_and_reads_the_archive_name(tmp_path):
    cmd = record_check._gpu_run_command(
        tmp_path, True, False, [Path("notebooks/00_start_here.ipynb")]
    )
    assert cmd[1].endswith("tools/gpu_run.py") and cmd[2:5] == ["--out", str(tmp_path), "--quick"]
    assert record_check._recorded_machine(tmp_path) is None
    (tmp_path / "gpu-results-2xNVIDIA-H200.tar.gz").write_bytes(b"")
    assert record_check._recorded_machine(tmp_path) == "2xNVIDIA-H200"
    assert any("torch>=2.11" in " ".join(c) for c in record_check._install_commands())


# ---------------------------------------------------------------- collectives with gloo ranks


def test_collectives_spawned_here_with_gloo(capsys):
    code, out, _ = run(
        capsys,
        "collectives",
        "--backend",
        "gloo",
        "--ops",
        "all_reduce,all_to_all",
        "--sizes",
        "1KiB,16KiB",
        "--warmup",
        "1",
        "--iters",
        "2",
        "--samples",
        "2",
        "--json",
        "--timeout",
        "120",
    )
    docs = json.loads(out)  # one nccl-tests -J document per op
    assert code == 0 and [d["config"]["ngpus"] for d in docs] == [2, 2]
    assert all(d["config"]["devices"][0]["device_info"] == "CPU (gloo)" for d in docs)
    assert [[r["size"] for r in d["results"]] for d in docs] == [[1024, 16384]] * 2
    reduce, to_all = docs[0]["results"], docs[1]["results"]
    groups = [r["in_place"] for r in reduce] + [r["out_of_place"] for r in to_all]
    assert all(g["nwrong"] == 0 and g["bus_bw"] > 0 for g in groups)
    assert all(r["out_of_place"] is None for r in reduce)  # no out-of-place all_reduce in gloo
    assert all(r["in_place"] is None for r in to_all)  # nor an in-place all_to_all in torch
    assert docs[0]["out_of_bounds"] == {"count": 0, "okay": "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_collectives_across_two_torchrun_nodes_meeting_at_one_rendezvous(tmp_path):
    """Two `torchrun --nnodes 2 --nproc-per-node 2` launches on localhost: 4 gloo ranks, one table."""
    port = _free_port()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    nodes = []
    for node in (0, 1):
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--nproc-per-node",
            "2",
            "--node-rank",
            str(node),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            "datamove-test",
            "--rdzv-conf",
            "join_timeout=120",
            "--max-restarts",
            "0",
            "-m",
            "helpers.cli",
            "collectives",
            "--backend",
            "gloo",
            "--ops",
            "all_reduce,all_gather",
            "--sizes",
            "1KiB,64KiB",
            "-w",
            "1",
            "-n",
            "2",
            "--samples",
            "2",
            "--timeout",
            "120",
        ]
        nodes.append(
            subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    outputs = []
    try:
        for proc in nodes:
            outputs.append(proc.communicate(timeout=240)[0])
    finally:
        for proc in nodes:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert [p.returncode for p in nodes] == [0, 0], "\n---\n".join(outputs)
    together = "\n".join(outputs)
    assert together.count("# nThread 1 nGpus 4") == 2, (
        together
    )  # rank 0 alone prints, a header per op
    rows = [line.split() for line in together.splitlines() if line.strip()[:1].isdigit()]
    assert (
        len(rows) == 4 and [{row[8], row[12]} for row in rows] == [{"0", "N/A"}] * 2 + [{"0"}] * 2
    ), together  # #wrong 0


# ---------------------------------------------------------------- machine facts (helpers/hardware/)


def test_cpulists_and_numa_nodes_from_sysfs(tmp_path):
    assert hardware.parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    for bad in ("0-", "a", "1-2-3"):
        with pytest.raises(ValueError, match="N or N-M"):
            hardware.parse_cpulist(bad)
    with pytest.raises(TypeError):
        hardware.parse_cpulist(3)
    device = tmp_path / "bus" / "pci" / "devices" / "0000:18:00.0"
    device.mkdir(parents=True)
    (device / "numa_node").write_text("1\n")
    node = tmp_path / "devices" / "system" / "node" / "node1"
    node.mkdir(parents=True)
    (node / "cpulist").write_text("32-63\n")
    assert hardware.gpu_numa_node("00000000:18:00.0", sys_root=str(tmp_path)) == 1
    assert hardware.gpu_numa_node("00000000:19:00.0", sys_root=str(tmp_path)) is None
    assert hardware.numa_node_cpus(1, sys_root=str(tmp_path)) == set(range(32, 64))
    with pytest.raises(ValueError, match="PCI bus id"):
        hardware.gpu_numa_node("18:00")
    (device / "numa_node").write_text("0\n")  # node 0 is a node
    assert hardware.gpu_numa_node("00000000:18:00.0", sys_root=str(tmp_path)) == 0
    (device / "numa_node").write_text("-1\n")  # Linux's word for no NUMA
    assert hardware.gpu_numa_node("00000000:18:00.0", sys_root=str(tmp_path)) is None


def test_the_numa_node_is_read_from_sys_by_default(monkeypatch):
    from helpers.hardware import topology

    read = []

    def fake_open(path, *args, **kwargs):
        read.append(path)
        return io.StringIO("1\n")

    monkeypatch.setattr(topology, "open", fake_open, raising=False)
    assert hardware.gpu_numa_node("00000000:AB:00.0") == 1
    assert read == ["/sys/bus/pci/devices/0000:ab:00.0/numa_node"]


def test_the_pinned_memory_limit_is_ulimit_l_in_bytes_or_none_when_unlimited(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda what: (64 * 2**10, resource.RLIM_INFINITY))
    assert hardware.pinned_memory_limit_bytes() == 64 * 2**10
    monkeypatch.setattr(
        resource, "getrlimit", lambda what: (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    )
    assert hardware.pinned_memory_limit_bytes() is None


def test_facts_of_this_process(monkeypatch):
    assert hardware.cpu_affinity() and hardware.cpu_affinity() <= set(range(os.cpu_count() or 1))
    with monkeypatch.context() as m:  # a system without affinity (macOS): every CPU
        m.delattr(os, "sched_getaffinity", raising=False)
        assert hardware.cpu_affinity() == set(range(os.cpu_count() or 1))
    limit = hardware.pinned_memory_limit_bytes()
    assert limit is None or limit >= 0
    assert hardware.free_disk_bytes("/tmp/surely/not/there") > 0
    with pytest.raises(TypeError):
        hardware.free_disk_bytes(None)
    assert len(hardware.peer_access()) == hardware.gpu_count()


class _FakeNvml:
    """pynvml's calls that helpers.hardware makes, for two GPUs."""

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=f"00000000:{h}8:00.0".encode())

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 4 if h else 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=30 * h)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [types.SimpleNamespace(pid=9), types.SimpleNamespace(pid=3)] if h else []

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000


def test_nvml_is_read_where_installed(monkeypatch):
    monkeypatch.setattr(health, "nvml_module", lambda: _FakeNvml())
    links = hardware.pcie_links()
    assert links[1] == {
        "index": 1,
        "bus_id": "00000000:18:00.0",
        "gen_current": 4,
        "gen_max": 5,
        "width_current": 16,
        "width_max": 16,
    }
    assert hardware.gpu_activity() == [
        {"index": 0, "utilization_pct": 0, "pids": []},
        {"index": 1, "utilization_pct": 30, "pids": [3, 9]},
    ]
    assert hardware.driver_cuda_version() == "13.0"


def test_nvidia_smi_is_parsed_without_nvml(monkeypatch):
    answers = {
        "--query-gpu=index,utilization.gpu,pci.bus_id": "0, 7, 00000000:18:00.0\n1, 0, 00000000:2A:00.0\n",
        "--query-compute-apps=gpu_bus_id,pid": "00000000:18:00.0, 1234\n",
        None: "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |",
    }
    monkeypatch.setattr(health, "nvml_module", lambda: None)

    def nvidia_smi(*args):  # as the real one: a query without --format is refused
        if (
            args
            and args[0].startswith("--query")
            and args[1:] != ("--format=csv,noheader,nounits",)
        ):
            return None
        return answers.get(args[0] if args else None)

    monkeypatch.setattr(health, "nvidia_smi", nvidia_smi)
    monkeypatch.setattr(
        health,
        "smi_gpu_rows",
        lambda: [
            {
                "index": "0",
                "pci.bus_id": "00000000:18:00.0",
                "pcie.link.gen.current": "5",
                "pcie.link.gen.max": "5",
                "pcie.link.width.current": "8",
                "pcie.link.width.max": "16",
            }
        ],
    )
    assert hardware.gpu_activity() == [
        {"index": 0, "utilization_pct": 7, "pids": [1234]},
        {"index": 1, "utilization_pct": 0, "pids": []},
    ]
    assert hardware.pcie_links() == [
        {
            "index": 0,
            "bus_id": "00000000:18:00.0",
            "gen_current": 5,
            "gen_max": 5,
            "width_current": 8,
            "width_max": 16,
        }
    ]
    assert hardware.driver_cuda_version() == "13.0"
    assert hardware.driver_version() == "580.159.04"


# ---------------------------------------------------------------- on GPUs


def _events_gbps(copy, nbytes: int, calls: int = 10, samples: int = 7) -> float:
    """A plain copy timed with bare CUDA events: median over samples of `calls` copies."""
    for _ in range(3):
        copy()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            copy()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return nbytes / sorted(times)[len(times) // 2] / 1e9


@pytest.mark.gpu
def test_h2d_pinned_at_256_mib_is_within_3_percent_of_a_plain_to_cuda(capsys):
    """Within 3% of the plain copy timed just before or just after it: one run on 2xH200 read
    53.2 GB/s against 54.9 for a plain copy timed once after it, so the bounds take both."""
    host = torch.empty(256 * MiB, dtype=torch.uint8, pin_memory=True)
    before = _events_gbps(lambda: host.to("cuda"), 256 * MiB)
    code, out, _ = run(capsys, "h2d", "--pinned", "--sizes", "256MiB", "--json")
    measured = json.loads(out)["rows"][0]["gbps"]
    after = _events_gbps(lambda: host.to("cuda"), 256 * MiB)
    low, high = min(before, after), max(before, after)
    print(
        f"datamove h2d pinned 256 MiB: {measured:.2f} GB/s; plain tensor.to('cuda'): {before:.2f} "
        f"GB/s before, {after:.2f} after"
    )
    assert code == 0 and 0.97 * low <= measured <= 1.03 * high, (measured, before, after)


@pytest.mark.gpu2
def test_collectives_all_reduce_busbw_at_1_gib_is_sane(capsys):
    code, out, _ = run(
        capsys, "collectives", "--ops", "all_reduce", "--sizes", "1GiB", "--nproc", "2", "--json"
    )
    row = json.loads(out)["results"][0]["in_place"]
    ceiling = hardware.ceiling_gbps(hardware.describe())
    print(f"datamove collectives all_reduce 1 GiB on 2 GPUs: busbw {row['bus_bw']:.1f} GB/s")
    assert code == 0 and row["nwrong"] == 0 and 1.0 < row["bus_bw"] < ceiling


# ---------------------------------------------------------------- nvbandwidth's names and matrices


@pytest.mark.parametrize("machine", ["2xNVIDIA-H200", "4xNVIDIA-H200"])
def test_nvbandwidth_matrices_and_sums_match_notebook_05s_recorded_figures(machine):
    """The GPU x GPU matrix and SUM line built from notebook 05's recordings hold, pair by pair,
    the figures results/index.jsonl lists for them (largest size), and SUM is their total."""
    path = records.recording_path(machine, "05_device_to_device", "peer_copy_bandwidth")
    if not path.exists():
        pytest.skip(f"no peer_copy_bandwidth recording for {machine}")
    _, one_way = records.load(path)
    gpus = int(machine.split("x", 1)[0])
    last = len(next(iter(one_way.values()))) - 1
    index = {
        (r["name"], r["experiment"]): r["value"]
        for r in records.read_index(kind="figure")
        if r["machine"] == machine and r["notebook"] == "05_device_to_device"
    }
    write = nvbandwidth_cmd.pair_matrix(one_way, gpus, last)
    for key in one_way:
        i, j = map(int, key.split("->"))
        assert write[i][j] == pytest.approx(index[(f"['{key}'][{last}]", "peer_copy_bandwidth")])
    assert all(write[i][i] is None for i in range(gpus))
    case = nvbandwidth_cmd.find_testcase("device_to_device_memcpy_write_ce")
    text = nvbandwidth_cmd.matrix_text(case.key, case.description, write)
    expected_sum = sum(index[(f"['{key}'][{last}]", "peer_copy_bandwidth")] for key in one_way)
    assert text.splitlines()[0] == "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"
    assert text.splitlines()[-1] == f"SUM device_to_device_memcpy_write_ce {expected_sum:.2f}"
    entry = nvbandwidth_cmd.json_testcase(case, [write])
    assert entry["sum"] == pytest.approx(expected_sum) and entry["bandwidth_matrix"][0][0] == "N/A"
    assert float(entry["bandwidth_matrix"][0][1]) == pytest.approx(write[0][1], rel=1e-5)


def test_nvbandwidth_lists_its_testcases_and_refuses_unknown_ones(capsys):
    code, out, _ = run(capsys, "nvbandwidth", "-l")
    assert code == 0 and "0, host_to_device_memcpy_ce:" in out and "device_to_host_memcpy_ce" in out
    assert nvbandwidth_cmd.find_testcase("1").key == "device_to_host_memcpy_ce"
    with pytest.raises(ValueError, match="-l lists them"):
        nvbandwidth_cmd.find_testcase("device_to_device_memcpy_read_sm")
    host = nvbandwidth_cmd.host_matrix([_fake_timing(512 * MiB, 512 * MiB / 55e9)] * 2)
    case = nvbandwidth_cmd.TESTCASES[0]
    text = nvbandwidth_cmd.matrix_text(case.key, case.description, host)
    assert text.splitlines()[0] == "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
    assert text.splitlines()[2].split() == ["0", "55.00", "55.00"] and text.endswith(
        "SUM host_to_device_memcpy_ce 110.00"
    )
    verbose = nvbandwidth_cmd.matrix_text("k", "d", [[None, 389.7], [390.2, None]], verbose=True)
    assert verbose.splitlines()[-4:] == [  # nvbandwidth -v: N/A counts 0 in MIN, AVG over > 0
        "SUM k 779.90",
        "MIN k 0.00",
        "MAX k 390.20",
        "AVG k 389.95",
    ]
    bidir = nvbandwidth_cmd.find_testcase("device_to_device_bidirectional_memcpy_write_ce")
    assert [bidir.key + suffix for suffix, _ in bidir.matrices] == [
        "device_to_device_bidirectional_memcpy_write_ce_write1",
        "device_to_device_bidirectional_memcpy_write_ce_write2",
        "device_to_device_bidirectional_memcpy_write_ce_total",
    ]


def test_collectives_sweep_ranks_prints_busbw_against_n(capsys):
    code, out, _ = run(
        capsys,
        "collectives",
        "--sweep-ranks",
        "--backend",
        "gloo",
        "-g",
        "2",
        "--ops",
        "all_reduce",
        "-e",
        "16K",
        "-n",
        "2",
        "-w",
        "1",
        "--samples",
        "2",
        "--timeout",
        "120",
    )
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].startswith(
        "# busbw (GB/s) at 16 KiB against the number of ranks, gloo"
    )
    assert lines[1].split() == ["#", "N", "all_reduce"]
    n, busbw = lines[2].split()
    assert n == "2" and float(busbw) > 0


# ---------------------------------------------------------------- notebooks copied out


def test_notebooks_are_copied_out_keeping_a_learners_copy(tmp_path, capsys):
    code, out, _ = run(capsys, "notebooks", str(tmp_path), "00", "03_streams_and_overlap")
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00_start_here.ipynb",
        "03_streams_and_overlap.ipynb",
    ]
    assert (tmp_path / "00_start_here.ipynb").read_bytes() == (
        config.notebooks_dir() / "00_start_here.ipynb"
    ).read_bytes()
    (tmp_path / "00_start_here.ipynb").write_text("mine")
    code, out, _ = run(capsys, "notebooks", str(tmp_path), "00")
    assert "kept (yours" in out and (tmp_path / "00_start_here.ipynb").read_text() == "mine"
    code, out, _ = run(capsys, "notebooks", str(tmp_path), "00", "--force")
    assert (tmp_path / "00_start_here.ipynb").read_text() != "mine"


@pytest.mark.parametrize(
    "args, says",
    [
        (["99"], "no notebook '99'; there are 00_start_here, 01_pinned_memory"),
        (["../x"], "'../x' is not a notebook name"),
    ],
)
def test_notebooks_bad_names_say_what_there_is(tmp_path, capsys, args, says):
    code, _, err = run(capsys, "notebooks", str(tmp_path), *args)
    assert code == 2 and says in err


def test_notebooks_into_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    code, _, err = run(capsys, "notebooks", str(tmp_path / "f"))
    assert code == 2 and "is a file; pass a folder" in err


def test_importing_the_helpers_leaves_torch_utils_benchmark_unimported():
    """Its import warns in red ("No CUDA runtime is found") where a CUDA torch has no driver."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from helpers import records, timing, trace, claims; "
            "print('torch.utils.benchmark' in sys.modules)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["collectives", "--backend", "gloo", "-g", "100"], "pass at most 64"),
        (["collectives", "--backend", "gloo", "--sweep-ranks", "-g", "65"], "pass at most 64"),
        (["collectives", "--timeout", "-1"], "'-1' is not a timeout"),
        (["collectives", "--timeout", "nan"], "'nan' is not a timeout"),
        (["collectives", "--timeout", "inf"], "'inf' is not a timeout"),
        (["collectives", "--timeout", "1e9"], "up to 86400"),
        (["collectives", "--timeout", "soon"], "'soon' is not a timeout"),
        (["doctor", "--timeout", "0"], "'0' is not a timeout"),
        (["collectives", "-J", "/nonexistent/dir/x.json"], "/nonexistent/dir does not exist"),
        (["collectives", "-J", "{tmp}"], "is a folder: pass a file name"),
        (["collectives", "-J", "{tmp}/ro/x.json"], "cannot be written"),
    ],
)
def test_bad_arguments_get_one_line_before_any_work(capsys, monkeypatch, tmp_path, argv, says):
    """Each value is checked by argparse: exit 2, one line naming the argument, nothing run."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    if os.access(tmp_path / "ro", os.W_OK) and "ro/" in " ".join(argv):
        pytest.skip("this user (root) can write into a read-only folder")
    started = []
    for command in ("collectives_cmd.cmd_collectives", "doctor.cmd_doctor"):
        monkeypatch.setattr(f"helpers.cli.{command}", lambda a: started.append(a) or 0)
    code, out, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert code == 2 and not started and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and says in err, err


def test_version_and_help_answer_without_importing_torch():
    for flag in ("--version", "--help"):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import sys; from helpers import cli\ntry: cli.main([{flag!r}])\n"
                "except SystemExit: pass\nprint('torch imported' if 'torch' in sys.modules else 'no torch')",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.splitlines()[-1] == "no torch", out.stdout
        assert ("datamove " if flag == "--version" else "usage: datamove") in out.stdout


def test_the_light_help_lists_the_full_parsers_subcommands():
    def commands(parser):
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return {c.dest: c.help for c in sub._choices_actions}

    assert commands(cli.build_parser(full=False)) == commands(cli.build_parser())


def test_a_bad_nvbandwidth_testcase_is_named_before_the_gpus_are_counted(capsys, monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    code, _, err = run(capsys, "nvbandwidth", "-t", "nonexistent")
    assert code == 2 and "testcase 'nonexistent' is not one datamove measures" in err
    assert "needs 1 CUDA GPU" not in err


def test_nvbandwidth_takes_several_testcases_after_one_t_as_nvbandwidth_does(capsys, monkeypatch):
    """nvbandwidth's -t is multitoken (``-t a b``); datamove reads it so, and repeated -t too."""
    args = cli.build_parser().parse_args(
        ["nvbandwidth", "-t", "host_to_device_memcpy_ce", "2", "-t", "3", "-j"]
    )
    assert args.testcase == ["host_to_device_memcpy_ce", "2", "3"] and args.json
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    code, _, err = run(capsys, "nvbandwidth", "-t", "host_to_device_memcpy_ce", "nonexistent")
    assert code == 2 and "testcase 'nonexistent' is not one datamove measures" in err


def test_nvbandwidths_header_is_its_own_text_line_for_line():
    facts = {
        "version": "v0.8",
        "git_version": "abc",
        "runtime": 13000,
        "cuda_driver": 13000,
        "driver": "580.159.04",
        "host": "Process 0 (host):",
        "devices": ["NVIDIA H200 (00000000:0a:00)"],
    }
    assert nvbandwidth_cmd.header_text(facts).splitlines() == [
        "nvbandwidth Version: v0.8",
        "Built from Git version: abc",
        "",
        "CUDA Runtime Version: 13000",
        "CUDA Driver Version: 13000",
        "Driver Version: 580.159.04",
        "",
        "Process 0 (host):",
        "Device 0: NVIDIA H200 (00000000:0a:00)",
    ]


# ---------------------------------------------------------------- commands run here with measurements injected


@pytest.fixture
def fake_nvbandwidth_machine(monkeypatch):
    """``gpus`` GPUs (set ``machine.gpus``) whose copies are injected: h2d at 50 GB/s per GPU, one
    way GPU to GPU at 300 GB/s; which GPU was current during each host copy is kept."""
    machine = types.SimpleNamespace(gpus=1, current=None, host_copies_on=[], host_copies=[])

    class Device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            machine.current = self.index

        def __exit__(self, *exc):
            machine.current = None

    def timed_copy(nbytes, direction, pinned, repeats):
        machine.host_copies_on.append(machine.current)
        machine.host_copies.append((direction, pinned, nbytes, repeats))
        return _fake_timing(nbytes, nbytes / 50e9)

    def peer_copy_bandwidth(sizes, repeats):
        pairs = [(i, j) for i in range(machine.gpus) for j in range(machine.gpus) if i != j]
        return {f"{i}->{j}": [_fake_timing(sizes[0], sizes[0] / 300e9)] for i, j in pairs}

    monkeypatch.setattr(nvbandwidth_cmd, "need_gpus", lambda n, why="": None)
    monkeypatch.setattr(hardware, "gpu_count", lambda: machine.gpus)
    monkeypatch.setattr(hardware, "describe", lambda: {"driver": None, "gpus": []})
    monkeypatch.setattr(hardware, "driver_cuda_version", lambda: None)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(socket, "gethostname", lambda: "node7")
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda i: types.SimpleNamespace(
            name="Fake GPU", pci_domain_id=0, pci_bus_id=0x18 + i, pci_device_id=0x1F
        ),
    )
    monkeypatch.setattr(torch.cuda, "device", Device)
    monkeypatch.setattr(experiments, "timed_copy", timed_copy)
    monkeypatch.setattr(experiments, "peer_copy_bandwidth", peer_copy_bandwidth)
    monkeypatch.setattr(
        nvbandwidth_cmd, "both_ways_each", lambda i, j, nbytes, samples: (100.0 * (i + 1), 100.0)
    )
    return machine


def test_nvbandwidth_json_states_the_machine_the_testcases_and_the_small_buffer_warning(
    capsys, fake_nvbandwidth_machine
):
    """-j: nvbandwidth's header keys (unknown versions as 0, unknown driver as "unknown"), each
    GPU named with its PCI address, a run testcase's matrix, one needing more GPUs Waived, and
    the warning a buffer below nvbandwidth's 512 MiB default gets."""
    fake_nvbandwidth_machine.gpus = 2
    code, out, _ = run(capsys, "nvbandwidth", "-j", "-b", "1", "-t", "0", "2", "3")
    report = json.loads(out)["nvbandwidth"]
    assert code == 0 and report["warning"] == nvbandwidth_cmd.SMALL_BUFFER_WARNING
    assert report["CUDA Runtime Version"] == 0 and report["Driver Version"] == "unknown"
    assert report["GPU Device list"] == [
        "0: Fake GPU (00000000:18:1f): (node7)",
        "1: Fake GPU (00000000:19:1f): (node7)",
    ]
    host, write, bidir = report["testcases"]
    assert (host["name"], host["status"]) == ("host_to_device_memcpy_ce", "Passed")
    assert [float(v) for v in host["bandwidth_matrix"][0]] == pytest.approx([50.0, 50.0])
    assert fake_nvbandwidth_machine.host_copies_on == [0, 1]  # each GPU's copy run on that GPU
    assert write["bandwidth_matrix"][0][0] == "N/A" and float(write["bandwidth_matrix"][1][0]) == (
        pytest.approx(300.0)
    )
    assert write["sum"] == pytest.approx(600.0)
    assert bidir["bandwidth_matrix"][1] == ["200", "N/A"]  # write1, write2, then total: 1 -> 0
    assert bidir["bandwidth_matrix"][3] == ["100", "N/A"] and bidir["sum"] == pytest.approx(500.0)


def test_nvbandwidth_waives_a_testcase_that_needs_more_gpus_than_there_are(
    capsys, fake_nvbandwidth_machine
):
    code, out, _ = run(capsys, "nvbandwidth", "-t", "host_to_device_memcpy_ce", "2")
    lines = out.splitlines()
    assert code == 0 and "Device 0: Fake GPU (00000000:18:1f)" in lines
    assert lines[lines.index("Running host_to_device_memcpy_ce.") + 3].split() == ["0", "50.00"]
    assert "Waived: " in lines and "Running device_to_device_memcpy_write_ce." not in lines
    code, out, _ = run(capsys, "nvbandwidth", "-j", "-t", "2")
    (case,) = json.loads(out)["nvbandwidth"]["testcases"]
    assert case == {"name": "device_to_device_memcpy_write_ce", "status": "Waived"}
    assert "warning" not in json.loads(out)["nvbandwidth"]  # the default 512 MiB buffer
    fake_nvbandwidth_machine.gpus = 2
    code, out, _ = run(capsys, "nvbandwidth", "-t", "0")
    lines = out.splitlines()
    at = lines.index("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)")
    assert lines[at + 1 : at + 3] == [  # nvbandwidth's columns: 10 characters each
        "           0         1",
        " 0     50.00     50.00",
    ]


def test_copy_rows_count_their_samples_and_p2p_prints_three_matrices(
    capsys, monkeypatch, fake_copies
):
    code, out, _ = run(capsys, "h2d", "--sizes", "4KiB", "--json")
    assert code == 0 and json.loads(out)["rows"][0]["samples"] == 3  # _fake_timing's 3 samples
    monkeypatch.setattr(copy_cmds, "need_gpus", lambda n, why="": None)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 2)
    monkeypatch.setattr(hardware, "peer_access", lambda: [[True, True], [True, True]])
    monkeypatch.setattr(
        experiments,
        "peer_copy_bandwidth",
        lambda sizes, repeats: {
            k: [_fake_timing(sizes[0], sizes[0] / 3e11)] for k in ("0->1", "1->0")
        },
    )
    monkeypatch.setattr(
        experiments,
        "peer_copy_both_ways",
        lambda sizes, repeats: {"0<->1": [_fake_timing(sizes[0], sizes[0] / 6e11)]},
    )
    monkeypatch.setattr(
        experiments,
        "peer_copy_latency",
        lambda sizes, repeats, calls: {
            f"{i}->{j}": [_fake_timing(sizes[0], 2e-6)] for i in range(2) for j in range(2)
        },
    )
    code, out, _ = run(capsys, "p2p", "--size", "64MiB", "--json")
    assert code == 0 and json.loads(out)["command"] == "p2p"
    code, out, _ = run(capsys, "p2p", "--size", "64MiB")
    blocks = out.strip().split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == [
        "one direction, 64 MiB (decimal GB/s; row: from, column: to)",
        "both directions at once, 64 MiB each way (decimal GB/s, total; row: from, column: to)",
        "latency of a 4 B copy (us per copy; row: from, column: to)",
    ]
    assert [line.split() for line in blocks[0].splitlines()[-2:]] == [
        ["cuda:0", "|", "—", "|", "300.0"],
        ["cuda:1", "|", "300.0", "|", "—"],
    ]


def test_output_mode_reads_only_the_flags_a_command_has():
    assert cli_output.output_mode(argparse.Namespace()) == "text"  # e.g. a command without --csv
    assert cli_output.output_mode(argparse.Namespace(json=False)) == "text"
    assert cli_output.output_mode(argparse.Namespace(csv=True)) == "csv"
    assert cli_output.output_mode(argparse.Namespace(json=True, csv=True)) == "json"


def test_machine_facts_and_gpu_0s_link_come_from_hardware_describe(monkeypatch):
    info = {
        "machine": "2xFake",
        "gpus": [{"name": "Fake GPU", "pcie_gen_max": 5, "pcie_width_max": 16}],
        "driver": "580",
        "torch": "2.11",
        "cuda": "13.0",
        "nccl": "2.27",
    }
    monkeypatch.setattr(hardware, "describe", lambda: info)
    facts = cli_output.machine_facts()
    assert (facts["machine"], facts["gpu"], facts["driver"], facts["nccl"]) == (
        "2xFake",
        "Fake GPU",
        "580",
        "2.27",
    )
    link = copy_cmds.link_of_gpu0()
    assert (link["gen"], link["width"]) == (5, 16)
    assert link["theoretical_gbps"] == pytest.approx(hardware.pcie_theoretical_gbps(5, 16))
    monkeypatch.setattr(hardware, "describe", lambda: {"machine": "cpu-only"})
    assert cli_output.machine_facts()["gpu"] is None and copy_cmds.link_of_gpu0()["gen"] is None


@pytest.fixture
def fake_three_gpus(monkeypatch):
    """Two H100s joined by NVLink (NV18) and a third on PCIe (SYS) with a gen 4 link; GPU 2's bus
    id is not reported."""
    links = [["X", "NV18", "SYS"], ["NV18", "X", "SYS"], ["SYS", "SYS", "X"]]
    pcie = [
        {"index": 0, "bus_id": "00000000:18:00.0", "gen_max": 5, "width_max": 16},
        {"index": 1, "bus_id": "00000000:2a:00.0", "gen_max": 5, "width_max": 16},
        {"index": 2, "gen_max": 4, "width_max": 16},
    ]
    names = ["NVIDIA H100 80GB HBM3"] * 2 + ["NVIDIA L4"]
    monkeypatch.setattr(hardware, "driver_present", lambda: True)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 3)
    monkeypatch.setattr(hardware, "gpu_topology", lambda: {"source": "NVML", "links": links})
    monkeypatch.setattr(hardware, "pcie_links", lambda: pcie)
    monkeypatch.setattr(hardware, "describe", lambda: {"gpus": [{"name": n} for n in names]})
    monkeypatch.setattr(hardware, "gpu_numa_node", lambda bus_id: int(bus_id[9:11], 16) // 32)


def test_topo_on_three_gpus_gives_nvlink_and_pcie_ceilings(capsys, fake_three_gpus):
    code, out, _ = run(capsys, "topo", "--json")
    facts = json.loads(out)
    gen4, gen5 = hardware.pcie_theoretical_gbps(4, 16), hardware.pcie_theoretical_gbps(5, 16)
    assert code == 0 and facts["source"] == "NVML" and facts["links"][0][1] == "NV18"
    assert facts["ceilings_gbps"] == [
        [None, 450.0, pytest.approx(gen4)],  # NVLink: 18 x 25 GB/s; PCIe: the slower end
        [450.0, None, pytest.approx(gen4)],
        [pytest.approx(gen4), pytest.approx(gen4), None],
    ]
    assert [(g["name"], g["numa"]) for g in facts["gpus"]] == [
        ("NVIDIA H100 80GB HBM3", 0),
        ("NVIDIA H100 80GB HBM3", 1),
        ("NVIDIA L4", None),
    ]
    assert facts["gpus"][0]["pcie_gbps"] == pytest.approx(gen5)


def test_topo_facts_read_no_pcie_link_without_a_driver(monkeypatch, fake_three_gpus):
    monkeypatch.setattr(hardware, "driver_present", lambda: False)
    monkeypatch.setattr(hardware, "pcie_links", lambda: pytest.fail("nvidia-smi asked"))
    assert topo.topo_facts()["gpus"] == []


def test_doctor_says_why_torch_sees_no_gpu_and_warns_when_nccl_was_not_run():
    (gpus,) = doctor._check_gpus(_healthy_facts(gpus=0, visible_devices=""))
    assert gpus.status == doctor.FAIL and "CUDA_VISIBLE_DEVICES=''" in gpus.seen
    (nccl,) = doctor._check_nccl(_healthy_facts(nccl=None))
    assert nccl.status == doctor.WARN and "--skip-nccl" in nccl.seen
    assert doctor._check_nccl(_healthy_facts(nccl=None, gpus=0)) == []


def test_doctor_fixes_are_commands_a_user_can_paste():
    unknown = {"index": 0, "bus_id": "x", "gen_current": None, "gen_max": 5}
    (link,) = doctor._check_links(
        _healthy_facts(links=[{**unknown, "width_current": 16, "width_max": 16}])
    )
    assert link.status == doctor.WARN and link.fix.split()[-4:] == ["nvidia-smi", "-q", "-d", "PCI"]
    (rec,) = doctor._check_recordings(_healthy_facts(gpus=0, recorded=[], machine="cpu-only"))
    assert rec.status == doctor.FAIL and rec.fix.split()[:3] == ["git", "checkout", "results/"]


def test_doctor_facts_name_the_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    assert doctor._doctor_facts(None)["visible_devices"] == "3,1"


def test_doctors_nccl_check_runs_the_tiny_all_reduce_with_the_doctors_deadline(monkeypatch):
    """The ranks' function, run here as a gloo rank of one; the deadline is doctor's --timeout."""
    asked = {}

    def launch(worker, world_size, *, backend, timeout_s, startup_timeout_s):
        asked.update(backend=backend, timeout_s=timeout_s, startup_timeout_s=startup_timeout_s)
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            return [worker(0, world_size)]
        finally:
            dist.destroy_process_group()

    monkeypatch.setattr(distributed, "launch", launch)
    fact = doctor._nccl_fact(1, 5.0)
    assert fact == {"ok": True, "seen": "1 ranks returned [1.0] (expected 1)"}
    assert asked == {"backend": "nccl", "timeout_s": 5.0, "startup_timeout_s": 60.0}
    assert doctor._nccl_fact(1, 90.0)["ok"] and asked["startup_timeout_s"] == 90.0


def _header(**changes):
    settings = dict(
        op="all_reduce",
        world=2,
        min_bytes=1024,
        max_bytes=4096,
        step="2(factor)",
        warmup=5,
        iters=20,
        check=1,
        graph=0,
        per_iter=False,
        per_iter_skip=0,
        devices=[
            {"rank": 0, "pid": 7, "hostname": "node", "device": 0, "pci": (0, 0x18, 0), "name": "G"}
        ],
        version="test",
        note="a test",
    )
    return nccl_tests_format.header_lines(**{**settings, **changes})


def test_nccl_tests_columns_line_up_under_their_headings_as_nccl_tests_prints_them():
    real = FIXTURE_LOG.read_text().splitlines()
    units = next(line for line in real if line.startswith("#        (B)"))
    assert _header()[-1].split() == units.split()  # the units nccl-tests states, GB/s included
    header = _header(per_iter=True, per_iter_skip=2, clock="host clock")
    assert (
        "# Per-Iteration Report: host clock timing; i_* uses max over process rows; summary skips "
        "first 2 iterations " in header
    )
    stats = nccl_tests_format.per_iter_stats([1e-3, 1e-3, 2e-5, 3e-5, 1e-5, 4e-5], 2)
    group = nccl_tests_format.group_result("all_reduce", 4096, 2.5e-5, 0, 2)
    row = nccl_tests_format.result(
        "all_reduce", 4096, 2, 6, {"out_of_place": group, "in_place": group}, {"in_place": stats}
    )
    line = nccl_tests_format.row_line(row)
    headings = header[-2]
    ends = {m.end() for m in re.finditer(r"\S+", headings)}
    assert [m.end() in ends for m in re.finditer(r"\S+", line)] == [True] * 21, (headings, line)
    assert line.split()[-4:] == ["10.00", "40.00", "40.00", "44.72"]  # min, max, p99, cv %
    assert line.split()[9:13] == ["N/A"] * 4  # out of place: no per-iteration times


def test_numbers_too_wide_print_in_e_form_as_printf_does():
    assert nccl_tests_format.float_str(1234567.0, 6) == " 1e+06"
    assert nccl_tests_format.float_str(123456789.0, 7) == "1.2e+08"


def test_nccl_tests_json_keeps_the_nccl_and_torch_environment_and_the_per_iteration_settings(
    monkeypatch,
):
    for name, value in {
        "NCCL_DEBUG": "INFO",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "SECRET": "x",
    }.items():
        monkeypatch.setenv(name, value)
    rows = [_row("all_reduce", 1024, 1e-5, 0, 2)]
    doc = nccl_tests_format.json_document(
        argv=["datamove"],
        world=2,
        min_bytes=1024,
        max_bytes=1024,
        factor=2,
        step_bytes=None,
        warmup=5,
        iters=20,
        check=1,
        graph=0,
        per_iter=True,
        per_iter_skip=3,
        devices=[],
        rows=rows,
        started=datetime.datetime(2026, 1, 2, 3, 4, 5),
    )
    assert [e for e in doc["env"] if not e.startswith(("NCCL_", "TORCH_"))] == []
    assert {"NCCL_DEBUG=INFO", "TORCH_NCCL_BLOCKING_WAIT=1"} <= set(doc["env"])
    assert doc["nccl_version"] == distributed.nccl_version_code()
    config = doc["config"]
    assert (config["per_iter_timing"], config["per_iter_skip"]) == ("true", 3)
    assert config["aggregated_iterations"] == 1  # the header's "agg iters: 1"


def _collective_report(size, seconds=1e-5, spread=0.1):
    timed = timing.Timing(
        [seconds * (1 - spread / 2), seconds, seconds * (1 + spread / 2)], "host clock", size
    )
    return {
        "op": "all_reduce",
        "size": size,
        "groups": {
            "out_of_place": {"refused": "gloo has no such group here"},
            "in_place": {"timing": timed, "wrong": 0, "per_iter_s": []},
        },
    }


def _parsed(*argv: str) -> argparse.Namespace:
    """``argv`` parsed as ``cli.main`` parses it before running the command."""
    args = cli.build_parser().parse_args(argv)
    args.version = args.version_text
    return args


def test_collectives_printer_prints_nccl_tests_blocks_and_writes_the_json(capsys, tmp_path):
    """The rank's reports, fed as the launch feeds them: header stating how calls were launched,
    rows, trailer with the group not measured and the samples' spread, -J written at the end."""
    argv = ["collectives", "-g", "2", "--sizes", "1KiB,2KiB", "-J", str(tmp_path / "out.json")]
    printer = collectives_cmd._NcclTestsPrinter(_parsed(*argv), 2, "gloo")
    devices = [{"rank": 0, "pid": 7, "hostname": "h", "device": 0, "pci": (0, 0, 0), "name": "cpu"}]
    printer({"devices": devices})
    for size in (1024, 2048):
        printer(_collective_report(size))
    out = capsys.readouterr().out
    assert "(launched; nccl-tests: the mean of one sample)" in out.splitlines()[1]
    assert "# Not measured         : out_of_place: gloo has no such group here" in out
    assert "# Sample spread        : median 5.0%, at most 5.0% (2048 B)" in out
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc == printer.docs[0] and [r["size"] for r in doc["results"]] == [1024, 2048]
    assert list(tmp_path.iterdir()) == [tmp_path / "out.json"]  # no temporary file left
    again = [collectives_cmd._reserve(tmp_path / "out.json") for _ in range(2)]
    assert again == [tmp_path / "out.json.0", tmp_path / "out.json.1"]  # as nccl-tests numbers them
    graphs = _parsed("collectives", "-g", "2", "--sizes", "1KiB", "-G", "3")
    collectives_cmd._NcclTestsPrinter(graphs, 2, "nccl")(_collective_report(1024))
    assert (
        "(a new CUDA graph of 20 calls a sample, its first 3 launches timed, mean over ranks;"
        in capsys.readouterr().out
    )


def test_collectives_sweep_over_gloo_ranks_goes_to_4_without_g(capsys, monkeypatch):
    launched = []

    def launch(worker, n, *, backend, timeout_s, kwargs, on_report):
        launched.append(n)
        on_report(0, _collective_report(kwargs["sizes"][0]))
        return [None] * n

    monkeypatch.setattr(distributed, "launch", launch)
    code, out, _ = run(
        capsys,
        "collectives",
        "--sweep-ranks",
        "--backend",
        "gloo",
        "--ops",
        "all_reduce",
        "--sizes",
        "4KiB",
    )
    assert code == 0 and launched == [2, 4]
    assert [line.split()[0] for line in out.splitlines() if not line.startswith("#")] == ["2", "4"]


@pytest.fixture
def torchrun_env(monkeypatch):
    """The variables torchrun gives rank 0 of a world of one, with a free port for its store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in distributed.RANK_ENV:  # set by the command here: restored after the test
        monkeypatch.setenv(name, os.environ.get(name, distributed.RANK_ENV[name]))


@pytest.mark.filterwarnings("ignore:all_reduce 1 KiB. samples spread")
def test_collectives_under_torchrun_joins_its_group_and_rank_0_prints(capsys, torchrun_env):
    argv = ("collectives", "--backend", "gloo", "--sizes", "1KiB", "-w", "1", "-n", "2")
    code, out, _ = run(capsys, *argv, "--samples", "2")
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert code == 0 and [row[0] for row in rows] == ["1024"] and not dist.is_initialized()
    assert "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024" in out


def test_collectives_under_torchrun_with_nccl_drives_the_local_ranks_gpu(
    capsys, monkeypatch, torchrun_env
):
    monkeypatch.setenv("LOCAL_RANK", "1")
    seen = {}
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: seen.update(set_device=i))
    monkeypatch.setattr(
        dist,
        "init_process_group",
        lambda backend, timeout, device_id: seen.update(group=(backend, device_id)),
    )
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    monkeypatch.setattr(
        distributed,
        "collective_sweep",
        lambda rank, world, emit, **kwargs: emit(_collective_report(kwargs["sizes"][0])),
    )
    code, out, _ = run(capsys, "collectives", "--backend", "nccl", "--sizes", "1KiB")
    assert code == 0 and seen == {"set_device": 1, "group": ("nccl", torch.device("cuda", 1))}
    assert [line.split()[0] for line in out.splitlines() if line.strip()[:1].isdigit()] == ["1024"]
    code, out, _ = run(capsys, "collectives", "--backend", "nccl", "--sizes", "1KiB", "--json")
    assert code == 0 and [r["size"] for r in json.loads(out)["results"]] == [1024]  # rank 0's


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_command_and_option_has_its_help():
    for name, parser in _subparsers(cli.build_parser()).items():
        assert parser.description and len(parser.description) > 40, name
        bare = [a.option_strings or a.dest for a in parser._actions if not a.help]
        assert bare == [], f"datamove {name}: options without a help line: {bare}"


def test_the_flags_the_docs_name_are_the_flags_parsed():
    """nvbandwidth's own -b long name; record's folder (a Path, by default the Makefile's OUT,
    where the hints for make unpack look) and --skip-tests."""
    assert _parsed("nvbandwidth", "--bufferSize", "64").buffer_size == 64
    record = _parsed("record", "--skip-tests")
    out = re.search(r"^OUT \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert record.skip_tests and record.out == ROOT / out
    assert _parsed("record", "--out", "elsewhere").out.resolve() == Path("elsewhere").resolve()


def test_an_output_file_in_a_writable_folder_is_taken(tmp_path):
    assert cli_args.parse_output_file(str(tmp_path / "x.json")) == tmp_path / "x.json"
    (tmp_path / "x.json").write_text("old")
    assert cli_args.parse_output_file(str(tmp_path / "x.json")) == tmp_path / "x.json"


def test_record_installs_this_clone_editable_with_its_extras():
    torch_wheel, course = record_check._install_commands()
    assert torch_wheel[-1].startswith("torch>=") and course[1:4] == ["-m", "pip", "install"]
    assert course[-2:] == ["-e", f"{ROOT}[dev,cli]"]


def test_check_measures_each_headline_at_its_baselines_size_and_ranks(monkeypatch):
    """P2P at the baseline's size (notebook 05's experiment); all_reduce's busbw from the NCCL
    ranks' median time, at the baseline's size and ranks."""
    monkeypatch.setattr(hardware, "gpu_count", lambda: 8)
    monkeypatch.setattr(
        experiments,
        "peer_copy_bandwidth",
        lambda sizes, repeats: {"0->1": [_fake_timing(sizes[0], sizes[0] / 4e11)]},
    )
    p2p = record_check._measure_headline("P2P cuda:0 -> cuda:1", {"bytes": 256 * MiB, "ranks": 2})
    assert p2p == pytest.approx(400.0)
    launched = {}

    def launch(worker, ranks, *, backend, timeout_s, kwargs):
        launched.update(ranks=ranks, backend=backend, sizes=kwargs["sizes"])
        return [{"timings": {"all_reduce": [_fake_timing(kwargs["sizes"][0], 0.01)]}}] * ranks

    monkeypatch.setattr(distributed, "launch", launch)
    busbw = record_check._measure_headline("all_reduce busbw", {"bytes": GiB, "ranks": 8})
    assert busbw == pytest.approx(GiB / 0.01 / 1e9 * 2 * 7 / 8)
    assert launched == {"ranks": 8, "backend": "nccl", "sizes": [GiB]}
    assert record_check._measure_headline("all_reduce busbw", {"bytes": GiB, "ranks": 16}) is None


def test_a_notebook_saved_with_another_kernel_still_runs_in_python3(tmp_path, monkeypatch):
    """A learner's copy saved from another Jupyter kernel runs in ``python3`` (the environment
    datamove is installed in), as it ran when recorded."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    kernels = []

    class Client:
        def __init__(self, nb, **kwargs):
            kernels.append(kwargs.get("kernel_name") or nb.metadata.kernelspec.name)

        def execute(self):
            return None

    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "conda-env-other", "display_name": "other"}}
    )
    nbformat.write(nb, tmp_path / "00.ipynb")
    monkeypatch.setattr(nbclient, "NotebookClient", Client)
    notebooks_cmd._execute(tmp_path / "00.ipynb", quick=False)
    assert kernels == ["python3"]


def test_both_ways_each_times_each_direction_on_its_own_stream(monkeypatch):
    """nvbandwidth's bidirectional testcase on two pretend GPUs: cuda:0 -> cuda:1 at 100 GB/s and
    back at 50 GB/s. Each direction's events are recorded on its own copy stream, every copy is
    queued without waiting (both directions run at once), and each rate is that direction's."""
    clock = {"now_s": 0.0, "stream": None, "gpu": None}
    rate = {0: 100e9, 1: 50e9}  # by source GPU
    copies, events_on = [], []

    class Stream:
        def __init__(self, device):
            self.device = device

    class Current:
        def __init__(self, key, value):
            self.key, self.value = key, value

        def __enter__(self):
            self.before, clock[self.key] = clock[self.key], self.value

        def __exit__(self, *exc):
            clock[self.key] = self.before

    class Event:
        def __init__(self, enable_timing):
            self.at_s = None

        def record(self):
            self.at_s = clock["now_s"]
            events_on.append(clock["stream"])

        def elapsed_time(self, end):
            return (end.at_s - self.at_s) * 1e3

    copy = torch.Tensor.copy_

    def copy_(dst, src, non_blocking=False):
        copies.append(non_blocking)
        clock["now_s"] += src.numel() / rate[clock["gpu"]]
        return copy(dst, src)

    randint, placed = torch.randint, []

    def randint_on(*args, device, **kwargs):
        placed.append(device)
        return randint(*args, **kwargs)

    monkeypatch.setattr(torch, "randint", randint_on)
    monkeypatch.setattr(torch.Tensor, "copy_", copy_)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "device", lambda gpu: Current("gpu", gpu))
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: Current("stream", stream))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda gpu=None: None)
    monkeypatch.setattr(timing, "hold_stream", lambda us, gpu=None: None)
    one, other = nvbandwidth_cmd.both_ways_each(0, 1, 4096, samples=3)
    assert placed == ["cuda:0", "cuda:1"]  # each direction's source on its own GPU
    assert (one, other) == (pytest.approx(100.0), pytest.approx(50.0))
    assert copies and all(c is True for c in copies)
    sources = [s.device for s in events_on]  # start and end of 0 -> 1, then of 1 -> 0, per sample
    assert sources == [0, 0, 1, 1] * 4 and len({id(s) for s in events_on[:2]}) == 1


# ---------------------------------------------------------------- what the help and main promise


def _description(*names: str) -> str:
    """The description ``datamove NAMES --help`` prints, its lines joined by single spaces."""
    parser = cli.build_parser()
    for name in names:
        parser = _subparsers(parser)[name]
    return " ".join((parser.description or "").split())


def test_the_descriptions_state_the_units_the_timing_and_the_exit_status():
    top = _description()
    assert "with the course's own code: host <-> GPU copies, peer copies, collectives" in top
    assert top.endswith(
        "compare it with its recordings. Bandwidth in decimal GB/s; sizes with binary prefixes."
    )
    for name in ("h2d", "d2h"):  # the direction named as `datamove --help` lists it
        copy = _description(name)
        assert copy.startswith(cli.COMMANDS[name].removesuffix(" by size") + " on cuda:0"), copy
        assert (
            "pageable ones with a synchronised host clock; warm-up, several samples, median and "
            "spread; contents checked once." in copy
        )
    coll = _description("collectives")
    assert (
        "'# Avg bus bandwidth' (exit 1 on wrong values). Under torchrun it joins torchrun's "
        "group; otherwise it starts -g ranks here (NCCL with a GPU per rank, else gloo)." in coll
    )


def test_every_default_the_help_states_is_the_default_parsed():
    """'(default X)' in an option's help, X read by the option's own type, is what it gets when
    left out (sizes, counts, seconds, the tolerance, record's folder under the clone)."""
    checked = []
    for name, parser in _subparsers(cli.build_parser()).items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            said = re.search(r"\(default:? ([^\s),;]+)", formatter._expand_help(action) or "")
            if not said or action.default is None:
                continue
            text = said.group(1).rstrip(":")
            value = action.type(text) if action.type else text
            if isinstance(action.default, Path):
                value = record_check.ROOT / value
            assert value == action.default, (name, action.option_strings, said.group(0))
            checked.append((name, action.dest))
    assert len(checked) >= 14 and ("collectives", "cudagraph") in checked, checked


def test_collectives_sizes_left_out_are_the_ones_its_help_states():
    """-b, -e and -f default to None and are settled per backend: their help states the values."""
    flags = {
        a.dest: " ".join(a.help.split())
        for a in _subparsers(cli.build_parser())["collectives"]._actions
    }
    smallest = re.search(r"\(default (\w+);", flags["minbytes"]).group(1)
    nccl, gloo = re.search(
        r"\(default (\w+) with nccl, (\w+) with gloo\)", flags["maxbytes"]
    ).groups()
    factor = re.search(r"\(default (\d+)\)", flags["stepfactor"]).group(1)
    assert collectives_cmd.DEFAULT_RANGE == {
        "nccl": (cli_args.parse_size(smallest), cli_args.parse_size(nccl), int(factor)),
        "gloo": (cli_args.parse_size(smallest), cli_args.parse_size(gloo), int(factor)),
    }
    assert "ranks to start without torchrun (default: one per GPU, or 2)" in flags["ngpus"]
    assert flags["cudagraph"].startswith(
        "capture the -n calls in a new CUDA graph each sample and time its first launches, "
        "this many (default 0: launch each call; NCCL only)"
    )


def test_collectives_takes_nccl_tests_flags_by_their_long_names_and_checks_them(capsys):
    args = _parsed("collectives", "--warmup", "3", "-G", "2", "--datatype", "float")
    assert (args.warmup, args.cudagraph, args.datatype) == (3, 2, "float")
    long = _parsed("collectives", "--warmup_iters", "4", "--cudagraph", "0", "-d", "float")
    assert (long.warmup, long.cudagraph) == (4, 0)
    code, _, err = run(capsys, "collectives", "-G", "-1")
    assert code == 2 and "'-1' is not a whole number >= 0" in err
    code, _, err = run(capsys, "collectives", "--datatype", "half")
    assert code == 2 and "notebook 06 times float32" in err


@pytest.mark.parametrize(
    "error, status, says",
    [
        (distributed.WorkerError, 1, "datamove collectives: rank 1 died"),
        (distributed.LaunchTimeout, 1, "datamove collectives: rank 1 died"),
        (cli.UsageError, 2, "datamove collectives: rank 1 died"),
        (KeyboardInterrupt, 130, "datamove collectives: interrupted"),
    ],
)
def test_a_failed_run_is_one_line_on_stderr_naming_the_command(
    capsys, monkeypatch, error, status, says
):
    class Failure(error):  # the launch's exceptions, without an Outcome to build them from
        def __init__(self):
            BaseException.__init__(self, "rank 1 died")

    def fail(args):
        raise Failure()

    monkeypatch.setattr(collectives_cmd, "cmd_collectives", fail)
    code, out, err = run(capsys, "collectives")
    assert (code, out, err) == (status, "", says + "\n")


def test_nvbandwidth_measures_each_testcase_as_its_name_says(fake_nvbandwidth_machine):
    """Host testcases copy pinned memory in their direction on every GPU, with -i samples; the
    bidirectional one times every ordered pair of three GPUs, Total the sum of both ways."""
    machine = fake_nvbandwidth_machine
    machine.gpus = 3
    h2d, d2h, _, bidir = nvbandwidth_cmd.TESTCASES
    (matrix,) = nvbandwidth_cmd.measure(h2d, 4 * MiB, 5)
    assert matrix == [[pytest.approx(50.0)] * 3]
    nvbandwidth_cmd.measure(d2h, 4 * MiB, 5)
    assert machine.host_copies == [("h2d", True, 4 * MiB, 5)] * 3 + [("d2h", True, 4 * MiB, 5)] * 3
    assert machine.host_copies_on == [0, 1, 2, 0, 1, 2]
    write1, write2, total = nvbandwidth_cmd.measure(bidir, 4 * MiB, 5)
    assert write1 == [[None, 100.0, 100.0], [200.0, None, 200.0], [300.0, 300.0, None]]
    assert write2 == [[None, 100.0, 100.0], [100.0, None, 100.0], [100.0, 100.0, None]]
    assert total == [[None, 200.0, 200.0], [300.0, None, 300.0], [400.0, 400.0, None]]


def test_nvbandwidth_names_a_gpu_whose_pci_address_torch_does_not_give_with_zeros(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 2)
    props = [
        types.SimpleNamespace(name="Old GPU"),
        types.SimpleNamespace(name="New GPU", pci_domain_id=1, pci_bus_id=0xAB, pci_device_id=3),
    ]
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    assert nvbandwidth_cmd.device_lines() == [
        "Old GPU (00000000:00:00)",
        "New GPU (00000001:ab:03)",
    ]


def test_nvbandwidth_text_ends_with_its_note_and_only_j_prints_json(
    capsys, fake_nvbandwidth_machine
):
    code, out, err = run(capsys, "nvbandwidth", "-t", "0")
    assert code == 0 and out.endswith("\n" + nvbandwidth_cmd.NVBANDWIDTH_NOTE + "\n")
    assert "{" not in out and err.startswith("datamove: the course's copies under nvbandwidth's")
    code, out, err = run(capsys, "nvbandwidth", "-t", "0", "-j")
    assert json.loads(out)["nvbandwidth"]["testcases"][0]["status"] == "Passed" and err == ""


def test_progress_is_shown_on_a_terminal_without_being_asked(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    progress = cli_output.Progress("check", 2)
    progress.step("H2D pinned")
    assert progress.shown and sys.stderr.getvalue().startswith("\rH2D pinned: 1/2 done, ")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a log file: no bar
    assert not cli_output.Progress("check", 2).shown


def test_check_prints_its_columns_with_their_units_as_text_and_csv(
    capsys, monkeypatch, tmp_path, measured_as_recorded
):
    _write_index(tmp_path, 1.0)
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    code, out, _ = run(capsys, "check")
    lines = out.splitlines()
    assert (
        code == 0
        and lines[0] == f"{MACHINE}: headline figures against results/index.jsonl, tolerance 5%"
    )
    headings = re.split(r"\s{2,}", lines[1].strip(" |").replace("|", "  "))
    assert [h.strip() for h in headings if h.strip()] == [
        "figure",
        "size",
        "GPUs",
        "baseline GB/s",
        "measured GB/s",
        "change",
        "verdict",
    ]
    code, out, _ = run(capsys, "check", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and list(rows[0]) == [
        "figure",
        "size_text",
        "ranks",
        "baseline_gbps",
        "measured_gbps",
        "change",
        "verdict",
    ]
    assert [r["figure"] for r in rows] == list(measured_as_recorded)
    assert {r["verdict"] for r in rows} == {"pass"} and rows[0]["change"] == "+0.0%"


@pytest.fixture
def fake_gpu_run(monkeypatch, tmp_path):
    """``datamove record`` on a pretend GPU machine: each command it runs is kept with its keywords
    and the text stdout had flushed by then; tools/gpu_run.py's run exits ``machine.exit`` and
    writes ``machine.archive`` (None: nothing) into its --out folder."""

    class Stdout(io.StringIO):  # what a pipe has received: the text flushed so far
        flushed = ""

        def flush(self):
            self.flushed = self.getvalue()

    machine = types.SimpleNamespace(
        runs=[], shown=[], exit=0, archive="gpu-results-3xFake.tar.gz", stdout=Stdout()
    )

    def subprocess_run(cmd, **kwargs):
        machine.runs.append((cmd, kwargs))
        machine.shown.append(machine.stdout.flushed)
        if cmd[1].endswith("gpu_run.py") and machine.archive:
            out = Path(cmd[cmd.index("--out") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / machine.archive).write_bytes(b"")
        return subprocess.CompletedProcess(cmd, machine.exit)

    (tmp_path / "results" / "3xFake").mkdir(parents=True)
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # record sets it for gpu_run's children
    monkeypatch.setattr(hardware, "driver_present", lambda: True)
    monkeypatch.setattr(record_check.subprocess, "run", subprocess_run)
    return machine


def test_record_shows_each_install_then_runs_gpu_run_on_every_notebook(
    fake_gpu_run, monkeypatch, tmp_path
):
    stale = records.Problem("3xFake", "01_pinned_memory", "copy_bandwidth: stale")
    elsewhere = records.Problem("2xOther", "01_pinned_memory", "not this machine's")
    checked = []

    def check_recordings(notebooks):
        checked.append([Path(nb).name for nb in notebooks])
        return [stale, elsewhere]

    monkeypatch.setattr(records, "check_recordings", check_recordings)
    monkeypatch.setattr(sys, "stdout", fake_gpu_run.stdout)
    code = cli.main(["record", "--install", "--out", str(tmp_path / "gpu-out")])
    out = fake_gpu_run.stdout.getvalue()
    (pip1, kw1), (pip2, kw2), (gpu_run, kw) = fake_gpu_run.runs
    assert [pip1, pip2] == record_check._install_commands() and kw1 == kw2 == {"check": True}
    assert fake_gpu_run.shown[0] == f"$ {' '.join(pip1)}\n"  # flushed before pip prints
    assert fake_gpu_run.shown[1].endswith(f"$ {' '.join(pip2)}\n")
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("0*.ipynb"))
    assert len(notebooks) == 7 and [Path(a).name for a in gpu_run[4:]] == notebooks
    assert gpu_run[2:4] == ["--out", str((tmp_path / "gpu-out").resolve())]
    assert kw["cwd"] == ROOT and kw["check"] is False and kw["env"]["PYTHONUNBUFFERED"] == "1"
    assert distributed.RANK_ENV.items() <= kw["env"].items() and checked == [notebooks]
    assert code == 1 and "recordings checks on results/3xFake/: 2 problem(s)" in out
    assert f"  - {tmp_path / 'results' / '3xFake'}: holds no recording" in out
    assert "  - copy_bandwidth: stale" in out and "not this machine's" not in out
    assert (
        f"archive: {(tmp_path / 'gpu-out').resolve()}/gpu-results-3xFake.tar.gz; next: make index"
        in out
    )


def test_record_exits_1_when_gpu_run_fails_or_writes_no_archive(
    capsys, fake_gpu_run, monkeypatch, tmp_path
):
    monkeypatch.setattr(records, "check_recordings", lambda notebooks: [])
    monkeypatch.setattr(records, "validate_machine_folder", lambda folder, machine: [])
    assert cli.main(["record", "--out", str(tmp_path / "a")]) == 0
    assert "recordings checks on results/3xFake/: sound" in capsys.readouterr().out
    assert len(fake_gpu_run.runs) == 1  # no install without --install
    fake_gpu_run.exit = 3
    assert cli.main(["record", "--out", str(tmp_path / "b")]) == 1  # the archive, but a failed run
    fake_gpu_run.archive = None
    assert cli.main(["record", "--out", str(tmp_path / "c")]) == 1
    assert capsys.readouterr().err == (
        f"datamove record: tools/gpu_run.py wrote no archive into {(tmp_path / 'c').resolve()} (exit 3)\n"
    )


def test_check_measures_pinned_host_copies_in_their_direction(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    copies = []

    def host_copy(direction, pinned, nbytes):
        copies.append((direction, pinned, nbytes))
        return _fake_timing(nbytes, nbytes / (40e9 if direction == "h2d" else 20e9))

    monkeypatch.setattr(record_check, "host_copy", host_copy)
    monkeypatch.setattr(distributed, "launch", lambda *a, **k: pytest.fail("a collective launched"))
    base = {"bytes": 256 * MiB, "ranks": 1}
    assert record_check._measure_headline("H2D pinned", base) == pytest.approx(40.0)
    assert record_check._measure_headline("D2H pinned", base) == pytest.approx(20.0)
    assert copies == [("h2d", True, 256 * MiB), ("d2h", True, 256 * MiB)]
    assert record_check._measure_headline("P2P cuda:0 -> cuda:1", {**base, "ranks": 2}) is None


def test_an_index_row_that_outgrew_its_recording_names_it_and_says_make_index():
    row = next(
        r
        for r in records.read_index(kind="figure")
        if record_check._matches(r, record_check.HEADLINES[-1], MACHINE)  # all_reduce busbw
    )
    assert record_check._ranks_of(row) >= 2
    stale = dict(row, name="['sweep'][999]['all_reduce']")
    with pytest.raises(cli.UsageError) as err:
        record_check._ranks_of(stale)
    assert str(err.value) == (
        f"results/index.jsonl's row \"['sweep'][999]['all_reduce']\" does not match the recording "
        f"of bandwidth on {MACHINE}: run `make index`"
    )


def _columns(header: list[str]) -> list[tuple[str, str]]:
    """(heading, unit) of each column of nccl-tests' two heading lines, paired by where they end."""
    units = {m.end(): m.group() for m in re.finditer(r"\S+", header[-1][1:])}
    return [(m.group(), units.get(m.end(), "")) for m in re.finditer(r"\S+", header[-2][1:])]


def test_each_nccl_tests_column_states_its_unit_with_and_without_per_iteration_timing():
    """The headings and units of nccl-tests' log (fixture) and, with -I 1, its per-iteration
    columns: i_min, i_max and i_p99 in us, i_cv% in %, after each group's four."""
    real = FIXTURE_LOG.read_text().splitlines()
    at = next(i for i, line in enumerate(real) if line.startswith("#        (B)"))
    lead = [("size", "(B)"), ("count", "(elements)"), ("type", ""), ("redop", ""), ("root", "")]
    group = [("time", "(us)"), ("algbw", "(GB/s)"), ("busbw", "(GB/s)"), ("#wrong", "")]
    assert _columns(real[at - 1 : at + 1]) == lead + group * 2
    assert _columns(_header()) == lead + group * 2
    per_iter = [("i_min", "(us)"), ("i_max", "(us)"), ("i_p99", "(us)"), ("i_cv%", "(%)")]
    assert _columns(_header(per_iter=True)) == lead + (group + per_iter) * 2
    assert "out-of-place (+ per-iteration)" in _header(per_iter=True)[-3]


def test_per_iteration_stats_are_in_microseconds_after_the_skipped_calls():
    times_s = [9e-3, 1e-5, 3e-5, 2e-5, 4e-5]  # the first call slow, left out with -K 1
    stats = nccl_tests_format.per_iter_stats(times_s, 1)
    mean, stdev = 25.0, math.sqrt((15**2 + 5**2 + 5**2 + 15**2) / 4)
    assert stats == {
        "skipped_iterations": 1,
        "min_us": pytest.approx(10.0, rel=1e-12),
        "max_us": pytest.approx(40.0, rel=1e-12),
        "avg_us": pytest.approx(mean, rel=1e-12),
        "p50_us": pytest.approx(30.0, rel=1e-12),
        "p95_us": pytest.approx(40.0, rel=1e-12),
        "p99_us": pytest.approx(40.0, rel=1e-12),
        "stdev_us": pytest.approx(stdev, rel=1e-12),
        "cv_pct": pytest.approx(stdev / mean * 100, rel=1e-12),
        "times_us": pytest.approx([9000.0, 10.0, 30.0, 20.0, 40.0], rel=1e-12),  # every call
    }
    assert nccl_tests_format.per_iter_stats([0.0, 0.0], 0)["cv_pct"] == 0.0
    hundred = nccl_tests_format.per_iter_stats([k * 1e-6 for k in range(100, 0, -1)], 0)
    percentiles = (hundred["p50_us"], hundred["p95_us"], hundred["p99_us"])
    assert percentiles == pytest.approx((51.0, 95.0, 99.0))  # the ceil(n p / 100)-th call
    ninety_nine = nccl_tests_format.per_iter_stats([k * 1e-6 for k in range(1, 100)], 0)
    assert ninety_nine["p99_us"] == pytest.approx(99.0)  # ceil(98.01): the 99th, the slowest


def test_the_summary_averages_the_groups_measured_and_is_zero_without_any():
    assert nccl_tests_format.summary([]) == (0, 0.0)
    rows = [_row("all_reduce", 1024, 1e-5, 2, 2), _row("all_reduce", 4096, 1e-5, 1, 2)]
    rows[0]["out_of_place"] = None  # a group that could not be measured
    rows[1]["out_of_place"] = dict(rows[1]["in_place"], bus_bw=0.0, nwrong=None)
    busbw = [rows[0]["in_place"]["bus_bw"], rows[1]["in_place"]["bus_bw"], 0.0]
    assert nccl_tests_format.summary(rows) == (3, pytest.approx(sum(busbw) / 3))
    doc = nccl_tests_format.json_document(
        argv=["datamove"],
        world=2,
        min_bytes=1024,
        max_bytes=4096,
        factor=None,
        step_bytes=3072,
        warmup=5,
        iters=20,
        check=1,
        graph=0,
        per_iter=False,
        per_iter_skip=0,
        devices=[],
        rows=rows,
        started=datetime.datetime(2026, 1, 2, 3, 4, 5),
    )
    assert doc["out_of_bounds"] == {"count": 3, "okay": "false"}
    assert doc["average_bus_bandwidth"] == {
        "bandwidth": pytest.approx(sum(busbw) / 3),
        "okay": "unchecked",
    }
    assert doc["config"]["step_bytes"] == 3072 and "step_factor" not in doc["config"]


def test_the_collectives_printer_states_a_byte_step_and_per_iteration_timing(capsys, tmp_path):
    argv = ["collectives", "-b", "1K", "-e", "3K", "-i", "1K", "-I", "1"]
    args = _parsed(*argv, "-J", str(tmp_path / "out.json"))
    printer = collectives_cmd._NcclTestsPrinter(args, 2, "gloo")
    assert printer.sizes == [1024, 2048, 3072]
    for size in printer.sizes:
        printer(_collective_report(size))
    header = capsys.readouterr().out.splitlines()
    assert "step: 1024(bytes)" in header[3] and header[4].startswith("# Per-Iteration Report")
    config = json.loads((tmp_path / "out.json").read_text())["config"]
    assert config["step_bytes"] == 1024 and "step_factor" not in config
    assert config["per_iter_timing"] == "true"
    factor = collectives_cmd._NcclTestsPrinter(
        _parsed("collectives", "-b", "1K", "-e", "4K"), 2, "gloo"
    )
    assert factor.factor == 4 and factor.settings["per_iter"] is False


@pytest.mark.parametrize(
    "argv, backend, warning, settled",
    [
        (
            ["-I", "2"],
            "gloo",
            "per-iteration timing (-I) only supports 0=off or 1=on. Disabling.",
            {},
        ),
        (
            ["-I", "1", "-G", "1"],
            "nccl",
            "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling.",
            {"cudagraph": 1},
        ),
        (
            ["-I", "1", "-n", "20", "-K", "20"],
            "gloo",
            "per-iteration skip (-K) must be between 0 and 19. Disabling.",
            {"per_iter_timing": 1},
        ),
        (
            ["-K", "3"],
            "gloo",
            "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.",
            {},
        ),
        (
            ["-I", "1", "-n", "20", "-K", "19"],
            "gloo",
            "",
            {"per_iter_timing": 1, "per_iter_skip": 19},
        ),
    ],
)
def test_per_iteration_flags_nccl_tests_refuses_are_warned_on_stderr_and_turned_off(
    capsys, argv, backend, warning, settled
):
    args = _parsed("collectives", *argv)
    collectives_cmd._settled_flags(args, backend)
    out, err = capsys.readouterr()
    assert (out, err) == ("", warning + "\n" * bool(warning))
    expected = {"per_iter_timing": 0, "per_iter_skip": 0, "cudagraph": 0, **settled}
    assert {k: getattr(args, k) for k in expected} == expected


def test_g_under_gloo_and_a_nccl_rank_sweep_without_gpus_say_what_to_pass(capsys, monkeypatch):
    with pytest.raises(
        cli.UsageError, match=r"the gloo backend runs on the CPU and has none: pass -G 0"
    ):
        collectives_cmd._settled_flags(_parsed("collectives", "-G", "2"), "gloo")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    code, out, err = run(capsys, "collectives", "--sweep-ranks", "--backend", "nccl")
    assert code == 2 and out == ""
    assert err.startswith(
        "datamove collectives: needs 2 CUDA GPU(s) (a sweep over ranks needs 2 GPUs; pass "
        "--backend gloo to sweep CPU ranks), this machine has 0"
    )


def _link(gen, width, gen_max=5, width_max=16):
    return {
        "index": 0,
        "bus_id": "x",
        "gen_current": gen,
        "gen_max": gen_max,
        "width_current": width,
        "width_max": width_max,
    }


@pytest.mark.parametrize(
    "link, status, seen, fix",
    [
        (_link(5, 16), doctor.PASS, "gen 5 x16 now, gen 5 x16 at most (read under load)", ""),
        (
            _link(3, 16),
            doctor.WARN,
            "gen 3 x16 now, gen 5 x16 at most (read under load)",
            "below its generation under load: check the BIOS PCIe speed setting and the slot; idle "
            "power saving can also show this",
        ),
        (
            _link(5, 8),
            doctor.FAIL,
            "gen 5 x8 now, gen 5 x16 at most (read under load)",
            "a degraded width: reseat the card or move it to a full-width slot; check the riser and "
            "BIOS lane settings",
        ),
        (
            _link(5, None),
            doctor.WARN,
            "not reported by the driver",
            "read it with nvidia-smi -q -d PCI",
        ),
    ],
)
def test_a_pcie_link_is_judged_by_width_then_generation_with_what_to_do(link, status, seen, fix):
    (check,) = doctor._check_links({"links": [link]})
    assert (check.name, check.status, check.seen, check.fix or "") == (
        "GPU 0 PCIe link",
        status,
        seen,
        fix,
    )


def test_a_gpu_on_a_numa_node_without_a_cpu_list_has_nothing_to_match():
    facts = {"affinity": [0, 1], "numa": {0: 3, 1: None, 2: 0}, "numa_cpus": {0: [0, 1]}}
    checks = doctor._check_numa(facts)
    assert [(c.name, c.status) for c in checks] == [
        ("GPU 0 NUMA node", doctor.PASS),
        ("GPU 1 NUMA node", doctor.PASS),
        ("GPU 2 NUMA node", doctor.PASS),
    ]
    assert checks[0].seen == checks[1].seen == "one NUMA node (or not reported): nothing to match"
    assert checks[2].seen == "node 0; this process may run on 2 of its CPUs"
    (far,) = doctor._check_numa({**facts, "numa": {0: 0}, "affinity": [5]})
    assert far.fix == "numactl --cpunodebind=0 --membind=0 <command> (pinned buffers near the GPU)"


def test_topo_json_without_a_gpu_has_the_keys_of_one_with_gpus(
    capsys, monkeypatch, fake_three_gpus
):
    code, out, _ = run(capsys, "topo", "--json")
    with_gpus = json.loads(out)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    code, out, _ = run(capsys, "topo", "--json")
    assert code == 0 and json.loads(out) == {
        key: None if key == "source" else [] for key in with_gpus
    }


def test_notebooks_run_says_how_long_each_took_and_passes_quick_on(tmp_path, capsys, monkeypatch):
    ran = []

    def execute(nb, quick):
        ran.append((nb.name, quick))
        return 42.4

    monkeypatch.setattr(notebooks_cmd, "_execute", execute)
    code, out, _ = run(capsys, "notebooks", str(tmp_path), "00", "--run", "--quick")
    assert code == 0 and ran == [("00_start_here.ipynb", True)]
    assert (
        out.splitlines()[-1]
        == f"{tmp_path / '00_start_here.ipynb'}: ran in 42 s, outputs saved in it"
    )
    code, out, _ = run(capsys, "notebooks", str(tmp_path), "00", "--run")
    assert ran[-1] == ("00_start_here.ipynb", False)


def test_executing_a_notebook_takes_its_run_time_and_quick_reaches_the_kernel(
    tmp_path, monkeypatch
):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")

    class Client:
        def __init__(self, nb, **kwargs):
            pass

        def execute(self):
            return None

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "00.ipynb")
    monkeypatch.setattr(nbclient, "NotebookClient", Client)
    monkeypatch.setenv(config.QUICK_ENV, "0")  # so that teardown restores what was there
    monkeypatch.delenv(config.QUICK_ENV)
    assert 0 <= notebooks_cmd._execute(tmp_path / "00.ipynb", quick=False) < 5
    assert config.QUICK_ENV not in os.environ
    notebooks_cmd._execute(tmp_path / "00.ipynb", quick=True)
    assert os.environ[config.QUICK_ENV] == "1"


def test_the_copy_table_states_units_and_lines_each_figure_up_under_its_heading(
    capsys, fake_copies, monkeypatch
):
    """h2d's text: what was copied and in which units, the link's raw rate, then one row per size
    (median, slowest and fastest GB/s, IQR/median, us per copy, share of the link, calls, clock);
    without a reported link its share is '-'."""
    code, out, _ = run(capsys, "h2d", "--sizes", "1MiB")
    title, headings, row = out.splitlines()
    assert code == 0 and title == (
        "H2D from pinned memory on Fake GPU; decimal GB/s, median of the samples (slowest-fastest); "
        "PCIe gen 5 x16: raw 63.0 GB/s per direction (copies reach about 80-90% of it)"
    )
    timed = _fake_timing(MiB, MiB / 50e9)
    cell = re.compile(r"(?:\S+ ?)*\S")  # words one space apart
    cells = dict(zip(cell.findall(headings), cell.findall(row), strict=True))
    assert cells == {
        "size": "1 MiB",
        "GB/s": "50.00",
        "slowest": f"{50 / 1.02:.2f}",
        "fastest": f"{50 / 0.99:.2f}",
        "IQR/median": f"{timed.spread:.3f}",
        "us/copy": f"{MiB / 50e9 * 1e6:.1f}",
        "of link": "79%",
        "calls": "4",
        "clock": "cuda events",
    }
    ends = [m.end() for m in cell.finditer(headings)]  # right-aligned under each heading
    assert [m.end() for m in cell.finditer(row)] == ends
    monkeypatch.setattr(
        copy_cmds,
        "link_of_gpu0",
        lambda: {"gen": None, "width": None, "theoretical_gbps": None, "memory_ceiling_gbps": None},
    )
    code, out, _ = run(capsys, "d2h", "--pageable", "--sizes", "1MiB")
    title, _, row = out.splitlines()
    assert title.startswith("D2H from pageable memory on Fake GPU") and title.endswith(
        "; PCIe link not reported by nvidia-smi"
    )
    assert row.split()[7] == "-"


@pytest.mark.parametrize("size, fix", [("4097", "4096"), ("4098", "4096"), ("2", "4")])
def test_a_copy_size_that_is_not_whole_words_says_the_nearest_one_below(
    capsys, fake_copies, size, fix
):
    code, _, err = run(capsys, "h2d", "--sizes", f"4KiB,{size}")
    assert code == 2 and err == (
        f"datamove h2d: copy sizes are whole 4-byte words (the copied data is int32); {size} bytes "
        f"is not: pass e.g. {fix}\n"
    )


@pytest.mark.parametrize(
    "parse, text, says",
    [
        (
            cli_args.parse_sizes,
            " ",
            "' ' is not a list of sizes: pass e.g. 4KiB:1GiB or 4KiB,64MiB",
        ),
        (
            cli_args.parse_sizes,
            "1:2:3:4",
            "'1:2:3:4': a range is SMALLEST:LARGEST or SMALLEST:LARGEST:FACTOR, e.g. 4KiB:1GiB",
        ),
        (
            cli_args.parse_sizes,
            "4KiB:1GiB:1",
            "'4KiB:1GiB:1': the step factor is a whole number >= 2, e.g. 4KiB:1GiB:2",
        ),
        (
            cli_args.parse_sizes,
            "1MiB:4KiB",
            "'1MiB:4KiB': the largest size (4096 B) is below the smallest (1048576 B): pass the "
            "smallest first, e.g. -b 8 -e 128M",
        ),
        (cli_args.parse_size, "0", f"'0' is not a positive size: pass {cli_args.SIZE_HELP}"),
        (cli_args.parse_size, "4 XB", f"'4 XB' is not a size: pass {cli_args.SIZE_HELP}"),
        (
            cli_args.parse_ranks,
            "65",
            "'65' ranks is more than a launch starts on one machine: pass at most 64 (a "
            "demonstration needs 2 to 8)",
        ),
        (cli_args.parse_ranks, "0", "'0' is not a whole number >= 1"),
        (cli_args.whole(0), "-1", "'-1' is not a whole number >= 0"),
        (cli_args.whole(2), "1.5", "'1.5' is not a whole number >= 2"),
        (
            cli_args.parse_seconds,
            "86401",
            "'86401' is not a timeout: pass the seconds you would wait, a positive number up to "
            "86400, e.g. 60",
        ),
        (cli_args.parse_seconds, "0", "'0' is not a timeout: pass the seconds you would wait"),
        (cli_args.parse_seconds, "inf", "'inf' is not a timeout"),
        (cli_args.parse_seconds, "soon", "'soon' is not a timeout"),
        (
            cli_args.parse_ops,
            ",",
            "unknown collective ',': pass 'all' or names from "
            "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all",
        ),
        (
            cli_args.one_of("sum", why="torch's timed reductions sum"),
            "max",
            "'max': torch's timed reductions sum; pass sum",
        ),
        (
            cli_args.parse_tolerance,
            "1",
            "'1' is not a tolerance: pass a percentage below 100, e.g. 5% (or 0.05)",
        ),
    ],
)
def test_each_bad_value_says_what_was_wrong_and_what_to_pass(parse, text, says):
    with pytest.raises(ValueError) as err:
        parse(text)
    assert str(err.value).startswith(says), str(err.value)


def test_values_at_the_limits_are_taken():
    assert cli_args.parse_ranks("64") == 64 and cli_args.parse_ranks(" 1 ") == 1
    assert cli_args.parse_seconds("86400") == 86400.0 and cli_args.parse_seconds("0.5") == 0.5
    assert cli_args.whole(0)("0") == 0 and cli_args.parse_tolerance("0") == 0.0
    assert cli_args.parse_tolerance("99.9%") == pytest.approx(0.999)
    assert cli_args.one_of("float", why="")(" FLOAT ") == "float"
    assert cli_args.parse_sizes("1KiB:4KiB:2") == [1024, 2048, 4096]
    assert cli_args.parse_sizes("4KiB:4KiB") == [4096] and cli_args.parse_size("1t") == 2**40
    assert cli_args.size_range(1000, 3000, step=1000) == [1000, 2000, 3000]
    assert len(cli_args.size_range(1, 1000, step=1)) == 1000


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(factor=1), "the step factor is a whole number >= 2, e.g. -f 2"),
        (dict(step=0), "pass a step factor (-f 2) or a step in bytes (-i 1M)"),
        (dict(), "pass a step factor (-f 2) or a step in bytes (-i 1M)"),
        (
            dict(step=1, text="-i 1"),
            "'-i 1': 1001 sizes is more than a sweep needs: pass a bigger step or -f 2",
        ),
    ],
)
def test_a_size_range_nccl_tests_would_refuse_says_which_flag_to_pass(kwargs, says):
    with pytest.raises(ValueError) as err:
        cli_args.size_range(1, 1001, **kwargs)
    assert str(err.value) == says


def test_nvbandwidth_v_adds_min_max_and_average_of_the_last_matrix_to_the_json(
    capsys, fake_nvbandwidth_machine
):
    fake_nvbandwidth_machine.gpus = 2
    code, out, _ = run(capsys, "nvbandwidth", "-j", "-v", "-t", "3")
    (bidir,) = json.loads(out)["nvbandwidth"]["testcases"]
    total = [[None, 200.0], [300.0, None]]  # Total: both ways' sum, 1 -> 0 twice as fast
    assert (bidir["min"], bidir["max"], bidir["average"], bidir["sum"]) == (
        0.0,
        300.0,
        250.0,
        500.0,
    )
    assert bidir["bandwidth_description"] == nvbandwidth_cmd.TESTCASES[3].matrices[2][1]
    assert (
        bidir["bandwidth_matrix"][-2:]
        == [["N/A", "200"], ["300", "N/A"]]
        == [["N/A" if v is None else f"{v:g}" for v in row] for row in total]
    )
    code, out, _ = run(capsys, "nvbandwidth", "-j", "-t", "3")
    assert "min" not in json.loads(out)["nvbandwidth"]["testcases"][0]
    assert nvbandwidth_cmd.matrix_stats([[None, None]]) == (0.0, 0.0, 0.0)


def test_nvbandwidth_testcases_by_index_stop_at_the_last_and_cuda_versions_read_as_codes():
    assert nvbandwidth_cmd.find_testcase("3") == nvbandwidth_cmd.TESTCASES[3]
    keys = ", ".join(c.key for c in nvbandwidth_cmd.TESTCASES)
    with pytest.raises(ValueError) as err:
        nvbandwidth_cmd.find_testcase("4")
    assert str(err.value) == (
        f"testcase '4' is not one datamove measures: pass one of {keys} (or its index; -l lists them)"
    )
    codes = [nvbandwidth_cmd._cuda_version_code(v) for v in ("12.8", "13", "13.0", None, "")]
    assert codes == [12080, 13000, 13000, 0, 0]


@pytest.mark.parametrize(
    "change, name, seen, fix",
    [
        (
            {"activity": [{"index": 1, "utilization_pct": 95, "pids": [42, 7]}]},
            "GPU 1 other work",
            "95% busy, other processes: [7]",  # this process (pid 42) left out
            "wait for them, or choose an idle GPU with CUDA_VISIBLE_DEVICES: shared GPUs give wrong "
            "timings",
        ),
        (
            {"driver_cuda": "12.4"},
            "driver vs torch's CUDA",
            "driver supports CUDA 12.4, torch needs 13.0",
            "update the driver, or install a torch built for CUDA <= 12.4",
        ),
        (
            {"torch_cuda": None},
            "driver vs torch's CUDA",
            "torch 2.11.0+cu130 is a CPU build",
            "install PyPI's CUDA build: pip install 'torch>=2.11,<2.15' (make setup does)",
        ),
        (
            {"gpus": 0, "visible_devices": ""},
            "GPUs visible",
            "an NVIDIA driver answers but torch 2.11.0+cu130 sees no GPU (CUDA_VISIBLE_DEVICES='')",
            "install PyPI's CUDA build of torch (make setup here), and check CUDA_VISIBLE_DEVICES",
        ),
        (
            {"memlock": 64 * 2**10},
            "pinned-memory limit (ulimit -l)",
            "64 KiB",
            "raise it: ulimit -l unlimited (limits.conf memlock; docker --ulimit memlock=-1); "
            "registering host memory needs it",
        ),
        (
            {"peer": [[True, False], [True, True]]},
            "peer access",
            "no direct access for 0->1",
            "those copies go through host memory: check nvidia-smi topo -m and IOMMU/ACS settings",
        ),
        (
            {"nccl": {"ok": False, "seen": "rank 1 raised"}},
            "NCCL all_reduce",
            "rank 1 raised",
            "rerun with NCCL_DEBUG=INFO; keep NCCL_NVLS_ENABLE=0; try NCCL_P2P_DISABLE=1 to isolate "
            "the link",
        ),
        (
            {"free_disk": GiB // 2},
            "free disk for traces",
            "512 MiB free at /tmp",
            "free some space, or set COURSE_TRACES_DIR to a roomier folder",
        ),
        (
            {"recorded": ["1xOther"]},
            "recordings for this machine",
            "none for 2xNVIDIA-H200",
            "datamove record, then a pull request with results/<machine>/ (CONTRIBUTING.md: Add "
            "your machine)",
        ),
    ],
)
def test_each_doctor_problem_says_what_was_seen_and_the_command_that_fixes_it(
    change, name, seen, fix
):
    checks = {c.name: c for rule in doctor.DOCTOR_CHECKS for c in rule(_healthy_facts(**change))}
    assert (checks[name].seen, checks[name].fix) == (seen, fix)


def test_a_healthy_machines_checks_say_what_they_saw():
    seen = {c.name: c.seen for rule in doctor.DOCTOR_CHECKS for c in rule(_healthy_facts())}
    assert seen == {
        "GPUs visible": "2 CUDA GPU(s) visible to torch 2.11.0+cu130",
        "driver vs torch's CUDA": "driver supports CUDA 13.0, torch built for 13.0",
        "GPU 0 PCIe link": "gen 5 x16 now, gen 5 x16 at most (read under load)",
        "GPU 1 PCIe link": "gen 5 x16 now, gen 5 x16 at most (read under load)",
        "GPU 0 NUMA node": "node 0; this process may run on 2 of its CPUs",
        "GPU 1 NUMA node": "node 1; this process may run on 2 of its CPUs",
        "GPU 0 other work": "0% busy, other processes: none",
        "GPU 1 other work": "0% busy, other processes: none",
        "pinned-memory limit (ulimit -l)": "unlimited",
        "peer access": "every pair of the 2 GPUs",
        "NCCL all_reduce": "2 ranks returned",
        "free disk for traces": "100 GiB free at /tmp",
        "recordings for this machine": "results/2xNVIDIA-H200/ exists",
    }
