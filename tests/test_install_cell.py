"""tools/install_cell.py: the first code cell that lets a notebook run alone, put in place and
checked. (`make fresh-notebook-test` runs one notebook alone for real, in a fresh environment.)"""

import importlib.metadata
import importlib.util
import json
import os
import shutil
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
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": kind, "metadata": {}, "source": [text], "id": "x",
                       **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                      for kind, text in cells]}


def write(path, nb):
    path.write_text(json.dumps(nb))
    return path


def test_apply_puts_the_cell_first_among_code_cells_once(tmp_path):
    path = write(tmp_path / "00_a.ipynb", notebook(("markdown", "What you will learn"), ("code", "import torch")))
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
    old = install_cell.MARKER + "\nprint('an older set-up')"
    path = write(tmp_path / "01_b.ipynb", notebook(("markdown", "m"), ("code", old), ("code", "x = 1")))
    assert install_cell.main(["check", "--url", URL, str(path)]) == 1
    assert "01_b.ipynb" in capsys.readouterr().err
    install_cell.main(["apply", "--url", URL, str(path)])
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert sources == ["m", SOURCE, "x = 1"]


def test_bad_inputs_say_what_to_pass(tmp_path):
    for url in ('https://x"; import os; "', "a\nb"):
        with pytest.raises(ValueError, match="without quotes"):
            install_cell.cell_source(url)
    assert "set os.environ['COURSE_SOURCE']" in install_cell.cell_source("")  # no repository known yet
    with pytest.raises(SystemExit, match="not a notebook"):
        install_cell.main(["check", "--url", URL, str(write(tmp_path / "x.ipynb", {"cells": 3}))])
    with pytest.raises(SystemExit):
        install_cell.main(["apply", "--url", URL])  # no notebooks
    with pytest.raises(ValueError, match="00_start_here"):
        install_cell.trial("../etc", Path(sys.executable), tmp_path)


def test_the_torch_range_is_pyprojects():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (low, high) = install_cell.TORCH_RANGE
    assert f"torch>={low[0]}.{low[1]},<{high[0]}.{high[1]}" in deps


def test_in_a_clone_the_cell_does_nothing(monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("the cell ran a command"))
    exec(compile(SOURCE, "install cell", "exec"), {})


@pytest.mark.parametrize("driver, torch_version, torch_from_cpu_index", [
    (None, None, True),              # no driver, no torch: PyTorch's CPU index
    (None, "2.13.0+cpu", False),     # no driver, a torch that fits: kept
    (None, "2.4.1", True),           # no driver, an old torch: the CPU build of a fitting one
    ("/usr/bin/nvidia-smi", None, False),  # a driver: pip's own choice (PyPI's CUDA build)
])
def test_alone_it_clones_and_installs_choosing_the_cpu_index_without_a_driver(
        monkeypatch, tmp_path, driver, torch_version, torch_from_cpu_index):
    commands = []
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **k: commands.append(cmd))
    monkeypatch.setattr(shutil, "which", lambda name: driver)
    monkeypatch.setattr(sys, "platform", "linux")

    def version(name):
        if torch_version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return torch_version
    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("COURSE_HOME", str(tmp_path / "course"))
    monkeypatch.setenv("COURSE_SOURCE", "/some/clone")
    monkeypatch.setenv("COURSE_RESULTS_DIR", "placeholder")
    monkeypatch.delenv("COURSE_RESULTS_DIR")
    exec(compile(SOURCE, "install cell", "exec"), {})
    assert commands[0] == ["git", "clone", "--quiet", "/some/clone", str(tmp_path / "course")]
    cpu = [c for c in commands if install_cell.CPU_INDEX in c]
    assert bool(cpu) == torch_from_cpu_index
    assert commands[-1][-2:] == ["-e", str(tmp_path / "course")]
    assert sys.path[0] == str(tmp_path / "course")
    assert os.environ.get("COURSE_RESULTS_DIR") == str(tmp_path / "course" / "results")


def test_the_cell_passes_the_projects_ruff(tmp_path):
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed beside this python")
    path = write(tmp_path / "00_a.ipynb", notebook(("markdown", "m"), ("code", "x = 1")))
    install_cell.main(["apply", "--url", URL, str(path)])
    out = subprocess.run([str(ruff), "check", "--config", str(ROOT / "pyproject.toml"), str(path)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout
