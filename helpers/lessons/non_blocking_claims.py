"""Notebook 02's verdicts and answers: the claims table of the PyTorch tutorial on
``non_blocking`` and ``pin_memory()`` (and the NVIDIA forum thread on pageable copies), and the
expected values of the exercises.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures nothing;
what each section shows is in ``non_blocking``. Tested on every recorded machine in
tests/test_lesson_02.py.
"""

from __future__ import annotations

from .. import claims, exercises, timing
from ..records import Run
from . import non_blocking

NOTEBOOK = non_blocking.NOTEBOOK
TUTORIAL = "PyTorch tutorial on non_blocking and pin_memory()"
FORUM = "NVIDIA forum thread on pageable copies"
CHOICES = {  # exercise 2: what a reader may touch at once, and the hazard case that shows it
    "D2H .to('cpu', non_blocking=True), then read the result": "D2H non_blocking, read at once (stream held)",
    "H2D .to('cuda', non_blocking=True) from pinned memory, then change the source": "H2D pinned, source zeroed at once (stream held)",
    "H2D .to('cuda', non_blocking=True) from pageable memory, then change the source": "H2D pageable, source zeroed at once (stream held)",
}


def _one_per_copy(count: float) -> claims.Comparison:
    """A count per copy that rounds to one: between 0.5 and 1.5."""
    return claims.within(count, 0.5, 1.5)


def _wrong(count: int, *, some: bool) -> tuple[claims.Comparison, str]:
    """Whether ``count`` wrong results are some (``some``) or none: the comparison against half a
    result, and its words ("erroneous: at least one wrong, a count above 0.5")."""
    holds = claims.compare(count, 0.5, holds_if="above" if some else "below")
    meaning = "erroneous: at least one wrong," if some else "never:"
    return holds, f"{meaning} a count {holds.in_words()}"


def _calls(table: claims.ClaimsTable, run_small: Run) -> None:
    """The runtime calls of section 2's loops against the tutorial's background and profile."""
    small, n_copies = run_small.value, run_small.params["count"]
    calls_b, calls_nb = small["blocking"]["calls per loop"], small["non_blocking"]["calls per loop"]
    memcpy = _one_per_copy(min(calls_b["cudaMemcpyAsync"], calls_nb["cudaMemcpyAsync"]) / n_copies)
    sync = _one_per_copy(calls_b["cudaStreamSynchronize"] / n_copies)
    none = claims.compare(calls_nb["cudaStreamSynchronize"], 1, holds_if="below")
    table.add(
        ".to() always calls cudaMemcpyAsync [blocking and non-blocking loops]",
        source=f"{TUTORIAL} (background)",
        measured=f"per copy, the fewer of the two loops' counts ({calls_b['cudaMemcpyAsync']:.0f} and "
        f"{calls_nb['cudaMemcpyAsync']:.0f} per loop of {n_copies}); one per copy: a count {memcpy.in_words()}",
        holds=memcpy,
        run=run_small,
    )
    table.add(
        "With non_blocking=False a cudaStreamSynchronize is called after each cudaMemcpyAsync",
        source=f"{TUTORIAL} (background)",
        measured=f"blocking loop: {calls_b['cudaStreamSynchronize']:.0f} cudaStreamSynchronize for {n_copies} copies; "
        f"one per copy: a count {sync.in_words()}",
        holds=sync,
        run=run_small,
    )
    table.add(
        "With non_blocking=True no synchronization is triggered [cudaStreamSynchronize in the non-blocking loop]",
        source=f"{TUTORIAL} (background)",
        measured=f"non-blocking loop: {calls_nb['cudaStreamSynchronize']:.0f} cudaStreamSynchronize per loop "
        f"of {n_copies} copies (none: {none.in_words()})",
        holds=none,
        run=run_small,
    )
    profilers_own, own = non_blocking.own_device_syncs(run_small)
    in_profile = non_blocking.calls_in_profile(run_small)
    one = _one_per_copy(own)
    table.add(
        "The non-blocking loop does only one synchronization (the profiler table: 1000 cudaStreamSynchronize "
        "against one device synchronize)",
        source=f"{TUTORIAL} (1000-tensor loop)",
        measured=f"{in_profile['non_blocking']['cudaDeviceSynchronize']} cudaDeviceSynchronize in a profile of "
        f"{non_blocking.profiled_loops()} loops, {profilers_own} of them the profiler's own (as in the "
        f"blocking loop's profile): {own:g} per loop; one: a count {one.in_words()}",
        holds=one,
        run=run_small,
    )


