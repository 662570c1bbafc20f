"""tools/install_cell.py: the first code cell that lets a notebook run alone, put in place and
checked. (`make fresh-notebook-test` runs one notebook alone for real, in a fresh environment.)"""

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("install_cell", ROOT / "tools" / "install_cell.py")
install_cell = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install_cell)
URL = "https://example.org/course.git"
SOURCE = install_cell.cell_source(URL)


def notebook(*cells):
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {
                "cell_type": kind,
                "metadata": {},
                "source": [text],
                "id": "x",
                **({"outputs": [], "execution_count": None} if kind == "code" else {}),
            }
            for kind, text in cells
        ],
    }


def write(path, nb):
    path.write_text(json.dumps(nb))
    return path


def test_apply_puts_the_cell_first_among_code_cells_once(tmp_path):
    path = write(
        tmp_path / "00_a.ipynb",
        notebook(("markdown", "What you will learn"), ("code", "import torch")),
    )
    assert install_cell.main(["check", "--url", URL, str(path)]) == 1
    assert install_cell.main(["apply", "--url", URL, str(path)]) == 0
    once = path.read_text()
    assert install_cell.main(["apply", "--url", URL, str(path)]) == 0
    assert path.read_text() == once  # idempotent
    cells = json.loads(once)["cells"]
    assert [c["cell_type"] for c in cells] == ["markdown", "code", "code"]
    assert "".join(cells[1]["source"]) == SOURCE and "".join(cells[2]["source"]) == "import torch"
    assert [c["id"] for c in cells] == ["cell-000", "cell-001", "cell-002"]
    assert install_cell.main(["check", "--url", URL, str(path)]) == 0


def test_an_older_cell_is_replaced_and_check_names_the_stale_notebook(tmp_path, capsys):
    old = "# Set-up: run alone (Colab, any Jupyter server), this cell installs the course.\nprint('an older set-up')"
    path = write(
        tmp_path / "01_b.ipynb", notebook(("markdown", "m"), ("code", old), ("code", "x = 1"))
    )
    assert install_cell.main(["check", "--url", URL, str(path)]) == 1
    assert "01_b.ipynb" in capsys.readouterr().err
    install_cell.main(["apply", "--url", URL, str(path)])
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert sources == ["m", SOURCE, "x = 1"]


def test_bad_inputs_say_what_to_pass(tmp_path):
    for url in ('https://x"; import os; "', "a\nb", "", "https://{x}"):
        with pytest.raises(ValueError, match="without quotes"):
            install_cell.cell_source(url)
    with pytest.raises(ValueError, match="is not a version such as 0.3.0"):
        install_cell.cell_source(URL, version="1.0; import os")
    with pytest.raises(SystemExit, match="not a notebook"):
        install_cell.main(["check", "--url", URL, str(write(tmp_path / "x.ipynb", {"cells": 3}))])
    with pytest.raises(SystemExit):
        install_cell.main(["apply", "--url", URL])  # no notebooks
    with pytest.raises(ValueError, match="00_start_here"):
        install_cell.trial("../etc", Path(sys.executable), tmp_path)


def test_the_committed_cell_names_pyprojects_repository_and_version(capsys):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert install_cell.main(["show"]) == 0
    shown = capsys.readouterr().out
    assert (
        f'"{project["name"]}", "{project["version"]}", "{project["urls"]["Repository"]}"' in shown
    )
    assert "torch" not in shown.split("\n", 2)[2]  # ranges live in pyproject.toml, not in the cell
    assert (
        install_cell.main(["check", *map(str, sorted((ROOT / "notebooks").glob("*.ipynb")))]) == 0
    )


def test_where_the_course_is_installed_the_cell_does_nothing(monkeypatch):
    """In a clone set up by `make`, the distribution is installed (editable) at the notebook's version."""
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("the cell ran a command"))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("the cell ran a command"))
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert importlib.metadata.version("moving-data-course") == version, "run `make setup` again"
    exec(compile(install_cell.cell_source(URL), "install cell", "exec"), {})


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def source(tmp_path):
    """A git repository standing in for the course on GitHub: branch main, whose installer
    prints the commit it installs; returns (path, commit of main)."""
    repo = tmp_path / "source"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "install_course.py").write_text(
        "import pathlib, subprocess\nprint('installer ran at', subprocess.run(['git', 'rev-parse', "
        "'HEAD'], cwd=pathlib.Path(__file__).parent, capture_output=True, text=True).stdout[:12])\n"
    )
    git("init", "--quiet", "--initial-branch", "main", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "one", cwd=repo)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    return repo, head.stdout.strip()


