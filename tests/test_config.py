import importlib.metadata
import subprocess
from pathlib import Path

import pytest

from helpers import config


def test_quick_mode_reads_the_environment(monkeypatch):
    monkeypatch.delenv("COURSE_QUICK", raising=False)
    assert not config.quick_mode()
    assert config.pick(full=10, quick=1) == 10
    monkeypatch.setenv("COURSE_QUICK", "1")
    assert config.quick_mode()
    assert config.pick(full=10, quick=1) == 1
    monkeypatch.setenv("COURSE_QUICK", "0")
    assert not config.quick_mode()


def test_results_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    assert config.results_dir() == Path(__file__).resolve().parent.parent / "results"
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    assert config.results_dir() == tmp_path
    monkeypatch.setenv("COURSE_RESULTS_DIR", "results")  # relative: the message names the variable
    with pytest.raises(ValueError, match=r"^COURSE_RESULTS_DIR='results' is a relative path"):
        config.results_dir()


def test_replay_flags(monkeypatch):
    monkeypatch.setenv("COURSE_REPLAY", "yes")
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", "2xNVIDIA-H200")
    assert config.replay_forced()
    assert config.replay_machines() == ["2xNVIDIA-H200"]
    monkeypatch.setenv("COURSE_REPLAY_MACHINE", " 2xNVIDIA-H200, 1xA ,")
    assert config.replay_machines() == ["2xNVIDIA-H200", "1xA"]


def test_traces_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_TRACES_DIR", str(tmp_path / "t"))
    assert config.traces_dir() == tmp_path / "t" and (tmp_path / "t").is_dir()
    monkeypatch.delenv("COURSE_TRACES_DIR")
    assert config.traces_dir() == Path(__file__).resolve().parent.parent / "build" / "traces"


def test_an_installed_package_reads_its_own_recordings_and_writes_traces_to_the_cache(
    monkeypatch, tmp_path
):
    """`pip install .` puts helpers/ (with helpers/results/) in site-packages, without pyproject.toml."""
    site = tmp_path / "site-packages" / "helpers"
    (site / "results").mkdir(parents=True)
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    monkeypatch.delenv("COURSE_TRACES_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert config.clone_root(site) is None
    assert config.results_dir(site) == site / "results"
    assert config.traces_dir(site) == tmp_path / "cache" / "moving-data-course" / "traces"
    assert not (tmp_path / "site-packages" / "build").exists()
    clone = tmp_path / "clone"
    (clone / "helpers").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("")
    assert config.results_dir(clone / "helpers") == clone / "results"
    assert config.traces_dir(clone / "helpers") == clone / "build" / "traces"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the XDG rules say
    assert config.user_cache(tmp_path) == tmp_path / ".cache" / "moving-data-course"


def test_the_course_commit_is_the_setting_else_git_describe_of_the_clone(monkeypatch):
    monkeypatch.setenv("COURSE_COMMIT", "abc123")
    assert config.course_commit() == "abc123"
    monkeypatch.delenv("COURSE_COMMIT")
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=12"],
        cwd=Path(config.__file__).parent,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    assert config.course_commit() == (described or None)


def test_the_course_version_is_the_installed_distributions():
    assert config.course_version() == importlib.metadata.version("moving-data-course")


def test_results_dir_one_level_off_or_missing_names_the_variable(tmp_path, monkeypatch):
    """COURSE_RESULTS_DIR at the clone (one level too high), at one machine (too low) or at no
    folder: the listing of recorded machines says so, naming the variable and what to pass."""
    from helpers import records

    clone = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(clone))
    with pytest.raises(ValueError, match=f"one level too high.*COURSE_RESULTS_DIR={clone}/results"):
        records.recorded_machines()
    machine = clone / "results" / "2xNVIDIA-H200"
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(machine))
    with pytest.raises(ValueError, match=f"one level too low.*COURSE_RESULTS_DIR={clone}/results"):
        records.recorded_machine_names()
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="COURSE_RESULTS_DIR=.*missing is not a folder"):
        records.recorded_machines()
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(clone / "results"))
    assert "2xNVIDIA-H200" in records.recorded_machine_names()


def test_a_traces_dir_that_cannot_be_made_names_the_variable(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("COURSE_TRACES_DIR", str(tmp_path / "a-file"))
    with pytest.raises(ValueError, match="set COURSE_TRACES_DIR to a folder you can write"):
        config.traces_dir()


def test_a_file_in_the_clone_is_shown_from_the_clones_folder_whatever_the_kernels(
    tmp_path, monkeypatch
):
    root = Path(config.__file__).resolve().parent.parent
    recorded = root / "results" / "2xNVIDIA-H200" / "00_start_here" / "x.trace.json.gz"
    for folder in (root / "notebooks", root, tmp_path):
        monkeypatch.chdir(folder)
        assert config.shown_path(recorded) == "results/2xNVIDIA-H200/00_start_here/x.trace.json.gz"
    assert config.shown_path(tmp_path / "t.json") == str(tmp_path / "t.json")


def test_an_installed_package_finds_the_notebooks_installed_with_it(tmp_path):
    package = tmp_path / "site-packages" / "helpers"
    (package / "notebooks").mkdir(parents=True)  # no pyproject.toml above: not a clone
    assert config.clone_root(package) is None and config.notebooks_dir(package).is_dir()
    clone = tmp_path / "clone"
    (clone / "helpers").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("")
    assert config.notebooks_dir(clone / "helpers") == clone / "notebooks"


@pytest.mark.parametrize("value", ["1", "true", " TRUE ", "Yes", "on", "ON"])
def test_a_flag_is_on_in_any_of_its_spellings(monkeypatch, value):
    monkeypatch.setenv("COURSE_RECORD", value)
    assert config.recording_enabled() is True


@pytest.mark.parametrize("value", ["", " ", "0", "false", "False", "no", "off", "OFF"])
def test_a_flag_is_off_in_any_of_its_spellings(monkeypatch, value):
    monkeypatch.setenv("COURSE_RECORD", value)
    assert config.recording_enabled() is False


def test_a_flag_neither_on_nor_off_says_what_to_set(monkeypatch):
    monkeypatch.setenv("COURSE_QUICK", "maybe")
    with pytest.raises(
        ValueError,
        match=r"^COURSE_QUICK='maybe' is neither on nor off: set it to 1 \(or true, yes, on\) or "
        r"to 0 \(or false, no, off\), or unset it$",
    ):
        config.quick_mode()


def test_a_path_setting_expands_the_home_folder_and_refuses_a_relative_path(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COURSE_INDEX_OUT", "~/index.jsonl")
    assert config.index_out() == tmp_path / "index.jsonl"
    monkeypatch.setenv("COURSE_FOOTPRINT_OUT", "")
    assert config.footprint_out() is None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COURSE_FOOTPRINT_OUT", "out/f.jsonl")
    with pytest.raises(
        ValueError,
        match=r"^COURSE_FOOTPRINT_OUT='out/f.jsonl' is a relative path; notebooks run in another "
        f"folder, so give an absolute one, e.g. COURSE_FOOTPRINT_OUT={tmp_path}/out/f.jsonl$",
    ):
        config.footprint_out()


def test_the_course_version_is_unknown_where_it_is_not_installed(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(config.metadata, "version", not_installed)
    assert config.course_version() == "unknown"
