"""02, section 2: a loop of 1000 small blocking copies against a non-blocking loop: their runtime
calls, their times, the tutorial's claims on them, and exercises 1 and 3's answers."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ... import analysis, claims, plotting, tables, trace
from ...records import Run
from .returns import NOTEBOOK, TUTORIAL

CALLS = ("cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize")
LOOPS = ("blocking", "non_blocking")


def profiled_loops() -> int:
    """How many loops each profile holds: ``trace.profile``'s ``active`` steps."""
    return inspect.signature(trace.profile).parameters["active"].default


@dataclass(frozen=True)
class Loops:
    """Section 2's facts: runtime calls per loop and in a whole profile, per loop."""

    copies: int
    per_loop: dict[str, dict[str, float]]  # {loop: {runtime call: calls per loop}}
    in_profile: dict[str, dict[str, int]]  # the same over the profile's ``profiled_loops()``
    profilers_own: int  # cudaDeviceSynchronize of the blocking loop's profile: the profiler's
    own: float  # the non-blocking loop's own cudaDeviceSynchronize per loop
    speedup: claims.Value  # blocking time / non-blocking time ("x"; above 1: non-blocking faster)


def facts(run: Run) -> Loops:
    steps, small = profiled_loops(), run.value
    per_loop = {label: small[label]["calls per loop"] for label in LOOPS}
    in_profile = {
        label: {name: round(n * steps) for name, n in calls.items()}
        for label, calls in per_loop.items()
    }
    own = in_profile["blocking"]["cudaDeviceSynchronize"]
    return Loops(
        run.params["count"],
        per_loop,
        in_profile,
        own,
        (in_profile["non_blocking"]["cudaDeviceSynchronize"] - own) / steps,
        claims.ratio(small["blocking"]["time"], small["non_blocking"]["time"]),
    )


def faster(ratio: claims.Value) -> str:
    """Words for a speed ratio (above 1: faster) against 1."""
    return claims.worded(
        claims.compare(ratio, 1, holds_if="above").verdict,
        "faster beyond this run's noise.",
        "slower beyond this run's noise.",
        "the same within the noise.",
    )


def show(run: Run) -> tables.Table:
    """A table of each loop's time (ms), runtime calls in a profile and host time in synchronize
    calls (ms per loop), and bars of the times with their ratio."""
    f, small = facts(run), run.value
    plotting.bars_with_ratios(
        {f"{label} loop": small[label]["time"].median_ms for label in LOOPS},
        title=plotting.machine_title(
            f"{f.copies} copies of {run.params['numel'] * 4} bytes", run.machine, run.live
        ),
        ylabel="time per loop (ms, median)",
    )
    return tables.Table(
        [
            "loop",
            ("time per loop", "ms", ".3f"),
            *CALLS,
            ("host in sync calls, per loop", "ms", ".3f"),
        ],
        [
            (
                label,
                small[label]["time"].median_ms,
                *(f.in_profile[label][name] for name in CALLS),
                small[label]["host in synchronize calls (us per loop)"] / 1e3,
            )
            for label in LOOPS
        ],
        caption=f"{f.copies} tensors of {run.params['numel']} float32; runtime calls counted in a "
        f"profile of {profiled_loops()} loops; the non-blocking loop ran "
        f"{analysis.times(f.speedup)} as fast as the blocking loop (medians of "
        f"{len(small['blocking']['time'].samples_s)} samples)",
    )


