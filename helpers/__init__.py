"""Helpers for the course on moving data in PyTorch.

One module per job (see ../README.md): ``config`` (quick mode, results folder), ``hardware``
(what is here), ``timing`` (events, synchronised clocks, samples), ``trace`` (profiler traces
as intervals, overlap), ``plotting`` (curves, bars, timelines), ``records`` (recordings,
live-or-replay), ``distributed`` (process groups with timeouts, algbw/busbw), ``claims``
(claims tables with computed verdicts), ``exercises`` (answer checkers).
"""

from importlib.util import find_spec

if find_spec("torch") is None:
    raise ImportError(
        "the course needs PyTorch, which is not installed for this Python. Without an NVIDIA GPU: "
        "pip install torch --index-url https://download.pytorch.org/whl/cpu (PyPI's Linux torch "
        "bundles CUDA, several GB); with one: pip install torch; or pip install "
        "'moving-data-course[torch]' for PyPI's"
    )
