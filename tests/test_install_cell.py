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
    with pytest.raises(ValueError, match="release version"):
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
    """In a clone set up by `make`, the distribution is installed at the notebook's version."""
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("the cell ran a command"))
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert importlib.metadata.version("moving-data-course") == version, "run `make setup` again"
    exec(compile(install_cell.cell_source(URL), "install cell", "exec"), {})


def run_alone(monkeypatch, tmp_path, source=SOURCE):
    """Execute the cell where the course is not installed; returns the commands it ran."""
    commands = []

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)

    class Child:  # a command that prints one line and succeeds
        def __init__(self, command, **kwargs):
            commands.append(list(command))
            self.stdout, self.returncode = iter([f"ran {command[0]}\n"]), 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(subprocess, "Popen", Child)
    monkeypatch.setenv("COURSE_HOME", str(tmp_path / "course"))
    exec(compile(source, "install cell", "exec"), {})
    return commands


def test_alone_it_fetches_the_notebooks_version_shallow_and_runs_the_installer(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.delenv("COURSE_SOURCE", raising=False)
    monkeypatch.delenv("COURSE_REF", raising=False)
    source = install_cell.cell_source(URL, version="9.8.7")
    (tmp_path / "helpers.py").write_text(
        ""
    )  # a learner's own helpers module does not count as the course
    monkeypatch.syspath_prepend(str(tmp_path))
    commands = run_alone(monkeypatch, tmp_path, source)
    home = str(tmp_path / "course")
    assert commands[:3] == [
        ["git", "-C", home, "init", "--quiet"],
        ["git", "-C", home, "fetch", "--quiet", "--depth", "1", URL, "v9.8.7"],
        ["git", "-C", home, "checkout", "--quiet", "FETCH_HEAD"],
    ]
    (python, script, flag, loaded) = commands[3]
    assert (python, script, flag) == (
        sys.executable,
        str(tmp_path / "course" / "tools" / "install_course.py"),
        "--loaded",
    )
    assert {"sys", "pytest"} <= set(loaded.split(","))
    out = capsys.readouterr().out
    assert "fetching v9.8.7 of " + URL in out
    assert f"ran {sys.executable}" in out  # what the installer prints is shown in the notebook
    monkeypatch.setenv("COURSE_SOURCE", "/some/clone")
    monkeypatch.setenv("COURSE_REF", "0123abc")
    assert run_alone(monkeypatch, tmp_path)[1][-2:] == ["/some/clone", "0123abc"]


def test_alone_on_python_3_10_it_stops_first_with_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "version_info", (3, 10, 14))
    with pytest.raises(RuntimeError, match="Python 3.11 or newer"):
        run_alone(monkeypatch, tmp_path)


def test_the_trial_fetches_the_tag_only_where_it_is_head():
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert install_cell.reference() in (None, head)


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
