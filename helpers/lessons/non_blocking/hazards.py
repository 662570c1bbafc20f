"""02, section 4: the hazards of ``non_blocking=True`` and their fixes, in wrong results."""

from __future__ import annotations

import matplotlib.pyplot as plt

from ... import claims, exercises, plotting, tables
from ...records import Run
from .returns import NOTEBOOK, TUTORIAL

TUTORIAL_D2H = "D2H non_blocking, read at once (tutorial's form)"
TUTORIAL_H2D = "H2D pinned, source zeroed (tutorial's form)"
HELD = ["D2H non_blocking, read at once (stream held)"]
HELD += ["H2D pinned, source zeroed at once (stream held)"]
FIXES = ["D2H non_blocking, synchronize before reading", "D2H non_blocking, event before reading"]
FIXES += ["H2D pinned, event before zeroing the source"]
SAFE = ["H2D pageable, source zeroed at once (stream held)", "H2D pinned, result used on the GPU"]
SAFE += ["D2H non_blocking into pageable memory", "D2H blocking"]
CHOICES = {  # exercise 2: what a reader may touch at once, and the case that shows it
    "D2H .to('cpu', non_blocking=True), then read the result": HELD[0],
    "H2D .to('cuda', non_blocking=True) from pinned memory, then change the source": HELD[1],
    "H2D .to('cuda', non_blocking=True) from pageable memory, then change the source": SAFE[0],
}
CHECKED = (  # statements checked against the counts of HELD (all wrong), FIXES and SAFE (none)
    "With the stream held, reading a non_blocking D2H result at once, and zeroing a pinned source right after a non_blocking copy, give wrong results every time",
    "A synchronize, or an event on the stream, fixes both",
    "A pageable source, a GPU-side use of the result, a D2H copy into pageable memory and a blocking D2H copy come out right",
)
CLAIMS = (  # judged by the wrong results of their CASES: some where SOME says so, else none
    "cuda_tensor.to('cpu', non_blocking=True).mean() gives erroneous output [the tutorial's tensor, stream not held, a new value filled in before each copy]",
    "cuda_tensor.to('cpu', non_blocking=True).mean() gives erroneous output [the copy queued behind other work]",
    "With a synchronize before reading, a non_blocking D2H result is never wrong",
    "cpu_tensor.to('cuda', non_blocking=True).mean() executes correctly",
    "Modifying a pinned source after a non_blocking H2D copy can corrupt what the GPU gets",
    "Modifying a pageable source after a non_blocking H2D copy always works",
)
CASES = ([TUTORIAL_D2H], [HELD[0]], FIXES[:2], [SAFE[1], SAFE[0]], [HELD[1]], [SAFE[0]])
SOME = (True, True, False, False, True, False)
ONLY = "Of .to(non_blocking=True) copies, only CPU -> CUDA from pageable memory is safe to use on the host without synchronising"


def shown(label: str) -> str:
    """A case's label as printed: the tutorial's setting, not its form (the page says why)."""
    return label.replace("(tutorial's form)", "(tutorial's setting)")


def counts(haz: dict, labels: list[str], form: str = "{}: {} of {}") -> str:
    """The cases ``labels`` as shown, each with its wrong results and trials, in ``form``."""
    return "; ".join(form.format(shown(k), haz[k]["wrong"], haz[k]["trials"]) for k in labels)


def show(run: Run) -> tables.Table:
    """Wrong results and trials per case, as a table and bars; the pageable return (ms) below."""
    haz, back_s = run.value["cases"], run.value["pageable_return_s"]
    _, ax = plt.subplots(figsize=(9, 5))
    red = ["tab:red" if r["wrong"] else "tab:green" for r in haz.values()]
    shares = [r["wrong"] / r["trials"] for r in haz.values()]
    bars = ax.barh([shown(k) for k in haz], shares, color=red)
    labels = [f"{r['wrong']} of {r['trials']}" for r in haz.values()]
    ax.bar_label(bars, labels=labels, padding=3, fontsize=8)
    ax.set(xlim=(0, 1.15), xlabel="share of trials with a wrong result")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(plotting.titled("non_blocking hazards and fixes", run))
    plt.tight_layout()
    rows = [(shown(k), r["wrong"], r["trials"]) for k, r in haz.items()]
    caption = f"pageable H2D under a {run.value['hold_ms']:.0f} ms hold: .to(non_blocking=True) returned after {min(back_s) * 1e3:.3f} to {max(back_s) * 1e3:.3f} ms"
    return tables.Table(["case", "wrong results", "trials"], rows, caption=caption)


def see(run: Run) -> claims.WhatWeSee:
    """Checks of the held, fixed and safe cases' counts; the tutorial's; the pageable return."""
    haz, back_s, hold_ms = run.value["cases"], run.value["pageable_return_s"], run.value["hold_ms"]
    seen = claims.WhatWeSee(NOTEBOOK, run)
    none_wrong = [all(haz[k]["wrong"] == 0 for k in labels) for labels in (FIXES, SAFE)]
    verdicts = [all(haz[k]["wrong"] == haz[k]["trials"] for k in HELD), *none_wrong]
    for statement, labels, holds in zip(CHECKED, (HELD, FIXES, SAFE), verdicts, strict=True):
        seen.check(statement, holds, counts(haz, labels))
    tutorial = counts(haz, [TUTORIAL_D2H, TUTORIAL_H2D], "{} went wrong in {} of {} trials")
    line = f"In the tutorial's setting, without holding the stream: {tutorial}: how often depends on how fast the copy is against the host's next step. Each D2H trial here fills the tensor with a new value just before its copy, which the tutorial does not do, so these counts are not the tutorial's (the markdown above says how)."
    seen.say(line)
    why = f"under the {hold_ms:.0f} ms hold: the driver waited for the stream, then staged the data, before returning."
    if min(back_s) < 0.8 * hold_ms / 1e3:
        why = f"although the stream was held for {hold_ms:.0f} ms: the driver copied the data into its staging buffer first."
    line = f"The pageable `.to(non_blocking=True)` returned after {min(back_s) * 1e3:.2f} to {max(back_s) * 1e3:.2f} ms {why} So the data was taken before `.to()` returned."
    return seen.say(line)


