import gc
import io
import json
import os
import platform
import subprocess
import types
import weakref

import pytest
import torch

from helpers import hardware
from helpers.hardware import machine, memory, smi


def test_describe_this_machine_is_plain_json():
    info = hardware.describe()
    assert info["torch"] == torch.__version__
    assert json.loads(json.dumps(info)) == info
    assert len(info["gpus"]) == len(info["peer_access"]) == hardware.gpu_count()


def test_describe_reads_a_two_gpu_machine(monkeypatch):
    """Two fake H200s: the names, PCIe numbers (nvidia-smi's text as ints), peer matrix and name."""
    props = types.SimpleNamespace(
        name="NVIDIA H200",
        total_memory=141 * 2**30,
        major=9,
        minor=0,
        multi_processor_count=132,
        L2_cache_size=60 * 2**20,
    )
    rows = [
        {
            "index": str(i),
            "driver_version": "580.1",
            "pcie.link.gen.current": "5",
            "pcie.link.gen.max": "5",
            "pcie.link.width.current": "16",
            "pcie.link.width.max": "[N/A]",
            "pci.bus_id": f"0000:{i}",
        }
        for i in range(2)
    ]
    monkeypatch.setattr(machine, "gpu_count", lambda: 2)  # describe and peer_access read it
    monkeypatch.setattr(machine, "smi_gpu_rows", lambda: rows)
    monkeypatch.setattr(machine, "_gpu_links", lambda: "GPU0\tX\tNV18")
    monkeypatch.setattr(machine, "_nccl_version", lambda: "2.27.3")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda i, j: (i, j) == (0, 1))
    info = hardware.describe()
    assert (
        info["machine"] == "2xNVIDIA-H200"
        and info["driver"] == "580.1"
        and info["nccl"] == "2.27.3"
    )
    assert info["peer_access"] == [[True, True], [False, True]]
    first = info["gpus"][0]
    assert (first["capability"], first["sm_count"], first["memory_bytes"]) == (
        "9.0",
        132,
        141 * 2**30,
    )
    assert (first["pcie_gen_current"], first["pcie_width_current"], first["pcie_width_max"]) == (
        5,
        16,
        None,
    )
    assert info["gpus"][1]["pci_bus_id"] == "0000:1" and info["gpu_links"] == "GPU0\tX\tNV18"
    assert [gpu["index"] for gpu in info["gpus"]] == [0, 1]
    assert first["l2_bytes"] == 60 * 2**20  # what the L2 check of recordings reads
    assert (info["cpu_cores"], info["os"], info["python"]) == (
        os.cpu_count(),
        platform.platform(),
        platform.python_version(),
    )
    assert (info["torch"], info["cuda"]) == (torch.__version__, torch.version.cuda)
    del props.L2_cache_size  # an older PyTorch does not say: unknown, not 0
    assert hardware.describe()["gpus"][0]["l2_bytes"] is None


def test_nccl_version_and_gpu_links_are_read_as_text_or_none(monkeypatch):
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 27, 3))
    assert machine._nccl_version() == "2.27.3"
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: 22703)
    assert machine._nccl_version() == "22703"

    def no_nccl():
        raise RuntimeError("no NCCL in a CPU build")

    monkeypatch.setattr(torch.cuda.nccl, "version", no_nccl)
    assert machine._nccl_version() is None
    asked = []
    monkeypatch.setattr(
        machine, "nvidia_smi", lambda *args: asked.append(args) or "\n GPU0 X NV18 \n"
    )
    assert machine._gpu_links() == "GPU0 X NV18" and asked == [("topo", "-m")]
    monkeypatch.setattr(machine, "nvidia_smi", lambda *args: None)  # no nvidia-smi
    assert machine._gpu_links() is None


