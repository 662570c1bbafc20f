"""Results tables: one renderer for every table a notebook shows, the claims table too, as HTML,
aligned text (split into blocks, or records, beyond 100 characters) or Markdown. Cells keep their
type until shown, so a notebook passes values, not strings it formatted."""

from __future__ import annotations

import html
import numbers
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from . import checks

WIDTH = 100  # characters the text form may use before it splits
_SENTENCE = 40  # a text column with cells longer than this is printed as records when too wide
_DASH = "—"


def _format_cell(value: Any, fmt: str | Callable[[Any], str] | None = None) -> str:
    """How a table shows one cell: ``fmt`` (a format spec such as ``".1f"``, or a function) if
    given, else 4 significant figures for a float (no powers of ten between 0.01 and 100,000),
    thousands separators for an int, "—" for None."""
    if value is None:
        return _DASH
    if callable(fmt):
        return str(fmt(value))
    if fmt is not None and checks.is_number(value):
        return format(value, fmt)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        x = float(value)
        if x == 0 or x != x:
            return f"{x:g}"
        if 0.01 <= abs(x) < 1e5:
            return f"{x:.{max(0, 4 - len(str(int(abs(x)))))}f}" if abs(x) >= 1 else f"{x:.4g}"
        return f"{x:,.0f}" if abs(x) >= 1e5 else f"{x:.3g}"
    return str(value)


def _column(spec: Any) -> tuple[str, str, Any]:
    """``(name, unit, fmt)`` from a column given as "name", ("name", "unit") or ("name", "unit", fmt)."""
    if isinstance(spec, str) and spec:
        return spec, "", None
    if (
        isinstance(spec, tuple)
        and 2 <= len(spec) <= 3
        and all(isinstance(s, str) for s in spec[:2])
        and spec[0]
    ):
        fmt = spec[2] if len(spec) == 3 else None
        if fmt is not None and not isinstance(fmt, str) and not callable(fmt):
            raise TypeError(
                f"column {spec[0]!r}: a format is a spec such as '.1f' or a function, got {fmt!r}"
            )
        return spec[0], spec[1], fmt
    raise TypeError(
        f"a column is 'name', ('name', 'unit') or ('name', 'unit', '.1f'), got {spec!r}"
    )


