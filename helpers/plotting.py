"""Plots for the course: bandwidth-versus-size curves, bars with ratios, timelines.

Conventions: bandwidth in decimal GB/s on every axis that shows it; sizes on a log axis with
binary prefixes; every title names the machine the numbers come from.

Taught in 00_start_here (how to read them) and used by every notebook.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from .timing import format_bytes
from .trace import Interval, Profile


def machine_title(what: str, machine: str, live: bool | None = None) -> str:
    """A title that says the machine: ``'H2D bandwidth - 1xNVIDIA-H100 (replayed)'``.

    Taught in 00_start_here.
    """
    if not isinstance(what, str) or not isinstance(machine, str):
        raise TypeError("machine_title needs two strings: what is plotted, and the machine name")
    suffix = "" if live is None else (" (live)" if live else " (replayed)")
    return f"{what} - {machine}{suffix}"


def _new_axes(ax: Axes | None, figsize: tuple[float, float] = (7, 4)) -> Axes:
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=figsize)
    return ax


def _numbers(values: Any, what: str, positive: bool = False) -> list[float]:
    """``values`` (a list, tuple or numpy array of numbers) as a list of floats, or a clear error."""
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
        raise TypeError(f"{what} must be a sequence of numbers (list, tuple or numpy array), got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{what} must hold numbers, found {v!r}")
        if positive and not v > 0:
            raise ValueError(f"{what} must be positive on a log axis, found {v!r}")
        out.append(float(v))
    return out


def bandwidth_vs_size(
    series: Mapping[str, tuple[Sequence[int], Sequence[float]]],
    *,
    title: str,
    ceiling_gbps: float | None = None,
    ceiling_label: str = "link ceiling",
    ax: Axes | None = None,
) -> Axes:
    """One line per series of (sizes in bytes, decimal GB/s); log-log axes.

    ``ceiling_gbps`` draws a dashed horizontal line (e.g. the link's measured ceiling).

    Taught in 00_start_here.
    """
    if not isinstance(series, Mapping) or not series:
        raise ValueError("bandwidth_vs_size needs at least one series: {'label': (sizes, gbps)}")
    if not isinstance(title, str):
        raise TypeError(f"title must be a string (plotting.machine_title(...) makes one), got {title!r}")
    if ceiling_gbps is not None and (isinstance(ceiling_gbps, bool) or not isinstance(ceiling_gbps, numbers.Real)):
        raise TypeError(f"ceiling_gbps is a rate in GB/s (or None), got {ceiling_gbps!r}")
    ax = _new_axes(ax)
    for label, pair in series.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"series {label!r} must be a pair (sizes in bytes, GB/s), got {type(pair).__name__}")
        sizes = _numbers(pair[0], f"series {label!r}: sizes", positive=True)
        gbps = _numbers(pair[1], f"series {label!r}: GB/s", positive=True)
        if len(sizes) != len(gbps) or not sizes:
            raise ValueError(f"series {label!r}: sizes and GB/s must be non-empty and of equal length")
        ax.plot(sizes, gbps, marker="o", label=label)
    if ceiling_gbps:
        ax.axhline(ceiling_gbps, linestyle="--", color="grey", label=f"{ceiling_label} ({ceiling_gbps:.0f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v)))
    ax.set_xlabel("transfer size (bytes, binary prefixes)")
    ax.set_ylabel("bandwidth (decimal GB/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax


def bars_with_ratios(
    values: Mapping[str, float],
    *,
    title: str,
    ylabel: str,
    baseline: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Bars, each labelled with its value and its ratio to ``baseline`` (the first bar by default).

    Taught in 01_pinned_memory.
    """
    if not isinstance(values, Mapping) or not values:
        raise ValueError("bars_with_ratios needs at least one value: {'label': number}")
    _numbers(list(values.values()), "bars_with_ratios values")
    baseline = baseline or next(iter(values))
    if baseline not in values:
        raise ValueError(f"baseline {baseline!r} is not one of the bars {list(values)}")
    ax = _new_axes(ax)
    labels, heights = list(values), list(values.values())
    bars = ax.bar(labels, heights, color="tab:blue")
    base = values[baseline]
    for bar, height in zip(bars, heights, strict=True):
        ratio = f"\n{height / base:.2f}x" if base else ""
        ax.annotate(f"{height:.3g}{ratio}", (bar.get_x() + bar.get_width() / 2, height),
                    ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=20)
    ax.margins(y=0.2)
    return ax


def grouped_bars(
    groups: Mapping[str, Mapping[str, float]],
    *,
    title: str,
    ylabel: str,
    ax: Axes | None = None,
) -> Axes:
    """Grouped bars: ``{group: {series: value}}``, one colour per series, values written on top.

    Taught in 02_non_blocking.
    """
    if not groups:
        raise ValueError("grouped_bars needs at least one group: {'group': {'series': value}}")
    series = list(dict.fromkeys(s for g in groups.values() for s in g))
    ax = _new_axes(ax, figsize=(8, 4))
    width = 0.8 / len(series)
    for k, name in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ys = [g.get(name, 0.0) for g in groups.values()]
        bars = ax.bar(xs, ys, width, label=name)
        ax.bar_label(bars, fmt="%.3g", fontsize=7)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    ax.margins(y=0.15)
    return ax


# ---------------------------------------------------------------- timelines

# Legend label and colour of each kind of slice a timeline draws.
_TIMELINE_STYLE: dict[str, tuple[str, str]] = {
    "kernel": ("kernel", "tab:blue"),
    "HtoD": ("copy HtoD (host to GPU)", "tab:green"),
    "DtoH": ("copy DtoH (GPU to host)", "tab:orange"),
    "DtoD": ("copy DtoD (same GPU)", "tab:purple"),
    "PtoP": ("copy PtoP (GPU to GPU)", "tab:red"),
    "copy": ("copy (other)", "tab:olive"),
    "memset": ("memset", "tab:gray"),
    "runtime": ("CUDA runtime call", "tab:brown"),
    "sync": ("host waits (synchronize)", "tab:pink"),
    "range": ("host range (record_function / nvtx)", "white"),
}
_MIN_DRAWN_FRACTION = 0.002  # slices shorter than this share of the span are drawn this wide


def _timeline_style(iv: Interval) -> str:
    """Which ``_TIMELINE_STYLE`` entry draws this interval."""
    if iv.kind == "memcpy":
        return iv.copy_kind if iv.copy_kind in _TIMELINE_STYLE else "copy"
    if iv.kind == "runtime":
        return "sync" if "Synchronize" in iv.name else "runtime"
    if iv.kind == "annotation":
        return "range"
    return iv.kind


def _timeline_lanes(intervals: list[Interval], include_host: bool,
                    ranges: Sequence[str] = ()) -> dict[str, list[Interval]]:
    """Lane label -> its intervals: GPU lanes by (device, stream), host threads, host ranges."""
    gpu: dict[tuple[int, int], list[Interval]] = {}
    host: dict[int, list[Interval]] = {}
    for iv in intervals:
        if iv.kind in ("kernel", "memcpy", "memset") and iv.device is not None and iv.stream is not None:
            gpu.setdefault((iv.device, iv.stream), []).append(iv)
        elif include_host and iv.kind == "runtime":
            host.setdefault(iv.thread if iv.thread is not None else -1, []).append(iv)
    lanes = {f"GPU {d} stream {s}": gpu[(d, s)] for d, s in sorted(gpu)}
    for thread in sorted(host):
        who = f"host thread {thread}" if thread >= 0 else "host"
        lanes[f"{who}: CUDA runtime calls"] = host[thread]
    for name in ranges:
        spans = [iv for iv in intervals if iv.kind == "annotation" and iv.device is None and name in iv.name]
        if spans:
            lanes[f"host range: {name}"] = spans
    return lanes


def _check_timeline_input(intervals: object, title: object, unit: object) -> list[Interval]:
    if isinstance(intervals, Profile):
        intervals = intervals.intervals
    if not isinstance(intervals, (list, tuple)):
        raise TypeError(
            f"timeline needs a list of trace.Interval (e.g. run.value.intervals), got {type(intervals).__name__}"
        )
    if not intervals:
        raise ValueError("timeline needs at least one interval: the list is empty (did the profile record any steps?)")
    for iv in intervals:
        if not isinstance(iv, Interval):
            raise TypeError(f"timeline needs trace.Interval objects, found a {type(iv).__name__}")
    if not isinstance(title, str):
        raise TypeError("title must be a string, e.g. plotting.machine_title('H2D next to a kernel', run.machine, run.live)")
    if unit not in ("auto", "us", "ms"):
        raise ValueError(f"unit must be 'auto', 'us' or 'ms', got {unit!r}")
    return list(intervals)


def timeline(
    intervals: list[Interval] | Profile,
    *,
    title: str,
    ax: Axes | None = None,
    unit: str = "auto",
    include_host: bool = True,
    ranges: Sequence[str] = (),
) -> Axes:
    """Draw a trace as horizontal lanes: one per (GPU, stream), then one per host thread.

    GPU lanes show kernels, copies (coloured by kind: HtoD, DtoH, DtoD, PtoP) and memsets;
    host lanes (``include_host``) show CUDA runtime calls, synchronize calls in their own
    colour; ``ranges`` adds one hatched lane per named host range (``record_function`` or nvtx,
    matched as a substring of the range's name). Time runs from 0 at the earliest slice drawn, in us or ms (``unit='auto'`` picks
    ms for spans over 2 ms). Slices shorter than 0.2% of the span are drawn that wide so they
    stay visible. Returns the Axes.

    Taught in 03_streams_and_overlap (and every notebook that shows a timeline).
    """
    intervals = _check_timeline_input(intervals, title, unit)
    lanes = _timeline_lanes(intervals, include_host, ranges)
    if not lanes:
        raise ValueError(
            "timeline found no GPU work (kernels, copies, memsets) and no runtime calls to draw: "
            "pass the intervals of a profile that ran CUDA work"
        )
    drawn = [iv for lane in lanes.values() for iv in lane]
    t0 = min(iv.start_us for iv in drawn)
    span = max(iv.end_us for iv in drawn) - t0
    if unit == "auto":
        unit = "ms" if span > 2000 else "us"
    scale = 1e-3 if unit == "ms" else 1.0
    min_width = span * scale * _MIN_DRAWN_FRACTION

    ax = _new_axes(ax, figsize=(9, 1.2 + 0.5 * len(lanes)))
    used: set[str] = set()
    for row, lane in enumerate(lanes.values()):
        by_style: dict[str, list[tuple[float, float]]] = {}
        for iv in lane:
            width = max(iv.duration_us * scale, min_width)
            by_style.setdefault(_timeline_style(iv), []).append(((iv.start_us - t0) * scale, width))
        for style, bars in by_style.items():
            hatched = {"edgecolors": "black", "hatch": "//"} if style == "range" else {}
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=_TIMELINE_STYLE[style][1], **hatched)
            used.add(style)
    ax.set_yticks(range(len(lanes)), list(lanes))
    ax.set_ylim(len(lanes) - 0.5, -0.5)  # first lane on top
    ax.set_xlim(0, span * scale * 1.02 or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(facecolor=color, edgecolor="black" if style == "range" else color,
                     hatch="//" if style == "range" else None, label=text)
               for style, (text, color) in _TIMELINE_STYLE.items() if style in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return ax


# ---------------------------------------------------------------- collectives (06)


def _format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return str(value)


def draw_before_after(collectives: Mapping[str, Mapping[str, Any]], *, title: str) -> Any:
    """Draw each rank's data before and after each collective: one row per collective, one
    column per rank, "before -> after" in each cell ('-' where a rank holds no such tensor).

    ``collectives`` maps a collective's name to ``{"before": [one value per rank], "after":
    [...]}`` (values: lists of numbers, lists of lists, or None), optionally with ``"call"``, the
    call as text, shown under the name. Returns the matplotlib Figure.

    Taught in 06_nccl_point_to_point_and_collectives.
    """
    if not isinstance(collectives, Mapping) or not collectives:
        raise ValueError("draw_before_after needs {collective name: {'before': [...], 'after': [...]}}")
    world = {len(c.get("before", [])) for c in collectives.values()} | {len(c.get("after", [])) for c in collectives.values()}
    if len(world) != 1 or 0 in world:
        raise ValueError("every collective needs one 'before' and one 'after' value per rank, for the same ranks")
    n_ranks = world.pop()
    text = {name: [(_format_value(c["before"][r]), _format_value(c["after"][r])) for r in range(n_ranks)]
            for name, c in collectives.items()}
    # Column widths in characters, so that long lists never run into the next box.
    widths = [(max(len(text[name][r][0]) for name in text), max(len(text[name][r][1]) for name in text))
              for r in range(n_ranks)]
    chars = [b + a + 8 for b, a in widths]
    char_in = 0.09  # inches per character of 9-point monospace, padding included
    label_in = 2.6
    fig = plt.figure(figsize=(label_in + char_in * sum(chars), 0.6 * len(collectives) + 0.9))
    grid = fig.add_gridspec(len(collectives), n_ranks, width_ratios=chars,
                            left=label_in / (label_in + char_in * sum(chars)), right=0.99,
                            top=1 - 0.6 / (0.6 * len(collectives) + 0.9), bottom=0.02, hspace=0.6)
    for row, name in enumerate(collectives):
        for rank in range(n_ranks):
            ax = fig.add_subplot(grid[row, rank])
            ax.set_axis_off()
            before, after = text[name][rank]
            width_b = widths[rank][0]
            box = {"boxstyle": "round", "ec": "#999999"}
            ax.text(0.0, 0.5, before, va="center", ha="left", family="monospace", fontsize=9,
                    bbox={**box, "fc": "#eeeeee"})
            ax.text((width_b + 3.0) / chars[rank], 0.5, "->", va="center", ha="center", fontsize=10)
            ax.text((width_b + 5.0) / chars[rank], 0.5, after, va="center", ha="left", family="monospace",
                    fontsize=9, bbox={**box, "fc": "#cfe8cf" if before != after else "#eeeeee"})
            if row == 0:
                ax.set_title(f"rank {rank}: before -> after", fontsize=10, loc="left")
            if rank == 0:
                call = collectives[name].get("call")
                ax.text(-0.04, 0.5, name + (f"\n{call}" if call else ""), va="center", ha="right", fontsize=9,
                        transform=ax.transAxes)
    fig.suptitle(title)
    return fig
