import dataclasses
import json
import re
import sys
import types
from pathlib import Path

import pytest

from helpers import config, hardware, records, timing
from helpers.codec import Attachment


def experiment_a(n=3):
    # a comment that does not change the fingerprint
    return {"values": list(range(n))}


SOURCE = """
@decorator
def experiment_a(n=3):
    return {"values": list(range(n))}
"""


def fake_gpu_machine(path, gpus=1, name="1xFAKE-GPU"):
    """Turn a recording saved on this CPU machine into one that claims GPUs (tests only)."""
    record = json.loads(path.read_text())
    record["header"]["machine"]["gpus"] = [{"name": "FAKE GPU", "index": i} for i in range(gpus)]
    record["header"]["machine"]["machine"] = name
    dest = path.parents[2] / name / path.parent.name / path.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(record))
    for extra in path.parent.glob(f"{path.stem}.*"):
        if extra != path:
            extra.replace(dest.parent / extra.name)
    path.unlink()
    records.write_checksums(dest.parents[1])  # a recording changed on purpose
    return dest


def test_fingerprint_ignores_comments_and_decorators_but_not_code():
    assert records.fingerprint(experiment_a) == records.fingerprint_source(SOURCE)
    assert records.fingerprint_source(SOURCE) != records.fingerprint_source(
        SOURCE.replace("n=3", "n=4")
    )
    with pytest.raises(ValueError):
        records.fingerprint_source("x = 1")
    with pytest.raises(TypeError):
        records.fingerprint(print)


def test_save_and_load_round_trip(tmp_path):
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(b"trace")
    value = {
        "t": timing.Timing([1.0, 2.0], "cuda events", 8),
        "pair": (1, 2),
        "file": Attachment(str(trace)),
    }
    path = records.save(
        "00_nb", "exp", value, fp="abc", params={"sizes": [1, 2]}, root=tmp_path / "r"
    )
    header, loaded = records.load(path)
    assert header["fingerprint"] == "abc" and header["params"] == {"sizes": [1, 2]}
    assert header["experiment"] == "exp" and header["date"]
    assert loaded["t"] == value["t"]
    assert loaded["pair"] == [1, 2]
    assert open(loaded["file"].path, "rb").read() == b"trace"
    assert loaded["file"].path != str(trace)


def test_unrecordable_values_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot be recorded"):
        records.save("nb", "x", {"f": object()}, fp="a", root=tmp_path)


def test_an_unrecordable_value_is_named_by_its_position():
    import numpy as np

    from helpers import codec

    with pytest.raises(
        TypeError, match=r"^params\['sizes'\]\[1\] is a set, which cannot be recorded"
    ):
        codec.encode({"sizes": [1, {2}]}, None, "params")
    # an object array's elements keep the array's position (numbers become plain lists)
    odd = np.array([1, object()], dtype=object)
    with pytest.raises(TypeError, match=r"^result\['a'\]\[1\] is a object, which cannot"):
        codec.encode({"a": odd})
    assert codec.encode({"a": np.arange(3), "b": (np.float32(0.5),)}) == {
        "a": [0, 1, 2],
        "b": [0.5],
    }
    t = timing.Timing([1.0], "m", label={1})
    with pytest.raises(TypeError, match=r"^params\['t'\]\.label is a set, which cannot"):
        codec.encode({"t": t}, None, "params")
    assert codec.encode({"p": Path("a") / "b.json", 2: None}) == {"p": "a/b.json", "2": None}

    @dataclasses.dataclass
    class Unregistered:
        x: int = 1

    with pytest.raises(
        TypeError,
        match=r"^result\[0\] is a Unregistered, which is not registered for recordings: "
        r"decorate it with @codec.register$",
    ):
        codec.encode([Unregistered()])
    with pytest.raises(
        TypeError, match=r"^result\['a'\] has the key \(1, 2\): recorded dicts need str or number"
    ):
        codec.encode({"a": {(1, 2): 3}})

    @dataclasses.dataclass
    class Timing:  # the name of a registered type, but another class: refused too
        x: int = 1

    with pytest.raises(TypeError, match="^result is a Timing, which is not registered"):
        codec.encode(Timing())
    with pytest.raises(TypeError, match="has the key True"):
        codec.encode({True: 1})
    with pytest.raises(TypeError, match="only dataclasses can be registered"):
        codec.register(int)


