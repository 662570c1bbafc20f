"""What every section of notebook 06 shares: its name, the article, where a run was measured."""

from __future__ import annotations

from ... import config
from ...records import Run

NOTEBOOK = "06_nccl_point_to_point_and_collectives"
ARTICLE = 'article "AI on Multiple GPUs", part 2 (point-to-point and collective operations)'


def where(run: Run) -> str:
    """``run.where()``, and ", quick mode" for a live run in quick mode (its small sizes)."""
    return run.where() + (", quick mode" if run.live and config.quick_mode() else "")
