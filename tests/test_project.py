"""Project-level checks: notebooks committed clean, recordings present and current, set-up files agree."""

import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers import records

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_in_teaching_order():
    names = [nb.name for nb in NOTEBOOKS]
    assert names and names[0].startswith("00_")
    assert all(re.match(r"\d\d_[a-z0-9_]+\.ipynb$", n) for n in names)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs_with_kernel_python3(notebook):
    nb = json.loads(notebook.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, (
                "strip with tools/nbtool.py strip"
            )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_with_what_you_will_learn_and_ends_with_claims_and_exercises(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    assert cells[0]["cell_type"] == "markdown" and "What you will learn" in "".join(
        cells[0]["source"]
    )
    text = "".join("".join(c["source"]) for c in cells)
    assert "claims_table(" in text, "the claims table: one call into the lesson's module"
    assert "exercises.check_" in text


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_what_we_see_is_printed_from_the_data_never_typed_in_markdown(notebook):
    """Words follow numbers: "What we see" is said by claims.WhatWeSee, built in the lesson's
    module (helpers/lessons/) from the run, so it is computed on every machine the notebook runs
    or replays on (the truth check reads them, tests/test_lesson_NN.py tests them)."""
    cells = json.loads(notebook.read_text())["cells"]
    typed = [
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown" and "what we see" in "".join(c["source"]).lower()
    ]
    assert not typed, (
        f"markdown cells {typed} say 'What we see': print it with claims.WhatWeSee(NOTEBOOK, run)"
    )
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "from helpers.lessons" in code or not any(  # a module, or a package's modules
        "run_or_replay(" in "".join(c["source"]) for c in cells
    )


def test_the_index_figures_match_the_recordings():
    """results/index.jsonl's figures are the recordings' (its verdicts: `make replay-all`)."""
    expected = json.loads(json.dumps(records.figure_rows()))
    assert records.read_index(kind="figure") == expected, (
        "results/index.jsonl is out of date: run `make index`"
    )
    machines = {row["machine"] for row in records.read_index(kind="claim")}
    assert machines == set(records.recorded_machine_names()), (
        "every recorded machine has its verdicts in the index"
    )


def test_environment_yml_installs_the_pip_set_up_at_the_pinned_versions():
    """conda's route installs what `make setup`, `make lab` and datamove's extras install, with
    the same constraints file, and writes no version range of its own (those are pyproject's)."""
    environment = yaml_pip_lines((ROOT / "environment.yml").read_text())
    assert environment == ["--constraint constraints.txt", "-e .[torch,notebooks,dev,lab,cli]"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"torch", "notebooks", "dev", "lab", "cli"} <= set(extras)
    makefile = (ROOT / "Makefile").read_text()
    assert (
        "--constraint $(CONSTRAINTS)" in makefile and "CONSTRAINTS := constraints.txt" in makefile
    )


def yaml_pip_lines(text):
    """The lines under ``- pip:`` of a conda environment file."""
    lines = text.splitlines()
    start = lines.index("  - pip:")
    found = []
    for line in lines[start + 1 :]:
        match = re.match(r"\s{6}- (.+)$", line)
        if not match:
            break
        found.append(match.group(1).strip().strip('"'))
    return found


def test_jupyterlab_is_the_lab_extra_not_a_runtime_dependency():
    """A notebook needs a kernel, not the lab: Colab or any Jupyter server brings its own."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(req.startswith("jupyterlab") for req in project["dependencies"])
    assert any(req.startswith("jupyterlab") for req in project["optional-dependencies"]["lab"])


def test_readme_gives_exactly_the_two_commands_and_ci_calls_make_test():
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    for nb in NOTEBOOKS:
        assert nb.stem in readme, f"README's table of notebooks lacks {nb.stem}"


def _lesson_shape():
    if "lesson_shape" not in sys.modules:  # a dataclass needs its module registered
        spec = importlib.util.spec_from_file_location(
            "lesson_shape", ROOT / "tools" / "lesson_shape.py"
        )
        sys.modules["lesson_shape"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["lesson_shape"])
    return sys.modules["lesson_shape"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_the_shape_of_a_lesson(notebook):
    """Most of a notebook's code is the PyTorch being taught; the rest is short calls into its
    lesson module (tools/lesson_shape.py says what is counted, CONTRIBUTING.md why)."""
    problems = _lesson_shape().shape_of(notebook).problems()
    assert not problems, f"{notebook.stem}: " + "; ".join(problems)


def test_the_lesson_shape_counts_experiments_and_the_rest(tmp_path):
    install = "# Set-up: run alone\nimport os\n"
    code = (
        "def exp(n):\n    return helper(n)\n\n\ndef helper(n):\n    # a comment\n    return n\n\n\n"
        "run = records.run_or_replay(exp, notebook='x', params=dict(n=1))\nprint(run)\n"
    )
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "source": source,
            "outputs": [],
            "execution_count": None,
        }
        for source in (install, code, "def unused():\n    return timing.calls_for(1)\n")
    ]
    path = tmp_path / "99_x.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    shape = _lesson_shape().shape_of(path)
    assert (shape.lines, shape.experiment_lines, shape.other_functions) == (8, 4, ["unused"])
    assert shape.longest_other_cell == 2 and shape.forbidden == ["calls_for("]
    problems = " ".join(shape.problems())
    assert (
        "experiments are 50% of the code (at least 55%)" in problems
        and "uses calls_for" in problems
    )


def test_make_help_lists_every_documented_target():
    """`make help` prints each `## target:` line of the Makefile, and each names a real target."""
    makefile = (ROOT / "Makefile").read_text()
    documented = re.findall(r"(?m)^## ([a-z0-9-]+):", makefile)
    assert {"help", "run", "test", "lab", "slow-test", "constraints"} <= set(documented)
    for target in documented:
        assert re.search(rf"(?m)^{target}:", makefile), f"## {target}: documents no target"
    shown = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "help"], capture_output=True, text=True, check=True
    ).stdout
    assert [
        line.split(":")[0] for line in shown.splitlines() if line and not line.startswith(" ")
    ] == documented
    named = {
        target
        for doc in ("README.md", "CONTRIBUTING.md")
        for target in re.findall(r"`(?:[A-Z_]+=\S+ )*make ([a-z0-9-]+)", (ROOT / doc).read_text())
    }
    assert named - set(documented) == set(), (
        "the README or CONTRIBUTING names a target help leaves out"
    )


def test_the_wheel_lists_every_package_of_helpers():
    """setuptools ships only the packages pyproject.toml names: a new subpackage of helpers/ left
    out of the list installs a course that cannot import it (make slow-test found records/)."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "helpers").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_every_module_of_helpers_is_in_a_mutation_shard():
    """`make mutate SHARD=N` covers the package only if MUTATE_SHARDS names every module: a module
    split off a lesson and left out would never be mutation-tested."""
    import ast
    import fnmatch

    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "-pn", "mutate"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("MUTATE_SHARDS :="))
    shards = line.split(":=", 1)[1].replace("$(L)", "helpers.lessons").split()
    patterns = [p for shard in shards for p in shard.split(",")]
    assert len(shards) == 7, shards
    modules = [  # those with a function or method to mutate
        ".".join(path.with_suffix("").relative_to(ROOT).parts).removesuffix(".__init__")
        for path in (ROOT / "helpers").rglob("*.py")
        if path.name != "__main__.py"
        and "results" not in path.parts
        and any(isinstance(n, ast.FunctionDef) for n in ast.walk(ast.parse(path.read_text())))
    ]
    missing = [m for m in modules if not any(fnmatch.fnmatch(m + ".x", p) for p in patterns)]
    assert not missing, f"add to MUTATE_SHARDS in the Makefile: {missing}"


def test_contributing_names_every_tool_and_no_deleted_one():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    tools = {p.name for p in (ROOT / "tools").glob("*.py")}
    assert {t for t in tools if f"`{t}`" not in text} == set()
    named = set(re.findall(r"`(?:tools/)?([a-z_]+\.py)`", text))
    ours = [p.relative_to(ROOT).parts for p in ROOT.rglob("*.py")]
    ours_names = {
        parts[-1] for parts in ours if not any(x.startswith(".") or x == "build" for x in parts)
    }
    assert named - ours_names == set(), "CONTRIBUTING names files the repository does not have"
