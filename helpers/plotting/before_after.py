"""Before-and-after drawings of collectives (06): what each rank holds around each call."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

# a wider drawing is shrunk by the page until its text cannot be read
BEFORE_AFTER_MAX_WIDTH_IN = 10.5
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
    """The ranks in as few blocks, as even as can be, as keep a row within the widest drawing."""
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
    y = 1 - (top_lines + 0.35) / height_lines
    _boxed(ax, y, before, "#eeeeee")
    y -= (len(before) + 0.8) / height_lines
    ax.text(0.03, y, "  \u2193", va="center", ha="left", fontsize=10)
    _boxed(ax, y - 0.75 / height_lines, after, "#cfe8cf" if before != after else "#eeeeee")


def _boxed(ax: Axes, y: float, lines: list[str], colour: str) -> None:
    """Lines of monospace text in a rounded box of ``colour``, its top at ``y`` (axes fraction)."""
    box = {"boxstyle": "round,pad=0.3", "ec": "#999999", "fc": colour}
    ax.text(
        0.03, y, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=9, bbox=box
    )


def draw_before_after(collectives: Mapping[str, Mapping[str, Any]], *, title: str) -> Figure:
    """Each rank's data before (grey) and after (green where it changed) each collective of
    ``{name: {"before": [one value per rank], "after": [...], "call": optional text}}``: one row
    per collective, one column per rank, in blocks of ranks beyond the widest drawing."""
    if not isinstance(collectives, Mapping) or not collectives:
        raise ValueError(
            "draw_before_after needs {collective name: {'before': [...], 'after': [...]}}"
        )
    if not isinstance(title, str):
        raise TypeError(
            f"title must be a string (plotting.titled(what, run) makes one), got {title!r}"
        )
    world = {len(c.get(side, [])) for c in collectives.values() for side in ("before", "after")}
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
