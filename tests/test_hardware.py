import pytest
import torch

from helpers import hardware


def test_describe_is_plain_and_names_the_machine():
    info = hardware.describe()
    assert info["torch"] == torch.__version__
    assert len(info["gpus"]) == hardware.gpu_count()
    assert info["machine"] == hardware.machine_name(info)
    assert "machine" in hardware.report(info)


def test_machine_name():
    assert hardware.machine_name({"gpus": []}) == "cpu-only"
    two = {"gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]}
    assert hardware.machine_name(two) == "2xNVIDIA-H200"
    assert hardware.machine_name({"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}) == "1xNVIDIA-H100-80GB-HBM3"


def test_report_of_a_recorded_gpu_machine():
    info = {
        "machine": "2xNVIDIA-H200", "cpu": "x", "cpu_cores": 32, "ram_bytes": 2**38,
        "python": "3.12", "torch": "2.11", "cuda": "13.0", "nccl": "2.27", "driver": "580",
        "gpus": [{"index": i, "name": "NVIDIA H200", "memory_bytes": 141 * 2**30, "capability": "9.0",
                  "sm_count": 132, "pcie_gen_current": 5, "pcie_gen_max": 5,
                  "pcie_width_current": 16, "pcie_width_max": 16} for i in range(2)],
        "peer_access": [[True, True], [True, True]], "gpu_links": "GPU0 X NV18",
    }
    text = hardware.report(info)
    assert "0->1:yes" in text and "NV18" in text and "63.0 GB/s" in text


def test_pcie_theoretical():
    assert hardware.pcie_theoretical_gbps(5, 16) == pytest.approx(63.0, rel=0.01)
    assert hardware.pcie_theoretical_gbps(None, 16) is None


def test_require_gpus_says_what_to_do():
    with pytest.raises(ValueError, match="replay"):
        hardware.require_gpus(hardware.gpu_count() + 1, "peer copies")
    hardware.require_gpus(0)
    with pytest.raises(TypeError):
        hardware.require_gpus(-1)


def test_check_device():
    assert hardware.check_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="does not exist"):
        hardware.check_device(f"cuda:{hardware.gpu_count()}")
    with pytest.raises(ValueError, match="unknown device"):
        hardware.check_device("gpu0")
    with pytest.raises(TypeError):
        hardware.check_device(1.5)


def test_check_count_says_what_is_counted():
    assert hardware.check_count(3, "repeats", 1) == 3
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1, got 0"):
        hardware.check_count(0, "repeats", 1)
    with pytest.raises(ValueError, match="active must be a whole number of steps >= 1, got 1.5"):
        hardware.check_count(1.5, "active", 1, "steps")
    with pytest.raises(ValueError):
        hardware.check_count(True, "warmup")


def test_check_cuda_tensor_and_size():
    with pytest.raises(TypeError, match="to\\('cuda'\\)"):
        hardware.check_cuda_tensor(torch.zeros(2), "x")
    with pytest.raises(TypeError):
        hardware.check_cuda_tensor([1, 2])
    assert hardware.check_size(4) == 4
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            hardware.check_size(bad)
    with pytest.raises(TypeError):
        hardware.check_size(1.5)


def test_free_memory_reports_use():
    used = hardware.free_memory()
    assert set(used) == set(hardware.memory_in_use())


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

    path = Path(__file__).resolve().parent.parent / "results" / machine / "05_device_to_device" / "peer_access_and_links.json"
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
