"""Verdicts with a margin, values with their spread, and the sentences a notebook prints."""

import json
import math

import pytest

from helpers import analysis, claims, records, timing


def timed(*samples, nbytes=None):
    return timing.Timing(list(samples), "CUDA events", nbytes=nbytes)


def test_measured_keeps_the_median_and_half_the_iqr():
    v = claims.measured(timed(1.0, 1.2, 0.8, 1.1, 0.9))
    assert v.value == 1.0 and v.unit == "s" and v.samples == 5
    assert v.spread == pytest.approx(0.1)  # quartiles 0.9 and 1.1
    rate = claims.measured(timed(1e-3, 1e-3, 1e-3, nbytes=10**6), as_rate=True)
    assert rate.value == pytest.approx(1.0) and rate.spread == 0 and rate.unit == "GB/s"
    with pytest.raises(TypeError, match="timing.Timing"):
        claims.measured(1.0)


def test_ratio_adds_relative_spreads():
    r = claims.ratio(claims.Value(2.0, 0.2), claims.Value(1.0, 0.05))
    assert r.value == 2.0 and r.spread == pytest.approx(2.0 * (0.1 + 0.05)) and r.unit == "x"
    assert claims.ratio(timed(2.0, 2.0, 2.0), timed(1.0, 1.0, 1.0)).value == 2.0
    with pytest.raises(ValueError, match="denominator"):
        claims.ratio(claims.Value(1.0), claims.Value(0.0))


@pytest.mark.parametrize(
    "value, spread, threshold, side, verdict",
    [
        (1.5, 0.05, 2.0, "below", claims.HOLDS),
        (2.5, 0.05, 2.0, "below", claims.DOES_NOT_HOLD),
        (2.0, 0.05, 2.0, "below", claims.BORDERLINE),  # the pin-then-copy ratio on H200
        (1.97, 0.05, 2.0, "below", claims.BORDERLINE),  # ... and on H100: no flip between them
        (0.91, 0.02, 0.90, "above", claims.BORDERLINE),  # two-stream overlap on H100
        (0.95, 0.02, 0.90, "above", claims.HOLDS),
        (0.85, 0.02, 0.90, "above", claims.DOES_NOT_HOLD),
        (1.005, 0.0, 1.0, "above", claims.BORDERLINE),  # the 1% floor with no spread at all
        (1.02, 0.0, 1.0, "above", claims.HOLDS),
    ],
)
def test_a_value_inside_its_noise_is_borderline(value, spread, threshold, side, verdict):
    comparison = claims.compare(claims.Value(value, spread), threshold, holds_if=side)
    assert comparison.verdict == verdict
    row = {"value": value, "spread": spread, "threshold": threshold, "holds_if": side, "unit": ""}
    assert claims.verdict_of(row) == verdict


@pytest.mark.parametrize(
    "value, verdict, bound",
    [
        (1.38, claims.HOLDS, 1),
        (1.7, claims.HOLDS, 2),
        (2.5, claims.DOES_NOT_HOLD, 2),
        (0.5, claims.DOES_NOT_HOLD, 1),
        (1.99, claims.BORDERLINE, 2),
        (1.005, claims.BORDERLINE, 1),
        (1.2, claims.HOLDS, 1),
    ],
)
def test_within_decides_at_the_nearer_bound(value, verdict, bound):
    comparison = claims.within(claims.Value(value, 0.01), 1, 2)
    assert comparison.verdict == verdict and comparison.threshold == bound
    with pytest.raises(ValueError, match="low < high"):
        claims.within(1.0, 2, 1)


def test_compare_refuses_what_it_cannot_compare():
    with pytest.raises(ValueError, match="'above' or 'below'"):
        claims.compare(1.0, 2.0, holds_if="less")
    with pytest.raises(TypeError, match="threshold"):
        claims.compare(1.0, "2", holds_if="below")
    with pytest.raises(TypeError, match="claims.Value"):
        claims.compare("1.0", 2.0, holds_if="below")
    with pytest.raises(TypeError, match="borderline"):
        bool(claims.compare(1.0, 2.0, holds_if="below"))
    with pytest.raises(TypeError, match="number"):
        claims.Value(float("nan"))
    with pytest.raises(ValueError, match="negative"):
        claims.Value(1.0, -0.1)


