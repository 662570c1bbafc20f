"""The numbers notebook 02's tables, sentences and claims rest on: the share of a copy the host
waited, the runtime calls of the profiled loops, the speed-ups of the six timings, tensordict and
the DataLoader, and the labels of the cases each run records.

``non_blocking`` shows them, ``non_blocking_claims`` judges the claims by them; both import them
from here, and ``non_blocking`` re-exports them. Every function takes the notebook's runs
(``records.Run``, live or replayed) and measures nothing. Tested in tests/test_lesson_02.py.
"""

from __future__ import annotations

import inspect

from .. import analysis, claims, trace
from ..records import Run

PINNED_NB = "H2D from pinned, non_blocking"
PAGEABLE_NB = "H2D from pageable, non_blocking"
PIN_THEN_NB = "H2D pin_memory() then non_blocking"
D2H_BLOCKING, D2H_NB = "D2H, blocking", "D2H, non_blocking"


def returned_share(copy: dict) -> float:
    """The median time until ``.to()`` returned over the median time until the copy finished."""
    return copy["returned"].median_s / copy["finished"].median_s


def waited(run: Run) -> dict[str, claims.Value]:
    """``{copy: share}``: the median time until ``.to()`` returned over the median time until the
    copy finished (0 to 1, unit "of the copy", the share the table and sentences print), with the
    spread of that share across the samples: both times of a sample come from the same copy, so
    the spread is that of the per-sample shares (``analysis.paired``), not the two sides' spreads
    added as if they were independent.
    """
    shares = {}
    for label, r in run.value.items():
        per_sample = analysis.paired(
            r["returned"].samples_s, r["finished"].samples_s, unit="of the copy"
        )
        shares[label] = claims.Value(
            returned_share(r), per_sample.spread, per_sample.unit, per_sample.samples
        )
    return shares


def profiled_loops() -> int:
    """How many loops each profile of section 2 holds: ``trace.profile``'s ``active`` steps."""
    return inspect.signature(trace.profile).parameters["active"].default


def calls_in_profile(run: Run) -> dict[str, dict[str, int]]:
    """``{loop: {runtime call: count}}``: the calls in each loop's whole profile (the recording
    keeps calls per loop, the profile's count over ``profiled_loops()``).
    """
    steps = profiled_loops()
    return {
        label: {name: round(n * steps) for name, n in r["calls per loop"].items()}
        for label, r in run.value.items()
    }


def own_device_syncs(run: Run) -> tuple[int, float]:
    """The profiler's own ``cudaDeviceSynchronize`` calls in a profile (those of the blocking
    loop's, which calls none itself), and the non-blocking loop's own calls per loop without them.
    """
    in_profile = calls_in_profile(run)
    profilers_own = in_profile["blocking"]["cudaDeviceSynchronize"]
    return profilers_own, (
        in_profile["non_blocking"]["cudaDeviceSynchronize"] - profilers_own
    ) / profiled_loops()


def loop_speedup(run: Run) -> claims.Value:
    """The blocking loop's median time over the non-blocking loop's ("x"; above 1: the
    non-blocking loop is faster), spreads added.
    """
    return claims.ratio(run.value["blocking"]["time"], run.value["non_blocking"]["time"])


def six_speedups(run: Run) -> dict[str, claims.Value]:
    """``{source: blocking time / non_blocking=True time}`` ("x"; above 1: ``non_blocking``
    faster), medians, spreads added.
    """
    return {
        way: claims.ratio(modes["blocking"], modes["non_blocking=True"])
        for way, modes in run.value.items()
    }


def gigabytes(run: Run) -> float:
    return run.params["count"] * run.params["numel"] * 4 / 1e9


HELD = [
    "D2H non_blocking, read at once (stream held)",
    "H2D pinned, source zeroed at once (stream held)",
]
FIXES = [
    "D2H non_blocking, synchronize before reading",
    "D2H non_blocking, event before reading",
    "H2D pinned, event before zeroing the source",
]
SAFE = [
    "H2D pageable, source zeroed at once (stream held)",
    "H2D pinned, result used on the GPU",
    "D2H non_blocking into pageable memory",
    "D2H blocking",
]


def shown(label: str) -> str:
    """A hazard case's label as printed: the recording says "tutorial's form", but the code is
    the tutorial's setting, not literally its code."""
    return label.replace("(tutorial's form)", "(tutorial's setting)")


def tensordict_ratios(run: Run) -> dict[str, claims.Value]:
    """Ratios of times ("x"; below 1: the first is faster), spreads added: ``"pin vs default"``
    (``non_blocking_pin=True, num_threads=0`` over ``td.to('cuda:0')``) and ``"threads vs main"``
    (``num_threads=N`` over ``num_threads=0``).
    """
    times = run.value["timings"]
    _, default, pin_main, pin_threads = list(times)
    return {
        "pin vs default": claims.ratio(times[pin_main], times[default]),
        "threads vs main": claims.ratio(times[pin_threads], times[pin_main]),
    }


def dataloader_speedup(run: Run) -> claims.Value:
    """The epoch's median time without ``pin_memory`` over with it ("x"; above 1: faster
    pinned), spreads added.
    """
    return claims.ratio(
        run.value["pin_memory=False"]["epoch"], run.value["pin_memory=True"]["epoch"]
    )


def gpu_work_ms(run: Run) -> float:
    """The GPU's stand-in work in one epoch, in ms: the spin per batch times the batches."""
    return run.params["step_ms"] * run.value["pin_memory=True"]["batches"]


def all_pinned_or_none(run: Run) -> tuple[bool, str]:
    """Whether every batch came out pinned with ``pin_memory=True`` and none without, and the
    counts in words.
    """
    dl = run.value
    holds = (
        dl["pin_memory=True"]["pinned batches"] == dl["pin_memory=True"]["batches"]
        and dl["pin_memory=False"]["pinned batches"] == 0
    )
    return holds, ", ".join(
        f"{label}: {r['pinned batches']} of {r['batches']} pinned" for label, r in dl.items()
    )
