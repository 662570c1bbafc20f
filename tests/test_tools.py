"""The maintainers' tools: the GPU run's archive round trip, and notebook conversion."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_archive_round_trip(tmp_path, monkeypatch):
    from helpers import records

    gpu_run = load("gpu_run")
    # the layout is tested here; validation of recordings in tests/test_unpack.py
    monkeypatch.setattr(
        records, "validate_machine_folder", lambda folder, machine: [], raising=False
    )
    there, here, out = tmp_path / "gpu", tmp_path / "here", tmp_path / "out"
    (there / "results" / "1xGPU" / "nb").mkdir(parents=True)
    (there / "results" / "1xGPU" / "nb" / "exp.json").write_text("{}")
    (there / "build" / "gpu" / "live").mkdir(parents=True)
    (there / "build" / "gpu" / "live" / "nb.ipynb").write_text("{}")
    out.mkdir()
    archive = gpu_run.pack(out, "1xGPU", ["summary line"], root=there)
    assert archive.name == "gpu-results-1xGPU.tar.gz"
    assert (out / "summary-1xGPU.txt").read_text() == "summary line\n"
    (here / "results" / "1xGPU" / "old").mkdir(parents=True)  # an older recording is replaced
    assert gpu_run.unpack(archive, root=here) == 0
    assert (here / "results" / "1xGPU" / "nb" / "exp.json").exists()
    assert not (here / "results" / "1xGPU" / "old").exists()
    assert (here / "build" / "gpu-executed" / "1xGPU" / "live" / "nb.ipynb").exists()
    with pytest.raises(SystemExit, match="gpu-results"):
        gpu_run.unpack(tmp_path / "other.tar.gz", root=here)


def test_bytecode_is_cached_in_build_only_where_python_keeps_none(tmp_path, monkeypatch):
    """The lent GPU machines keep no .pyc (PYTHONDONTWRITEBYTECODE, read-only packages), so every
    kernel and rank compiled torch again; the GPU run then keeps bytecode in build/pycache."""
    gpu_run = load("gpu_run")
    env = {"PATH": "/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    (tmp_path / "torch.pyc").write_bytes(b"")
    monkeypatch.setattr(
        importlib.util, "cache_from_source", lambda path: str(tmp_path / "torch.pyc")
    )
    assert gpu_run.bytecode_env(env, root=tmp_path) == env  # torch's .pyc is there: nothing to do
    monkeypatch.setattr(
        importlib.util, "cache_from_source", lambda path: str(tmp_path / "none.pyc")
    )
    assert gpu_run.bytecode_env(env, root=tmp_path) == {
        "PATH": "/bin",
        "PYTHONPYCACHEPREFIX": str(tmp_path / "build" / "pycache"),
    }
    chosen = {**env, "PYTHONPYCACHEPREFIX": "/elsewhere"}
    assert gpu_run.bytecode_env(chosen, root=tmp_path) == chosen  # a cache chosen by the user stays


def test_warm_bytecode_compiles_the_imports_into_the_cache(tmp_path, monkeypatch):
    import os

    gpu_run = load("gpu_run")
    monkeypatch.setattr(gpu_run, "WARM_IMPORTS", "json")
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")  # as bytecode_env gives it
    line = gpu_run.warm_bytecode(env)
    assert (
        line.startswith(f"compiled bytecode kept in {tmp_path / 'pycache'}") and "exit" not in line
    )
    assert list((tmp_path / "pycache").rglob("json/__init__.*.pyc"))
    monkeypatch.setattr(gpu_run, "WARM_IMPORTS", "no_such_module_here")
    assert "(exit 1)" in gpu_run.warm_bytecode(env)


def test_notebook_from_script_and_back(tmp_path):
    nbtool = load("nbtool")
    script = tmp_path / "s.py"
    script.write_text("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\nprint(x)\n")
    nb = nbtool.from_py(script)
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code"]
    assert "".join(nb["cells"][0]["source"]) == "# Title\n\ntext"
    assert nb["cells"][1]["outputs"] == [] and nb["metadata"]["kernelspec"]["name"] == "python3"
    path = tmp_path / "n.ipynb"
    nbtool.write(nb, path)
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1"}]
    nb["cells"][1]["execution_count"] = 3
    path.write_text(json.dumps(nb))
    nbtool.strip(path)
    stripped = json.loads(path.read_text())
    assert stripped["cells"][1]["outputs"] == [] and stripped["cells"][1]["execution_count"] is None
    assert nbtool.to_py(path).startswith("# %% [markdown]\n# # Title")


def test_to_py_without_a_script_prints_the_text_git_diffs(tmp_path, capsys):
    """.gitattributes names tools/nbtool.py to-py as the notebooks' textconv: one argument, text out."""
    nbtool = load("nbtool")
    script = tmp_path / "s.py"
    script.write_text("# %% [markdown]\n# # Title\n\n# %%\nx = 1\n")
    path = tmp_path / "n.ipynb"
    nbtool.write(nbtool.from_py(script), path)
    assert nbtool.main(["to-py", str(path)]) == 0
    assert (
        capsys.readouterr().out
        == nbtool.to_py(path)
        == "# %% [markdown]\n# # Title\n\n# %%\nx = 1\n"
    )
    assert "diff=nbtext" in (ROOT / ".gitattributes").read_text()


