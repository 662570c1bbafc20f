"""Recordings you can trust: staleness that misses nothing, explicit replay, one value shape,
the codec at the bottom of the package, and errors that name the file."""

import ast
import functools
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from helpers import codec, distributed, hardware, records, timing, trace

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- a small notebook and its recordings

SETUP = "from helpers import config, records\nNOTEBOOK = 'nb'\nMiB = 2**20"
HELPER = "def helper(n):\n    return [n, n + 1]"
EXPERIMENT = "def exp(n):\n    return {'values': helper(n)}"
CALL = "run = records.run_or_replay(exp, notebook=NOTEBOOK, gpus=1,\n    params=dict(n=config.pick(full=64 * MiB, quick=MiB)))"


def write_notebook(path, cells):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": c,
                "metadata": {},
                "outputs": [],
                "execution_count": None,
            }
            for c in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))
    return path


def write_recording(root, machine, gpus, notebook_path, name="exp", attach=None, **header_changes):
    """A recording that matches the notebook exactly (what `make gpu-all` would write)."""
    found = records.experiments_in_notebook(notebook_path)[name]
    folder = root / machine / notebook_path.stem
    folder.mkdir(parents=True, exist_ok=True)
    result = {"values": [1, 2]}
    if attach:
        (folder / f"{name}.0.{attach}").write_bytes(b"trace")
        result["trace"] = {"__type__": "Attachment", "path": f"{name}.0.{attach}"}
    header = {
        "machine": {
            "machine": machine,
            "gpus": [{"name": "FAKE GPU", "index": i} for i in range(gpus)],
            "torch": "2.11",
            "driver": "580",
        },
        "date": "2026-11-20T10:00:00+00:00",
        "commit": "abc",
        "quick": False,
        "notebook": notebook_path.stem,
        "experiment": name,
        "fingerprint": found.fingerprint,
        "params": found.params,
        **header_changes,
    }
    path = folder / f"{name}.json"
    path.write_text(codec.dumps({"header": header, "result": result}))
    records.write_checksums(root / machine)  # as records.save notes them
    return path


@pytest.fixture
def course(tmp_path):
    """A notebook with an experiment that calls a function of another cell, recorded on two machines."""
    nb = write_notebook(tmp_path / "nb.ipynb", [SETUP, HELPER, EXPERIMENT, CALL])
    root = tmp_path / "results"
    write_recording(root, "1xA", 1, nb, attach="t.trace.json.gz")
    write_recording(root, "2xB", 2, nb)
    assert records.check_recordings([nb], root) == []
    return nb, root


def problems(nb, root):
    return [p.text for p in records.check_recordings([nb], root)]


# ---------------------------------------------------------------- staleness: one test per miss


def test_a_changed_params_value_is_stale(course):
    nb, root = course
    write_notebook(nb, [SETUP, HELPER, EXPERIMENT, CALL.replace("full=64 * MiB", "full=128 * MiB")])
    found = problems(nb, root)
    assert len(found) == 2 and all("other params (n differ" in p for p in found)


def test_a_changed_constant_behind_the_params_is_stale(course):
    nb, root = course
    write_notebook(nb, [SETUP.replace("2**20", "2**21"), HELPER, EXPERIMENT, CALL])
    assert len(problems(nb, root)) == 2


def test_a_changed_function_of_another_cell_is_stale(course):
    nb, root = course
    write_notebook(nb, [SETUP, HELPER.replace("n + 1", "n + 2"), EXPERIMENT, CALL])
    found = problems(nb, root)
    assert len(found) == 2 and all("made from other code" in p for p in found)


def test_comments_and_formatting_keep_the_fingerprint(course):
    nb, root = course
    write_notebook(nb, [SETUP, "# a comment\n" + HELPER + "  # why", EXPERIMENT, CALL])
    assert problems(nb, root) == []


def test_an_experiment_passed_as_fn_is_checked(course):
    nb, root = course
    write_notebook(
        nb,
        [
            SETUP,
            HELPER,
            EXPERIMENT,
            CALL.replace("(exp,", "(fn=exp,"),
            "def exp2():\n    return 1",
            "records.run_or_replay(fn=exp2, notebook=NOTEBOOK, gpus=1)",
        ],
    )
    assert problems(nb, root) == [
        "nb/exp2: no machine has recorded it",
        f"{root}/1xA/nb/exp2.json: missing; 1xA has the notebook's other recordings",
        f"{root}/2xB/nb/exp2.json: missing; 2xB has the notebook's other recordings",
    ]


