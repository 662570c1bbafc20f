"""tools/notebook_times.py: run times from executed notebooks, kept in a checked format, and the
README's table of them current."""

import datetime as dt
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from helpers import records

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
spec = importlib.util.spec_from_file_location(
    "notebook_times", ROOT / "tools" / "notebook_times.py"
)
notebook_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notebook_times)


def executed(*spans):
    """An executed notebook: a markdown cell, then one code cell per (start, end) second."""

    def stamp(s):
        return (dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC) + dt.timedelta(seconds=s)).isoformat()

    cells = [{"cell_type": "markdown", "metadata": {}, "source": []}]
    cells += [
        {
            "cell_type": "code",
            "source": [],
            "outputs": [],
            "metadata": {
                "execution": {"iopub.execute_input": stamp(a), "shell.execute_reply": stamp(b)}
            },
        }
        for a, b in spans
    ]
    return {"cells": cells}


def test_times_come_from_the_cells_stamps():
    entry = notebook_times.times_of(executed((1, 3.5), (4, 10)), "abc123")
    assert entry == {
        "date": "2026-01-01T10:00:01+00:00",
        "commit": "abc123",
        "seconds": 9.0,
        "cells": [{"cell": 1, "seconds": 2.5}, {"cell": 2, "seconds": 6.0}],
    }
    with pytest.raises(ValueError, match="no timed code cell"):
        notebook_times.times_of(
            {"cells": [{"cell_type": "code", "metadata": {}, "source": []}]}, "x"
        )


def test_record_keeps_the_other_notebooks_and_writes_a_valid_file(tmp_path):
    first = notebook_times.times_of(executed((0, 2)), "c1")
    second = notebook_times.times_of(executed((0, 5)), "c2")
    notebook_times.record(tmp_path, "full", "01_b", first)
    path = notebook_times.record(tmp_path, "full", "00_a", second)
    notebook_times.record(tmp_path, "quick", "00_a", first)
    data = json.loads(path.read_text())
    assert data["full"] == {"00_a": second, "01_b": first} and data["quick"] == {"00_a": first}
    assert notebook_times.run_times_problems(path) == []
    assert [p.name for p in tmp_path.iterdir()] == ["run_times.json"]
    with pytest.raises(ValueError, match="'full' or 'quick'"):
        notebook_times.record(tmp_path, "slow", "00_a", first)


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"full": {"00_a": {"seconds": 1}}}, "exactly date, commit, seconds, cells"),
        (
            {"full": {"00_a": {"date": "d", "commit": "c", "seconds": -1, "cells": []}}},
            "seconds must be",
        ),
        (
            {"full": {"00_a": {"date": 1, "commit": "c", "seconds": 1, "cells": []}}},
            "must be strings",
        ),
        (
            {"full": {"00_a": {"date": "d", "commit": "c", "seconds": 1, "cells": [{"cell": 1}]}}},
            "cells must be",
        ),
        ({"slow": {}}, "keys are among full, quick"),
        ({"full": []}, "must map notebooks"),
    ],
)
def test_a_malformed_run_times_file_is_refused_with_its_reason(tmp_path, bad, why):
    path = tmp_path / "run_times.json"
    path.write_text(json.dumps(bad))
    assert any(why in p for p in notebook_times.run_times_problems(path))
    path.write_text("{oops")
    assert "not readable as JSON" in notebook_times.run_times_problems(path)[0]


def test_a_machine_folder_with_run_times_validates_and_unpack_checks_the_file(tmp_path):
    real = ROOT / "results" / "2xNVIDIA-H200"
    folder = tmp_path / "results" / real.name
    folder.mkdir(parents=True)
    notebook = folder / "00_start_here"
    notebook.mkdir()
    for path in (real / "00_start_here").iterdir():
        (notebook / path.name).write_bytes(path.read_bytes())
    notebook_times.record(
        folder, "full", "00_start_here", notebook_times.times_of(executed((0, 1)), "c")
    )
    records.write_checksums(folder)
    assert records.validate_machine_folder(folder, real.name) == []
    gpu_run = importlib.import_module("gpu_run")
    gpu_run.validate_extracted(tmp_path, real.name)  # raises nothing
    (folder / "run_times.json").write_text(json.dumps({"full": {"00_start_here": {"seconds": 1}}}))
    with pytest.raises(gpu_run.Refused, match="exactly date, commit, seconds, cells"):
        gpu_run.validate_extracted(tmp_path, real.name)