def test_describe_reads_the_cpu_and_ram_from_proc_else_says_what_it_can(monkeypatch):
    files = {
        "/proc/cpuinfo": "processor\t: 0\nmodel name\t: Fake CPU 9000\n",
        "/proc/meminfo": "MemTotal:  2048 kB\n",
    }

    def fake_open(path, *args, **kwargs):
        if path not in files:
            raise FileNotFoundError(path)
        return io.StringIO(files[path])

    monkeypatch.setattr(machine, "open", fake_open, raising=False)
    info = hardware.describe()
    assert (info["cpu"], info["ram_bytes"]) == ("Fake CPU 9000", 2048 * 1024)
    files.clear()  # no /proc (macOS): the platform's words, RAM unknown
    info = hardware.describe()
    assert info["cpu"] == (platform.processor() or platform.machine()) and info["ram_bytes"] is None


def test_machine_name():
    assert hardware.machine_name({"gpus": []}) == "cpu-only"
    two = {"gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]}
    assert hardware.machine_name(two) == "2xNVIDIA-H200"
    assert (
        hardware.machine_name({"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
        == "1xNVIDIA-H100-80GB-HBM3"
    )


def test_report_of_a_recorded_gpu_machine():
    info = {
        "machine": "2xNVIDIA-H200",
        "cpu": "x",
        "cpu_cores": 32,
        "ram_bytes": 2**38,
        "python": "3.12",
        "torch": "2.11",
        "cuda": "13.0",
        "nccl": "2.27",
        "driver": "580",
        "gpus": [
            {
                "index": i,
                "name": "NVIDIA H200",
                "memory_bytes": 141 * 2**30,
                "capability": "9.0",
                "sm_count": 132,
                "pcie_gen_current": 5,
                "pcie_gen_max": 5,
                "pcie_width_current": 16,
                "pcie_width_max": 16,
            }
            for i in range(2)
        ],
        "peer_access": [[True, True], [True, True]],
        "gpu_links": "GPU0 X NV18",
    }
    text = hardware.report(info)
    assert "0->1:yes" in text and "NV18" in text and "63.0 GB/s" in text
    assert "(32 cores), RAM 256.0 GiB" in text and "141.0 GiB" in text
    assert "cuda / nccl    13.0 / 2.27\n" in text
    cpu_only = hardware.report(info | {"cuda": None, "nccl": None, "ram_bytes": None, "gpus": []})
    assert "cuda / nccl    - / -\n" in cpu_only and "RAM ?" in cpu_only
    assert "\ndriver         580\n" in text
    assert cpu_only.splitlines()[4:7] == [
        "driver         580",
        "gpus           none (CUDA not available): GPU experiments replay recordings",
        "peer access    0->1:yes  1->0:yes",
    ]
    assert "\ndriver         -\n" in hardware.report(info | {"driver": None, "gpus": []})


def test_pcie_theoretical():
    assert hardware.pcie_theoretical_gbps(5, 16) == pytest.approx(63.0, rel=0.01)
    assert hardware.pcie_theoretical_gbps(3, 16) == pytest.approx(15.75, rel=0.01)
    assert hardware.pcie_theoretical_gbps(2, 16) == pytest.approx(8.0)  # 8b/10b: 80% of 5 GT/s
    assert hardware.pcie_theoretical_gbps(None, 16) is None


def test_gpu_name_is_the_first_gpus_or_none():
    assert hardware.gpu_name({"gpus": [{"name": "H100"}, {"name": "A100"}]}) == "H100"
    assert hardware.gpu_name({"gpus": []}) is None and hardware.gpu_name({}) is None
    with pytest.raises(TypeError, match="gpu_name reads a machine's description"):
        hardware.gpu_name("H100")


def test_free_memory_collects_garbage_and_reports_nothing_held_without_a_gpu(monkeypatch):
    monkeypatch.setattr(memory, "gpu_count", lambda: 0)

    class Cycle:
        pass

    cycle = Cycle()
    cycle.me = cycle
    alive = weakref.ref(cycle)
    del cycle
    gc.disable()  # only free_memory's own gc.collect() may free the cycle
    try:
        assert hardware.free_memory() == {}
        assert alive() is None
    finally:
        gc.enable()


def _two_fake_gpus(monkeypatch, calls, allocated):
    """Two GPUs whose synchronize, caches and garbage collection note themselves in ``calls``;
    ``allocated`` (a list, changed by the test) is what each GPU's allocator holds."""
    monkeypatch.setattr(memory, "gpu_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda i: calls.append(f"sync {i}"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty device cache"))
    monkeypatch.setattr(
        torch._C, "_host_emptyCache", lambda: calls.append("empty pinned cache"), raising=False
    )
    monkeypatch.setattr(gc, "collect", lambda: calls.append("gc") or 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: allocated[i])
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: 20 + i)
    monkeypatch.setattr(torch.cuda, "host_memory_stats", lambda: {"allocated_bytes.current": 3})


EMPTY = ["sync 0", "sync 1", "empty device cache", "empty pinned cache"]


def test_free_memory_empties_the_caches_after_synchronising_every_gpu(monkeypatch):
    calls = []
    _two_fake_gpus(monkeypatch, calls, [10, 11])
    used = hardware.free_memory()  # no baseline: a garbage collection, then the caches once more
    assert calls == EMPTY + ["gc"] + EMPTY
    assert used == {
        "gpu0_allocated": 10,
        "gpu0_reserved": 20,
        "gpu1_allocated": 11,
        "gpu1_reserved": 21,
        "pinned_host": 3,
    }


def test_pinned_memory_in_use_falls_back_to_the_reserved_bytes(monkeypatch):
    _two_fake_gpus(monkeypatch, [], [10, 11])
    monkeypatch.setattr(torch.cuda, "host_memory_stats", lambda: {"reserved_bytes.current": 5})
    assert hardware.memory_in_use()["pinned_host"] == 5


@pytest.mark.parametrize(
    ("stats", "pinned"),
    [
        ({"reserved_bytes.peak": 9, "allocated_bytes.peak": 7}, 9),
        ({"allocated_bytes.peak": 7}, 7),  # a torch that counts only allocated bytes
        ({}, None),
    ],
)
def test_a_footprint_reads_the_pinned_peak_under_either_key(monkeypatch, stats, pinned):
    _two_fake_gpus(monkeypatch, [], [10, 11])
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda i: 100 + i)
    monkeypatch.setattr(torch.cuda, "host_memory_stats", lambda: stats)
    peak = hardware.footprint()
    assert (peak.gpu, peak.pinned) == ((100, 101), pinned)