def test_cpu_experiment_runs_live_and_is_not_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_RECORD", "1")
    run = records.run_or_replay(experiment_a, notebook="nb", gpus=0, params={"n": 2})
    assert run.live and run.value == {"values": [0, 1]} and run.saved_to is None
    assert "Measured live" in capsys.readouterr().out
    assert not list(tmp_path.rglob("*.json"))


def test_a_run_says_where_its_numbers_come_from_in_one_write(tmp_path, monkeypatch):
    writes: list[str] = []
    monkeypatch.setattr(sys, "stdout", types.SimpleNamespace(write=writes.append, flush=list))
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    records.run_or_replay(experiment_a, notebook="nb", gpus=0, params={"n": 2})
    assert len(writes) == 1 and writes[0].startswith("Measured live") and writes[0].endswith(".\n")


def test_replay_says_where_the_numbers_come_from(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_REPLAY", "1")
    path = records.save(
        "nb",
        "experiment_a",
        {"values": [7]},
        fp=records.fingerprint(experiment_a),
        params={"n": 1},
        root=tmp_path,
    )
    fake_gpu_machine(path, gpus=2, name="2xFAKE-GPU")
    run = records.run_or_replay(experiment_a, notebook="nb", gpus=2, params={"n": 99})
    assert not run.live and run.value == {"values": [7]}
    assert run.params == {"n": 1} and run.machine == "2xFAKE-GPU"
    out = capsys.readouterr().out
    assert out.startswith("Replayed from 2xFAKE-GPU, not measured here")
    lines = out.rstrip("\n").splitlines()
    assert len(lines) > 1 and all(len(line) <= records.DESCRIBE_WIDTH for line in lines), lines
    assert " ".join(lines).startswith(
        f"Replayed from 2xFAKE-GPU, not measured here: {run.reason}. Recorded there ("
    )
    assert " ".join(lines) == " ".join(run.describe().split())  # wrapped, not reworded


@pytest.mark.parametrize("pad", range(0, 12))
def test_a_wrapped_sentence_never_parts_a_size_from_its_unit(pad):
    sentence = (
        "up to " + "w" * (records.DESCRIBE_WIDTH - 12 + pad) + " 4.04 GiB and 86 MiB and 7 B."
    )
    lines = records.running._filled(sentence).splitlines()
    assert " ".join(lines) == sentence and max(map(len, lines)) <= records.DESCRIBE_WIDTH
    assert all(not re.match(r"[KMG]?i?B\b", line) for line in lines[1:]), lines


def test_replay_prefers_the_chosen_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_REPLAY", "1")
    fp = records.fingerprint(experiment_a)
    for name in ("1xA", "1xB"):
        p = records.save("nb", "experiment_a", {"m": name}, fp=fp, root=tmp_path)
        fake_gpu_machine(p, name=name)
    # as many GPUs each, recorded the same second: the name decides, so the default is stable
    assert records.run_or_replay(experiment_a, notebook="nb").value == {"m": "1xB"}
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "1xA")
    assert records.run_or_replay(experiment_a, notebook="nb").value == {"m": "1xA"}


def test_replay_without_a_recording_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_REPLAY", "1")
    with pytest.raises(ValueError, match="make gpu-all"):
        records.run_or_replay(experiment_a, notebook="nb", gpus=64)


