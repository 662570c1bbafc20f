"""The first code cell of every notebook: it lets a notebook run alone, outside a clone.

In a clone set up by ``make``, ``import helpers`` works and the cell does nothing. Opened alone
in Colab or any Jupyter server, it clones the course (the helpers and the recordings under
``results/``, which replays read) into ``~/moving-data-course`` and installs it with pip; on
Linux without an NVIDIA driver it first takes torch from PyTorch's CPU index, since PyPI's Linux
torch bundles CUDA (several GB). ``COURSE_SOURCE`` overrides where the course is cloned from
(a URL, a path, or ``file://``; the tests point it at a local clone), ``COURSE_HOME`` where it
goes.

    python tools/install_cell.py show  [--url URL]                  # print the cell
    python tools/install_cell.py apply [--url URL] notebooks/*.ipynb   # insert it, or bring it up to date
    python tools/install_cell.py check [--url URL] notebooks/*.ipynb   # exit 1 naming each notebook whose
                                                                       # first code cell is not the cell
    python tools/install_cell.py trial --python VENV/bin/python --folder DIR 00_start_here
                                       # run it alone there, cloning the course from this repository
                                       # (`make fresh-notebook-test`)

The repository URL is ``--url`` or, without it, ``[project.urls] Repository`` of pyproject.toml.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = "# Set-up: run alone (Colab, any Jupyter server), this cell installs the course."
# The torch range of pyproject.toml's dependencies (tests/test_install_cell.py keeps them equal).
TORCH_RANGE = ((2, 11), (2, 15))
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

TEMPLATE = '''\
{marker}
# In a clone set up by `make` it does nothing.
import importlib.util

if importlib.util.find_spec("helpers") is None:
    import os
    import pathlib
    import shutil
    import subprocess
    import sys
    from importlib.metadata import PackageNotFoundError, version

    home = pathlib.Path(os.environ.get("COURSE_HOME", pathlib.Path.home() / "moving-data-course"))
    if not (home / "helpers").is_dir():
        source = os.environ.get("COURSE_SOURCE", "{url}")
        if not source:
            raise RuntimeError("the course is not installed here: set os.environ['COURSE_SOURCE'] to its git "
                               "repository (the one this notebook came from) and run this cell again")
        subprocess.run(["git", "clone", "--quiet", source, str(home)], check=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    try:
        torch_ok = {low} <= tuple(int(n) for n in version("torch").split(".")[:2]) < {high}
    except (PackageNotFoundError, ValueError):
        torch_ok = False
    if not torch_ok and sys.platform == "linux" and shutil.which("nvidia-smi") is None:
        # No NVIDIA driver: PyTorch's CPU build, not PyPI's (which bundles CUDA, several GB).
        subprocess.run(pip + ["--index-url", "{cpu_index}", "torch>={low_v},<{high_v}"], check=True)
    subprocess.run(pip + ["-e", str(home)], check=True)
    sys.path.insert(0, str(home))  # for this kernel; a restarted one finds the installed course
    os.environ.setdefault("COURSE_RESULTS_DIR", str(home / "results"))  # the recordings to replay
'''


def repository_url(root: Path = ROOT) -> str | None:
    """The course's git repository from pyproject.toml's ``[project.urls] Repository``, or None.

    Used by ``tools/install_cell.py``.
    """
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return project.get("urls", {}).get("Repository")


def cell_source(url: str) -> str:
    """The install cell's source, cloning from ``url`` unless ``COURSE_SOURCE`` says otherwise;
    with ``url`` empty (no repository known yet) the cell asks for ``COURSE_SOURCE``.

    Used by ``tools/install_cell.py``.
    """
    if not isinstance(url, str) or '"' in url or "\\" in url or "\n" in url:
        raise ValueError(f"the repository URL {url!r} must be a non-empty URL or path without quotes, "
                         f"backslashes or newlines, e.g. https://github.com/OWNER/REPO.git")
    (low, high) = TORCH_RANGE
    return TEMPLATE.format(marker=MARKER, url=url, cpu_index=CPU_INDEX, low=low, high=high,
                           low_v=".".join(map(str, low)), high_v=".".join(map(str, high))).rstrip("\n")


def _first_code_cell(nb: dict) -> dict | None:
    return next((c for c in nb["cells"] if c["cell_type"] == "code"), None)


def is_current(nb: dict, source: str) -> bool:
    """Whether notebook ``nb``'s first code cell is exactly the install cell ``source``.

    Used by ``tools/install_cell.py``.
    """
    cell = _first_code_cell(nb)
    return cell is not None and "".join(cell["source"]) == source


def applied(nb: dict, source: str) -> dict:
    """``nb`` with the install cell first among its code cells (an older one replaced), its
    cells numbered ``cell-NNN`` as ``tools/nbtool.py`` numbers them.

    Used by ``tools/install_cell.py``.
    """
    cells = [c for c in nb["cells"] if not "".join(c["source"]).startswith(MARKER)]
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    lines = source.splitlines(keepends=True)
    cells.insert(first_code, {"cell_type": "code", "execution_count": None, "metadata": {},
                              "outputs": [], "source": lines})
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index:03d}"
    return {**nb, "cells": cells}


RUN_NOTEBOOK = ("import sys, nbformat; from nbclient import NotebookClient; nb = nbformat.read(sys.argv[1], 4); "
                "NotebookClient(nb, timeout=600, kernel_name='python3', "
                "resources={'metadata': {'path': sys.argv[2]}}).execute(); nbformat.write(nb, sys.argv[1])")
REPLAY_SENTENCE = "Replayed from "


def trial(notebook: str, python: Path, folder: Path) -> int:
    """Run ``notebook`` as committed (HEAD), with the install cell, alone in ``folder``: executed by
    ``python`` (a fresh environment with a Jupyter kernel and torch, not the course), cloning the
    course from this repository. Fails unless the course got installed there and the notebook ran
    and replayed. Returns 0, or 1 with the reason; prints the seconds it took.

    Used by ``make fresh-notebook-test``.
    """
    if not re.fullmatch(r"\d\d_[a-z0-9_]+", notebook):
        raise ValueError(f"{notebook!r} is not a notebook name; pass one like 00_start_here")
    committed = subprocess.run(["git", "-C", str(ROOT), "show", f"HEAD:notebooks/{notebook}.ipynb"],
                               capture_output=True, text=True, check=False)
    if committed.returncode != 0:
        print(f"trial: notebooks/{notebook}.ipynb is not committed: {committed.stderr.strip()}", file=sys.stderr)
        return 1
    path = folder / f"{notebook}.ipynb"
    path.write_text(json.dumps(applied(json.loads(committed.stdout), cell_source(str(ROOT))), indent=1))
    home = folder / "course"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COURSE_", "PYTHON", "VIRTUAL_ENV", "JUPYTER"))}
    env.update(COURSE_SOURCE=str(ROOT), COURSE_HOME=str(home))
    start = time.perf_counter()
    run = subprocess.run([str(python), "-c", RUN_NOTEBOOK, str(path), str(folder)], cwd=folder, env=env,
                         capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        print(f"trial: {notebook} failed alone after {seconds:.0f} s:\n{(run.stdout + run.stderr)[-3000:]}",
              file=sys.stderr)
        return 1
    where = subprocess.run([str(python), "-c", "import helpers; print(helpers.__file__)"], cwd=folder,
                           env=env, capture_output=True, text=True, check=False).stdout.strip()
    outputs = json.dumps([c.get("outputs", []) for c in json.loads(path.read_text())["cells"]])
    if not where.startswith(str(home)):
        print(f"trial: the course was not installed from its clone in {home} (helpers: {where or 'missing'})",
              file=sys.stderr)
        return 1
    if REPLAY_SENTENCE not in outputs:
        print(f"trial: {notebook} ran but printed no {REPLAY_SENTENCE!r}: it did not replay", file=sys.stderr)
        return 1
    print(f"trial: {notebook} ran alone in {seconds:.0f} s (installing the course included) and replayed")
    return 0


def _read(path: Path) -> dict:
    try:
        nb = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"install_cell: cannot read {path} as a notebook: {e}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise SystemExit(f"install_cell: {path} is not a notebook (no list of cells)")
    return nb


def main(argv: list[str] | None = None) -> int:
    """``show``, ``apply`` or ``check`` (see the module's docstring); 1 when ``check`` fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["show", "apply", "check", "trial"])
    parser.add_argument("--url", help="the course's git repository (default: pyproject's Repository URL)")
    parser.add_argument("--python", type=Path, help="trial: the fresh environment's python")
    parser.add_argument("--folder", type=Path, help="trial: an empty folder outside the clone")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_intermixed_args(argv)
    if args.command == "trial":
        if not (args.python and args.folder and len(args.notebooks) == 1):
            parser.error("trial needs --python, --folder and one notebook name, e.g. 00_start_here")
        return trial(str(args.notebooks[0]), args.python, args.folder)
    url = args.url or repository_url() or ""  # without one, the cell asks for COURSE_SOURCE
    source = cell_source(url)
    if args.command == "show":
        print(source)
        return 0
    if not args.notebooks:
        parser.error(f"give the notebooks to {args.command}, e.g. notebooks/*.ipynb")
    stale = []
    for path in args.notebooks:
        nb = _read(path)
        if is_current(nb, source):
            continue
        if args.command == "apply":
            had_one = any("".join(c["source"]).startswith(MARKER) for c in nb["cells"])
            path.write_text(json.dumps(applied(nb, source), indent=1, ensure_ascii=False) + "\n")
            print(f"{path}: install cell {'updated' if had_one else 'added'}")
        else:
            stale.append(str(path))
    if stale:
        print("first code cell is not the install cell (run `python tools/install_cell.py apply "
              "notebooks/*.ipynb`):\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