def test_free_memory_collects_garbage_only_when_the_experiment_left_memory_held(monkeypatch):
    calls, allocated = [], [10, 11]
    _two_fake_gpus(monkeypatch, calls, allocated)
    before = hardware.memory_in_use()
    assert (
        hardware.free_memory(baseline=before) == before and calls == EMPTY
    )  # nothing left: no gc.collect
    calls.clear()
    allocated[1] = 11 + 2**20  # a tensor the experiment left behind, in a cycle or not
    hardware.free_memory(baseline=before)
    assert calls == EMPTY + ["gc"] + EMPTY


@pytest.mark.gpu
def test_free_memory_returns_pinned_and_device_memory():
    before = hardware.free_memory()
    x = torch.empty(64 * 2**20, dtype=torch.uint8, pin_memory=True)
    y = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
    assert hardware.memory_in_use()["gpu0_allocated"] >= before["gpu0_allocated"] + 64 * 2**20
    del x, y
    after = hardware.free_memory()
    assert after["gpu0_reserved"] <= before["gpu0_reserved"]
    assert after["pinned_host"] <= before["pinned_host"]


def _recorded_topology(machine):
    import json
    from pathlib import Path

    path = (
        Path(__file__).resolve().parent.parent
        / "results"
        / machine
        / "05_device_to_device"
        / "peer_access_and_links.json"
    )
    return json.loads(path.read_text())["result"]["gpu_links"]


def test_gpu_links_reads_the_recorded_h200_tables_despite_terminal_escapes():
    """nvidia-smi underlines the header with ESC[4m on the H200 machines; NV18 must still be read."""
    two = _recorded_topology("2xNVIDIA-H200")
    assert "\x1b[4m" in two
    assert hardware.gpu_links(two) == {(0, 1): "NV18", (1, 0): "NV18"}
    four = hardware.gpu_links(_recorded_topology("4xNVIDIA-H200"))
    assert four == {(i, j): "NV18" for i in range(4) for j in range(4) if i != j}