@pytest.mark.parametrize(
    "call",
    [
        "records.run_or_replay(make(3), notebook=NOTEBOOK, gpus=1)",
        "records.run_or_replay(lambda: 1, notebook=NOTEBOOK, gpus=1)",
        "records.run_or_replay(functools.partial(exp, 3), notebook=NOTEBOOK, gpus=1)",
        "records.run_or_replay(made, notebook=NOTEBOOK, gpus=1, name='made')",
    ],
)
def test_an_experiment_the_reader_cannot_see_is_a_problem(course, call):
    nb, root = course
    write_notebook(
        nb,
        [
            SETUP,
            HELPER,
            EXPERIMENT,
            CALL,
            "def make(n):\n    def inner():\n        return n\n    return inner\nmade = make(3)",
            call,
        ],
    )
    assert any(
        "not a function defined with def at the top of a cell" in p for p in problems(nb, root)
    )


def test_an_experiment_reading_a_notebook_variable_is_a_problem(course):
    nb, root = course
    write_notebook(nb, [SETUP, HELPER, EXPERIMENT.replace("helper(n)", "helper(n * MiB)"), CALL])
    assert any("reads the notebook variable `MiB`" in p for p in problems(nb, root))


def test_a_closure_is_refused_before_it_runs():
    def make(n):
        def captured():
            return n

        return captured

    ran = []
    with pytest.raises(TypeError, match="captures n"):
        records.run_or_replay(make(3), notebook="nb", gpus=0)
    with pytest.raises(TypeError, match="lambda"):
        records.run_or_replay(lambda: ran.append(1), notebook="nb", gpus=0)
    with pytest.raises(TypeError, match="functools.partial"):
        records.run_or_replay(functools.partial(print, 1), notebook="nb", gpus=0)
    assert ran == []


def test_a_deleted_attachment_is_found(course):
    nb, root = course
    (root / "1xA" / "nb" / "exp.0.t.trace.json.gz").unlink()
    assert problems(nb, root) == [
        f"{root}/1xA/nb/exp.json: {root}/1xA/nb/exp.0.t.trace.json.gz is missing: restore it "
        f"with `git checkout -- {root}/1xA/nb/exp.0.t.trace.json.gz` or re-record it"
    ]


def test_one_machines_copy_deleted_while_another_remains(course):
    nb, root = course
    (root / "2xB" / "nb" / "exp.json").write_text("")  # keep the folder non-empty with another file
    write_recording(root, "2xB", 2, nb, name="exp")  # restore, then delete it properly
    write_notebook(
        nb,
        [
            SETUP,
            HELPER,
            EXPERIMENT,
            CALL,
            "def exp2():\n    return 1",
            "records.run_or_replay(exp2, notebook=NOTEBOOK, gpus=1)",
        ],
    )
    write_recording(root, "1xA", 1, nb, name="exp2")
    write_recording(root, "2xB", 2, nb, name="exp2")
    assert problems(nb, root) == []
    (root / "2xB" / "nb" / "exp.json").unlink()
    assert problems(nb, root) == [
        f"{root}/2xB/nb/exp.json: missing; 2xB has the notebook's other recordings"
    ]


def test_a_machine_with_too_few_gpus_is_not_asked_for_an_experiment(course):
    nb, root = course
    write_notebook(
        nb,
        [
            SETUP,
            HELPER,
            EXPERIMENT,
            CALL,
            "def exp2():\n    return 1",
            "records.run_or_replay(exp2, notebook=NOTEBOOK, gpus=2)",
        ],
    )
    write_recording(root, "2xB", 2, nb, name="exp2")
    assert problems(nb, root) == []


def test_a_new_measuring_version_makes_every_recording_stale(course, monkeypatch):
    nb, root = course
    monkeypatch.setattr(records.fingerprints, "MEASURING_VERSION", records.MEASURING_VERSION + 1)
    assert len(problems(nb, root)) == 2


def test_leftovers_and_quick_runs_are_problems(course):
    nb, root = course
    write_recording(root, "1xA", 1, nb, quick=True)
    (root / "1xA" / "gone_nb").mkdir()
    (root / "1xA" / "gone_nb" / "x.json").write_text("{}")
    write_notebook(nb, [SETUP, HELPER, EXPERIMENT, CALL])
    found = problems(nb, root)
    assert any("quick-mode run" in p for p in found)
    assert any("notebook that does not exist" in p for p in found)


