import types

import matplotlib.pyplot as plt
import pytest

from helpers import claims, exercises, plotting, records
from helpers.plotting import before_after


def test_bandwidth_plot_has_units_and_log_axes():
    ax = plotting.bandwidth_vs_size(
        {"pinned H2D": ([2**10, 2**20], [1.0, 50.0])},
        title=plotting.machine_title("H2D", "1xGPU", live=False),
        ceiling_gbps=55,
    )
    assert "GB/s" in ax.get_ylabel() and "bytes" in ax.get_xlabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "H2D - 1xGPU (replayed)"
    (ceiling,) = [line for line in ax.get_lines() if line.get_label().endswith("(55 GB/s)")]
    assert ceiling.get_linestyle() == "--" and ceiling.get_ydata()[0] == 55  # dashed: no data
    assert plotting.machine_title("H2D", "1xGPU", live=True) == "H2D - 1xGPU (live)"
    assert plotting.machine_title("H2D", "1xGPU") == "H2D - 1xGPU"  # live or not unsaid
    run = types.SimpleNamespace(machine="2xGPU", live=False)  # a records.Run's two fields
    assert plotting.titled("D2D", run) == "D2D - 2xGPU (replayed)"
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


def test_bar_values_of_a_thousand_and_up_are_written_whole_not_in_e_notation():
    ax = plotting.bars_with_ratios({"a": 1000.0, "b": 12345.6}, title="t", ylabel="ms")
    assert [t.get_text() for t in ax.texts] == ["1000\n1.00x", "12346\n12.35x"]
    ax = plotting.grouped_bars({"g": {"s": 999.6, "u": 0.01234}}, title="t", ylabel="ms")
    assert [t.get_text() for t in ax.texts] == ["1000", "0.0123"]


def test_grouped_bars():
    ax = plotting.grouped_bars(
        {
            "pageable": {"blocking": 2.0, "non_blocking": 1.0},
            "pinned": {"blocking": 1.0, "non_blocking": 0.5},
        },
        title="t",
        ylabel="ms",
    )
    assert len(ax.patches) == 4 and ax.get_ylabel() == "ms"
    with pytest.raises(TypeError):
        plotting.machine_title("x", None)


def test_claims_verdicts_are_computed():
    table = claims.ClaimsTable("01_pinned_memory")
    table.add("pinned is faster", source="seed 003", measured="2.0x", holds=2.0 > 1.5)
    table.add("twice as slow", source="seed 003", measured="ratio 5", holds=5 <= 2)
    table.add("needs 8 GPUs", source="seed 004", measured="-", holds=None)
    assert list(table.verdicts().values()) == [
        claims.HOLDS,
        claims.DOES_NOT_HOLD,
        claims.NOT_TESTABLE,
    ]
    md = table._repr_markdown_()
    assert "01_pinned_memory" in md and "**holds**" in md and md.count("\n|") == 5
    with pytest.raises(TypeError, match="bool computed"):
        table.add("typed", source="s", measured="m", holds="holds")
    with pytest.raises(TypeError):
        table.add("", source="s", measured="m", holds=True)


def test_claims_say_where_it_was_measured():
    run = records.Run(
        1, False, {"machine": {"machine": "2xH200", "gpus": []}, "params": {}, "date": "2026"}
    )
    row = claims.ClaimsTable("nb").add("c", source="s", measured="m", holds=True, run=run)
    assert row.where == "replayed from 2xH200"


