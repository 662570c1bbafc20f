"""tools/install_course.py: what the notebooks' first cell runs to install the course around a
hosted runtime's torch, numpy and matplotlib (never replacing them); constraints.txt, the one
file of pinned versions. (`make fresh-notebook-test` runs it for real in a fresh environment.)"""

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass needs its module registered
    spec.loader.exec_module(module)
    return module


install_course = _load("install_course")
constraints = _load("constraints")
PINS = install_course.read_pins((ROOT / "constraints.txt").read_text())
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
HOSTED = {
    "torch": "2.10.0+cu126",
    "numpy": "1.26.4",
    "matplotlib": "3.8.0",
    "ipykernel": "6.17.1",
    "cloudpickle": "3.1.1",
    "nbclient": "0.10.2",
    "nbformat": "5.10.4",
}


def pip_args(steps):
    return [s.pip for s in steps if s.pip is not None]


def test_a_hosted_torch_numpy_and_matplotlib_are_kept_and_only_what_is_missing_is_installed():
    steps = install_course.plan(ROOT, HOSTED, linux_without_driver=True)
    assert steps[0].pip is None and steps[0].says.startswith(
        "torch 2.10.0+cu126 is installed: kept"
    )
    assert (
        "tested with torch>=" in steps[0].says
    )  # 2.10 is outside the course's range: said, not acted on
    (course, missing) = pip_args(steps)
    assert course == ["--no-deps", "--force-reinstall", str(ROOT)]
    assert [install_course.requirement_name(r) for r in missing] == ["tensordict"]
    assert "keeping torch 2.10.0+cu126, numpy 1.26.4, matplotlib 3.8.0" in steps[-1].says
    # every installed distribution is pinned at its own version: pip may add, never replace
    text = install_course.keeping(PINS, HOSTED)
    assert "numpy==1.26.4\n" in text and f"numpy=={PINS['numpy']}\n" not in text
    assert f"tensordict=={PINS['tensordict']}\n" in text
    assert "tensordict" not in install_course.keeping(PINS, HOSTED, course_pins=False)


def test_a_torch_in_range_is_kept_without_a_note_and_no_torch_gets_the_pinned_build():
    steps = install_course.plan(ROOT, {"torch": "2.13.0+cpu"}, linux_without_driver=True)
    assert steps[0].says == "torch 2.13.0+cpu is installed: kept" and steps[0].pip is None
    cpu = install_course.plan(ROOT, {}, linux_without_driver=True)[0]
    assert cpu.pip == ["--index-url", install_course.CPU_INDEX, f"torch=={PINS['torch']}"]
    assert cpu.fallback == [f"torch=={PINS['torch']}"]
    gpu = install_course.plan(ROOT, {}, linux_without_driver=False)[0]
    assert gpu.pip == [f"torch=={PINS['torch']}"] and gpu.fallback is None
    everything = install_course.plan(ROOT, {}, linux_without_driver=False)[-1].pip
    assert sorted(map(install_course.requirement_name, everything)) == sorted(
        install_course.requirement_name(r)
        for r in [*PROJECT["dependencies"], *PROJECT["optional-dependencies"]["notebooks"]]
    )


def test_restart_is_asked_only_for_modules_the_kernel_had_imported(monkeypatch):
    monkeypatch.setattr(
        install_course.metadata,
        "packages_distributions",
        lambda: {"helpers": ["moving-data-course"], "numpy": ["numpy"], "yaml": ["PyYAML"]},
    )
    assert install_course.needs_restart(["moving_data_course", "pyyaml"], {"helpers", "numpy"}) == [
        "helpers"
    ]
    assert install_course.needs_restart(["tensordict"], {"helpers", "numpy"}) == []


def test_bad_lines_say_what_to_write():
    with pytest.raises(ValueError, match="name==version"):
        install_course.read_pins("torch>=2.11\n")
    with pytest.raises(ValueError, match="torch>=2.11"):
        install_course.requirement_name(">=2")
    assert install_course.read_pins("# a comment\nTorch_Vision==0.1  # why\n") == {
        "torch-vision": "0.1"
    }


def test_a_dry_run_prints_the_steps_and_installs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(install_course.subprocess, "run", lambda *a, **k: pytest.fail("it ran pip"))
    assert install_course.main(["--dry-run", "--loaded", "sys,os"]) == 0
    out = capsys.readouterr().out
    assert "is installed: kept" in out and "installing the course from" in out


def test_constraints_pin_one_version_in_every_range_of_pyproject():
    """The one pinned file: every requirement of the runtime and of the dev, lab and cli extras
    is pinned, inside its range (so make, the first cell and environment.yml agree)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement
    extras = PROJECT["optional-dependencies"]
    for line in PROJECT["dependencies"] + extras["dev"] + extras["lab"] + extras["cli"]:
        req = Requirement(line)
        name = install_course.canonical(req.name)
        assert name in PINS, f"constraints.txt lacks {name}: run `make constraints`"
        assert req.specifier.contains(PINS[name], prereleases=True), (
            f"{name}=={PINS[name]} is outside {line}"
        )
    assert "ruff" in PINS
    report = {
        "install": [
            {"metadata": {"name": "torch", "version": "2.13.0+cpu"}},
            {"metadata": {"name": "moving-data-course", "version": "0.2.0"}},
            {"metadata": {"name": "Jinja2", "version": "3.1.6"}},
        ]
    }
    assert constraints.pins(report) == ["Jinja2==3.1.6", "torch==2.13.0"]
