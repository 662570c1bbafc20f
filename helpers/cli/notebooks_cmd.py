"""``datamove notebooks``: the installed course's notebooks copied into a folder of yours (never
over your copy unless ``--force``), and with ``--run`` executed there by nbclient, outputs saved.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import time
from pathlib import Path

from .. import config
from .cli_args import UsageError

NAME = re.compile(r"\d\d_[a-z0-9_]+")
RUN_TIMEOUT_S = 1200  # per cell, as `make run`'s nbmake timeout


def _chosen(source: Path, names: list[str]) -> list[Path]:
    """The notebooks of ``source`` named in ``names`` (``00_start_here`` or ``00``; none: all)."""
    every = sorted(source.glob("*.ipynb"))
    if not every:
        raise UsageError(f"no notebooks in {source}: reinstall the course")
    if not names:
        return every
    picked = []
    for name in names:
        if not NAME.fullmatch(name) and not re.fullmatch(r"\d\d", name):
            raise UsageError(f"{name!r} is not a notebook name; pass one like 00_start_here or 00")
        match = [nb for nb in every if nb.stem == name or nb.stem[:2] == name]
        if not match:
            raise UsageError(
                f"no notebook {name!r}; there are {', '.join(nb.stem for nb in every)}"
            )
        picked += match
    return picked


def _copy_out(notebooks: list[Path], folder: Path, force: bool) -> list[Path]:
    """Copy ``notebooks`` into ``folder`` (created), keeping copies there unless ``force``."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file; pass a folder to copy the notebooks into")
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for nb in notebooks:
        target = folder / nb.name
        if target.exists() and not force:
            print(f"{target}: kept (yours; --force replaces it with the course's)")
        else:
            shutil.copyfile(nb, target)
            print(f"{target}: copied")
        copies.append(target)
    return copies


def _execute(notebook: Path, quick: bool) -> float:
    """Run ``notebook`` in its own folder with nbclient and save its outputs in place; seconds."""
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as err:
        raise UsageError(
            "running notebooks needs nbclient: pip install 'moving-data-course[notebooks]'"
        ) from err
    if quick:
        os.environ[config.QUICK_ENV] = "1"  # the kernel inherits it
    nb = nbformat.read(notebook, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=RUN_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
    ).execute()
    nbformat.write(nb, notebook)
    return time.perf_counter() - start


def cmd_notebooks(args: argparse.Namespace) -> int:
    """``datamove notebooks FOLDER [NAME...] [--run] [--quick] [--force]``."""
    copies = _copy_out(_chosen(config.notebooks_dir(), args.names), args.folder, args.force)
    if not args.run:
        print(
            f"open them with Jupyter (e.g. `jupyter lab {args.folder}`), or run them here with "
            f"`datamove notebooks {args.folder} --run`"
        )
        return 0
    for nb in copies:
        seconds = _execute(nb, args.quick)
        print(f"{nb}: ran in {seconds:.0f} s, outputs saved in it")
    return 0