def test_the_table_shows_value_threshold_and_spread():
    table = claims.ClaimsTable("01_pinned_memory")
    table.add(
        "twice as slow",
        source="seed 003",
        measured="ratio",
        holds=claims.compare(claims.Value(2.0, 0.04, "x"), 2, holds_if="below"),
    )
    table.add("profiler names it", source="seed 003", measured="names", holds=True)
    md = table.to_markdown()
    assert "| 2.00 ± 0.04 x | < 2 |" in md and "**borderline here**" in md
    assert "| — | — |" in md and "**holds**" in md
    assert "borderline here" in table._repr_markdown_()


def test_a_value_on_fewer_than_five_samples_says_its_count_in_the_table():
    """Issue 35: a statement on fewer than 5 samples says so; the table's value column does."""
    table = claims.ClaimsTable("02_non_blocking")
    for n in (1, 3, 4, 5, None):
        holds = claims.compare(claims.Value(1.3, 0.04, "x", n), 1.1, holds_if="above")
        table.add(f"on {n}", source="s", measured="m", holds=holds)
    values = [row[3] for row in table.table().rows]
    assert values == [
        "1.30 ± 0.04 x (1 sample)",
        "1.30 ± 0.04 x (3 samples)",
        "1.30 ± 0.04 x (4 samples)",
        "1.30 ± 0.04 x",
        "1.30 ± 0.04 x",
    ]
    assert claims.FEW_SAMPLES == analysis.FEW_SAMPLES == 5  # one rule, read by both


def test_a_claim_between_two_bounds_shows_both_and_a_count_shows_no_spread():
    table = claims.ClaimsTable("01_pinned_memory")
    table.add(
        "slower, at most twice",
        source="seed 003",
        measured="ratio",
        holds=claims.within(claims.Value(1.35, 0.06, "x"), 1, 2),
    )
    table.add(
        "rare",
        source="seed 003",
        measured="share of sizes",
        holds=claims.compare(claims.Value(7 / 11, unit="of 11 sizes"), 0.25, holds_if="below"),
    )
    md = table.to_markdown()
    assert "| 1.35 ± 0.06 x | between 1 and 2 |" in md
    assert "| 0.636 of 11 sizes | < 0.25 |" in md
    assert (
        claims.Value(20.0).without_spread() == "20"
        and claims.Value(0.5).without_spread() == "0.500"
    )
    assert "(holds if between 1 and 2 x)" in str(claims.within(claims.Value(1.35, 0.06, "x"), 1, 2))


def test_replayed_verdicts_and_checks_reach_the_index_file(tmp_path, monkeypatch):
    out = tmp_path / "rows.jsonl"
    monkeypatch.setenv("COURSE_INDEX_OUT", str(out))
    header = {"machine": {"machine": "2xH200", "gpus": []}, "params": {}, "date": "2026"}
    replayed, live = records.Run(1, False, header), records.Run(1, True, header)
    table = claims.ClaimsTable("nb")
    table.add(
        "c",
        source="s",
        measured="m",
        holds=claims.compare(claims.Value(3.0, 0.1), 2, holds_if="above"),
        run=replayed,
    )
    table.add("live", source="s", measured="m", holds=True, run=live)
    seen = claims.WhatWeSee("nb", replayed)
    seen.check("the loop ends with one synchronize", False, "2 synchronize calls")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["kind"], r["name"], r["verdict"]) for r in rows] == [
        ("claim", "c", claims.HOLDS),
        ("check", "the loop ends with one synchronize", claims.DOES_NOT_HOLD),
    ]
    assert (
        rows[0]["threshold"] == 2
        and rows[0]["spread"] == 0.1
        and claims.verdict_of(rows[0]) == claims.HOLDS
    )
    assert rows[0]["holds_if_text"] == table.claims[0].comparison.holds_if_text()  # the site's


def test_what_we_see_prints_sentences_and_marks_failed_checks():
    header = {"machine": {"machine": "1xH100", "gpus": []}, "params": {}, "date": "2026"}
    seen = claims.WhatWeSee("nb", records.Run(1, False, header))
    seen.say("Pinned copies reach 55.4 GB/s.")
    assert seen.check("pinned beats pageable", True, "55.4 against 9.3 GB/s") is True
    assert seen.check("one synchronize", False, "2 counted") is False
    md = seen._repr_markdown_()
    assert md.startswith("**What we see** (replayed from 1xH100): Pinned copies reach 55.4 GB/s.")
    assert (
        "✓ as expected: pinned beats pageable" in md
        and "✗ **not on this machine**: one synchronize" in md
    )
    with pytest.raises(TypeError, match="bool"):
        seen.check("typed", "yes", "m")
    with pytest.raises(TypeError, match="sentence"):
        seen.say("  ")


MiB = 2**20
SIZES = [MiB * 2**i for i in range(9)]


