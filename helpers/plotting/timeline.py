"""Timelines: what ran on each GPU stream and host thread, drawn from a profile's intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..trace import Interval, Profile

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


def _lanes(
    intervals: list[Interval],
    include_host: bool,
    ranges: Sequence[str],
    stream_names: Mapping[int, str] | None,
) -> dict[str, list[Interval]]:
    """Lane label -> its intervals: GPU lanes by (device, stream), host threads, host ranges."""
    if stream_names is not None and (
        not isinstance(stream_names, Mapping)
        or not all(isinstance(k, int) and isinstance(v, str) for k, v in stream_names.items())
    ):
        raise TypeError(
            f"stream_names maps the profiler's stream ids to the notebook's names, e.g. {{13: 'side'}}; "
            f"got {stream_names!r}"
        )
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
    if not lanes:
        raise ValueError(
            "timeline found no GPU work (kernels, copies, memsets) and no runtime calls to draw: "
            "pass the intervals of a profile that ran CUDA work"
        )
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
        raise TypeError("title must be a string, e.g. plotting.titled('H2D next to a kernel', run)")
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
    """Draw a trace as lanes: one per (GPU, stream), named as ``stream_names`` ({id: name}) says,
    then one per host thread (``include_host``), and one hatched lane per host range in ``ranges``
    (matched as a substring). Time runs from 0 at the first slice, in us or ms (``unit='auto'``:
    ms for spans over 2 ms). Returns the Axes."""
    intervals = _check_timeline_input(intervals, title, unit)
    lanes = _lanes(intervals, include_host, ranges, stream_names)
    t0, span = _span_us(lanes)
    unit, scale = _unit_and_scale(unit, span)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 1.2 + 0.5 * len(lanes)))
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
    """Several traces to compare (``{panel title: intervals or Profile}``), stacked on one time
    axis, each starting at 0 at its own first slice, with one colour key. Returns the Figure."""
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError("timelines needs at least one panel: {'panel title': run.value.intervals}")
    if not isinstance(title, str):
        raise TypeError(
            "title must be a string, e.g. plotting.titled('Copies beside kernels', run)"
        )
    lanes_of = {
        name: _lanes(
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