def _returns(table: claims.ClaimsTable, run_ret: Run) -> None:
    """When ``.to()`` returned (section 1) against the tutorial and the forum thread."""
    waited = non_blocking.waited(run_ret)
    for source_kind in ("pinned", "pageable"):
        table.add(
            f"With non_blocking=True the main thread on the host is not blocked [{source_kind} source]",
            source=f"{TUTORIAL} (background)",
            measured=f".to() returned after this share of the copy's time "
            f"({timing.format_bytes(run_ret.params['nbytes'])}); not blocked: under 10%",
            holds=claims.compare(
                waited[f"H2D from {source_kind}, non_blocking"], 0.1, holds_if="below"
            ),
            run=run_ret,
        )
    table.add(
        "A copy from pageable memory does not unblock the host until (nearly) all of it is staged",
        source=FORUM,
        measured=".to(non_blocking=True) from pageable returned after this share of the copy's time; nearly all: over 80%",
        holds=claims.compare(waited[non_blocking.PAGEABLE_NB], 0.8, holds_if="above"),
        run=run_ret,
    )
    ret = run_ret.value
    # against the copy it launches, not against the near-zero return of a pinned copy: that
    # denominator (15-124 us) made the ratio swing tenfold between machines
    pin_wait = claims.ratio(
        ret[non_blocking.PIN_THEN_NB]["returned"],
        ret[non_blocking.PINNED_NB]["finished"],
        unit="of a copy",
    )
    table.add(
        "Pinning on the main thread blocks the host",
        source=f"{TUTORIAL} (advice)",
        measured=f"pin_memory().to(non_blocking=True) returned after "
        f"{ret[non_blocking.PIN_THEN_NB]['returned'].median_ms:.2f} ms, over the "
        f"{ret[non_blocking.PINNED_NB]['finished'].median_ms:.2f} ms that the copy of an already pinned tensor "
        "takes to finish (whose non_blocking call returns after about 1% of that); blocked: at least half",
        holds=claims.compare(pin_wait, 0.5, holds_if="above"),
        run=run_ret,
    )


def _speed(table: claims.ClaimsTable, run_small: Run, run_six: Run) -> None:
    """Whether ``non_blocking=True`` speeds transfers up (sections 2 and 3)."""
    six = non_blocking.six_speedups(run_six)
    count, mb = run_six.params["count"], run_six.params["numel"] * 4 / 1e6
    speedups = {
        f"{run_small.params['count']} x {run_small.params['numel'] * 4} B, pageable": (
            non_blocking.loop_speedup(run_small),
            run_small,
        ),
        f"{count} x {mb:g} MB, pageable": (six["pageable"], run_six),
        f"{count} x {mb:g} MB, pinned": (six["pinned"], run_six),
    }
    for what, (speedup, its_run) in speedups.items():
        effective = claims.compare(speedup, 1.1, holds_if="above")
        table.add(
            f"Generally, tensor.to(device, non_blocking=True) is an effective choice for enhancing transfer speed [{what}]",
            source=f"{TUTORIAL} (what you will learn)",
            measured="non-blocking loop this many times as fast as the blocking one (counted effective "
            f"{effective.in_words()})",
            holds=effective,
            run=its_run,
        )


