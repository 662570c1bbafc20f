"""Notebook 00's analysis (helpers/lessons/start.py) on the recordings of every recorded machine."""

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt  # conftest.py has chosen the Agg backend
import pytest

from helpers import claims, config, hardware, records, tables, timing, trace
from helpers.lessons import start

NOTEBOOK = "00_start_here"
CURVES = records.recorded_runs(NOTEBOOK, "first_bandwidth_curve")
TIMELINES = records.recorded_runs(NOTEBOOK, "first_timeline")
MACHINES = records.recorded_runs(NOTEBOOK, "gpu_machine_report")


def test_every_machine_that_recorded_00_is_tested():
    gaps = records.gap_machines(NOTEBOOK, "first_bandwidth_curve")
    assert len(CURVES) >= 2 and CURVES.keys() | gaps == TIMELINES.keys() == MACHINES.keys()


def _gbps(text):
    return [float(x) for x in re.findall(r"([\d.]+) GB/s", text)]


@pytest.mark.parametrize("machine", sorted(CURVES))
def test_the_curve_sentences_state_the_smallest_and_best_rates_and_the_half_point(machine):
    run = CURVES[machine]
    rates = [t.gbps for t in run.value]
    seen = start.see_curve(run)
    first = seen.sentences[0]
    smallest, best = _gbps(first)[:2]
    assert smallest == pytest.approx(rates[0], rel=5e-3) and best == pytest.approx(
        max(rates), rel=5e-3
    )
    half = next(s for s, r in zip(run.params["sizes"], rates, strict=True) if r >= max(rates) / 2)
    assert first.endswith(f"at {timing.format_bytes(half)}.")
    assert (
        seen.sentences[1]
        == f"Pinned H2D {claims.describe_curve(run.params['sizes'], rates).words}."
    )
    assert start.curve_facts(run).best == max(rates)


def test_a_curve_still_rising_says_it_found_no_limit_and_a_dip_is_named():
    sizes = [2**12, 2**14, 2**16, 2**18, 2**20]
    rates = [1.0, 5.0, 4.0, 10.0, 20.0]
    rising = [
        timing.Timing([n / r / 1e9] * 3, "cuda events", n)
        for n, r in zip(sizes, rates, strict=True)
    ]
    run = records.Run(
        rising,
        False,
        {"machine": {"machine": "1xFAKE"}, "params": {"sizes": sizes}, "date": "2026"},
    )
    text = " ".join(start.see_curve(run).sentences)
    assert "has not found the link's limit" in text
    assert "dips from 5 GB/s at 16 KiB to its low point, 4 GB/s at 64 KiB" in text
    assert "256 KiB is timed the same way (1 copy per sample) and reaches 10 GB/s" in text
    run.value[-1] = run.value[-2] = timing.Timing([2**16 / 4e9] * 3, "cuda events", 2**16)
    run.params["sizes"][-2:] = [2**16, 2**16]  # nothing after the low point recovers
    assert "Nothing on this page shows why the rate dips" in " ".join(
        start.see_curve(run).sentences
    )


@pytest.mark.parametrize("machine", sorted(TIMELINES))
def test_the_timeline_sentence_gives_the_overlap_ratio_and_the_matching_words(machine):
    run = TIMELINES[machine]
    intervals = run.value.intervals
    expected = trace.overlap_ratio(
        trace.select(intervals, kind="memcpy"), trace.select(intervals, kind="kernel")
    )
    (sentence,) = start.see_timeline(run).sentences
    assert f"{expected:.0%} of the shorter activity" in sentence
    words = (
        "ran beside the kernel"
        if expected >= 0.9
        else "only in part"
        if expected > 0.1
        else "did not overlap"
    )
    assert words in sentence


@pytest.mark.parametrize("machine", sorted(CURVES))
def test_a_rising_curve_says_no_limit_was_found_only_when_its_last_step_rose(machine):
    """2xH200: 43.0, 54.1, 55.3 GB/s reads "still rising" because of the 16 MiB dip, while its
    last step rose 2.3%, within what is called flat: no sentence may say the sweep found no limit."""
    run = CURVES[machine]
    rates = [t.gbps for t in run.value]
    text = " ".join(start.see_curve(run).sentences)
    rising = claims.describe_curve(run.params["sizes"], rates).kind == "still rising"
    last_rise = rates[-1] / rates[-2] - 1
    assert ("has not found the link's limit" in text) == (rising and last_rise > start.FLAT)
    assert ("may be levelling off" in text) == (rising and last_rise <= start.FLAT)
    if "may be levelling off" in text:
        assert f"differ by {last_rise:.1%}" in text