AS_WRITTEN_FAILS = {  # the tutorial's four loops, and whether its page shows each stopping early
    "D2H non_blocking, read at once": True,
    "D2H non_blocking, synchronize before reading": False,
    "H2D pinned, source zeroed": True,
    "H2D pageable, source zeroed": False,
}
AS_WRITTEN_BESIDE = {  # the loop as written, and the case of section 4 in the tutorial's setting
    "D2H non_blocking, read at once": TUTORIAL_D2H,
    "H2D pinned, source zeroed": TUTORIAL_H2D,
}


def see_as_written(run: Run, changed: Run) -> claims.WhatWeSee:
    """Where each of the tutorial's loops stopped, checked against its page, beside section 4."""
    stopped, trials, haz = run.value["stopped_at"], run.value["trials"], changed.value["cases"]
    where = "; ".join(
        f"{k}: no failure in {trials} trials"
        if stopped[k] is None
        else f"{k}: failed on trial {stopped[k] + 1}"
        for k in AS_WRITTEN_FAILS
    )
    as_page = all((stopped[k] is not None) == fails for k, fails in AS_WRITTEN_FAILS.items())
    statement = "The tutorial's loops fail where its page shows them failing, and only there"
    seen = claims.WhatWeSee(NOTEBOOK, run)
    seen.check(statement, as_page, where)
    beside = [
        f"{label} failed on trial {stopped[label] + 1} of up to {trials} and stopped"
        if stopped[label] is not None
        else f"{label} ran all {trials} trials without a failure"
        for label in AS_WRITTEN_BESIDE
    ]
    ours = counts(haz, list(AS_WRITTEN_BESIDE.values()), "{}: {} of {} wrong")
    two = run.apart_from(changed, "the tutorial's loops", "section 4's")
    line = f"As written, {beside[0]}, and {beside[1]}. Section 4's versions in the tutorial's setting counted {ours}{two}. A loop that stops at its first failure says that a race was lost, not how often."
    return seen.say(line)


def add_claims(table: claims.ClaimsTable, run: Run) -> None:
    """The tutorial's hazards and fixes, judged by the counts of wrong results."""
    haz = run.value["cases"]
    tut_d2h, d2h, pinned, pageable = (haz[k] for k in (TUTORIAL_D2H, HELD[0], HELD[1], SAFE[0]))
    hazards, held = f"{TUTORIAL} (hazards)", "wrong results with the stream held"
    together = "wrong results, all together: "
    learn = f"{TUTORIAL} (what you will learn and hazards)"
    sources = (learn, learn, hazards, f"{TUTORIAL} (what you will learn)", hazards, hazards)
    what = (
        f"wrong results in {tut_d2h['trials']} trials, tensor of {run.params['tutorial_shape']} float64",
        f"wrong results in {d2h['trials']} trials with the stream held",
        together + counts(haz, FIXES[:2]),
        together + counts(haz, [SAFE[1], SAFE[0]]),
        f"{held}, of {pinned['trials']} ({haz[TUTORIAL_H2D]['wrong']} of {haz[TUTORIAL_H2D]['trials']} in the tutorial's order of steps)",
        f"{held}, of {pageable['trials']}",
    )
    for claim, source, labels, some, said in zip(CLAIMS, sources, CASES, SOME, what, strict=True):
        wrong = sum(haz[k]["wrong"] for k in labels)
        holds = claims.compare(wrong, 0.5, holds_if="above" if some else "below")
        words = "erroneous: at least one wrong," if some else "never:"
        measured = f"{said}; {words} a count {holds.in_words()}"
        table.add(claim, source=source, measured=measured, holds=holds, run=run)
    measured = f"wrong results: pageable H2D {pageable['wrong']}, pinned H2D {pinned['wrong']}, D2H {d2h['wrong']} (of {d2h['trials']} each, stream held); three counts at once, so a yes or no"
    holds = pageable["wrong"] == 0 and pinned["wrong"] > 0 and d2h["wrong"] > 0
    table.add(ONLY, source=hazards, measured=measured, holds=holds, run=run)


def check_safe_choice(answer: str | None, run: Run) -> bool | None:
    """Exercise 2: ``answer`` against the one option with no wrong result (None if not one)."""
    haz = run.value["cases"]
    safe = [option for option, label in CHOICES.items() if haz[label]["wrong"] == 0]
    if len(safe) != 1:
        line = f"The measurements do not single out one safe option ({len(safe)} had no wrong result); see section 4."
        print(line)
        return None
    hint = "look at section 4's counts of wrong results"
    return exercises.check_choice(answer, safe[0], choices=list(CHOICES), hint=hint)
