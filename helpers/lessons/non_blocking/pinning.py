"""02, sections 5 and 6: pinning with tensordict, and DataLoader(pin_memory=True)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

from ... import analysis, claims, plotting, tables, timing
from ...records import Run
from .loops import faster
from .returns import NOTEBOOK, TUTORIAL

PAYS_CLAIM = "Pinning pays for large batches of large tensors [tensordict non_blocking_pin=True, num_threads=0, against td.to('cuda:0')]"
THREADS_CLAIM = "Pinning pays for large batches of large tensors when it runs in separate threads [tensordict num_threads]"
CLAIMS = (
    PAYS_CLAIM,
    THREADS_CLAIM,
    "Pinning pays for large batches of large tensors when it runs in separate threads [DataLoader pin_memory=True]",
    "DataLoader(pin_memory=True) hands out batches in pinned memory",
)
CLOCK = "host clock with PyTorch's CPU threads; section 5's end times both with the tutorial's one-thread Timer"
TD_COLUMNS = ["call", ("median", "ms", ".1f"), ("IQR / median", "", ".1%"), "samples"]
DL_COLUMNS = ["loader", "pinned batches", "batches", ("epoch", "ms", ".1f")]


@dataclass(frozen=True)
class TensorDictCalls:
    """Section 5's facts: the four calls in order, and ratios of times ("x"; below 1: faster)."""

    blocking: str
    default: str
    pin_main: str
    pin_threads: str
    pin_vs_default: claims.Value  # non_blocking_pin=True, num_threads=0 over td.to('cuda:0')
    threads_vs_main: claims.Value  # num_threads=N over num_threads=0
    pays: claims.Comparison  # pin_vs_default below 1, judged with the runs recorded before
    threads_pay: claims.Comparison  # threads_vs_main below 1, the same


def tensordict_facts(run: Run) -> TensorDictCalls:
    times = run.value["timings"]
    blocking, default, main, threads = list(times)
    ratios = (claims.ratio(times[main], times[default]), claims.ratio(times[threads], times[main]))
    pays, threads_pay = (
        claims.judged(claims.compare(r, 1, holds_if="below"), run, NOTEBOOK, claim)
        for r, claim in zip(ratios, (PAYS_CLAIM, THREADS_CLAIM), strict=True)
    )
    return TensorDictCalls(blocking, default, main, threads, *ratios, pays, threads_pay)


def show_tensordict(run: Run) -> tables.Table:
    """The four calls (ms, IQR / median, samples, GB/s), and bars of their times with ratios."""
    times, count = run.value["timings"], run.params["count"]
    _, ax = plt.subplots(figsize=(9, 4.5))
    short = {k: k.replace("td.to('cuda:0'", "").strip(", )") or "default" for k in times}
    bars = {short[k].replace(", ", "\n"): t.median_ms for k, t in times.items()}
    title = f"TensorDict.to('cuda:0'), {count} tensors"
    title = plotting.titled(title, run)
    plotting.bars_with_ratios(bars, ax=ax, ylabel="time (ms, median)", title=title)
    ax.tick_params(axis="x", labelrotation=0)
    plt.tight_layout()
    size = timing.format_bytes(count * run.params["numel"] * 4)
    rows = [(k, t.median_ms, t.spread, len(t.samples_s), t.gbps) for k, t in times.items()]
    caption = f"tensordict {run.value['tensordict']}; {size} per call, synchronised host clock"
    return tables.Table([*TD_COLUMNS, ("rate", "GB/s", ".2f")], rows, caption=caption)


def faster_or_slower(time_ratio: claims.Value, than: str, verdict: str | None = None) -> str:
    """Words for a ratio of times (below 1: faster) against 1; ``verdict``: the claims table's."""
    share = f"({time_ratio.number()} ± {time_ratio.spread_text()} of its time)"
    own = claims.compare(time_ratio, 1, holds_if="below").verdict
    same = f"{'faster' if own == claims.HOLDS else 'slower'} than {than} in this run {share}, but the runs recorded on this kind of machine lie on both sides (borderline here)"
    if own == claims.BORDERLINE:
        same = f"the same as {than} within the noise {share}"
    faster, slower = f"faster than {than} {share}", f"slower than {than} {share}"
    return claims.worded(verdict or own, faster, slower, same)


def see_tensordict(run: Run) -> claims.WhatWeSee:
    """Each call's time as a share of the blocking call's, and whether pinning paid, in words."""
    times, f, seen = run.value["timings"], tensordict_facts(run), claims.WhatWeSee(NOTEBOOK, run)
    pays, threads_pay = (claims.stated(c, run) for c in (f.pays, f.threads_pay))
    samples = min(len(t.samples_s) for t in times.values())
    shares = [
        (k, claims.ratio(times[k], times[f.blocking]))
        for k in (f.default, f.pin_main, f.pin_threads)
    ]
    shares_said = "; ".join(
        f"`{k}` took {r.number()} ± {r.spread_text()} of its time" for k, r in shares
    )
    line = f"Against the blocking call, `{f.blocking}` (medians of {samples} samples each): {shares_said}."
    seen.say(line)
    main = faster_or_slower(f.pin_vs_default, "`td.to('cuda:0')`", pays)
    threads = faster_or_slower(f.threads_vs_main, "pinning on the main thread", threads_pay)
    line = f"Pinning on the main thread (`num_threads=0`) was {main}, and pinning in threads (`num_threads={run.params['threads']}`) {threads}."
    return seen.say(line)