def test_a_curve_rising_only_before_its_last_step_says_it_may_level_off():
    sizes = [2**12, 2**14, 2**16, 2**18]
    rates = [1.0, 10.0, 20.0, 20.6]  # the rise is before the last two sizes, which agree within 5%
    run = records.Run(
        [
            timing.Timing([n / r / 1e9] * 3, "cuda events", n)
            for n, r in zip(sizes, rates, strict=True)
        ],
        False,
        {"machine": {"machine": "1xFAKE"}, "params": {"sizes": sizes}, "date": "2026"},
    )
    text = " ".join(start.see_curve(run).sentences)
    assert "still rising" in text and "has not found" not in text
    assert "differ by 3.0%, within the 5% called flat" in text


@pytest.mark.parametrize("machine", sorted(CURVES))
def test_the_claims_table_decides_on_the_ratio_and_the_link_share(machine):
    curve, report = CURVES[machine], MACHINES[machine]
    table = start.claims_table(curve, report)
    small, large = table.claims
    smallest, best = (
        claims.measured(curve.value[0], as_rate=True),
        max((claims.measured(t, as_rate=True) for t in curve.value), key=lambda v: v.value),
    )
    assert small.comparison.value.value == pytest.approx(smallest.value / best.value)
    assert (
        small.verdict == claims.compare(claims.ratio(smallest, best), 0.1, holds_if="below").verdict
    )
    gpu0 = report.value["gpus"][0]
    link = hardware.pcie_theoretical_gbps(
        gpu0.get("pcie_gen_current"), gpu0.get("pcie_width_current")
    )
    if link:
        assert large.comparison.value.value == pytest.approx(curve.value[-1].gbps / link, rel=1e-6)
    else:
        assert large.verdict == claims.NOT_TESTABLE


def test_the_plan_counts_the_notebooks_that_replay(tmp_path):
    table = tables.Table(["notebook", "experiments live", "experiments replayed", "replayed from"])
    table.add("01_a", 0, 3, "2xH200").add("02_b", 2, 0, "-").add("03_c", 1, 1, "2xH200")
    assert start.replaying_notebooks(table) == 2
    assert start.plan(tmp_path).rows == []