def _hazards(table: claims.ClaimsTable, run_haz: Run) -> None:
    """The hazards of section 4 and their fixes against the tutorial."""
    haz = run_haz.value["cases"]
    tut_d2h, held_d2h = (
        haz["D2H non_blocking, read at once (tutorial's form)"],
        haz[non_blocking.HELD[0]],
    )
    wrong, words = _wrong(tut_d2h["wrong"], some=True)
    table.add(
        "cuda_tensor.to('cpu', non_blocking=True).mean() gives erroneous output [the tutorial's tensor, stream not held]",
        source=f"{TUTORIAL} (what you will learn and hazards)",
        measured=f"wrong results in {tut_d2h['trials']} trials, tensor of {run_haz.params['tutorial_shape']} float64; "
        f"{words}",
        holds=wrong,
        run=run_haz,
    )
    wrong, words = _wrong(held_d2h["wrong"], some=True)
    table.add(
        "cuda_tensor.to('cpu', non_blocking=True).mean() gives erroneous output [the copy queued behind other work]",
        source=f"{TUTORIAL} (what you will learn and hazards)",
        measured=f"wrong results in {held_d2h['trials']} trials with the stream held; {words}",
        holds=wrong,
        run=run_haz,
    )
    fixed = non_blocking.FIXES[:2]
    wrong, words = _wrong(sum(haz[label]["wrong"] for label in fixed), some=False)
    table.add(
        "With a synchronize before reading, a non_blocking D2H result is never wrong",
        source=f"{TUTORIAL} (hazards)",
        measured="wrong results, all together: "
        + ", ".join(
            f"{label.split(', ')[1]}: {haz[label]['wrong']} of {haz[label]['trials']}"
            for label in fixed
        )
        + f"; {words}",
        holds=wrong,
        run=run_haz,
    )
    safe_h2d = [
        "H2D pinned, result used on the GPU",
        "H2D pageable, source zeroed at once (stream held)",
    ]
    wrong, words = _wrong(sum(haz[label]["wrong"] for label in safe_h2d), some=False)
    table.add(
        "cpu_tensor.to('cuda', non_blocking=True).mean() executes correctly",
        source=f"{TUTORIAL} (what you will learn)",
        measured="wrong results, all together: "
        + "; ".join(
            f"{label}: {haz[label]['wrong']} of {haz[label]['trials']}" for label in safe_h2d
        )
        + f"; {words}",
        holds=wrong,
        run=run_haz,
    )
    pinned_h2d, pageable_h2d = haz[non_blocking.HELD[1]], haz[non_blocking.SAFE[0]]
    tut_h2d = haz["H2D pinned, source zeroed (tutorial's form)"]
    wrong, words = _wrong(pinned_h2d["wrong"], some=True)
    table.add(
        "Modifying a pinned source after a non_blocking H2D copy can corrupt what the GPU gets",
        source=f"{TUTORIAL} (hazards)",
        measured=f"wrong results with the stream held, of {pinned_h2d['trials']} ({tut_h2d['wrong']} of "
        f"{tut_h2d['trials']} in the tutorial's order of steps); {words}",
        holds=wrong,
        run=run_haz,
    )
    wrong, words = _wrong(pageable_h2d["wrong"], some=False)
    table.add(
        "Modifying a pageable source after a non_blocking H2D copy always works",
        source=f"{TUTORIAL} (hazards)",
        measured=f"wrong results with the stream held, of {pageable_h2d['trials']}; {words}",
        holds=wrong,
        run=run_haz,
    )
    table.add(
        "Of .to(non_blocking=True) copies, only CPU -> CUDA from pageable memory is safe to use on the host without "
        "synchronising",
        source=f"{TUTORIAL} (hazards)",
        measured=f"wrong results: pageable H2D {pageable_h2d['wrong']}, pinned H2D {pinned_h2d['wrong']}, "
        f"D2H {held_d2h['wrong']} (of {held_d2h['trials']} each, stream held); three counts at once, so a "
        "yes or no",
        holds=pageable_h2d["wrong"] == 0 and pinned_h2d["wrong"] > 0 and held_d2h["wrong"] > 0,
        run=run_haz,
    )