@pytest.mark.parametrize(
    "values, kind, words",
    [
        (
            [30, 35, 40, 45, 47, 48, 49.0, 51.4, 54.6],
            "still rising",
            "(49.0, 51.4, 54.6 GB/s at 64 MiB, 128 MiB and 256 MiB)",
        ),
        (
            [30, 41.9, 40, 37.5, 45, 52, 53, 53.5, 53.2],
            "levels off",
            "after a dip from 40.0 GB/s at 4 MiB to 37.5 GB/s",
        ),
        (
            [3, 8, 12.24, 11, 10, 9, 8, 7, 6.71],
            "peaks, then falls",
            "peaks at 12.2 GB/s at 4 MiB, then falls to 6.71",
        ),
        (
            [10, 20, 50, 51, 50.5, 51.2, 50.8, 51, 50.9],
            "levels off",
            "levels off from 4 MiB on, at 50.0 to 51.2 GB/s",
        ),
        (
            [10, 12, 14, 15, 16, 16.5, 17.6, 15.6, 17.5],
            "uneven",
            "does not settle at the largest sizes (17.6, 15.6, 17.5",
        ),
        (
            [900, 2000, 5069, 4300, 4154, 4241, 4245, 4230, 4240],
            "peaks, then falls",
            "peaks at 5069 GB/s at 4 MiB, then falls to 4240 GB/s",
        ),
    ],
)
def test_describe_curve_says_how_the_curve_ends(values, kind, words):
    shape = claims.describe_curve(SIZES, values)
    assert shape.kind == kind and words in shape.words


def test_describe_curve_needs_matching_lists():
    with pytest.raises(ValueError, match="as many sizes"):
        claims.describe_curve([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="tolerance"):
        claims.describe_curve([1, 2, 3], [1, 2, 3], tolerance=5)


# ---------------------------------------------------------------- numpy bools are verdicts too


def test_numpy_bools_give_verdicts_and_become_python_bools(tmp_path, monkeypatch):
    import numpy as np

    out = tmp_path / "rows.jsonl"
    monkeypatch.setenv("COURSE_INDEX_OUT", str(out))
    header = {"machine": {"machine": "2xH200", "gpus": []}, "params": {}, "date": "2026"}
    run = records.Run(1, False, header)
    seen = claims.WhatWeSee("nb", run)
    held = seen.check("numpy says yes", np.bool_(True), "3 > 2")
    failed = seen.check("numpy says no", np.bool_(False), "1 > 2")
    assert (held, failed) == (True, False) and type(held) is bool and type(failed) is bool
    assert [c.holds for c in seen.checks] == [True, False] and all(
        type(c.holds) is bool for c in seen.checks
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["name"], r["verdict"], r["value"]) for r in rows] == [
        ("numpy says yes", claims.HOLDS, True),
        ("numpy says no", claims.DOES_NOT_HOLD, False),
    ]


def test_numpy_bools_in_the_claims_table():
    import numpy as np

    table = claims.ClaimsTable("nb")
    table.add("yes", source="s", measured="m", holds=np.float64(3.0) > 2)
    table.add("no", source="s", measured="m", holds=np.float64(1.0) > 2)
    assert [row.verdict for row in table.claims] == [claims.HOLDS, claims.DOES_NOT_HOLD]


@pytest.mark.parametrize("holds", [1, 0, 1.0, "yes", [True], "np.array"])
def test_numbers_and_strings_are_not_verdicts(holds):
    import numpy as np

    if holds == "np.array":
        holds = np.array([1.0]) > 0  # a one-element array, not a bool
    for value in (holds, np.int64(1) if isinstance(holds, int) and holds == 1 else holds):
        with pytest.raises(TypeError):
            claims.ClaimsTable("nb").add("c", source="s", measured="m", holds=value)
        with pytest.raises(TypeError):
            claims.WhatWeSee("nb").check("c", value, "m")


# ---------------------------------------------------------------- arithmetic no other test pins down


def test_a_rate_keeps_the_relative_spread_of_its_time():
    # quartiles 0.9 and 1.1 ms around a 1 ms median: +-10% of 1 GB/s
    rate = claims.measured(
        timed(1.0e-3, 1.2e-3, 0.8e-3, 1.1e-3, 0.9e-3, nbytes=10**6), as_rate=True
    )
    assert (
        rate.value == pytest.approx(1.0) and rate.spread == pytest.approx(0.1) and rate.samples == 5
    )