def test_a_machine_without_times_says_not_recorded(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for name in ("00_a", "01_b"):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text("{}")
        (tmp_path / "results" / "1xGPU" / name).mkdir(parents=True)
    (tmp_path / "results" / "2xGPU" / "01_b").mkdir(parents=True)
    notebook_times.record(
        tmp_path / "results" / "2xGPU",
        "full",
        "01_b",
        notebook_times.times_of(executed((0, 150)), "c"),
    )
    (tmp_path / "results" / "replay_times.json").write_text(
        json.dumps(
            {"cpus": 2, "notebooks": {"00_a": notebook_times.times_of(executed((0, 7.4)), "c")}}
        )
    )
    assert notebook_times.table(tmp_path).splitlines() == [
        "| notebook | live, 1xGPU | live, 2xGPU | replay (2 CPU cores) |",
        "| --- | --- | --- | --- |",
        "| `00_a` | not recorded | - | 7 s |",
        "| `01_b` | not recorded | 2.5 min | not recorded |",
    ]


def test_live_times_only_where_recorded_and_quick_times_for_every_notebook_timed(tmp_path):
    """A one-GPU machine runs a two-GPU notebook partly replayed: its full-size time is not shown as
    a live one, but its quick-mode time is what a classroom with that machine waits."""
    (tmp_path / "notebooks").mkdir()
    for name in ("00_a", "01_b"):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text("{}")
    (tmp_path / "results" / "1xGPU" / "00_a").mkdir(
        parents=True
    )  # 01_b needs two GPUs: not recorded here
    for mode, name, seconds in (
        ("full", "00_a", 30),
        ("full", "01_b", 9),
        ("quick", "00_a", 6),
        ("quick", "01_b", 4),
    ):
        notebook_times.record(
            tmp_path / "results" / "1xGPU",
            mode,
            name,
            notebook_times.times_of(executed((0, seconds)), "c"),
        )
    assert notebook_times.table(tmp_path).splitlines()[2:] == [
        "| `00_a` | 30 s | not recorded |",
        "| `01_b` | - | not recorded |",
    ]
    assert notebook_times.quick_table(tmp_path).splitlines() == [
        "| notebook | quick, 1xGPU |",
        "| --- | --- |",
        "| `00_a` | 6 s |",
        "| `01_b` | 4 s |",
        "| all of them | 10 s |",
    ]


def test_the_readme_table_is_current():
    readme = (ROOT / "README.md").read_text()
    assert notebook_times.readme_with_times(readme) == readme, (
        "README.md's table of notebook times is out of date: run `python tools/notebook_times.py write-readme`"
    )
    with pytest.raises(ValueError, match="markers"):
        notebook_times.readme_with_table("no markers here")


def test_recorded_times_files_are_valid():
    for path in sorted((ROOT / "results").glob(f"*/{notebook_times.RUN_TIMES}")):
        assert notebook_times.run_times_problems(path) == []
    replay = json.loads((ROOT / "results" / notebook_times.REPLAY_TIMES).read_text())
    assert all(notebook_times.entry_problems(e, nb) == [] for nb, e in replay["notebooks"].items())


def test_the_readme_says_how_long_make_test_took_from_its_measurement(tmp_path):
    (tmp_path / "results").mkdir()
    assert "has not been timed" in notebook_times.test_time_sentence(tmp_path)
    (tmp_path / "results" / "replay_times.json").write_text(
        json.dumps(
            {
                "make_test": {
                    "seconds": 201.4,
                    "cpus": 2,
                    "load": 0.1,
                    "date": "2026-11-26T22:00:00+00:00",
                    "commit": "abc",
                }
            }
        )
    )
    assert notebook_times.test_time_sentence(tmp_path) == (
        "On a fresh clone with 2 CPU cores (load average 0.1 as it started), `make test` took "
        "3.4 min, setting itself up included (2026-11-26, commit abc)."
    )
