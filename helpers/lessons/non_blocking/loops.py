"""02, section 2: 1000 small blocking copies against a non-blocking loop (calls, ms)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass

from ... import analysis, claims, plotting, tables, trace
from ...records import Run
from .returns import NOTEBOOK, TUTORIAL

CALLS = ("cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize")
LOOPS = ("blocking", "non_blocking")
SYNC_US = "host in synchronize calls (us per loop)"
CLAIMS = (
    ".to() always calls cudaMemcpyAsync [blocking and non-blocking loops]",
    "With non_blocking=False a cudaStreamSynchronize is called after each cudaMemcpyAsync",
    "With non_blocking=True no synchronization is triggered [cudaStreamSynchronize in the non-blocking loop]",
    "The non-blocking loop does only one synchronization (the profiler table: 1000 cudaStreamSynchronize against one device synchronize)",
)
COLUMNS = ["loop", ("time per loop", "ms", ".3f"), *CALLS]
COLUMNS += [("host in sync calls, per loop", "ms", ".3f")]
EFFECTIVE = 1.1  # a speed-up counted "effective" (here and in section 3's claims)


def effective_claim(what: str) -> str:
    """The tutorial's "non_blocking is effective" claim, on the loop ``what`` names."""
    return f"Generally, tensor.to(device, non_blocking=True) is an effective choice for enhancing transfer speed [{what}]"


def what(run: Run) -> str:
    """This section's loop, as its claim names it."""
    return f"{run.params['count']} x {run.params['numel'] * 4} B, pageable"


def profiled_loops() -> int:
    """How many loops each profile holds: ``trace.profile``'s ``active`` steps."""
    return inspect.signature(trace.profile).parameters["active"].default


@dataclass(frozen=True)
class Loops:
    """Section 2's facts: runtime calls per loop and in a whole profile, and the loops' speeds."""

    copies: int
    per_loop: dict[str, dict[str, float]]  # {loop: {runtime call: calls per loop}}
    in_profile: dict[str, dict[str, int]]  # the same over the profile's ``profiled_loops()``
    profilers_own: int  # cudaDeviceSynchronize of the blocking loop's profile: the profiler's
    own: float  # the non-blocking loop's own cudaDeviceSynchronize per loop
    speedup: claims.Value  # blocking time / non-blocking time ("x"; above 1: non-blocking faster)
    recorded: tuple[float, ...]  # the speed-up in the recorded runs of this kind (its claim's)
    ms: dict[str, float]  # median time per loop


def facts(run: Run) -> Loops:
    steps, small = profiled_loops(), run.value
    per_loop = {label: small[label]["calls per loop"] for label in LOOPS}
    in_profile = {k: {c: round(n * steps) for c, n in v.items()} for k, v in per_loop.items()}
    own = in_profile["blocking"]["cudaDeviceSynchronize"]
    nb_own = (in_profile["non_blocking"]["cudaDeviceSynchronize"] - own) / steps
    speedup = claims.ratio(small["blocking"]["time"], small["non_blocking"]["time"])
    ms = {label: small[label]["time"].median_ms for label in LOOPS}
    effective = claims.compare(speedup, EFFECTIVE, holds_if="above")
    runs = claims.judged(effective, run, NOTEBOOK, effective_claim(what(run))).runs
    return Loops(run.params["count"], per_loop, in_profile, own, nb_own, speedup, runs, ms)


def faster(ratio: claims.Value, runs: tuple[float, ...] = ()) -> str:
    """Words for a speed ratio (above 1: faster) against 1; ``runs``: its recorded runs here."""
    against, noise = claims.compare(ratio, 1, holds_if="above"), "beyond this run's noise"
    said = claims.worded(
        against.verdict, f"faster {noise}", f"slower {noise}", "the same within the noise"
    )
    both = dataclasses.replace(against, runs=runs)
    if both.borderline() == "runs":
        said += (
            f", but the runs recorded on this kind of machine lie on both sides ({both.evidence()})"
        )
    return said + "."


def show(run: Run) -> tables.Table:
    """Each loop's time (ms), calls in a profile and ms in synchronize calls; bars of the times."""
    f, small = facts(run), run.value
    title = f"{f.copies} copies of {run.params['numel'] * 4} bytes"
    title = plotting.titled(title, run)
    bars = {f"{label} loop": f.ms[label] for label in LOOPS}
    plotting.bars_with_ratios(bars, title=title, ylabel="time per loop (ms, median)")
    rows = [
        (k, f.ms[k], *(f.in_profile[k][c] for c in CALLS), small[k][SYNC_US] / 1e3) for k in LOOPS
    ]
    caption = f"{f.copies} tensors of {run.params['numel']} float32; runtime calls counted in a profile of {profiled_loops()} loops; the non-blocking loop ran {analysis.times(f.speedup)} as fast as the blocking loop (medians of {len(small['blocking']['time'].samples_s)} samples)"
    return tables.Table(COLUMNS, rows, caption=caption)