def test_ratio_divides_and_adds_the_relative_spreads_of_both_sides():
    r = claims.ratio(claims.Value(6.0, 0.6, samples=8), claims.Value(2.0, 0.4, samples=5))
    assert r.value == 3.0 and r.spread == pytest.approx(3.0 * (0.1 + 0.2)) and r.samples == 5
    assert claims.ratio(claims.Value(0.0, 0.0), claims.Value(2.0, 0.2)).spread == 0.0


@pytest.mark.parametrize("low, high", [(True, 2), (1, False), (2, 2), (3, 2)])
def test_within_needs_two_numeric_bounds_in_order(low, high):
    with pytest.raises((TypeError, ValueError)):
        claims.within(claims.Value(1.5), low, high)


def test_within_at_the_middle_decides_at_the_lower_bound():
    assert claims.within(claims.Value(1.5), 1, 2).threshold == 1


@pytest.mark.parametrize(
    "row", [{"value": 1.0}, {"threshold": 1.0}, {"value": None, "threshold": 1.0}]
)
def test_verdict_of_a_row_without_value_or_threshold_is_none(row):
    assert claims.verdict_of({"holds_if": "above", **row}) is None


def test_what_a_claim_and_a_check_write_to_the_index(tmp_path, monkeypatch):
    out = tmp_path / "rows.jsonl"
    monkeypatch.setenv("COURSE_INDEX_OUT", str(out))
    run = records.Run(
        1, False, {"machine": {"machine": "2xH200", "gpus": []}, "params": {}, "date": "2026"}
    )
    table = claims.ClaimsTable("01_nb")
    table.add(
        "faster",
        source="seed 1",
        measured="ratio of medians",
        holds=claims.compare(claims.Value(3.0, 0.1, "x"), 2, holds_if="above"),
        run=run,
    )
    table.add("named", source="seed 2", measured="names", holds=False, run=run)
    table.add("untestable", source="seed 3", measured="-", holds=None, run=run)
    claims.WhatWeSee("01_nb", run).check("one sync", True, "1 call")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["notebook"] for r in rows} == {"01_nb"}
    first = rows[0]
    assert (
        first["source"],
        first["measured"],
        first["unit"],
        first["spread"],
        first["holds_if"],
    ) == ("seed 1", "ratio of medians", "x", 0.1, "above")
    assert (first["runs"], first["band"]) == ([], 0.0)  # no run-to-run file here
    assert [(r["name"], r["value"]) for r in rows[1:]] == [
        ("named", False),
        ("untestable", None),
        ("one sync", True),
    ]
    assert rows[3]["measured"] == "1 call" and rows[2]["verdict"] == claims.NOT_TESTABLE


@pytest.mark.parametrize(
    "make",
    [
        lambda: claims.ClaimsTable(""),
        lambda: claims.WhatWeSee(""),
        lambda: claims.WhatWeSee("nb").check("s", True, ""),
        lambda: claims.WhatWeSee("nb").check("", True, "m"),
    ],
)
def test_empty_names_and_sentences_are_refused(make):
    with pytest.raises(TypeError, match="name|non-empty"):
        make()


def recorded(tmp_path, monkeypatch, kinds, bands=None):
    """A results/run_to_run.json of ``kinds`` ({machine: {claim: values}}, notebook "01_x",
    threshold and side taken from ``bands``' claims or 2 and "below") and ``bands``
    ({claim: (band, threshold, holds_if)})."""
    import json as _json

    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    tests = {c: {"threshold": t, "holds_if": side} for c, (_, t, side) in (bands or {}).items()}
    default = {"threshold": 2.0, "holds_if": "below"}
    (tmp_path / claims.RUN_TO_RUN_FILE).write_text(
        _json.dumps(
            {
                "kinds": {
                    machine: {
                        "01_x": {
                            c: {"values": v, **tests.get(c, default)} for c, v in found.items()
                        }
                    }
                    for machine, found in kinds.items()
                },
                "bands": {
                    "01_x": {
                        c: {"band": band, "machine": "1xA", **tests[c]}
                        for c, (band, *_) in (bands or {}).items()
                    }
                },
            }
        )
    )


def run_on(machine):
    return records.Run(
        1, False, {"machine": {"machine": machine, "gpus": []}, "params": {}, "date": "2026"}
    )