def test_problems_are_grouped_by_machine_with_the_command_that_re_records(course):
    nb, root = course
    write_notebook(nb, [SETUP, HELPER.replace("n + 1", "n + 2"), EXPERIMENT, CALL])
    text = records.format_problems(records.check_recordings([nb], root))
    assert text.splitlines()[0] == "1xA:"
    assert 'on a 2xB machine: make gpu-all NOTEBOOKS="notebooks/nb.ipynb"' in text
    assert "make unpack ARCHIVE=build/gpu-out/gpu-results-2xB.tar.gz" in text


def test_the_static_and_the_live_fingerprint_agree(tmp_path):
    """The reader of the notebook's text and run_or_replay on the live function must agree,
    or every replay would warn; here both read this file's functions."""
    source = Path(__file__).read_text()
    tree = ast.parse(source)
    cells = [
        ast.get_source_segment(source, n)
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name in ("_inner_helper", "_outer_experiment")
    ]
    nb = write_notebook(
        tmp_path / "nb.ipynb", cells + ["records.run_or_replay(_outer_experiment, notebook='nb')"]
    )
    assert records.experiments_in_notebook(nb)[
        "_outer_experiment"
    ].fingerprint == records.fingerprint(_outer_experiment)
    assert records.fingerprint(_outer_experiment) != records.fingerprint_source(cells[1])


def _inner_helper(x):
    return x * 2


def _outer_experiment(n=1):
    return _inner_helper(n)


def test_the_course_recordings_are_sound_and_current():
    """Every committed recording validates, and none is stale, missing or left over."""
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    found = records.check_recordings(notebooks, ROOT / "results")
    assert not found, "\n" + records.format_problems(found)


def test_the_measuring_code_is_changed_deliberately():
    assert records.measuring_code_hash() == records.MEASURING_CODE, (
        "timing, trace or distributed changed. If the change alters what experiments measure, bump "
        "records.MEASURING_VERSION (every recording becomes stale: re-record); either way run "
        f"`make measuring-code` (it sets records.MEASURING_CODE = {records.measuring_code_hash()!r})"
    )


def test_make_measuring_code_writes_the_hash_and_nothing_else(tmp_path):
    from helpers.records.fingerprints import write_measuring_code

    copy = tmp_path / "fingerprints.py"
    original = Path(records.fingerprints.__file__).read_text()
    copy.write_text(
        original.replace(f'MEASURING_CODE = "{records.MEASURING_CODE}"', 'MEASURING_CODE = "0"')
    )
    assert write_measuring_code(copy) == records.measuring_code_hash()
    assert copy.read_text() == original.replace(
        f'"{records.MEASURING_CODE}"', f'"{records.measuring_code_hash()}"'
    )
    copy.write_text("nothing to set\n")
    with pytest.raises(RuntimeError, match="no line MEASURING_CODE"):
        write_measuring_code(copy)
    assert copy.read_text() == "nothing to set\n"


# ---------------------------------------------------------------- explicit replay


@pytest.fixture
def replaying(course, monkeypatch):
    nb, root = course
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(root))
    monkeypatch.setenv("COURSE_REPLAY", "1")
    monkeypatch.delenv("COURSE_REPLAY_MACHINE", raising=False)
    return nb, root


def test_an_unknown_replay_machine_is_an_error_listing_the_machines(replaying, monkeypatch):
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "2xB-typo")
    with pytest.raises(
        ValueError, match=r"names '2xB-typo', not a recorded machine; recorded machines: 1xA, 2xB"
    ):
        records.choose_recording("nb", "exp", 1)
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "1xA,2xB-typo")
    with pytest.raises(ValueError, match="names '2xB-typo'"):
        records.choose_recording("nb", "exp", 1)


def test_a_replay_machine_without_the_experiment_is_an_error(replaying, monkeypatch):
    nb, root = replaying
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "1xA")
    with pytest.raises(
        ValueError, match="has no recording of nb/exp .*needs 2 GPU.*machines that have it: 2xB"
    ):
        records.choose_recording("nb", "exp", 2)
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "1xA,2xB")  # a list falls back, and says so
    choice = records.choose_recording("nb", "exp", 2)
    assert (choice.machine, choice.reason) == (
        "2xB",
        "COURSE_REPLAY_MACHINE names 1xA first, which did not record it; 2xB is the first on its "
        "list that did (recorded on 2xB)",
    )


