"""What notebook 02 shows of its runs: when ``.to()`` returns against when the copy is done, the
runtime calls of 1000 small copies, the tutorial's six timings, the hazards and their fixes,
tensordict and the DataLoader.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures nothing.
The numbers behind the tables and sentences are in ``non_blocking_analysis`` (re-exported here),
the figures are drawn by ``non_blocking_plots``, and the claims table is in ``non_blocking_claims``.
Tested on every recorded machine in tests/test_lesson_02.py.
"""

from __future__ import annotations

from .. import analysis, claims, tables, timing
from ..records import Run
from . import non_blocking_plots
from .non_blocking_analysis import (
    D2H_BLOCKING,
    D2H_NB,
    FIXES,
    HELD,
    PAGEABLE_NB,
    PIN_THEN_NB,
    PINNED_NB,
    SAFE,
    all_pinned_or_none,
    calls_in_profile,
    dataloader_speedup,
    gigabytes,
    gpu_work_ms,
    loop_speedup,
    own_device_syncs,
    profiled_loops,
    returned_share,
    shown,
    six_speedups,
    tensordict_ratios,
    waited,  # noqa: F401  re-exported for non_blocking_claims and the tests
)

NOTEBOOK = "02_non_blocking"

# ---------------------------------------------------------------- 1. when .to() returns


def show_returns(run: Run) -> tables.Table:
    """When ``.to()`` returned and when the copy finished, for each kind of copy: a table (ms
    after a synchronised start, medians; the share of the copy the host waited; whether a D2H
    result is pinned) and the same two times as grouped bars on a log axis. Returns the table.
    """
    ret = run.value
    size = timing.format_bytes(run.params["nbytes"])
    table = tables.Table(
        [
            "copy",
            (".to() returns", "ms", ".3f"),
            ("copy finished", "ms", ".3f"),
            ("share of the copy the host waited", "", ".1%"),
            "result in pinned memory",
        ],
        caption=f"{size} per copy; medians of "
        f"{len(next(iter(ret.values()))['returned'].samples_s)} samples",
    )
    for label, r in ret.items():
        table.add(
            label,
            r["returned"].median_ms,
            r["finished"].median_ms,
            returned_share(r),
            r["result_pinned"] if label.startswith("D2H") else None,
        )
    non_blocking_plots.draw_returns(run)
    return table


def see_returns(run: Run) -> claims.WhatWeSee:
    """What the return times show: the share of the copy's time after which the blocking copies
    returned, the pinned and the D2H ``non_blocking`` copies (and where the D2H result lives),
    the pageable ``non_blocking`` copy, the cost of pinning on the calling thread, and the
    blocking D2H copy against the ``non_blocking`` one (times in ms).
    """
    ret = run.value
    share = {label: returned_share(r) for label, r in ret.items()}
    seen = claims.WhatWeSee(NOTEBOOK, run)
    blocking = [share[label] for label in ret if label.endswith(", blocking")]
    seen.say(
        f"The blocking copies returned after {min(blocking):.1%} to {max(blocking):.1%} of "
        f"the copy's time" + (": they return when they finish." if min(blocking) >= 0.9 else ".")
    )
    pinned_nb, d2h_nb = ret[PINNED_NB], ret[D2H_NB]
    seen.say(
        f"From pinned memory, `non_blocking=True` returned after {pinned_nb['returned'].median_ms:.3f} ms, "
        f"{share[PINNED_NB]:.1%} of the copy's {pinned_nb['finished'].median_ms:.2f} ms; "
        f"the GPU-to-host `non_blocking` copy after {share[D2H_NB]:.1%}, its result in "
        f"{'pinned' if d2h_nb['result_pinned'] else 'pageable'} memory."
    )
    seen.say(
        f"From pageable memory, `non_blocking=True` returned after {share[PAGEABLE_NB]:.1%} of the copy's "
        "time: "
        + (
            "the host still waited for (nearly) the whole copy."
            if share[PAGEABLE_NB] >= 0.8
            else "the host got control back before the copy was done."
        )
    )
    pin_nb = ret[PIN_THEN_NB]
    seen.say(
        f"`pin_memory().to(non_blocking=True)` kept the host {pin_nb['returned'].median_ms:.2f} ms "
        f"({share[PIN_THEN_NB]:.0%} of its {pin_nb['finished'].median_ms:.2f} ms), "
        f"{pin_nb['returned'].median_s / pinned_nb['finished'].median_s:.2f} times the time the copy of an "
        f"already pinned tensor takes to finish ({pinned_nb['finished'].median_ms:.2f} ms), whose "
        f"`non_blocking` call returned after {pinned_nb['returned'].median_ms:.3f} ms: the pinning runs on the "
        "calling thread."
    )
    d2h_b = ret[D2H_BLOCKING]
    seen.say(
        f"The blocking GPU-to-host copy took {d2h_b['finished'].median_ms:.1f} ms, "
        f"{d2h_b['finished'].median_s / d2h_nb['finished'].median_s:.1f} times as long as the "
        f"`non_blocking` one ({d2h_nb['finished'].median_ms:.2f} ms)."
    )
    return seen