def test_a_value_whose_runs_all_lie_on_one_side_far_from_the_threshold_is_not_borderline(
    tmp_path, monkeypatch
):
    """The issue's example: 1xH200's "below 1 MiB, empty cache", 40.8 ± 7.3 with six recorded runs
    of 32 to 116, against "up to twice" (between 1 and 2). Half the range of the runs is ± 42,
    which an absolute band put around 2; every run says "more than twice": it does not hold."""
    runs = [46.9, 32.29, 43.0, 116.38, 40.31, 40.77]
    recorded(
        tmp_path, monkeypatch, {"1xH200": {"twice": runs}, "2xH200": {"twice": [4.99, 7.46, 3.31]}}
    )
    table = claims.ClaimsTable("01_x")
    here = table.add(
        "twice",
        source="s",
        measured="m",
        holds=claims.within(claims.Value(40.77, 7.29), 1, 2),
        run=run_on("1xH200"),
    )
    assert here.verdict == claims.DOES_NOT_HOLD and here.comparison.runs == tuple(runs)
    two = claims.ClaimsTable("01_x").add(
        "twice",
        source="s",
        measured="m",
        holds=claims.within(claims.Value(3.31, 0.084), 1, 2),
        run=run_on("2xH200"),
    )
    assert two.verdict == claims.DOES_NOT_HOLD  # 3.31 (± 2.1 by half the range): runs 3.3 to 7.5
    # a run that lands below 2 joins the runs: they lie on both sides now, and it is borderline
    below = claims.within(claims.Value(1.5, 0.01), 1, 2)
    judged = claims.judged(below, run_on("1xH200"), "01_x", "twice")
    assert judged.verdict == claims.BORDERLINE and judged.borderline() == "runs"
    assert judged.evidence() == "7 runs here: 1.50 to 116"


def test_recorded_runs_on_both_sides_make_every_run_borderline(tmp_path, monkeypatch):
    values = [0.866, 0.868, 0.874, 0.871, 0.707]  # 1xH100's 'large copies come close', five runs
    recorded(tmp_path, monkeypatch, {"1xA": {"close": values}}, {"close": (0.0, 0.8, "above")})
    for value in [
        *values,
        2.0,
    ]:  # the extremes too, and a run far above: the kind showed both sides
        comparison = claims.compare(claims.Value(value, 0.003), 0.8, holds_if="above")
        row = claims.ClaimsTable("01_x").add(
            "close", source="s", measured="m", run=run_on("1xA"), holds=comparison
        )
        assert row.verdict == claims.BORDERLINE and row.comparison.borderline() == "runs", value
    other = claims.ClaimsTable("01_x").add(
        "close",
        source="s",
        measured="m",
        run=run_on("1xA"),
        holds=claims.compare(claims.Value(0.9, 0.003), 0.6, holds_if="above"),
    )
    assert other.verdict == claims.HOLDS  # another threshold is another test: not its history
    assert other.comparison.runs == () and other.comparison.band == 0.0


def test_a_first_run_on_a_kind_borrows_the_move_of_the_kinds_run_several_times(
    tmp_path, monkeypatch
):
    """The issue's 2xH100 example: 02's "non_blocking is an effective choice" read 0.927, then
    1.131, against 1.1. 1xH100's runs of 0.94 to 1.43 moved it by a factor 1.52 (a band of half
    that range, as a factor: ln(1.43 / 0.94) / 2); the first run on 2xH100 is borderline by it
    before a second run shows the flip."""
    band = math.log(1.4273 / 0.9419) / 2
    recorded(
        tmp_path,
        monkeypatch,
        {"1xH100": {"effective": [1.185, 1.201, 1.28, 1.112, 0.9419, 1.4273]}},
        {"effective": (band, 1.1, "above")},
    )
    for value in (0.927, 1.131):
        row = claims.ClaimsTable("01_x").add(
            "effective",
            source="s",
            measured="m",
            holds=claims.compare(claims.Value(value, 0.01, "x"), 1.1, holds_if="above"),
            run=run_on("2xH100"),
        )
        assert row.verdict == claims.BORDERLINE and row.comparison.borderline() == "band", value
        assert row.comparison.evidence() == "runs elsewhere differ by a factor 1.23"
    table = claims.ClaimsTable("01_x")
    far = table.add(
        "effective",
        source="s",
        measured="m",
        holds=claims.compare(claims.Value(1.5, 0.01, "x"), 1.1, holds_if="above"),
        run=run_on("2xH100"),
    )
    assert far.verdict == claims.HOLDS  # 1.5 is a factor 1.36 above 1.1: beyond the band
    # the index row carries the evidence, and the truth check recomputes the verdict from it
    near = claims.compare(claims.Value(1.131, 0.01, "x"), 1.1, holds_if="above")
    row_of_index = {
        "value": 1.131,
        "spread": 0.01,
        "unit": "x",
        "threshold": 1.1,
        "holds_if": "above",
    }
    assert claims.verdict_of({**row_of_index, "runs": [1.131], "band": band}) == claims.BORDERLINE
    assert claims.verdict_of({**row_of_index, "runs": [1.131], "band": 0.0}) == claims.HOLDS
    assert claims.verdict_of({**row_of_index, "runs": [1.0, 1.131], "band": band}) == (
        claims.BORDERLINE
    )  # two runs on this kind: their own sides decide, not the band
    assert near.verdict == claims.HOLDS  # without the runs: its own noise alone


