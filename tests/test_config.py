from pathlib import Path

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
