"""Charts: bandwidth-versus-size curves, bars with ratios, the axes they share."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, Locator, LogLocator, NullFormatter

from .. import checks
from ..timing import format_bytes


def machine_title(what: str, machine: str, live: bool | None = None) -> str:
    """A title that says the machine: ``'H2D bandwidth - 1xNVIDIA-H100 (replayed)'``."""
    if not isinstance(what, str) or not isinstance(machine, str):
        raise TypeError("machine_title needs two strings: what is plotted, and the machine name")
    suffix = "" if live is None else (" (live)" if live else " (replayed)")
    return f"{what} - {machine}{suffix}"


class Measured(Protocol):
    """What says where it was measured: a ``records.Run``."""

    @property
    def machine(self) -> str: ...

    live: bool


def titled(what: str, run: Measured) -> str:
    """``machine_title`` for a run: ``what``, the run's machine, live or replayed."""
    return machine_title(what, run.machine, run.live)


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
    binary prefixes (1 KiB, 64 MiB, 1 GiB). Returns ``ax``."""
    target, set_scale = _one_axis(ax, axis, "size_axis")
    set_scale("log", base=2)
    target.set_major_locator(_PowersOfTwo())
    target.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v)))
    target.set_minor_formatter(NullFormatter())
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)
    return ax


def log_axis(ax: Axes, axis: str = "y") -> Axes:
    """Make ``axis`` ("x" or "y") of ``ax`` a log10 axis labelled with plain numbers (1, 2, 5, 10,
    20, 50 ...), never 6x10^1. Returns ``ax``."""
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
    """One line per series of (sizes in bytes, decimal GB/s) on log-log axes; ``ceiling_gbps``
    a dashed line; ``groups`` (series -> group) one colour and legend entry per group."""
    if not isinstance(series, Mapping) or not series:
        raise ValueError("bandwidth_vs_size needs at least one series: {'label': (sizes, gbps)}")
    if not isinstance(title, str):
        raise TypeError(
            f"title must be a string (plotting.titled(what, run) makes one), got {title!r}"
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
        style: dict[str, Any] = {"label": label}
        if groups:
            group = groups[label]
            name = f"{group} ({counts[group]} series)" if counts[group] > 1 else group
            style = {"label": "_nolegend_" if group in shown else name, "markersize": 3}
            style |= {"color": colours[group], "alpha": 0.8}
            shown.add(group)
        ax.plot(sizes, gbps, marker="o", **style)
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
    """Bars, each labelled with its value and its ratio to ``baseline`` (the first bar by default)."""
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
            f"{_bar_number(height)}{ratio}",
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


def _bar_number(x: float) -> str:
    """A bar's value as written on it: three significant figures below 1000, whole numbers from
    there (12346, never "1.23e+04")."""
    return f"{x:.0f}" if abs(x) >= 999.5 else f"{x:.3g}"


def grouped_bars(
    groups: Mapping[str, Mapping[str, float]],
    *,
    title: str,
    ylabel: str,
    ax: Axes | None = None,
) -> Axes:
    """Grouped bars: ``{group: {series: value}}``, one colour per series, values written on top."""
    if not groups:
        raise ValueError("grouped_bars needs at least one group: {'group': {'series': value}}")
    series = list(dict.fromkeys(s for g in groups.values() for s in g))
    ax = _new_axes(ax, figsize=(8, 4))
    width = 0.8 / len(series)
    for k, name in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(groups))]
        ys = [g.get(name, 0.0) for g in groups.values()]
        bars = ax.bar(xs, ys, width, label=name)
        ax.bar_label(bars, fmt=_bar_number, fontsize=7)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    ax.margins(y=0.15)
    return ax
