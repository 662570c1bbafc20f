"""What notebook 06 shows of its speed: how far an ``all_reduce`` overlaps matrix multiplications,
blocking and with ``async_op=True`` (from rank 0's profile), and the nccl-tests-style sweep: algbw
and busbw of five collectives over message sizes on 2, 4, 8... ranks, against a peer copy's rate.

The ranks, point-to-point calls and hangs are in ``nccl``; the claims table in ``nccl_claims``.
Every function takes the notebook's runs (``records.Run``) and measures nothing. Tested on every
recorded machine in tests/test_lesson_06.py.
"""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib.pyplot as plt
from IPython.display import display

from .. import analysis, claims, distributed, plotting, records, tables, timing, trace
from ..records import Run

NOTEBOOK = "06_nccl_point_to_point_and_collectives"
HELPER_WITHIN = 0.03  # the helper's busbw is "nccl-tests' loop" when within this share of the hand-written loop's
FIXED_COST = (
    2  # an all_reduce "costs the same whatever the size" while within this many times the shortest
)


# ---------------------------------------------------------------- 4. overlap


def split_kernels(profile: trace.Profile) -> tuple[list[trace.Interval], list[trace.Interval]]:
    """(NCCL's kernels, every other kernel) of a profile, told apart by 'nccl' in the name."""
    kernels = profile.select(kind="kernel")
    nccl = [k for k in kernels if "nccl" in k.name.lower()]
    return nccl, [k for k in kernels if "nccl" not in k.name.lower()]


def _step_overlap(intervals: list[trace.Interval]) -> float:
    """Overlap ratio of one step's NCCL kernels and its other kernels (0.0 when either is missing)."""
    nccl_kernels, compute_kernels = split_kernels(trace.Profile(intervals))
    return (
        trace.overlap_ratio(nccl_kernels, compute_kernels)
        if nccl_kernels and compute_kernels
        else 0.0
    )


def overlap_of(run: Run) -> dict[str, dict[str, Any]]:
    """Per mode of an ``overlap`` run (``'blocking'``, ``'async_op=True'``): ``ratio``, the overlap
    ratio of NCCL's kernels and the others, one per profiled step, as a ``claims.Value`` (median
    and spread of the steps; 0: never together, 1: the shorter entirely hidden); ``nccl_ms``, ``other_ms`` and ``busy_ms``, the time each kind of
    kernel and either of them ran, in ms per profiled step; ``steps``, the profiled steps.
    """
    out = {}
    for mode, profile in run.value.items():
        nccl_kernels, compute_kernels = split_kernels(profile)
        out[mode] = {
            "ratio": analysis.per_step(profile, _step_overlap),
            "nccl_ms": trace.covered_us(nccl_kernels) / profile.steps / 1e3,
            "other_ms": trace.covered_us(compute_kernels) / profile.steps / 1e3,
            "busy_ms": trace.covered_us(nccl_kernels + compute_kernels) / profile.steps / 1e3,
            "steps": profile.steps,
        }
    return out


def show_overlap(run: Run) -> None:
    """Prints, per mode, the time of the ``all_reduce`` kernels, of the other kernels and the GPU's
    busy time (ms per step) and the overlap ratio, and draws rank 0's two timelines on one time
    scale, NCCL's stream marked. Returns nothing.
    """
    found = overlap_of(run)
    longest_ms = (
        max(trace.span_us(p.select(kind=trace.GPU_KINDS)) for p in run.value.values()) / 1e3
    )
    fig, axes = plt.subplots(2, 1, figsize=(10, 6))
    for ax, (mode, profile) in zip(axes, run.value.items(), strict=True):
        f = found[mode]
        print(
            f"{mode}: all_reduce kernels {f['nccl_ms']:.3f} ms, other kernels {f['other_ms']:.3f} ms,\n"
            f"  GPU busy {f['busy_ms']:.3f} ms per step; overlap ratio {f['ratio'].value:.2f} (median of the steps)"
        )
        plotting.timeline(profile.intervals, title=f"{mode}", ax=ax, include_host=False, unit="ms")
        ax.set_xlim(0, longest_ms * 1.02)  # the same time scale for both
        nccl_streams = {k.stream for k in split_kernels(profile)[0]}
        ax.set_yticks(
            ax.get_yticks(),
            [
                label.get_text()
                + (
                    " (NCCL)"
                    if label.get_text().endswith(tuple(f" {s}" for s in nccl_streams))
                    else ""
                )
                for label in ax.get_yticklabels()
            ],
        )
    steps = max(f["steps"] for f in found.values())
    fig.suptitle(
        plotting.machine_title(
            f"Rank 0: all_reduce and matmuls, {steps} profiled steps", run.machine, run.live
        )
    )
    fig.tight_layout()
    plt.show()


