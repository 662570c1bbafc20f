"""Notebook 05's analysis (helpers/lessons/peer/) on the
recordings of every recorded machine, and on synthetic values for the branches they do not reach.

Each sentence's numbers and words are checked against values this file computes itself from
``run.value``. A machine that lacks a recording (results/<machine>/gaps.json) is tested with the
machine its replay takes it from, as the notebook does.
"""

import copy
import dataclasses
import re
import statistics
import types

import matplotlib.pyplot as plt  # conftest.py has chosen the Agg backend
import pytest

import helpers.lessons.peer.links as peer_links
import helpers.lessons.peer.overlap as peer_overlap
import helpers.lessons.peer.table as peer_table
from helpers import claims, config, hardware, records, timing, trace
from helpers.hardware import topology
from helpers.lessons import peer
from helpers.lessons.peer import copies, devices

NOTEBOOK = "05_device_to_device"
LINKS = records.recorded_runs(NOTEBOOK, "peer_access_and_links")
CURRENT = records.recorded_runs(NOTEBOOK, "current_device_and_context")
SAME = records.recorded_runs(NOTEBOOK, "same_gpu_copy")
PEER = records.recorded_runs(NOTEBOOK, "peer_copy_bandwidth")
BOTH = records.recorded_runs(NOTEBOOK, "peer_copy_both_ways")
PAIRS = records.recorded_runs(NOTEBOOK, "all_pairs_at_once")
LATENCY = records.recorded_runs(NOTEBOOK, "peer_copy_latency")
SEED = records.recorded_runs(NOTEBOOK, "seed000_overlap")
POSTED = records.recorded_runs(NOTEBOOK, "seed000_overlap_as_posted")
EVENTS = records.recorded_runs(NOTEBOOK, "event_across_gpus")
MACHINES = sorted(LINKS)
LANES = [
    "cuda:0 default stream",
    "cuda:0 side stream s0",
    "cuda:1 default stream",
    "cuda:1 side stream s1",
]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _or_other(runs: dict, machine: str) -> records.Run:
    """The machine's own recording, else the first other machine's (as its replay takes it)."""
    return runs.get(machine) or runs[sorted(runs)[0]]


def _run(value, **params) -> records.Run:
    return records.Run(
        value, False, {"machine": {"machine": "2xFAKE"}, "params": params, "date": "2026"}
    )


def _timing(gbps: float, nbytes: int = 2**20) -> timing.Timing:
    return timing.Timing([nbytes / (gbps * 1e9)] * 5, "cuda events", nbytes)


def _pairs(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(n) if i != j]


def _plateau_start(rates: list[float]) -> int:
    """The first of the largest sizes whose rates all lie within 5% of the largest size's."""
    start = len(rates)
    while start > 0 and abs(rates[start - 1] - rates[-1]) <= 0.05 * rates[-1]:
        start -= 1
    return min(start, len(rates) - 1)


def _rated_gbps(links: records.Run) -> float:
    """cuda:0 - cuda:1's rated one-way speed: its NVLinks x the median per-link rate nvidia-smi reports."""
    count = int(
        re.fullmatch(r"NV(\d+)", hardware.gpu_links(links.value["gpu_links"])[(0, 1)]).group(1)
    )
    return count * statistics.median(
        float(x) for x in re.findall(r"Link \d+: ([\d.]+) GB/s", links.value["nvlink_status"])
    )


def test_every_machine_that_recorded_05_is_tested():
    assert MACHINES == ["2xNVIDIA-H100-80GB-HBM3", "2xNVIDIA-H200", "4xNVIDIA-H200"]
    for runs in (SAME, PEER, BOTH, LATENCY, SEED, EVENTS):
        assert sorted(runs) == MACHINES
    assert CURRENT and PAIRS  # the 4-GPU machine replays these two from the 2-GPU one


# ---------------------------------------------------------------- 1. links


@pytest.mark.parametrize("machine", MACHINES)
def test_the_links_sentences_count_the_pairs_and_compare_the_rated_speed_with_pcie(machine, capsys):
    run = LINKS[machine]
    value, pairs = run.value, _pairs(run.value["gpus"])
    first, second = peer_links.see_links(run).sentences
    with_peer = sum(bool(value["peer_access"][i][j]) for i, j in pairs)
    assert first.startswith(
        f"{machine} has {value['gpus']} GPUs: peer access on {with_peer} of the "
        f"{len(pairs)} ordered pairs, joined by NV18"
    )
    assert (with_peer == len(pairs)) == first.endswith(
        ": every copy between them below goes straight over the link, none is staged through host memory."
    )
    rated, ratio, pcie = re.search(
        r"is (\d+) GB/s per direction, ([\d.]+) times the ([\d.]+) GB/s", second
    ).groups()
    assert int(rated) == round(_rated_gbps(run))
    assert float(pcie) == pytest.approx(min(value["pcie_gbps"]), abs=0.05)
    assert (
        float(ratio) == pytest.approx(_rated_gbps(run) / min(value["pcie_gbps"]), abs=0.05)
        and float(ratio) > 1
    )
    (nvlink,) = peer_links.see_links(run).checks  # the expectation, checked
    assert nvlink.holds == (with_peer == len(pairs))
    assert (
        nvlink.measured.count(": NV18") == len(pairs)
        and "cuda:1 -> cuda:0: NV18" in nvlink.measured
    )
    peer_links.show_links(run)
    out = capsys.readouterr().out
    assert out.count("| NV18") == len(pairs)
    assert "\x1b[" not in out and "Legend" not in out  # the machine as today's report formats it


def test_links_without_nvlink_or_peer_access_say_so(capsys):
    topo = "\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n"
    run = _run(
        {
            "gpus": 2,
            "peer_access": [[True, False], [False, True]],
            "gpu_links": topo,
            "nvlink_status": None,
            "capability": ["9.0", "9.0"],
            "pcie_gbps": [None, None],
            "report": "a fake machine",
        }
    )
    seen = peer_links.see_links(run)
    first, second, third = seen.sentences
    assert "peer access on 0 of the 2 ordered pairs, joined by SYS" in first
    assert (
        not seen.checks[0].holds
        and seen.checks[0].measured == "cuda:0 -> cuda:1: SYS, cuda:1 -> cuda:0: SYS"
    )
    run.value["peer_access"] = [[True, True], [True, True]]  # peer access over PCIe: not NVLink
    assert not peer_links.see_links(run).checks[0].holds
    run.value["peer_access"] = [[True, False], [False, True]]
    assert second.startswith("No rated speed is known for these links")
    assert third.startswith(
        "Without peer access on 2 pairs, their copies are staged through host memory (the PCIe"
    )
    peer_links.show_links(run)
    out = capsys.readouterr().out
    assert out.count("| no ") == 2 and "rated speed: SYS is not NVLink" in out
    facts = peer_links.facts(run)
    assert (facts.all_peer, facts.pcie_gbps, facts.rated_gbps, facts.link) == (
        False,
        None,
        None,
        {(0, 1): "SYS", (1, 0): "SYS"},
    )
    run.value["pcie_gbps"] = [32.0, 31.5]  # PCIe gen 5 x16 and a slower link: the slower bounds
    third = peer_links.see_links(run).sentences[2]
    assert "(at most 31.5 GB/s, the PCIe link crossed twice): what this machine shows" in third


def test_nvlink_rate_from_nvidia_smi_else_the_datasheet():
    status = "GPU 0: NVIDIA H200\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
    rate, how = peer_links.nvlink_gbps("NV18", status, "9.0")
    assert rate == pytest.approx(18 * 26.562) and "nvidia-smi" in how
    assert peer_links.nvlink_gbps("NV4", None, "8.0") == (
        pytest.approx(100.0),
        "4 links x 25.00 GB/s (NVIDIA datasheet)",
    )
    assert peer_links.nvlink_gbps("SYS", status, "9.0") == (None, "SYS is not NVLink")
    assert peer_links.nvlink_gbps("NV2", None, "1.0")[0] is None


# ---------------------------------------------------------------- 2. the current device


def _state(where: str, current: int, **changes) -> dict:
    state = {
        "where": where,
        "current_device": current,
        "empty_on": f"cuda:{current}",
        "current_stream_on": f"cuda:{current}",
        "to_cuda1_on": "cuda:1",
        "to_cuda1_correct": True,
        "to_cuda_on": f"cuda:{current}",
        "to_cuda_correct": True,
    }
    return {**state, **changes}


def _current(states: list[dict], correct: bool = True, error: str = "") -> records.Run:
    return _run(
        {
            "device_count": 2,
            "states": states,
            "stream_made_inside_device_1_on": "cuda:1",
            "operator_on_cuda1": {
                "current_device_before": 0,
                "result_on": "cuda:1",
                "current_device_after": 0,
                "correct": correct,
            },
            "mixed_devices_error": error,
            "start_device": 0,
            "restored_to": 0,
        },
        numel=1024,
    )


WHERE = [
    "at the start",
    "after torch.cuda.set_device(1)",
    "after torch.cuda.set_device(0)",
    "inside with torch.cuda.device(1)",
    "after leaving with torch.cuda.device(1)",
    "inside with torch.cuda.stream(<a stream of cuda:1>)",
    "after leaving with torch.cuda.stream(...)",
]
GOOD_STATES = [
    _state(where, current) for where, current in zip(WHERE, [0, 1, 0, 1, 0, 1, 0], strict=True)
]


