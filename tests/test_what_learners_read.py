"""The exact text a learner reads from the exercises, the claims' values and the HTML tables:
a change to any of it shows here (mutation testing found these sentences unchecked)."""

import pytest

from helpers import claims, exercises, tables
from helpers.claims import verdicts


@pytest.fixture(autouse=True)
def _no_question_missed_yet():
    exercises._MISSED.clear()


def test_check_number_says_right_wrong_hint_then_value_with_or_without_a_unit(capsys):
    assert exercises.check_number(None, 5.0, unit="ms") is None
    assert exercises.check_number(None, 5.0) is None
    assert exercises.check_number(5.2, 5.0, unit="ms") is True
    assert exercises.check_number(5.2, 5.0, rel_tol=0.1) is True
    assert exercises.check_number(5.6, 5.0, rel_tol=0.1) is False
    assert exercises.check_number(9, 5.0, unit="GB/s", hint="look at the plot") is False
    assert exercises.check_number(8, 5.0, unit="GB/s", hint="look at the plot") is False
    assert exercises.check_number(5.74, 5.0) is True  # 15% by default, relative to the larger
    assert capsys.readouterr().out.splitlines() == [
        "Not answered yet. Replace None with your estimate (in ms).",
        "Not answered yet. Replace None with your estimate.",
        "Right: you said 5.2 ms, the measurement gives 5 ms (within 15% counts).",
        "Right: you said 5.2, the measurement gives 5 (within 10% counts).",
        "Not quite: you said 5.6, the measurement gives 5 (within 10% counts).",
        "Not quite: 9 GB/s is not within 15% of the measurement. Hint: look at the plot. "
        "Change your answer and run the cell again.",
        "Not quite: you said 8 GB/s, the measurement gives 5 GB/s (within 15% counts).",
        "Right: you said 5.74, the measurement gives 5 (within 15% counts).",
    ]
    with pytest.raises(TypeError, match=r"^the answer must be a number in ms, got '5'$"):
        exercises.check_number("5", 5.0, unit="ms")
    with pytest.raises(TypeError, match=r"^the answer must be a number, got True$"):
        exercises.check_number(True, 5.0)


def test_a_wrong_answer_without_a_hint_gets_the_value_at_once(capsys):
    assert exercises.check_number(8, 5.0) is False
    assert exercises.check_choice("b", "a", choices=["a", "b"]) is False
    assert capsys.readouterr().out.splitlines() == [
        "Not quite: you said 8, the measurement gives 5 (within 15% counts).",
        "Not quite: the measurement says 'a'.",
    ]


def test_check_choice_says_what_to_copy_then_hint_then_answer(capsys):
    assert exercises.check_choice(None, "a", choices=["a", "b"]) is None
    assert exercises.check_choice("c", "a", choices=["a", "b"]) is None
    assert exercises.check_choice("a", "a", choices=("a", "b")) is True
    assert exercises.check_choice("b", "a", choices=["a", "b"], hint="the faster") is False
    assert exercises.check_choice("b", "a", choices=["a", "b"], hint="the faster") is False
    assert capsys.readouterr().out.splitlines() == [
        "Not answered yet. Replace None with one of ['a', 'b'].",
        "'c' is not one of the choices; copy one of them exactly: 'a', 'b'.",
        "Right: the measurement says 'a'.",
        "Not quite. Hint: the faster. Change your answer and run the cell again.",
        "Not quite: the measurement says 'a'.",
    ]
    with pytest.raises(
        TypeError,
        match=r"^choices is a list of strings, e.g. \['below 1 MiB', '1-64 MiB'\], got \[1\]$",
    ):
        exercises.check_choice("a", "a", choices=[1])
    with pytest.raises(ValueError, match=r"^expected 'c' is not one of the choices \['a', 'b'\]$"):
        exercises.check_choice("a", "c", choices=["a", "b"])


@pytest.mark.parametrize(
    "x, text",
    [
        (0, "0"),
        (0.005, "0.005"),
        (0.01, "0.01"),
        (5.4321, "5.43"),
        (9.999, "10"),
        (12.345, "12.35"),
        (999.94, "999.9"),
        (1234.5, "1234"),
        (9999.4, "9999"),
        (12345.0, "1.23e+04"),
        (-3.21, "-3.21"),
        (-0.001234, "-0.00123"),
    ],
)
def test_a_threshold_is_written_with_the_digits_it_has(x, text):
    assert verdicts._number(x) == text


def test_a_comparison_reads_value_spread_side_and_threshold():
    assert (
        str(claims.compare(claims.Value(2.0, 0.25, "x"), 1.5, holds_if="above"))
        == "2.00 x ± 0.25 (holds if > 1.5 x)"
    )
    assert (
        str(claims.compare(claims.Value(0.5, 0.01), 1, holds_if="below"))
        == "0.500 ± 0.010 (holds if < 1)"
    )
    with pytest.raises(
        TypeError, match="^a Comparison is not a bool: it can be borderline; read .verdict instead$"
    ):
        bool(claims.compare(2.0, 1, holds_if="above"))


def test_the_html_table_escapes_aligns_numbers_right_and_bolds_its_bold_columns():
    t = tables.Table(["name", ("time", "ms")], title="T <1>", caption="c & d", bold=["name"])
    t.add("a|b", 1.5)
    t.add("x", None)
    cell = "padding:2px 8px;"
    assert t._repr_html_().splitlines() == [
        '<table style="border-collapse:collapse;font-size:0.9em;margin:0.5em 0">',
        '<caption style="caption-side:top;text-align:left;font-weight:bold">T &lt;1&gt;</caption>',
        f'<thead><tr><th style="{cell}border-bottom:1px solid #888;text-align:left">name</th>'
        f'<th style="{cell}border-bottom:1px solid #888;text-align:right">time (ms)</th></tr></thead><tbody>',
        f'<tr><td style="{cell}text-align:left;vertical-align:top"><b>a|b</b></td>'
        f'<td style="{cell}text-align:right;vertical-align:top">1.500</td></tr>',
        f'<tr><td style="{cell}text-align:left;vertical-align:top"><b>x</b></td>'
        f'<td style="{cell}text-align:right;vertical-align:top">—</td></tr>',
        "</tbody></table>",
        '<p style="font-size:0.85em;margin-top:0"><i>c &amp; d</i></p>',
    ]
    assert t.to_markdown().splitlines() == [
        "**T <1>**",
        "",
        "| name | time (ms) |",
        "| --- | ---: |",
        "| **a\\|b** | 1.500 |",
        "| **x** | — |",
        "",
        "*c & d*",
    ]
    plain = tables.Table(["name"])
    plain.add("y\nz")
    assert (
        plain._repr_html_().splitlines()[1].startswith("<thead>")
        and "<p" not in plain._repr_html_()
    )
    assert plain.to_markdown().splitlines() == ["| name |", "| --- |", "| y z |"]


def test_a_recording_is_json_one_space_indented_and_keeps_nan():
    """Recordings under results/ are diffed in reviews: the layout is part of what is committed."""
    from helpers import codec

    assert codec.dumps({"a": [float("nan"), 1]}) == '{\n "a": [\n  NaN,\n  1\n ]\n}\n'


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda analysis: analysis.across([]), "across() needs at least one value"),
        (
            lambda analysis: analysis.propagated(lambda: 1.0),
            "propagated() needs at least one claims.Value",
        ),
        (lambda analysis: analysis.weakest({}), "weakest() needs at least one named comparison"),
    ],
)
def test_the_analysis_helpers_say_what_they_need(call, message):
    from helpers import analysis

    with pytest.raises(ValueError) as err:
        call(analysis)
    assert str(err.value) == message
