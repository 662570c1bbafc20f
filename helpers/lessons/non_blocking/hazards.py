"""02, section 4: the hazards of ``non_blocking=True`` and their fixes, counted in wrong results;
their claims, and exercise 2's answer."""

from __future__ import annotations

import matplotlib.pyplot as plt

from ... import claims, exercises, plotting, tables
from ...records import Run
from .returns import NOTEBOOK, TUTORIAL

TUTORIAL_D2H = "D2H non_blocking, read at once (tutorial's form)"
TUTORIAL_H2D = "H2D pinned, source zeroed (tutorial's form)"
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
CHOICES = {  # exercise 2: what a reader may touch at once, and the case that shows it
    "D2H .to('cpu', non_blocking=True), then read the result": HELD[0],
    "H2D .to('cuda', non_blocking=True) from pinned memory, then change the source": HELD[1],
    "H2D .to('cuda', non_blocking=True) from pageable memory, then change the source": SAFE[0],
}


def shown(label: str) -> str:
    """A case's label as printed: the recording says "tutorial's form", but the code is the
    tutorial's setting with a new value written before each trial (the page says how it differs)."""
    return label.replace("(tutorial's form)", "(tutorial's setting)")


def counts(haz: dict, labels: list[str]) -> str:
    return "; ".join(f"{shown(k)}: {haz[k]['wrong']} of {haz[k]['trials']}" for k in labels)


def show(run: Run) -> tables.Table:
    """A table of wrong results and trials per case (the pageable copy's return times under the
    hold, ms, as caption), and bars of the share of trials that went wrong."""
    haz, returns = run.value["cases"], run.value["pageable_return_s"]
    _, ax = plt.subplots(figsize=(9, 5))
    bars = ax.barh(
        [shown(k) for k in haz],
        [r["wrong"] / r["trials"] for r in haz.values()],
        color=["tab:red" if r["wrong"] else "tab:green" for r in haz.values()],
    )
    ax.bar_label(
        bars, labels=[f"{r['wrong']} of {r['trials']}" for r in haz.values()], padding=3, fontsize=8
    )
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of trials with a wrong result")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(plotting.machine_title("non_blocking hazards and fixes", run.machine, run.live))
    plt.tight_layout()
    return tables.Table(
        ["case", "wrong results", "trials"],
        [(shown(k), r["wrong"], r["trials"]) for k, r in haz.items()],
        caption=f"pageable H2D under a {run.value['hold_ms']:.0f} ms hold: .to(non_blocking=True) "
        f"returned after {min(returns) * 1e3:.3f} to {max(returns) * 1e3:.3f} ms",
    )


def see(run: Run) -> claims.WhatWeSee:
    """Checks that the held cases go wrong every time, the fixes and the safe cases never; the
    tutorial's setting's counts; when the pageable copy returned (ms) against the hold."""
    haz, returns, hold_ms = run.value["cases"], run.value["pageable_return_s"], run.value["hold_ms"]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    for statement, labels, holds in (
        (
            "With the stream held, reading a non_blocking D2H result at once, and zeroing a pinned "
            "source right after a non_blocking copy, give wrong results every time",
            HELD,
            lambda r: r["wrong"] == r["trials"],
        ),
        ("A synchronize, or an event on the stream, fixes both", FIXES, lambda r: r["wrong"] == 0),
        (
            "A pageable source, a GPU-side use of the result, a D2H copy into pageable memory and a "
            "blocking D2H copy come out right",
            SAFE,
            lambda r: r["wrong"] == 0,
        ),
    ):
        seen.check(statement, all(holds(haz[k]) for k in labels), counts(haz, labels))
    seen.say(
        "In the tutorial's setting, without holding the stream: "
        + "; ".join(
            f"{shown(k)} went wrong in {haz[k]['wrong']} of {haz[k]['trials']} trials"
            for k in (TUTORIAL_D2H, TUTORIAL_H2D)
        )
        + ": how often depends on how fast the copy is against the host's next step. Each D2H "
        "trial here fills the tensor with a new value just before its copy, which the tutorial "
        "does not do, so these counts are not the tutorial's (the markdown above says how)."
    )
    seen.say(
        f"The pageable `.to(non_blocking=True)` returned after {min(returns) * 1e3:.2f} to "
        f"{max(returns) * 1e3:.2f} ms "
        + (
            f"under the {hold_ms:.0f} ms hold: the driver waited for the stream, then staged the "
            "data, before returning."
            if min(returns) >= 0.8 * hold_ms / 1e3
            else f"although the stream was held for {hold_ms:.0f} ms: the driver copied the data "
            "into its staging buffer first."
        )
        + " So the data was taken before `.to()` returned."
    )
    return seen


