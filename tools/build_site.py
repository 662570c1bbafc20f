"""Build the course's website into build/site/ (``make site``), offline, with Sphinx and myst-nb.

The pages are the notebooks as ``tools/replay_all.py`` executed them on every recorded machine
(build/replay/<machine>/<notebook>.ipynb, outputs from the GPU recordings); the replay runs
first only when those copies are missing or older than notebooks/ or results/. Beside them:

- the landing page (site/index.md) with the recorded machines and a notebook x machine grid;
- one page per machine (its report, its notebooks, what it could not record);
- one page per notebook per machine, with links to the same notebook on the other machines
  and an "Open in Colab" badge (for the repository named by ``COURSE_REPOSITORY`` or GitHub's
  ``GITHUB_REPOSITORY``, owner/name; without one, no badge);
- claims.md: every claim x every machine, from results/index.jsonl;
- compared.md: the same bandwidth curves of every machine on one plot, drawn by
  ``helpers.plotting`` from the recordings (``helpers.records.load``).

Everything is written into build/site-src/ (a copy of site/ plus the generated pages), then
``sphinx-build`` turns it into build/site/.

    python tools/build_site.py            # replay if needed, generate, build
    python tools/build_site.py --no-replay   # use the executed copies as they are
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import claims, config, distributed, hardware, plotting, records  # noqa: E402

SITE = ROOT / "site"
SOURCE = ROOT / "build" / "site-src"
OUT = ROOT / "build" / "site"
REPLAY = ROOT / "build" / "replay"
NOTEBOOKS = ROOT / "notebooks"
CLAIMS_HEADING = "## Claims tested"  # each notebook's claims section starts with this heading
VERDICT_CLASS = {v: "verdict-" + v.replace(" ", "-") for v in claims.VERDICTS}


# ---------------------------------------------------------------- the executed copies


def machine_order(runs: Mapping[str, Sequence[str]]) -> list[str]:
    """Machine names: those that ran the most notebooks first, then the most GPUs, then by name."""

    def gpus(name: str) -> int:
        count = name.split("x", 1)[0]
        return int(count) if count.isdigit() else 0

    return sorted(runs, key=lambda m: (-len(runs[m]), -gpus(m), m))


def executed_runs(replay: Path = REPLAY) -> dict[str, list[str]]:
    """``{machine: [notebook stems]}`` of the executed copies under ``replay`` (see machine_order)."""
    runs = {}
    for folder in sorted(p for p in replay.glob("*") if p.is_dir()):
        stems = sorted(p.stem for p in folder.glob("*.ipynb"))
        if stems:
            runs[folder.name] = stems
    return {m: runs[m] for m in machine_order(runs)}


def newest_mtime(folders: Iterable[Path]) -> float:
    """The latest modification time of any file under ``folders`` (0 when there is none)."""
    return max(
        (p.stat().st_mtime for folder in folders for p in folder.rglob("*") if p.is_file()),
        default=0.0,
    )


def stale_copies(
    expected: Iterable[tuple[str, str]], replay: Path, sources: Iterable[Path]
) -> list[str]:
    """The ``machine/notebook`` copies in ``expected`` that are missing under ``replay`` or older
    than the newest file under ``sources``."""
    newest = newest_mtime(sources)
    stale = []
    for machine, stem in expected:
        copy = replay / machine / f"{stem}.ipynb"
        if not copy.exists() or copy.stat().st_mtime < newest:
            stale.append(f"{machine}/{stem}")
    return stale


def ensure_replays() -> None:
    """Run tools/replay_all.py when an executed copy is missing or older than notebooks/ or results/."""
    expected = [(machine, nb.stem) for machine, nb in replay_jobs()]
    stale = stale_copies(expected, REPLAY, [NOTEBOOKS, config.results_dir()])
    if not stale:
        return
    print(
        f"replaying the notebooks first ({len(stale)} executed copies missing or out of date, "
        f"e.g. {stale[0]})",
        flush=True,
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "replay_all.py")], cwd=ROOT, check=False
    )
    missing = stale_copies(expected, REPLAY, [])
    if missing:
        raise SystemExit(
            f"tools/replay_all.py did not produce {', '.join(missing)}: see its output above"
        )
    if done.returncode:
        print(
            "tools/replay_all.py reported problems (above); the site shows the copies as executed",
            flush=True,
        )


def replay_jobs() -> list[tuple[str, Path]]:
    """(machine, notebook) pairs the replay run executes (tools/replay_all.py's own list)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import replay_all  # noqa: PLC0415 (a tool beside this one, not a package)

    return replay_all.jobs()


# ---------------------------------------------------------------- notebook pages


def notebook_title(cells: Sequence[Mapping[str, Any]]) -> str:
    """The text of a notebook's first ``# `` heading (its title)."""
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    raise ValueError("the notebook has no '# title' heading in a markdown cell: give it one")


def claims_anchor(cells: Sequence[Mapping[str, Any]]) -> str | None:
    """The HTML id Sphinx gives a notebook's "## Claims tested ..." section (None without one)."""
    from docutils.nodes import make_id  # Sphinx's own id rule; docutils comes with the site extra

    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith(CLAIMS_HEADING):
                    return make_id(line.lstrip("#").strip())
    return None


def error_cells(cells: Sequence[Mapping[str, Any]]) -> list[int]:
    """The indices of the cells whose outputs hold an error (a traceback a reader would see)."""
    return [
        i
        for i, cell in enumerate(cells)
        if any(out.get("output_type") == "error" for out in cell.get("outputs", []))
    ]


def colab_url(repository: str, branch: str, stem: str) -> str:
    """Colab's address that opens ``notebooks/<stem>.ipynb`` of a GitHub repository ('owner/name')."""
    if repository.count("/") != 1 or not all(repository.split("/")):
        raise ValueError(f"repository must be GitHub's 'owner/name', got {repository!r}")
    return f"https://colab.research.google.com/github/{repository}/blob/{branch}/notebooks/{stem}.ipynb"


def selector_markdown(
    machine: str, stem: str, machines_with_it: Sequence[str], colab: str | None
) -> str:
    """The line under a notebook's title: the machine shown, links to the same notebook on the others."""
    links = [
        f'<span class="current">{machine}</span>' if m == machine else f"[{m}](../{m}/{stem}.ipynb)"
        for m in machines_with_it
    ]
    text = (
        "This page shows the notebook replayed on the recordings of **" + machine + "** "
        "(the first output says which recording each experiment used). Same notebook on: "
        + " · ".join(links)
        + "."
    )
    badge = f"\n\n[![Open in Colab](/_static/colab-badge.svg)]({colab})" if colab else ""
    return f'<div class="machine-selector">\n\n{text}{badge}\n\n</div>'


INSTALL_CELL_MARK = (
    "# Set-up: run alone"  # the first line of every notebook's install cell (tools/install_cell.py)
)


def notebook_page(
    notebook: Mapping[str, Any],
    machine: str,
    stem: str,
    machines_with_it: Sequence[str],
    colab: str | None,
) -> dict[str, Any]:
    """A copy of an executed notebook with the machine in its title and the selector under it,
    without its install cell (a page opens with the lesson; the Colab badge runs the cell)."""
    page = json.loads(json.dumps(notebook))
    page["cells"] = [
        c
        for c in page["cells"]
        if not (c["cell_type"] == "code" and "".join(c["source"]).startswith(INSTALL_CELL_MARK))
    ]
    title = notebook_title(page["cells"])
    selector = selector_markdown(machine, stem, machines_with_it, colab)
    for cell in page["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and f"# {title}\n" in source + "\n":
            cell["source"] = source.replace(
                f"# {title}", f"# {title} ({machine})\n\n{selector}\n", 1
            )
            break
    return page


# ---------------------------------------------------------------- landing and machine pages


def software(machine: Mapping[str, Any]) -> str:
    """'driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130, NCCL 2.28.9' for a machine header."""
    return ", ".join(
        f"{label} {machine.get(key)}"
        for label, key in (
            ("driver", "driver"),
            ("CUDA", "cuda"),
            ("torch", "torch"),
            ("NCCL", "nccl"),
        )
    )


def pcie_link(machine: Mapping[str, Any]) -> str:
    """'gen 5 x16' for a machine header's first GPU, or '?' when nvidia-smi did not say."""
    gpu = (machine.get("gpus") or [{}])[0]
    gen, width = gpu.get("pcie_gen_max"), gpu.get("pcie_width_max")
    return f"gen {gen} x{width}" if gen and width else "?"


def machines_markdown(
    machines: Sequence[Mapping[str, Any]],
    runs: Mapping[str, Sequence[str]],
    titles: Mapping[str, str],
) -> str:
    """The landing page's generated part: the machines table, the notebooks with links to each
    machine's page of them, and the (hidden) toctrees that make the sidebar."""
    lines = [
        "## The machines it was measured on",
        "",
        "| machine | GPUs | PCIe link | software |",
        "| --- | --- | --- | --- |",
    ]
    for m in machines:
        gpus = m.get("gpus") or []
        names = ", ".join(sorted({g["name"] for g in gpus})) or "none"
        lines.append(
            f"| [{m['machine']}](runs/{m['machine']}/index.md) | {len(gpus)} x {names} | {pcie_link(m)} "
            f"| {software(m)} |"
        )
    lines += [
        "",
        "## The notebooks",
        "",
        "Each notebook, as replayed on each machine that recorded it (05 and 06 need two GPUs):",
        "",
        "| notebook | read it as run on |",
        "| --- | --- |",
    ]
    for stem, title in titles.items():
        links = " · ".join(f"[{m}](runs/{m}/{stem}.ipynb)" for m in runs if stem in runs[m])
        lines.append(f"| {title} | {links} |")
    lines += [
        "",
        "```{toctree}",
        ":hidden:",
        ":caption: Across machines",
        "",
        "claims",
        "compared",
        "```",
        "",
        "```{toctree}",
        ":hidden:",
        ":caption: The notebooks, by machine",
        "",
    ]
    lines += [f"runs/{m}/index" for m in runs] + ["```", ""]
    return "\n".join(lines)


def machine_markdown(
    machine: Mapping[str, Any],
    stems: Sequence[str],
    titles: Mapping[str, str],
    gaps: Mapping[str, str],
) -> str:
    """A machine's page: its report, its notebooks, and what it could not record (with why)."""
    name = machine["machine"]
    lines = [
        f"# {name}",
        "",
        "The machine as the recordings' header describes it:",
        "",
        "```text",
        hardware.report(dict(machine)),
        "```",
        "",
        "Its notebooks, replayed on its recordings:",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        "",
    ]
    # A toctree's explicit title is plain text: no `code` marks.
    lines += [f"{titles.get(stem, stem).replace('`', '')} <{stem}>" for stem in stems] + ["```", ""]
    if gaps:
        lines += [
            "Experiments this machine could not record (its pages replay them from another "
            "machine, which they name):",
            "",
        ]
        lines += [f"- `{key}`: {why}" for key, why in sorted(gaps.items())] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- claims x machines


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def missing_reason(
    machine: str,
    notebook: str,
    experiment: str,
    runs: Mapping[str, Sequence[str]],
    gaps: Mapping[str, Mapping[str, str]],
) -> str:
    """Why a machine has no verdict for a claim, in words (for the matrix's empty cells)."""
    if notebook not in runs.get(machine, ()):
        return (
            f"{machine} has no recordings of {notebook} (it needs more GPUs than the machine has)"
        )
    why = gaps.get(machine, {}).get(f"{notebook}/{experiment}")
    if why:
        return f"{machine} could not record {notebook}/{experiment}: {why}"
    return f"{machine}'s replay of {notebook} gave no verdict for this claim"


def claim_cell(row: Mapping[str, Any] | None, link: str | None, missing: str = "") -> str:
    """One cell of the matrix: the verdict (coloured), the value ± spread, the threshold, a link;
    without a row, "not recorded" with ``missing`` (why) on hover."""
    if row is None:
        return f'<td class="verdict-not-recorded" title="{html.escape(missing, quote=True)}">not recorded</td>'
    verdict = html.escape(row["verdict"])
    if link:
        verdict = f'<a href="{html.escape(link)}">{verdict}</a>'
    number = row.get("value")
    if isinstance(number, (int, float)) and not isinstance(number, bool) and row.get("spread"):
        v = claims.Value(
            float(number), float(row["spread"])
        )  # the value and its spread rounded alike
        value = f"{v.number()} ± {v.spread_text()}"
    else:
        value = _number(number)
    if row.get("unit"):
        value += f" {row['unit']}"
    if row.get("holds_if_text"):
        value += f"; holds if {row['holds_if_text']}"
    elif row.get("threshold") is not None:
        value += f"; holds if {row.get('holds_if')} {_number(row['threshold'])}"
    title = html.escape(row.get("measured") or "", quote=True)
    return (
        f'<td class="{VERDICT_CLASS.get(row["verdict"], "")}" title="{title}">{verdict}'
        f'<span class="value">{html.escape(value)}</span></td>'
    )


def claims_matrix(
    rows: Sequence[Mapping[str, Any]],
    runs: Mapping[str, Sequence[str]],
    order: Mapping[str, Sequence[str]],
    links: Mapping[tuple[str, str], str],
    gaps: Mapping[str, Mapping[str, str]],
) -> str:
    """The claims x machines table as HTML: one row per (notebook, claim), one column per machine
    of ``runs`` ({machine: notebooks}).

    ``order`` gives each notebook's experiments in the notebook's order (claims follow it);
    ``links`` maps (machine, notebook) to the notebook page's claims section; ``gaps`` is each
    machine's gaps.json (why an experiment is not recorded there)."""
    machines = list(runs)
    by_claim: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        by_claim.setdefault((row["notebook"], row["name"]), {})[row["machine"]] = row

    def position(key: tuple[str, str]) -> tuple[str, int, str]:
        notebook, name = key
        experiment = next(iter(by_claim[key].values()))["experiment"]
        experiments = list(order.get(notebook, []))
        return (
            notebook,
            experiments.index(experiment) if experiment in experiments else len(experiments),
            name,
        )

    head = "".join(f"<th>{html.escape(m)}</th>" for m in machines)
    out = [
        '<table class="claims-matrix">',
        f"<thead><tr><th>claim (source)</th>{head}</tr></thead>",
    ]
    notebook = None
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for key in sorted(by_claim, key=position):
        groups.setdefault((key[0], source_claim(key[1])), []).append(key)
    for n, ((nb, claim), keys) in enumerate(groups.items()):
        if nb != notebook:
            notebook = nb
            out.append(
                f'<tbody><tr class="notebook"><td colspan="{len(machines) + 1}">{html.escape(nb)}</td></tr></tbody>'
            )
        first = next(iter(by_claim[keys[0]].values()))
        source = f" <em>({html.escape(first.get('source') or '')})</em>"
        out.append('<tbody class="claim-group">')
        if len(keys) > 1:
            summary = "".join(group_cell([by_claim[k].get(m) for k in keys]) for m in machines)
            out.append(
                f'<tr class="source-claim"><td class="claim"><label><input type="checkbox" id="cases-{n}"> '
                f'{html.escape(claim)}{source} <span class="cases">{len(keys)} cases</span></label></td>'
                f"{summary}</tr>"
            )
        for key in keys:
            row0 = next(iter(by_claim[key].values()))
            cells = "".join(
                claim_cell(
                    by_claim[key].get(m),
                    links.get((m, nb)),
                    missing_reason(m, nb, row0["experiment"], runs, gaps),
                )
                for m in machines
            )
            text = (
                html.escape(key[1][len(claim) :].strip(" []") or key[1])
                if len(keys) > 1
                else html.escape(key[1]) + source
            )
            row_class = ' class="subcase"' if len(keys) > 1 else ""
            out.append(f'<tr{row_class}><td class="claim">{text}</td>{cells}</tr>')
        out.append("</tbody>")
    out += ["</table>"]
    return "\n".join(out)


def source_claim(name: str) -> str:
    """The claim as its source makes it: a row's name without the case it tests
    (``"... twice as slow as .to(device) [below 1 MiB, warm cache]"`` -> ``"... .to(device)"``)."""
    return name.split(" [", 1)[0].strip()


_WORST_FIRST = (claims.DOES_NOT_HOLD, claims.BORDERLINE, claims.HOLDS, claims.NOT_TESTABLE)


def group_cell(rows: Sequence[Mapping[str, Any] | None]) -> str:
    """A source claim's cell on one machine: how many of its cases got each verdict, coloured by
    the worst of them ("not recorded" when the machine has none)."""
    verdicts = [r["verdict"] for r in rows if r is not None]
    if not verdicts:
        return '<td class="verdict-not-recorded">not recorded</td>'
    worst = next(v for v in _WORST_FIRST if v in verdicts)
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in _WORST_FIRST if v in verdicts)
    return f'<td class="{VERDICT_CLASS.get(worst, "")}">{html.escape(counts)}</td>'


def verdict_counts(rows: Sequence[Mapping[str, Any]], machines: Sequence[str]) -> str:
    """A markdown table: how many claims got each verdict on each machine."""
    lines = ["| verdict | " + " | ".join(machines) + " |", "| --- |" + " ---: |" * len(machines)]
    for verdict in claims.VERDICTS:
        counts = [
            sum(1 for r in rows if r["machine"] == m and r["verdict"] == verdict) for m in machines
        ]
        lines.append(f"| {verdict} | " + " | ".join(str(c) for c in counts) + " |")
    return "\n".join(lines)


def claims_markdown(
    rows: Sequence[Mapping[str, Any]],
    runs: Mapping[str, Sequence[str]],
    order: Mapping[str, Sequence[str]],
    links: Mapping[tuple[str, str], str],
    gaps: Mapping[str, Mapping[str, str]],
) -> str:
    """The claims x machines page (arguments as ``claims_matrix``)."""
    n_claims = len({(r["notebook"], r["name"]) for r in rows})
    n_sources = len({(r["notebook"], source_claim(r["name"])) for r in rows})
    return "\n".join(
        [
            "# Claims x machines",
            "",
            f"Every claim the notebooks test ({n_sources} claims of the sources, tested in {n_claims} cases: a claim "
            "tested in several cases shows how many got each verdict, and its checkbox opens them), with its verdict "
            "on every recorded machine and the "
            "value behind it (median ± spread, half the interquartile range, and the threshold). A verdict links to the "
            "claims table of that notebook on that machine; hover over a cell to see what was measured, or why a "
            'machine has no verdict ("not recorded": too few GPUs for the notebook, or an experiment it could not '
            "record). "
            "From `results/index.jsonl`, which `make index` writes from the replays.",
            "",
            verdict_counts(rows, list(runs)),
            "",
            "```{raw} html",
            '<div class="wide-page">',
            claims_matrix(rows, runs, order, links, gaps),
            "</div>",
            "```",
            "",
        ]
    )


# ---------------------------------------------------------------- machines compared

HOST_COPIES = {
    "h2d_pinned": "H2D from pinned",
    "h2d_pageable": "H2D from pageable",
    "d2h_pinned": "D2H to pinned",
    "d2h_pageable": "D2H to pageable",
}


def recording(machine: str, notebook: str, experiment: str) -> tuple[dict[str, Any], Any] | None:
    """``records.load`` of one recording, or None when the machine has none."""
    path = records.recording_path(machine, notebook, experiment)
    return records.load(path) if path.exists() else None


def host_copy_curves(
    header: Mapping[str, Any], value: Mapping[str, Any]
) -> dict[str, tuple[list[int], list[float]]]:
    """01's copy_bandwidth as ``{copy: (sizes in bytes, decimal GB/s)}``, from each Timing's ``gbps``."""
    sizes = list(value["sizes"])
    return {key: (sizes, [row[key].gbps for row in value["rows"]]) for key in HOST_COPIES}


def pcie_raw_gbps(header: Mapping[str, Any]) -> float | None:
    """The raw one-way rate of the recording machine's first GPU's PCIe link (hardware.pcie_theoretical_gbps)."""
    gpu = (header["machine"].get("gpus") or [{}])[0]
    return hardware.pcie_theoretical_gbps(gpu.get("pcie_gen_max"), gpu.get("pcie_width_max"))


def peer_curve(
    header: Mapping[str, Any], value: Mapping[str, Any], pair: str = "0->1"
) -> tuple[list[int], list[float]]:
    """05's peer_copy_bandwidth for one ordered pair of GPUs: (sizes in bytes, decimal GB/s)."""
    return list(header["params"]["sizes"]), [t.gbps for t in value[pair]]


def all_reduce_curve(
    header: Mapping[str, Any], value: Mapping[str, Any]
) -> tuple[list[int], list[float], int, float]:
    """06's bandwidth, all_reduce on the most ranks recorded: (sizes in bytes, busbw in decimal
    GB/s, ranks, the recorded GPU0 -> GPU1 copy's GB/s that the notebook draws as the ceiling).

    Reads both shapes of the recording: one world size (``world_size``, ``timings``) and a sweep
    over world sizes (``sweep``: a list of ``{"world_size", "timings"}``)."""
    sizes = list(header["params"]["sizes"])
    sweep = value.get("sweep") or [{"world_size": value["world_size"], "timings": value["timings"]}]
    largest = max(sweep, key=lambda entry: entry["world_size"])
    ranks = largest["world_size"]
    busbw = [
        distributed.busbw_gbps("all_reduce", size, t.median_s, ranks)
        for size, t in zip(sizes, largest["timings"]["all_reduce"], strict=True)
    ]
    return sizes, busbw, ranks, value["ceiling"].gbps


def draw_ceilings(ax: Any, ceilings: Mapping[str, float | None], what: str, loc: str) -> None:
    """A dashed line per distinct ceiling (GB/s), keyed by the label of the curve it belongs to: in
    that curve's colour, or grey when several curves share it; then the legend at ``loc``."""
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    by_value: dict[float, list[str]] = {}
    for label, gbps in ceilings.items():
        if gbps:
            by_value.setdefault(round(gbps, 1), []).append(label)
    for gbps, labels in sorted(by_value.items()):
        alone = len(labels) == 1
        who = (
            labels[0]
            if alone
            else "every machine"
            if len(labels) == len(ceilings)
            else ", ".join(labels)
        )
        ax.axhline(
            gbps,
            linestyle="--",
            linewidth=1,
            color=colours.get(labels[0], "grey") if alone else "grey",
            label=f"{what}, {who} ({gbps:.0f} GB/s)",
        )
    ax.legend(fontsize=8, loc=loc)


def compared_figures(machines: Sequence[str], folder: Path) -> list[str]:
    """Draw the machines-compared figures into ``folder``; return the page's markdown."""
    folder.mkdir(parents=True, exist_ok=True)
    text: list[str] = []

    def lacking(found: Mapping[str, Any], what: str) -> str:
        absent = [m for m in machines if m not in found]
        return f"Not drawn: {', '.join(absent)} (no recording of {what})." if absent else ""

    host = {m: r for m in machines if (r := recording(m, "01_pinned_memory", "copy_bandwidth"))}
    text += [
        "## Host to GPU and GPU to host, pinned and pageable",
        "",
        "From `01_pinned_memory`, experiment `copy_bandwidth`. The dashed lines are the raw rate of each "
        "machine's PCIe link (one direction), which no real copy reaches (01 says how close each comes).",
        "",
        lacking(host, "01_pinned_memory/copy_bandwidth"),
        "",
    ]
    if host:
        fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), sharey=True)
        curves = {m: host_copy_curves(*r) for m, r in host.items()}
        for ax, key in zip(axes.flat, HOST_COPIES, strict=True):
            plotting.bandwidth_vs_size(
                {m: curves[m][key] for m in host}, title=HOST_COPIES[key], ax=ax
            )
            draw_ceilings(
                ax,
                {m: pcie_raw_gbps(r[0]) for m, r in host.items()},
                "PCIe raw rate",
                "lower right",
            )
        fig.suptitle("Copy bandwidth between host and GPU 0, by machine (recorded)")
        fig.tight_layout()
        fig.savefig(folder / "host_copies.png", dpi=100)
        plt.close(fig)
        text += [
            "![H2D and D2H bandwidth by size, pinned and pageable, one line per machine](_figures/host_copies.png)",
            "",
        ]

    peer = {
        m: r for m in machines if (r := recording(m, "05_device_to_device", "peer_copy_bandwidth"))
    }
    text += [
        "## Peer to peer, cuda:0 -> cuda:1",
        "",
        "From `05_device_to_device`, experiment `peer_copy_bandwidth`: `dst.copy_(src)` from GPU 0 to GPU 1, one "
        "direction at a time (the notebook's page shows every pair). The links' rated speeds are worked out in "
        "that notebook's analysis and are not drawn here.",
        "",
        lacking(peer, "05_device_to_device/peer_copy_bandwidth"),
        "",
    ]
    if peer:
        fig, ax = plt.subplots(figsize=(10, 5))
        plotting.bandwidth_vs_size(
            {f"{m}: cuda:0 -> cuda:1": peer_curve(*r) for m, r in peer.items()},
            title="Peer copy bandwidth, cuda:0 -> cuda:1, by machine (recorded)",
            ax=ax,
        )
        fig.tight_layout()
        fig.savefig(folder / "peer_copies.png", dpi=100)
        plt.close(fig)
        text += [
            "![Peer copy bandwidth by size, one line per machine](_figures/peer_copies.png)",
            "",
        ]

    reduce_, unreadable = {}, []
    for m in machines:
        found = recording(m, "06_nccl_point_to_point_and_collectives", "bandwidth")
        try:
            reduce_[m] = all_reduce_curve(*found) if found else None
        except (KeyError, TypeError, ValueError, AttributeError):
            unreadable.append(m)
    reduce_ = {m: c for m, c in reduce_.items() if c}
    text += [
        "## all_reduce busbw",
        "",
        "From `06_nccl_point_to_point_and_collectives`, experiment `bandwidth`: busbw as nccl-tests reports it "
        "(`helpers.distributed.busbw_gbps`). The dashed lines are each machine's ceiling as the notebook measures "
        "it: a plain GPU0 -> GPU1 copy in the same run.",
        "",
        lacking(
            {**reduce_, **dict.fromkeys(unreadable)},
            "06_nccl_point_to_point_and_collectives/bandwidth",
        ),
    ]
    if unreadable:
        text += [
            f"Not drawn: {', '.join(unreadable)} (its recording of 06's `bandwidth` has a shape this page "
            "does not read; tools/build_site.py, all_reduce_curve)."
        ]
    text += [""]
    if reduce_:
        fig, ax = plt.subplots(figsize=(10, 5))
        plotting.bandwidth_vs_size(
            {f"{m}, {c[2]} ranks": (c[0], c[1]) for m, c in reduce_.items()},
            title="NCCL all_reduce busbw, by machine (recorded)",
            ax=ax,
        )
        draw_ceilings(
            ax,
            {f"{m}, {c[2]} ranks": c[3] for m, c in reduce_.items()},
            "GPU0 -> GPU1 copy",
            "upper left",
        )
        ax.set_ylabel("busbw (decimal GB/s)")
        fig.tight_layout()
        fig.savefig(folder / "all_reduce.png", dpi=100)
        plt.close(fig)
        text += [
            "![all_reduce busbw by message size, one line per machine](_figures/all_reduce.png)",
            "",
        ]
    return text


