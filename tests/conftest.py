"""Shared test set-up: GPU-marked tests skip (with a reason) where the GPUs are missing."""

import matplotlib
import pytest

matplotlib.use("Agg")

from helpers import hardware, records  # noqa: E402


@pytest.fixture(autouse=True)
def _each_test_describes_its_replays_anew():
    """A replay's full sentence is said once per notebook and kernel; each test is a new kernel."""
    records.running._DESCRIBED.clear()


def pytest_collection_modifyitems(config, items):
    have = hardware.gpu_count()
    for item in items:
        if "gpu2" in item.keywords and have < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 CUDA GPUs, this machine has {have}"))
        elif "gpu" in item.keywords and have < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