def test_gpu_links_reads_pcie_tables_and_says_nothing_when_it_cannot():
    table = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\t0-7\t0\nGPU1\tPIX\t X \t0-7\t0\n"
    assert hardware.gpu_links(table) == {(0, 1): "PIX", (1, 0): "PIX"}
    assert hardware.gpu_links(None) == {} and hardware.gpu_links("no table here") == {}


def test_pinned_host_bytes_reads_both_generations_of_key_names():
    older = {"reserved_bytes.current": 64 * 2**20, "allocated_bytes.current": 48 * 2**20}
    newer = {"allocated_bytes.current": 64 * 2**20, "active_bytes.current": 0}
    assert hardware.pinned_host_bytes(older) == (64 * 2**20, 48 * 2**20)
    assert hardware.pinned_host_bytes(newer) == (64 * 2**20, 0)
    assert hardware.pinned_host_bytes({"num_host_alloc": 1}) == (None, None)
    with pytest.raises(TypeError, match="host_memory_stats"):
        hardware.pinned_host_bytes([("allocated_bytes.current", 1)])


def test_the_report_shows_the_topology_matrix_once_without_legend_or_colour_codes():
    topo = (
        "\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18\t0-63\nGPU1\tNV18\t X \t0-63\n\n"
        "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    )
    text = hardware.report({"machine": "2xGPU", "gpus": [], "gpu_links": topo})
    assert "Legend" not in text and "\x1b" not in text and "\t" not in text
    assert text.count("NV18") == 2 and "GPU1" in text


def test_nvidia_smi_gives_its_output_only_when_it_succeeds(monkeypatch):
    runs = []

    def run(command, **kwargs):
        runs.append(command)
        return subprocess.CompletedProcess(
            command, returncode, stdout="0, 580.1, 5, 5, 16, 16, 00000000:18:00.0\n"
        )

    monkeypatch.setattr(smi.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(smi.subprocess, "run", run)
    returncode = 0
    assert smi.smi_gpu_rows() == [
        {
            "index": "0",
            "driver_version": "580.1",
            "pcie.link.gen.current": "5",
            "pcie.link.gen.max": "5",
            "pcie.link.width.current": "16",
            "pcie.link.width.max": "16",
            "pci.bus_id": "00000000:18:00.0",
        }
    ]
    assert runs[0][1].startswith("--query-gpu=index,driver_version,")
    returncode = 9  # no driver, or a GPU fallen off the bus: nothing to read
    assert smi.nvidia_smi("-L") is None and smi.smi_gpu_rows() == []


def test_limit_gpu_memory_sets_each_gpus_share_of_its_memory(monkeypatch):
    """COURSE_GPU_MEMORY_GIB on a bigger GPU: the allocator gets that share, never above 1."""
    set_to = []
    monkeypatch.setattr(memory, "gpu_count", lambda: 2)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda i: types.SimpleNamespace(total_memory=(80 if i == 0 else 8) * 2**30),
    )
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, i: set_to.append((i, f))
    )
    hardware.limit_gpu_memory(16 * 2**30)
    assert set_to == [(0, pytest.approx(0.2)), (1, 1.0)]
    for bad in (0, -1, 1.5, "16", None):
        with pytest.raises(ValueError, match=f"positive number of bytes, got {bad!r}"):
            hardware.limit_gpu_memory(bad)
    assert len(set_to) == 2


def test_start_footprint_resets_the_gpu_and_pinned_peaks_once_cuda_is_running(monkeypatch):
    reset = []
    monkeypatch.setattr(memory, "gpu_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda i: reset.append(i))
    monkeypatch.setattr(
        torch.cuda, "reset_peak_host_memory_stats", lambda: reset.append("pinned"), raising=False
    )
    hardware.start_footprint()
    assert reset == [0, 1, "pinned"]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # nothing allocated yet
    reset.clear()
    hardware.start_footprint()
    assert reset == []
