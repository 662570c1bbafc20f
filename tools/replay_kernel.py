"""Execute notebooks one after another in ONE Jupyter kernel, for tools/replay_all.py.

Starting a kernel and importing torch costs seconds; the truth check replays one (machine,
notebook) pair for each notebook each machine recorded, so each of its workers keeps one kernel and clears it between
notebooks (``%reset -f``, then the environment variables of the next replay). The isolation
of a fresh kernel per notebook is what ``make test``'s nbmake run checks; this is about speed.

Protocol: one JSON object per line on stdin,
``{"notebook": in, "out": executed copy, "env": {name: value}}``, and one JSON line per item on
stdout, ``{"code": 0 or 1, "seconds": s, "tail": text}``. It stops when stdin closes.

    python tools/replay_kernel.py NOTEBOOK_DIR < items.jsonl
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

CELL_TIMEOUT_S = 300


def start(cwd: str) -> tuple[KernelManager, Any]:
    """A started python3 kernel in ``cwd`` and its ready client."""
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=cwd)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def prepare(kc: Any, env: dict[str, str]) -> None:
    """Empty the kernel's namespace and set the replay's environment variables."""
    # %reset also drops __spec__, which multiprocessing reads from __main__ to start the gloo ranks
    code = f"%reset -f\n__spec__ = None\nimport os as _os\n_os.environ.update({env!r})\ndel _os"
    reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"could not prepare the kernel: {reply['content']}")


def execute(km: KernelManager, kc: Any, item: dict[str, Any]) -> dict[str, Any]:
    """Execute one notebook into its executed copy; the result line for it."""
    start_s = time.perf_counter()
    nb = nbformat.read(item["notebook"], 4)
    try:
        prepare(kc, item["env"])
        client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT_S, kernel_name="python3")
        client.kc = kc
        client.execute()
        code, tail = 0, ""
    except Exception as err:  # a failing cell: report it, keep the partly executed copy
        code, tail = 1, str(err)[-3000:]
    Path(item["out"]).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, item["out"])
    return {"code": code, "seconds": time.perf_counter() - start_s, "tail": tail}


def main() -> int:
    km, kc = start(sys.argv[1])
    try:
        for line in sys.stdin:
            result = execute(km, kc, json.loads(line))
            if result["code"]:  # a failed notebook may leave the kernel in any state: start afresh
                kc.stop_channels()
                km.shutdown_kernel(now=True)
                km, kc = start(sys.argv[1])
            print(json.dumps(result), flush=True)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
