"""Write results/<machine>/checksums.json: the sha256 of every recording and attachment there.

    python tools/checksums.py                      # every recorded machine
    python tools/checksums.py results/2xNVIDIA-H200

Recordings note their checksums when they are saved (``records.save``); run this only after
removing or changing a recording on purpose (a stale one listed in gaps.json), or to add the
file to machines recorded before checksums existed. It writes checksums.json and nothing else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import records  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="results/<machine> folders")
    args = parser.parse_args()
    folders = args.folders or records.machine_folders()
    for folder in folders:
        if not any(Path(folder).glob("*/*.json")):
            parser.error(f"{folder} holds no recordings (<notebook>/<experiment>.json)")
    for folder in folders:
        print(f"wrote {records.write_checksums(folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
