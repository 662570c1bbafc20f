"""What each notebook shows of its results: one module per lesson, on the package's top floor.

| modules | notebook |
| --- | --- |
| ``start`` | 00_start_here |
| ``pinned`` (a package, one module per section: ``staging``, ``bandwidth``, ``timer``, ``sweep``, ``allocator``; its ``claims_table``) | 01_pinned_memory |
| ``non_blocking/`` (a package: ``returns``, ``loops``, ``six_ways``, ``hazards``, ``pinning``, one per section with its facts, figure, sentences and claims; ``claims_table``) | 02_non_blocking |
| ``streams``, a package: ``ordering`` (1), ``copies`` (2-4: the tutorial's experiment, its requirements, launch order), ``engines`` (3), ``prefetching`` (5), ``common``; ``claims_table`` | 03_streams_and_overlap |
| ``events/`` (a package, one module per section: ``timers`` (1, 3, 4), ``waits`` (2, 7, 8), ``tools`` (5, 6), ``many`` (9), ``errors`` (10), ``common``; ``claims_table``) | 04_event_timing |
| ``peer/``: ``links`` (links, every pair at once), ``devices`` (current device, events across GPUs), ``copies`` (bandwidth within one GPU and between two, latency), ``overlap`` (the eight stream combinations), ``table`` (claims) | 05_device_to_device |
| ``nccl``, a package: ``collectives`` (1), ``host`` (2 and 4: what returns to the host when), ``hangs`` (3: the missing send, wait(timeout)), ``speed`` (4: overlap, 5: bandwidth sweep), ``common``; ``claims_table`` | 06_nccl_point_to_point_and_collectives |

A lesson module turns a notebook's runs (``records.Run``, live or replayed) into what the notebook
shows: tables, figures, the "what we see" sentences (``claims.WhatWeSee``) and the claims table.
It measures nothing: the experiments, the PyTorch being taught, stay in the notebooks. Its tests
(tests/test_lesson_*.py) run it on the committed recordings of every recorded machine.
"""
