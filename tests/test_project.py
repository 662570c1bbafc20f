"""Project-level checks: notebooks committed clean, recordings present and current, set-up files agree."""

import ast
import json
import re
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
            assert cell["outputs"] == [] and cell["execution_count"] is None, "strip with tools/nbtool.py strip"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_with_what_you_will_learn_and_ends_with_claims_and_exercises(notebook):
    cells = json.loads(notebook.read_text())["cells"]
    assert cells[0]["cell_type"] == "markdown" and "What you will learn" in "".join(cells[0]["source"])
    text = "".join("".join(c["source"]) for c in cells)
    assert "ClaimsTable(NOTEBOOK)" in text or notebook.name.startswith("00_")
    assert "exercises.check_" in text


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_what_we_see_is_printed_from_the_data_never_typed_in_markdown(notebook):
    """Words follow numbers: "What we see" is said by claims.WhatWeSee in a code cell, so it is
    computed on every machine the notebook runs or replays on (the truth check reads them)."""
    cells = json.loads(notebook.read_text())["cells"]
    typed = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "what we see" in "".join(c["source"]).lower()]
    assert not typed, f"markdown cells {typed} say 'What we see': print it with claims.WhatWeSee(NOTEBOOK, run)"
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "claims.WhatWeSee(" in code or not any("run_or_replay(" in "".join(c["source"]) for c in cells)


def test_the_index_figures_match_the_recordings():
    """results/index.jsonl's figures are the recordings' (its verdicts: `make replay-all`)."""
    expected = json.loads(json.dumps(records.figure_rows()))
    assert records.read_index(kind="figure") == expected, "results/index.jsonl is out of date: run `make index`"
    machines = {row["machine"] for row in records.read_index(kind="claim")}
    assert machines == set(records.recorded_machine_names()), "every recorded machine has its verdicts in the index"


def _requirements_of_pyproject():
    """What `make setup` and `make lab` install: the dependencies, the dev and the lab extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return set(project["dependencies"]) | set(extras["dev"]) | set(extras["lab"])


def _requirements_of_environment_yml():
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:")
    reqs = set()
    for line in lines[start + 1:]:
        match = re.match(r"\s{6}- (.+)$", line)
        if not match:
            break
        reqs.add(match.group(1).strip().strip('"'))
    return reqs - {"-e ."}


def test_environment_yml_matches_pyproject():
    assert _requirements_of_environment_yml() == _requirements_of_pyproject()


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


ANALYSIS_LINES = 40  # an analysis cell fits on a screen


def _experiment_functions(cells: list[str], notebook: Path) -> set[str]:
    """The functions a notebook passes to run_or_replay and every notebook function they reach."""
    defined = {node.name: node for source in cells for node in ast.parse(source).body
               if isinstance(node, ast.FunctionDef)}
    todo = [e.function for e in records.experiments_in_notebook(notebook).values()]
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        if name in defined and name not in reached:
            reached.add(name)
            todo.extend(records.free_names(defined[name]))
    return reached


def analysis_lines(notebook: Path) -> dict[int, int]:
    """Code cell index -> its non-blank lines, leaving out experiment definitions (the functions
    run_or_replay runs, and what they call), which are the PyTorch being taught."""
    cells = ["\n".join(line for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
             for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    experiment = _experiment_functions(cells, notebook)
    counts = {}
    for index, source in enumerate(cells):
        lines = source.splitlines()
        keep = set(range(1, len(lines) + 1))
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name in experiment:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                keep -= set(range(first, node.end_lineno + 1))
        counts[index] = sum(1 for n in keep if lines[n - 1].strip())
    return counts


def test_analysis_lines_leave_out_experiments_and_count_the_rest(tmp_path):
    code = "def exp(n):\n    return helper(n)\n\n\ndef helper(n):\n    return n\n\n\nrun = records.run_or_replay(exp, notebook='x', params=dict(n=1))\nprint(run)\n"
    cell = {"cell_type": "code", "metadata": {}, "source": code, "outputs": [], "execution_count": None}
    other = dict(cell, source="def unused():\n    return 1\n")
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps({"cells": [cell, other], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert analysis_lines(path) == {0: 2, 1: 2}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_analysis_cell_fits_on_a_screen(notebook):
    """Measuring and analysis live in the helpers: a cell that is not an experiment definition has
    at most ANALYSIS_LINES non-blank lines (split it, or move what repeats into helpers)."""
    long = {index: n for index, n in analysis_lines(notebook).items() if n > ANALYSIS_LINES}
    assert not long, f"{notebook.stem}: code cells {long} (index: lines) are longer than {ANALYSIS_LINES} lines"
