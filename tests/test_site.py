"""The website's generators (tools/build_site.py) and the browser test's pure parts
(tools/site_test.py), without Sphinx or a browser."""

from __future__ import annotations

import os
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import build_site  # noqa: E402
import site_test  # noqa: E402

from helpers import claims  # noqa: E402


def md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(outputs: list[dict]) -> dict:
    return {
        "cell_type": "code",
        "metadata": {},
        "source": "x",
        "outputs": outputs,
        "execution_count": 1,
    }


NOTEBOOK = {
    "cells": [
        md("# 01 · Pinned memory\n\nWhat you will learn"),
        code([]),
        md("## 1. First\n\ntext"),
        md("## Claims tested in this notebook"),
        code([]),
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def claim_row(
    machine: str, name: str = "copies are fast", verdict: str = claims.HOLDS, **extra: object
) -> dict:
    row = {
        "kind": "claim",
        "machine": machine,
        "notebook": "01_pinned_memory",
        "experiment": "copy_bandwidth",
        "name": name,
        "verdict": verdict,
        "value": 0.87,
        "spread": 0.0015,
        "unit": "of the raw rate",
        "threshold": 0.8,
        "holds_if": "above",
        "source": "seed 003",
        "measured": "256 MiB: 54 GB/s",
    }
    row.update(extra)
    return row


# ---------------------------------------------------------------- executed copies


def test_machine_order_puts_the_machine_with_most_notebooks_first_then_most_gpus():
    runs = {
        "1xB": ["00"],
        "4xA": ["05", "06"],
        "2xA": ["00", "01", "05"],
        "1xA": ["00", "01", "05"],
    }
    assert build_site.machine_order(runs) == ["2xA", "1xA", "4xA", "1xB"]


def test_stale_copies_names_missing_and_older_copies(tmp_path):
    replay, source = tmp_path / "replay", tmp_path / "notebooks"
    (replay / "2xA").mkdir(parents=True)
    source.mkdir()
    old = replay / "2xA" / "00_x.ipynb"
    old.write_text("{}")
    os.utime(old, (time.time() - 100, time.time() - 100))
    (source / "00_x.ipynb").write_text("{}")
    fresh = replay / "2xA" / "01_y.ipynb"
    fresh.write_text("{}")
    expected = [("2xA", "00_x"), ("2xA", "01_y"), ("2xA", "02_z")]
    assert build_site.stale_copies(expected, replay, [source]) == ["2xA/00_x", "2xA/02_z"]
    assert build_site.stale_copies(expected[1:2], replay, [source]) == []


# ---------------------------------------------------------------- notebook pages


def test_title_and_claims_anchor_are_read_from_the_markdown():
    pytest.importorskip("docutils", reason="the site extra (make site) brings docutils with Sphinx")
    assert build_site.notebook_title(NOTEBOOK["cells"]) == "01 · Pinned memory"
    assert build_site.claims_anchor(NOTEBOOK["cells"]) == "claims-tested-in-this-notebook"
    assert build_site.claims_anchor(NOTEBOOK["cells"][:2]) is None


def test_a_notebook_without_a_title_is_refused():
    with pytest.raises(ValueError, match="title"):
        build_site.notebook_title([md("no heading here"), code([])])


def test_notebook_page_puts_the_machine_in_the_title_and_links_the_others():
    page = build_site.notebook_page(NOTEBOOK, "2xA", "01_pinned_memory", ["2xA", "1xB"], None)
    first = page["cells"][0]["source"]
    assert first.startswith("# 01 · Pinned memory (2xA)\n")
    assert "[1xB](../1xB/01_pinned_memory.ipynb)" in first
    assert '<span class="current">2xA</span>' in first and "What you will learn" in first
    assert "colab" not in first
    assert NOTEBOOK["cells"][0]["source"].startswith(
        "# 01 · Pinned memory\n"
    )  # the input is left alone


def test_notebook_page_leaves_out_the_install_cell():
    install = {
        **code([]),
        "source": [
            "# Set-up: run alone (Colab, any Jupyter server), this cell installs the course.\n",
            "pass",
        ],
    }
    notebook = {**NOTEBOOK, "cells": [NOTEBOOK["cells"][0], install, *NOTEBOOK["cells"][1:]]}
    page = build_site.notebook_page(notebook, "2xA", "01_pinned_memory", ["2xA"], None)
    assert len(page["cells"]) == len(NOTEBOOK["cells"])
    assert not any("".join(c["source"]).startswith("# Set-up: run alone") for c in page["cells"])


def test_colab_badge_links_to_the_committed_notebook():
    url = build_site.colab_url("someone/course", "main", "01_pinned_memory")
    assert (
        url
        == "https://colab.research.google.com/github/someone/course/blob/main/notebooks/01_pinned_memory.ipynb"
    )
    page = build_site.notebook_page(NOTEBOOK, "2xA", "01_pinned_memory", ["2xA"], url)
    assert f"[![Open in Colab](/_static/colab-badge.svg)]({url})" in page["cells"][0]["source"]


@pytest.mark.parametrize("repository", ["course", "a/b/c", "/course", ""])
def test_colab_url_refuses_a_repository_that_is_not_owner_name(repository):
    with pytest.raises(ValueError, match="owner/name"):
        build_site.colab_url(repository, "main", "00_start_here")


def test_the_shipped_colab_badge_is_an_svg_with_a_size():
    svg = ET.parse(ROOT / "site" / "_static" / "colab-badge.svg").getroot()
    assert svg.tag.endswith("svg") and int(svg.get("width")) > 0 and int(svg.get("height")) > 0


def test_error_cells_finds_tracebacks():
    cells = [
        code([{"output_type": "stream", "text": "ok"}]),
        code([{"output_type": "error", "ename": "E"}]),
    ]
    assert build_site.error_cells(cells) == [1]


# ---------------------------------------------------------------- landing and machine pages

GPU = {
    "name": "GPU A",
    "memory_bytes": 2**36,
    "capability": "9.0",
    "sm_count": 132,
    "pcie_gen_current": 5,
    "pcie_gen_max": 5,
    "pcie_width_current": 16,
    "pcie_width_max": 16,
}
MACHINE = {
    "machine": "2xA",
    "gpus": [{**GPU, "index": 0}, {**GPU, "index": 1}],
    "peer_access": [[True, True]] * 2,
    "gpu_links": None,
    "os": "Linux",
    "driver": "580",
    "cuda": "13.0",
    "torch": "2.11",
    "nccl": "2.28",
    "cpu": "x",
    "cpu_cores": 8,
    "ram_bytes": 2**34,
    "python": "3.12",
}


def test_landing_lists_machines_and_links_each_notebook_on_each_machine_that_ran_it():
    text = build_site.machines_markdown(
        [MACHINE], {"2xA": ["00_a", "05_b"], "1xB": ["00_a"]}, {"00_a": "00 · A", "05_b": "05 · B"}
    )
    assert (
        "| [2xA](runs/2xA/index.md) | 2 x GPU A | gen 5 x16 | driver 580, CUDA 13.0, torch 2.11, NCCL 2.28 |"
        in text
    )
    assert "| 00 · A | [2xA](runs/2xA/00_a.ipynb) · [1xB](runs/1xB/00_a.ipynb) |" in text
    assert "| 05 · B | [2xA](runs/2xA/05_b.ipynb) |" in text
    assert "runs/2xA/index\nruns/1xB/index" in text


def test_machine_page_has_report_notebooks_and_gaps():
    text = build_site.machine_markdown(
        MACHINE, ["00_a"], {"00_a": "00 · A"}, {"02_x/loader": "no machine lent"}
    )
    assert text.startswith("# 2xA\n") and "00 · A <00_a>" in text
    assert "- `02_x/loader`: no machine lent" in text and "PCIe gen 5" in text


# ---------------------------------------------------------------- claims x machines


def test_claim_cell_shows_verdict_value_spread_threshold_and_link():
    cell = build_site.claim_cell(claim_row("2xA"), "runs/2xA/01.html#claims")
    assert 'class="verdict-holds"' in cell and '<a href="runs/2xA/01.html#claims">holds</a>' in cell
    assert (
        "0.870 ± 0.002 of the raw rate; holds if above 0.8" in cell
    )  # value and spread rounded alike
    assert 'title="256 MiB: 54 GB/s"' in cell


def test_claim_cell_without_a_row_says_not_recorded_and_why():
    cell = build_site.claim_cell(None, None, "too few GPUs")
    assert "not recorded" in cell and 'title="too few GPUs"' in cell


def test_claim_cell_escapes_html():
    cell = build_site.claim_cell(claim_row("2xA", measured='<b>"x"</b>', unit="<GB/s>"), None)
    assert "<b>" not in cell and "&lt;GB/s&gt;" in cell


def test_missing_reason_tells_a_notebook_too_big_from_a_gap():
    runs = {"1xB": ["01_pinned_memory"], "2xA": ["01_pinned_memory", "05_p2p"]}
    gaps = {"1xB": {"01_pinned_memory/copy_bandwidth": "no H100 lent"}}
    assert "needs more GPUs" in build_site.missing_reason("1xB", "05_p2p", "peer", runs, gaps)
    assert "no H100 lent" in build_site.missing_reason(
        "1xB", "01_pinned_memory", "copy_bandwidth", runs, gaps
    )
    assert "no verdict" in build_site.missing_reason(
        "2xA", "01_pinned_memory", "copy_bandwidth", runs, gaps
    )


def test_matrix_has_one_row_per_claim_one_column_per_machine_in_the_notebooks_order():
    rows = [
        claim_row("2xA", "late claim", experiment="later"),
        claim_row("2xA"),
        claim_row("1xB", verdict=claims.DOES_NOT_HOLD, value=0.5),
    ]
    runs = {"2xA": ["01_pinned_memory"], "1xB": ["01_pinned_memory"]}
    html = build_site.claims_matrix(
        rows,
        runs,
        {"01_pinned_memory": ["copy_bandwidth", "later"]},
        {("2xA", "01_pinned_memory"): "runs/2xA/01.html#c"},
        {},
    )
    assert html.count('<td class="claim">') == 2
    assert html.index("copies are fast") < html.index("late claim")
    assert "<th>2xA</th><th>1xB</th>" in html
    assert html.count("verdict-does-not-hold-here") == 1 and html.count("not recorded") == 1


def test_a_source_claim_leads_and_its_cases_fold_beneath_it():
    rows = [
        claim_row("2xA", "up to twice as slow [below 1 MiB]"),
        claim_row("2xA", "up to twice as slow [64 MiB and up]", verdict=claims.BORDERLINE),
        claim_row("1xB", "up to twice as slow [below 1 MiB]", verdict=claims.DOES_NOT_HOLD),
        claim_row("2xA", "copies are fast"),
    ]
    runs = {"2xA": ["01_pinned_memory"], "1xB": ["01_pinned_memory"]}
    html = build_site.claims_matrix(rows, runs, {"01_pinned_memory": ["copy_bandwidth"]}, {}, {})
    assert html.count('class="source-claim"') == 1 and html.count('class="subcase"') == 2
    lead = html[html.index('class="source-claim"') : html.index('class="subcase"')]
    assert "up to twice as slow" in lead and "2 cases" in lead and "[" not in lead
    assert "1 borderline here, 1 holds" in lead  # 2xA: the worst verdict first, coloured by it
    assert (
        'verdict-borderline-here">1 borderline' in lead
        and 'verdict-does-not-hold-here">1 does not' in lead
    )
    assert ">below 1 MiB</td>" in html and ">64 MiB and up</td>" in html
    assert build_site.source_claim("a [b] c") == "a" and build_site.source_claim("plain") == "plain"


def test_verdict_counts_per_machine():
    rows = [claim_row("2xA"), claim_row("2xA", "b", verdict=claims.BORDERLINE), claim_row("1xB")]
    table = build_site.verdict_counts(rows, ["2xA", "1xB"])
    assert "| holds | 1 | 1 |" in table and "| borderline here | 1 | 0 |" in table


# ---------------------------------------------------------------- machines compared (recorded data)


def test_compared_page_draws_what_is_recorded_and_names_what_is_not(tmp_path):
    from helpers import records

    machines = records.recorded_machine_names()
    lines = build_site.compared_figures(machines, tmp_path)
    host = [
        m
        for m in machines
        if records.recording_path(m, "01_pinned_memory", "copy_bandwidth").exists()
    ]
    assert (tmp_path / "host_copies.png").exists() == bool(host)
    absent = [
        line
        for line in lines
        if line.startswith("Not drawn") and "01_pinned_memory/copy_bandwidth" in line
    ]
    missing = [m for m in machines if m not in host]
    assert absent == (
        [f"Not drawn: {', '.join(missing)} (no recording of 01_pinned_memory/copy_bandwidth)."]
        if missing
        else []
    )


def test_all_reduce_curve_reads_one_world_size_and_a_sweep_taking_the_most_ranks():
    from helpers.timing import Timing

    def t(seconds: float) -> Timing:
        return Timing(samples_s=[seconds] * 3, label="x", method="cuda_events", nbytes=None)

    header = {"params": {"sizes": [1000, 2000]}}
    ceiling = Timing(samples_s=[1e-3] * 3, label="copy", method="cuda_events", nbytes=10**8)
    one = {"world_size": 2, "timings": {"all_reduce": [t(1e-6), t(1e-6)]}, "ceiling": ceiling}
    sizes, busbw, ranks, top = build_site.all_reduce_curve(header, one)
    assert (
        sizes == [1000, 2000]
        and ranks == 2
        and busbw == pytest.approx([1.0, 2.0])
        and top == pytest.approx(100)
    )
    sweep = {
        "sweep": [one, {"world_size": 4, "timings": {"all_reduce": [t(1e-6), t(2e-6)]}}],
        "ceiling": ceiling,
    }
    _, busbw, ranks, _ = build_site.all_reduce_curve(header, sweep)
    assert ranks == 4 and busbw == pytest.approx([1.5, 1.5])


# ---------------------------------------------------------------- the browser test's pure parts


def test_only_file_and_data_requests_stay_on_the_machine():
    urls = [
        "file:///a/index.html",
        "data:image/png;base64,xx",
        "https://cdn.example/x.js",
        "http://x/y",
        "ws://z",
    ]
    assert site_test.leaving_requests(urls) == ["https://cdn.example/x.js", "http://x/y", "ws://z"]


def test_screenshot_names_follow_the_page_path(tmp_path):
    assert (
        site_test.shot_name(tmp_path / "runs" / "2xA" / "01.html", tmp_path) == "runs__2xA__01.png"
    )


def test_site_pages_leave_out_the_theme_files(tmp_path):
    for rel in ("index.html", "runs/2xA/01.html", "_static/webpack-macros.html"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("<html></html>")
    assert [p.relative_to(tmp_path).as_posix() for p in site_test.site_pages(tmp_path)] == [
        "index.html",
        "runs/2xA/01.html",
    ]


def test_the_browser_is_the_setting_then_the_usual_names_on_path(tmp_path):
    on_path = {"google-chrome": "/opt/google/chrome/chrome", "/my/chromium": "/my/chromium"}
    assert site_test.find_browser({"COURSE_BROWSER": "/my/chromium"}, on_path.get) == Path(
        "/my/chromium"
    )
    assert site_test.find_browser({}, on_path.get) == Path("/opt/google/chrome/chrome")
    assert site_test.find_browser({}, {"chromium": "/usr/bin/chromium", **on_path}.get) == Path(
        "/usr/bin/chromium"
    )
    assert site_test.find_browser({}, {}.get) is None  # Playwright's own Chromium, if downloaded
    with pytest.raises(SystemExit, match="COURSE_BROWSER='/nope' is not a runnable browser"):
        site_test.find_browser({"COURSE_BROWSER": "/nope"}, on_path.get)


def test_a_fresh_root_machine_installs_debians_chromium_and_says_so(capsys):
    calls = []

    def apt(cmd, env):
        calls.append(cmd)
        return type("Done", (), {"returncode": 0})()

    path = site_test.install_browser(apt, {"chromium": "/usr/bin/chromium"}.get)
    assert path == Path("/usr/bin/chromium")
    assert calls[0][:2] == ["apt-get", "update"]
    assert calls[1][:2] == ["apt-get", "install"] and calls[1][-1] == "chromium"
    assert "installing Debian's chromium" in capsys.readouterr().out


def test_a_failed_browser_install_says_what_to_do_instead():
    failed = lambda cmd, env: type("Done", (), {"returncode": 100})()  # noqa: E731
    with pytest.raises(SystemExit, match="apt-get update -qq` failed; make site-test needs"):
        site_test.install_browser(failed, {}.get)


def test_only_root_with_apt_get_installs_a_browser():
    has_apt = {"apt-get": "/usr/bin/apt-get"}.get
    assert site_test.can_install_system_packages(has_apt, uid=0)
    assert not site_test.can_install_system_packages(has_apt, uid=1000)
    assert not site_test.can_install_system_packages({}.get, uid=0)