def test_stale_recording_warns_on_replay(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_REPLAY", "1")
    fake_gpu_machine(records.save("nb", "experiment_a", 1, fp="old", root=tmp_path))
    with pytest.warns(UserWarning, match="different version"):
        records.run_or_replay(experiment_a, notebook="nb")


def test_bad_arguments():
    with pytest.raises(TypeError, match="experiment function"):
        records.run_or_replay("experiment_a", notebook="nb")
    with pytest.raises(TypeError, match="notebook"):
        records.run_or_replay(experiment_a, notebook=None)
    with pytest.raises(ValueError, match="number of GPUs"):
        records.run_or_replay(experiment_a, notebook="nb", gpus=-1)
    with pytest.raises(TypeError, match="params"):
        records.run_or_replay(experiment_a, notebook="nb", gpus=0, params=[1])


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


def problem_texts(notebook, root):
    return [p.text for p in records.check_recordings([notebook], root)]


def test_stale_and_missing_recordings_are_found(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_QUICK", raising=False)  # recordings are made at full size
    nb = tmp_path / "nb.ipynb"
    write_notebook(
        nb,
        [
            "%matplotlib inline\ndef experiment_a(n=3):\n    return {'values': list(range(n))}",
            "def on_cpu():\n    return 1",
            "run = records.run_or_replay(experiment_a, notebook=NOTEBOOK, gpus=1)\n"
            "cpu = records.run_or_replay(on_cpu, notebook=NOTEBOOK, gpus=0)",
        ],
    )
    found = records.experiments_in_notebook(nb)
    assert (found["experiment_a"].gpus, found["experiment_a"].fingerprint) == (
        1,
        records.fingerprint(experiment_a),
    )
    assert found["on_cpu"].gpus == 0
    root = tmp_path / "results"
    assert problem_texts(nb, root) == ["nb/experiment_a: no machine has recorded it"]
    fake_gpu_machine(
        records.save("nb", "experiment_a", 1, fp=records.fingerprint(experiment_a), root=root)
    )
    assert problem_texts(nb, root) == []
    fake_gpu_machine(records.save("nb", "experiment_a", 1, fp="other", root=root), name="1xOTHER")
    found = problem_texts(nb, root)
    assert len(found) == 1 and "stale" in found[0] and "1xOTHER" in found[0]
    assert [m["machine"] for m in records.recorded_machines(root)] == ["1xFAKE-GPU", "1xOTHER"]


def test_calls_that_cannot_be_checked_are_found_with_their_reasons(tmp_path):
    nb = tmp_path / "nb.ipynb"
    write_notebook(
        nb,
        [
            "import os\nfrom os import path as osp\nN = 2\n"
            "def experiment_a(n=3):\n    return {'values': list(range(n))}",
            "def uses_imports():\n    import math as m\n    return m.pi, os.sep, osp.sep",
            "k = records.run_or_replay(helpers.f, notebook=NOTEBOOK, name='other_name', gpus=N)\n"
            "s = records.run_or_replay(experiment_a, notebook=NOTEBOOK, params={'n': {1, 2}})\n"
            "u = records.run_or_replay(uses_imports, notebook=NOTEBOOK, gpus=0, params={'n': N})",
        ],
    )
    found = records.experiments_in_notebook(nb)
    assert set(found) == {"other_name", "experiment_a", "uses_imports"}
    other = found["other_name"]
    assert (other.name, other.function, other.gpus, other.fingerprint, other.params) == (
        "other_name",
        "helpers.f",
        -1,
        None,
        None,
    )
    assert other.problems == [
        "gpus= must be a literal number",
        "the experiment `helpers.f` is not a function defined with def at the top of a cell, so "
        "its source cannot be checked",
    ]
    (problem,) = found["experiment_a"].problems
    assert found["experiment_a"].params is None
    assert problem.startswith(
        "its params cannot be worked out from the notebook (params['n'] is a set, which cannot be "
        "recorded"
    )
    assert problem.endswith(
        "build them from literals, config.pick(...) and constants defined in the notebook"
    )
    # imported modules (as themselves, by alias, or from a package) are not notebook variables
    used = found["uses_imports"]
    assert used.problems == [] and used.params == {"n": 2} and used.gpus == 0


def test_free_names_are_the_names_a_function_reads_but_does_not_bind():
    from helpers.records.fingerprints import definition_node, free_names

    source = """
def f(a, *args, b=1, **kw):
    import os.path
    import numpy as np
    from math import pi as PI, tau
    x = a + b + len(args) + len(kw)
    def inner():
        return y
    class C:
        pass
    try:
        pass
    except ValueError as err:
        print(err)
    for i in range(3):
        x += i
    return x, os, np, PI, tau, inner, C, SIZE
"""
    assert free_names(definition_node(source)) == {
        "len",
        "y",
        "ValueError",
        "print",
        "range",
        "SIZE",
    }


def test_fingerprint_does_not_depend_on_the_python_version():
    """Recordings are made on the GPU machines' Python 3.12 and checked here on 3.11: the canonical
    form leaves out the empty fields that newer Pythons add (type_params=[] since 3.12). The
    expected value was computed identically with Python 3.11, 3.12 and 3.13."""
    source = 'def f(x: int = 1) -> int:\n    return f"{x!r:>4}"'
    assert records.fingerprint_source(source) == "7c0b98c3e55254f4"
    canonical = records.fingerprints._canonical(records.fingerprints.definition_node(source))
    assert "type_params" not in canonical and "decorator_list" not in canonical


def test_a_recording_loads_without_importing_the_modules_of_its_types():
    """A maintainer reading a recording with records.load alone gets Timing and Profile back."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    recording = next(
        iter(sorted(root.glob("results/*/00_start_here/first_bandwidth_curve.json"))), None
    )
    if recording is None:
        pytest.skip("no recording of 00_start_here yet")
    code = (
        f"from helpers import records; h, v = records.load({str(recording)!r}); "
        "print(type(v[0]).__name__, h['experiment'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["Timing", "first_bandwidth_curve"]


def test_a_machine_with_fewer_gpus_than_needed_replays_and_one_with_enough_runs_live(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.delenv("COURSE_REPLAY", raising=False)
    monkeypatch.delenv("COURSE_RECORD", raising=False)
    path = records.save(
        "nb",
        "experiment_a",
        {"values": [7]},
        fp=records.fingerprint(experiment_a),
        params={"n": 1},
        root=tmp_path,
    )
    fake_gpu_machine(path, gpus=2, name="2xFAKE-GPU")
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.setattr(records.running, "_this_machine_name", lambda: "1xFAKE-GPU")
    monkeypatch.setattr(hardware, "memory_in_use", lambda: {})
    monkeypatch.setattr(hardware, "free_memory", lambda baseline: {})
    run = records.run_or_replay(experiment_a, notebook="nb", gpus=2, params={"n": 99})
    assert not run.live and run.value == {"values": [7]} and run.machine == "2xFAKE-GPU"
    assert "this machine has 1 GPU and the experiment needs 2" in capsys.readouterr().out
    live = records.run_or_replay(experiment_a, notebook="nb", gpus=1, params={"n": 2})
    assert live.live and live.value == {"values": [0, 1]}
    monkeypatch.setattr(hardware, "gpu_count", lambda: 2)
    assert records.run_or_replay(experiment_a, notebook="nb", gpus=2, params={"n": 2}).live


def test_a_live_gpu_run_is_limited_recorded_and_says_where_unless_quick(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_RECORD", "1")
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "0.5")
    for name in ("COURSE_REPLAY", "COURSE_QUICK", "COURSE_REPLAY_MACHINE"):
        monkeypatch.delenv(name, raising=False)
    limits = []
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.setattr(hardware, "limit_gpu_memory", limits.append)
    monkeypatch.setattr(hardware, "memory_in_use", lambda: {})
    monkeypatch.setattr(hardware, "free_memory", lambda baseline: {})
    run = records.run_or_replay(experiment_a, notebook="nb", gpus=1, params={"n": 2})
    assert limits == [2**29]  # COURSE_GPU_MEMORY_GIB, in bytes
    assert run.live and run.saved_to is not None and run.saved_to.is_file()
    assert records.load(run.saved_to)[1] == {"values": [0, 1]}
    assert capsys.readouterr().out.rstrip().endswith(f" Recorded to {run.saved_to}.")
    run.saved_to.unlink()
    monkeypatch.setenv("COURSE_QUICK", "1")  # small sizes are never recorded
    assert records.run_or_replay(experiment_a, notebook="nb", gpus=1).saved_to is None
    assert "Recorded to" not in capsys.readouterr().out
    monkeypatch.delenv("COURSE_QUICK")
    monkeypatch.setenv("COURSE_REPLAY", "1")  # replay asked for: GPU experiments replay ...
    fake_gpu_machine(
        records.save(
            "nb", "experiment_a", {"v": 1}, fp=records.fingerprint(experiment_a), root=tmp_path
        )
    )
    replayed = records.run_or_replay(experiment_a, notebook="nb", gpus=1)
    assert not replayed.live and replayed.reason.startswith("COURSE_REPLAY=1 asks for replay; ")
    assert records.run_or_replay(experiment_a, notebook="nb", gpus=0).live  # ... CPU ones run


def test_a_stale_recordings_warning_points_at_the_cell_that_replays_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_REPLAY", "1")
    fake_gpu_machine(records.save("nb", "experiment_a", 1, fp="old", root=tmp_path))
    with pytest.warns(UserWarning, match="different version of experiment_a") as warned:
        records.run_or_replay(experiment_a, notebook="nb")
    assert warned[0].filename == __file__


def test_a_gpu_machine_states_its_own_footprint_first(tmp_path, monkeypatch):
    root = tmp_path / "results"
    for name in ("1xA", "4xB"):
        (root / name / "nb").mkdir(parents=True)
        (root / name / "nb" / "e.json").write_text("{}")
        gib = {"1xA": 1, "4xB": 4}[name]
        (root / name / records.FOOTPRINTS).write_text(
            json.dumps({"full": {"nb": {"e": {"gpu": [gib * 2**30], "pinned": 0, "host": 0}}}})
        )
    here = {"machine": "1xA", "gpus": []}
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.setattr(hardware, "describe", lambda: here)
    report, memory = records.where_numbers_come_from("nb", root).split("\n\n")
    assert report == hardware.report(here)
    assert memory.startswith("Memory, as 1xA measured it live: at full size up to 1 GiB")


def test_validate_machine_folder_accepts_recordings_their_attachments_and_gaps_only(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(
        "COURSE_QUICK", "0"
    )  # make test runs in quick mode; recordings are full size
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(b"trace")
    path = fake_gpu_machine(
        records.save("nb", "exp", {"file": Attachment(str(trace))}, fp="abc", root=tmp_path / "r")
    )
    folder = path.parents[1]
    assert len(list(path.parent.iterdir())) == 2  # the recording and its trace
    (folder / records.GAPS_FILE).write_text("{}")
    assert records.validate_machine_folder(folder, folder.name) == []
    (path.parent / "stray.txt").write_text("x")
    (path.parent / "inner").mkdir()
    (path.parent / "link.json").symlink_to(path)
    problems = records.validate_machine_folder(folder, folder.name)
    assert any("stray.txt: neither a recording nor a file one attaches" in p for p in problems)
    assert any("inner: a folder inside a notebook's recordings" in p for p in problems)
    assert any("link.json: a link" in p for p in problems)
    assert records.validate_machine_folder(tmp_path / "empty", "x")[0].endswith(
        "holds no recording (<notebook>/<experiment>.json)"
    )


def test_recorded_runs_are_keyed_by_the_machine_that_recorded_them():
    """The lessons' tests run on every machine of ``recorded_runs``: a key that were not the
    machine's folder would fold the machines into one and test only the last of them."""
    root = config.results_dir()
    for notebook, name in (
        ("01_pinned_memory", "copy_bandwidth"),
        ("06_nccl_point_to_point_and_collectives", "bandwidth"),
    ):
        runs = records.recorded_runs(notebook, name)
        folders = {p.parent.parent.name for p in root.glob(f"*/{notebook}/{name}.json")}
        assert set(runs) == folders and len(folders) >= 1
        assert all(run.machine == machine for machine, run in runs.items())


def test_hidden_folders_are_never_read_as_recorded_machines(tmp_path, monkeypatch):
    """An unpack's leftovers (one claiming 8 GPUs) and any hidden folder beside the machines:
    no lookup reads them, and the listing deletes the leftovers."""
    from pathlib import Path

    real = Path(__file__).resolve().parent.parent / "results" / "1xNVIDIA-H200"
    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "00_start_here.ipynb"
    root = tmp_path / "results"
    (root / "1xNVIDIA-H200").mkdir(parents=True)
    import shutil

    shutil.copytree(real / "00_start_here", root / "1xNVIDIA-H200" / "00_start_here")
    records.write_checksums(root / "1xNVIDIA-H200")
    hidden = [".incoming-8xNVIDIA-H200-da09a5c7", ".old-8xNVIDIA-H200-0123abcd", ".hidden"]
    for name in hidden:
        shutil.copytree(real / "00_start_here", root / name / "00_start_here")
        for path in (root / name / "00_start_here").glob("*.json"):
            record = json.loads(path.read_text())
            record["header"]["machine"]["gpus"] *= 8
            record["header"]["machine"]["machine"] = name
            path.write_text(json.dumps(record))
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    assert records.recorded_machine_names(root) == ["1xNVIDIA-H200"]
    assert sorted(p.name for p in root.iterdir()) == [".hidden", "1xNVIDIA-H200"]
    first = sorted((real / "00_start_here").glob("*.json"))[0].stem
    assert [p.parts[-3] for p in records.recordings_of("00_start_here", first, 0, root)] == [
        "1xNVIDIA-H200"
    ]
    assert {row["machine"] for row in records.figure_rows(root)} == {"1xNVIDIA-H200"}
    problems = records.check_recordings([notebook], root)
    assert not [p for p in problems if p.machine and p.machine.startswith(".")]
    assert "hidden" not in records.format_problems(problems)
    assert "1xNVIDIA-H200" in records.where_numbers_come_from("00_start_here", root)
    assert ".hidden" not in records.where_numbers_come_from("00_start_here", root)
    assert records.gap_machines("00_start_here", first, root) == set()
    assert [m["machine"] for m in records.recorded_machines(root)] == ["1xNVIDIA-H200"]


def test_a_live_experiment_notes_its_footprint_and_gpu_run_gathers_it(tmp_path, monkeypatch):
    lines = tmp_path / "fp.jsonl"
    monkeypatch.setenv("COURSE_FOOTPRINT_OUT", str(lines))
    monkeypatch.setenv("COURSE_QUICK", "1")
    records.run_or_replay(experiment_a, notebook="nb", gpus=0, params={"n": 3})
    (row,) = map(json.loads, lines.read_text().splitlines())
    assert (row["notebook"], row["experiment"], row["quick"]) == ("nb", "experiment_a", True)
    assert row["gpu"] == [] and row["pinned"] is None
    assert row["host"] is None or row["host"] > 10 * 2**20  # a Python with torch imported
    machine = tmp_path / "results" / "2xA"
    records.gather_footprints(lines, machine)
    more = tmp_path / "more.jsonl"
    more.write_text(
        json.dumps(
            {
                "notebook": "nb",
                "experiment": "big",
                "quick": False,
                "gpu": [3 * 2**30, 5 * 2**30],
                "pinned": 2**30,
                "host": 4 * 2**30,
            }
        )
        + "\n"
        + json.dumps(
            {
                "notebook": "nb",
                "experiment": "small",
                "quick": True,
                "gpu": [48 * 2**20],
                "pinned": 16 * 2**20,
                "host": 3 * 2**30,
            }
        )
        + "\n"
    )
    records.gather_footprints(more, machine)  # merged with what was there
    (machine / "nb").mkdir()
    (machine / "nb" / "big.json").write_text("{}")  # a recorded machine: it has recordings
    assert set(json.loads((machine / records.FOOTPRINTS).read_text())) == {"full", "quick"}
    full = records.notebook_footprint(machine, "nb", "full")
    assert full == hardware.Footprint((5 * 2**30,), 2**30, 4 * 2**30)  # the largest GPU's
    said = records.footprint_sentence("nb", "2xA", tmp_path / "results")
    assert said.startswith("Memory, as 2xA measured it live: at full size up to 5 GiB on one GPU")
    assert "1 GiB of pinned host memory and 4 GiB for the notebook's process" in said
    # less than a GiB in the unit it needs, not "0.0 GiB"
    assert "in quick mode up to 48 MiB on one GPU, 16 MiB of pinned host memory and 3 GiB" in said
    assert "no machine has measured" in records.footprint_sentence(
        "other", None, tmp_path / "results"
    )
    for name in ("1xB", "10xC", "xD"):  # the most GPUs counts, by number, not by spelling
        (tmp_path / "results" / name / "nb").mkdir(parents=True)
        (tmp_path / "results" / name / "nb" / "big.json").write_text("{}")
        (tmp_path / "results" / name / records.FOOTPRINTS).write_text(
            (machine / records.FOOTPRINTS).read_text()
        )
    for here, chosen in ((None, "10xC"), ("unrecorded", "10xC"), ("1xB", "1xB"), ("xD", "xD")):
        said = records.footprint_sentence("nb", here, tmp_path / "results")
        assert said.startswith(f"Memory, as {chosen} measured it live: "), (here, said)


def test_a_broken_footprints_file_is_named_with_its_fix(tmp_path):
    machine = tmp_path / "2xA"
    machine.mkdir()
    (machine / records.FOOTPRINTS).write_text(
        '{"full": {"nb": {"e": {"gpu": [-1], "pinned": 0, "host": 0}}}}'
    )
    with pytest.raises(ValueError, match="full/nb/e is not gpu, pinned and host in bytes"):
        records.notebook_footprint(machine, "nb", "full")
    (machine / records.FOOTPRINTS).write_text("{")
    with pytest.raises(ValueError, match="re-record the machine.*not JSON"):
        records.notebook_footprint(machine, "nb", "full")


@pytest.mark.parametrize("value", ["0", "-4", "x", "inf", "nan"])
def test_a_gpu_memory_limit_must_be_a_positive_number_of_gib(monkeypatch, value):
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", value)
    with pytest.raises(
        ValueError, match="COURSE_GPU_MEMORY_GIB=.* is not a positive number of GiB"
    ):
        config.gpu_memory_limit_bytes()
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "16")
    assert config.gpu_memory_limit_bytes() == 16 * 2**30


def test_a_gpu_memory_limit_may_be_a_fraction_of_a_gib(monkeypatch):
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", " 0.5 ")
    assert config.gpu_memory_limit_bytes() == 2**29
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "1")
    assert config.gpu_memory_limit_bytes() == 2**30
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "")
    assert config.gpu_memory_limit_bytes() is None
    monkeypatch.setenv("COURSE_GPU_MEMORY_GIB", "-0.5")
    with pytest.raises(ValueError, match=r"COURSE_GPU_MEMORY_GIB='-0.5' .* set it to e.g. 16"):
        config.gpu_memory_limit_bytes()


