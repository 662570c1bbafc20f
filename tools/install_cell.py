"""The first code cell of every notebook: it lets a notebook run alone, outside a clone.

Where the course is installed (a clone set up by ``make``: the ``moving-data-course``
distribution at the notebook's version) the cell does nothing. Opened alone (Colab, Kaggle, a
JupyterHub, any Jupyter server) it fetches the notebook's version of the course (the tag
``v<version>``, one commit deep) into ``~/moving-data-course`` and runs its
``tools/install_course.py`` with the kernel's Python, which installs the course around what is
there: a torch, numpy or matplotlib already installed is never replaced (the steps are in that
file). It prints each step, and in one line when the kernel must be restarted.

Settings, for the tests and for people following another version: ``COURSE_SOURCE`` where the
course is fetched from (a URL, a path, or ``file://``), ``COURSE_REF`` which tag, branch or
commit, ``COURSE_HOME`` the folder it goes into.

    python tools/install_cell.py show                        # print the cell
    python tools/install_cell.py apply notebooks/*.ipynb     # insert it, or bring it up to date
    python tools/install_cell.py check notebooks/*.ipynb     # exit 1 naming each notebook whose
                                                             # first code cell is not the cell
    python tools/install_cell.py trial --python VENV/bin/python --folder DIR 00_start_here
                      # run the committed notebook, unmodified, alone there, its course fetched
                      # from this repository (`make fresh-notebook-test`)

The repository URL and the version are pyproject.toml's (``[project.urls] Repository``,
``version``): the cell is written from there, and ``check`` fails when they change until
``apply`` is run (a release does).
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
MARKER = "# Set-up: run alone (Colab, Kaggle, any Jupyter server), this cell installs the course."
OLD_MARKERS = (MARKER, "# Set-up: run alone")  # an older cell is recognised by its first words

TEMPLATE = """\
{marker}
# Where the course is installed at this notebook's version (a clone set up by `make`, a pip
# install), it does nothing; where this cell installed it, it fetches again and compares commits.
import json
import os
import pathlib
import sys
from importlib.metadata import PackageNotFoundError, distribution

COURSE, VERSION, REPOSITORY = "{name}", "{version}", "{url}"
try:
    course = distribution(COURSE)
    installed = course.version
    from_clone = json.loads(course.read_text("direct_url.json") or "{{}}").get("dir_info", {{}}).get("editable", False)
except PackageNotFoundError:
    installed, from_clone = None, False
home = pathlib.Path(os.environ.get("COURSE_HOME", pathlib.Path.home() / COURSE))
stamp = home / ".installed-commit"  # the commit this cell installed, once it has
if from_clone and installed != VERSION:
    print(f"this clone's course is {{installed}}, the notebook {{VERSION}}'s: run `make setup` in the clone")