def compared_markdown(machines: Sequence[str], folder: Path) -> str:
    """The machines-compared page (its figures are drawn into ``folder``)."""
    intro = [
        "# Machines compared",
        "",
        '<div class="wide-page"></div>',
        "",
        "The same measurement on every recorded machine, on one plot, drawn from the recordings with the "
        "notebooks' own helpers. Each notebook's page has the full picture for one machine.",
        "",
    ]
    return "\n".join(intro + compared_figures(machines, folder))


# ---------------------------------------------------------------- putting it together


def generate(
    source: Path = SOURCE,
    replay: Path = REPLAY,
    repository: str | None = None,
    branch: str = "main",
) -> None:
    """Write the Sphinx source tree: site/, the notebook pages, and the generated pages."""
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(SITE, source)
    runs = executed_runs(replay)
    if not runs:
        raise SystemExit(f"no executed notebooks under {replay}: run tools/replay_all.py first")
    machines = list(runs)
    headers = {m["machine"]: m for m in records.recorded_machines()}
    titles: dict[str, str] = {}
    links: dict[tuple[str, str], str] = {}
    for machine, stems in runs.items():
        for stem in stems:
            notebook = json.loads((replay / machine / f"{stem}.ipynb").read_text())
            if broken := error_cells(notebook["cells"]):
                print(
                    f"warning: build/replay/{machine}/{stem}.ipynb shows an error in cell(s) "
                    f"{', '.join(map(str, broken))}: its page shows the traceback",
                    flush=True,
                )
            titles.setdefault(stem, notebook_title(notebook["cells"]))
            anchor = claims_anchor(notebook["cells"])
            links[(machine, stem)] = f"runs/{machine}/{stem}.html" + (
                f"#{anchor}" if anchor else ""
            )
            colab = colab_url(repository, branch, stem) if repository else None
            page = notebook_page(
                notebook, machine, stem, [m for m in machines if stem in runs[m]], colab
            )
            dest = source / "runs" / machine / f"{stem}.ipynb"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(page))
        header = headers.get(machine, {"machine": machine})
        gaps = records.recording_gaps(config.results_dir() / machine)
        (source / "runs" / machine / "index.md").write_text(
            machine_markdown(header, stems, titles, gaps)
        )
    titles = dict(sorted(titles.items()))
    known = [headers[m] for m in machines if m in headers]
    (source / "_generated").mkdir(exist_ok=True)
    (source / "_generated" / "machines.md").write_text(machines_markdown(known, runs, titles))
    order = {
        stem: list(records.experiments_in_notebook(NOTEBOOKS / f"{stem}.ipynb"))
        for stem in titles
        if (NOTEBOOKS / f"{stem}.ipynb").exists()
    }
    rows = records.read_index(kind="claim")
    gaps = {m: records.recording_gaps(config.results_dir() / m) for m in machines}
    (source / "claims.md").write_text(claims_markdown(rows, runs, order, links, gaps))
    (source / "compared.md").write_text(compared_markdown(machines, source / "_figures"))


def sphinx_build(source: Path = SOURCE, out: Path = OUT) -> None:
    """Run sphinx-build on the generated tree; warnings are shown, not fatal."""
    if out.exists():
        shutil.rmtree(out)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-q",
        "-j",
        "auto",
        str(source),
        str(out),
    ]
    done = subprocess.run(command, cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"sphinx-build failed (exit {done.returncode}): {' '.join(command)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-replay", action="store_true", help="use build/replay/ as it is")
    args = parser.parse_args()
    start = time.perf_counter()
    if not args.no_replay:
        ensure_replays()
    repository = os.environ.get("COURSE_REPOSITORY") or os.environ.get("GITHUB_REPOSITORY")
    branch = os.environ.get("COURSE_BRANCH") or os.environ.get("GITHUB_REF_NAME") or "main"
    if not repository:
        print(
            "no COURSE_REPOSITORY (GitHub's owner/name) set: the pages have no 'Open in Colab' badge"
        )
    generate(repository=repository, branch=branch)
    sphinx_build()
    print(f"site built in {time.perf_counter() - start:.0f} s: {OUT / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