def test_the_truth_check_names_notebook_cell_machine_and_values(tmp_path):
    replay_all = load("replay_all")
    executed = tmp_path / "1xH100"
    executed.mkdir()
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "x"},
            {
                "cell_type": "code",
                "outputs": [{"data": {"text/markdown": "✗ one synchronize (2 counted)"}}],
            },
        ]
    }
    (executed / "02_non_blocking.ipynb").write_text(json.dumps(nb))
    base = {"notebook": "02_non_blocking", "machine": "1xH100", "unit": "x", "holds_if": "below"}
    rows = [
        {
            **base,
            "kind": "check",
            "name": "one synchronize",
            "verdict": "does not hold here",
            "measured": "2 counted",
        },
        {**base, "kind": "check", "name": "fine", "verdict": "holds", "measured": "1"},
        {
            **base,
            "kind": "claim",
            "name": "twice",
            "verdict": "holds",
            "value": 2.0,
            "spread": 0.01,
            "threshold": 2,
        },
        {
            **base,
            "kind": "claim",
            "name": "ok",
            "verdict": "borderline here",
            "value": 2.0,
            "spread": 0.01,
            "threshold": 2,
        },
        {
            **base,
            "kind": "claim",
            "name": "bool",
            "verdict": "holds",
            "value": True,
            "spread": None,
            "threshold": None,
        },
        {**base, "kind": "figure", "name": "f", "verdict": None, "value": 1.0, "spread": 0.0},
    ]
    problems = replay_all.untrue(rows, tmp_path)
    assert problems == [
        '02_non_blocking cell 1 on 1xH100: "one synchronize" does not hold: 2 counted',
        '02_non_blocking cell ? on 1xH100: the verdict "holds" of "twice" disagrees with 2.0 ± 0.01 against 2 '
        "(borderline here)",
    ]


def test_the_truth_check_reads_failed_marks_in_the_executed_replays(tmp_path, monkeypatch):
    from helpers import claims

    replay_all = load("replay_all")
    monkeypatch.setattr(replay_all, "ROOT", tmp_path)
    folder = tmp_path / "build" / "replay" / "2xH200"
    folder.mkdir(parents=True)
    seen = claims.WhatWeSee("06_x")
    seen.check("gloo gives the host back late", False, "0.1 ms")  # a live part: no index row
    seen.check("fine", True, "1")
    nb = {
        "cells": [
            {"cell_type": "code", "outputs": [{"data": {"text/markdown": seen.to_markdown()}}]}
        ]
    }
    (folder / "06_x.ipynb").write_text(json.dumps(nb))
    problems = replay_all.failed_marks([("2xH200", Path("notebooks/06_x.ipynb"))])
    assert len(problems) == 1 and problems[0].startswith("06_x cell 0 on 2xH200:")
    assert "gloo gives the host back late" in problems[0]