@pytest.mark.parametrize("machine", sorted(CURRENT))
def test_the_current_device_sentences_count_the_states(machine, capsys):
    run = CURRENT[machine]
    value, states = run.value, run.value["states"]
    followed = sum(
        s["empty_on"] == s["current_stream_on"] == s["to_cuda_on"] == f"cuda:{s['current_device']}"
        for s in states
    )
    by = {s["where"]: s for s in states}
    decides = (
        by["after torch.cuda.set_device(1)"]["current_device"] == 1
        and by["after torch.cuda.set_device(0)"]["current_device"] == 0
        and followed == len(states)
    )
    first, second = devices.see_current_device(run).sentences
    assert first.startswith(f"In {followed} of the {len(states)} states")
    assert f"(replayed from {run.machine})" in devices.see_current_device(run)._repr_markdown_()
    assert (
        ("`torch.cuda.set_device(1)` made cuda:1" in first)
        == decides
        == devices.current_facts(run).set_device_decides
    )
    assert (
        f"landed on {by['inside with torch.cuda.device(1)']['empty_on']}; after the block, cuda:0 again"
        in first
    )
    op = value["operator_on_cuda1"]
    assert (
        f"returned its result on {op['result_on']}" in second
        and ("right values" in second) == op["correct"]
    )
    assert (f'failed: "{value["mixed_devices_error"]}"' in second) == bool(
        value["mixed_devices_error"]
    )
    to_1 = sum(s["to_cuda1_on"] == "cuda:1" for s in states)
    right = sum(s["to_cuda1_correct"] and s["to_cuda_correct"] for s in states)
    assert (
        f"landed on cuda:1 in {to_1} of {len(states)} states" in second
        and f"right in {right} of them" in second
    )
    follows, lands = devices.see_current_device(run).checks
    assert follows.holds == (followed == len(states)) and lands.holds == (
        to_1 == right == len(states)
    )
    devices.show_current_device(run)
    assert ("WRONG" in capsys.readouterr().out) == (right < len(states))


def test_set_device_that_does_not_decide_and_wrong_values_are_said():
    assert devices.current_facts(_current(GOOD_STATES)).set_device_decides
    for k, change in (
        (1, {"current_device": 0}),
        (1, {"empty_on": "cuda:0"}),
        (2, {"current_stream_on": "cuda:1"}),
    ):
        states = [dict(s, **change) if n == k else s for n, s in enumerate(GOOD_STATES)]
        run = _current(states, correct=False)
        first, second = devices.see_current_device(run).sentences
        assert (
            not devices.current_facts(run).set_device_decides
            and "did not make cuda:1 that device" in first
        )
        assert "WRONG values" in second and "raised no error" in second
        follows, lands = devices.see_current_device(run).checks
        assert (
            not follows.holds and lands.holds
        )  # one state's device="cuda" or stream left the current device


# ---------------------------------------------------------------- 3. the same-GPU copy


@pytest.mark.parametrize("machine", MACHINES)
def test_the_same_gpu_sentences_take_the_plateau_of_the_largest_sizes(machine, capsys):
    run = SAME[machine]
    sizes, rates = run.params["sizes"], [t.gbps for t in run.value]
    first, second = copies.see_same_gpu(run).sentences
    low, high, median = re.search(
        r"at (\d+) to (\d+) GB/s: we take their median, (\d+) GB/s", first
    ).groups()
    start = [timing.format_bytes(s) for s in sizes].index(
        re.search(r"largest sizes, (.+?) to", first)[1]
    )
    flat = rates[start:]
    assert all(abs(r - rates[-1]) <= 0.05 * rates[-1] for r in flat)
    assert start == 0 or abs(rates[start - 1] - rates[-1]) > 0.05 * rates[-1]
    assert (int(low), int(high), int(median)) == (
        round(min(flat)),
        round(max(flat)),
        round(statistics.median(flat)),
    )
    assert copies.same_facts(run).memory == statistics.median(flat)
    assert first.startswith(
        f"The same-GPU copy runs at {rates[0]:.0f} GB/s at {timing.format_bytes(sizes[0])}."
    )
    best = max(rates)
    assert rates.index(best) < start  # the L2 cache's bump, on every recorded machine
    assert (
        f"The best point, {best:.0f} GB/s at {timing.format_bytes(sizes[rates.index(best)])}"
        in second
    )
    assert f"above that plateau by {best / statistics.median(flat) - 1:.0%}" in second
    datasheet = hardware.ceiling_gbps(run.header["machine"])  # H100: 3350, H200: 4800
    assert first.endswith(
        f", {statistics.median(flat) / datasheet:.0%} of the {datasheet:.0f} GB/s of NVIDIA's datasheet."
    )
    l2 = run.header["machine"]["gpus"][0].get("l2_bytes")  # headers say it since issue 36
    if l2:
        assert 2 * sizes[rates.index(best)] <= l2
        assert f"within this GPU's {timing.format_bytes(l2)} L2 cache: part of it" in second
    else:
        assert "the recording does not say this GPU's L2 cache size" in second
    over = f"it is {best / datasheet:.0%} of the datasheet's memory bandwidth, which only a copy served from the cache"
    assert (over in second) == (best > datasheet) and "measurement problem" not in second
    (near,) = copies.see_same_gpu(run).checks  # the expectation: near the datasheet, small slower
    assert near.holds == (statistics.median(flat) >= 0.75 * datasheet and rates[0] < min(flat))
    assert near.measured.startswith(
        f"{statistics.median(flat):.0f} GB/s, {statistics.median(flat) / datasheet:.0%} of {datasheet:.0f}; "
    )
    copies.show_same_gpu(run)
    assert capsys.readouterr().out.count(" GB/s  (") == len(sizes)


def test_the_plateau_is_the_largest_sizes_not_the_l2_bump():
    # same-GPU copy on 2xNVIDIA-H200, GB/s at 1 MiB ... 2 GiB: 16 MiB is inflated by the L2 cache
    rates = [1049.9, 2753.5, 5068.6, 3872.5, 4154.0, 4244.8, 4240.7]
    start, low, high, figure = copies.plateau(rates)
    assert start == 4 and (low, high) == (4154.0, 4244.8) and figure == pytest.approx(4240.7)
    assert copies.plateau([1.0, 2.0, 4.0])[0] == 2  # still rising: the last size alone
    assert copies.plateau([10.0, 10.2, 10.1])[:3] == (0, 10.0, 10.2)
    with pytest.raises(ValueError, match="a plateau needs at least one rate"):
        copies.plateau([])


def _gpu_machine(name: str, l2_bytes: int | None) -> records.Run:
    """A same-GPU copy at 1 MiB to 1 GiB on one GPU of that name and L2 size: 3737 GB/s at 16 MiB
    (as an H100 ran it, over its 3350 GB/s memory), about 3000 GB/s at the largest sizes."""
    sizes = [2**20, 2**24, 2**28, 2**30]
    rates = (900.0, 3737.0, 3000.0, 3010.0)
    header = {
        "machine": {"machine": "1xFAKE", "gpus": [{"name": name, "l2_bytes": l2_bytes}]},
        "params": {"sizes": sizes},
        "date": "2026",
    }
    return records.Run(
        [_timing(r, 2 * s) for r, s in zip(rates, sizes, strict=True)], False, header
    )


def test_a_copy_in_the_l2_cache_is_said_to_be_from_the_cache_not_over_the_memory():
    first, second = copies.see_same_gpu(_gpu_machine("NVIDIA H100 80GB HBM3", 50 * 2**20)).sentences
    assert first.endswith(
        "we take their median, 3005 GB/s, as the memory's figure for a "
        "read-plus-write stream, 90% of the 3350 GB/s of NVIDIA's datasheet."
    )
    assert second == (
        "The best point, 3737 GB/s at 16 MiB, lies above that plateau by 24% (source and destination "
        "together: 32 MiB, within this GPU's 50 MiB L2 cache: part of it can have been served from the "
        "cache, not from memory); it is 112% of the datasheet's memory bandwidth, which only a copy "
        "served from the cache can exceed."
    )
    (_, small_cache) = copies.see_same_gpu(
        _gpu_machine("NVIDIA H100 80GB HBM3", 8 * 2**20)
    ).sentences
    assert "more than this GPU's 8 MiB L2 cache); it is 112%" in small_cache
    assert small_cache.endswith("which no copy can exceed: a measurement problem, not a result.")
    first, unknown = copies.see_same_gpu(_gpu_machine("NVIDIA X999", None)).sentences
    assert first.endswith("as the memory's figure for a read-plus-write stream.")  # no datasheet
    assert unknown.endswith("32 MiB, the recording does not say this GPU's L2 cache size).")


def test_a_same_gpu_curve_without_a_bump_says_so():
    sizes = [2**20, 2**22, 2**24]
    (_, second) = copies.see_same_gpu(
        _run([_timing(r) for r in (100.0, 400.0, 410.0)], sizes=sizes)
    ).sentences
    assert second == "No middle size rises above the plateau here."


# ---------------------------------------------------------------- 4. one way


@pytest.mark.parametrize("machine", MACHINES)
def test_the_one_way_sentences_give_the_plateaus_and_the_share_of_the_rated_speed(machine, capsys):
    run, same, links = PEER[machine], SAME[machine], LINKS[machine]
    sizes, value = run.params["sizes"], run.value
    seen = copies.see_peer_bandwidth(run, same, links)
    first, second, third, verdict = seen.sentences
    shape = claims.describe_curve(sizes, [t.gbps for t in value["0->1"]])
    others = len(value) - 1
    assert first == (
        f"The peer copy cuda:0 -> cuda:1 {shape.words}; "
        + (
            "so does the other direction's curve."
            if others == 1
            else f"so do the other {others} curves."
        )
    )
    flats = [[t.gbps for t in ts][_plateau_start([t.gbps for t in ts]) :] for ts in value.values()]
    peak, memory = max(t.gbps for ts in value.values() for t in ts), copies.same_facts(same).memory
    low, high, plateau, copied, ratio, best = re.search(
        r"at (\d+) to (\d+) GB/s; the same-GPU copy's plateau, (\d+) GB/s counting each byte read and "
        r"written, is (\d+) GB/s of bytes copied: ([\d.]+) times the best peer copy's (\d+) GB/s",
        second,
    ).groups()
    assert (int(low), int(high)) == (round(min(map(min, flats))), round(max(map(max, flats))))
    assert (int(plateau), int(copied), float(ratio), int(best)) == (
        round(memory),
        round(memory / 2),  # a same-GPU copy counts 2 x size: per byte copied, half
        round(memory / 2 / peak, 1),
        round(peak),
    )
    assert float(ratio) > 1  # the memory is the faster
    share = int(re.search(r"reaches (\d+)% of it", third)[1])
    assert share == round(100 * peak / _rated_gbps(links)) and share < 100
    (check,) = seen.checks
    assert check.holds == (peak < _rated_gbps(links))
    table = peer_table.claims_table(
        SEED[machine], run, EVENTS[machine], links, _or_other(CURRENT, machine), same
    )
    nvlink = next(c for c in table.claims if c.text.startswith("NVLink makes peer copies fast"))
    assert verdict == (
        f"The streams article's “{nvlink.text}”, as the claims table below judges it: "
        f"**{nvlink.verdict}**."
    )  # the claims table's verdict, not a second one
    copies.show_peer_bandwidth(run, same, links)
    out = capsys.readouterr().out
    big = min(t.gbps for ts in value.values() for s, t in zip(sizes, ts, strict=True) if s >= 2**28)
    assert f"one at a time; the slowest at 256 MiB and up, over all pairs: {big:.1f}\n" in out
    assert out.count("cuda:") >= len(value)


