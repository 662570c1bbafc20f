"""CPU tests of the analysis functions defined in notebook 04 (read from the notebook itself)."""

import statistics
from pathlib import Path

import pytest
from notebook_code import definitions

from helpers import claims

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04_event_timing.ipynb"
WANTED_FUNCTIONS = {"in_words", "settled_from", "times_in_words", "ordering_words", "statement_that_raised",
                    "share_of", "first_over_later"}
WANTED_NAMES = {"STATEMENTS"}


@pytest.fixture(scope="module")
def nb04() -> dict:
    """The notebook's analysis functions, executed from its own source in a fresh namespace."""
    return definitions(NOTEBOOK, WANTED_FUNCTIONS | WANTED_NAMES, {"claims": claims, "statistics": statistics})


def test_in_words_follows_the_verdict(nb04):
    words = nb04["in_words"]
    assert words(claims.compare(claims.Value(1.5, 0.1), 1, holds_if="above"), "up", "same", "down") == "up"
    assert words(claims.compare(claims.Value(0.5, 0.1), 1, holds_if="above"), "up", "same", "down") == "down"
    assert words(claims.compare(claims.Value(1.05, 0.1), 1, holds_if="above"), "up", "same", "down") == "same"
    # the side is the value's, not the claim's
    assert words(claims.compare(claims.Value(0.5, 0.1), 1, holds_if="below"), "up", "same", "down") == "down"


def test_settled_from_finds_the_first_call_after_which_all_stay_near_the_median(nb04):
    assert nb04["settled_from"]([100.0, 1.0, 1.0, 1.0, 1.0]) == 2
    assert nb04["settled_from"]([100.0, 5.0, 1.0, 1.0, 1.0]) == 3
    assert nb04["settled_from"]([100.0, 1.0, 1.0, 9.0, 1.0, 1.0]) == 5


def test_times_in_words_chooses_by_the_ratio(nb04):
    assert nb04["times_in_words"](1.1).startswith("only a little above")
    assert "1.9 times" in nb04["times_in_words"](1.89)
    assert "well above" in nb04["times_in_words"](10)


def test_statement_that_raised_reads_the_markers(nb04):
    raised = nb04["statement_that_raised"]
    assert raised(["ready", "launched bad kernel", "next launch returned",
                   "synchronize raised: AcceleratorError: CUDA error"]) == "synchronize"
    assert raised(["ready", "launched bad kernel", "next launch raised: RuntimeError: x"]) == "next launch"
    assert raised(["ready", "bad launch raised: AcceleratorError: x"]) == "bad launch"
    assert raised(["ready", "launched bad kernel", "next launch returned", "synchronize returned"]) == "none"
    assert raised(["ready", "launched bad kernel"]).startswith("next launch (no error printed")


def test_ordering_words_counts_the_consumer_first(nb04):
    text = nb04["ordering_words"]({"checks": 5, "done_first": 0, "after": 0, "steps": 2}, "producer", "consumer")
    assert "consumer was done before the producer was in 5 of 5 checks" in text
    assert "in 0 of 2 traced steps" in text


def test_share_of_and_first_over_later_keep_the_spread(nb04):
    share = nb04["share_of"](claims.Value(0.02, 0.001, "s", 5), 0.02)
    assert share.value == pytest.approx(1.0) and share.spread == pytest.approx(0.05)
    first = nb04["first_over_later"]([10.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert first.value == pytest.approx(10.0) and first.spread == 0
    assert nb04["first_over_later"]([10.0, 0.8, 0.9, 1.0, 1.1, 1.2]).spread == pytest.approx(1.0)
