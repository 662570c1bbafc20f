import pytest

from helpers import claims, exercises, plotting, records


def test_bandwidth_plot_has_units_and_log_axes():
    ax = plotting.bandwidth_vs_size({"pinned H2D": ([2**10, 2**20], [1.0, 50.0])},
                                    title=plotting.machine_title("H2D", "1xGPU", live=False), ceiling_gbps=55)
    assert "GB/s" in ax.get_ylabel() and "bytes" in ax.get_xlabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "H2D - 1xGPU (replayed)"
    with pytest.raises(ValueError):
        plotting.bandwidth_vs_size({}, title="x")
    with pytest.raises(ValueError, match="equal length"):
        plotting.bandwidth_vs_size({"a": ([1, 2], [1.0])}, title="x")


def test_bars_with_ratios_label_each_bar():
    ax = plotting.bars_with_ratios({"pageable": 2.0, "pinned": 1.0}, title="t", ylabel="time (ms)")
    texts = [t.get_text() for t in ax.texts]
    assert "2\n1.00x" in texts and "1\n0.50x" in texts
    with pytest.raises(ValueError, match="baseline"):
        plotting.bars_with_ratios({"a": 1.0}, title="t", ylabel="y", baseline="b")


def test_grouped_bars():
    ax = plotting.grouped_bars({"pageable": {"blocking": 2.0, "non_blocking": 1.0},
                                "pinned": {"blocking": 1.0, "non_blocking": 0.5}}, title="t", ylabel="ms")
    assert len(ax.patches) == 4 and ax.get_ylabel() == "ms"
    with pytest.raises(TypeError):
        plotting.machine_title("x", None)


def test_claims_verdicts_are_computed():
    table = claims.ClaimsTable("01_pinned_memory")
    table.add("pinned is faster", source="seed 003", measured="2.0x", holds=2.0 > 1.5)
    table.add("twice as slow", source="seed 003", measured="ratio 5", holds=5 <= 2)
    table.add("needs 8 GPUs", source="seed 004", measured="-", holds=None)
    assert list(table.verdicts().values()) == [claims.HOLDS, claims.DOES_NOT_HOLD, claims.NOT_TESTABLE]
    md = table._repr_markdown_()
    assert "01_pinned_memory" in md and "**holds**" in md and md.count("\n|") == 5
    with pytest.raises(TypeError, match="bool computed"):
        table.add("typed", source="s", measured="m", holds="holds")
    with pytest.raises(TypeError):
        table.add("", source="s", measured="m", holds=True)


def test_claims_say_where_it_was_measured():
    run = records.Run(1, False, {"machine": {"machine": "2xH200", "gpus": []}, "params": {}, "date": "2026"})
    row = claims.ClaimsTable("nb").add("c", source="s", measured="m", holds=True, run=run)
    assert row.where == "replayed from 2xH200"


def test_exercise_checkers(capsys):
    assert exercises.check_number(None, 5.0) is None
    assert "Not answered" in capsys.readouterr().out
    assert exercises.check_number(5.2, 5.0, unit="ms") is True
    assert exercises.check_number(9, 5.0, hint="look at the plot") is False
    assert "Hint" in capsys.readouterr().out
    with pytest.raises(TypeError):
        exercises.check_number("5", 5.0)
    assert exercises.check_choice("pinned", "pinned", choices=["pinned", "pageable"]) is True
    assert exercises.check_choice(None, "pinned", choices=["pinned", "pageable"]) is None
    with pytest.raises(ValueError):
        exercises.check_choice("gpu", "pinned", choices=["pinned", "pageable"])