def _peer_run(curves: dict[str, list[float]], sizes: list[int]) -> records.Run:
    return _run(
        {
            pair: [_timing(r, s) for r, s in zip(rates, sizes, strict=True)]
            for pair, rates in curves.items()
        },
        sizes=sizes,
        repeats=5,
    )


def _links(link: str, n: int = 2, status: str | None = None) -> records.Run:
    header = "\t" + "\t".join(f"GPU{j}" for j in range(n))
    rows = [f"GPU{i}\t" + "\t".join(" X " if i == j else link for j in range(n)) for i in range(n)]
    return _run(
        {
            "gpus": n,
            "peer_access": [[True] * n for _ in range(n)],
            "gpu_links": "\n".join([header, *rows]),
            "nvlink_status": status,
            "capability": ["9.0"] * n,
            "pcie_gbps": [32.0] * n,
            "report": "fake",
        }
    )


SIZES = [2**20, 2**22, 2**24, 2**26]
SAME_FAKE = _run(
    [_timing(r, 2 * s) for r, s in zip((900.0, 2500.0, 3000.0, 3000.0), SIZES, strict=True)],
    sizes=SIZES,
    repeats=5,
)


def test_one_way_curves_of_other_kinds_and_a_link_without_a_rate():
    flat, rising = [10.0, 40.0, 50.0, 50.0, 50.0], [10.0, 20.0, 40.0, 60.0, 80.0]
    curves = {"0->1": flat, "0->2": rising, "1->0": flat, "1->2": flat, "2->0": flat, "2->1": flat}
    seen = copies.see_peer_bandwidth(
        _peer_run(curves, [*SIZES, 2**28]), SAME_FAKE, _links("SYS", 3)
    )
    first, _, third = seen.sentences
    assert "levels off" in first and first.endswith("; 4 of the other 5 curves level off too.")
    assert not seen.checks  # no NVLink's rated speed to check against
    assert third == (  # a PCIe path (SYS): its raw rate, 32 GB/s in _links, bounds a copy
        "The dashed line is the raw PCIe rate (the link is not NVLink) of the link cuda:0 - cuda:1, "
        "32 GB/s per direction: the best peer copy reaches 250% of it, above what the link can "
        "carry: a measurement problem, not a result."
    )
    unknown = _links("SYS", 3)
    unknown.value["pcie_gbps"] = [None] * 3
    third = copies.see_peer_bandwidth(
        _peer_run(curves, [*SIZES, 2**28]), SAME_FAKE, unknown
    ).sentences[2]
    assert third.startswith("No rated speed is known")


def test_a_copy_above_the_rated_speed_fails_the_check():
    status = "\t Link 0: 10.0 GB/s\n\t Link 1: 10.0 GB/s\n"
    seen = copies.see_peer_bandwidth(
        _peer_run({"0->1": [5.0, 15.0, 25.0, 25.0], "1->0": [5.0, 15.0, 15.0, 15.0]}, SIZES),
        SAME_FAKE,
        _links("NV2", 2, status),
    )
    assert (
        "reaches 125% of it, above what the link can carry: a measurement problem"
        in seen.sentences[2]
    )
    assert "so does" not in seen.sentences[0]  # the two directions' curves differ
    (check,) = seen.checks
    assert not check.holds and "125%" in check.measured


def test_the_exercises_expect_the_measured_values():
    for machine in MACHINES:
        rate = PEER[machine].value["1->0"][-1].gbps
        assert copies.one_way_ms(PEER[machine], 2**30, src=1, dst=0) == pytest.approx(
            2**30 / rate / 1e6
        )
        assert (
            2 < copies.one_way_ms(PEER[machine], 2**30, src=1, dst=0) < 3
        )  # about 400 GB/s on NVLink
        assert copies.both_ways_largest_gbps(BOTH[machine]) == BOTH[machine].value["0<->1"][-1].gbps


# ---------------------------------------------------------------- 5. both ways


def _shares(both: records.Run, one_way: records.Run) -> dict[tuple[str, int], float]:
    at = {p: dict(zip(one_way.params["sizes"], ts, strict=True)) for p, ts in one_way.value.items()}
    found = {}
    for pair, ts in both.value.items():
        i, j = pair.split("<->")
        for size, t in zip(both.params["sizes"], ts, strict=True):
            found[(pair, size)] = t.gbps / (at[f"{i}->{j}"][size].gbps + at[f"{j}->{i}"][size].gbps)
    return found


@pytest.mark.parametrize("machine", MACHINES)
def test_the_both_ways_sentences_give_the_shares_of_the_one_way_rates_added(machine, capsys):
    run, one_way, links = BOTH[machine], PEER[machine], LINKS[machine]
    largest = run.params["sizes"][-1]
    shares = _shares(run, one_way)
    at_largest = [v for (_, size), v in shares.items() if size == largest]
    seen = copies.see_both_ways(run, one_way, links)
    (first, second, *notes), (check,) = seen.sentences, seen.checks
    assert check.holds == (min(at_largest) >= 0.9) and check.measured.startswith(
        f"at {timing.format_bytes(largest)} the total is at least {min(at_largest):.1%} of"
    )
    span = re.search(
        r"the total is (\d+)%(?: to (\d+)%)? of the two one-way rates added, over (\d+) pairs?",
        first,
    )
    assert int(span[1]) == round(100 * min(at_largest)) and int(span[2] or span[1]) == round(
        100 * max(at_largest)
    )
    assert int(span[3]) == len(run.value)
    assert ("hardly slowed each other down" in first) == (min(at_largest) >= 0.9)
    (pair, size), lowest = min(shares.items(), key=lambda item: item[1])
    i, j = pair.split("<->")
    assert (
        f"lowest share at any size is {lowest:.0%}, cuda:{i} <-> cuda:{j} at {timing.format_bytes(size)}"
        in first
    )
    below = [s for s, v in shares.items() if v < 0.9]  # where the shares fall below the bar
    sizes = ", ".join(timing.format_bytes(n) for n in sorted({n for _, n in below}))
    assert (f"shares lie below 90%, at {sizes} each way" in first) == (len(below) > 1)
    assert (f"; {len(below)} of the {len(shares)} shares" in first) == bool(below)
    total, (pair, size) = max(
        (t.gbps, (p, n))
        for p, ts in run.value.items()
        for n, t in zip(run.params["sizes"], ts, strict=True)
    )
    i, j = pair.split("<->")
    assert (
        f"the largest total, {total:.0f} GB/s (cuda:{i} <-> cuda:{j} at {timing.format_bytes(size)} each way)"
        in second
    )
    assert f"is {total / (2 * _rated_gbps(links)):.0%} of it" in second
    above = [v for v in shares.values() if v > 1]
    leaks = [
        (pair, size)
        for r in (run, one_way)
        for pair, ts in r.value.items()
        for size, t in zip(r.params["sizes"], ts, strict=True)
        if t.extra.get("hold_us") and t.extra.get("enqueue_us", 0) > t.extra["hold_us"]
    ]
    assert len(notes) == bool(above) + bool(leaks)
    if above:
        assert f"{len(above)} share" in notes[0] and f"the highest {max(above):.0%}" in notes[0]
        # the least the samples allow: the slowest both-ways sample over the fastest one-way ones
        at = {
            p: dict(zip(one_way.params["sizes"], ts, strict=True))
            for p, ts in one_way.value.items()
        }
        lowest = [
            t.gbps_range[0]
            / (at[f"{i}->{j}"][size].gbps_range[1] + at[f"{j}->{i}"][size].gbps_range[1])
            for pair, ts in run.value.items()
            for i, j in [pair.split("<->")]
            for size, t in zip(run.params["sizes"], ts, strict=True)
            if shares[(pair, size)] > 1
        ]
        assert max(lowest) <= 1  # on every recorded machine: noise around 100%
        assert f"gives at most {max(lowest):.0%}): noise around 100%, not a gain." in notes[0]
        assert "measurement problem" not in notes[0]
        assert "neither copy can run faster than it does alone" in notes[0]
    if leaks:
        assert notes[-1].startswith("Launch time leaked into") and notes[-1].count(
            " us of hold)"
        ) == len(leaks)
    copies.show_both_ways(run, one_way, links)
    out = capsys.readouterr().out.replace("\n", " ")
    assert "neither copy can run faster than it does alone" in " ".join(out.split())


def test_a_share_above_100_percent_and_a_leaking_hold_are_called_measurement_problems():
    one_way = _peer_run({"0->1": [10.0, 40.0], "1->0": [10.0, 40.0]}, SIZES[:2])
    leaky = _timing(90.0)
    leaky.extra.update(hold_us=2700.0, enqueue_us=2722.0)
    both = _run({"0<->1": [_timing(15.0), leaky]}, sizes=SIZES[:2], repeats=5)
    _, _, above, leak = copies.see_both_ways(both, one_way, _links("PIX")).sentences
    assert above == (
        "1 share is above 100% (the highest 112%, cuda:0 <-> cuda:1 at 4 MiB each way), although "
        "neither copy can run faster than it does alone: 1 of them stay above 100% even from the "
        "slowest both-ways sample over the fastest one-way samples, a measurement problem, not a result."
    )  # every sample alike: 90 GB/s both ways against 40 + 40 one way
    assert leak == (
        "Launch time leaked into cuda:0 <-> cuda:1 at 4 MiB (2722 us of queueing, 2700 us of hold): "
        "queueing the sample's copies took longer than the spin kernel held the stream, so the GPU "
        "waited for the host, that rate is too low, and a share computed from it is no measure of the link."
    )
    assert copies.say_leaks(claims.WhatWeSee(NOTEBOOK, one_way), "", one_way) == []