def test_compare_verdicts_lists_changes_and_fails_only_on_a_flip(tmp_path, capsys):
    compare = load("compare_verdicts")

    def row(machine, verdict, value=1.0, name="c"):
        return json.dumps(
            {
                "kind": "claim",
                "machine": machine,
                "notebook": "01_x",
                "name": name,
                "verdict": verdict,
                "value": value,
                "spread": 0.1,
                "threshold": 1.0,
                "holds_if": "above",
            }
        )

    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(
        "\n".join(
            [
                row("1xA", "holds", 1.5),
                row("1xB", "holds", 1.5),
                row("1xB", "holds", name="d"),
                json.dumps({"kind": "figure", "machine": "1xA"}),
            ]
        )
    )
    new.write_text(
        "\n".join(
            [
                row("1xA", "borderline here", 1.05),
                row("1xB", "does not hold here", 0.5),
                row("1xB", "holds", name="d"),
            ]
        )
    )
    assert compare.main([str(old), str(new), "--machine", "1xA"]) == 0
    out = capsys.readouterr().out
    assert (
        "moved    1xA 01_x: c" in out and "holds: 1.5 ± 0.1 (> 1)  ->  borderline here: 1.05" in out
    )
    assert "1 of 1 verdicts changed; 0 flipped" in out
    assert compare.main([str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert (
        out.index("FLIPPED  1xB") < out.index("moved    1xA")
        and "2 of 3 verdicts changed; 1 flipped" in out
    )


def test_run_to_run_counts_runs_not_replays_and_restarts_when_the_test_changes():
    run_to_run = load("run_to_run")

    def version(*rows):
        return run_to_run.numeric_claims(
            json.dumps(
                {
                    "kind": "claim",
                    "machine": "1xA",
                    "notebook": "03_x",
                    "name": name,
                    "value": value,
                    "threshold": threshold,
                    "holds_if": "above",
                    "unit": "x",
                }
            )
            for name, value, threshold in rows
        )

    versions = [
        version(("p", 0.95, 0.9), ("q", 1.0, 2.0)),
        version(("p", 0.95, 0.9), ("q", 1.5, 2.0)),
        version(("p", 0.87, 0.9), ("q", 3.0, 1.0)),
        version(("p", 0.87, 0.9), ("q", 3.5, 1.0)),
    ]
    runs = run_to_run.runs_of(versions)
    assert runs[("1xA", "03_x", "p")] == [0.95, 0.87]  # a replayed value is one run, not two
    assert runs[("1xA", "03_x", "q")] == [
        3.0,
        3.5,
    ]  # the threshold changed: another test, history anew
    out = run_to_run.evidence(runs, versions[-1])
    assert out["kinds"]["1xA"]["03_x"]["p"] == {
        "values": [0.95, 0.87],
        "threshold": 0.9,
        "holds_if": "above",
    }
    # the band is half the range as a factor: (ln 0.95 - ln 0.87) / 2, not (0.95 - 0.87) / 2
    assert out["bands"]["03_x"]["p"]["band"] == pytest.approx(math.log(0.95 / 0.87) / 2)
    assert out["bands"]["03_x"]["p"]["machine"] == "1xA"
    old, new = next(iter(run_to_run.RENAMED.items()))
    renamed = run_to_run.runs_of([version((old, 0.8, 0.7)), version((new, 0.9, 0.7))])
    assert renamed == {("1xA", "03_x", new): [0.8, 0.9]}  # new words, the old runs kept


def test_run_to_run_lends_a_kind_run_once_the_largest_move_on_a_kind_run_several_times():
    run_to_run = load("run_to_run")
    rows = {"threshold": 1.1, "holds_if": "above", "unit": "x"}
    runs = {
        ("1xA", "02_x", "c"): [1.19, 1.43, 0.94],  # moved by a factor 1.52: band ln(1.52) / 2
        ("1xB", "02_x", "c"): [1.0, 1.1],
        ("2xC", "02_x", "c"): [0.93],  # run once: keeps its run, lends nothing
        ("1xA", "02_x", "d"): [0.0, 0.0],  # a count at 0 against a positive threshold: no move
        ("1xA", "02_x", "e"): [3.0, -1.0],  # a threshold at or below 0: a difference
    }
    tests = {key: dict(rows) for key in runs}
    tests[("1xA", "02_x", "e")] = {"threshold": 0.0, "holds_if": "above", "unit": "us"}
    tests[("1xA", "02_x", "f")] = {"threshold": 0.2, "holds_if": "below", "unit": ""}
    runs[("1xA", "02_x", "f")] = [0.00005, 0.056]  # a share near 0: a difference, not x1000
    out = run_to_run.evidence(runs, tests)
    assert out["bands"]["02_x"]["c"]["band"] == pytest.approx(math.log(1.43 / 0.94) / 2)
    assert out["bands"]["02_x"]["c"]["machine"] == "1xA"
    assert out["kinds"]["2xC"]["02_x"]["c"]["values"] == [0.93]
    assert out["bands"]["02_x"]["e"]["band"] == pytest.approx(2.0)
    assert out["bands"]["02_x"]["d"]["band"] == 0.0
    assert out["bands"]["02_x"]["f"]["band"] == pytest.approx((0.056 - 0.00005) / 2)


def test_run_to_run_restarts_when_the_experiment_ran_with_other_params():
    run_to_run = load("run_to_run")
    params = {
        ("1xA", "02_x", "loader", "d1"): '{"workers": 2}',
        ("1xA", "02_x", "loader", "d2"): '{"workers": 2}',
        ("1xA", "02_x", "loader", "d3"): '{"workers": 4}',
        ("1xA", "02_x", "loader", "d4"): '{"workers": 4}',
    }

    def version(value, date):
        row = {
            "kind": "claim",
            "machine": "1xA",
            "notebook": "02_x",
            "experiment": "loader",
            "date": date,
            "name": "pays",
            "value": value,
            "threshold": 1.0,
            "holds_if": "above",
            "unit": "x",
        }
        return run_to_run.numeric_claims([json.dumps(row)], params)

    runs = run_to_run.runs_of(
        [version(0.84, "d1"), version(0.91, "d2"), version(1.18, "d3"), version(1.21, "d4")]
    )
    assert runs[("1xA", "02_x", "pays")] == [
        1.18,
        1.21,
    ]  # the 4-worker loader, not the 2-worker one
    header = '{"header": {"date": "2026-11-24T22:35:00+00:00", "params": {"workers": 4, "b": 1}}, "value": 1}'
    assert run_to_run.header_params(header) == (
        "2026-11-24T22:35:00+00:00",
        '{"b": 1, "workers": 4}',
    )
    assert run_to_run.header_params("{}") is None and run_to_run.header_params("not json") is None


def test_compare_verdicts_calls_a_changed_threshold_a_retest_not_a_flip(tmp_path, capsys):
    compare = load("compare_verdicts")
    row = {
        "kind": "claim",
        "machine": "1xA",
        "notebook": "01_x",
        "name": "c",
        "spread": 0.0,
        "holds_if": "below",
    }
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(json.dumps({**row, "verdict": "holds", "value": 0.27, "threshold": 1.0}))
    new.write_text(
        json.dumps({**row, "verdict": "does not hold here", "value": 0.55, "threshold": 0.25})
    )
    assert compare.main([str(old), str(new)]) == 0
    assert "retested 1xA 01_x: c" in capsys.readouterr().out


def test_compare_verdicts_says_which_new_runs_the_earlier_bands_did_not_foresee():
    compare = load("compare_verdicts")

    def row(verdict, value, spread=0.003):
        return {
            "kind": "claim",
            "machine": "1xA",
            "notebook": "00_x",
            "name": "close",
            "verdict": verdict,
            "value": value,
            "spread": spread,
            "threshold": 0.8,
            "holds_if": "above",
            "unit": "x",
        }

    old = {("1xA", "00_x", "close"): row("holds", 0.871)}
    # the new run joined the history and reads borderline in the index, but the old verdict said 'holds'
    surprise = compare.unforeseen(old, {("1xA", "00_x", "close"): row("borderline here", 0.707)})
    assert [(c["old"].split(":")[0], c["new"].split(":")[0]) for c in surprise] == [
        ("holds", "does not hold here")
    ]
    # a run on the same side is no surprise, nor one judged against another threshold, nor a
    # flip the old verdict foresaw (borderline)
    assert compare.unforeseen(old, {("1xA", "00_x", "close"): row("holds", 0.86)}) == []
    moved = dict(row("borderline here", 0.707), threshold=0.6)
    assert compare.unforeseen(old, {("1xA", "00_x", "close"): moved}) == []
    foreseen = {("1xA", "00_x", "close"): row("borderline here", 0.871)}
    assert compare.unforeseen(foreseen, {("1xA", "00_x", "close"): row("b", 0.707)}) == []


def test_gpu_run_marks_the_clone_as_the_installed_course(tmp_path):
    gpu_run = load("gpu_run")
    folder = gpu_run.mark_installed(tmp_path)
    again = gpu_run.mark_installed(tmp_path)  # a second run replaces, never piles up
    assert folder == again and [p.name for p in tmp_path.iterdir()] == [folder.name]
    import importlib.metadata
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = importlib.metadata.distributions(name=project["name"], path=[str(tmp_path)])
    # what the notebooks' first cell asks: the course at the notebook's version is installed
    assert [d.version for d in found] == [project["version"]]


def test_mutation_sample_is_drawn_once_per_seed_and_scored_with_its_interval(tmp_path, capsys):
    mutation = load("mutation")
    names = tmp_path / "names.txt"
    names.write_text(
        "\n".join(f"    helpers.m{i % 3}.x_f__mutmut_{i}: not checked" for i in range(100)) + "\n"
    )
    rows = mutation.read(names)
    first = mutation.pick(rows, 10, seed=1)
    assert first == mutation.pick(rows, 10, seed=1) != mutation.pick(rows, 10, seed=2)
    assert len(first) == 10 == len(set(first)) and len(mutation.pick(rows, 500, seed=1)) == 100
    with pytest.raises(ValueError, match="at least 1"):
        mutation.pick(rows, 0, seed=1)
    results = tmp_path / "all.txt"
    statuses = ["killed"] * 6 + ["timeout"] * 2 + ["survived", "no tests", "not checked"]
    results.write_text(
        "\n".join(f"    helpers.a.b.x_g__mutmut_{i}: {s}" for i, s in enumerate(statuses)) + "\n"
    )
    lines = mutation.score(mutation.read(results), total=100)
    assert lines[0].startswith("helpers.a.b") and "8 of 10 noticed; 2 missed" in lines[0]
    low, high = mutation.wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)  # the Wilson interval of 8 of 10
    assert lines[-1] == (
        "mutation score 80%: 8 of 10 mutants noticed; 1 no tests; 1 survived "
        "(a random sample of 10 of the package's 100 mutants: 95% interval 49.0%-94.3%)"
    )
    assert "sample" not in mutation.score(mutation.read(results))[-1]
    drawn = tmp_path / "sample.txt"  # a mutant run while setting up is left out of the score
    drawn.write_text("helpers.a.b.x_g__mutmut_0\nhelpers.a.b.x_g__mutmut_8\n")
    assert mutation.main(["score", str(results), "--total", "100", "--only", str(drawn)]) == 0
    assert "mutation score 50%: 1 of 2 mutants noticed; 1 survived" in capsys.readouterr().out


def test_no_committed_verdict_is_borderline_where_every_run_of_its_kind_is_on_one_side():
    """Over results/index.jsonl and its git history: a claim whose value lies beyond its own
    spread (and 1%) of the threshold, on a kind run several times whose recorded runs all lie on
    that side too, is not called borderline (1xH200's 40.8 with runs of 32 to 116 against 2)."""
    import re

    run_to_run = load("run_to_run")
    versions = [run_to_run.numeric_claims(lines) for lines in run_to_run.history()]
    runs = run_to_run.runs_of(versions)
    checked = []
    for key, row in versions[-1].items():
        value, values = row["value"], {*runs[key], row["value"]}
        between = re.fullmatch(r"between (\S+) and (\S+)", row.get("holds_if_text") or "")
        bounds = [float(b) for b in between.groups()] if between else [row["threshold"]]
        near = max(row.get("spread") or 0.0, 0.01 * abs(row["threshold"]))
        one_side = all((min(values) > b or max(values) < b) for b in bounds)
        if len(values) >= 2 and one_side and abs(value - row["threshold"]) > near:
            checked.append(key)
            assert row["verdict"] != "borderline here", (key, value, sorted(values))
    assert len(checked) > 20  # the test reads real rows, not none


def test_the_truth_check_fails_where_a_sentence_states_another_verdict_than_the_table(tmp_path):
    replay_all = load("replay_all")
    claim = {
        "kind": "claim",
        "machine": "1xA",
        "notebook": "01_x",
        "name": "twice",
        "verdict": "borderline here",
        "value": 3.0,
        "spread": 0.01,
        "threshold": 2.0,
        "holds_if": "below",
        "runs": [1.5, 3.0],
        "band": 0.0,
    }
    stated = {"kind": "stated", "machine": "1xA", "notebook": "01_x", "name": "twice"}
    assert replay_all.untrue([claim, {**stated, "verdict": "borderline here"}], tmp_path) == []
    (problem,) = replay_all.untrue([claim, {**stated, "verdict": "does not hold here"}], tmp_path)
    assert 'says "twice" does not hold here, the claims table: borderline here' in problem
    (orphan,) = replay_all.untrue([{**stated, "verdict": "holds"}], tmp_path)
    assert "the claims table: no row" in orphan


def test_cell_of_names_the_cell_and_says_when_the_notebook_is_half_written(tmp_path):
    replay_all = load("replay_all")
    notebook = tmp_path / "01.ipynb"
    outputs = [{"output_type": "stream", "text": ["a check: 1.5 GB/s"]}]
    notebook.write_text(json.dumps({"cells": [{"outputs": []}, {"outputs": outputs}]}))
    assert replay_all.cell_of(notebook, "1.5 GB/s") == "cell 1"
    assert replay_all.cell_of(notebook, "not shown") == "cell ?"
    notebook.write_text('{"cells": [')  # another run is writing it
    assert "is not whole" in replay_all.cell_of(notebook, "1.5 GB/s")


NCCL_TESTS_LOG = """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1     7.38    0.00    0.00       0     6.66    0.00    0.00       0
     1048576        262144     float     sum      -1    14.37   72.97   72.97       0    14.43   72.68   72.68       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 9.99052
"""  # nccl-tests 2.19.6's all_reduce_perf -G 1 on 2xH200 (2026-11-27), two of its rows


def test_beside_nccl_tests_reads_both_tools_and_counts_what_agrees():
    beside = load("beside_nccl_tests")
    times = beside.nccl_tests_rows(NCCL_TESTS_LOG, "time")
    assert times == {
        8: {"out_of_place": 7.38, "in_place": 6.66},
        1048576: {"out_of_place": 14.37, "in_place": 14.43},
    }
    assert beside.nccl_tests_rows(NCCL_TESTS_LOG, "bus_bw")[1048576] == {
        "out_of_place": 72.97,
        "in_place": 72.68,
    }
    doc = {"results": [{"size": 8, "out_of_place": {"time": 7.0}, "in_place": {"time": 9.0}}]}
    ours = beside.datamove_rows([doc] * 4, "time")  # one -J document per op, in OPS' order
    assert set(ours) == set(beside.OPS) and ours["broadcast"] == {
        8: {"out_of_place": 7.0, "in_place": 9.0}
    }

    def table(out, inp):  # the same numbers for every op, at 8 B
        return {op: {8: {"out_of_place": out, "in_place": inp}} for op in beside.OPS}

    theirs = [table(5.0, 5.0), table(5.0, 7.0)]  # nccl-tests' two runs agree out of place only
    lines = beside.compare([table(5.5, 9.0), table(6.5, 9.0)], theirs, 0.2)
    assert (
        lines[0]
        == "  all_reduce     out_of_place  1.200x-1.200x (median 1.200x), within 20% at 1 of 1 sizes"
    )
    assert lines[1].endswith("1.500x-1.500x (median 1.500x), within 20% at 0 of 1 sizes")  # 9 / 6
    # out of place: 5.5/5 and 6.5/5, 5.5/5 and 6.5/5 -> 2 of 4 within; in place: 9/5, 9/7 -> 0 of 4
    assert (
        lines[-1]
        == "  run pairs within 20%: datamove against nccl-tests 8 of 32, nccl-tests against itself 4 of 8"
    )


def test_beside_nccl_tests_asks_for_the_build_folder(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        load("beside_nccl_tests").main(["--nccl-tests", str(tmp_path)])
    assert stop.value.code == 2
    assert "has no all_reduce_perf: pass nccl-tests' build folder" in capsys.readouterr().err