# ---------------------------------------------------------------- 2. 1000 small copies


def _faster(ratio: claims.Value) -> str:
    """Words for a speed ratio (above 1: faster) against 1."""
    return claims.worded(
        claims.compare(ratio, 1, holds_if="above").verdict,
        "faster beyond this run's noise.",
        "slower beyond this run's noise.",
        "the same within the noise.",
    )


def show_loops(run: Run) -> tables.Table:
    """The two loops of small copies: a table (time per loop in ms, median; runtime calls in a
    profile; ms of host time in synchronize calls per loop) and bars of their times, each with
    its ratio to the blocking loop's. Returns the table.
    """
    small, count = run.value, run.params["count"]
    in_profile = calls_in_profile(run)
    samples = len(small["blocking"]["time"].samples_s)
    table = tables.Table(
        [
            "loop",
            ("time per loop", "ms", ".3f"),
            "cudaMemcpyAsync",
            "cudaStreamSynchronize",
            "cudaDeviceSynchronize",
            ("host in sync calls, per loop", "ms", ".3f"),
        ],
        caption=f"{count} tensors of {run.params['numel']} float32; runtime calls counted in a "
        f"profile of {profiled_loops()} loops; the non-blocking loop ran "
        f"{analysis.times(loop_speedup(run))} as fast as the blocking loop "
        f"(medians of {samples} samples)",
    )
    for label, r in small.items():
        calls = in_profile[label]
        table.add(
            label,
            r["time"].median_ms,
            calls["cudaMemcpyAsync"],
            calls["cudaStreamSynchronize"],
            calls["cudaDeviceSynchronize"],
            r["host in synchronize calls (us per loop)"] / 1e3,
        )
    non_blocking_plots.draw_loops(run)
    return table


def see_loops(run: Run) -> claims.WhatWeSee:
    """What the loops show: the runtime calls per loop, the ``cudaDeviceSynchronize`` calls of the
    profiles with the profiler's own told apart, and the two loops' times (ms) and their ratio.
    """
    small, n_copies = run.value, run.params["count"]
    per_loop = {label: r["calls per loop"] for label, r in small.items()}
    in_profile = calls_in_profile(run)
    profilers_own, own = own_device_syncs(run)
    speedup = loop_speedup(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Per loop of {n_copies} copies: {per_loop['blocking']['cudaMemcpyAsync']:.0f} and "
        f"{per_loop['non_blocking']['cudaMemcpyAsync']:.0f} `cudaMemcpyAsync` (blocking, non-blocking), "
        f"{per_loop['blocking']['cudaStreamSynchronize']:.0f} and "
        f"{per_loop['non_blocking']['cudaStreamSynchronize']:.0f} `cudaStreamSynchronize`."
    )
    seen.say(
        f"The profiles hold {in_profile['blocking']['cudaDeviceSynchronize']} and "
        f"{in_profile['non_blocking']['cudaDeviceSynchronize']} `cudaDeviceSynchronize` over {profiled_loops()} "
        f"loops. The blocking loop calls none itself, so its {profilers_own} is the profiler's own: "
        "`torch.profiler` with CUDA activity synchronises the GPU when it stops recording, inside the recorded "
        f"window. Without it the non-blocking loop makes {own:g} per loop, its final `torch.cuda.synchronize()`; "
        f"counted per loop with the profiler's, it reads {per_loop['non_blocking']['cudaDeviceSynchronize']:g}, "
        "which a table of whole calls rounds to 2. (The tutorial profiles CPU activity only, and that profiler "
        "does not synchronise on exit.)"
    )
    seen.say(
        f"The non-blocking loop took {small['non_blocking']['time'].median_ms:.2f} ms against the blocking "
        f"loop's {small['blocking']['time'].median_ms:.2f} ms: it ran {analysis.times(speedup)} as fast as the "
        f"blocking loop, {_faster(speedup)}"
    )
    return seen


# ---------------------------------------------------------------- 3. the six timings