def _copied_results(tmp_path, machine="1xNVIDIA-H200", notebook="00_start_here"):
    """``results/<machine>/<notebook>`` copied under ``tmp_path``; returns the results root."""
    import shutil
    from pathlib import Path

    real = Path(__file__).resolve().parent.parent / "results" / machine / notebook
    root = tmp_path / "results"
    shutil.copytree(real, root / machine / notebook)
    return root


def test_recorded_runs_include_a_machine_without_gpus_and_say_whose_recording(tmp_path):
    root = _copied_results(tmp_path)
    path = root / "1xNVIDIA-H200" / "00_start_here" / "gpu_machine_report.json"
    record = json.loads(path.read_text())
    record["header"]["machine"]["gpus"] = []  # a CPU-only experiment's machine
    path.write_text(json.dumps(record))
    records.write_checksums(root / "1xNVIDIA-H200")
    (run,) = records.recorded_runs("00_start_here", "gpu_machine_report", root).values()
    assert "the recording of 1xNVIDIA-H200" in run.describe()


def test_a_gpu_machine_states_the_footprints_of_the_results_folder_it_is_given(
    tmp_path, monkeypatch
):
    root = _copied_results(tmp_path)
    here = records.recorded_machines(root)[0]
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.setattr(hardware, "describe", lambda: here)
    said = records.where_numbers_come_from("00_start_here", root)
    assert "no machine has measured what 00_start_here needs yet" in said  # none in this root