elif not from_clone and (installed != VERSION or stamp.is_file()):
    import importlib
    import subprocess

    if sys.version_info < (3, 11):  # noqa: UP036 (a hosted kernel may be older than the course)
        raise RuntimeError(f"the course needs Python 3.11 or newer; this kernel runs {{sys.version.split()[0]}}")
    source = os.environ.get("COURSE_SOURCE", REPOSITORY)
    # A release is its tag; a development version (X.Y.devN) follows the main branch.
    refs = [os.environ["COURSE_REF"]] if os.environ.get("COURSE_REF") else (
        ["main"] if ".dev" in VERSION else [f"v{{VERSION}}", "main"])

    def run(*command):  # shows what the command prints: a kernel does not show a child's output
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:
            for line in child.stdout:
                print(line, end="", flush=True)
        if child.returncode:
            raise RuntimeError(f"{{' '.join(command[:4])}} failed (its output is above)")

    home.mkdir(parents=True, exist_ok=True)
    run("git", "-C", str(home), "init", "--quiet")
    for ref in refs:
        fetch = subprocess.run(["git", "-C", str(home), "fetch", "--quiet", "--depth", "1", source, ref],
                               capture_output=True, text=True)
        if fetch.returncode == 0:
            break
        print(f"{{ref}} is not in {{source}}" + (f"; fetching {{refs[-1]}} instead" if ref != refs[-1] else ""))
    else:
        raise RuntimeError(f"git fetch {{source}} {{ref}} failed: {{fetch.stderr.strip()}}")
    commit = subprocess.run(["git", "-C", str(home), "rev-parse", "FETCH_HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    if installed == VERSION and stamp.is_file() and stamp.read_text().strip() == commit:
        print(f"{{COURSE}} {{VERSION}} is installed from {{ref}} at {{commit[:12]}}, this notebook's: nothing to do")
    else:
        print(f"{{COURSE}} {{'is not installed here' if installed is None else installed + ' is installed'}}; "
              f"this notebook is {{VERSION}}'s: installing {{ref}} at {{commit[:12]}} of {{source}} from {{home}}",
              flush=True)
        run("git", "-C", str(home), "checkout", "--quiet", "--force", "FETCH_HEAD")
        loaded = ",".join(sorted({{name.partition(".")[0] for name in sys.modules}}))
        run(sys.executable, str(home / "tools" / "install_course.py"), "--loaded", loaded)
        stamp.write_text(commit + "\\n")
        importlib.invalidate_caches()  # the course is importable in this kernel now
"""


def project(root: Path = ROOT) -> dict:
    """pyproject.toml's ``[project]`` table. Used by ``tools/install_cell.py``."""
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def repository_url(root: Path = ROOT) -> str | None:
    """The course's git repository from pyproject.toml's ``[project.urls] Repository``, or None.

    Used by ``tools/install_cell.py``.
    """
    return project(root).get("urls", {}).get("Repository")


def cell_source(url: str, version: str | None = None, name: str | None = None) -> str:
    """The install cell's source, fetching ``version`` (default: pyproject's) of the course from
    ``url`` unless ``COURSE_SOURCE`` says otherwise.

    Used by ``tools/install_cell.py``.
    """
    if not isinstance(url, str) or not url or any(c in url for c in '"\\\n{}'):
        raise ValueError(
            f"the repository URL {url!r} must be a non-empty URL or path without quotes, "
            f"backslashes, braces or newlines, e.g. https://github.com/OWNER/REPO"
        )
    meta = project()
    version = version or meta["version"]
    if not re.fullmatch(r"\d+(\.\d+)*(([a-z]+|\.dev)\d+)?", version):
        raise ValueError(
            f"version {version!r} is not a version such as 0.3.0 (a release) or 0.3.0.dev0 (main)"
        )
    return TEMPLATE.format(
        marker=MARKER, name=name or meta["name"], version=version, url=url
    ).rstrip("\n")


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
    cells = [c for c in nb["cells"] if not "".join(c["source"]).startswith(OLD_MARKERS)]
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    lines = source.splitlines(keepends=True)
    cells.insert(
        first_code,
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": lines,
        },
    )
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index:03d}"
    return {**nb, "cells": cells}


RUN_NOTEBOOK = (
    "import sys, nbformat; from nbclient import NotebookClient; nb = nbformat.read(sys.argv[1], 4); "
    "NotebookClient(nb, timeout=900, kernel_name='python3', "
    "resources={'metadata': {'path': sys.argv[2]}}).execute(); nbformat.write(nb, sys.argv[1])"
)
REPLAY_SENTENCE = "Replayed from "
KEPT = ("torch", "numpy", "matplotlib")
VERSIONS = (
    "import json, sys; from importlib.metadata import version, PackageNotFoundError\n"
    "def v(n):\n    try: return version(n)\n    except PackageNotFoundError: return None\n"
    "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
)


