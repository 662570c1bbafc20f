"""Carry recordings over to a new fingerprint scheme, only where git proves nothing changed.

A recording's header names the commit it was made at. For each recording whose fingerprint
differs from what its notebook gives today, this reads the notebook *at that commit* and
re-stamps the recording only when both hold:

1. the experiment's source at that commit gives the fingerprint the recording carries under
   the scheme it was made with (``--old-scheme``): the recording came from that code;
2. the experiment and every notebook function it reaches give, at that commit, the same
   fingerprint under today's scheme as the notebook today: none of that code changed since.

Params are not touched here: ``records.check_recordings`` compares them value by value.
Anything not proven is left stale and listed, to be re-recorded.

    python tools/migrate_fingerprints.py [--dry-run]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import records  # noqa: E402


def source_only_fingerprint(source: str) -> str:
    """The first scheme (until the fingerprint followed reached functions): the experiment's
    own syntax tree, without decorators."""
    node = records.fingerprints._definition_node(source)
    return hashlib.sha256(records.fingerprints._canonical(node).encode()).hexdigest()[:16]


def notebook_at(commit: str, notebook: str, folder: Path) -> Path | None:
    """The notebook's file as it was at ``commit``, written into ``folder``; None if absent."""
    out = subprocess.run(["git", "show", f"{commit}:notebooks/{notebook}.ipynb"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None
    path = folder / f"{commit}-{notebook}.ipynb"
    path.write_text(out.stdout)
    return path


def read_notebook(path: Path) -> records.notebook_reader._NotebookReader:
    reader = records.notebook_reader._NotebookReader()
    for source in records.notebook_reader._code_cells(path):
        reader.read_cell(source)
    return reader


def migrate(dry_run: bool) -> int:
    today = {p.stem: records.experiments_in_notebook(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
    left = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((ROOT / "results").glob("*/*/*.json")):
            record = json.loads(path.read_text())
            header = record["header"]
            now = today.get(header["notebook"], {}).get(header["experiment"])
            if now is None or header["fingerprint"] == now.fingerprint:
                continue
            commit = (header.get("commit") or "").removesuffix("-dirty")
            then_path = notebook_at(commit, header["notebook"], Path(tmp)) if commit and commit == header.get("commit") else None
            reader = read_notebook(then_path) if then_path else None
            then = reader.found.get(header["experiment"]) if reader else None
            proven = (then is not None and then.function in reader.functions
                      and source_only_fingerprint(reader.functions[then.function]) == header["fingerprint"]
                      and then.fingerprint == now.fingerprint)
            rel = path.relative_to(ROOT)
            if not proven:
                left += 1
                print(f"NOT proven, stays stale: {rel} (commit {header.get('commit')})")
                continue
            print(f"migrated: {rel}: {header['fingerprint']} -> {now.fingerprint} (code unchanged since {commit})")
            if not dry_run:
                header["fingerprint_history"] = header.get("fingerprint_history", []) + [
                    f"{header['fingerprint']} (source-only scheme; same code at {commit})"]
                header["fingerprint"] = now.fingerprint
                path.write_text(json.dumps(record, indent=1, allow_nan=True) + "\n")
    print(f"{left} recording(s) could not be proven unchanged")
    return 1 if left else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    sys.exit(migrate(parser.parse_args().dry_run))
