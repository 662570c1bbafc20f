"""CPU tests of the analysis functions defined in notebook 05 (read from the notebook itself)."""

import re
import statistics
from pathlib import Path

import pytest
from notebook_code import definitions

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "05_device_to_device.ipynb"
WANTED_FUNCTIONS = {"plateau", "nvlink_gbps", "duplex_shares", "overlap_word", "follows_current_device",
                    "set_device_decides"}
WANTED_NAMES = {"HIGH", "LOW", "NVLINK_DATASHEET_GBPS"}



@pytest.fixture(scope="module")
def nb05() -> dict:
    """The notebook's analysis functions, executed from its own source in a fresh namespace."""
    return definitions(NOTEBOOK, WANTED_FUNCTIONS | WANTED_NAMES, {"re": re, "statistics": statistics})


def test_plateau_is_the_largest_sizes_not_the_l2_bump(nb05):
    # same-GPU copy on 2xNVIDIA-H200, GB/s at 1 MiB ... 2 GiB: 16 MiB is inflated by the L2 cache
    sizes = [2**20, 2**22, 2**24, 2**26, 2**28, 2**30, 2**31]
    rates = [1049.9, 2753.5, 5068.6, 3872.5, 4154.0, 4244.8, 4240.7]
    start, low, high, figure = nb05["plateau"](sizes, rates)
    assert sizes[start] == 2**28 and (low, high) == (4154.0, 4244.8)
    assert figure == pytest.approx(4240.7)
    assert figure / 396.3 == pytest.approx(10.7, abs=0.05)  # not 5069 / 396.3 = 12.8


def test_plateau_edge_cases(nb05):
    assert nb05["plateau"]([1, 2, 4], [1.0, 2.0, 4.0])[0] == 2  # still rising: the last size alone
    assert nb05["plateau"]([1, 2, 4], [10.0, 10.2, 10.1])[:3] == (0, 10.0, 10.2)
    with pytest.raises(ValueError):
        nb05["plateau"]([1, 2], [1.0])


def test_nvlink_gbps(nb05):
    status = "GPU 0: NVIDIA H200\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
    rate, how = nb05["nvlink_gbps"]("NV18", status, "9.0")
    assert rate == pytest.approx(18 * 26.562) and "nvidia-smi" in how
    assert nb05["nvlink_gbps"]("NV4", None, "8.0")[0] == pytest.approx(100.0)
    assert nb05["nvlink_gbps"]("SYS", status, "9.0")[0] is None
    assert nb05["nvlink_gbps"]("NV2", None, "1.0")[0] is None


class _T:
    def __init__(self, gbps: float) -> None:
        self.gbps = gbps


def test_duplex_shares(nb05):
    both = {"0<->1": [_T(100.0), _T(150.0)]}
    one_way = {"0->1": {1: _T(50.0), 2: _T(100.0)}, "1->0": {1: _T(50.0)}}
    assert nb05["duplex_shares"](both, [1, 2], one_way) == {("0<->1", 1): pytest.approx(1.0)}


def test_overlap_word(nb05):
    high, low = nb05["HIGH"], nb05["LOW"]
    assert nb05["overlap_word"]([high, 0.99]) == "overlap"
    assert nb05["overlap_word"]([0.0, low]) == "no overlap"
    assert nb05["overlap_word"]([0.5, 0.9]) == "partial overlap"


def _state(where: str, current: int, **changes) -> dict:
    state = {"where": where, "current_device": current, "empty_on": f"cuda:{current}",
             "current_stream_on": f"cuda:{current}", "to_cuda1_on": "cuda:1", "to_cuda1_correct": True,
             "to_cuda_on": f"cuda:{current}", "to_cuda_correct": True}
    return {**state, **changes}


def test_set_device_verdict(nb05):
    follows, decides = nb05["follows_current_device"], nb05["set_device_decides"]
    good = {s["where"]: s for s in (_state("after torch.cuda.set_device(1)", 1),
                                    _state("after torch.cuda.set_device(0)", 0))}
    assert decides(good)
    assert not follows(_state("x", 1, empty_on="cuda:0"))
    assert not follows(_state("x", 1, current_stream_on="cuda:0"))
    assert not decides({**good, "after torch.cuda.set_device(1)": _state("after torch.cuda.set_device(1)", 0)})
    assert not decides({**good, "after torch.cuda.set_device(0)": _state("after torch.cuda.set_device(0)", 1)})


# ---------------------------------------------------------------- the topology 05 reads (hardware.gpu_topology)


class _FakeNvml:
    """NVML as pynvml exposes it, for GPUs whose NVLinks go to NVSwitches or straight to a GPU."""

    NVML_NVLINK_MAX_LINKS = 4
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    class NVMLError(Exception):
        pass

    def __init__(self, links: dict[int, list[tuple[str, str]]]) -> None:
        self.links = links  # GPU -> [(remote kind 'gpu<k>' | 'switch', state 'up' | 'down')] per link

    def nvmlDeviceGetCount(self):
        return len(self.links)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, h):
        return type("Pci", (), {"busId": f"00000000:{0x10 + h:02X}:00.0".encode()})

    def _link(self, h, link):
        if link >= len(self.links[h]):
            raise self.NVMLError("no such link")
        return self.links[h][link]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return self.NVML_FEATURE_ENABLED if self._link(h, link)[1] == "up" else 0

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        kind = self._link(h, link)[0]
        return self.NVML_NVLINK_DEVICE_TYPE_SWITCH if kind == "switch" else self.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        kind = self._link(h, link)[0]
        other = int(kind[3:]) if kind.startswith("gpu") else 0x70
        return type("Pci", (), {"busId": f"00000000:{0x10 + other:02X}:00.0"})


def test_gpu_topology_reads_nvml_direct_links_and_switches(monkeypatch):
    from helpers import hardware

    # GPU 0 and 1: two direct links up, one down; GPU 2: no NVLink (PCIe only)
    direct = _FakeNvml({0: [("gpu1", "up"), ("gpu1", "up"), ("gpu1", "down")], 1: [("gpu0", "up"), ("gpu0", "up")],
                        2: []})
    monkeypatch.setattr(hardware, "_nvml", lambda: direct)
    assert hardware.gpu_topology() == {"source": "NVML", "links": [["X", "NV2", "PCIe"], ["NV2", "X", "PCIe"],
                                                                   ["PCIe", "PCIe", "X"]]}
    # an HGX board: every GPU has four links to NVSwitches, one of GPU 2's is down
    switched = _FakeNvml({0: [("switch", "up")] * 4, 1: [("switch", "up")] * 4,
                          2: [("switch", "up")] * 3 + [("switch", "down")]})
    monkeypatch.setattr(hardware, "_nvml", lambda: switched)
    assert hardware.gpu_topology()["links"] == [["X", "NV4", "NV3"], ["NV4", "X", "NV3"], ["NV3", "NV3", "X"]]


def test_gpu_topology_falls_back_to_nvidia_smi_then_to_nothing(monkeypatch):
    from helpers import hardware

    topo = ("\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18\t0-47\nGPU1\tNV18\t X \t0-47\n")
    monkeypatch.setattr(hardware, "_nvml", lambda: None)
    monkeypatch.setattr(hardware, "_nvidia_smi", lambda *args: topo if args == ("topo", "-m") else None)
    assert hardware.gpu_topology() == {"source": "nvidia-smi topo -m", "links": [["X", "NV18"], ["NV18", "X"]]}
    monkeypatch.setattr(hardware, "_nvidia_smi", lambda *args: None)
    assert hardware.gpu_topology() == {"source": None, "links": []}