def test_exercise_checkers(capsys):
    assert exercises.check_number(None, 5.0) is None
    assert "Not answered" in capsys.readouterr().out
    assert exercises.check_number(5.2, 5.0, unit="ms") is True
    capsys.readouterr()
    assert exercises.check_number(9, 5.0, hint="look at the plot") is False
    first = capsys.readouterr().out
    assert "Hint: look at the plot" in first and "gives" not in first, (
        "a hint, not the answer, first"
    )
    assert exercises.check_number(8, 5.0, hint="look at the plot") is False
    second = capsys.readouterr().out
    assert "the measurement gives 5" in second and "Hint" not in second
    with pytest.raises(TypeError):
        exercises.check_number("5", 5.0)
    assert exercises.check_choice("pinned", "pinned", choices=["pinned", "pageable"]) is True
    assert exercises.check_choice(None, "pinned", choices=["pinned", "pageable"]) is None
    capsys.readouterr()
    assert (
        exercises.check_choice(
            "pageable", "pinned", choices=["pinned", "pageable"], hint="the faster"
        )
        is False
    )
    assert "Hint: the faster" in (out := capsys.readouterr().out) and "'pinned'" not in out
    assert (
        exercises.check_choice(
            "pageable", "pinned", choices=["pinned", "pageable"], hint="the faster"
        )
        is False
    )
    assert "the measurement says 'pinned'" in capsys.readouterr().out
    assert exercises.check_choice("pined", "pinned", choices=["pinned", "pageable"]) is None
    assert "'pined' is not one of the choices" in capsys.readouterr().out
    with pytest.raises(ValueError):
        exercises.check_choice("pinned", "gpu", choices=["pinned", "pageable"])


# ---------------------------------------------------------------- axes, groups and compared timelines

from helpers.trace import Interval  # noqa: E402


def _labels(axis):
    axis.figure.canvas.draw()
    return [
        t.get_text()
        for t in axis.get_ticklabels() + axis.get_ticklabels(minor=True)
        if t.get_text()
    ]


def test_size_axis_says_binary_prefixes_and_rates_plain_numbers():
    ax = plotting.bandwidth_vs_size(
        {"pinned": ([2**10, 2**20, 2**30], [0.5, 45.0, 60.0])}, title="t"
    )
    xs, ys = _labels(ax.xaxis), _labels(ax.yaxis)
    assert "1 KiB" in xs and "1 MiB" in xs and "1 GiB" in xs
    assert all("10^" not in t and "times" not in t and "\\" not in t for t in xs + ys), xs + ys
    assert "50" in ys and "0.5" in ys
    with pytest.raises(ValueError, match="'x' or 'y'"):
        plotting.size_axis(ax, axis="z")
    with pytest.raises(TypeError, match="Axes"):
        plotting.log_axis("not an axes")


def test_grouped_series_share_one_colour_and_one_legend_entry():
    pairs = {
        f"cuda:{i} -> cuda:{j}": ([2**20, 2**30], [100.0 + i, 300.0 + j])
        for i in range(4)
        for j in range(4)
        if i != j
    }
    groups = {label: "NVLink" for label in pairs} | {"same GPU": "same GPU"}
    ax = plotting.bandwidth_vs_size(
        pairs | {"same GPU": ([2**20, 2**30], [1000.0, 4000.0])},
        title="t",
        groups=groups,
        ceiling_gbps=450,
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["NVLink (12 series)", "same GPU", "link ceiling (450 GB/s)"]
    assert (
        len({line.get_color() for line in ax.lines[:12]}) == 1
        and ax.lines[12].get_color() != ax.lines[0].get_color()
    )
    with pytest.raises(ValueError, match="no group"):
        plotting.bandwidth_vs_size(pairs, title="t", groups={"cuda:0 -> cuda:1": "NVLink"})


def _work(offset, copy_us, kernel_us):
    return [
        Interval(
            "memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            offset,
            offset + copy_us,
            device=0,
            stream=7,
            copy_kind="HtoD",
        ),
        Interval("kernel", "k", offset, offset + kernel_us, device=0, stream=13),
    ]


def test_timelines_share_one_time_axis_and_one_colour_key():
    fig = plotting.timelines(
        {"short": _work(5_000.0, 100.0, 50.0), "long": _work(90.0, 400.0, 300.0)},
        title="Copies beside kernels - 1xGPU (replayed)",
        include_host=False,
    )
    short, long = fig.axes
    assert short.get_xlim() == long.get_xlim() and long.get_xlim()[1] == pytest.approx(408.0)
    assert short.get_title(loc="left") == "short" and fig._suptitle.get_text().endswith(
        "(replayed)"
    )
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "kernel",
        "copy HtoD (host to GPU)",
    ]
    assert short.get_legend() is None and "same scale" in long.get_xlabel()
    copy_bars = [
        c
        for c in short.collections
        if tuple(c.get_facecolor()[0][:3]) == tuple(long.collections[0].get_facecolor()[0][:3])
    ]
    assert copy_bars, "the same kind of work has the same colour in every panel"
    with pytest.raises(ValueError, match="at least one panel"):
        plotting.timelines({}, title="t")
    with pytest.raises(TypeError, match="title"):
        plotting.timelines({"a": _work(0.0, 1.0, 1.0)}, title=None)