def test_two_directions_that_slow_each_other_down_are_said_to():
    one_way = _peer_run({"0->1": [10.0, 40.0], "1->0": [10.0, 40.0]}, SIZES[:2])
    both = _run({"0<->1": [_timing(24.0), _timing(60.0)]}, sizes=SIZES[:2], repeats=5)
    first, second, *notes = copies.see_both_ways(both, one_way, _links("PIX")).sentences
    assert "the total is 75% of the two one-way rates added, over 1 pair of GPUs" in first
    assert "slowed each other down" in first and "hardly" not in first.split("(")[0]
    assert first.endswith(
        "lowest share at any size is 75%, cuda:0 <-> cuda:1 at 4 MiB each way; 1 of the 2 shares "
        "lies below 90%, at 4 MiB each way: there, by that measure, the directions did slow each "
        "other down."
    )
    assert second == (
        "The dashed line is twice the one-way raw PCIe rate, 64 GB/s; the largest total, 60 GB/s "
        "(cuda:0 <-> cuda:1 at 4 MiB each way), is 94% of it."
    )
    (check,) = copies.see_both_ways(both, one_way, _links("PIX")).checks
    assert not check.holds and check.measured.startswith("at 4 MiB the total is at least 75.0% of")


def test_duplex_shares_skip_sizes_measured_both_ways_only():
    one_way = _run({"0->1": [_timing(50.0)], "1->0": [_timing(50.0)]}, sizes=[1])
    both = _run({"0<->1": [_timing(100.0), _timing(150.0)]}, sizes=[1, 2])
    assert copies.duplex_shares(both, one_way) == [
        copies.Share("0<->1", 1, pytest.approx(1.0), pytest.approx(1.0))
    ]


# ---------------------------------------------------------------- every pair at once


@pytest.mark.parametrize("machine", sorted(PAIRS))
def test_every_pair_at_once_against_the_single_pair(machine, capsys):
    run = PAIRS[machine]
    rates = [t.gbps for t in run.value["together"].values()]
    alone, total = run.value["alone"].gbps, run.value["total"].gbps
    seen = peer_links.see_all_pairs(run, _or_other(LINKS, machine))
    (sentence,) = seen.sentences
    gpus = len({int(g) for pair in run.value["together"] for g in pair.split("->")})
    assert sentence.startswith(
        f"With all {len(rates)} ordered pairs of {gpus} GPUs copying "
        f"{timing.format_bytes(run.params['nbytes'])} at once"
    )
    assert f"pair ran at {min(rates):.1f} to {max(rates):.1f} GB/s" in sentence
    low, high = f"{min(rates) / alone:.0%}", f"{max(rates) / alone:.0%}"
    assert (
        f"GB/s, {low if low == high else low + ' to ' + high} of the single pair cuda:0 -> cuda:1 "
        f"alone, {alone:.1f} GB/s, timed by the same code." in sentence
    )
    assert sentence.endswith(
        f"over the slowest pair's time give {total:.0f} GB/s in total, {total / alone:.1f} times the "
        f"single pair's rate (the {len(rates)} pairs' own rates add up to {sum(rates):.0f} GB/s)."
    )
    assert total == pytest.approx(len(rates) * min(rates), rel=0.01)  # the slowest pair's time
    *shared, check = seen.checks  # NVML and nvidia-smi were both read on this machine
    assert check.holds and check.measured == f"{len(rates)} pairs agree"
    assert len(shared) == (gpus > 2)  # a source with a second destination: the sharing is checked
    if shared:
        assert shared[0].holds == (max(rates) < alone < total)
        assert shared[0].measured == (
            f"each pair {min(rates):.1f} to {max(rates):.1f} GB/s, the total {total:.0f} GB/s, "
            f"one pair alone {alone:.1f} GB/s"
        )
    peer_links.show_all_pairs(run, PEER[machine])
    out = capsys.readouterr().out
    assert "each pair's rate at once over its rate alone" in out and "not compared" not in out
    assert "the sentence below divides by cuda:0 -> cuda:1 alone" in " ".join(out.split())
    other = next(m for m in sorted(PEER) if m != machine)
    peer_links.show_all_pairs(run, PEER[other])  # section 4 from another machine: no shares
    assert "not compared" in capsys.readouterr().out


def test_every_pair_at_once_without_a_run_or_with_links_that_disagree(capsys):
    assert peer_links.see_all_pairs(None, LINKS[MACHINES[0]]) is None
    peer_links.show_all_pairs(None, PEER[MACHINES[0]])
    assert "no machine has recorded it yet" in capsys.readouterr().out
    nbytes = 2**20
    value = {
        "alone": _timing(100.0, nbytes),
        "total": _timing(150.0, 2 * nbytes),
        "together": {"0->1": _timing(75.0, nbytes), "1->0": _timing(75.0, nbytes)},
        "topology": {"source": "NVML", "links": [["X", "NV4"], ["NV4", "X"]]},
    }
    seen = peer_links.see_all_pairs(_run(value, nbytes=nbytes), _links("SYS"))
    (check,) = seen.checks
    assert not check.holds and "NVML NV4, nvidia-smi SYS" in check.measured
    assert (
        "each pair ran at 75.0 GB/s, 75% of the single pair cuda:0 -> cuda:1 alone, 100.0 GB/s"
        in seen.sentences[0]
    )
    value["topology"] = {"source": "nvidia-smi topo -m", "links": [["X", "NV4"], ["NV4", "X"]]}
    seen = peer_links.see_all_pairs(_run(value, nbytes=nbytes), _links("NV4"))
    assert (
        not seen.checks
        and seen.sentences[1] == "The topology was read from nvidia-smi topo -m on 2xFAKE."
    )


# ---------------------------------------------------------------- 6. latency


@pytest.mark.parametrize("machine", MACHINES)
def test_the_latency_sentences_compare_peer_and_local_copies(machine, capsys):
    run = LATENCY[machine]
    value, sizes = run.value, run.params["sizes"]
    n = round(len(value) ** 0.5)
    peer_us = [
        statistics.median(value[f"{i}->{j}"][k].median_us for i, j in _pairs(n))
        for k in range(len(sizes))
    ]
    local_us = statistics.median(value[f"{i}->{i}"][0].median_us for i in range(n))
    seen = copies.see_latency(run)
    (first, second), (check,) = seen.sentences, seen.checks
    assert first == (
        f"At {sizes[0]} B a copy between GPUs takes {peer_us[0]:.1f} us, {peer_us[0] / local_us:.1f} "
        f"times as long as a copy within one GPU ({local_us:.1f} us)."
    )
    assert peer_us[0] > local_us
    assert f"goes from {peer_us[0]:.1f} to {peer_us[-1]:.1f} us" in second
    assert ("hardly matters" in second) == (abs(peer_us[-1] / peer_us[0] - 1) < 0.25)
    fastest_peer = min(
        value[f"{i}->{j}"][k].median_us for i, j in _pairs(n) for k in range(len(sizes))
    )
    slowest_local = max(
        value[f"{i}->{i}"][k].median_us for i in range(n) for k in range(len(sizes))
    )
    assert check.measured == (
        f"the fastest peer copy of any pair and size took {fastest_peer:.1f} us, the slowest "
        f"within one GPU {slowest_local:.1f} us"
    )
    assert check.holds and fastest_peer > slowest_local
    copies.show_latency(run)
    assert capsys.readouterr().out.count("time per copy of") == len(sizes)


def test_latency_of_one_size_where_a_local_copy_is_the_slower():
    us = {"0->0": 20.0, "0->1": 10.0, "1->0": 13.0, "1->1": 20.0}
    run = _run(
        {p: [timing.Timing([t / 1e6] * 5, "cuda events", 4)] for p, t in us.items()}, sizes=[4]
    )
    seen = copies.see_latency(run)
    (first,), (check,) = seen.sentences, seen.checks
    assert (
        first
        == "At 4 B a copy between GPUs takes 11.5 us, 0.6 times as long as a copy within one GPU (20.0 us)."
    )
    assert not check.holds and check.measured == (
        "the fastest peer copy of any pair and size took 10.0 us, the slowest within one GPU 20.0 us"
    )


# ---------------------------------------------------------------- 7. the blog post's experiment


def _lane_of(profile: trace.Profile, device: int, stream: int) -> str:
    marks = sorted(
        (iv for iv in profile.intervals if iv.kind == "kernel" and "spin_kernel" in iv.name),
        key=lambda iv: iv.start_us,
    )
    return LANES[
        next(k for k, iv in enumerate(marks) if (iv.device, iv.stream) == (device, stream)) % 4
    ]


def _ratios(run: records.Run) -> dict[tuple[bool, bool, bool], float]:
    found = {}
    for r in run.value["runs"]:
        p = r["profile"]
        copies = [iv for iv in p.intervals if iv.kind == "memcpy" and iv.copy_kind == "PtoP"]
        kernels = [
            iv
            for iv in p.intervals
            if iv.kind == "kernel" and iv.device == 1 and "spin_kernel" not in iv.name
        ]
        found[(r["sender_streamed"], r["receiver_streamed"], r["non_blocking"])] = (
            trace.overlap_ratio(copies, kernels)
        )
    return found