def test_the_plan_lists_the_courses_notebooks_from_any_folder(monkeypatch, tmp_path):
    """An executed copy runs in a folder of its own: the plan still lists all seven notebooks."""
    shutil.copy(config.notebooks_dir() / "00_start_here.ipynb", tmp_path)
    monkeypatch.chdir(tmp_path)
    course = sorted(p.stem for p in config.notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
    assert [row[0] for row in start.plan().rows] == course and len(course) == 7


@pytest.mark.parametrize("machine", sorted(CURVES))
def test_the_dip_is_said_with_its_samples_and_the_copies_per_sample_around_it(machine):
    run = CURVES[machine]
    sizes, rates = run.params["sizes"], [t.gbps for t in run.value]
    text = " ".join(start.see_curve(run).sentences)
    dips = [i for i in range(len(rates) - 1) if rates[i + 1] < rates[i] * 0.95]
    if not dips or claims.describe_curve(sizes, rates).kind == "levels off":
        assert "dips from" not in text
        return
    i = dips[0]
    j = min(range(i + 1, len(rates)), key=rates.__getitem__)  # the low point, not the first drop
    got = [sizes[j] / s / 1e9 for s in run.value[j].samples_s]
    assert (
        f"to its low point, {rates[j]:.3g} GB/s at {timing.format_bytes(sizes[j])}, where its "
        f"{len(got)} samples ranged from {min(got):.3g} to {max(got):.3g} GB/s" in text
    )
    same = [
        k
        for k in range(j + 1, len(rates))
        if rates[k] >= rates[i] * 0.95
        and run.value[k].calls_per_sample == run.value[j].calls_per_sample
    ]
    assert ("the way of timing alone does not explain the dip" in text) == bool(same)
    assert "the dip comes with this way of timing" not in text
    assert "noisy" not in text


def test_the_sizes_line_says_a_replay_is_full_size(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    monkeypatch.setenv("COURSE_QUICK", "1")
    assert start.sizes_line() == (
        "every number below replays a full-size recording (quick mode changes only what runs live)"
    )
    monkeypatch.delenv("COURSE_QUICK")
    assert start.sizes_line() == "every number below replays a full-size recording"
    monkeypatch.setattr(hardware, "gpu_count", lambda: 1)
    monkeypatch.delenv("COURSE_REPLAY", raising=False)
    assert start.sizes_line() == "full size"
    monkeypatch.setenv("COURSE_QUICK", "1")
    assert start.sizes_line().startswith("quick mode: what runs here uses smaller sizes")


def _machine_with(report: records.Run, **gpu) -> records.Run:
    """A recorded machine report whose first GPU is edited (issue 36 item 4: hardware nobody
    recorded)."""
    value = {**report.value, "gpus": [{**report.value["gpus"][0], **gpu}]}
    return records.Run(value, report.live, report.header)


@pytest.mark.parametrize("gen", [3, 4])
def test_the_link_claim_uses_the_recorded_pcie_generation(gen):
    machine = sorted(CURVES)[0]
    report = _machine_with(MACHINES[machine], pcie_gen_current=gen, pcie_width_current=16)
    large = start.claims_table(CURVES[machine], report).claims[1]
    link = hardware.pcie_theoretical_gbps(gen, 16)
    assert (
        f"PCIe gen {gen} x16, {link:.3g} GB/s" in large.measured and "gen 5" not in large.measured
    )
    assert large.verdict == claims.NOT_TESTABLE  # the recorded 55 GB/s cannot cross gen 3 or 4 x16


def test_an_unknown_gpu_without_a_reported_link_is_not_testable_and_named():
    machine = sorted(CURVES)[0]
    report = _machine_with(
        MACHINES[machine], name="NVIDIA Future GPU", pcie_gen_current=None, pcie_width_current=None
    )
    assert hardware.ceiling_gbps(report.value) == hardware.UNKNOWN_GPU_CEILING_GBPS
    assert "NVIDIA Future GPU" in hardware.report(report.value)
    small, large = start.claims_table(CURVES[machine], report).claims
    assert large.verdict == claims.NOT_TESTABLE and "not reported" in large.measured
    assert small.verdict != claims.NOT_TESTABLE  # the small-copy claim needs no datasheet


def test_a_rate_above_the_reported_link_is_a_measurement_problem_not_a_share():
    machine = sorted(CURVES)[0]  # 55 GB/s against a gen 3 x16 link's 15.8 GB/s
    report = _machine_with(MACHINES[machine], pcie_gen_current=3, pcie_width_current=16)
    large = start.claims_table(CURVES[machine], report).claims[1]
    assert large.verdict == claims.NOT_TESTABLE and "a measurement problem" in large.measured


def test_the_curve_table_is_in_us_and_gbps_and_its_plot_names_the_machine():
    run = CURVES[sorted(CURVES)[0]]
    table = start.show_curve(run)
    units = {name: unit for name, unit, _ in table.columns}
    assert units["median"] == "us" and units["bandwidth"] == "GB/s"
    assert [row[0] for row in table.rows] == run.params["sizes"]
    (ax,) = plt.gcf().axes
    assert ax.get_title() == f"Pinned H2D copy - {run.machine} (replayed)"
    plt.close("all")


def test_an_overlap_of_exactly_a_tenth_is_not_called_partial():
    run = TIMELINES[sorted(TIMELINES)[0]]
    copy = trace.Interval("memcpy", "copy", 0.0, 10.0, device=0, stream=1)
    kernel = trace.Interval("kernel", "spin", 9.0, 100.0, device=0, stream=2)
    tenth = records.Run(SimpleNamespace(intervals=[copy, kernel]), False, run.header)
    (sentence,) = start.see_timeline(tenth).sentences
    assert "10% of the shorter activity" in sentence and "did not overlap the kernel" in sentence


def test_the_link_share_is_a_fraction_of_the_raw_rate_with_its_samples():
    machine = sorted(CURVES)[0]
    report = _machine_with(MACHINES[machine], pcie_gen_current=5, pcie_width_current=16)
    share = start.claims_table(CURVES[machine], report).claims[1].comparison.value
    assert share.unit == "of the raw rate"
    assert share.samples == len(CURVES[machine].value[-1].samples_s)


def test_the_plan_says_where_each_notebooks_replays_come_from(monkeypatch, tmp_path):
    monkeypatch.setattr(hardware, "gpu_count", lambda: 0)
    shutil.copy(Path(__file__).parents[1] / "notebooks" / "01_pinned_memory.ipynb", tmp_path)
    ((_, live, replayed, source),) = start.plan(tmp_path).rows
    assert live == 0 and replayed > 0
    assert source.split(" (")[0].split(", ")[0] in records.recorded_machine_names()


def test_the_curve_plot_names_its_series_and_the_table_its_columns():
    run = CURVES[sorted(CURVES)[0]]
    table = start.show_curve(run)
    assert table.headers == [
        "size",
        "median (us)",
        "IQR / median",
        "samples",
        "bandwidth (GB/s)",
    ]
    assert [row[3] for row in table.rows] == [len(t.samples_s) for t in run.value]
    assert table.caption == "CUDA events; decimal GB/s"
    (ax,) = plt.gcf().axes
    labels = ax.get_legend_handles_labels()[1]
    assert "pinned host -> GPU" in labels and any("best measured" in x for x in labels)
    plt.close("all")


def test_a_curve_whose_sizes_do_not_match_its_timings_is_refused():
    run = CURVES[sorted(CURVES)[0]]
    short = records.Run(
        run.value,
        run.live,
        {**run.header, "params": {**run.params, "sizes": run.params["sizes"][:1]}},
    )
    with pytest.raises(ValueError):
        start.curve_facts(short)


@pytest.mark.parametrize("machine", sorted(TIMELINES))
def test_the_timeline_is_drawn_under_the_machines_title_and_names_its_trace(machine, capsys):
    run = TIMELINES[machine]
    start.show_timeline(run)
    (ax,) = plt.gcf().axes
    assert ax.get_title() == f"Copy beside a kernel - {run.machine} (replayed)"
    printed = capsys.readouterr().out
    assert printed.startswith("the Chrome trace, openable in https://ui.perfetto.dev :")
    assert Path(run.value.chrome_trace.path).name in printed
    plt.close("all")


def test_an_overlap_of_exactly_nine_tenths_is_called_beside_the_kernel():
    run = TIMELINES[sorted(TIMELINES)[0]]
    copy = trace.Interval("memcpy", "copy", 0.0, 10.0, device=0, stream=1)
    kernel = trace.Interval("kernel", "spin", 1.0, 100.0, device=0, stream=2)
    nine = records.Run(SimpleNamespace(intervals=[copy, kernel]), False, run.header)
    (sentence,) = start.see_timeline(nine).sentences
    assert "90% of the shorter activity" in sentence and "ran beside the kernel" in sentence
    kernel = trace.Interval("kernel", "spin", 1.5, 100.0, device=0, stream=2)
    part = records.Run(SimpleNamespace(intervals=[copy, kernel]), False, run.header)
    (sentence,) = start.see_timeline(part).sentences
    assert "only in part" in sentence


def test_a_rate_within_its_spread_of_the_link_still_gets_a_share(monkeypatch):
    """The largest copy's rate minus its spread decides: a rate a little above the raw rate, but
    not by more than its spread, is noise around the link, so its share is judged."""
    machine = sorted(CURVES)[0]
    curve = CURVES[machine]
    largest = claims.measured(curve.value[-1], as_rate=True)
    assert largest.spread > 0
    for link, testable in (
        (largest.value - largest.spread / 2, True),
        (largest.value - largest.spread, True),
        (largest.value - 2 * largest.spread, False),
    ):
        monkeypatch.setattr(hardware, "pcie_theoretical_gbps", lambda gen, width, x=link: x)
        large = start.claims_table(curve, MACHINES[machine]).claims[1]
        assert (large.verdict != claims.NOT_TESTABLE) == testable, link
        assert ("share shown" in large.measured) == testable


@pytest.mark.parametrize("machine", sorted(CURVES))
def test_the_expectations_are_checked_on_the_curve_and_the_timeline(machine):
    run = CURVES[machine]
    rates, sizes = [t.gbps for t in run.value], run.params["sizes"]
    h = next(i for i, r in enumerate(rates) if r >= max(rates) / 2)
    b = rates.index(max(rates))
    slower = (rates[h] / rates[0]) ** (1 / max(h, 1)) > (max(rates) / rates[h]) ** (
        1 / max(b - h, 1)
    )
    (check,) = start.see_curve(run).checks
    assert check.statement.startswith("the rate climbs") and check.holds == slower
    assert f"up to {timing.format_bytes(sizes[h])}" in check.measured
    intervals = TIMELINES[machine].value.intervals
    hidden = trace.overlap_ratio(
        trace.select(intervals, kind="memcpy"), trace.select(intervals, kind="kernel")
    )
    (check,) = start.see_timeline(TIMELINES[machine]).checks
    assert check.holds == (hidden >= 0.9) and f"{hidden:.0%} overlap" == check.measured


def test_a_curve_that_climbs_faster_at_the_end_fails_its_check():
    sizes = [2**12, 2**14, 2**16, 2**18]
    rates = [1.0, 1.5, 2.0, 20.0]  # half the best first at 256 KiB: 2.7x per step, then none
    run = records.Run(
        [
            timing.Timing([n / r / 1e9] * 3, "cuda events", n)
            for n, r in zip(sizes, rates, strict=True)
        ],
        False,
        {"machine": {"machine": "1xFAKE"}, "params": {"sizes": sizes}, "date": "2026"},
    )
    (check,) = start.see_curve(run).checks
    assert not check.holds and "✗" in start.see_curve(run).to_markdown()


@pytest.mark.parametrize("machine", sorted(CURVES))
def test_the_climb_check_names_the_fall_on_the_way_and_the_dip_its_interquartile_range(machine):
    """A ✓ on "climbs overall" does not hide a dip: its measured words say where the rate fell;
    the dip's width is the IQR over the median, called so (the claims table's ± is half of it)."""
    run = CURVES[machine]
    sizes, rates = run.params["sizes"], [t.gbps for t in run.value]
    (check,) = start.see_curve(run).checks
    assert check.statement == "the rate climbs with size overall, more and more slowly"
    dips = [i for i in range(len(rates) - 1) if rates[i + 1] < rates[i] * start.DIP]
    assert ("not at every step" in check.measured) == bool(dips)
    if dips:
        i = dips[0]
        j = min(range(i + 1, len(rates)), key=rates.__getitem__)
        at = f"it falls from {rates[i]:.3g} GB/s at {timing.format_bytes(sizes[i])} to "
        assert at + f"{rates[j]:.3g} GB/s at {timing.format_bytes(sizes[j])}" in check.measured
    text = " ".join(start.see_curve(run).sentences)
    assert "(spread " not in text
    if "dips from" in text:
        j = min(range(dips[0] + 1, len(rates)), key=rates.__getitem__)
        assert f"(interquartile range {run.value[j].spread:.1%} of the median)" in text


@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_the_plan_title_counts_gpus_in_words(monkeypatch, tmp_path, gpus):
    monkeypatch.setattr(hardware, "gpu_count", lambda: gpus)
    title = start.plan(tmp_path).title
    assert title == f"this machine has {gpus} GPU{'' if gpus == 1 else 's'}" and "(s)" not in title


def test_the_set_up_cell_shows_the_results_folder_from_the_clone():
    """An absolute path differs between copies of a page (the site builds elsewhere)."""
    cells = json.loads((config.notebooks_dir() / f"{NOTEBOOK}.ipynb").read_text())["cells"]
    (setup,) = [c for c in cells if "recordings are read from" in "".join(c["source"])]
    assert "config.shown_path(config.results_dir())" in "".join(setup["source"])