def test_a_single_timeline_panel_draws_each_lane_on_its_own_row_from_time_0():
    fig = plotting.timelines(
        {"only": _work(1_000.0, 100.0, 50.0)}, title="One panel - 1xGPU", include_host=False
    )
    (ax,) = fig.axes
    assert ax.get_xlim() == pytest.approx((0.0, 102.0))  # from the first slice, 2% beyond
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "GPU 0: default stream",  # stream 7 is the default stream
        "GPU 0: stream 13",
    ]
    rows = sorted(
        (round(path.vertices[:, 1].min(), 6), round(path.vertices[:, 1].max(), 6))
        for bars in ax.collections
        for path in bars.get_paths()
    )
    assert rows == [(-0.4, 0.4), (0.6, 1.4)]  # lane k is the band k ± 0.4, first on top
    assert ax.get_ylim() == (1.5, -0.5)
    fig.canvas.draw()
    (key,) = fig.legends
    assert all(t.get_fontsize() == 8 for t in key.get_texts())
    renderer = fig.canvas.get_renderer()
    # the colour key sits under the panels, never over the slices or the title
    assert key.get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y0
    plt.close(fig)


def _seven_collectives(n):
    """The seven collectives' data as the gloo worker of 06 reports it, for n ranks."""
    total = [sum(r + k for r in range(1, n + 1)) for k in range(3)]
    data = {
        "broadcast": ([[1, 2, 3]] + [[0, 0, 0]] * (n - 1), [[1, 2, 3]] * n),
        "scatter": (
            [[[i, i + 1] for i in range(0, 2 * n, 2)]] + [None] * (n - 1),
            [[2 * r, 2 * r + 1] for r in range(n)],
        ),
        "reduce": (
            [[r + 1, r + 2, r + 3] for r in range(n)],
            [total] + [[r + 1, r + 2, r + 3] for r in range(1, n)],
        ),
        "gather": (
            [[r, r + 1, r + 2] for r in range(n)],
            [[[r, r + 1, r + 2] for r in range(n)]] + [None] * (n - 1),
        ),
        "all_reduce": (
            [[r + 1.0, r + 2.0, r + 3.0] for r in range(n)],
            [[float(t) for t in total]] * n,
        ),
        "all_gather": ([[float(r)] for r in range(n)], [[[float(r)] for r in range(n)]] * n),
        "reduce_scatter": (
            [[[float(r + i)] for i in range(n)] for r in range(n)],
            [[float(n * r + n * (n - 1) // 2)] for r in range(n)],
        ),
    }
    return {
        name: {"before": b, "after": a, "call": f"{name}(tensor, ...)"}
        for name, (b, a) in data.items()
    }


def test_exercise_checkers_print_what_a_learner_reads(capsys, monkeypatch):
    monkeypatch.setattr(exercises, "_MISSED", set())
    said = []

    def check(*args, **kwargs):
        result = (exercises.check_choice if "choices" in kwargs else exercises.check_number)(
            *args, **kwargs
        )
        said.append(capsys.readouterr().out.rstrip("\n"))
        return result

    assert check(None, 5.0, unit="ms") is None
    assert check(None, 5.0) is None
    assert check(4.3, 5.0, unit="ms") is True  # 14% off: within 15%
    assert check(4.321, 5.0, rel_tol=0.2) is True
    assert check(4.2, 5.0, hint="read the plot") is False
    assert check(4.2, 5.0, hint="read the plot") is False
    assert check(20.0, 5.0) is False  # no hint: the value at once
    assert check("b", "a", choices=["a", "b"]) is False
    assert said == [
        "Not answered yet. Replace None with your estimate (in ms).",
        "Not answered yet. Replace None with your estimate.",
        "Right: you said 4.3 ms, the measurement gives 5 ms (within 15% counts).",
        "Right: you said 4.321, the measurement gives 5 (within 20% counts).",
        "Not quite: 4.2 is not within 15% of the measurement. Hint: read the plot. Change your "
        "answer and run the cell again.",
        "Not quite: you said 4.2, the measurement gives 5 (within 15% counts).",
        "Not quite: you said 20, the measurement gives 5 (within 15% counts).",
        "Not quite: the measurement says 'a'.",
    ]
    with pytest.raises(TypeError, match=r"^the answer must be a number in ms, got '5'$"):
        exercises.check_number("5", 5.0, unit="ms")
    with pytest.raises(TypeError, match=r"^choices is a list of strings, .* got 'ab'$"):
        exercises.check_choice("a", "a", choices="ab")
    with pytest.raises(ValueError, match=r"^expected 'c' is not one of the choices \['a', 'b'\]$"):
        exercises.check_choice("a", "c", choices=["a", "b"])


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_before_after_stays_readable_for_2_4_and_8_ranks(ranks):
    fig = plotting.draw_before_after(
        _seven_collectives(ranks), title=f"Seven collectives, {ranks} ranks - 1xGPU"
    )
    width, height = fig.get_size_inches()
    assert width <= plotting.BEFORE_AFTER_MAX_WIDTH_IN and height <= 20, (width, height)
    assert len(fig.axes) == 7 * ranks  # one cell per collective and rank
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    texts = [t for ax in fig.axes for t in ax.texts] + fig.texts
    assert all(t.get_fontsize() >= 9 for t in texts)  # never shrunk to fit
    for t in texts:  # nothing runs off the figure
        extent = t.get_window_extent(renderer)
        assert extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1 and extent.y0 >= box.y0 - 1, (
            t.get_text()
        )
    headings = sorted(
        t.get_text() for ax in fig.axes for t in ax.texts if t.get_text().startswith("rank ")
    )
    assert headings == sorted(
        f"rank {r}" for r in range(ranks)
    )  # every rank named once, blocks or not
    plt.close(fig)


def test_before_after_splits_ranks_into_as_few_even_blocks_as_fit_the_width():
    # 10.5 inches, 1 for the labels: 6 columns of 1.5 in fit, so 8 ranks make 2 blocks of 4
    assert before_after._rank_blocks(8, 1.5, 1.0) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert before_after._rank_blocks(7, 1.5, 1.0) == [[0, 1, 2, 3], [4, 5, 6]]
    assert before_after._rank_blocks(6, 1.5, 1.0) == [[0, 1, 2, 3, 4, 5]]
    assert before_after._rank_blocks(2, 12.0, 1.0) == [[0], [1]]  # wider than the page: one each


def test_before_after_wraps_long_values_between_elements():
    assert before_after._value_lines([[0, 1, 2], [1, 2, 3], [2, 3, 4]], width=22) == [
        "[[0, 1, 2], [1, 2, 3],",
        " [2, 3, 4]]",
    ]
    assert before_after._value_lines([1, 2, 3]) == ["[1, 2, 3]"] and before_after._value_lines(
        None
    ) == ["-"]
    with pytest.raises(TypeError, match="title"):
        plotting.draw_before_after(_seven_collectives(2), title=None)


def test_runtime_calls_without_a_thread_get_one_host_lane_beside_a_named_thread():
    calls = [
        Interval("runtime", "cudaLaunchKernel", 0.0, 5.0),
        Interval("runtime", "cudaMemcpyAsync", 6.0, 9.0, thread=3),
    ]
    ax = plotting.timeline(calls, title="t")
    lanes = {t.get_text() for t in ax.get_yticklabels()}
    assert lanes == {"host: CUDA runtime calls", "host thread 3: CUDA runtime calls"}
    plt.close("all")


@pytest.mark.parametrize("count", [1, 2, 3])
def test_grouped_bars_sit_centred_on_their_group(count):
    series = {f"s{k}": float(k + 1) for k in range(count)}
    ax = plotting.grouped_bars({"a": series, "b": series}, title="t", ylabel="ms")
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    for group in (0, 1):  # the series of one group lie symmetric about its tick
        mine = [c for c in centres if abs(c - group) < 0.5]
        assert len(mine) == count and sum(mine) / count == pytest.approx(group)
    # side by side, filling 0.8 of the space between ticks: touching, never overlapping
    assert all(p.get_width() == pytest.approx(0.8 / count) for p in ax.patches)
    plt.close("all")


def test_values_round_by_their_size_and_spread():
    assert claims.Value(0.0, 0.004).number() == "0.000"  # a zero shows its spread's places
    assert claims.Value(1e6).number() == "1e+06" and claims.Value(999_999.0).number() == "999999"


def test_an_index_rows_recorded_runs_decide_its_verdict():
    row = {"value": 0.9, "spread": 0.003, "threshold": 0.8, "holds_if": "above"}
    assert claims.verdict_of(row) == claims.HOLDS
    assert claims.verdict_of({**row, "runs": [0.7, 0.87], "band": 0.0}) == claims.BORDERLINE


def test_before_after_marks_only_the_values_that_changed():
    from matplotlib.colors import to_hex

    fig = plotting.draw_before_after({"broadcast": {"before": [0, 1], "after": [0, 0]}}, title="t")
    boxes = [t for ax in fig.axes for t in ax.texts if t.get_bbox_patch() is not None]
    grey = [to_hex(t.get_bbox_patch().get_facecolor()) == "#eeeeee" for t in boxes]
    assert len(boxes) == 4 and grey.count(False) == 1  # only rank 1's value changed (1 -> 0)
    plt.close(fig)


def test_a_host_range_lane_is_outlined_and_hatched_not_white_on_white():
    from matplotlib.collections import PolyCollection

    ivs = [
        Interval("kernel", "k", 0.0, 5.0, device=0, stream=7),
        Interval("annotation", "step 1", 0.0, 9.0),
    ]
    ax = plotting.timeline(ivs, title="t", ranges=["step"])
    hatches = [c.get_hatch() for c in ax.collections if isinstance(c, PolyCollection)]
    assert hatches.count("//") == 1  # the range's bars; white, so drawn outlined and hatched
    plt.close("all")


@pytest.mark.parametrize(
    "low, high, exponents",
    [
        (2**10, 2**30, range(10, 31, 2)),  # 20 doublings: every other power of two
        (2**3, 2**9, range(3, 10)),  # few: every one
        (1, 2**100, range(0, 101, 10)),  # 100: one per 2^10 (KiB, MiB, GiB ...)
        (1, 2.0**250, range(0, 251, 30)),  # beyond: a multiple of 10, at most 10 ticks
        (3, 2**20, range(0, 21, 2)),  # starts at a multiple of its step
    ],
)
def test_size_axes_tick_at_powers_of_two_that_keep_kib_mib_and_gib(low, high, exponents):
    from helpers.plotting.charts import _PowersOfTwo

    assert _PowersOfTwo().tick_values(low, high) == [2.0**e for e in exponents]