def _issue_gaps(profile: trace.Profile) -> list[float]:
    """The host's time from each cudaMemcpyAsync's start to the next kernel launch, in us."""
    launches = sorted(
        iv.start_us
        for iv in profile.intervals
        if iv.kind == "runtime" and "LaunchKernel" in iv.name
    )
    copies = [iv for iv in profile.intervals if iv.kind == "runtime" and "cudaMemcpy" in iv.name]
    return [next(t for t in launches if t >= c.end_us) - c.start_us for c in copies]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_overlap_sentences_give_the_ratios_read_from_the_traces(machine, capsys):
    run = SEED[machine]
    ratios = _ratios(run)
    both = [ratios[(True, True, nb)] for nb in (True, False)]
    others = [v for (s, r, _), v in ratios.items() if not (s and r)]
    seen = peer_overlap.see_combinations(run)
    lanes, overlap, nb, gap = seen.sentences
    assert (
        lanes
        == "The copy ran on the sender's current stream in 8 of 8 runs; B * B * B * B ran on cuda:1 "
        "default stream; the copies' kind in the traces: PtoP (PtoP: from one GPU's memory straight "
        "into the other's)."
    )
    assert (
        f"the overlap ratio was {both[0]:.2f} and {both[1]:.2f} (each over 2 profiled steps: overlap,"
        in overlap
    )
    assert min(both) >= 0.8 and max(others) <= 0.2
    assert f"in the other 6 runs it was at most {max(others):.2f}" in overlap
    legacy = [ratios[(False, True, nb)] for nb in (True, False)]
    assert overlap.endswith(f"it was {legacy[0]:.2f} and {legacy[1]:.2f}: no overlap.")
    change = max(
        abs(ratios[(s, r, True)] - ratios[(s, r, False)])
        for s in (True, False)
        for r in (True, False)
    )
    assert nb == f"Changing only non_blocking moved the ratio by at most {change:.2f}."
    issue_us = statistics.median(g for r in run.value["runs"] for g in _issue_gaps(r["profile"]))
    copy_us = statistics.median(
        trace.covered_us([iv for iv in r["profile"].intervals if iv.kind == "memcpy"])
        / r["profile"].steps
        for r in run.value["runs"]
    )
    assert gap.startswith(
        f"The host took {issue_us:.0f} us from issuing the copy to launching the first "
        f"multiplication, {issue_us / copy_us:.0%} of the copy's {copy_us:.0f} us"
    )
    on_source, check = seen.checks
    assert on_source.holds and on_source.measured == "8 of 8 runs"  # as the first sentence says
    syncs = sum(
        1
        for r in run.value["runs"]
        for iv in r["profile"].intervals
        if iv.kind == "runtime" and "cudaStreamSynchronize" in iv.name
    )
    assert check.holds == (syncs == 0) and check.measured.startswith(
        f"{syncs} cudaStreamSynchronize"
    )
    peer_overlap.show_combinations(run)
    out = capsys.readouterr().out
    assert (
        "the legacy default stream's rule" in out and "holds" not in out
    )  # the verdict: in the claims table
    peer_overlap.show_timelines(run)
    assert len(plt.gcf().axes) == 8
    assert len({ax.get_xlim() for ax in plt.gcf().axes}) == 1  # one time scale, from 0
    assert plt.gcf().axes[0].get_xlim()[0] == 0


@pytest.mark.parametrize("machine", MACHINES)
def test_the_exercise_asks_for_the_lane_the_trace_shows(machine):
    run = SEED[machine]
    r = next(
        r
        for r in run.value["runs"]
        if (r["sender_streamed"], r["receiver_streamed"], r["non_blocking"]) == (False, True, True)
    )
    (copy,) = {
        (iv.device, iv.stream)
        for iv in r["profile"].intervals
        if iv.kind == "memcpy" and iv.copy_kind == "PtoP"
    }
    expected = _lane_of(r["profile"], *copy)
    assert peer_overlap.copy_lane(run, False, True, True) == expected == "cuda:0 default stream"
    assert peer_overlap.lane_choices(run) == sorted(LANES)


_STREAMS = {
    "cuda:0 default stream": (0, 7),
    "cuda:0 side stream s0": (0, 20),
    "cuda:1 default stream": (1, 15),
    "cuda:1 side stream s1": (1, 30),
}


def _seed_profile(sender: bool, ratio: float, syncs: int) -> trace.Profile:
    """One step: the four lane markers, a 100 us peer copy from the sender's stream, and B^4 on
    cuda:1's default stream starting so that ``ratio`` of the copy runs beside it."""
    ivs = [
        trace.Interval("kernel", "spin_kernel", k, k + 0.5, *_STREAMS[lane])
        for k, lane in enumerate(LANES)
    ]
    copy_lane = "cuda:0 side stream s0" if sender else "cuda:0 default stream"
    ivs.append(
        trace.Interval(
            "memcpy",
            "Memcpy PtoP",
            10.0,
            110.0,
            *_STREAMS[copy_lane],
            copy_kind="PtoP",
            src_device=0,
            dst_device=1,
        )
    )
    ivs.append(
        trace.Interval(
            "kernel", "mul_kernel", 110.0 - 100 * ratio, 310.0, *_STREAMS["cuda:1 default stream"]
        )
    )
    ivs.append(trace.Interval("runtime", "cudaMemcpyAsync", 5.0, 6.0, thread=1))
    ivs.append(trace.Interval("runtime", "cudaLaunchKernel", 8.0, 9.0, thread=1))
    ivs += [
        trace.Interval("runtime", "cudaStreamSynchronize", 400.0 + k, 400.5 + k, thread=1)
        for k in range(syncs)
    ]
    return trace.Profile(ivs, None, 1)


def _seed(ratios: dict[tuple[bool, bool], float], syncs: int = 0) -> records.Run:
    runs = [
        {
            "sender_streamed": s,
            "receiver_streamed": r,
            "non_blocking": nb,
            "profile": _seed_profile(s, ratios[(s, r)] + (0.01 if nb else 0.0), syncs),
        }
        for s in (True, False)
        for r in (True, False)
        for nb in (True, False)
    ]
    return _run({"lanes": LANES, "runs": runs}, a_numel=1024, b_numel=4096)


def test_a_partial_overlap_and_a_host_that_waits_are_said(capsys):
    run = _seed(
        {(True, True): 0.5, (True, False): 0.0, (False, True): 0.3, (False, False): 0.0}, syncs=1
    )
    seen = peer_overlap.see_combinations(run)
    assert (
        "the overlap ratio was 0.51 and 0.50 (each over 1 profiled steps: partial overlap"
        in seen.sentences[1]
    )
    assert seen.sentences[1].endswith("it was 0.31 and 0.30: partial overlap.")
    assert "at most 0.31" in seen.sentences[1] and seen.sentences[2].endswith("at most 0.01.")
    assert seen.sentences[3].startswith(
        "The host took 3 us from issuing the copy to launching the first "
        "multiplication, 3% of the copy's 100 us"
    )
    on_source, check = seen.checks
    assert on_source.holds == seen.sentences[0].startswith(
        "The copy ran on the sender's current stream in 8 of 8"
    )
    assert not check.holds and check.measured == "8 cudaStreamSynchronize calls in the 8 traces"
    peer_overlap.show_combinations(run)
    out = capsys.readouterr().out
    assert (
        "s0      | s1       | True         | cuda:0 side stream s0 |     0.100 |    0.251 |    0.51 |     1"
        in out
    )
    assert "partial" in out.split("what keeps B*B*B*B")[1]
    peer_overlap.show_timelines(run)
    labels = {t.get_text() for ax in plt.gcf().axes for t in ax.get_yticklabels()}
    assert {"GPU 0: side stream s0", "GPU 1: default stream", "GPU 0: default stream"} <= labels


def test_overlap_words_and_what_orders_the_copy():
    assert peer_overlap.overlap_word([0.8, 0.99]) == "overlap"
    assert peer_overlap.overlap_word([0.0, 0.2]) == "no overlap"
    assert peer_overlap.overlap_word([0.5, 0.9]) == "partial overlap"
    assert peer_overlap.ORDERED_BY[(True, True)] == "nothing"
    assert "legacy default stream" in peer_overlap.ORDERED_BY[(False, True)]
    assert peer_overlap.ORDERED_BY[(True, False)] == peer_overlap.ORDERED_BY[(False, False)]
    assert (
        peer.stream_labels({(0, 7): "cuda:0 default stream", (1, 7): "cuda:1 side stream s1"}) == {}
    )


# ---------------------------------------------------------------- 8. events across GPUs


def _gaps(profile: trace.Profile) -> list[float]:
    first = sorted(
        (iv for iv in profile.intervals if iv.kind == "kernel" and iv.device == 0),
        key=lambda iv: iv.start_us,
    )
    second = sorted(
        (iv for iv in profile.intervals if iv.kind == "kernel" and iv.device == 1),
        key=lambda iv: iv.start_us,
    )
    return [b.start_us - a.end_us for a, b in zip(first, second, strict=False)]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_event_sentence_gives_the_gaps_and_the_words_that_match(machine, capsys):
    run = EVENTS[machine]
    with_wait, without = _gaps(run.value["with_wait"]), _gaps(run.value["without_wait"])
    facts = devices.event_facts(run)
    assert (facts.with_wait, facts.without_wait, facts.waited) == (with_wait, without, True)
    (sentence,) = devices.see_event_wait(run).sentences
    assert sentence.startswith(
        f"With the wait, cuda:1's kernel started {', '.join(f'{g:+.1f}' for g in with_wait)} "
        f"us after cuda:0's kernel ended (one value per profiled step, {len(with_wait)} steps; "
    )
    assert ("it waited: none started earlier than -10 us" in sentence) == (min(with_wait) >= -10)
    assert (
        f"without it, {', '.join(f'{g:+.1f}' for g in without)} us: while cuda:0 was still spinning."
        in sentence
    )
    assert max(without) < -10 and devices.event_facts(run).ran_free
    devices.show_event_wait(run)
    out = capsys.readouterr().out
    assert out == ""  # the gaps are in the sentence; the figure shows both steps
    labels = {t.get_text() for ax in plt.gcf().axes for t in ax.get_yticklabels()}
    assert {"GPU 0: side stream s0", "GPU 1: side stream s1"} <= labels


def _events(with_wait_start: float, without_start: float) -> records.Run:
    def profile(start: float) -> trace.Profile:
        return trace.Profile(
            [
                trace.Interval("kernel", "spin", 0.0, 1000.0, 0, 20),
                trace.Interval("kernel", "spin", start, start + 200.0, 1, 30),
            ],
            None,
            1,
        )

    return _run(
        {"with_wait": profile(with_wait_start), "without_wait": profile(without_start)},
        hold_us=1000.0,
        kernel_us=200.0,
    )


def test_an_event_that_holds_nothing_back_is_said():
    run = _events(with_wait_start=500.0, without_start=1005.0)
    (sentence,) = devices.see_event_wait(run).sentences
    assert (
        "started -500.0 us after" in sentence
        and "it did not wait: it started earlier than -10 us" in sentence
    )
    assert (
        sentence.endswith("+5.0 us: not while cuda:0 was spinning.")
        and not devices.event_facts(run).ran_free
    )


# ---------------------------------------------------------------- the claims table


