"""The learner's workspace: copies of the notebooks to work in, so notebooks/ stays as committed.

    python tools/workspace.py prepare          # make workspace/ on first use; add new notebooks
    python tools/workspace.py reset NOTEBOOK   # put one notebook back as the course has it,
                                               # the learner's copy kept as NAME.backup-TIME.ipynb

``make lab`` runs ``prepare`` and opens JupyterLab in ``workspace/``; ``make reset-workspace
NOTEBOOK=03_streams_and_overlap`` runs ``reset``. A notebook is copied from its executed copy in
``build/notebooks/`` (made by ``make run``, with outputs) when that is newer than the committed
one in ``notebooks/``, else from ``notebooks/``. ``prepare`` never overwrites a notebook that is
already in the workspace, and ``make run`` never touches the workspace.

Every copy is read and checked (a notebook in JSON, format 4) before anything is written; it
is written to a hidden temporary file inside ``workspace/`` and renamed into place with
``os.replace``, so a notebook is either the old one or the new one, never half written.
Links are never followed: a linked ``workspace/`` or source notebook is refused. On any problem
the command exits non-zero with one sentence saying why, and the workspace is as it was.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Refused(Exception):
    """Why the workspace cannot be changed; ``main`` prints it and exits 1."""


def notebook_names(root: Path = ROOT) -> list[str]:
    """The course's notebooks, by name without ``.ipynb``, in teaching order.

    Used by ``make lab`` and ``make reset-workspace``.
    """
    return sorted(p.stem for p in (root / "notebooks").glob("*.ipynb") if not p.is_symlink())


def source_of(name: str, root: Path = ROOT) -> Path:
    """The file a workspace copy of ``name`` comes from: the executed copy in build/notebooks/
    when it exists and is newer than the committed notebook, else the committed one.

    Used by ``make lab`` and ``make reset-workspace``.
    """
    committed = root / "notebooks" / f"{name}.ipynb"
    executed = root / "build" / "notebooks" / f"{name}.ipynb"
    if (
        executed.is_file()
        and not executed.is_symlink()
        and executed.stat().st_mtime > committed.stat().st_mtime
    ):
        return executed
    return committed


def read_checked(path: Path) -> bytes:
    """The bytes of notebook ``path``, refused if it is a link or not a format-4 notebook.

    Used by ``make lab`` and ``make reset-workspace``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise Refused(f"cannot read {path}: {e.strerror} (a link is never followed)") from e
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    try:
        notebook = json.loads(data)
    except ValueError as e:
        raise Refused(f"{path} is not a notebook: not JSON ({e})") from e
    if not (
        isinstance(notebook, dict)
        and notebook.get("nbformat") == 4
        and isinstance(notebook.get("cells"), list)
    ):
        raise Refused(f"{path} is not a notebook of format 4 with a list of cells")
    return data


def workspace_folder(root: Path = ROOT, create: bool = False) -> Path:
    """``root/workspace``, refused when it is a link or not a folder; made when ``create``.

    Used by ``make lab`` and ``make reset-workspace``.
    """
    folder = root / "workspace"
    if folder.is_symlink():
        raise Refused(f"{folder} is a link; the workspace must be a plain folder (remove the link)")
    if folder.exists() and not folder.is_dir():
        raise Refused(f"{folder} exists and is not a folder; move it away")
    if create:
        folder.mkdir(exist_ok=True)
    return folder


def write_all(folder: Path, copies: dict[str, bytes]) -> None:
    """Write each ``name.ipynb`` of ``copies`` into ``folder``: all to temporary files first,
    then each renamed into place; if a write fails, the temporary files are removed.

    Used by ``make lab`` and ``make reset-workspace``.
    """
    temporary: dict[Path, Path] = {}
    try:
        for name, data in copies.items():
            tmp = folder / f".{name}.ipynb.incoming-{secrets.token_hex(4)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            temporary[tmp] = folder / f"{name}.ipynb"
            with os.fdopen(os.open(tmp, flags, 0o644), "wb") as f:
                f.write(data)
    except OSError as e:
        for tmp in temporary:
            tmp.unlink(missing_ok=True)
        raise Refused(f"cannot write into {folder}: {e}") from e
    for tmp, target in temporary.items():
        os.replace(tmp, target)


