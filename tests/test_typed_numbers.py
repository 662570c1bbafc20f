"""No typed numbers in the notebooks' markdown (issue 35, item 2): the rule is tools/typed_numbers.py."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import typed_numbers  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _notebook(tmp_path: Path, code: str, markdown: str) -> Path:
    cells = [
        {
            "cell_type": "code",
            "source": code,
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        },
        {"cell_type": "markdown", "source": markdown, "metadata": {}},
    ]
    path = tmp_path / "99_synthetic.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    return path


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_markdown_types_no_measured_number(notebook: Path) -> None:
    typed = typed_numbers.typed_in_notebook(notebook)
    assert not typed, (
        "numbers typed in the markdown that are not a parameter, a source's fact with the source named "
        "in the same sentence, or a declared constant: delete them, let the 'what we see' output say "
        "them, or name their source (rule: tools/typed_numbers.py):\n" + "\n".join(map(str, typed))
    )


CODE = """
MiB = 2**20
run = records.run_or_replay(copy, params=dict(nbytes=config.pick(full=64 * MiB, quick=2**24),
                                              count=1000, hold_ms=10.0, chunk=2**26))
"""


def test_a_synthetic_notebook_fails_on_each_measured_number(tmp_path: Path) -> None:
    markdown = (
        "## 2. A copy\n\n"
        "**What we expect**: a 64 MiB copy (16 MiB in quick mode) of 1000 tensors, with a 10 ms hold "
        "and chunks of 64 MiB, as section 3 explains.\n"
        "The link is PCIe gen 5 x16 (63 GB/s raw per direction, PCIe 5.0 spec). "
        "The tutorial uses 100 repetitions. "
        "Code is not read: `torch.empty(7 * 3)` and $e^{42}$.\n\n"
        "**Why**: the copy took 4.2 ms and ran at 24-49 GB/s; the events spread 6.8% against 3.5%, "
        "a ratio of 1.38x; 10 of 10 results were wrong; a 48 MiB copy was slow."
    )
    typed = typed_numbers.typed_in_notebook(_notebook(tmp_path, CODE, markdown))
    assert [t.text for t in typed] == [
        "4.2 ms",
        "24",
        "49 GB/s",
        "6.8%",
        "3.5%",
        "1.38x",
        "10",
        "10",
        "48 MiB",
    ]
    assert all(t.notebook == "99_synthetic.ipynb" and t.cell == 1 for t in typed)
    assert typed[0].sentence.startswith("**Why**: the copy took 4.2 ms")
    assert "99_synthetic.ipynb, cell 1: '4.2 ms' in: **Why**" in str(typed[0])


def test_a_source_must_be_named_in_the_same_sentence(tmp_path: Path) -> None:
    markdown = (
        "The tutorial copies a tensor. It takes 100 repetitions. The tutorial uses 100 repetitions."
    )
    typed = typed_numbers.typed_in_notebook(_notebook(tmp_path, CODE, markdown))
    assert [t.sentence for t in typed] == ["It takes 100 repetitions."]


def test_a_count_of_results_never_passes_as_a_parameter(tmp_path: Path) -> None:
    """1000 is a parameter, but "1000 of 1000" is a count of what happened."""
    typed = typed_numbers.typed_in_notebook(
        _notebook(tmp_path, CODE, "1000 tensors; 1000 of 1000 were right.")
    )
    assert [t.text for t in typed] == ["1000", "1000"]


def test_the_main_program_prints_each_number_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _notebook(tmp_path, CODE, "It took 4.2 ms.")
    assert typed_numbers.main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "99_synthetic.ipynb, cell 1: '4.2 ms' in: It took 4.2 ms." in out
    assert typed_numbers.main([str(_notebook(tmp_path, CODE, "A 64 MiB copy."))]) == 0


def test_every_declared_constant_has_a_reason_and_is_used() -> None:
    """The allow-list stays small: an entry no notebook needs any more is removed."""
    text = "\n".join(
        "".join(c["source"])
        for p in NOTEBOOKS
        for c in json.loads(p.read_text())["cells"]
        if c["cell_type"] == "markdown"
    )
    for allowed in typed_numbers.STRUCTURE + typed_numbers.CONSTANTS:
        assert allowed.reason.strip(), allowed
    unused = [a for a in typed_numbers.CONSTANTS if not re.search(a.pattern, text, re.I | re.M)]
    assert not unused, f"declared constants no notebook's markdown uses: {unused}"