@pytest.mark.parametrize("machine", MACHINES)
def test_the_claims_table_decides_on_the_numbers_of_each_run(machine):
    links, one_way, seed, events = LINKS[machine], PEER[machine], SEED[machine], EVENTS[machine]
    current = _or_other(CURRENT, machine)
    table = peer_table.claims_table(seed, one_way, events, links, current, SAME[machine])
    overlap, only, nb, direct, event, nvlink, set_device = table.claims
    ratios = _ratios(seed)
    assert overlap.comparison.value.value == min(
        ratios[(True, True, True)], ratios[(True, True, False)]
    )
    assert only.comparison.value.value == max(v for (s, r, _), v in ratios.items() if not (s and r))
    assert overlap.verdict == only.verdict == nb.verdict == claims.HOLDS
    best = max((t for ts in one_way.value.values() for t in ts), key=lambda t: t.gbps)
    assert direct.comparison.value == claims.measured(best, as_rate=True)
    assert (
        direct.comparison.threshold == min(links.value["pcie_gbps"])
        and direct.verdict == claims.HOLDS
    )
    with_wait = _gaps(events.value["with_wait"])
    assert event.comparison.value.value == min(with_wait) and event.comparison.value.samples == len(
        with_wait
    )
    assert event.comparison.value.unit == "us"
    assert event.verdict == claims.compare(min(with_wait), -10.0, holds_if="above").verdict
    without = _gaps(events.value["without_wait"])  # the latest start named as such
    assert (
        f"without the wait, the latest start of {len(without)} steps: {max(without):+.1f} us"
        in event.measured
    )
    assert nvlink.comparison.value.value == pytest.approx(best.gbps / _rated_gbps(links))
    share = claims.measured(best, as_rate=True)
    expected = claims.compare(
        claims.Value(share.value / _rated_gbps(links), share.spread / _rated_gbps(links)),
        0.75,
        holds_if="above",
    )
    assert nvlink.verdict == expected.verdict == claims.HOLDS
    memory = copies.same_facts(SAME[machine]).memory
    assert nvlink.measured.endswith(f"plateau {memory:.0f} GB/s counting bytes read + written")
    assert (
        set_device.verdict == claims.HOLDS
        and "ran on cuda:1 with cuda:0 current" in set_device.measured
    )


def test_claims_on_a_machine_without_nvlink_and_with_an_event_that_cannot_be_told_apart():
    seed = _seed({(True, True): 0.9, (True, False): 0.0, (False, True): 0.0, (False, False): 0.0})
    one_way = _peer_run({"0->1": [5.0, 10.0, 20.0, 20.0], "1->0": [5.0, 10.0, 20.0, 20.0]}, SIZES)
    table = peer_table.claims_table(
        seed, one_way, _events(1005.0, 1005.0), _links("SYS"), _current(GOOD_STATES), SAME_FAKE
    )
    verdicts = list(table.verdicts().values())
    assert verdicts[:3] == [claims.HOLDS] * 3
    direct, event, nvlink, set_device = table.claims[3:]
    assert (
        direct.comparison.threshold == 32.0 and direct.verdict == claims.DOES_NOT_HOLD
    )  # 20 GB/s < PCIe's 32
    assert event.verdict == claims.NOT_TESTABLE and "cannot be told apart" in event.measured
    assert (
        nvlink.verdict == claims.NOT_TESTABLE and nvlink.measured == "the link is SYS, not NVLink"
    )
    assert set_device.verdict == claims.HOLDS


# ---------------------------------------------------------------- the topology 05 reads (hardware.gpu_topology)


class _FakeNvml:
    """NVML as pynvml exposes it, for GPUs whose NVLinks go to NVSwitches or straight to a GPU."""

    NVML_NVLINK_MAX_LINKS = 4
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2

    class NVMLError(Exception):
        pass

    def __init__(self, links: dict[int, list[tuple[str, str]]]) -> None:
        self.links = (
            links  # GPU -> [(remote kind 'gpu<k>' | 'switch', state 'up' | 'down')] per link
        )

    def nvmlDeviceGetCount(self):
        return len(self.links)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, h):
        return type("Pci", (), {"busId": f"00000000:{0x10 + h:02X}:00.0".encode()})

    def _link(self, h, link):
        if link >= len(self.links[h]):
            raise self.NVMLError("no such link")
        return self.links[h][link]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return self.NVML_FEATURE_ENABLED if self._link(h, link)[1] == "up" else 0

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        kind = self._link(h, link)[0]
        return (
            self.NVML_NVLINK_DEVICE_TYPE_SWITCH
            if kind == "switch"
            else self.NVML_NVLINK_DEVICE_TYPE_GPU
        )

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        kind = self._link(h, link)[0]
        other = int(kind[3:]) if kind.startswith("gpu") else 0x70
        return type("Pci", (), {"busId": f"00000000:{0x10 + other:02X}:00.0"})


def test_gpu_topology_reads_nvml_direct_links_and_switches(monkeypatch):
    # GPU 0 and 1: two direct links up, one down; GPU 2: no NVLink (PCIe only)
    direct = _FakeNvml(
        {
            0: [("gpu1", "up"), ("gpu1", "up"), ("gpu1", "down")],
            1: [("gpu0", "up"), ("gpu0", "up")],
            2: [],
        }
    )
    monkeypatch.setattr(topology, "nvml_module", lambda: direct)
    assert hardware.gpu_topology() == {
        "source": "NVML",
        "links": [["X", "NV2", "PCIe"], ["NV2", "X", "PCIe"], ["PCIe", "PCIe", "X"]],
    }
    # an HGX board: every GPU has four links to NVSwitches, one of GPU 2's is down
    switched = _FakeNvml(
        {
            0: [("switch", "up")] * 4,
            1: [("switch", "up")] * 4,
            2: [("switch", "up")] * 3 + [("switch", "down")],
        }
    )
    monkeypatch.setattr(topology, "nvml_module", lambda: switched)
    assert hardware.gpu_topology()["links"] == [
        ["X", "NV4", "NV3"],
        ["NV4", "X", "NV3"],
        ["NV3", "NV3", "X"],
    ]


def test_gpu_topology_falls_back_to_nvidia_smi_then_to_nothing(monkeypatch):
    topo = (
        "\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18\t0-47\nGPU1\tNV18\t X \t0-47\n"
    )
    refusing = _FakeNvml({})

    def refuse():
        raise refusing.NVMLError("not supported")

    refusing.nvmlDeviceGetCount = refuse  # NVML installed but refusing: ask nvidia-smi
    monkeypatch.setattr(topology, "nvml_module", lambda: refusing)
    monkeypatch.setattr(
        topology, "nvidia_smi", lambda *args: topo if args == ("topo", "-m") else None
    )
    assert hardware.gpu_topology() == {
        "source": "nvidia-smi topo -m",
        "links": [["X", "NV18"], ["NV18", "X"]],
    }
    monkeypatch.setattr(topology, "nvml_module", lambda: None)
    gap = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV18\nGPU2\tPIX\t PIX \t X \n"  # GPU1's row cut
    monkeypatch.setattr(topology, "nvidia_smi", lambda *args: gap)
    assert hardware.gpu_topology()["links"][1] == ["unknown", "X", "unknown"]
    monkeypatch.setattr(topology, "nvidia_smi", lambda *args: None)
    assert hardware.gpu_topology() == {"source": None, "links": []}


def test_copies_without_peer_access_or_through_the_host_are_not_direct():
    seed = _seed({(True, True): 0.9, (True, False): 0.0, (False, True): 0.0, (False, False): 0.0})
    one_way = _peer_run({"0->1": [5.0, 10.0, 40.0, 40.0], "1->0": [5.0, 10.0, 40.0, 40.0]}, SIZES)
    links = _links("PIX")
    links.value["peer_access"] = [[True, False], [False, True]]
    table = peer_table.claims_table(
        seed, one_way, _events(1005.0, 500.0), links, _current(GOOD_STATES), SAME_FAKE
    )
    direct = table.claims[3]
    assert (
        direct.comparison is None and direct.verdict == claims.DOES_NOT_HOLD
    )  # 40 GB/s beats PCIe, but no peer access
    assert direct.measured.startswith(
        "peer access on all pairs: False; copy kinds in the traces: PtoP;"
    )
    staged = seed.value["runs"][0]["profile"].intervals
    staged.append(trace.Interval("memcpy", "Memcpy HtoD", 500.0, 510.0, 0, 7, copy_kind="HtoD"))
    table = peer_table.claims_table(
        seed, one_way, _events(1005.0, 500.0), _links("PIX"), _current(GOOD_STATES), SAME_FAKE
    )
    assert table.claims[3].comparison is None and table.claims[3].verdict == claims.DOES_NOT_HOLD
    assert table.claims[4].verdict == claims.HOLDS  # +5 us with the wait, -500 us without


def test_a_leaking_hold_is_named_for_the_same_gpu_copy_and_the_latency_too():
    leaky = _timing(90.0)
    leaky.extra.update(hold_us=2000.0, enqueue_us=2500.0)
    same = _run([_timing(100.0), leaky], sizes=SIZES[:2])
    assert copies.say_leaks(claims.WhatWeSee(NOTEBOOK, same), "", same) == [
        "cuda:0 -> cuda:0 at 4 MiB (2500 us of queueing, 2000 us of hold)"
    ]
    assert (
        copies.see_same_gpu(same)
        .sentences[-1]
        .startswith("Launch time leaked into cuda:0 -> cuda:0 at 4 MiB")
    )