def show_six(run: Run) -> tables.Table:
    """The six timings: a table (ms and decimal GB/s, blocking and ``non_blocking=True``, and the
    speed-up from ``non_blocking``) and grouped bars of the times in ms. Returns the table.
    """
    six = run.value
    samples = len(six["pinned"]["blocking"].samples_s)
    table = tables.Table(
        [
            "source",
            ("blocking", "ms", ".1f"),
            ("blocking", "GB/s", ".1f"),
            ("non_blocking=True", "ms", ".1f"),
            ("non_blocking=True", "GB/s", ".1f"),
            ("speed-up from non_blocking", "x", ".2f"),
        ],
        caption=f"{run.params['count']} tensors of {run.params['numel']:.0e} float32 = "
        f"{gigabytes(run):.2f} GB per run; medians of {samples} samples",
    )
    for way, modes in six.items():
        b, nb = modes["blocking"], modes["non_blocking=True"]
        table.add(way, b.median_ms, b.gbps, nb.median_ms, nb.gbps, b.median_s / nb.median_s)
    non_blocking_plots.draw_six(run)
    return table


def see_six(run: Run) -> claims.WhatWeSee:
    """What the six timings show: the six from fastest to slowest (ms), what ``non_blocking=True``
    did for each source, and pinning by hand against the pageable copy; each with its number of
    samples.
    """
    six = run.value
    samples = min(len(t.samples_s) for modes in six.values() for t in modes.values())
    seen = claims.WhatWeSee(NOTEBOOK, run)
    ranked = sorted(
        (t.median_s, way, mode) for way, modes in six.items() for mode, t in modes.items()
    )
    seen.say(
        f"From fastest to slowest (medians of {samples} samples each, so their spreads are only a rough "
        "guide): "
        + "; ".join(f"{way}, {mode} ({sec * 1e3:.0f} ms)" for sec, way, mode in ranked)
        + "."
    )
    for way, r in six_speedups(run).items():
        seen.say(
            f"{way}: the `non_blocking=True` loop ran {analysis.times(r)} as fast as the blocking one"
            + claims.worded(
                claims.compare(r, 1, holds_if="above").verdict,
                ".",
                ", slower beyond this run's noise.",
                ", no change within the noise.",
            )
        )
    for mode in ("blocking", "non_blocking=True"):
        by_hand = claims.ratio(six["pageable"][mode], six["pin_memory() then copy"][mode])
        seen.say(
            f"Pinning by hand, {mode}: `pin_memory()` then copy ran {analysis.times(by_hand)} as fast as the "
            "pageable copy"
            + claims.worded(
                claims.compare(by_hand, 1, holds_if="above").verdict,
                ": the staging by hand paid here.",
                ": it did not pay here.",
                ": the same within the noise.",
            )
        )
    return seen


# ---------------------------------------------------------------- 4. hazards


def _counts(haz: dict, labels: list[str]) -> str:
    return "; ".join(
        f"{shown(label)}: {haz[label]['wrong']} of {haz[label]['trials']}" for label in labels
    )


def show_hazards(run: Run) -> tables.Table:
    """The wrong results of each hazard and fix: a table (wrong results, trials; the return times
    of the pageable copy under the hold in ms as its caption) and bars of the share of trials
    that went wrong. Returns the table.
    """
    haz, returns = run.value["cases"], run.value["pageable_return_s"]
    table = tables.Table(
        ["case", "wrong results", "trials"],
        [(shown(label), r["wrong"], r["trials"]) for label, r in haz.items()],
        caption=f"pageable H2D under a {run.value['hold_ms']:.0f} ms hold: .to(non_blocking=True) "
        f"returned after {min(returns) * 1e3:.3f} to {max(returns) * 1e3:.3f} ms",
    )
    non_blocking_plots.draw_hazards(run)
    return table


def see_hazards(run: Run) -> claims.WhatWeSee:
    """What the hazards show: checks that the held cases go wrong every time, the fixes never and
    the safe cases never; the tutorial's setting's counts; and when the pageable copy returned
    (ms) against the hold.
    """
    haz, returns = run.value["cases"], run.value["pageable_return_s"]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.check(
        "With the stream held, reading a non_blocking D2H result at once, and zeroing a pinned source right "
        "after a non_blocking copy, give wrong results every time",
        all(haz[label]["wrong"] == haz[label]["trials"] for label in HELD),
        _counts(haz, HELD),
    )
    seen.check(
        "A synchronize, or an event on the stream, fixes both",
        all(haz[label]["wrong"] == 0 for label in FIXES),
        _counts(haz, FIXES),
    )
    seen.check(
        "A pageable source, a GPU-side use of the result, a D2H copy into pageable memory and a blocking D2H "
        "copy come out right",
        all(haz[label]["wrong"] == 0 for label in SAFE),
        _counts(haz, SAFE),
    )
    tutorial_cases = [label for label in haz if "(tutorial's form)" in label]
    seen.say(
        "In the tutorial's setting, without holding the stream: "
        + "; ".join(
            f"{shown(label)} went wrong in {haz[label]['wrong']} of {haz[label]['trials']} trials"
            for label in tutorial_cases
        )
        + ": how often depends on how fast the copy is against the host's next step."
    )
    hold_ms = run.value["hold_ms"]
    seen.say(
        f"The pageable `.to(non_blocking=True)` returned after {min(returns) * 1e3:.2f} to "
        f"{max(returns) * 1e3:.2f} ms "
        + (
            f"under the {hold_ms:.0f} ms hold: the driver waited for the stream, then staged the data, before "
            "returning."
            if min(returns) >= 0.8 * hold_ms / 1e3
            else f"although the stream was held for {hold_ms:.0f} ms: the driver copied the data into its staging "
            "buffer first."
        )
        + " So the data was taken before `.to()` returned."
    )
    return seen


