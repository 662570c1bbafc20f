"""Helpers for the course on moving data in PyTorch, one module per job (DESIGN.md lists them)."""

from importlib.util import find_spec

if find_spec("torch") is None:
    raise ImportError(
        "the course needs PyTorch, which is not installed for this Python. Without an NVIDIA GPU: "
        "pip install torch --index-url https://download.pytorch.org/whl/cpu (PyPI's Linux torch "
        "bundles CUDA, several GB); with one: pip install torch; or pip install "
        "'moving-data-course[torch]' for PyPI's"
    )
