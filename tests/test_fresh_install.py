"""The course installed as a learner gets it, in a fresh virtual environment outside the clone
(slow: minutes of pip; `make slow-test`, which .ci/run runs, not `make test`).

1. The committed first cell of 00, unmodified, in an environment that already has another
   torch: it fetches the course from a tagless clone of this repository (COURSE_SOURCE, no
   COURSE_REF), leaves
   torch, numpy and matplotlib as they were, and the notebook replays
   (tools/install_cell.py trial, as `make fresh-notebook-test`).
2. The wheel with its notebooks extra: pip chooses no torch and no CUDA package, and
   `datamove notebooks FOLDER 00 --run --quick` copies 00 out and runs it, replaying the
   recordings the wheel ships and writing nothing into site-packages.

"Another torch": this machine holds one CPU torch wheel (constraints.txt's 2.13.0) and one CUDA
build (2.14.1, whose nvidia-* wheels are several GB), so the fresh environment gets the CPU
wheel and its installed metadata is relabelled 2.12.0+cpu, a version that differs from the pin:
an installer that followed constraints.txt would replace it, one that keeps what is there
leaves it (the check compares versions before and after, as importlib.metadata reports them).
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OTHER_TORCH = "2.12.0+cpu"
pytestmark = pytest.mark.slow


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


install_cell = _load("install_cell")
install_course = _load("install_course")


def pip(python, *args, cwd=None):
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        check=True,
        cwd=cwd,
    )


def relabel(site: Path, name: str, new: str) -> None:
    """Make ``name``'s installed distribution report version ``new`` (its dist-info renamed,
    METADATA's Version line rewritten); the code is untouched."""
    (info,) = site.glob(f"{name}-*.dist-info")
    metadata = info / "METADATA"
    metadata.write_text(
        re.sub(r"(?m)^Version: .*$", f"Version: {new}", metadata.read_text(), count=1)
    )
    info.rename(site / f"{name}-{new}.dist-info")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A fresh environment with a Jupyter kernel and its own torch (another version than the
    pin), numpy and matplotlib, and no course. Returns (python, site-packages)."""
    folder = tmp_path_factory.mktemp("fresh")
    venv.EnvBuilder(with_pip=True).create(folder / "venv")
    python = folder / "venv" / "bin" / "python"
    pins = install_course.read_pins((ROOT / "constraints.txt").read_text())
    torch = f"torch=={pins['torch']}"
    local = (
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--no-index",
                "--no-deps",
                torch,
            ],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    # as `make setup`: a wheel on this disk, else PyTorch's CPU build (PyPI's Linux torch bundles CUDA)
    pip(python, *([] if local else ["--index-url", install_course.CPU_INDEX]), torch)
    pip(
        python,
        f"numpy=={pins['numpy']}",
        f"matplotlib=={pins['matplotlib']}",
        "nbclient",
        "ipykernel",
    )
    site = Path(
        subprocess.run(
            [
                str(python),
                "-c",
                "import torch, pathlib; print(pathlib.Path(torch.__file__).parent.parent)",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    relabel(site, "torch", OTHER_TORCH)
    return python, site


def test_the_committed_first_cell_keeps_another_torch_and_the_notebook_replays(
    fresh, tmp_path, capsys
):
    python, _ = fresh
    assert install_cell.trial("00_start_here", python, tmp_path) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"torch {OTHER_TORCH} is installed: kept" in out  # the cell said what it did
    assert f"torch {OTHER_TORCH}" in out.splitlines()[-1]


def test_the_wheel_pulls_no_cuda_and_runs_a_notebook_copied_out_writing_nothing_into_site_packages(
    fresh, tmp_path
):
    """`pip install moving-data-course[notebooks]` on a CPU-only machine: no torch is chosen
    by pip (it is an extra: PyPI's Linux torch bundles CUDA), the CPU torch there is kept, and
    `datamove notebooks FOLDER 00 --run --quick` copies 00 out and runs it, replaying."""
    python, site = fresh
    wheels = tmp_path / "wheels"
    subprocess.run(
        [str(python), "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    (wheel,) = wheels.glob("moving_data_course-*.whl")
    # what pip would install for the course alone where there is no torch at all
    report = tmp_path / "report.json"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            str(wheel),
        ],
        check=True,
    )
    chosen = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert not {n for n in chosen if n == "torch" or n.startswith(("nvidia-", "cuda-"))}, chosen
    # the pins, less torch's: the torch installed here (another version) is the learner's
    pins = tmp_path / "pins.txt"
    pins.write_text(
        "".join(
            line + "\n"
            for line in (ROOT / "constraints.txt").read_text().splitlines()
            if not line.startswith("torch==")
        )
    )
    pip(python, "--constraint", str(pins), f"{wheel}[notebooks]")
    installed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {d["name"].lower(): d["version"] for d in json.loads(installed.stdout)}
    assert not [n for n in names if n.startswith(("nvidia-", "cuda-"))]
    assert names["torch"] == OTHER_TORCH
    before = {p for p in site.rglob("*") if "__pycache__" not in p.parts}
    folder = tmp_path / "elsewhere"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COURSE_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    where = subprocess.run(
        [str(python), "-c", "from helpers import config; print(config.results_dir())"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where) == site / "helpers" / "results" and (Path(where) / "index.jsonl").is_file()
    datamove = python.parent / "datamove"
    run = subprocess.run(
        [str(datamove), "notebooks", str(folder), "00", "--run", "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "00_start_here.ipynb: ran in" in run.stdout
    outputs = json.dumps(
        [
            c.get("outputs", [])
            for c in json.loads((folder / "00_start_here.ipynb").read_text())["cells"]
        ]
    )
    assert install_cell.REPLAY_SENTENCE in outputs
    assert "No CUDA runtime" not in outputs
    added = {p for p in site.rglob("*") if "__pycache__" not in p.parts} - before
    assert not added, f"the course wrote into site-packages: {sorted(map(str, added))[:5]}"
