"""Small notebook tools for maintainers.

    python tools/nbtool.py from-py SCRIPT.py NOTEBOOK.ipynb   # '# %%' / '# %% [markdown]' cells -> notebook
    python tools/nbtool.py to-py NOTEBOOK.ipynb SCRIPT.py     # the reverse, to edit a notebook as text
    python tools/nbtool.py to-py NOTEBOOK.ipynb               # the same text on standard output
    python tools/nbtool.py strip NOTEBOOK.ipynb [...]         # drop outputs and execution counts

Notebooks are committed without outputs and with kernel ``python3``; ``from-py`` and
``strip`` write them that way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def _cell(kind: str, lines: list[str]) -> dict:
    """A notebook cell of ``kind`` from script lines (markdown lines lose their '# ')."""
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    if kind == "markdown":
        lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines]
    source = [line + "\n" for line in lines]
    if source:
        source[-1] = source[-1].rstrip("\n")
    cell = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def from_py(script: Path) -> dict:
    cells, kind, lines = [], None, []
    for line in script.read_text().splitlines():
        if line.startswith("# %%"):
            if kind is not None:
                cells.append(_cell(kind, lines))
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        cells.append(_cell(kind, lines))
    cells = [c for c in cells if c["source"]]
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index:03d}"
    return {
        "cells": cells,
        "metadata": {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def to_py(notebook: Path) -> str:
    out = []
    for cell in json.loads(notebook.read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            out.append(
                "# %% [markdown]\n"
                + "\n".join(f"# {line}" if line else "#" for line in text.splitlines())
            )
        else:
            out.append("# %%\n" + text)
    return "\n\n".join(out) + "\n"


def strip(notebook: Path) -> None:
    nb = json.loads(notebook.read_text())
    for index, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{index:03d}"  # stable ids, so a re-strip changes nothing
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell["metadata"] = {}
    nb["metadata"] = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    write(nb, notebook)


def write(nb: dict, path: Path) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "from-py":
        write(from_py(Path(argv[1])), Path(argv[2]))
    elif len(argv) >= 3 and argv[0] == "to-py":
        Path(argv[2]).write_text(to_py(Path(argv[1])))
    elif len(argv) == 2 and argv[0] == "to-py":  # to standard output: git's textconv for notebooks
        sys.stdout.write(to_py(Path(argv[1])))
    elif len(argv) >= 2 and argv[0] == "strip":
        for name in argv[1:]:
            strip(Path(name))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