def see_overlap(run: Run) -> claims.WhatWeSee:
    """What the two profiles show: per mode, the overlap ratio, and whether the GPU's busy time per
    step (ms) lies closer to the longer of the two kinds of kernel than to their sum.
    """
    seen = claims.WhatWeSee(NOTEBOOK, run)
    for mode, f in overlap_of(run).items():
        longer, total, busy = (
            max(f["nccl_ms"], f["other_ms"]),
            f["nccl_ms"] + f["other_ms"],
            f["busy_ms"],
        )
        near_longer = busy - longer < total - busy
        ratio = f["ratio"]
        seen.say(
            f"{mode} ({f['steps']} profiled steps): overlap ratio "
            f"{ratio if ratio.spread else f'{ratio.value:.2f} in every step'}; GPU busy {busy:.3f} ms per "
            "step, closer to "
            + (
                f"the longer of the two ({longer:.3f} ms) than to their sum ({total:.3f} ms)."
                if near_longer
                else f"their sum ({total:.3f} ms) than to the longer of the two ({longer:.3f} ms)."
            )
        )
    return seen


# ---------------------------------------------------------------- 5. algbw and busbw


def sweep_of(run: Run) -> list[dict[str, Any]]:
    """The per-world-size results of a ``bandwidth`` run (``world_size``, rank 0's ``timings``,
    ``wrong`` elements per collective and size, the hand-written loop's ``plain_s``). A recording
    made before the sweep (one world size, no wrong counts, no hand-written loop) is read as one
    entry with ``wrong`` and ``plain_s`` None.
    """
    if "sweep" in run.value:
        return run.value["sweep"]
    return [
        {
            "world_size": run.value["world_size"],
            "timings": run.value["timings"],
            "wrong": None,
            "plain_s": None,
        }
    ]


def busbw_of(entry: dict[str, Any], sizes: list[int]) -> dict[str, list[float]]:
    """busbw (decimal GB/s) per collective and size of one world size's timings (medians)."""
    return {
        op: [
            distributed.busbw_gbps(op, size, t.median_s, entry["world_size"])
            for size, t in zip(sizes, ts, strict=True)
        ]
        for op, ts in entry["timings"].items()
    }


def _wrong_total(sweep: list[dict[str, Any]]) -> int:
    return sum(sum(w) for e in sweep if e["wrong"] for w in e["wrong"].values())