def _wrong(count: int, *, some: bool) -> tuple[claims.Comparison, str]:
    """Whether ``count`` wrong results are some or none, and its words."""
    holds = claims.compare(count, 0.5, holds_if="above" if some else "below")
    return (
        holds,
        f"{'erroneous: at least one wrong,' if some else 'never:'} a count {holds.in_words()}",
    )


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's hazards and fixes, judged by the counts of wrong results."""
    haz = run.value["cases"]
    tut_d2h, held_d2h, pinned_h2d, pageable_h2d = (
        haz[k] for k in (TUTORIAL_D2H, HELD[0], HELD[1], SAFE[0])
    )
    hazards = f"{TUTORIAL} (what you will learn and hazards)"

    def add(claim: str, source: str, labels: list[str], *, some: bool, what: str) -> None:
        holds, words = _wrong(sum(haz[k]["wrong"] for k in labels), some=some)
        table.add(claim, source=source, measured=f"{what}; {words}", holds=holds, run=run)

    def together(labels: list[str]) -> str:
        return "wrong results, all together: " + "; ".join(
            f"{k}: {haz[k]['wrong']} of {haz[k]['trials']}" for k in labels
        )

    add(
        "cuda_tensor.to('cpu', non_blocking=True).mean() gives erroneous output [the tutorial's "
        "tensor, stream not held, a new value filled in before each copy]",
        hazards,
        [TUTORIAL_D2H],
        some=True,
        what=f"wrong results in {tut_d2h['trials']} trials, tensor of "
        f"{run.params['tutorial_shape']} float64",
    )
    add(
        "cuda_tensor.to('cpu', non_blocking=True).mean() gives erroneous output [the copy queued "
        "behind other work]",
        hazards,
        [HELD[0]],
        some=True,
        what=f"wrong results in {held_d2h['trials']} trials with the stream held",
    )
    add(
        "With a synchronize before reading, a non_blocking D2H result is never wrong",
        f"{TUTORIAL} (hazards)",
        FIXES[:2],
        some=False,
        what=together(FIXES[:2]),
    )
    safe_h2d = [SAFE[1], SAFE[0]]
    add(
        "cpu_tensor.to('cuda', non_blocking=True).mean() executes correctly",
        f"{TUTORIAL} (what you will learn)",
        safe_h2d,
        some=False,
        what=together(safe_h2d),
    )
    add(
        "Modifying a pinned source after a non_blocking H2D copy can corrupt what the GPU gets",
        f"{TUTORIAL} (hazards)",
        [HELD[1]],
        some=True,
        what=f"wrong results with the stream held, of {pinned_h2d['trials']} "
        f"({haz[TUTORIAL_H2D]['wrong']} of {haz[TUTORIAL_H2D]['trials']} in the tutorial's order "
        "of steps)",
    )
    add(
        "Modifying a pageable source after a non_blocking H2D copy always works",
        f"{TUTORIAL} (hazards)",
        [SAFE[0]],
        some=False,
        what=f"wrong results with the stream held, of {pageable_h2d['trials']}",
    )
    table.add(
        "Of .to(non_blocking=True) copies, only CPU -> CUDA from pageable memory is safe to use on "
        "the host without synchronising",
        source=f"{TUTORIAL} (hazards)",
        measured=f"wrong results: pageable H2D {pageable_h2d['wrong']}, pinned H2D "
        f"{pinned_h2d['wrong']}, D2H {held_d2h['wrong']} (of {held_d2h['trials']} each, stream "
        "held); three counts at once, so a yes or no",
        holds=pageable_h2d["wrong"] == 0 and pinned_h2d["wrong"] > 0 and held_d2h["wrong"] > 0,
        run=run,
    )


def check_safe_choice(answer: str | None, run: Run) -> bool | None:
    """Exercise 2: ``answer`` against the one option of ``CHOICES`` whose case had no wrong result
    (None when not answered, or when the measurements single out no option or several)."""
    haz = run.value["cases"]
    safe = [option for option, label in CHOICES.items() if haz[label]["wrong"] == 0]
    if len(safe) != 1:
        print(
            "The measurements do not single out one safe option "
            f"({len(safe)} had no wrong result); see section 4."
        )
        return None
    return exercises.check_choice(
        answer, safe[0], choices=list(CHOICES), hint="look at section 4's counts of wrong results"
    )
