"""CPU tests of the pure analysis functions defined in notebook 01 (read from the notebook itself)."""

import ast
import json
import math
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_pinned_memory.ipynb"
WANTED_FUNCTIONS = {"crossover_size", "range_of", "pinned_bytes", "twice_as_slow_verdict"}
WANTED_NAMES = {"SIZE_RANGES"}
MiB = 2**20


@pytest.fixture(scope="module")
def nb01() -> dict:
    """The notebook's analysis functions, executed from its own source in a fresh namespace."""
    namespace: dict = {"math": math, "MiB": MiB, "GiB": 2**30}
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for node in ast.parse(source).body:
            named = isinstance(node, ast.FunctionDef) and node.name in WANTED_FUNCTIONS
            assigned = isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in WANTED_NAMES for t in node.targets)
            if named or assigned:
                exec(compile(ast.Module([node], []), str(NOTEBOOK), "exec"), namespace)
    missing = (WANTED_FUNCTIONS | WANTED_NAMES) - set(namespace)
    assert not missing, f"notebook 01 no longer defines {sorted(missing)}"
    return namespace


def test_crossover_interpolates_between_the_last_losing_and_first_winning_size(nb01):
    first, at = nb01["crossover_size"]([1024, 4096, 16384], [2.0, 0.5, 0.4])
    assert first == 4096
    assert at == pytest.approx(2048)  # log-log midpoint: log(2) and log(0.5) are symmetric


def test_crossover_needs_a_win_at_every_larger_size(nb01):
    first, at = nb01["crossover_size"]([1, 2, 4, 8], [0.5, 1.5, 0.9, 0.8])
    assert first == 4 and 2 < at < 4


def test_crossover_edge_cases(nb01):
    assert nb01["crossover_size"]([1, 2], [0.9, 0.8]) == (1, 1.0)
    assert nb01["crossover_size"]([1, 2], [0.9, 1.2]) == (None, None)
    with pytest.raises(ValueError):
        nb01["crossover_size"]([1, 2], [0.9])


def test_range_of(nb01):
    assert nb01["range_of"](None) == "never"
    assert nb01["range_of"](1023 * 1024) == "below 1 MiB"
    assert nb01["range_of"](MiB) == "1 MiB to 64 MiB"
    assert nb01["range_of"](64 * MiB) == "64 MiB and up"


def test_pinned_bytes_reads_both_generations_of_host_memory_stats(nb01):
    # newer PyTorch: allocated_bytes = held (active + cached), active_bytes = in live tensors
    assert nb01["pinned_bytes"]({"allocated_bytes.current": 64, "active_bytes.current": 0}) == (64, 0)
    # older PyTorch: reserved_bytes = held, allocated_bytes = in live tensors
    assert nb01["pinned_bytes"]({"reserved_bytes.current": 64, "allocated_bytes.current": 0}) == (64, 0)
    assert nb01["pinned_bytes"]({}) == (None, None)


def test_twice_as_slow_verdict_needs_slower_but_at_most_twice(nb01):
    verdict = nb01["twice_as_slow_verdict"]
    assert verdict([0.9, 1.4])[0] is True
    assert verdict([1.5, 5.0]) == (False, "ratio 1.50 to 5.00 over 2 sizes: more than twice as slow")
    assert verdict([0.3, 0.5])[0] is False and "never slower" in verdict([0.3, 0.5])[1]
    assert verdict([2.0])[0] is True