def _pinning(table: claims.ClaimsTable, run_td: Run, run_dl: Run) -> None:
    """Whether pinning pays, on the main thread or in threads (sections 5 and 6)."""
    td_ms = {label: t.median_ms for label, t in run_td.value["timings"].items()}
    _, default, pin_main, pin_threads = list(td_ms)
    ratios = non_blocking.tensordict_ratios(run_td)
    pays = claims.compare(ratios["pin vs default"], 1, holds_if="below")
    threads_pay = claims.compare(ratios["threads vs main"], 1, holds_if="below")
    table.add(
        "Pinning pays for large batches of large tensors [tensordict non_blocking_pin=True, num_threads=0, against "
        "td.to('cuda:0')]",
        source=f"{TUTORIAL} (tensordict and advice)",
        measured=f"time of {pin_main} / time of {default} ({td_ms[pin_main]:.1f} and {td_ms[default]:.1f} ms); "
        f"pays: {pays.in_words()}",
        holds=pays,
        run=run_td,
    )
    table.add(
        "Pinning pays for large batches of large tensors when it runs in separate threads [tensordict num_threads]",
        source=f"{TUTORIAL} (tensordict and advice)",
        measured=f"time of {pin_threads} / time of {pin_main} ({td_ms[pin_threads]:.1f} and "
        f"{td_ms[pin_main]:.1f} ms); threads pay: {threads_pay.in_words()}",
        holds=threads_pay,
        run=run_td,
    )
    dl, dl_ratio = run_dl.value, non_blocking.dataloader_speedup(run_dl)
    dl_pays = claims.compare(dl_ratio, 1, holds_if="above")
    table.add(
        "Pinning pays for large batches of large tensors when it runs in separate threads [DataLoader pin_memory=True]",
        source=f"{TUTORIAL} (advice)",
        measured=f"epoch without pin_memory / epoch with it ({dl['pin_memory=False']['epoch'].median_ms:.0f} and "
        f"{dl['pin_memory=True']['epoch'].median_ms:.0f} ms, {dl_ratio.samples} samples); pays: {dl_pays.in_words()}",
        holds=dl_pays,
        run=run_dl,
    )
    pinned, counts = non_blocking.all_pinned_or_none(run_dl)
    table.add(
        "DataLoader(pin_memory=True) hands out batches in pinned memory",
        source=f"{TUTORIAL} (advice: pin in a separate thread, as DataLoader does)",
        measured=counts,
        holds=pinned,
        run=run_dl,
    )


def claims_table(
    run_small: Run, run_ret: Run, run_six: Run, run_haz: Run, run_td: Run, run_dl: Run
) -> claims.ClaimsTable:
    """The claims of the tutorial and the forum thread tested by sections 1-6: the runtime calls
    of the loops (counts per copy), when ``.to()`` returns (shares of the copy's time), speed-ups
    from ``non_blocking`` ("x"), the hazards (wrong results counted), and whether pinning pays
    (ratios of times). Each row's verdict comes from its value, threshold and spread.
    """
    table = claims.ClaimsTable(NOTEBOOK)
    _calls(table, run_small)
    _returns(table, run_ret)
    _speed(table, run_small, run_six)
    _hazards(table, run_haz)
    _pinning(table, run_td, run_dl)
    return table


# ---------------------------------------------------------------- the exercises


def syncs_per_blocking_copy(run_small: Run) -> float:
    """Exercise 1: ``cudaStreamSynchronize`` calls per copy in section 2's blocking loop (calls
    per copy).
    """
    return (
        run_small.value["blocking"]["calls per loop"]["cudaStreamSynchronize"]
        / run_small.params["count"]
    )


def blocking_loop_ms(run_small: Run) -> float:
    """Exercise 3: the median time of section 2's blocking loop, in ms."""
    return run_small.value["blocking"]["time"].median_ms


def check_safe_choice(answer: str | None, run_haz: Run) -> bool | None:
    """Exercise 2: checks ``answer`` against the one option of ``CHOICES`` whose hazard case had
    no wrong result (``exercises.check_choice``: True, False, or None when not answered); when
    the measurements single out no option, or several, says so and returns None.
    """
    haz = run_haz.value["cases"]
    safe = [option for option, label in CHOICES.items() if haz[label]["wrong"] == 0]
    if len(safe) != 1:
        print(
            f"The measurements do not single out one safe option ({len(safe)} had no wrong result); see section 4."
        )
        return None
    return exercises.check_choice(
        answer, safe[0], choices=list(CHOICES), hint="look at section 4's counts of wrong results"
    )