def test_a_notebook_with_shell_lines_indented_magics_and_no_gpus_is_read(tmp_path):
    nb = tmp_path / "nb.ipynb"
    write_notebook(
        nb,
        [
            "!pip install nothing\ndef experiment_a(n=3):\n    return {'values': list(range(n))}",
            "for _ in ():\n    pass\n    %time x = 1\n"
            "run = records.run_or_replay(experiment_a, notebook=NOTEBOOK)",
        ],
    )
    found = records.experiments_in_notebook(nb)["experiment_a"]
    assert (found.gpus, found.fingerprint) == (1, records.fingerprint(experiment_a))  # default 1


def experiment_countdown(n=3):
    return [] if n == 0 else [n, *experiment_countdown(n - 1)]


def test_a_recursive_experiment_is_not_its_own_helper():
    import inspect

    source = inspect.getsource(experiment_countdown)
    assert records.fingerprint(experiment_countdown) == records.fingerprint_source(source, {})


def test_the_measuring_code_hash_follows_code_not_docstrings(tmp_path, monkeypatch):
    from helpers.records import fingerprints

    module = tmp_path / "timing.py"
    monkeypatch.setattr(fingerprints, "_measuring_files", lambda: [module])

    def hashed(text):
        module.write_text(text)
        return records.measuring_code_hash()

    plain = hashed('def f():\n    """Seconds."""\n    return 1\n')
    assert hashed('def f():\n    """Milliseconds, now."""\n    return 1\n') == plain
    assert hashed('def f():\n    """Seconds."""\n    return 2\n') != plain


