"""tools/workspace.py: the learner's copies of the notebooks, made and restored without ever
touching notebooks/, following a link, or leaving half a change behind."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("workspace", ROOT / "tools" / "workspace.py")
workspace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(workspace)


def notebook(text: str) -> str:
    return json.dumps(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [{"cell_type": "markdown", "metadata": {}, "source": [text]}],
        }
    )


@pytest.fixture
def course(tmp_path):
    """A course with two committed notebooks and nothing executed yet."""
    (tmp_path / "notebooks").mkdir()
    for name in ("00_start", "01_next"):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text(notebook(f"committed {name}"))
    return tmp_path


def text_of(path: Path) -> str:
    return json.loads(path.read_text())["cells"][0]["source"][0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_prepare_copies_every_notebook_once_and_never_overwrites(course):
    assert workspace.prepare(course) == ["00_start", "01_next"]
    assert text_of(course / "workspace" / "00_start.ipynb") == "committed 00_start"
    (course / "workspace" / "00_start.ipynb").write_text(notebook("my exercise"))
    (course / "notebooks" / "02_new.ipynb").write_text(notebook("committed 02_new"))
    assert workspace.prepare(course) == ["02_new"]
    assert text_of(course / "workspace" / "00_start.ipynb") == "my exercise"
    assert not [p for p in (course / "workspace").iterdir() if p.name.startswith(".")]


def test_the_executed_copy_is_used_only_when_newer_than_the_committed_one(course):
    executed = course / "build" / "notebooks"
    executed.mkdir(parents=True)
    (executed / "00_start.ipynb").write_text(notebook("executed 00_start"))
    (executed / "01_next.ipynb").write_text(notebook("executed 01_next"))
    old = (course / "notebooks" / "01_next.ipynb").stat().st_mtime - 60
    os.utime(executed / "01_next.ipynb", (old, old))  # executed before the notebook last changed
    os.utime(executed / "00_start.ipynb", (old + 120, old + 120))
    workspace.prepare(course)
    assert text_of(course / "workspace" / "00_start.ipynb") == "executed 00_start"
    assert text_of(course / "workspace" / "01_next.ipynb") == "committed 01_next"


def test_reset_restores_one_notebook_and_leaves_the_others(course):
    workspace.prepare(course)
    for name in ("00_start", "01_next"):
        (course / "workspace" / f"{name}.ipynb").write_text(notebook(f"mine {name}"))
    assert workspace.reset("01_next.ipynb", course) == course / "notebooks" / "01_next.ipynb"
    assert text_of(course / "workspace" / "01_next.ipynb") == "committed 01_next"
    assert text_of(course / "workspace" / "00_start.ipynb") == "mine 00_start"
    (kept,) = (course / "workspace").glob("01_next.backup-*.ipynb")  # the learner's edits are kept
    assert text_of(kept) == "mine 01_next"
    workspace.reset("01_next", course)  # a second reset in the same second keeps both backups
    assert sorted(text_of(p) for p in (course / "workspace").glob("01_next.backup-*.ipynb")) == [
        "committed 01_next",
        "mine 01_next",
    ]


def test_a_bad_notebook_name_lists_the_names_and_changes_nothing(course):
    workspace.prepare(course)
    before = snapshot(course)
    for bad in ("03_missing", "../notebooks/00_start", ""):
        with pytest.raises(workspace.Refused, match="pass one of: 00_start, 01_next"):
            workspace.reset(bad, course)
    assert snapshot(course) == before


def test_a_broken_source_notebook_is_refused_before_anything_is_written(course):
    (course / "notebooks" / "01_next.ipynb").write_text("{not json")
    with pytest.raises(workspace.Refused, match="01_next.ipynb is not a notebook"):
        workspace.prepare(course)
    assert not (course / "workspace").exists()
    (course / "notebooks" / "01_next.ipynb").write_text(
        json.dumps({"nbformat": 3, "worksheets": []})
    )
    with pytest.raises(workspace.Refused, match="format 4"):
        workspace.reset("01_next", course)


def test_a_linked_workspace_or_source_is_refused_and_never_followed(course, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (course / "workspace").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(workspace.Refused, match="is a link"):
        workspace.prepare(course)
    with pytest.raises(workspace.Refused, match="is a link"):
        workspace.reset("00_start", course)
    assert list(elsewhere.iterdir()) == []
    (course / "workspace").unlink()
    executed = course / "build" / "notebooks"
    executed.mkdir(parents=True)
    (executed / "00_start.ipynb").symlink_to(elsewhere / "x.ipynb")
    secret = course / "notebooks" / "00_start.ipynb"
    (course / "notebooks" / "01_next.ipynb").unlink()
    (course / "notebooks" / "01_next.ipynb").symlink_to(secret)
    assert workspace.prepare(course) == ["00_start"]  # the linked notebook is not the course's
    assert text_of(course / "workspace" / "00_start.ipynb") == "committed 00_start"


def test_a_failed_write_leaves_no_temporary_file_and_the_old_copy(course, monkeypatch):
    workspace.prepare(course)
    (course / "workspace" / "00_start.ipynb").write_text(notebook("mine"))
    real_fdopen = os.fdopen

    def full_disk(fd, *args, **kwargs):
        os.close(fd)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(
        workspace.os,
        "fdopen",
        lambda fd, mode="r", *a, **k: (
            real_fdopen(fd, mode, *a, **k) if "r" in mode else full_disk(fd)
        ),
    )
    with pytest.raises(workspace.Refused, match="No space left"):
        workspace.reset("00_start", course)
    assert text_of(course / "workspace" / "00_start.ipynb") == "mine"
    assert sorted(p.name for p in (course / "workspace").iterdir()) == [
        "00_start.ipynb",
        "01_next.ipynb",
    ]


def test_the_command_line_says_what_to_pass(capsys):
    assert workspace.main(["reset"]) == 1
    assert "NOTEBOOK=03_streams_and_overlap" in capsys.readouterr().err
    assert workspace.main(["reset", "99_nope"]) == 1
    assert "00_start_here" in capsys.readouterr().err
    assert workspace.main(["frobnicate"]) == 1
    assert "usage" in capsys.readouterr().err


def test_make_run_never_writes_into_the_workspace_and_git_ignores_it():
    makefile = (ROOT / "Makefile").read_text()
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "workspace" not in run
    assert "/workspace/" in (ROOT / ".gitignore").read_text().splitlines()