def run_alone(monkeypatch, tmp_path, version, installed=None, editable=False):
    """Execute the cell of ``version`` where ``installed`` (a version, or None) is installed, and
    return what it printed."""

    class Course:
        def __init__(self, name):
            if installed is None:
                raise importlib.metadata.PackageNotFoundError(name)
            self.version = installed

        def read_text(self, name):
            return json.dumps({"url": "file:///x", "dir_info": {"editable": editable}})

    monkeypatch.setattr(importlib.metadata, "distribution", Course)
    monkeypatch.setenv("COURSE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COURSE_REF", raising=False)
    printed = []
    exec(
        compile(install_cell.cell_source(URL, version=version), "install cell", "exec"),
        {"print": lambda *a, **k: printed.append(" ".join(map(str, a)))},
    )
    return "\n".join(printed)


def test_a_development_version_fetches_main_and_installs_once_per_commit(
    monkeypatch, tmp_path, source
):
    repo, head = source
    monkeypatch.setenv("COURSE_SOURCE", str(repo))
    out = run_alone(monkeypatch, tmp_path, "9.8.0.dev0")
    assert f"installing main at {head[:12]}" in out and f"installer ran at {head[:12]}" in out
    assert (tmp_path / "home" / ".installed-commit").read_text().strip() == head
    again = run_alone(monkeypatch, tmp_path, "9.8.0.dev0", installed="9.8.0.dev0")
    assert f"installed from main at {head[:12]}, this notebook's: nothing to do" in again
    assert "installer ran" not in again
    # main moved on: the same version at another commit is recognised as different
    (repo / "new.txt").write_text("x")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "two", cwd=repo)
    moved = run_alone(monkeypatch, tmp_path, "9.8.0.dev0", installed="9.8.0.dev0")
    assert "installer ran at" in moved and head[:12] not in moved.split("installer ran at")[1]


def test_a_release_fetches_its_tag_and_falls_back_to_main_with_one_line(
    monkeypatch, tmp_path, source
):
    repo, head = source
    monkeypatch.setenv("COURSE_SOURCE", str(repo))
    out = run_alone(monkeypatch, tmp_path, "9.8.7")
    assert out.splitlines()[0] == f"v9.8.7 is not in {repo}; fetching main instead"
    assert f"installing main at {head[:12]}" in out
    git("tag", "v9.9.0", cwd=repo)
    tagged = run_alone(monkeypatch, tmp_path / "other", "9.9.0")
    assert f"installing v9.9.0 at {head[:12]}" in tagged and "instead" not in tagged


def test_a_missing_ref_says_so(monkeypatch, tmp_path, source):
    repo, _ = source
    monkeypatch.setenv("COURSE_SOURCE", str(repo))
    monkeypatch.setenv("COURSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COURSE_REF", "no-such-branch")
    monkeypatch.setattr(
        importlib.metadata,
        "distribution",
        lambda name: (_ for _ in ()).throw(importlib.metadata.PackageNotFoundError(name)),
    )
    with pytest.raises(RuntimeError, match="git fetch .* no-such-branch failed"):
        exec(compile(install_cell.cell_source(URL, "9.8.0.dev0"), "install cell", "exec"), {})


def test_a_clone_at_another_version_is_told_to_set_up_again(monkeypatch, tmp_path):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("the cell ran a command"))
    out = run_alone(monkeypatch, tmp_path, "9.8.0.dev0", installed="9.7.0", editable=True)
    assert (
        out
        == "this clone's course is 9.7.0, the notebook 9.8.0.dev0's: run `make setup` in the clone"
    )


def test_alone_on_python_3_10_it_stops_first_with_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "version_info", (3, 10, 14))
    with pytest.raises(RuntimeError, match="Python 3.11 or newer"):
        run_alone(monkeypatch, tmp_path, "9.8.0.dev0")


def test_the_trials_source_has_no_tags_and_its_main_is_head(tmp_path):
    bare = install_cell.tagless_source(tmp_path)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    main = subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "main"], capture_output=True, text=True, check=True
    ).stdout.strip()
    tags = subprocess.run(["git", "-C", str(bare), "tag"], capture_output=True, text=True)
    assert main == head and tags.stdout == ""


def test_the_cell_passes_the_projects_ruff(tmp_path):
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed beside this python")
    path = write(tmp_path / "00_a.ipynb", notebook(("markdown", "m"), ("code", "x = 1")))
    install_cell.main(["apply", "--url", URL, str(path)])
    out = subprocess.run(
        [str(ruff), "check", "--config", str(ROOT / "pyproject.toml"), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout
