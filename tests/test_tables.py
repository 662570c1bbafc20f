"""helpers.tables: one table renderer for HTML, text and Markdown."""

import pytest

from helpers import claims, tables


def sample() -> tables.Table:
    table = tables.Table(
        ["size", ("pinned", "GB/s"), ("ratio", "x", ".2f"), "note"],
        title="Copies - 1xGPU (replayed)",
        caption="median of 5 samples",
    )
    return (
        table.add("1 KiB", 0.2345, 2.345, None)
        .add("1 GiB", 54.61, 4.46, "plateau")
        .add("2 GiB", 123456.7, 1, "")
    )


def test_cells_keep_their_numbers_until_shown():
    text = str(sample())
    assert (
        "0.2345" in text
        and "54.61" in text
        and "123,457" in text
        and "2.35" in text
        and "1.00" in text
    )
    assert (
        "—" in text
        and text.splitlines()[0] == "Copies - 1xGPU (replayed)"
        and text.endswith("median of 5 samples")
    )
    assert "pinned (GB/s)" in text and "ratio (x)" in text


def test_text_aligns_numbers_right_and_words_left():
    lines = str(sample()).splitlines()
    header, rows = lines[1], lines[3:6]
    assert header.startswith("size  | pinned (GB/s)")
    assert rows[0].startswith("1 KiB |        0.2345") and rows[1].startswith(
        "1 GiB |         54.61"
    )
    assert len({len(r.split("|")[1]) for r in rows}) == 1


def test_a_wide_table_is_split_into_blocks_that_repeat_the_first_column():
    wide = tables.Table(["size"] + [(f"a long column name {i}", "GB/s") for i in range(8)])
    wide.add("64 MiB", *[float(i) for i in range(8)])
    lines = str(wide).splitlines()
    assert max(len(line) for line in lines) <= tables.WIDTH
    assert sum(line.startswith("size ") for line in lines) >= 2
    assert all(f"a long column name {i}" in str(wide) for i in range(8))


def test_a_wide_table_of_sentences_becomes_records():
    table = (
        tables.Table(["claim", "verdict"])
        .add("a claim that is a long sentence " * 4, "holds")
        .add("b", "no")
    )
    lines = str(table).splitlines()
    assert lines[0].strip().startswith("claim:") and lines[1].strip() == "verdict: holds"


def test_html_is_a_real_table_with_numbers_right_aligned_and_escaped_text():
    table = sample().add("<b>", 1.0, 1.0, "a & b")
    page = table._repr_html_()
    assert page.startswith("<table") and page.count("<tr>") == 5 and "<caption" in page
    assert "&lt;b&gt;" in page and "a &amp; b" in page
    assert (
        'text-align:right;vertical-align:top">54.61</td>' in page
        and 'left;vertical-align:top">plateau</td>' in page
    )


def test_markdown_has_units_alignment_and_bold_columns():
    table = tables.Table(["claim", ("value", "x")], bold=["claim"]).add("a|b", 2.0)
    md = table.to_markdown()
    assert md.splitlines() == ["| claim | value (x) |", "| --- | ---: |", "| **a\\|b** | 2.000 |"]


def test_plain_repr_is_the_table_not_an_address():
    assert repr(sample()) == str(sample())
    table = claims.ClaimsTable("01_pinned_memory")
    table.add("pinned is faster", source="the PyTorch tutorial", measured="ratio", holds=True)
    shown = repr(table)
    assert "at 0x" not in shown and "pinned is faster" in shown and "holds" in shown
    assert (
        "<b>holds</b>" in table._repr_html_()
        and "Claims tested in 01_pinned_memory" in table._repr_html_()
    )


@pytest.mark.parametrize(
    "columns, error",
    [
        ("size", TypeError),
        ([], TypeError),
        ([("size", 3)], TypeError),
        ([("size", "B", 7)], TypeError),
        ([""], TypeError),
    ],
)
def test_bad_columns_say_what_to_pass(columns, error):
    with pytest.raises(error, match="column"):
        tables.Table(columns)


def test_bad_rows_title_and_bold_say_what_to_pass():
    with pytest.raises(ValueError, match="needs 2 cells"):
        tables.Table(["a", "b"]).add(1)
    with pytest.raises(TypeError, match="title"):
        tables.Table(["a"], title=None)
    with pytest.raises(ValueError, match="bold"):
        tables.Table(["a"], bold=["b"])


def test_a_long_caption_wraps_within_the_width():
    table = tables.Table(["a"], caption="word " * 60).add(1)
    assert max(len(line) for line in str(table).splitlines()) <= tables.WIDTH
