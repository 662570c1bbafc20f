"""The rows of notebook 01's claims table, each with its verdict from the runs: where the host
waits for a pageable and a pinned copy, pinned against pageable bandwidth, "up to twice as slow"
at the tutorial's size and per size range, pin-then-copy faster in rare cases, pinning paying off
for large tensors, and pinned memory as a limited resource.

``pinned.claims_table`` adds them in that order. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested through ``pinned`` in
tests/test_lesson_01.py.
"""

from __future__ import annotations

from .. import analysis, claims, timing
from ..records import Run
from . import pinned_sizes
from .pinned_analysis import (
    STAGED,
    MiB,
    bytes_or_unknown,
    host_call_share,
    samples_note,
    stage_bytes,
)
from .pinned_sizes import TUT_PAGEABLE, TUT_PIN_TO

FORUM = "NVIDIA forum thread on pageable copies"
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
GOES_ON = 0.1  # the host inside cudaMemcpyAsync for less than this share of the copy: it "goes on"
RARE = 0.25  # "in rare cases": at no more than this share of the sizes measured


def add_staging(table: claims.ClaimsTable, run_trace: Run) -> None:
    """The forum's two claims on where the host waits: a pageable copy returns only when (nearly)
    all of it is staged, a pinned one is queued and the host goes on (shares of the GPU's copy
    time the host spent inside ``cudaMemcpyAsync``).
    """
    share = host_call_share(run_trace)
    table.add(
        "A copy from pageable memory does not return to the host until (nearly) all of it has been staged",
        source=FORUM,
        measured="time the host spent inside cudaMemcpyAsync over the pageable copy's GPU time "
        f"(non_blocking=True; one profiled copy, so no spread); 'nearly all': at least {STAGED}",
        holds=claims.compare(share["pageable"], STAGED, holds_if="above"),
        run=run_trace,
    )
    table.add(
        "From pinned memory the copy is queued and the host goes on (pinned memory is the reliable way to async copies)",
        source=FORUM,
        measured="time the host spent inside cudaMemcpyAsync, as a share of the pinned copy's GPU time "
        f"(one profiled copy, so no spread); 'goes on': below {GOES_ON}",
        holds=claims.compare(share["pinned"], GOES_ON, holds_if="below"),
        run=run_trace,
    )


def add_bandwidth(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's "much faster than pageable memory": the least pinned / pageable H2D rate
    ratio from 1 MiB up.
    """
    sizes, rows = run.value["sizes"], run.value["rows"]
    big = [i for i, n in enumerate(sizes) if n >= MiB]
    gains = [
        claims.ratio(
            claims.measured(rows[i]["h2d_pinned"], as_rate=True),
            claims.measured(rows[i]["h2d_pageable"], as_rate=True),
        )
        for i in big
    ]
    least = min(range(len(gains)), key=lambda j: gains[j].value) if big else 0
    faster = claims.compare(gains[least], 1, holds_if="above") if big else None
    table.add(
        "Page-locked memory lets the device read it directly, much faster than pageable memory, "
        "which must first be copied to a page-locked buffer",
        source=f"{TUTORIAL} (background)",
        measured=(
            f"the smallest pinned / pageable H2D bandwidth ratio from 1 MiB up (at "
            f"{timing.format_bytes(sizes[big[least]])}; the largest is "
            f"{max(g.value for g in gains):.2f}x); faster: {faster.in_words()}"
            if faster is not None
            else "no size of 1 MiB or more"
        ),
        holds=faster,
        run=run,
    )


def add_twice_as_slow(table: claims.ClaimsTable, run_tut: Run, run_pin: Run) -> None:
    """The tutorial's "up to twice as slow": at its size under its Timer, then per size range
    under the host clock (``pinned_sizes.twice_as_slow_verdicts``).
    """
    tutorial = pinned_sizes.tutorial_ratio(run_tut)
    table.add(
        pinned_sizes.TWICE_AT_TUTORIAL,
        source=f"{TUTORIAL} (what you will learn)",
        measured=f"t({TUT_PIN_TO}) / t({TUT_PAGEABLE}) under torch.utils.benchmark.Timer (the tutorial's r2"
        f"{samples_note(tutorial.value.samples)}); holds {tutorial.in_words()}",
        holds=tutorial,
        run=run_tut,
    )
    for label, (comparison, explanation) in pinned_sizes.twice_as_slow_verdicts(run_pin).items():
        table.add(
            pinned_sizes.twice_claim(label),
            source=f"{TUTORIAL} (what you will learn)",
            measured=f"the worst t(pin_memory().to(non_blocking=True)) / t(pageable .to()) in the range: "
            f"{explanation}; holds {comparison.in_words()}",
            holds=comparison,
            run=run_pin,
        )


def add_rare_and_large(table: claims.ClaimsTable, run_pin: Run) -> None:
    """The tutorial's "pin-then-copy can, in rare cases, be faster" per case of the size sweep,
    and "pinning pays off for large tensors" at its largest size.
    """
    sizes = run_pin.value["sizes"]
    for case, values in pinned_sizes.nonblocking_ratios(run_pin).items():
        best = min(range(len(values)), key=lambda i: values[i].value)
        faster = [claims.compare(v, 1, holds_if="below") for v in values]
        wins = sum(c.verdict == claims.HOLDS for c in faster)
        # "can be faster": at one size at least; "in rare cases": at no more than RARE of the sizes
        rare = claims.compare(
            claims.Value(wins / len(values), unit=f"of {len(values)} sizes"), RARE, holds_if="below"
        )
        name, decisive = analysis.weakest({"faster somewhere": faster[best], "rare": rare})
        table.add(
            "pin_memory() (a new pinned storage) followed by the copy can, in rare cases, be faster than "
            f"the driver's chunked copy from pageable memory [{case}]",
            source=TUTORIAL,
            measured=f"t(pin_memory().to(non_blocking=True)) / t(pageable .to()): smallest "
            f"{values[best].number()} at {timing.format_bytes(sizes[best])} (faster: {faster[best].in_words()}); "
            f"faster beyond this run's noise at {wins} of {len(values)} sizes ('rare': at most "
            f"{RARE:.0%} of them); shown: {name}",
            holds=decisive,
            run=run_pin,
        )
    last = run_pin.value["rows"][-1]
    pays = claims.compare(
        claims.ratio(last["pin_then_to"], last["pageable_to"]), 1, holds_if="below"
    )
    table.add(
        "Pinning pays off for large tensors",
        source=f"{TUTORIAL} (advice)",
        measured=f"t(pin_memory().to()) / t(pageable .to()) at the largest size, {timing.format_bytes(sizes[-1])}, "
        f"warm cache; pays: {pays.in_words()}",
        holds=pays,
        run=run_pin,
    )


def add_limited(table: claims.ClaimsTable, run_alloc: Run) -> None:
    """The tutorial's "pinned memory is a limited resource": not testable (it is not exhausted on
    purpose), so the row says what pinning cost instead.
    """
    largest = run_alloc.value["rows"][-1]
    table.add(
        "Pinned memory is more limited than pageable memory: a limited resource",
        source=f"{TUTORIAL} (background and advice)",
        measured=f"not exhausted on purpose (that would starve the machine); its cost was measured instead: the first "
        f"pinned allocation of {timing.format_bytes(largest['nbytes'])} took "
        f"{largest['first'].median_s / largest['pageable'].median_s:.1f} times as long as a pageable one, "
        f"and the cache kept {bytes_or_unknown(stage_bytes(run_alloc)['tensor deleted'][0])} pinned after the tensor "
        "was deleted",
        holds=None,
        run=run_alloc,
    )
