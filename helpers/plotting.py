"""Plots for the course: bandwidth-versus-size curves, bars with ratios, timelines.

Conventions: bandwidth in decimal GB/s on every axis that shows it; sizes on a log axis with
binary prefixes; every title names the machine the numbers come from.

Taught in 00_start_here (how to read them) and used by every notebook.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, Locator, LogLocator, NullFormatter

from . import checks
from .timing import format_bytes
from .trace import Interval, Profile


def machine_title(what: str, machine: str, live: bool | None = None) -> str:
    """A title that says the machine: ``'H2D bandwidth - 1xNVIDIA-H100 (replayed)'``.

    Used by the lessons (helpers/lessons/).
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
        raise TypeError(
            f"{what} must be a sequence of numbers (list, tuple or numpy array), got {type(values).__name__}"
        )
    out = []
    for v in values:
        if not checks.is_number(v):
            raise TypeError(f"{what} must hold numbers, found {v!r}")
        if positive and not v > 0:
            raise ValueError(f"{what} must be positive on a log axis, found {v!r}")
        out.append(float(v))
    return out


def _plain(v: float) -> str:
    """A tick label without powers of ten: 0.5, 60, 1200."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:g}"


class _PowersOfTwo(Locator):
    """Ticks at 2^(k*step), step 1, 2, 5 or 10 (all divide 10, so 1 KiB, 1 MiB and 1 GiB are
    always ticks), the smallest step giving at most 10 ticks."""

    def __call__(self) -> list[float]:
        assert self.axis is not None, "a locator reads its axis once matplotlib has set it"
        low, high = sorted(self.axis.get_view_interval())
        return self.tick_values(low, high)

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        first, last = math.floor(math.log2(max(vmin, 1e-9))), math.ceil(math.log2(max(vmax, 2e-9)))
        step = next(
            (s for s in (1, 2, 5, 10) if (last - first) / s <= 10),
            10 * math.ceil((last - first) / 100),
        )
        return [2.0**e for e in range(first - first % step, last + 1, step)]


def _one_axis(ax: Any, axis: Any, caller: str) -> tuple[Any, Callable[..., Any]]:
    """``ax``'s x or y axis and the setter of its scale, the arguments checked."""
    if not isinstance(ax, Axes):
        raise TypeError(
            f"{caller} needs a matplotlib Axes (e.g. from plt.subplots()), got {type(ax).__name__}"
        )
    if axis not in ("x", "y"):
        raise ValueError(f"axis is 'x' or 'y', got {axis!r}")
    return (ax.xaxis, ax.set_xscale) if axis == "x" else (ax.yaxis, ax.set_yscale)


def size_axis(
    ax: Axes, axis: str = "x", label: str = "transfer size (bytes, binary prefixes)"
) -> Axes:
    """Make ``axis`` ("x" or "y") of ``ax`` a log2 axis of sizes in bytes, ticks labelled with
    binary prefixes (1 KiB, 64 MiB, 1 GiB), never 6x10^1. Returns ``ax``.

    Used by the lessons (helpers/lessons/).
    """
    target, set_scale = _one_axis(ax, axis, "size_axis")
    set_scale("log", base=2)
    target.set_major_locator(_PowersOfTwo())
    target.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v)))
    target.set_minor_formatter(NullFormatter())
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)
    return ax


def log_axis(ax: Axes, axis: str = "y") -> Axes:
    """Make ``axis`` ("x" or "y") of ``ax`` a log10 axis labelled with plain numbers (1, 2, 5, 10,
    20, 50 ...), never 6x10^1; keeps the axis label. Returns ``ax``.

    Used by the lessons (helpers/lessons/).
    """
    target, set_scale = _one_axis(ax, axis, "log_axis")
    set_scale("log")
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: _plain(v)))
    target.set_minor_locator(LogLocator(base=10, subs="all"))
    target.set_minor_formatter(NullFormatter())
    return ax