def test_links_of_an_unknown_gpu_or_without_a_pcie_figure_say_what_is_known():
    status = "\t Link 0: 10.0 GB/s\n\t Link 1: 10.0 GB/s\n"
    nvlink = _links("NV2", 2, status)
    nvlink.value["pcie_gbps"] = [None, None]  # a driver that does not report the PCIe link
    first, second = peer_links.see_links(nvlink).sentences
    assert second == "The links' rated speed is 20 GB/s per direction."
    assert first.endswith("none is staged through host memory.")
    unknown = _links("NV4", 2)  # no nvidia-smi nvlink --status, and a GPU no datasheet rate covers
    unknown.value["capability"] = ["1.0", "1.0"]
    _, second = peer_links.see_links(unknown).sentences
    assert second.startswith("No rated speed is known for these links")
    assert peer_links.facts(unknown).rated_from == [
        "no NVLink rate known for compute capability 1.0"
    ]
    table = peer_table.claims_table(
        _seed({(True, True): 0.9, (True, False): 0.0, (False, True): 0.0, (False, False): 0.0}),
        _peer_run({"0->1": [5.0, 10.0, 40.0, 40.0], "1->0": [5.0, 10.0, 40.0, 40.0]}, SIZES),
        _events(1005.0, 500.0),
        unknown,
        _current(GOOD_STATES),
        SAME_FAKE,
    )
    nvlink_claim = table.claims[5]
    assert nvlink_claim.verdict == claims.NOT_TESTABLE and nvlink_claim.measured == (
        "the link is NV4, NVLink of a rate not known here (no NVLink rate known for compute "
        "capability 1.0)"
    )


@pytest.mark.parametrize("machine", sorted(PEER))
def test_the_peer_bandwidth_table_at_quick_sizes_has_no_large_copies_to_name(machine, capsys):
    """Quick mode's sizes stop below 256 MiB: a live quick run on 2xH200 raised 'min() iterable
    argument is empty' here (this session); the table then names no slowest large copy."""
    run, links = PEER[machine], _or_other(LINKS, machine)
    keep = [i for i, s in enumerate(run.params["sizes"]) if s < 2**28]
    quick = records.Run(
        {p: [ts[i] for i in keep] for p, ts in run.value.items()},
        True,
        {**run.header, "params": {**run.params, "sizes": [run.params["sizes"][i] for i in keep]}},
    )
    copies.show_peer_bandwidth(quick, _or_other(SAME, machine), links)
    out = capsys.readouterr().out
    assert "one at a time\n" in out and "the slowest at 256 MiB" not in out


def _quick(run: records.Run, keep: set[int], samples: int | None = None) -> records.Run:
    """``run`` cut to quick mode's sizes (and samples), as a live quick run hands it over."""
    sizes = run.params["sizes"]
    idx = [i for i, s in enumerate(sizes) if s in keep]

    def cut(t: timing.Timing) -> timing.Timing:
        return t if samples is None else dataclasses.replace(t, samples_s=t.samples_s[:samples])

    v = run.value
    value = (
        {k: [cut(ts[i]) for i in idx] for k, ts in v.items()}
        if isinstance(v, dict)
        else [cut(v[i]) for i in idx]
    )
    params = {**run.params, "sizes": [sizes[i] for i in idx]}
    return records.Run(value, True, {**run.header, "params": params})


@pytest.mark.parametrize("machine", sorted(PEER))
def test_every_section_of_05_reads_a_live_quick_run(machine):
    """Quick mode's sizes (1-16 MiB; latency at 4 B, 3 samples) stop below the large copies the
    sentences name at full size; every show, see, claim and exercise function reads them."""
    small = {2**20, 2**22, 2**24}
    peer, same, both = (_quick(_or_other(r, machine), small) for r in (PEER, SAME, BOTH))
    latency = _quick(_or_other(LATENCY, machine), {4}, samples=3)
    links_run, pairs = _or_other(LINKS, machine), _or_other(PAIRS, machine)
    copies.show_same_gpu(same)
    copies.see_same_gpu(same)
    copies.show_peer_bandwidth(peer, same, links_run)
    copies.see_peer_bandwidth(peer, same, links_run)
    copies.show_both_ways(both, peer, links_run)
    copies.see_both_ways(both, peer, links_run)
    peer_links.show_all_pairs(pairs, peer)
    peer_links.see_all_pairs(pairs, links_run)
    copies.show_latency(latency)
    copies.see_latency(latency)
    peer_table.claims_table(
        _or_other(SEED, machine), peer, _or_other(EVENTS, machine), links_run,
        _or_other(CURRENT, machine), same,
    )  # fmt: skip
    assert copies.both_ways_largest_gbps(both) > 0
    assert copies.one_way_ms(peer, 2**30, src=1, dst=0) > 0


def test_links_that_are_both_pcie_agree_whatever_each_tool_calls_them():
    """NVML's PHB and nvidia-smi's SYS are both PCIe paths: the NVLink check holds."""
    nbytes = 2**20
    value = {
        "alone": _timing(100.0, nbytes),
        "total": _timing(150.0, 2 * nbytes),
        "together": {"0->1": _timing(75.0, nbytes), "1->0": _timing(75.0, nbytes)},
        "topology": {"source": "NVML", "links": [["X", "PHB"], ["PHB", "X"]]},
    }
    (check,) = peer_links.see_all_pairs(_run(value, nbytes=nbytes), _links("SYS")).checks
    assert check.holds and check.measured == "2 pairs agree"


def test_every_pair_at_once_shows_the_links_it_read_and_one_bar_per_rate(capsys):
    machine = sorted(PAIRS)[0]
    run = PAIRS[machine]
    links = run.value["topology"]["links"]
    peer_links.show_all_pairs(run, PEER[machine])
    out = capsys.readouterr().out
    joins = out[: out.index("what joins them")].splitlines()[-len(links) :]  # the matrix's rows
    assert links[0][1] in joins[0] and links[1][0] in joins[1]  # the links read, not "?"
    (ax,) = plt.gcf().axes
    heights = [p.get_height() for p in ax.patches]
    rates = [t.gbps for t in run.value["together"].values()]
    assert heights == pytest.approx(
        [run.value["alone"].gbps, statistics.median(rates), run.value["total"].gbps]
    )  # one series: alone, each pair at once (median), the total


def test_one_pair_alone_has_no_other_curves_to_compare():
    seen = copies.see_peer_bandwidth(
        _peer_run({"0->1": [10.0, 40.0, 50.0, 50.0]}, SIZES), SAME_FAKE, _links("NV2", 2)
    )
    shape = claims.describe_curve(SIZES, [10.0, 40.0, 50.0, 50.0])
    assert seen.sentences[0] == f"The peer copy cuda:0 -> cuda:1 {shape.words}."


def test_the_largest_size_matrix_and_the_dashed_line_show_the_largest_rate_and_the_ceiling(capsys):
    status = "\t Link 0: 10.0 GB/s\n\t Link 1: 10.0 GB/s\n"
    peer = _peer_run({"0->1": [5.0, 11.0, 13.0, 17.0], "1->0": [5.0, 11.0, 13.0, 17.0]}, SIZES)
    copies.show_peer_bandwidth(peer, SAME_FAKE, _links("NV2", 2, status))
    out = capsys.readouterr().out
    lines = out.splitlines()
    end = next(k for k, line in enumerate(lines) if "every pair at 64 MiB" in line)
    rows = [line for line in lines[:end] if line.startswith("cuda:")][-2:]  # the matrix's rows
    assert all("17.0" in row and "13.0" not in row for row in rows)  # the largest size's rate
    ax = plt.gcf().axes[0]
    flat = [line.get_ydata()[0] for line in ax.lines if len(set(line.get_ydata())) == 1]
    assert 20.0 in flat  # the dashed line at the link's rated 2 x 10 GB/s


def test_latency_with_a_leaking_sample_says_so():
    leaky = timing.Timing([20e-6] * 5, "cuda events", 4)
    leaky.extra.update(hold_us=100.0, enqueue_us=150.0)
    local = timing.Timing([2e-6] * 5, "cuda events", 4)
    run = _run({"0->0": [local], "0->1": [leaky], "1->0": [leaky], "1->1": [local]}, sizes=[4])
    *_, leak = copies.see_latency(run).sentences
    assert "cuda:0 -> cuda:1 at 4 B (150 us of queueing, 100 us of hold)" in leak


def test_the_current_device_table_names_each_states_device(monkeypatch):
    shown = []
    monkeypatch.setattr(devices, "display", shown.append)
    devices.show_current_device(_current(GOOD_STATES))
    (table,) = shown
    assert [row[1] for row in table.rows] == [f"cuda:{s['current_device']}" for s in GOOD_STATES]


def test_the_streams_are_named_per_side():
    assert peer_overlap.streams(True, False) == ("s0", "default")
    assert peer_overlap.streams(False, True) == ("default", "s1")


def test_kernel_pairs_pair_the_steps_both_gpus_ran():
    def kernel(device, start):
        return trace.Interval("kernel", "spin", start, start + 5.0, device=device, stream=7)

    profile = trace.Profile([kernel(0, 0.0), kernel(1, 6.0), kernel(0, 20.0)], steps=2)
    assert devices.kernel_pairs(profile) == [(kernel(0, 0.0), kernel(1, 6.0))]


def test_the_current_device_table_marks_each_states_copies_right_or_wrong(monkeypatch):
    shown = []
    monkeypatch.setattr(devices, "display", shown.append)
    states = [*GOOD_STATES[:-1], {**GOOD_STATES[-1], "to_cuda_correct": False}]
    devices.show_current_device(_current(states))
    (table,) = shown
    assert [row[-1] for row in table.rows] == ["right"] * (len(states) - 1) + ["WRONG"]
    assert table.headers[-1] == "copies' contents"


def test_a_gap_of_exactly_the_clocks_tolerance_still_counts_as_waited():
    assert devices.event_facts(_events(with_wait_start=990.0, without_start=0.0)).waited
    assert not devices.event_facts(_events(with_wait_start=989.0, without_start=0.0)).waited
    assert (
        devices.event_facts(_events(with_wait_start=1000.0, without_start=990.0)).ran_free is False
    )


def test_the_event_timelines_share_one_time_scale_and_keep_what_starts_as_the_kernels_end():
    run = _events(with_wait_start=1000.0, without_start=0.0)
    # a host call that starts the moment the first kernels end (1200 us) is part of the step
    call = trace.Interval("runtime", "cudaStreamSynchronize", 1200.0, 1400.0, thread=1)
    run.value["with_wait"].intervals.append(call)
    devices.show_event_wait(run)
    axes = plt.gcf().axes
    assert [ax.get_title() for ax in axes] == ["with wait", "without wait"]
    assert all(ax.get_xlim() == pytest.approx((0, 1400.0 * 1.02)) for ax in axes)


