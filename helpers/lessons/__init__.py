"""What each notebook shows of its results: one module per lesson, on the package's top floor.

| modules | notebook |
| --- | --- |
| ``start`` | 00_start_here |
| ``pinned`` (bandwidth, staging, the tutorial's timings, the allocator, claims), ``pinned_analysis`` (the numbers behind them), ``pinned_claims`` (the claims table's rows), ``pinned_sizes`` (the size sweep, "up to twice as slow") | 01_pinned_memory |
| ``non_blocking`` (each section), ``non_blocking_analysis`` (the numbers behind them), ``non_blocking_plots`` (the figures), ``non_blocking_claims`` (claims, exercise answers) | 02_non_blocking |
| ``streams`` (kernels on streams, the copy engines, exercise answers), ``streams_copies`` (a copy beside a kernel: the tutorial's experiment, launch order, prefetching), ``streams_claims`` (the tutorial's requirements, claims) | 03_streams_and_overlap |
| ``events`` (timers, warm-up, spread, resolution, tools, claims), ``events_analysis`` (the numbers behind both), ``events_claims`` (the claims table's rows), ``events_sync`` (waits, ordering, many streams, errors) | 04_event_timing |
| ``peer/``: ``links`` (links, every pair at once), ``devices`` (current device, events across GPUs), ``copies`` (bandwidth within one GPU and between two, latency), ``overlap`` (the eight stream combinations), ``table`` (claims) | 05_device_to_device |
| ``nccl`` (collectives, point-to-point, hangs), ``nccl_analysis`` (the numbers and facts behind them), ``nccl_speed`` (overlap, bandwidth sweep), ``nccl_claims`` | 06_nccl_point_to_point_and_collectives |

A lesson module turns a notebook's runs (``records.Run``, live or replayed) into what the notebook
shows: tables, figures, the "what we see" sentences (``claims.WhatWeSee``) and the claims table.
It measures nothing: the experiments, the PyTorch being taught, stay in the notebooks. Its tests
(tests/test_lesson_*.py) run it on the committed recordings of every recorded machine.
"""