def see(run: Run) -> claims.WhatWeSee:
    """The runtime calls per loop, the profiles' ``cudaDeviceSynchronize`` with the profiler's own
    told apart, and the two loops' times (ms) and their ratio."""
    f, small = facts(run), run.value
    b, nb = f.per_loop["blocking"], f.per_loop["non_blocking"]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Per loop of {f.copies} copies: {b['cudaMemcpyAsync']:.0f} and {nb['cudaMemcpyAsync']:.0f} "
        f"`cudaMemcpyAsync` (blocking, non-blocking), {b['cudaStreamSynchronize']:.0f} and "
        f"{nb['cudaStreamSynchronize']:.0f} `cudaStreamSynchronize`."
    )
    seen.say(
        f"The profiles hold {f.in_profile['blocking']['cudaDeviceSynchronize']} and "
        f"{f.in_profile['non_blocking']['cudaDeviceSynchronize']} `cudaDeviceSynchronize` over "
        f"{profiled_loops()} loops. The blocking loop calls none itself, so its {f.profilers_own} "
        "is the profiler's own: `torch.profiler` with CUDA activity synchronises the GPU when it "
        "stops recording, inside the recorded window. Without it the non-blocking loop makes "
        f"{f.own:g} per loop, its final `torch.cuda.synchronize()`; counted per loop with the "
        f"profiler's, it reads {nb['cudaDeviceSynchronize']:g}, which a table of whole calls "
        "rounds to 2. (The tutorial profiles CPU activity only, and that profiler does not "
        "synchronise on exit.)"
    )
    seen.say(
        f"The non-blocking loop took {small['non_blocking']['time'].median_ms:.2f} ms against the "
        f"blocking loop's {small['blocking']['time'].median_ms:.2f} ms: it ran "
        f"{analysis.times(f.speedup)} as fast as the blocking loop, {faster(f.speedup)}"
    )
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The runtime calls of the two loops against the tutorial's background and profile."""
    f = facts(run)
    b, nb = f.per_loop["blocking"], f.per_loop["non_blocking"]
    memcpy = claims.within(min(b["cudaMemcpyAsync"], nb["cudaMemcpyAsync"]) / f.copies, 0.5, 1.5)
    sync = claims.within(b["cudaStreamSynchronize"] / f.copies, 0.5, 1.5)
    none = claims.compare(nb["cudaStreamSynchronize"], 1, holds_if="below")
    one = claims.within(f.own, 0.5, 1.5)
    background = f"{TUTORIAL} (background)"
    for claim, source, measured, holds in (
        (
            ".to() always calls cudaMemcpyAsync [blocking and non-blocking loops]",
            background,
            f"per copy, the fewer of the two loops' counts ({b['cudaMemcpyAsync']:.0f} and "
            f"{nb['cudaMemcpyAsync']:.0f} per loop of {f.copies}); one per copy: a count "
            f"{memcpy.in_words()}",
            memcpy,
        ),
        (
            "With non_blocking=False a cudaStreamSynchronize is called after each cudaMemcpyAsync",
            background,
            f"blocking loop: {b['cudaStreamSynchronize']:.0f} cudaStreamSynchronize for "
            f"{f.copies} copies; one per copy: a count {sync.in_words()}",
            sync,
        ),
        (
            "With non_blocking=True no synchronization is triggered [cudaStreamSynchronize in the "
            "non-blocking loop]",
            background,
            f"non-blocking loop: {nb['cudaStreamSynchronize']:.0f} cudaStreamSynchronize per loop "
            f"of {f.copies} copies (none: {none.in_words()})",
            none,
        ),
        (
            "The non-blocking loop does only one synchronization (the profiler table: 1000 "
            "cudaStreamSynchronize against one device synchronize)",
            f"{TUTORIAL} (1000-tensor loop)",
            f"{f.in_profile['non_blocking']['cudaDeviceSynchronize']} cudaDeviceSynchronize in a "
            f"profile of {profiled_loops()} loops, {f.profilers_own} of them the profiler's own (as "
            f"in the blocking loop's profile): {f.own:g} per loop; one: a count {one.in_words()}",
            one,
        ),
    ):
        table.add(claim, source=source, measured=measured, holds=holds, run=run)


def syncs_per_blocking_copy(run: Run) -> float:
    """Exercise 1: ``cudaStreamSynchronize`` calls per copy in the blocking loop."""
    return facts(run).per_loop["blocking"]["cudaStreamSynchronize"] / run.params["count"]


def blocking_loop_ms(run: Run) -> float:
    """Exercise 3: the blocking loop's median time, in ms."""
    return run.value["blocking"]["time"].median_ms
