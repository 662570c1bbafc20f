"""Helpers for the course on moving data in PyTorch.

One module per job (see ../README.md): ``config`` (quick mode, results folder), ``hardware``
(what is here), ``timing`` (events, synchronised clocks, samples), ``trace`` (profiler traces
as intervals, overlap), ``plotting`` (curves, bars, timelines), ``records`` (recordings,
live-or-replay), ``distributed`` (process groups with timeouts, algbw/busbw), ``claims``
(claims tables with computed verdicts), ``exercises`` (answer checkers).
"""