@dataclass(frozen=True)
class Epochs:
    """Section 6's facts: epoch and GPU work times (ms), the speed-up from pinning, pinned counts."""

    epoch_ms: dict[str, float]
    gpu_work_ms: float
    speedup: claims.Value  # epoch without / with pin_memory ("x"; above 1: faster pinned)
    all_pinned_or_none: bool  # every batch pinned with pin_memory=True, none without
    pinned_counts: str


def dataloader_facts(run: Run) -> Epochs:
    dl = run.value
    on, off = dl["pin_memory=True"], dl["pin_memory=False"]
    return Epochs(
        {k: r["epoch"].median_ms for k, r in dl.items()},
        run.params["step_ms"] * on["batches"],
        claims.ratio(off["epoch"], on["epoch"]),
        on["pinned batches"] == on["batches"] and off["pinned batches"] == 0,
        ", ".join(f"{k}: {r['pinned batches']} of {r['batches']} pinned" for k, r in dl.items()),
    )


def show_dataloader(run: Run) -> tables.Table:
    """Batches pinned and epoch time (ms, IQR / median, samples), and bars of the epoch times."""
    dl, f = run.value, dataloader_facts(run)
    title = plotting.titled("one DataLoader epoch", run)
    plotting.bars_with_ratios(f.epoch_ms, title=title, ylabel="time per epoch (ms, median)")
    rows = []
    for k, r in dl.items():
        e = r["epoch"]
        rows.append((k, r["pinned batches"], r["batches"], e.median_ms, e.spread, len(e.samples_s)))
    caption = f"medians; the GPU's stand-in work alone is {f.gpu_work_ms:.0f} ms per epoch"
    return tables.Table([*DL_COLUMNS, *TD_COLUMNS[2:]], rows, caption=caption)


def see_dataloader(run: Run) -> claims.WhatWeSee:
    """A check that batches come out pinned only with pin_memory=True; the epochs (ms) in words."""
    f, seen = dataloader_facts(run), claims.WhatWeSee(NOTEBOOK, run)
    statement = "With pin_memory=True every batch comes out pinned, without it none does"
    seen.check(statement, f.all_pinned_or_none, f.pinned_counts)
    line = f"An epoch took {f.epoch_ms['pin_memory=True']:.0f} ms with `pin_memory=True` and {f.epoch_ms['pin_memory=False']:.0f} ms without, beside {f.gpu_work_ms:.0f} ms of GPU work ({f.speedup.samples} samples each): the epoch with pinning ran {analysis.times(f.speedup)} as fast as the one without, {faster(f.speedup)}"
    return seen.say(line)


def add_claims(table: claims.ClaimsTable, run_td: Run, run_dl: Run) -> None:
    """Whether pinning pays, on the main thread or in threads, and DataLoader's pinned batches."""
    td, ms = tensordict_facts(run_td), {k: t.median_ms for k, t in run_td.value["timings"].items()}
    dl, pays, threads_pay = dataloader_facts(run_dl), td.pays, td.threads_pay
    dl_pays = claims.compare(dl.speedup, 1, holds_if="above")
    advice = f"{TUTORIAL} (tensordict and advice)"
    off, on = dl.epoch_ms["pin_memory=False"], dl.epoch_ms["pin_memory=True"]
    measured = (
        f"time of {td.pin_main} / time of {td.default} ({ms[td.pin_main]:.1f} and {ms[td.default]:.1f} ms, {CLOCK}); pays: {pays.in_words()}",
        f"time of {td.pin_threads} / time of {td.pin_main} ({ms[td.pin_threads]:.1f} and {ms[td.pin_main]:.1f} ms, {CLOCK}); threads pay: {threads_pay.in_words()}",
        f"epoch without pin_memory / epoch with it ({off:.0f} and {on:.0f} ms, {dl.speedup.samples} samples); pays: {dl_pays.in_words()}",
        dl.pinned_counts,
    )
    holds = (pays, threads_pay, dl_pays, dl.all_pinned_or_none)
    sources = [advice, advice, f"{TUTORIAL} (advice)"]
    sources += [f"{TUTORIAL} (advice: pin in a separate thread, as DataLoader does)"]
    rows = zip(CLAIMS, sources, measured, holds, (run_td, run_td, run_dl, run_dl), strict=True)
    for claim, source, said, held, run in rows:
        table.add(claim, source=source, measured=said, holds=held, run=run)
