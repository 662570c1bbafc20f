"""Shared test set-up: GPU-marked tests skip (with a reason) where the GPUs are missing."""

import matplotlib
import pytest

matplotlib.use("Agg")

from helpers import hardware  # noqa: E402


def pytest_collection_modifyitems(config, items):
    have = hardware.gpu_count()
    for item in items:
        if "gpu2" in item.keywords and have < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 CUDA GPUs, this machine has {have}"))
        elif "gpu" in item.keywords and have < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