def _group_colours(labels: Sequence[str], groups: Mapping[str, str] | None) -> dict[str, str]:
    """The colour of each series: one per series, or one per group of ``groups`` (series -> group)."""
    if groups is None:
        return {}
    if not isinstance(groups, Mapping):
        raise TypeError(
            "groups maps each series' label to its group's label, e.g. {'cuda:0 -> cuda:1': 'NVLink'}"
        )
    missing = [label for label in labels if label not in groups]
    if missing:
        raise ValueError(
            f"groups gives no group for the series {missing}: map every series to a group's label"
        )
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(dict.fromkeys(groups[label] for label in labels))
    return {name: cycle[k % len(cycle)] for k, name in enumerate(names)}


def bandwidth_vs_size(
    series: Mapping[str, tuple[Sequence[int], Sequence[float]]],
    *,
    title: str,
    ceiling_gbps: float | None = None,
    ceiling_label: str = "link ceiling",
    groups: Mapping[str, str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """One line per series of (sizes in bytes, decimal GB/s); log-log axes, sizes labelled with
    binary prefixes and rates with plain numbers.

    ``ceiling_gbps`` draws a dashed horizontal line (e.g. the link's measured ceiling).
    ``groups`` (series label -> group label) draws the series of a group in one colour with one
    legend entry, "group (n)", so twelve GPU pairs read as one or two kinds of link.

    Used by the lessons (helpers/lessons/).
    """
    if not isinstance(series, Mapping) or not series:
        raise ValueError("bandwidth_vs_size needs at least one series: {'label': (sizes, gbps)}")
    if not isinstance(title, str):
        raise TypeError(
            f"title must be a string (plotting.machine_title(...) makes one), got {title!r}"
        )
    if ceiling_gbps is not None and not checks.is_number(ceiling_gbps):
        raise TypeError(f"ceiling_gbps is a rate in GB/s (or None), got {ceiling_gbps!r}")
    ax = _new_axes(ax)
    colours = _group_colours(list(series), groups)
    counts = (
        {g: sum(1 for label in series if groups[label] == g) for g in colours} if groups else {}
    )
    shown: set[str] = set()
    for label, pair in series.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(
                f"series {label!r} must be a pair (sizes in bytes, GB/s), got {type(pair).__name__}"
            )
        sizes = _numbers(pair[0], f"series {label!r}: sizes", positive=True)
        gbps = _numbers(pair[1], f"series {label!r}: GB/s", positive=True)
        if len(sizes) != len(gbps) or not sizes:
            raise ValueError(
                f"series {label!r}: sizes and GB/s must be non-empty and of equal length"
            )
        if groups:
            group = groups[label]
            name = f"{group} ({counts[group]} series)" if counts[group] > 1 else group
            ax.plot(
                sizes,
                gbps,
                marker="o",
                markersize=3,
                color=colours[group],
                alpha=0.8,
                label="_nolegend_" if group in shown else name,
            )
            shown.add(group)
        else:
            ax.plot(sizes, gbps, marker="o", label=label)
    if ceiling_gbps:
        ax.axhline(
            ceiling_gbps,
            linestyle="--",
            color="grey",
            label=f"{ceiling_label} ({ceiling_gbps:.0f} GB/s)",
        )
    size_axis(ax)
    log_axis(ax, "y")
    ax.set_ylabel("bandwidth (decimal GB/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
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

    Used by the lessons (helpers/lessons/).
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
        ax.annotate(
            f"{height:.3g}{ratio}",
            (bar.get_x() + bar.get_width() / 2, height),
            ha="center",
            va="bottom",
            fontsize=8,
        )
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

    Used by the lessons (helpers/lessons/).
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


DEFAULT_STREAM_ID = 7  # the stream id the profiler (Kineto) gives each GPU's default stream


def _stream_label(device: int, stream: int, names: Mapping[int, str] | None) -> str:
    name = (names or {}).get(stream) or (
        "default stream" if stream == DEFAULT_STREAM_ID else f"stream {stream}"
    )
    return f"GPU {device}: {name}"


def _timeline_lanes(
    intervals: list[Interval],
    include_host: bool,
    ranges: Sequence[str] = (),
    stream_names: Mapping[int, str] | None = None,
) -> dict[str, list[Interval]]:
    """Lane label -> its intervals: GPU lanes by (device, stream), host threads, host ranges."""
    gpu: dict[tuple[int, int], list[Interval]] = {}
    host: dict[int, list[Interval]] = {}
    for iv in intervals:
        if (
            iv.kind in ("kernel", "memcpy", "memset")
            and iv.device is not None
            and iv.stream is not None
        ):
            gpu.setdefault((iv.device, iv.stream), []).append(iv)
        elif include_host and iv.kind == "runtime":
            host.setdefault(iv.thread if iv.thread is not None else -1, []).append(iv)
    lanes = {_stream_label(d, s, stream_names): gpu[(d, s)] for d, s in sorted(gpu)}
    for thread in sorted(host):
        who = f"host thread {thread}" if thread >= 0 else "host"
        lanes[f"{who}: CUDA runtime calls"] = host[thread]
    for name in ranges:
        spans = [
            iv
            for iv in intervals
            if iv.kind == "annotation" and iv.device is None and name in iv.name
        ]
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
        raise ValueError(
            "timeline needs at least one interval: the list is empty (did the profile record any steps?)"
        )
    for iv in intervals:
        if not isinstance(iv, Interval):
            raise TypeError(f"timeline needs trace.Interval objects, found a {type(iv).__name__}")
    if not isinstance(title, str):
        raise TypeError(
            "title must be a string, e.g. plotting.machine_title('H2D next to a kernel', run.machine, run.live)"
        )
    if unit not in ("auto", "us", "ms"):
        raise ValueError(f"unit must be 'auto', 'us' or 'ms', got {unit!r}")
    return list(intervals)


def _span_us(lanes: Mapping[str, list[Interval]]) -> tuple[float, float]:
    """(start, length) in us of everything the lanes draw."""
    drawn = [iv for lane in lanes.values() for iv in lane]
    t0 = min(iv.start_us for iv in drawn)
    return t0, max(iv.end_us for iv in drawn) - t0


def _draw_lanes(
    ax: Axes, lanes: Mapping[str, list[Interval]], t0: float, scale: float, min_width: float
) -> set[str]:
    """Draw each lane as a row of slices coloured by kind, first lane on top; the kinds drawn."""
    used: set[str] = set()
    for row, lane in enumerate(lanes.values()):
        by_style: dict[str, list[tuple[float, float]]] = {}
        for iv in lane:
            width = max(iv.duration_us * scale, min_width)
            by_style.setdefault(_timeline_style(iv), []).append(((iv.start_us - t0) * scale, width))
        for style, bars in by_style.items():
            hatched: dict[str, Any] = (
                {"edgecolors": "black", "hatch": "//"} if style == "range" else {}
            )
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=_TIMELINE_STYLE[style][1], **hatched)
            used.add(style)
    ax.set_yticks(range(len(lanes)), list(lanes))
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.grid(True, axis="x", alpha=0.3)
    return used


def _colour_key(used: set[str]) -> list[Patch]:
    """One legend entry per kind of slice drawn, in the key's fixed order."""
    return [
        Patch(
            facecolor=color,
            edgecolor="black" if style == "range" else color,
            hatch="//" if style == "range" else None,
            label=text,
        )
        for style, (text, color) in _TIMELINE_STYLE.items()
        if style in used
    ]


def _lanes_or_error(
    intervals: list[Interval],
    include_host: bool,
    ranges: Sequence[str],
    stream_names: Mapping[int, str] | None = None,
) -> dict[str, list[Interval]]:
    if stream_names is not None and (
        not isinstance(stream_names, Mapping)
        or not all(isinstance(k, int) and isinstance(v, str) for k, v in stream_names.items())
    ):
        raise TypeError(
            f"stream_names maps the profiler's stream ids to the notebook's names, e.g. {{13: 'side'}}; "
            f"got {stream_names!r}"
        )
    lanes = _timeline_lanes(intervals, include_host, ranges, stream_names)
    if not lanes:
        raise ValueError(
            "timeline found no GPU work (kernels, copies, memsets) and no runtime calls to draw: "
            "pass the intervals of a profile that ran CUDA work"
        )
    return lanes


def _unit_and_scale(unit: str, span_us: float) -> tuple[str, float]:
    if unit == "auto":
        unit = "ms" if span_us > 2000 else "us"
    return unit, 1e-3 if unit == "ms" else 1.0


def timeline(
    intervals: list[Interval] | Profile,
    *,
    title: str,
    ax: Axes | None = None,
    unit: str = "auto",
    include_host: bool = True,
    ranges: Sequence[str] = (),
    stream_names: Mapping[int, str] | None = None,
) -> Axes:
    """Draw a trace as horizontal lanes: one per (GPU, stream), then one per host thread.

    GPU lanes show kernels, copies (coloured by kind: HtoD, DtoH, DtoD, PtoP) and memsets;
    host lanes (``include_host``) show CUDA runtime calls, synchronize calls in their own
    colour; ``ranges`` adds one hatched lane per named host range (``record_function`` or nvtx,
    matched as a substring of the range's name). A GPU lane is named "GPU 0: default stream" or
    "GPU 0: stream 13" (the profiler's id), or as ``stream_names`` ({id: name}) says. Time runs from 0 at the earliest slice drawn, in us or ms (``unit='auto'`` picks
    ms for spans over 2 ms). Slices shorter than 0.2% of the span are drawn that wide so they
    stay visible. Returns the Axes. To compare several traces, use ``timelines``.

    Used by the lessons (helpers/lessons/).
    """
    intervals = _check_timeline_input(intervals, title, unit)
    lanes = _lanes_or_error(intervals, include_host, ranges, stream_names)
    t0, span = _span_us(lanes)
    unit, scale = _unit_and_scale(unit, span)
    ax = _new_axes(ax, figsize=(9, 1.2 + 0.5 * len(lanes)))
    used = _draw_lanes(ax, lanes, t0, scale, span * scale * _MIN_DRAWN_FRACTION)
    ax.set_xlim(0, span * scale * 1.02 or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title)
    ax.legend(
        handles=_colour_key(used),
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
    )
    return ax


def timelines(
    panels: Mapping[str, list[Interval] | Profile],
    *,
    title: str,
    unit: str = "auto",
    include_host: bool = True,
    ranges: Sequence[str] = (),
    stream_names: Mapping[int, str] | None = None,
) -> Figure:
    """Draw several traces to be compared: one panel each, stacked, on ONE shared time axis.

    ``panels`` maps a panel's title (what differs: "pinned, side stream") to its intervals or
    Profile. Each panel's time starts at 0 at its own first slice, and every panel spans the
    longest one's time, so equal lengths mean equal durations. One colour key for the figure:
    the same colour is the same kind of work in every panel. ``title`` (the machine's, from
    ``machine_title``) heads the figure. ``stream_names`` names GPU lanes as in ``timeline``.
    Returns the Figure.

    Used by the lessons (helpers/lessons/).
    """
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError("timelines needs at least one panel: {'panel title': run.value.intervals}")
    if not isinstance(title, str):
        raise TypeError(
            "title must be a string, e.g. plotting.machine_title('Copies beside kernels', run.machine, run.live)"
        )
    lanes_of = {
        name: _lanes_or_error(
            _check_timeline_input(ivs, str(name), unit), include_host, ranges, stream_names
        )
        for name, ivs in panels.items()
    }
    starts = {name: _span_us(lanes)[0] for name, lanes in lanes_of.items()}
    longest = max(_span_us(lanes)[1] for lanes in lanes_of.values())
    unit, scale = _unit_and_scale(unit, longest)
    heights = [0.8 + 0.45 * len(lanes) for lanes in lanes_of.values()]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(10, 0.9 + sum(heights)),
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    used: set[str] = set()
    for ax, (name, lanes) in zip(axes[:, 0], lanes_of.items(), strict=True):
        used |= _draw_lanes(ax, lanes, starts[name], scale, longest * scale * _MIN_DRAWN_FRACTION)
        ax.set_title(str(name), fontsize=10, loc="left")
    axes[-1, 0].set_xlim(0, longest * scale * 1.02 or 1.0)
    axes[-1, 0].set_xlabel(
        f"time since the panel's first slice ({unit}), same scale in every panel"
    )
    fig.suptitle(title)
    fig.legend(
        handles=_colour_key(used),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(4, len(used)),
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- collectives (06)


BEFORE_AFTER_MAX_WIDTH_IN = (
    10.5  # a wider drawing is shrunk by the page until its text cannot be read
)
_VALUE_CHARS = 20  # a value's text wraps, between its elements, at this many characters
_CHAR_IN = 0.076  # inches per character of 9-point monospace
_LINE_IN = 0.19  # inches per line of 9-point text in a box
_CALL_CHARS = 24  # a call's text, left of its row, wraps at this many characters


def _format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return str(value)


def _value_lines(value: Any, width: int = _VALUE_CHARS) -> list[str]:
    """A value's text in lines of at most ``width`` characters where it can, broken only between
    its top-level elements: ``[[0, 1, 2], [1, 2, 3],`` / `` [2, 3, 4]]``."""
    text = _format_value(value)
    if len(text) <= width or not isinstance(value, (list, tuple)):
        return [text]
    items = [_format_value(v) + ("]" if k == len(value) - 1 else ",") for k, v in enumerate(value)]
    lines, line = [], "[" + items[0]
    for item in items[1:]:
        if len(line) + 1 + len(item) > width:
            lines.append(line)
            line = " " + item
        else:
            line += " " + item
    return [*lines, line]


def _rank_blocks(n_ranks: int, column_in: float, label_in: float) -> list[list[int]]:
    """The ranks split into as few blocks as keep a row within BEFORE_AFTER_MAX_WIDTH_IN, as even as can be."""
    fit = max(1, int((BEFORE_AFTER_MAX_WIDTH_IN - label_in) // column_in))
    blocks = math.ceil(n_ranks / fit)
    per_block = math.ceil(n_ranks / blocks)
    return [
        list(range(start, min(start + per_block, n_ranks)))
        for start in range(0, n_ranks, per_block)
    ]


def _draw_cell(
    ax: Axes, before: list[str], after: list[str], height_lines: float, top_lines: float
) -> None:
    """One rank's data in one row, ``top_lines`` lines down: the value before (grey box) above
    the value after (green if it changed); the axes are ``height_lines`` lines high."""
    ax.set_axis_off()
    box = {"boxstyle": "round,pad=0.3", "ec": "#999999"}
    y = 1 - (top_lines + 0.35) / height_lines
    ax.text(
        0.03,
        y,
        "\n".join(before),
        va="top",
        ha="left",
        family="monospace",
        fontsize=9,
        bbox={**box, "fc": "#eeeeee"},
    )
    y -= (len(before) + 0.8) / height_lines
    ax.text(0.03, y, "  \u2193", va="center", ha="left", fontsize=10)
    ax.text(
        0.03,
        y - 0.75 / height_lines,
        "\n".join(after),
        va="top",
        ha="left",
        family="monospace",
        fontsize=9,
        bbox={**box, "fc": "#cfe8cf" if before != after else "#eeeeee"},
    )


def draw_before_after(collectives: Mapping[str, Mapping[str, Any]], *, title: str) -> Figure:
    """Draw each rank's data before and after each collective: one row per collective, one
    column per rank, each cell the value before (grey) above the value after (green where it
    changed); '-' where a rank holds no such tensor.

    ``collectives`` maps a collective's name to ``{"before": [one value per rank], "after":
    [...]}`` (values: lists of numbers, lists of lists, or None), optionally with ``"call"``, the
    call as text, shown under the name. Long values wrap between their elements; with more
    ranks than fit in ``BEFORE_AFTER_MAX_WIDTH_IN`` inches the ranks wrap into blocks (ranks 0-3,
    then 4-7), so the text keeps its size for 2, 4 or 8 ranks. Returns the matplotlib Figure,
    with one Axes per collective and rank.

    Used by the lessons (helpers/lessons/).
    """
    if not isinstance(collectives, Mapping) or not collectives:
        raise ValueError(
            "draw_before_after needs {collective name: {'before': [...], 'after': [...]}}"
        )
    if not isinstance(title, str):
        raise TypeError(
            f"title must be a string (plotting.machine_title(...) makes one), got {title!r}"
        )
    world = {len(c.get("before", [])) for c in collectives.values()} | {
        len(c.get("after", [])) for c in collectives.values()
    }
    if len(world) != 1 or 0 in world:
        raise ValueError(
            "every collective needs one 'before' and one 'after' value per rank, for the same ranks"
        )
    n_ranks = world.pop()
    lines = {
        name: [(_value_lines(c["before"][r]), _value_lines(c["after"][r])) for r in range(n_ranks)]
        for name, c in collectives.items()
    }
    labels = {
        name: "\n".join([name, *textwrap.wrap(str(c.get("call") or ""), _CALL_CHARS)])
        for name, c in collectives.items()
    }
    chars = max(
        len(line) for cells in lines.values() for pair in cells for side in pair for line in side
    )
    column_in = _CHAR_IN * max(chars, 10) + 0.35
    label_in = (
        0.07 * max(len(line) for label in labels.values() for line in label.splitlines()) + 0.35
    )
    blocks = _rank_blocks(n_ranks, column_in, label_in)
    # one grid row per (block, collective), in lines of text: the rank headings atop a block's
    # first row, then before, the arrow, after and a gap; a gap of 2 lines between blocks
    rows = []
    for k, block in enumerate(blocks):
        for m, name in enumerate(collectives):
            top = (2.0 if k and not m else 0.0) + (1.6 if not m else 0.0)
            needed = max(len(lines[name][r][0]) + len(lines[name][r][1]) for r in block)
            rows.append((block, name, needed + 2.8 + top, top))
    heights = [h * _LINE_IN for _, _, h, _ in rows]
    head_in, side_in = 0.75, 0.15
    width_in = max(label_in + column_in * len(blocks[0]) + side_in, 6.0)  # room for the title
    height_in = head_in + sum(heights) + 0.1
    fig = plt.figure(figsize=(width_in, height_in))
    grid = fig.add_gridspec(
        len(rows),
        len(blocks[0]),
        height_ratios=heights,
        left=label_in / width_in,
        right=1 - side_in / width_in,
        top=1 - head_in / height_in,
        bottom=0.1 / height_in,
        hspace=0,
        wspace=0,
    )
    for row, (block, name, height_lines, top) in enumerate(rows):
        for col, rank in enumerate(block):
            ax = fig.add_subplot(grid[row, col])
            _draw_cell(ax, *lines[name][rank], height_lines, top)
            if top:
                ax.text(
                    0.03,
                    1 - (top - 1.2) / height_lines,
                    f"rank {rank}",
                    va="center",
                    ha="left",
                    fontsize=10,
                    fontweight="bold",
                )
            if col == 0:
                ax.text(
                    -0.05,
                    1 - (top + 0.35) / height_lines,
                    labels[name],
                    va="top",
                    ha="right",
                    fontsize=9,
                    transform=ax.transAxes,
                )
    fig.suptitle(title, y=1 - 0.12 / height_in, va="top")
    fig.text(
        0.5,
        1 - 0.48 / height_in,
        "before the call (grey) \u2193 after it (green where it changed)",
        ha="center",
        va="top",
        fontsize=9,
        color="#555555",
    )
    return fig
