"""What each notebook shows of its results: one module per lesson, on the package's top floor.

| module | notebook |
| --- | --- |
| ``start`` | 00_start_here |
| ``pinned`` | 01_pinned_memory |
| ``non_blocking`` | 02_non_blocking |
| ``streams`` | 03_streams_and_overlap |
| ``events`` | 04_event_timing |
| ``peer`` | 05_device_to_device |
| ``nccl`` | 06_nccl_point_to_point_and_collectives |

A lesson module turns a notebook's runs (``records.Run``, live or replayed) into what the notebook
shows: tables, figures, the "what we see" sentences (``claims.WhatWeSee``) and the claims table.
It measures nothing: the experiments, the PyTorch being taught, stay in the notebooks. Its tests
(tests/test_lesson_*.py) run it on the committed recordings of every recorded machine.
"""