def test_a_band_is_a_factor_for_a_ratio_or_a_time_and_a_difference_otherwise():
    ratio = claims.Comparison(claims.Value(3.0, unit="x"), 2.0, "below", band=math.log(1.4))
    assert ratio.in_factors() and ratio.distance(3.0) == pytest.approx(math.log(1.5))
    assert ratio.verdict == claims.DOES_NOT_HOLD  # 3 is a factor 1.5 above 2: beyond x1.4
    near = claims.Comparison(claims.Value(2.7, unit="x"), 2.0, "below", band=math.log(1.4))
    assert near.verdict == claims.BORDERLINE  # a factor 1.35
    assert ratio.distance(0.0) == -math.inf  # 0 lies infinitely far below a positive ratio
    assert claims.Comparison(claims.Value(0.5, unit="ms"), 10.0, "below").in_factors()
    # a share near 0 moved from 0.00005 to 0.056 (x1000) but never came near 0.2: a difference
    share = claims.Comparison(claims.Value(0.0068), 0.2, "below", band=0.028)
    assert not share.in_factors() and share.verdict == claims.HOLDS
    signed = claims.Comparison(claims.Value(-3.0, unit="us"), -10.0, "above", band=5.0)
    assert not signed.in_factors() and signed.distance(-3.0) == 7.0
    assert signed.verdict == claims.HOLDS
    closer = claims.Comparison(claims.Value(-6.0, unit="us"), -10.0, "above", band=5.0)
    assert closer.verdict == claims.BORDERLINE
    assert closer.evidence() == "runs elsewhere differ by ± 5.0"


def test_a_verdict_stated_outside_the_table_is_the_tables_and_goes_to_the_index(
    tmp_path, monkeypatch
):
    recorded(tmp_path, monkeypatch, {"1xA": {"twice": [3.0, 1.5]}})
    out = tmp_path / "index.jsonl"
    monkeypatch.setenv("COURSE_INDEX_OUT", str(out))
    run = run_on("1xA")
    comparison = claims.judged(claims.within(claims.Value(3.0, 0.01), 1, 2), run, "01_x", "twice")
    assert claims.stated(comparison, run) == claims.BORDERLINE  # runs 1.5 and 3 straddle 2
    row = claims.ClaimsTable("01_x").add(
        "twice", source="s", measured="m", holds=comparison, run=run
    )
    assert row.verdict == claims.BORDERLINE
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["kind"], r["name"], r["verdict"]) for r in written] == [
        ("stated", "twice", claims.BORDERLINE),
        ("claim", "twice", claims.BORDERLINE),
    ]
    with pytest.raises(TypeError, match="judged"):
        claims.stated(claims.within(claims.Value(3.0, 0.01), 1, 2), run)


@pytest.mark.parametrize(
    "value, spread, text",
    [
        (0.249851, 7.2e-07, "0.2499 x ± <0.0001"),  # no more than 4 significant digits of the value
        (0.9401, 0.0004, "0.9401 x ± 0.0004"),
        (1.0040, 0.0003, "1.004 x ± <0.001"),
        (2.03, 0.317, "2.03 x ± 0.32"),  # 3 digits of the value, one of the spread
        (10105, 544, "10105 x ± 544"),
        (0.00845, 0.00077, "0.00845 x ± 0.00077"),
        (33.52, 0.0, "33.5 x ± 0.0"),  # no spread at all is not 'below' anything
    ],
)
def test_a_value_shows_at_most_four_digits_and_a_spread_below_them_as_such(value, spread, text):
    assert str(claims.Value(value, spread, "x")) == text


def test_a_value_whose_samples_were_all_alike_says_so_instead_of_plus_minus_zero():
    assert str(claims.Value(0.0, 0.0, "", 2)) == "0 in every sample"
    assert str(claims.Value(0.5, 0.0, "x", 5)) == "0.500 x in every sample"
    assert (
        str(claims.Value(2.0, 0.0, "x")) == "2.00 x ± 0.00"
    )  # samples not known: the spread as it is


@pytest.mark.parametrize(
    "values, kind, words, plateau_from",
    [
        ([100, 100, 100, 100], "levels off", "levels off from 1 MiB on, at 100 to 100 GB/s", 0),
        (
            [10, 10, 105, 100, 100],
            "levels off",
            "levels off from 16 MiB on, at 100 to 105 GB/s",
            2,
        ),  # 5% is flat
        (
            [10, 50, 50, 100],
            "uneven",
            "does not settle at the largest sizes (50.0, 50.0, 100 GB/s at 4 MiB, 16 MiB and 64 MiB)",
            None,
        ),
        (
            [10, 20, 105, 100],
            "still rising",
            "is still rising at the largest sizes (20.0, 105, 100 GB/s at 4 MiB, 16 MiB and 64 MiB)",
            None,
        ),
        (
            [50, 152, 87, 235, 268],
            "still rising",
            "is still rising at the largest sizes (87.0, 235, 268 GB/s at 16 MiB, 64 MiB and 256 MiB), "
            "after a dip from 152 GB/s at 4 MiB to 87.0 GB/s at 16 MiB",
            None,
        ),  # 06 on 2xH100: reduce_scatter's fall before its rise is said
        (
            [100, 90, 98, 98, 98],
            "levels off",
            "levels off from 16 MiB on, at 98.0 to 98.0 GB/s (after a dip from "
            "100 GB/s at 1 MiB to 90.0 GB/s at 4 MiB)",
            2,
        ),
        (
            [10, 100, 95],
            "uneven",
            "does not settle at the largest sizes (10.0, 100, 95.0 GB/s at 1 MiB, 4 MiB and 16 MiB)",
            None,
        ),  # 5% below the peak is not yet a fall
    ],
)
def test_describe_curve_at_its_boundaries(values, kind, words, plateau_from):
    sizes = [2**20 * 4**i for i in range(len(values))]
    assert claims.describe_curve(sizes, values) == claims.CurveShape(kind, words, plateau_from)


@pytest.mark.parametrize("tolerance", [0, 1, 1.5, -0.1])
def test_describe_curve_takes_a_tolerance_strictly_between_0_and_1(tolerance):
    with pytest.raises(
        ValueError, match=rf"^tolerance is a share between 0 and 1, e.g. 0.05; got {tolerance!r}$"
    ):
        claims.describe_curve([1, 2, 3], [1, 2, 3], tolerance=tolerance)
    with pytest.raises(
        ValueError, match="^describe_curve needs as many sizes as values, at least 3 of each$"
    ):
        claims.describe_curve([1, 2, 3, 4], [1, 2, 3])


def test_what_we_see_prints_its_sentences_in_plain_text_outputs():
    """`jupyter execute` logs and text exports show text/plain: the sentences, never <WhatWeSee at 0x...>."""
    from IPython.core.formatters import PlainTextFormatter

    seen = claims.WhatWeSee("01_x").say("It took 2.0 ms.")
    seen.check("one sync", True, "1 call")
    text = "**What we see**: It took 2.0 ms.\n- ✓ as expected: one sync (1 call)"
    assert repr(seen) == text and PlainTextFormatter()(seen) == text


def test_the_readme_and_00_teach_the_borderline_rule_the_code_applies():
    """The README quotes ``claims.BORDERLINE_RULE`` (its 1% computed from ``SPREAD_FLOOR``), and
    00 prints it from the code rather than restating it."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = " ".join(line.lstrip("> ") for line in (root / "README.md").read_text().splitlines())
    assert " ".join(claims.BORDERLINE_RULE.split()) in " ".join(readme.split())
    assert f"at least {claims.SPREAD_FLOOR:.0%} of the threshold" in claims.BORDERLINE_RULE
    cells = json.loads((root / "notebooks" / "00_start_here.ipynb").read_text())["cells"]
    assert any("print(claims.BORDERLINE_RULE)" in "".join(c["source"]) for c in cells)


def test_worded_says_the_words_of_each_verdict_and_in_words_its_side():
    words = ("holds", "does not", "borderline")
    assert claims.worded(claims.HOLDS, *words) == "holds"
    assert claims.worded(claims.DOES_NOT_HOLD, *words) == "does not"
    assert claims.worded(claims.BORDERLINE, *words) == "borderline"
    assert (
        claims.compare(claims.Value(3.0, 0.1, "x"), 0.5, holds_if="below").in_words() == "below 0.5"
    )
    assert claims.within(claims.Value(1.0, 0.01, "x"), 0.9, 1.1).in_words() == "between 0.9 and 1.1"


def test_an_infinite_replayed_value_still_reaches_the_index(tmp_path, monkeypatch):
    out = tmp_path / "rows.jsonl"
    monkeypatch.setenv("COURSE_INDEX_OUT", str(out))
    header = {"machine": {"machine": "2xH200", "gpus": []}, "params": {}, "date": "2026"}
    table = claims.ClaimsTable("nb")
    infinite = claims.compare(claims.Value(math.inf), 2, holds_if="above")
    table.add("c", source="s", measured="m", holds=infinite, run=records.Run(1, False, header))
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["value"] == math.inf and row["verdict"] == claims.HOLDS


def test_the_claims_table_shows_what_was_measured_and_a_note_only_for_borderline():
    table = claims.ClaimsTable("nb")
    table.add("c", source="s", measured="3.0 GB/s", holds=True)
    shown = table.table()
    assert shown.rows[0][2] == "3.0 GB/s" and shown.caption == ""
    table.add(
        "b",
        source="s",
        measured="m",
        holds=claims.compare(claims.Value(2.0, 0.5), 2, holds_if="above"),
    )
    assert table.claims[-1].verdict == claims.BORDERLINE and table.table().caption


def test_the_claims_table_names_its_columns_and_adds_the_note_only_under_a_borderline_one():
    table = claims.ClaimsTable("nb")
    table.add("c", source="s", measured="3.0 GB/s", holds=True)
    shown = table.table()
    assert [name for name, _, _ in shown.columns] == [
        "claim",
        "source",
        "measured",
        "value ± spread",
        "holds if",
        "where",
        "verdict",
    ]
    assert shown.title == "Claims tested in nb"
    markdown = table._repr_markdown_()
    assert markdown == "### Claims tested in nb\n\n" + table.to_markdown()  # no note
    assert markdown.endswith("|") and "| measured |" in markdown
    table.add("b", source="s", measured="m", holds=claims.compare(2.0, 2, holds_if="above"))
    assert table._repr_markdown_().endswith(f"\n\n*{table.table().caption}*")


def test_a_tiny_value_shows_at_most_six_decimals():
    assert claims.Value(1.2345e-5, 1e-7).decimals() == 6
    assert claims.Value(1.2345e-5, 1e-7).number() == "0.000012"
    assert claims.Value(0.0, 0.0).decimals() == 0
    assert claims.Value(123.456, 0.0).number() == "123"  # 3 significant digits


def test_borderline_says_why_another_run_could_call_it_the_other_way():
    def why(value, runs=(), band=0.0, spread=0.0):
        return claims.Comparison(
            claims.Value(value, spread), 10.0, "above", runs, band
        ).borderline()

    assert why(10.05) == "noise"  # within 1% of the threshold
    assert why(11.0, spread=1.0) == "noise"  # within its own spread
    assert why(12.0, runs=(9.0,)) == "runs"  # another run fell on the other side
    assert why(12.0, runs=(10.0,)) == "runs"  # one exactly at the threshold counts too
    assert why(12.0, runs=(11.0,)) is None
    assert why(12.0, band=2.0) == "band"  # runs elsewhere differ by as much
    assert why(12.0, band=1.9) is None


def test_a_rows_verdict_reads_its_unit_to_measure_the_band():
    row = {"value": 11.0, "threshold": 10.0, "holds_if": "above", "band": 0.5}
    assert claims.verdict_of(row) == claims.HOLDS  # no unit: 1 above, beyond a band of 0.5
    assert claims.verdict_of(row | {"unit": "x"}) == claims.BORDERLINE  # a factor 1.1 < e^0.5


@pytest.mark.parametrize(
    "threshold, text",
    [
        (0, "0"),
        (0.005, "0.005"),
        (0.8, "0.8"),
        (1.2345, "1.23"),
        (12.345, "12.35"),  # 4 digits from 10 on
        (2500.4, "2500"),  # whole from 1000 on
        (9999.4, "9999"),
        (1e4, "1e+04"),  # 5 digits and more in powers of ten
        (123456.0, "1.23e+05"),
        (-2.5, "-2.5"),
    ],
)
def test_a_threshold_is_written_as_a_reader_would(threshold, text):
    comparison = claims.compare(claims.Value(1.0), threshold, holds_if="above")
    assert comparison.holds_if_text() == f"> {text}" and comparison.in_words() == f"above {text}"
    below = claims.compare(claims.Value(1.0), threshold, holds_if="below")
    assert below.holds_if_text() == f"< {text}"