def test_the_default_is_this_machine_else_the_most_gpus(replaying, monkeypatch):
    choice = records.choose_recording("nb", "exp", 1)
    assert (choice.machine, choice.reason) == (
        "2xB",
        "it is the one with the most GPUs of those that recorded it "
        "(1xA, 2xB); set COURSE_REPLAY_MACHINE to choose another",
    )
    monkeypatch.setattr(records.running, "_this_machine_name", lambda: "1xA")
    assert records.choose_recording("nb", "exp", 1).reason == "it is this machine"
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "1xA")
    assert records.choose_recording("nb", "exp", 1).reason == "COURSE_REPLAY_MACHINE chose it"


def sentence_experiment():
    return 1


def test_the_first_sentence_says_which_machine_and_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.delenv("COURSE_REPLAY", raising=False)
    monkeypatch.delenv("COURSE_REPLAY_MACHINE", raising=False)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    fp = records.fingerprint(sentence_experiment)
    for machine, gpus in (("1xA", 1), ("4xB", 4)):
        path = records.save("nb", "sentence_experiment", 7, fp=fp, root=tmp_path)
        record = json.loads(path.read_text())
        record["header"]["machine"].update(
            machine=machine, gpus=[{"name": "FAKE", "index": i} for i in range(gpus)]
        )
        (tmp_path / machine / "nb").mkdir(parents=True)
        (tmp_path / machine / "nb" / path.name).write_text(json.dumps(record))
        path.unlink()
        records.write_checksums(tmp_path / machine)
    run = records.run_or_replay(sentence_experiment, notebook="nb", gpus=1)
    first = " ".join(capsys.readouterr().out.split())  # the sentence, wrapped at 100 characters
    assert run.value == 7 and run.machine == "4xB"
    assert first.startswith(
        "Replayed from 4xB, not measured here: this machine has no GPUs and the experiment "
        "needs 1; 4xB is replayed because it is the one with the most GPUs of those that "
        "recorded it (1xA, 4xB)"
    )


def _two_machines(root, params=None):
    """nb/sentence_experiment recorded on 1xA (one GPU, 2026-01-01) and 4xB (four, 2026-01-02)."""
    fp = records.fingerprint(sentence_experiment)
    for machine, gpus, day in (("1xA", 1, "01"), ("4xB", 4, "02")):
        path = records.save("nb", "sentence_experiment", 7, fp=fp, params=params, root=root)
        record = json.loads(path.read_text())
        record["header"]["machine"].update(
            machine=machine,
            cpu=f"{machine} CPU",
            gpus=[
                {"name": "FAKE", "index": i, "memory_bytes": 2**34, "capability": "9.0"}
                | {"sm_count": 132}
                for i in range(gpus)
            ],
        )
        record["header"]["date"] = f"2026-01-{day}T10:00:00"
        (root / machine / "nb").mkdir(parents=True)
        (root / machine / "nb" / path.name).write_text(json.dumps(record))
        path.unlink()
        records.write_checksums(root / machine)


def params_experiment(n=1):
    return n


def test_a_cpu_machine_says_whose_recordings_its_notebook_replays(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_REPLAY_MACHINE", raising=False)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    monkeypatch.setattr(hardware, "describe", lambda: {"machine": "cpu-box", "cpu": "Fake CPU"})
    said = records.where_numbers_come_from("nb", tmp_path)
    assert said == (
        "This machine (cpu-box: Fake CPU) has no GPU to measure with, and no machine has recorded "
        f"nb: {records.rerecord_command(None, ['nb'])}"
    )
    _two_machines(tmp_path)
    said = records.where_numbers_come_from("nb", tmp_path)
    first, report, memory = said.split("\n\n")
    assert " ".join(first.split()) == (
        "This machine (cpu-box: Fake CPU) has no GPU to measure with: the experiments below "
        "replay recordings made on 4xB (it has the most GPUs of the machines that recorded this "
        "notebook; each experiment says where its numbers come from)."
    )
    assert report.startswith("machine        4xB\ncpu            4xB CPU")  # the recorder's
    assert memory.startswith("Memory: ")
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "nowhere,1xA,4xB")
    first, report, _ = records.where_numbers_come_from("nb", tmp_path).split("\n\n")
    assert "made on 1xA (COURSE_REPLAY_MACHINE chose it;" in " ".join(first.split())
    assert report.startswith("machine        1xA\n")