def test_replacing_folders_interrupted_says_whether_the_new_ones_are_in_place(
    tmp_path, monkeypatch
):
    import os

    from helpers.records import machines

    results = tmp_path / "results"
    (results / "1xA").mkdir(parents=True)
    (results / "1xA" / "old.txt").write_text("old")
    new = tmp_path / "new"
    new.mkdir()
    (new / "new.txt").write_text("new")
    real_unlink = os.unlink

    def stop(*args):
        raise KeyboardInterrupt("stop")

    with monkeypatch.context() as m:  # stopped at the first rename: rolled back
        m.setattr(machines.os, "rename", stop)
        with pytest.raises(records.Interrupted) as info:
            records.replace_folders(results, {results / "1xA": new})
    assert str(info.value) == "KeyboardInterrupt: stop; rolled back: results/1xA are as they were"
    assert not info.value.committed
    assert [p.name for p in (results / "1xA").iterdir()] == ["old.txt"]

    def unlink_then_stop(path, *args, **kwargs):  # the commit happened, then the interrupt
        real_unlink(path, *args, **kwargs)
        if str(path).endswith(machines.JOURNAL):
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(machines.os, "unlink", unlink_then_stop)
        with pytest.raises(records.Interrupted) as info:
            records.replace_folders(results, {results / "1xA": new})
    assert str(info.value) == (
        "KeyboardInterrupt after the new folders were in place: results/1xA are the new ones"
    )
    assert info.value.committed
    assert sorted(p.name for p in results.iterdir()) == ["1xA"]  # no leftovers
    assert [p.name for p in (results / "1xA").iterdir()] == ["new.txt"]


def test_a_results_folder_one_level_off_names_itself_where_no_variable_names_it(
    tmp_path, monkeypatch
):
    from helpers.records.machines import machine_folders

    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "index.jsonl").write_text("")
    with pytest.raises(
        ValueError,
        match=f"^the results folder {tmp_path} is one level too high: it holds results/; set "
        f"COURSE_RESULTS_DIR={tmp_path}/results$",
    ):
        machine_folders(tmp_path)
    machine = tmp_path / "results" / "1xA"
    (machine / "00_nb").mkdir(parents=True)
    (machine / "00_nb" / "e.json").write_text("{}")
    with pytest.raises(ValueError, match=f"^the results folder {machine} is one level too low"):
        machine_folders(machine)
    assert machine_folders(tmp_path / "missing") == []
