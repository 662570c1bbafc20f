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