def test_one_way_ms_is_bytes_over_the_largest_sizes_rate():
    peer = _peer_run({"0->1": [1.0, 2.0], "1->0": [1.0, 4.0]}, SIZES[:2])
    assert copies.one_way_ms(peer, 2**30, src=0, dst=1) == pytest.approx(2**30 / 2e6, rel=1e-12)
    assert copies.one_way_ms(peer, 10**9, src=1, dst=0) == pytest.approx(250.0, rel=1e-12)


def test_a_queue_as_long_as_its_hold_is_no_leak():
    held = timing.Timing([20e-6] * 5, "cuda events", 4)
    held.extra.update(hold_us=100.0, enqueue_us=100.0)
    local = timing.Timing([2e-6] * 5, "cuda events", 4)
    run = _run({"0->0": [local], "0->1": [held], "1->0": [held], "1->1": [local]}, sizes=[4])
    seen = claims.WhatWeSee(NOTEBOOK, run)
    assert copies.say_leaks(seen, "so what", run) == [] and seen.sentences == []
    held.extra.update(enqueue_us=100.5)
    assert copies.say_leaks(seen, "so what", run) == [
        "cuda:0 -> cuda:1 at 4 B (100 us of queueing, 100 us of hold)",
        "cuda:1 -> cuda:0 at 4 B (100 us of queueing, 100 us of hold)",
    ]


def test_the_one_way_plot_names_its_dashed_line_one_direction():
    status = "\t Link 0: 10.0 GB/s\n\t Link 1: 10.0 GB/s\n"
    peer = _peer_run({"0->1": [5.0, 11.0, 13.0, 17.0], "1->0": [5.0, 11.0, 13.0, 17.0]}, SIZES)
    links = _links("NV2", 2, status)
    copies.show_peer_bandwidth(peer, SAME_FAKE, links)
    label = f"{copies.one_way_facts(peer, SAME_FAKE, links).ceiling_label}, one direction"
    assert f"{label} (20 GB/s)" in plt.gcf().axes[0].get_legend_handles_labels()[1]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_both_ways_tables_say_what_a_share_is_and_the_sentences_where_they_come_from(
    machine, monkeypatch
):
    both, one_way, links = BOTH[machine], PEER[machine], LINKS[machine]
    shown = []
    monkeypatch.setattr(copies, "display", lambda *tables: shown.extend(tables))
    copies.show_both_ways(both, one_way, links)
    totals, shares = shown
    assert totals.caption == "decimal GB/s: the bytes of both copies over the time for both"
    assert shares.caption.endswith(
        "so a share above 100% is the samples' noise or a measurement problem (said below)"
    )
    seen = copies.see_both_ways(both, one_way, links)
    assert f"(replayed from {both.machine})" in seen.to_markdown()


def test_the_latency_matrices_are_in_us_and_the_first_is_titled(monkeypatch):
    us = {"0->0": 2.0, "0->1": 10.0, "1->0": 12.0, "1->1": 2.0}
    run = _run(
        {
            p: [timing.Timing([t / 1e6] * 5, "cuda events", n) for n in (4, 64)]
            for p, t in us.items()
        },
        sizes=[4, 64],
    )
    shown = []
    monkeypatch.setattr(copies, "display", lambda *tables: shown.extend(tables))
    copies.show_latency(run)
    first, second = shown
    assert first.title == "Small copies - 2xFAKE (replayed)" and second.title == ""
    assert first.headers == ["from", "to cuda:0 (us)", "to cuda:1 (us)"]


def test_a_quarter_longer_peer_copy_says_the_size_matters():
    def run_of(last_us):
        us = {
            "0->0": (2.0, 2.0),
            "0->1": (8.0, last_us),
            "1->0": (8.0, last_us),
            "1->1": (2.0, 2.0),
        }
        return _run(
            {
                p: [timing.Timing([t / 2**20] * 5, "cuda events", 4) for t in ts]
                for p, ts in us.items()
            },
            sizes=[4, 64],
        )

    # whole numbers over 2**20 s: exact medians in us, so 10 / 8 is exactly 1.25
    assert copies.see_latency(run_of(10.0)).sentences[1].endswith("the size matters already.")
    assert copies.see_latency(run_of(9.9)).sentences[1].endswith("the size hardly matters here.")


PARTIAL = {(True, True): 0.5, (True, False): 0.0, (False, True): 0.3, (False, False): 0.0}


def test_each_combination_is_named_by_its_streams_and_a_run_without_a_peer_copy_says_none():
    run = _seed(PARTIAL)
    rows = peer_overlap.combinations(run)
    assert [str(r) for r in rows[:2]] == [
        "sender s0, receiver s1, non_blocking=True",
        "sender s0, receiver s1, non_blocking=False",
    ]
    assert str(rows[-1]) == "sender default, receiver default, non_blocking=False"
    assert {r.copy_kind for r in rows} == {"PtoP"}
    first = run.value["runs"][0]["profile"]
    first.intervals[:] = [iv for iv in first.intervals if iv.kind != "memcpy"]
    assert peer_overlap.combinations(run)[0].copy_kind == "none"


def test_the_combinations_table_says_what_syncs_counts_and_where_the_traces_are(
    monkeypatch, capsys
):
    run = _seed(PARTIAL)  # a trace in the clone is shown from the clone's folder, as on any copy
    path = f"{config.clone_root()}/results/2xFAKE/05_device_to_device/seed000.trace.json.gz"
    for r in run.value["runs"]:
        r["profile"].chrome_trace = types.SimpleNamespace(path=path)
    shown = []
    monkeypatch.setattr(peer_overlap, "display", shown.append)
    peer_overlap.show_combinations(run)
    table = shown[0]
    assert table.caption == (
        "A: 4 KiB copied from cuda:0 to cuda:1; B: 16 KiB on cuda:1; "
        "syncs: the host's cudaStreamSynchronize calls"
    )
    assert capsys.readouterr().out.endswith(
        "e.g. in\n  results/2xFAKE/05_device_to_device/\n  seed000.trace.json.gz\n"
    )


def test_the_timelines_show_each_first_step_without_its_markers_on_one_scale():
    run = _seed(PARTIAL)
    peer_overlap.show_timelines(run)
    fig = plt.gcf()
    # the copy starts at 10 us and the last B^4 ends at 310 us: 0.3 ms, the markers (0-3.5 us) left out
    assert all(ax.get_xlim() == pytest.approx((0, 0.3 * 1.02)) for ax in fig.axes)
    assert tuple(fig.get_size_inches()) == (15, 13)
    assert fig.get_suptitle() == (
        "The blog post's experiment: A.to('cuda:1') beside B*B*B*B on cuda:1, one step each"
        " - 2xFAKE (replayed)"
    )


def test_a_plateau_far_below_the_datasheet_fails_the_same_gpu_expectation():
    run = SAME[MACHINES[0]]
    header = copy.deepcopy(run.header)
    for gpu in header["machine"]["gpus"]:
        gpu["name"] = (
            "NVIDIA B200"  # 8000 GB/s on the datasheet: the H100/H200 plateau is far below
        )
    seen = copies.see_same_gpu(records.Run(run.value, False, header))
    assert not seen.checks[0].holds and " of 8000; " in seen.checks[0].measured


def test_the_blog_posts_sizes_are_set_beside_ours_and_the_expectation_checked():
    run = SEED[MACHINES[0]]
    same = peer_overlap.see_as_posted(run, run)  # the same run on both sides: nothing is "less"
    o = peer_overlap.summary(run)
    assert [c.holds for c in same.checks] == [False, False]
    assert same.sentences[0].startswith(
        f"At the blog post's sizes the copy took {o.copy_us:.0f} us per step (ours: {o.copy_us:.0f} us). "
        f"With side streams on both GPUs the overlap ratio was {o.both_side_text} (ours: {o.both_side_text})"
    )
    other = SEED[MACHINES[1]]
    seen = peer_overlap.see_as_posted(other, run)  # two machines: said first, nothing checked
    assert seen.sentences[0].startswith(
        f"These two runs come from two machines (the blog post's sizes recorded on {MACHINES[1]}, "
        f"ours on {MACHINES[0]})"
    )
    assert seen.sentences[0].endswith("so the expectation is not checked across the two.")
    assert not seen.checks


@pytest.mark.parametrize("machine", sorted(POSTED))
def test_the_blog_posts_sizes_say_by_the_pages_marks_whether_they_overlap(machine):
    posted, seed = POSTED[machine], _or_other(SEED, machine)
    p, o = peer_overlap.summary(posted), peer_overlap.summary(seed)
    *_, marks = peer_overlap.see_as_posted(posted, seed).sentences
    word = (
        "overlap"
        if min(p.both_side) >= 0.8
        else "no overlap"
        if max(p.both_side) <= 0.2
        else "partial overlap"
    )
    assert marks.startswith(
        f"By section 7's marks (0.8 and up overlap, 0.2 and below none) that is {word} at the "
        f"blog post's own sizes on {machine}"
    )
    assert ("did not overlap" in marks) == (word == "no overlap")
    seen = peer_overlap.see_as_posted(posted, seed)
    assert [c.holds for c in seen.checks] == [
        p.issue_us / p.copy_us > o.issue_us / o.copy_us,
        max(p.both_side) < min(o.both_side),
    ]


def test_blog_sizes_that_overlap_less_than_the_mark_for_none_say_so():
    for ratio, word in ((0.1, "no overlap"), (0.5, "partial overlap"), (0.9, "overlap")):
        rest = {(True, False): 0.0, (False, True): 0.0, (False, False): 0.0}
        run = _seed({(True, True): ratio, **rest})
        *_, marks = peer_overlap.see_as_posted(run, run).sentences
        assert f"that is {word} at the blog post's own sizes on 2xFAKE" in marks


def test_three_gpus_whose_pairs_do_not_share_fail_the_sharing_expectation():
    nbytes, pairs = 2**20, _pairs(3)
    value = {
        "alone": _timing(100.0, nbytes),
        "total": _timing(600.0, 6 * nbytes),
        "together": {f"{i}->{j}": _timing(100.0, nbytes) for i, j in pairs},  # as fast as alone
        "topology": {"source": "nvidia-smi topo -m", "links": [["X"] * 3] * 3},
    }
    (check,) = peer_links.see_all_pairs(_run(value, nbytes=nbytes), _links("NV4")).checks
    assert check.statement == peer_links.SHARED and not check.holds
