"""Write constraints.txt, the one file of pinned versions (``make constraints``).

``make setup``, ``make lab``, the notebooks' first cell (tools/install_course.py) and
environment.yml install with ``--constraint constraints.txt``: the same versions everywhere,
ruff's included. The ranges stay in pyproject.toml; this file pins one version in each, as pip
resolved them for the runtime dependencies and the dev, lab and cli extras:

    python -m pip install --dry-run --ignore-installed --report REPORT torch==X ".[dev,lab,cli]"
    python tools/constraints.py REPORT > constraints.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PROJECT = "moving-data-course"
HEADER = """\
# The versions `make`, the notebooks' first cell and environment.yml install (pip --constraint).
# The ranges are pyproject.toml's; regenerate this file with `make constraints`, never by hand.
# torch: the CPU build of this version where there is no NVIDIA driver, else PyPI's build.
"""


def pins(report: dict) -> list[str]:
    """``name==version`` for every distribution of a ``pip install --report``, but the course,
    sorted, local version labels (``+cpu``) dropped so one pin fits the CPU and CUDA builds."""
    found = {
        item["metadata"]["name"]: item["metadata"]["version"].split("+")[0]
        for item in report["install"]
    }
    found.pop(PROJECT, None)
    return [
        f"{name}=={version}"
        for name, version in sorted(found.items(), key=lambda kv: kv[0].lower())
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python tools/constraints.py PIP_REPORT.json > constraints.txt")
    print(HEADER + "\n".join(pins(json.loads(Path(args[0]).read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