def see(run: Run) -> claims.WhatWeSee:
    """The runtime calls per loop, the profiler's own synchronize told apart, the loops' times."""
    f, seen = facts(run), claims.WhatWeSee(NOTEBOOK, run)
    b, nb, prof = f.per_loop["blocking"], f.per_loop["non_blocking"], f.in_profile
    seen.say(
        f"Per loop of {f.copies} copies: {b['cudaMemcpyAsync']:.0f} and {nb['cudaMemcpyAsync']:.0f} `cudaMemcpyAsync` (blocking, non-blocking), {b['cudaStreamSynchronize']:.0f} and {nb['cudaStreamSynchronize']:.0f} `cudaStreamSynchronize`.",
        f"The profiles hold {prof['blocking']['cudaDeviceSynchronize']} and {prof['non_blocking']['cudaDeviceSynchronize']} `cudaDeviceSynchronize` over {profiled_loops()} loops. The blocking loop calls none itself, so its {f.profilers_own} is the profiler's own: `torch.profiler` with CUDA activity synchronises the GPU when it stops recording, inside the recorded window. Less the profiler's, the non-blocking loop's profile holds {prof['non_blocking']['cudaDeviceSynchronize'] - f.profilers_own} over {profiled_loops()} loops: {f.own:g} per loop, its final `torch.cuda.synchronize()`. (The tutorial profiles CPU activity only, and that profiler does not synchronise on exit.)",
        f"The non-blocking loop took {f.ms['non_blocking']:.2f} ms against the blocking loop's {f.ms['blocking']:.2f} ms: it ran {analysis.times(f.speedup)} as fast as the blocking loop, {faster(f.speedup, f.recorded)}",
    )
    counts = (b["cudaMemcpyAsync"], nb["cudaMemcpyAsync"], b["cudaStreamSynchronize"])
    as_said = counts == (f.copies,) * 3 and nb["cudaStreamSynchronize"] == 0 and f.own == 1
    calls = f"{f.copies} `cudaMemcpyAsync` in each loop, {f.copies} `cudaStreamSynchronize` in the blocking one, none but one device synchronize in the non-blocking one"
    said = f"{b['cudaMemcpyAsync']:g}, {nb['cudaMemcpyAsync']:g}; {b['cudaStreamSynchronize']:g}, {nb['cudaStreamSynchronize']:g}; {f.own:g} per loop"
    seen.check(calls, as_said, said)
    return seen


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The runtime calls of the two loops against the tutorial's background and profile."""
    f = facts(run)
    b, nb, n = f.per_loop["blocking"], f.per_loop["non_blocking"], f.copies
    memcpy = claims.within(min(b["cudaMemcpyAsync"], nb["cudaMemcpyAsync"]) / n, 0.5, 1.5)
    sync = claims.within(b["cudaStreamSynchronize"] / n, 0.5, 1.5)
    none = claims.compare(nb["cudaStreamSynchronize"], 1, holds_if="below")
    one = claims.within(f.own, 0.5, 1.5)
    measured = (
        f"per copy, the fewer of the two loops' counts ({b['cudaMemcpyAsync']:.0f} and {nb['cudaMemcpyAsync']:.0f} per loop of {n}); one per copy: a count {memcpy.in_words()}",
        f"blocking loop: {b['cudaStreamSynchronize']:.0f} cudaStreamSynchronize for {n} copies; one per copy: a count {sync.in_words()}",
        f"non-blocking loop: {nb['cudaStreamSynchronize']:.0f} cudaStreamSynchronize per loop of {n} copies (none: {none.in_words()})",
        f"{f.in_profile['non_blocking']['cudaDeviceSynchronize']} cudaDeviceSynchronize in a profile of {profiled_loops()} loops, {f.profilers_own} of them the profiler's own (as in the blocking loop's profile): {f.own:g} per loop; one: a count {one.in_words()}",
    )
    sources = [f"{TUTORIAL} (background)"] * 3 + [f"{TUTORIAL} (1000-tensor loop)"]
    rows = zip(CLAIMS, sources, measured, (memcpy, sync, none, one), strict=True)
    for claim, source, said, holds in rows:
        table.add(claim, source=source, measured=said, holds=holds, run=run)


def syncs_per_blocking_copy(run: Run) -> float:
    """Exercise 1: ``cudaStreamSynchronize`` calls per copy in the blocking loop."""
    return facts(run).per_loop["blocking"]["cudaStreamSynchronize"] / run.params["count"]


def blocking_loop_ms(run: Run) -> float:
    """Exercise 3: the blocking loop's median time, in ms."""
    return facts(run).ms["blocking"]
