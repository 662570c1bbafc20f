"""Shared test set-up: GPU-marked tests skip (with a reason) where the GPUs are missing."""

import matplotlib
import pytest

matplotlib.use("Agg")

from helpers import hardware, records  # noqa: E402


@pytest.fixture(autouse=True)
def _each_test_describes_its_replays_anew():
    """A replay's full sentence is said once per notebook and kernel; each test is a new kernel."""
    records.running._DESCRIBED.clear()


@pytest.fixture(autouse=True)
def _each_test_starts_without_figures():
    """Tests count the figures a lesson draws: one left open by an earlier test on the same
    worker would be counted too (which test ran before depends on how xdist shares them out)."""
    import matplotlib.pyplot as plt

    plt.close("all")


def pytest_collection_modifyitems(config, items):
    have = hardware.gpu_count()
    for item in items:
        if "gpu2" in item.keywords and have < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 CUDA GPUs, this machine has {have}"))
        elif "gpu" in item.keywords and have < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
