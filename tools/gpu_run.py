"""Run the course on a GPU machine and pack what it produced; or unpack that here.

On the GPU machine (called by `make gpu-all`, with the carried wheels on PYTHONPATH):

    python3 tools/gpu_run.py --out OUT [--quick] [--skip-tests] notebooks/*.ipynb

1. prints the machine report;
2. runs the GPU-marked tests (`pytest -m "gpu or gpu2"`);
3. executes each notebook live at full size with COURSE_RECORD=1, one at a time (timings
   must not share the GPU), keeping the executed copy with its outputs;
4. with --quick, executes them again in quick mode and reports how long each took;
5. after every step, packs one archive, `OUT/gpu-results-<machine>.tar.gz`, holding the
   recordings (results/<machine>/) and the executed notebooks with their logs
   (gpu-executed/<machine>/), and writes `OUT/summary-<machine>.txt`, so a run cut short still
   brings back what it finished.

Here:  python tools/gpu_run.py --unpack path/to/gpu-results-<machine>.tar.gz
puts the recordings under results/ and the executed notebooks under build/gpu-executed/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEST_TIMEOUT_S = 240
NOTEBOOK_TIMEOUT_S = 300


def run_logged(cmd: list[str], log: Path, env: dict[str, str], timeout_s: int) -> tuple[int, float]:
    """Run ``cmd`` with its output to ``log`` (and echoed); return (exit code, seconds)."""
    start = time.perf_counter()
    with log.open("w") as f:
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                  timeout=timeout_s, check=False)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = 124
            f.write(f"\n*** timed out after {timeout_s} s ***\n")
    seconds = time.perf_counter() - start
    tail = log.read_text().splitlines()[-15:]
    print("\n".join(tail), flush=True)
    return code, seconds


def execute_notebook(notebook: Path, dest: Path, env: dict[str, str], logs: Path) -> tuple[int, float]:
    """Execute one notebook with nbmake, writing the executed copy (with outputs) to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    copy = dest / notebook.name
    shutil.copyfile(notebook, copy)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nbmake", "--overwrite",
           f"--nbmake-timeout={NOTEBOOK_TIMEOUT_S}", str(copy)]
    return run_logged(cmd, logs / f"{dest.name}-{notebook.stem}.log", env, NOTEBOOK_TIMEOUT_S + 60)


def pack(out: Path, machine: str, summary: list[str], root: Path = ROOT) -> Path:
    """Write the archive (recordings + executed notebooks and logs) and the summary into ``out``."""
    results = root / "results" / machine
    build = root / "build" / "gpu"
    archive = out / f"gpu-results-{machine}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        if results.exists():
            tar.add(results, arcname=f"results/{machine}")
        if build.exists():
            tar.add(build, arcname=f"gpu-executed/{machine}")
    (out / f"summary-{machine}.txt").write_text("\n".join(summary) + "\n")
    return archive


def gpu_run(out: Path, notebooks: list[Path], quick: bool, skip_tests: bool) -> int:
    from helpers import hardware

    info = hardware.describe()
    machine = info["machine"]
    report = hardware.report(info)
    print(report, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    build = ROOT / "build" / "gpu"
    shutil.rmtree(build, ignore_errors=True)
    logs = build / "logs"
    logs.mkdir(parents=True)
    summary = [report, ""]
    failures = 0
    base_env = dict(os.environ)
    if not skip_tests:
        code, seconds = run_logged(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "gpu or gpu2",
             "--durations=10", "tests"], logs / "gpu-tests.log", base_env, TEST_TIMEOUT_S)
        summary.append(f"gpu tests: exit {code} in {seconds:.0f} s")
        failures += code != 0
        pack(out, machine, summary)
    live_env = {**base_env, "COURSE_RECORD": "1", "COURSE_QUICK": "0"}
    for nb in notebooks:
        code, seconds = execute_notebook(nb, build / "live", live_env, logs)
        summary.append(f"live full  {nb.name}: {'passed' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s")
        failures += code != 0
        pack(out, machine, summary)
    if quick:
        quick_env = {**base_env, "COURSE_QUICK": "1"}
        for nb in notebooks:
            code, seconds = execute_notebook(nb, build / "quick", quick_env, logs)
            summary.append(f"live quick {nb.name}: {'passed' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s")
            failures += code != 0
            pack(out, machine, summary)
    print("\n".join(summary[2:]), flush=True)
    return 1 if failures else 0


def unpack(archive: Path, root: Path = ROOT) -> int:
    """Put a GPU run's recordings under results/ and its executed notebooks under build/."""
    prefix, suffix = "gpu-results-", ".tar.gz"
    if not archive.name.startswith(prefix) or not archive.name.endswith(suffix):
        raise SystemExit(f"expected a {prefix}<machine>{suffix} file from `make gpu-all`, got {archive}")
    machine = archive.name[len(prefix):-len(suffix)]
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if ".." not in m.name]
        recordings = [m for m in members if m.name.startswith(f"results/{machine}/")]
        executed = [m for m in members if m.name.startswith(f"gpu-executed/{machine}/")]
        shutil.rmtree(root / "results" / machine, ignore_errors=True)  # the archive holds them all
        tar.extractall(root, members=recordings, filter="data")
        shutil.rmtree(root / "build" / "gpu-executed" / machine, ignore_errors=True)
        tar.extractall(root / "build", members=executed, filter="data")
    print(f"{sum(m.isfile() for m in recordings)} files under results/{machine}/; "
          f"executed notebooks under build/gpu-executed/{machine}/")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for the archives (the device tool's $OUT)")
    parser.add_argument("--quick", action="store_true", help="also time a quick-mode live run")
    parser.add_argument("--skip-tests", action="store_true", help="do not run the GPU tests")
    parser.add_argument("--unpack", type=Path, help="a gpu-results-<machine>.tar.gz to put under results/")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    if args.unpack:
        return unpack(args.unpack)
    if not args.out or not args.notebooks:
        parser.error("give --out FOLDER and the notebooks to run")
    return gpu_run(args.out, args.notebooks, args.quick, args.skip_tests)


if __name__ == "__main__":
    sys.exit(main())