def test_a_replay_is_described_in_full_once_a_day_then_pointed_back_to(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.delenv("COURSE_REPLAY_MACHINE", raising=False)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    monkeypatch.setattr(records.running, "_DESCRIBED", set())
    _two_machines(tmp_path)
    first = records.run_or_replay(sentence_experiment, notebook="nb", gpus=1)
    again = records.run_or_replay(sentence_experiment, notebook="nb", gpus=1)
    out = capsys.readouterr().out.splitlines()
    assert " ".join(out[:-1]) == " ".join(first.describe().split())
    assert out[-1] == "Replayed from 4xB (recorded 2026-01-02), as said above."
    assert again.value == 7 and again.reason == first.reason
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "1xA")
    with pytest.raises(ValueError, match="needs 1 GPU.*; machines that have it: none$"):
        records.choose_recording("nb", "not_recorded", 1)


def test_a_replay_warns_when_its_params_differ_from_the_recordings(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.delenv("COURSE_REPLAY_MACHINE", raising=False)
    monkeypatch.delenv("COURSE_QUICK", raising=False)
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    fp = records.fingerprint(params_experiment)
    path = records.save("nb", "params_experiment", 2, fp=fp, params={"n": 2}, root=tmp_path)
    record = json.loads(path.read_text())
    record["header"]["machine"].update(machine="1xA", gpus=[{"name": "FAKE", "index": 0}])
    (tmp_path / "1xA" / "nb").mkdir(parents=True)
    (tmp_path / "1xA" / "nb" / path.name).write_text(json.dumps(record))
    path.unlink()
    records.write_checksums(tmp_path / "1xA")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same params: not a word
        assert records.run_or_replay(params_experiment, notebook="nb", params={"n": 2}).value == 2
    with pytest.warns(UserWarning, match=r"made with other params than these: .*on a 1xA machine"):
        records.run_or_replay(params_experiment, notebook="nb", params={"n": 3})


def test_a_live_run_is_described_by_its_fingerprint_and_params(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    run = records.run_or_replay(params_experiment, notebook="nb", gpus=0, params={"n": 5})
    assert run.live and run.value == 5 and run.saved_to is None
    assert run.header["fingerprint"] == records.fingerprint(params_experiment)
    assert run.params == {"n": 5} and run.header["experiment"] == "params_experiment"


# ---------------------------------------------------------------- one value shape


def shapes_experiment():
    return {
        "pair": (1, 2),
        3: np.float64(2.5),
        "array": np.arange(3),
        "t": timing.Timing([1.0], "m"),
    }


def test_live_values_have_the_shape_of_replayed_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    live = records.run_or_replay(shapes_experiment, notebook="nb", gpus=0).value
    path = records.save("nb", "shapes_experiment", shapes_experiment(), fp="x", root=tmp_path)
    _, replayed = records.load(path)
    assert (
        live
        == replayed
        == {"pair": [1, 2], "3": 2.5, "array": [0, 1, 2], "t": timing.Timing([1.0], "m")}
    )
    assert type(live["3"]) is float and type(live["t"]) is timing.Timing


def _one_of_each_recorded_type():
    interval = trace.Interval(
        "memcpy", "Memcpy HtoD", 1.0, 2.5, device=0, stream=7, nbytes=64, copy_kind="HtoD"
    )
    return {
        "Attachment": codec.Attachment("trace.json.gz"),
        "Timing": timing.Timing([1e-3, 2e-3], "cuda events", 1024, "copy", 4, 2, {"hold_us": 10.0}),
        "Interval": interval,
        "Profile": trace.Profile([interval], codec.Attachment("t.json.gz"), 2),
        "Outcome": distributed.Outcome(
            "gloo",
            2,
            5.0,
            ["returned", "stopped"],
            [1.5, None],
            [None, "late"],
            [[[0.1, "start"]], []],
            ["out", ""],
            ["", "err"],
            "deadline",
            0.2,
            1.0,
        ),
    }


def test_every_recorded_type_round_trips():
    values = _one_of_each_recorded_type()
    assert set(values) == set(codec.registered_types()), "add the new recorded type to this test"
    for name, value in values.items():
        assert codec.round_trip(value) == value, name
        assert type(codec.round_trip(value)) is type(value)


RAN = []


def appending_experiment(x):
    RAN.append(x)


def test_params_that_cannot_be_saved_are_refused_before_the_experiment_runs():
    with pytest.raises(TypeError, match=r"params\['x'\] is a object, which cannot be recorded"):
        records.run_or_replay(appending_experiment, notebook="nb", gpus=0, params={"x": object()})
    with pytest.raises(TypeError, match="key"):
        codec.check_recordable({("a", 1): 1})
    assert RAN == []


# ---------------------------------------------------------------- the package's floors


def _helpers_imports():
    """``{module: helpers modules it imports}``; a subpackage's modules are named with it
    (``lessons.streams``), and ``from .. import claims`` inside it names ``claims``."""
    graph = {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        parts = path.relative_to(ROOT / "helpers").with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = parts[:-1]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = list(package[: len(package) - node.level + 1])
            elif (node.module or "").startswith("helpers"):
                base = []
                node = ast.ImportFrom(
                    node.module.removeprefix("helpers").lstrip(".") or None, node.names, 1
                )
            else:
                continue
            if node.module:
                imported.add(".".join(base + node.module.split(".")[: 1 if not base else 1]))
            else:
                imported |= {".".join(base + [a.name]) for a in node.names}
        graph[name or "helpers"] = imported - {name}
    return graph


def test_the_helpers_have_no_import_circle():
    graph = _helpers_imports()
    state: dict[str, str] = {}

    def visit(module, chain):
        if state.get(module) == "open":
            raise AssertionError("import circle: " + " -> ".join(chain + [module]))
        if state.get(module) != "done":
            state[module] = "open"
            for other in graph.get(module, ()):
                visit(other, chain + [module])
            state[module] = "done"

    for module in graph:
        visit(module, [])
    assert graph["codec"] == set(), "codec is the bottom floor: it imports no other helper"
    assert graph["checks"] == set(), "checks is the bottom floor too: every helper may use it"
    assert "records" not in graph["timing"] | graph["trace"] | graph["distributed"]


def test_the_circle_check_can_fail(monkeypatch):
    monkeypatch.setattr(f"{__name__}._helpers_imports", lambda: {"a": {"b"}, "b": {"a"}})
    with pytest.raises(AssertionError, match="import circle"):
        test_the_helpers_have_no_import_circle()


# ---------------------------------------------------------------- clear errors


def test_a_corrupt_recording_names_its_file_and_the_fix(tmp_path):
    path = tmp_path / "1xA" / "nb" / "exp.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"header": ')
    with pytest.raises(
        records.RecordingError,
        match=r"exp.json is not a readable recording.*on a 1xA machine: make gpu-all "
        r"NOTEBOOKS=\"notebooks/nb.ipynb\".*git checkout",
    ):
        records.load(path)
    path.write_text('{"header": {"machine": {}}, "result": 1}')
    with pytest.raises(records.RecordingError, match="its header lacks date, commit"):
        records.load(path)
    path.write_text(
        codec.dumps(
            {"header": {k: {} for k in records.HEADER_KEYS}, "result": {"__type__": "NoSuchType"}}
        )
    )
    records.write_checksums(tmp_path / "1xA")
    with pytest.raises(
        records.RecordingError,
        match=r"exp.json: its result cannot be decoded \(unknown recorded type 'NoSuchType'.*\): "
        r"on a 1xA machine: make gpu-all NOTEBOOKS=\"notebooks/nb.ipynb\"",
    ):
        records.load(path)


def test_a_corrupt_recording_outside_a_machine_folder_still_says_how_to_fix_it(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    Path("exp.json").write_text("not json")
    with pytest.raises(
        records.RecordingError,
        match=r"^exp.json is not a readable recording .*: re-record it \(on a GPU machine with "
        r"enough GPUs: .*\) or restore it with `git checkout -- exp.json`",
    ):
        records.load("exp.json")


def test_validation_finds_impossible_figures(tmp_path):
    nb = write_notebook(tmp_path / "nb.ipynb", [SETUP, HELPER, EXPERIMENT, CALL])
    path = write_recording(tmp_path, "1xA", 1, nb)
    record = json.loads(path.read_text())
    fast = codec.encode(timing.Timing([1e-9], "cuda events", 10**9, "too fast"))
    slow_host = codec.encode(
        timing.Timing([1e-9], "host clock when .to() returns", 10**9, "returns early")
    )
    record["result"] = {
        "fast": fast,
        "host": slow_host,
        "interval": codec.encode(trace.Interval("kernel", "k", 5.0, 1.0)),
    }
    path.write_text(codec.dumps(record))
    records.write_checksums(tmp_path / "1xA")
    found = records.validate_recording(path)
    assert len(found) == 2, found
    assert any("too fast at 1000000000.0 GB/s is over 1.1 x" in p for p in found)
    assert any("from 5.0 to 1.0 us" in p for p in found)
    # a negative time cannot even be decoded into a Timing: the recording is refused as a whole
    negative = codec.encode(timing.Timing([1.0], "cuda events", label="backwards"))
    negative["samples_s"] = [-1.0]
    record["result"] = {"negative": negative}
    path.write_text(codec.dumps(record))
    records.write_checksums(tmp_path / "1xA")
    found = records.validate_recording(path)
    assert len(found) == 1 and "cannot be decoded" in found[0] and "-1.0" in found[0], found


def test_a_copy_that_fits_in_l2_is_held_to_the_cache_not_to_memory(tmp_path):
    """2xH100 (issue 36): a same-GPU copy of 16 MiB (32 MiB read plus written) ran at 3737 GB/s,
    over the H100's 3350 GB/s of HBM: it lives in the 50 MB L2. Refused only when impossible."""
    nb = write_notebook(tmp_path / "nb.ipynb", [SETUP, HELPER, EXPERIMENT, CALL])
    path = write_recording(tmp_path, "2xA", 1, nb)
    record = json.loads(path.read_text())
    h100 = {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132}

    def found(gpu: dict, nbytes: int, gbps: float, label="cuda:0 -> cuda:0") -> list[str]:
        record["header"]["machine"]["gpus"] = [dict(gpu, index=0), dict(gpu, index=1)]
        t = timing.Timing([nbytes / gbps / 1e9], "cuda events", nbytes, label)
        record["result"] = {"copy": codec.encode(t)}
        path.write_text(codec.dumps(record))
        records.write_checksums(path.parents[1])
        return records.validate_recording(path, "2xA")

    assert found(h100, 32 * 2**20, 3737.2) == []  # a header without l2_bytes: any cache may hold it
    assert found(dict(h100, l2_bytes=50 * 2**20), 32 * 2**20, 3737.2) == []
    (impossible,) = found(dict(h100, l2_bytes=50 * 2**20), 32 * 2**20, 60_000.0)
    assert "impossible even from cache" in impossible and "at most 50688 GB/s" in impossible
    assert "its 32 MiB fit in the L2 cache (50 MiB)" in impossible
    (as_big,) = found(dict(h100, l2_bytes=50 * 2**20), 50 * 2**20, 60_000.0, label="")
    assert as_big.startswith(f"{path}: a timing at 60000.0 GB/s is impossible even from cache")
    assert "its 50 MiB fit in the L2 cache (50 MiB)" in as_big  # as big as the cache still fits
    (too_big,) = found(dict(h100, l2_bytes=50 * 2**20), 2 * 2**30, 3737.2)
    assert "over 1.1 x the GPUs' memory bandwidth (3350 GB/s)" in too_big
    assert "too many for the L2 cache (50 MiB)" in too_big
    assert found(dict(h100, l2_bytes=50 * 2**20), 2 * 2**30, 3300.0) == []


# ---------------------------------------------------------------- the flat export


def test_replayed_claims_are_exported_and_live_ones_are_not(tmp_path, monkeypatch, course):
    from helpers import claims

    nb, root = course
    out = tmp_path / "claims.jsonl"
    monkeypatch.setenv("COURSE_INDEX_OUT", str(out))
    header = records.read_header(root / "2xB" / "nb" / "exp.json")
    table = claims.ClaimsTable("nb")
    table.add(
        "replayed claim",
        source="s",
        measured="3 GB/s",
        holds=True,
        run=records.Run(1, False, header),
    )
    table.add("live claim", source="s", measured="x", holds=False, run=records.Run(1, True, header))
    table.add("no run", source="s", measured="x", holds=None)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["kind"], r["machine"], r["name"], r["verdict"], r["measured"]) for r in rows] == [
        ("claim", "2xB", "replayed claim", "holds", "3 GB/s")
    ]
    assert set(records.index_row({"machine": {}})) <= set(rows[0])
    row = records.index_row({"machine": {}, "commit": "abc1234"}, kind="figure")
    assert row["commit"] == "abc1234"  # every row has the same columns, unset ones None
    assert {k: row[k] for k in ("name", "value", "unit", "spread", "verdict")} == dict.fromkeys(
        ("name", "value", "unit", "spread", "verdict")
    )
    machine = {
        "machine": "1xA",
        "gpus": [{"name": "NVIDIA A"}],
        "driver": "550.1",
        "torch": "2.5",
        "cuda": "12.4",
        "nccl": "2.21.5",
    }
    header = {"machine": machine, "date": "2026-01-02", "notebook": "nb", "experiment": "e"}
    row = records.index_row(header, kind="claim", name="c", value=1.5)
    assert row == {
        "kind": "claim",
        "machine": "1xA",
        "gpu": "NVIDIA A",
        "driver": "550.1",
        "torch": "2.5",
        "cuda": "12.4",
        "nccl": "2.21.5",
        "date": "2026-01-02",
        "commit": None,
        "notebook": "nb",
        "experiment": "e",
        "name": "c",
        "value": 1.5,
        "unit": None,
        "spread": None,
        "verdict": None,
    }
    assert records.rerecord_command(None, ["nb"]).startswith("on a GPU machine with enough GPUs:")


def test_the_index_holds_every_timing_sorted_and_reads_back(tmp_path, course):
    nb, root = course
    path = root / "1xA" / "nb" / "exp.json"
    record = json.loads(path.read_text())
    record["result"]["copy"] = codec.encode(
        timing.Timing([2e-3, 1e-3, 3e-3], "cuda events", 2 * 10**9, "copy")
    )
    record["result"]["alloc"] = codec.encode(
        timing.Timing([1e-6], "synchronised host clock", 10**9, "alloc")
    )
    path.write_text(codec.dumps(record))
    records.write_checksums(root / "1xA")
    rows = records.figure_rows(root)
    assert [(r["name"], r["label"], r["value"], r["unit"], r["bytes"]) for r in rows] == [
        ("['alloc']", "alloc", 1e-6, "s", 10**9),
        ("['copy']", "copy", 1000.0, "GB/s", 2 * 10**9),
    ]
    records.write_index(rows + [{"kind": "claim", "machine": "1xA"}], root)
    assert records.read_index(root, kind="figure") == rows
    assert records.read_index(root, kind="claim") == [{"kind": "claim", "machine": "1xA"}]


def test_replay_all_prefers_the_machine_then_the_most_gpus(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("replay_all", ROOT / "tools" / "replay_all.py")
    replay_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay_all)
    monkeypatch.setattr(records, "recorded_machine_names", lambda root=None: ["1xH", "2xH", "4xH"])
    assert replay_all.preference("1xH") == "1xH,4xH,2xH"
    assert replay_all.differences([{"a": 1}], [{"a": 1}]) == []
    assert replay_all.differences([{"a": 1}], [{"a": 2}]) == ['- {"a": 1}', '+ {"a": 2}']


def test_a_gpus_count_the_reader_cannot_see_is_a_problem(course):
    nb, root = course
    write_notebook(nb, [SETUP, HELPER, EXPERIMENT, CALL.replace("gpus=1", "gpus=N_GPUS")])
    assert any("gpus= must be a literal number" in p for p in problems(nb, root))


# ---------------------------------------------------------------- gaps a machine cannot fill


def test_a_gap_is_declared_with_its_reason_and_only_while_it_is_one(course, tmp_path):
    nb, root = course
    write_notebook(
        nb,
        [
            SETUP,
            HELPER,
            EXPERIMENT,
            CALL,
            "def exp2():\n    return 1",
            "records.run_or_replay(exp2, notebook=NOTEBOOK, gpus=1)",
        ],
    )
    write_recording(root, "2xB", 2, nb, name="exp2")
    assert problems(nb, root) == [
        f"{root}/1xA/nb/exp2.json: missing; 1xA has the notebook's other recordings"
    ]
    (root / "1xA" / "gaps.json").write_text(
        json.dumps({"nb/exp2": "added after 1xA's last run; none lent since"})
    )
    assert problems(nb, root) == []
    assert records.recording_gaps(root / "1xA") == {
        "nb/exp2": "added after 1xA's last run; none lent since"
    }
    assert records.validate_machine_folder(root / "1xA", "1xA") == []  # gaps.json belongs there
    write_recording(root, "1xA", 1, nb, name="exp2")  # recorded after all: the line must go
    assert problems(nb, root) == [
        f"{root}/1xA/gaps.json: lists nb/exp2, which is recorded now: remove that line"
    ]
    write_notebook(nb, [SETUP, HELPER, EXPERIMENT, CALL])  # and a gap of an experiment that is gone
    (root / "1xA" / "nb" / "exp2.json").unlink()
    (root / "2xB" / "nb" / "exp2.json").unlink()
    assert problems(nb, root) == [
        f"{root}/1xA/gaps.json: lists nb/exp2, which the notebook no longer has"
    ]


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps(["nb/exp"]), json.dumps({"nb/exp": ""}), json.dumps({"exp": "why"})],
)
def test_a_malformed_gaps_file_is_a_problem(course, content):
    nb, root = course
    (root / "1xA" / "gaps.json").write_text(content)
    assert len(problems(nb, root)) == 1 and "gaps.json" in problems(nb, root)[0]
    assert any("gaps.json" in p for p in records.validate_machine_folder(root / "1xA", "1xA"))