# ---------------------------------------------------------------- 5. tensordict


def show_tensordict(run: Run) -> tables.Table:
    """The four ``TensorDict.to`` calls: a table (median ms, IQR over median, samples, decimal
    GB/s; the tensordict version as caption) and bars of the times, each with its ratio to the
    blocking call's. Returns the table.
    """
    times = run.value["timings"]
    table = tables.Table(
        [
            "call",
            ("median", "ms", ".1f"),
            ("IQR / median", "", ".1%"),
            "samples",
            ("rate", "GB/s", ".2f"),
        ],
        [(label, t.median_ms, t.spread, len(t.samples_s), t.gbps) for label, t in times.items()],
        caption=f"tensordict {run.value['tensordict']}; {timing.format_bytes(run.params['count'] * run.params['numel'] * 4)} "
        "per call, synchronised host clock",
    )
    non_blocking_plots.draw_tensordict(run)
    return table


def _faster_or_slower(time_ratio: claims.Value, than: str) -> str:
    """Words for a ratio of times (below 1: faster) against 1, naming what it is compared with."""
    share = f"({time_ratio.number()} ± {time_ratio.spread_text()} of its time)"
    return claims.worded(
        claims.compare(time_ratio, 1, holds_if="below").verdict,
        f"faster than {than} {share}",
        f"slower than {than} {share}",
        f"the same as {than} within the noise {share}",
    )


def see_tensordict(run: Run) -> claims.WhatWeSee:
    """What the tensordict calls show: each call's time as a share of the blocking call's, then
    pinning on the main thread against ``td.to('cuda:0')`` and pinning in threads against the
    main thread, in words (faster, slower, the same within the noise), with the samples taken.
    """
    times = run.value["timings"]
    blocking, *others = list(times)
    ratios = tensordict_ratios(run)
    samples = min(len(t.samples_s) for t in times.values())
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"Against the blocking call, `{blocking}` (medians of {samples} samples each): "
        + "; ".join(
            f"`{label}` took {r.number()} ± {r.spread_text()} of its time"
            for label, r in (
                (label, claims.ratio(times[label], times[blocking])) for label in others
            )
        )
        + "."
    )
    default = "`td.to('cuda:0')`"
    seen.say(
        f"Pinning on the main thread (`num_threads=0`) was {_faster_or_slower(ratios['pin vs default'], default)}, "
        f"and pinning in threads (`num_threads={run.params['threads']}`) "
        f"{_faster_or_slower(ratios['threads vs main'], 'pinning on the main thread')}."
    )
    return seen


# ---------------------------------------------------------------- 6. DataLoader


def show_dataloader(run: Run) -> tables.Table:
    """The two epochs: a table (batches pinned, epoch time in ms with its IQR over median and
    samples) and bars of the epoch times, with their ratio. Returns the table.
    """
    dl = run.value
    table = tables.Table(
        [
            "loader",
            "pinned batches",
            "batches",
            ("epoch", "ms", ".1f"),
            ("IQR / median", "", ".1%"),
            "samples",
        ],
        [
            (
                label,
                r["pinned batches"],
                r["batches"],
                r["epoch"].median_ms,
                r["epoch"].spread,
                len(r["epoch"].samples_s),
            )
            for label, r in dl.items()
        ],
        caption=f"medians; the GPU's stand-in work alone is {gpu_work_ms(run):.0f} ms per epoch",
    )
    non_blocking_plots.draw_dataloader(run)
    return table


def see_dataloader(run: Run) -> claims.WhatWeSee:
    """What the epochs show: a check that the batches come out pinned with ``pin_memory=True``
    and only then, and the two epoch times (ms) beside the GPU work, with their ratio in words.
    """
    dl = run.value
    speedup = dataloader_speedup(run)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.check(
        "With pin_memory=True every batch comes out pinned, without it none does",
        *all_pinned_or_none(run),
    )
    seen.say(
        f"An epoch took {dl['pin_memory=True']['epoch'].median_ms:.0f} ms with `pin_memory=True` and "
        f"{dl['pin_memory=False']['epoch'].median_ms:.0f} ms without, beside {gpu_work_ms(run):.0f} ms of GPU work "
        f"({speedup.samples} samples each): the epoch with pinning ran {analysis.times(speedup)} as fast as the "
        f"one without, {_faster(speedup)}"
    )
    return seen