def show_bandwidth(run: Run) -> None:
    """Prints the world sizes measured and the wrong elements; shows all_reduce on all the ranks in
    nccl-tests' columns (us, GB/s), the busbw of each collective (GB/s), nccl-tests' busbw / algbw
    factors, the peer copy's rate (GB/s); and draws busbw against message size for each world size
    with that rate dashed. Returns nothing.
    """
    sizes, sweep = run.params["sizes"], sweep_of(run)
    if "sweep" not in run.value:
        print(
            textwrap.fill(
                f"This recording of bandwidth() predates the sweep over world sizes: it has "
                f"{run.value['world_size']} ranks and {', '.join(run.value['timings'])} only, no "
                f"wrong-element counts and no hand-written loop; "
                f"{records.rerecord_command(run.machine, [NOTEBOOK])}",
                100,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    full_n = sweep[-1]
    n_ranks, ceiling_gbps = full_n["world_size"], run.value["ceiling"].gbps
    busbw_by_n = {e["world_size"]: busbw_of(e, sizes) for e in sweep}
    busbw = busbw_by_n[n_ranks]
    algbw = [
        distributed.algbw_gbps(size, t.median_s)
        for size, t in zip(sizes, full_n["timings"]["all_reduce"], strict=True)
    ]
    counted = (
        _wrong_total(sweep) if any(e["wrong"] for e in sweep) else "not counted in this recording"
    )
    print(
        f"Measured on {', '.join(str(e['world_size']) for e in sweep)} ranks ({run.where()});\nwrong elements "
        f"over every check: {counted}."
    )
    nccl_tests = tables.Table(
        [
            ("size", "", timing.format_bytes),
            "count",
            "type",
            "redop",
            ("time", "us", ".1f"),
            ("algbw", "GB/s", ".2f"),
            ("busbw", "GB/s", ".2f"),
            "#wrong",
            ("IQR/median", "", ".1%"),
        ],
        title=f"all_reduce on {n_ranks} ranks ({run.where()}), in nccl-tests' columns",
        caption=(
            f"median of {len(full_n['timings']['all_reduce'][0].samples_s)} samples of {run.params['iters']} "
            "calls; count: float32 elements; IQR/median: the spread of the samples"
        ),
    )
    for i, (size, t) in enumerate(zip(sizes, full_n["timings"]["all_reduce"], strict=True)):
        nccl_tests.add(
            size,
            size // 4,
            "float",
            "sum",
            t.median_us,
            algbw[i],
            busbw["all_reduce"][i],
            full_n["wrong"]["all_reduce"][i] if full_n["wrong"] else None,
            t.spread,
        )
    by_op = tables.Table(
        [("size", "", timing.format_bytes), *[(op, "GB/s", ".2f") for op in busbw]],
        title=f"busbw of each collective on {n_ranks} ranks",
    )
    for i, size in enumerate(sizes):
        by_op.add(size, *[busbw[op][i] for op in busbw])
    factors = tables.Table(
        ["n", *[(op, "", ".4g") for op in distributed.COLLECTIVE_OPS]],
        title="nccl-tests' factor busbw / algbw for each collective and number of ranks n",
    )
    for n in busbw_by_n:
        factors.add(n, *[distributed.bus_factor(op, n) for op in distributed.COLLECTIVE_OPS])
    display(nccl_tests, by_op, factors)
    print(
        f"The link's ceiling, a GPU0 -> GPU1 copy of {timing.format_bytes(run.params['ceiling_bytes'])}: "
        f"{ceiling_gbps:.1f} GB/s."
    )
    fig, axes = plt.subplots(
        1, len(busbw_by_n), figsize=(5.5 * len(busbw_by_n), 4.5), sharey=True, squeeze=False
    )
    for ax, (n, values) in zip(axes[0], busbw_by_n.items(), strict=True):
        plotting.bandwidth_vs_size(
            {op: (sizes, v) for op, v in values.items()},
            title=f"{n} ranks",
            ax=ax,
            ceiling_gbps=ceiling_gbps,
            ceiling_label="GPU0 -> GPU1 copy",
        )
        ax.set_ylabel("busbw (decimal GB/s)")
    fig.suptitle(
        plotting.machine_title(
            "NCCL busbw by message size and number of ranks", run.machine, run.live
        )
    )
    fig.tight_layout()
    plt.show()


def _against_ceiling(gbps: float, ceiling_gbps: float) -> str:
    """A busbw against the peer copy's rate: its share of it, or how far above it (never a share above 100%)."""
    if gbps <= ceiling_gbps:
        return f"{gbps / ceiling_gbps:.0%}"
    return f"{gbps:.0f} GB/s, above it"


def _fixed_cost_words(sizes: list[int], ar_us: list[float]) -> str:
    """The start of the sweep's first sentence: up to which size an ``all_reduce`` costs the same
    (every time so far within ``FIXED_COST`` times the shortest, in us), or that the smallest
    size alone is, or that even it took longer than that (its samples out of order)."""
    floor_us = min(ar_us)  # the fixed cost of a call: the shortest time at any size
    within = [i for i in range(len(ar_us)) if max(ar_us[: i + 1]) <= FIXED_COST * floor_us]
    if not within:
        at = timing.format_bytes(sizes[ar_us.index(floor_us)])
        return (
            f"an `all_reduce` of {timing.format_bytes(sizes[0])} takes {ar_us[0]:.1f} us, more than "
            f"{FIXED_COST} times the shortest ({floor_us:.1f} us at {at}): the smallest sizes' "
            "times are out of order here; from there"
        )
    flat_until = within[-1]
    if flat_until == 0:
        return (
            f"an `all_reduce` of {timing.format_bytes(sizes[0])} takes {ar_us[0]:.1f} us; "
            "from the smallest size on"
        )
    return (
        f"from {timing.format_bytes(sizes[0])} to {timing.format_bytes(sizes[flat_until])} an "
        f"`all_reduce` takes {min(ar_us[: flat_until + 1]):.1f} to "
        f"{max(ar_us[: flat_until + 1]):.1f} us whatever the size (within twice the shortest: the "
        "fixed cost of a call dominates); from there"
    )


def see_bandwidth(run: Run) -> claims.WhatWeSee:
    """What the sweep shows: up to which size an ``all_reduce`` on all the ranks costs the same
    (us), how each collective's busbw curve ends (GB/s), each world size's busbw at the largest size
    as a share of the peer copy's rate, and checks that the helper's busbw is within 3% of the
    hand-written loop's and that no element came out wrong.
    """
    sizes, sweep = run.params["sizes"], sweep_of(run)
    full_n = sweep[-1]
    n_ranks, ceiling_gbps = full_n["world_size"], run.value["ceiling"].gbps
    busbw_by_n = {e["world_size"]: busbw_of(e, sizes) for e in sweep}
    busbw = busbw_by_n[n_ranks]
    ar_us = [t.median_us for t in full_n["timings"]["all_reduce"]]
    samples = len(full_n["timings"]["all_reduce"][0].samples_s)
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.say(
        f"On {n_ranks} ranks (medians of {samples} samples), "
        + _fixed_cost_words(sizes, ar_us)
        + f" the time grows with the size, to {ar_us[-1]:.0f} us at {timing.format_bytes(sizes[-1])}."
    )
    seen.say(
        f"busbw on {n_ranks} ranks: "
        + "; ".join(
            f"`{op}` {claims.describe_curve(sizes, values).words}" for op, values in busbw.items()
        )
        + "."
    )
    for n, values in busbw_by_n.items():
        seen.say(
            f"{n} ranks, {timing.format_bytes(sizes[-1])} messages, busbw against the dashed line of the peer "
            f"copy ({ceiling_gbps:.0f} GB/s): "
            + ", ".join(
                f"{_against_ceiling(v[-1], ceiling_gbps)} (`{op}`)" for op, v in values.items()
            )
            + "."
        )
    if full_n["plain_s"]:
        plain = timing.Timing(
            full_n["plain_s"], "cuda events", sizes[-1], "hand-written all_reduce loop"
        )
        helper_gbps = busbw["all_reduce"][-1]
        plain_gbps = distributed.busbw_gbps("all_reduce", sizes[-1], plain.median_s, n_ranks)
        seen.check(
            f"At {timing.format_bytes(sizes[-1])} on {n_ranks} ranks, the helper's all_reduce busbw is within 3% "
            "of nccl-tests' loop written out by hand",
            abs(helper_gbps / plain_gbps - 1) <= HELPER_WITHIN,
            f"collective_timings {helper_gbps:.1f} GB/s, hand-written loop {plain_gbps:.1f} GB/s "
            f"({helper_gbps / plain_gbps - 1:+.1%}; IQR {plain.spread:.1%} of the loop's median)",
        )
    else:
        seen.say(
            "This recording has no hand-written loop to hold the helper against: it was made before the loop "
            "was added."
        )
    if all(e["wrong"] for e in sweep):
        wrong_total = _wrong_total(sweep)
        seen.check(
            "Every collective gave the right result at every size and number of ranks (nccl-tests' #wrong is 0)",
            wrong_total == 0,
            f"{wrong_total} wrong elements over {analysis.plural(len(sweep), 'world size')}",
        )
    return seen


def largest_all_reduce_busbw(run: Run) -> claims.Value:
    """busbw (decimal GB/s) of the ``all_reduce`` of the largest size on all the ranks of a
    ``bandwidth`` run, with the spread of its samples.
    """
    full_n = sweep_of(run)[-1]
    algbw = claims.measured(full_n["timings"]["all_reduce"][-1], as_rate=True)
    factor = distributed.bus_factor("all_reduce", full_n["world_size"])
    return claims.Value(algbw.value * factor, algbw.spread * factor, "GB/s", algbw.samples)


def busbw_if_ranks(run: Run, n: int) -> float:
    """The busbw (decimal GB/s) nccl-tests would print for an ``all_reduce`` of the largest size on
    ``n`` ranks at the algbw measured on all the ranks of a ``bandwidth`` run.
    """
    sizes, full_n = run.params["sizes"], sweep_of(run)[-1]
    return distributed.algbw_gbps(
        sizes[-1], full_n["timings"]["all_reduce"][-1].median_s
    ) * distributed.bus_factor("all_reduce", n)