class Table:
    """Rows of cells under columns, each "name", ("name", "unit") or ("name", "unit", fmt);
    ``bold`` names the columns shown in bold."""

    def __init__(
        self,
        columns: Sequence[Any],
        rows: Sequence[Sequence[Any]] = (),
        *,
        title: str = "",
        caption: str = "",
        bold: Sequence[str] = (),
    ) -> None:
        if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence) or not columns:
            raise TypeError("Table needs a list of columns, e.g. Table(['size', ('time', 'us')])")
        if not isinstance(title, str) or not isinstance(caption, str):
            raise TypeError("title and caption are strings (leave them out for none)")
        self.columns = [_column(c) for c in columns]
        names = [name for name, _, _ in self.columns]
        unknown = set(bold) - set(names)
        if unknown:
            raise ValueError(
                f"bold names columns {sorted(unknown)} that the table does not have: pick from {names}"
            )
        self.title, self.caption, self.bold = title, caption, set(bold)
        self.rows: list[list[Any]] = []
        for row in rows:
            self.add(*row)

    def add(self, *cells: Any) -> Table:
        """Append one row: one cell per column, in order. Returns the table."""
        if len(cells) != len(self.columns):
            raise ValueError(
                f"a row needs {len(self.columns)} cells ({', '.join(self.headers)}), got {len(cells)}"
            )
        self.rows.append(list(cells))
        return self

    @property
    def headers(self) -> list[str]:
        """Each column's header: its name, with its unit in brackets."""
        return [f"{name} ({unit})" if unit else name for name, unit, _ in self.columns]

    def _numeric(self) -> list[bool]:
        """Which columns hold numbers only (right-aligned)."""
        return [
            all(row[i] is None or checks.is_number(row[i]) for row in self.rows)
            and any(checks.is_number(row[i]) for row in self.rows)
            for i in range(len(self.columns))
        ]

    def _cells(self) -> list[list[str]]:
        return [
            [_format_cell(v, fmt) for v, (_, _, fmt) in zip(row, self.columns, strict=True)]
            for row in self.rows
        ]

    def to_text(self, width: int = WIDTH) -> str:
        """Aligned plain text at most ``width`` characters wide (split or as records when wider)."""
        cells, numeric = self._cells(), self._numeric()
        head = textwrap.wrap(self.title, width) if self.title else []
        tail = textwrap.wrap(self.caption, width) if self.caption else []
        columns = list(range(len(self.columns)))
        if _grid_width(self.headers, cells, columns) <= width:
            body = _grid(self.headers, cells, numeric, columns)
        elif any(not numeric[i] and len(row[i]) > _SENTENCE for row in cells for i in columns):
            body = _records(self.headers, cells)
        else:
            body = []
            for block in _blocks(self.headers, cells, width):
                body += ([""] if body else []) + _grid(self.headers, cells, numeric, block)
        return "\n".join(head + body + tail)

    __repr__ = to_text  # print() and Jupyter's plain text: the table itself

    def to_markdown(self) -> str:
        """A Markdown pipe table (numbers right-aligned), with the title above and caption below."""
        numeric = self._numeric()
        lines = [f"**{self.title}**", ""] if self.title else []
        lines.append("| " + " | ".join(_md(h) for h in self.headers) + " |")
        lines.append("| " + " | ".join("---:" if n else "---" for n in numeric) + " |")
        for row in self._cells():
            shown = [
                f"**{_md(c)}**" if name in self.bold else _md(c)
                for c, (name, _, _) in zip(row, self.columns, strict=True)
            ]
            lines.append("| " + " | ".join(shown) + " |")
        if self.caption:
            lines += ["", f"*{self.caption}*"]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        numeric = self._numeric()
        pad = "padding:2px 8px;"
        out = ['<table style="border-collapse:collapse;font-size:0.9em;margin:0.5em 0">']
        if self.title:
            out.append(
                f'<caption style="caption-side:top;text-align:left;font-weight:bold">{html.escape(self.title)}</caption>'
            )
        out.append(
            "<thead><tr>"
            + "".join(
                f'<th style="{pad}border-bottom:1px solid #888;text-align:{"right" if n else "left"}">{html.escape(h)}</th>'
                for h, n in zip(self.headers, numeric, strict=True)
            )
            + "</tr></thead><tbody>"
        )
        for row in self._cells():
            tds = []
            for c, n, (name, _, _) in zip(row, numeric, self.columns, strict=True):
                text = f"<b>{html.escape(c)}</b>" if name in self.bold else html.escape(c)
                tds.append(
                    f'<td style="{pad}text-align:{"right" if n else "left"};vertical-align:top">{text}</td>'
                )
            out.append("<tr>" + "".join(tds) + "</tr>")
        out.append("</tbody></table>")
        if self.caption:
            out.append(
                f'<p style="font-size:0.85em;margin-top:0"><i>{html.escape(self.caption)}</i></p>'
            )
        return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _widths(headers: list[str], cells: list[list[str]], columns: list[int]) -> list[int]:
    return [max([len(headers[i])] + [len(row[i]) for row in cells]) for i in columns]


def _grid_width(headers: list[str], cells: list[list[str]], columns: list[int]) -> int:
    return sum(_widths(headers, cells, columns)) + 3 * (len(columns) - 1)


def _grid(
    headers: list[str], cells: list[list[str]], numeric: list[bool], columns: list[int]
) -> list[str]:
    """Aligned lines of ``columns``: header, a rule, one line per row."""
    widths = _widths(headers, cells, columns)

    def line(texts: list[str]) -> str:
        return " | ".join(
            t.rjust(w) if numeric[i] else t.ljust(w)
            for t, w, i in zip(texts, widths, columns, strict=True)
        ).rstrip()

    return [line([headers[i] for i in columns]), "-+-".join("-" * w for w in widths)] + [
        line([row[i] for i in columns]) for row in cells
    ]


def _blocks(headers: list[str], cells: list[list[str]], width: int) -> list[list[int]]:
    """Column groups that each fit in ``width``, every group starting with the first column."""
    blocks: list[list[int]] = []
    current = [0]
    for i in range(1, len(headers)):
        if len(current) > 1 and _grid_width(headers, cells, current + [i]) > width:
            blocks.append(current)
            current = [0]
        current.append(i)
    blocks.append(current)
    return blocks


def _records(headers: list[str], cells: list[list[str]]) -> list[str]:
    """One record per row, ``header: value`` on its own line: for tables whose cells are sentences."""
    pad = max(len(h) for h in headers)
    out: list[str] = []
    for n, row in enumerate(cells):
        out += ([""] if n else []) + [
            f"{h.rjust(pad)}: {c}" for h, c in zip(headers, row, strict=True)
        ]
    return out