def versions(
    python: Path, names: list[str], env: dict[str, str], cwd: Path
) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` for ``python`` (None: absent)."""
    out = subprocess.run(
        [str(python), "-c", VERSIONS, *names],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def tagless_source(folder: Path, root: Path = ROOT) -> Path:
    """A bare clone of ``root`` in ``folder`` with no tags, whose ``main`` is HEAD's commit: what
    a learner's cell meets on GitHub between releases (the cell fetches ``main``, or its tag,
    falling back to ``main``). Its path, for ``COURSE_SOURCE``."""
    bare = folder / "course-source.git"

    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, capture_output=True, text=True)

    git("clone", "--quiet", "--bare", "--no-tags", str(root), str(bare))
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    git("-C", str(bare), "update-ref", "refs/heads/main", head)
    tags = subprocess.run(
        ["git", "-C", str(bare), "tag"], check=True, capture_output=True, text=True
    ).stdout.split()
    if tags:
        git("-C", str(bare), "tag", "-d", *tags)
    return bare


def trial(notebook: str, python: Path, folder: Path) -> int:
    """Run ``notebook`` as committed (HEAD), unmodified, alone in ``folder``, executed by
    ``python`` (a fresh environment with a Jupyter kernel and its own torch, numpy and
    matplotlib, no course): its first cell fetches the course from a tagless clone of this
    repository whose ``main`` is HEAD (``COURSE_SOURCE``; no ``COURSE_REF``). Fails unless the course got installed, torch, numpy and matplotlib are
    the versions they were, and the notebook ran and replayed. Returns 0, or 1 with the reason;
    prints the seconds it took.

    Used by ``make fresh-notebook-test``.
    """
    if not re.fullmatch(r"\d\d_[a-z0-9_]+", notebook):
        raise ValueError(f"{notebook!r} is not a notebook name; pass one like 00_start_here")
    committed = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"HEAD:notebooks/{notebook}.ipynb"],
        capture_output=True,
        text=True,
        check=False,
    )
    if committed.returncode != 0:
        print(
            f"trial: notebooks/{notebook}.ipynb is not committed: {committed.stderr.strip()}",
            file=sys.stderr,
        )
        return 1
    path = folder / f"{notebook}.ipynb"
    path.write_text(committed.stdout)  # as committed: its install cell is not touched
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COURSE_", "PYTHON", "VIRTUAL_ENV", "JUPYTER"))
    }
    env.update(COURSE_SOURCE=str(tagless_source(folder)), COURSE_HOME=str(folder / "course"))
    before = versions(python, list(KEPT), env, folder)
    start = time.perf_counter()
    run = subprocess.run(
        [str(python), "-c", RUN_NOTEBOOK, str(path), str(folder)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        print(
            f"trial: {notebook} failed alone after {seconds:.0f} s:\n{(run.stdout + run.stderr)[-3000:]}",
            file=sys.stderr,
        )
        return 1
    after = versions(python, [*KEPT, project()["name"]], env, folder)
    cells = json.loads(path.read_text())["cells"]
    first = cells[[c["cell_type"] for c in cells].index("code")]["outputs"]
    printed = "".join(
        "".join(o.get("text", "")) for o in first
    )  # a stream's text: a string or a list of lines
    print("trial: what the first cell printed:\n  " + "\n  ".join(printed.strip().splitlines()))
    # one that was there must be as it was; one that was not may have been installed
    problems = [
        f"{name} was {before[name]}, is {after[name]}"
        for name in KEPT
        if before[name] is not None and before[name] != after[name]
    ]
    if after[project()["name"]] != project()["version"]:
        problems.append(
            f"the course is {after[project()['name']] or 'not installed'}, not {project()['version']}"
        )
    if REPLAY_SENTENCE not in json.dumps([c.get("outputs", []) for c in cells]):
        problems.append(f"{notebook} ran but printed no {REPLAY_SENTENCE!r}: it did not replay")
    if problems:
        print("trial: " + "; ".join(problems), file=sys.stderr)
        return 1
    kept = ", ".join(f"{n} {before[n]}" for n in KEPT if before[n] is not None)
    print(
        f"trial: {notebook} ran alone in {seconds:.0f} s (installing the course included), replayed, "
        f"and left {kept} untouched"
    )
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
    parser.add_argument(
        "--url", help="the course's git repository (default: pyproject's Repository URL)"
    )
    parser.add_argument("--python", type=Path, help="trial: the fresh environment's python")
    parser.add_argument("--folder", type=Path, help="trial: an empty folder outside the clone")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_intermixed_args(argv)
    if args.command == "trial":
        if not (args.python and args.folder and len(args.notebooks) == 1):
            parser.error("trial needs --python, --folder and one notebook name, e.g. 00_start_here")
        return trial(str(args.notebooks[0]), args.python, args.folder)
    url = args.url or repository_url()
    if not url:
        raise SystemExit(
            "install_cell: pyproject.toml has no [project.urls] Repository; add it or pass --url"
        )
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
            had_one = any("".join(c["source"]).startswith(OLD_MARKERS) for c in nb["cells"])
            path.write_text(json.dumps(applied(nb, source), indent=1, ensure_ascii=False) + "\n")
            print(f"{path}: install cell {'updated' if had_one else 'added'}")
        else:
            stale.append(str(path))
    if stale:
        print(
            "first code cell is not the install cell (run `python tools/install_cell.py apply "
            "notebooks/*.ipynb`):\n  " + "\n  ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