def prepare(root: Path = ROOT) -> list[str]:
    """Make ``workspace/`` if missing and copy in every notebook it lacks; return those copied.

    Used by ``make lab``.
    """
    folder = workspace_folder(root)
    missing = [
        n
        for n in notebook_names(root)
        if not (folder / f"{n}.ipynb").exists() and not (folder / f"{n}.ipynb").is_symlink()
    ]
    copies = {name: read_checked(source_of(name, root)) for name in missing}
    if copies:
        existed = folder.exists()
        workspace_folder(root, create=True)
        try:
            write_all(folder, copies)
        except Refused:
            if not existed:
                folder.rmdir()
            raise
    return missing


def backup(folder: Path, name: str, now: float | None = None) -> Path | None:
    """Copy ``folder/<name>.ipynb`` (the learner's edits) to ``folder/<name>.backup-<time>.ipynb``
    before it is replaced; return the copy, or None when there is no notebook to keep. Never
    overwrites an earlier backup.

    Used by ``make reset-workspace``.
    """
    current = folder / f"{name}.ipynb"
    if not current.exists() or current.is_symlink():
        return None
    with open(current, "rb") as f:
        data = f.read()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    for attempt in range(100):
        copy = folder / f"{name}.backup-{stamp}{f'-{attempt}' if attempt else ''}.ipynb"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            with os.fdopen(os.open(copy, flags, 0o644), "wb") as f:
                f.write(data)
            return copy
        except FileExistsError:
            continue
        except OSError as e:
            copy.unlink(missing_ok=True)
            raise Refused(
                f"cannot back up {current} before restoring it: {e}; nothing was changed"
            ) from e
    raise Refused(f"cannot back up {current}: 100 backups of {stamp} exist; nothing was changed")


def reset(notebook: str, root: Path = ROOT) -> Path:
    """Put ``workspace/<notebook>.ipynb`` back as the course has it (executed copy or committed),
    after copying the learner's version aside (``backup``); return the file it came from.

    Used by ``make reset-workspace``.
    """
    names = notebook_names(root)
    name = notebook.removesuffix(".ipynb")
    if name not in names:
        raise Refused(
            f"no notebook called {notebook!r}; pass one of: {', '.join(names)} "
            f"(e.g. make reset-workspace NOTEBOOK={names[0] if names else '00_start_here'})"
        )
    source = source_of(name, root)
    data = read_checked(source)
    folder = workspace_folder(root, create=True)
    if (kept := backup(folder, name)) is not None:
        print(f"your version is kept as workspace/{kept.name}")
    write_all(folder, {name: data})
    return source


def main(argv: list[str] | None = None) -> int:
    """The command line: ``prepare`` or ``reset NOTEBOOK``; 1 with a sentence when refused."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["prepare"]:
            copied = prepare()
            print(
                f"workspace/: {len(copied)} notebook(s) copied in"
                if copied
                else "workspace/: every notebook is there (make reset-workspace NOTEBOOK=... restores one)"
            )
        elif len(args) == 2 and args[0] == "reset" and args[1]:
            source = reset(args[1])
            print(
                f"workspace/{args[1].removesuffix('.ipynb')}.ipynb restored from {source.relative_to(ROOT)}"
            )
        elif args[:1] == ["reset"]:
            raise Refused(
                f"say which notebook to restore, e.g. make reset-workspace "
                f"NOTEBOOK=03_streams_and_overlap; one of: {', '.join(notebook_names())}"
            )
        else:
            raise Refused("usage: tools/workspace.py prepare | tools/workspace.py reset NOTEBOOK")
    except Refused as e:
        print(f"workspace: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
