"""Run the course on a GPU machine and pack what it produced; or unpack that here.

On the GPU machine (called by `make gpu-all`, with the carried wheels on PYTHONPATH):

    python3 tools/gpu_run.py --out OUT [--quick | --only-quick] [--skip-tests] notebooks/*.ipynb

1. prints the machine report;
2. runs the GPU-marked tests (`pytest -m "gpu or gpu2"`);
3. executes each notebook live at full size with COURSE_RECORD=1, one at a time (timings
   must not share the GPU), keeping the executed copy with its outputs, and notes its seconds
   per notebook and per cell in results/<machine>/run_times.json (tools/notebook_times.py);
4. with --quick, executes them again in quick mode and reports how long each took (with
   --only-quick, only that: the time a classroom run takes, nothing recorded);
5. after every step, packs one archive, `OUT/gpu-results-<machine>.tar.gz`, holding the
   recordings (results/<machine>/) and the executed notebooks with their logs
   (gpu-executed/<machine>/), and writes `OUT/summary-<machine>.txt`, so a run cut short still
   brings back what it finished.

Where this Python keeps no compiled bytecode (the lent machines), every run keeps it in
build/pycache, so that torch is compiled once, not in every kernel and rank (``bytecode_env``).

Here:  python tools/gpu_run.py --unpack path/to/gpu-results-<machine>.tar.gz
puts the recordings under results/ and the executed notebooks under build/gpu-executed/, as
one transaction that either replaces both folders of that machine or changes nothing:

1. the machine name from the file name must be one plain folder name (letters, digits,
   '.', '_', '+', '-'; never '..');
2. the archive is read whole (a truncated or corrupt one is refused) and extracted member by
   member into a temporary folder outside the repository; it is refused whole if any member
   is not a regular file or folder (links, devices, fifos), is not a plain relative path under
   results/<machine>/ or gpu-executed/<machine>/, or appears twice;
3. it must hold recordings, and ``records.validate_machine_folder`` must find no problem in
   them;
4. only then both folders are swapped in as one step (``records.replace_folders``: staged
   copies beside the targets, a journal, renames): a failure or a signal (Ctrl-C, SIGTERM) at
   any moment rolls it back, and a killed unpack is rolled back by the next unpack or command
   that lists recorded machines. Symlinked target folders are refused, never followed.

Any failure exits non-zero with one message naming the member or file, the reason and the
state it left (the repository as it was).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import notebook_times  # noqa: E402  (tools/notebook_times.py: results/<machine>/run_times.json)

TEST_TIMEOUT_S = 240
NOTEBOOK_TIMEOUT_S = 300


def run_logged(cmd: list[str], log: Path, env: dict[str, str], timeout_s: int) -> tuple[int, float]:
    """Run ``cmd`` with its output to ``log`` (and echoed); return (exit code, seconds)."""
    start = time.perf_counter()
    with log.open("w") as f:
        try:
            proc = subprocess.run(
                cmd,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
                timeout=timeout_s,
                check=False,
            )
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = 124
            f.write(f"\n*** timed out after {timeout_s} s ***\n")
    seconds = time.perf_counter() - start
    tail = log.read_text().splitlines()[-15:]
    print("\n".join(tail), flush=True)
    return code, seconds


def execute_notebook(
    notebook: Path, dest: Path, env: dict[str, str], logs: Path
) -> tuple[int, float]:
    """Execute one notebook with nbmake, writing the executed copy (with outputs) to ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    copy = dest / notebook.name
    shutil.copyfile(notebook, copy)
    # nbmake alone: the GPU machines' image has a dozen pytest plugins that a notebook never uses
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "nbmake.pytest_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "--nbmake",
        "--overwrite",
        f"--nbmake-timeout={NOTEBOOK_TIMEOUT_S}",
        str(copy),
    ]
    env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return run_logged(cmd, logs / f"{dest.name}-{notebook.stem}.log", env, NOTEBOOK_TIMEOUT_S + 60)


def record_times(machine: str, mode: str, executed: Path) -> str:
    """Note a passed run's seconds (per notebook and per cell) in results/<machine>/run_times.json;
    return a line for the summary (a run whose times cannot be read is noted, not fatal)."""
    try:
        entry = notebook_times.times_of(
            json.loads(executed.read_text()), os.environ.get("COURSE_COMMIT") or "unknown"
        )
        notebook_times.record(ROOT / "results" / machine, mode, executed.stem, entry)
    except (OSError, ValueError, KeyError) as e:
        return f"  (no run times for {executed.name}: {e})"
    slowest = max(entry["cells"], key=lambda c: c["seconds"])
    return f"  cells took {entry['seconds']:.0f} s; the slowest, cell {slowest['cell']}, {slowest['seconds']:.1f} s"


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


def bytecode_env(env: dict[str, str], root: Path = ROOT) -> dict[str, str]:
    """``env`` for the runs, keeping compiled bytecode in ``build/pycache`` where this Python keeps
    none: no ``.pyc`` beside torch's modules once they are imported, as on the lent GPU machines
    (``PYTHONDONTWRITEBYTECODE`` set, packages read-only). There every process - each notebook's
    kernel, each rank, each child - would compile torch again (seconds each); with the cache, each
    module is compiled once per machine. Elsewhere ``env`` is returned as it is."""
    import importlib.util

    import torch

    if (
        env.get("PYTHONPYCACHEPREFIX")
        or Path(importlib.util.cache_from_source(torch.__file__)).exists()
    ):
        return env
    kept = {name: value for name, value in env.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {**kept, "PYTHONPYCACHEPREFIX": str(root / "build" / "pycache")}


# What every notebook's kernel (or a rank, or the test run) imports; compiled once before anything is timed.
WARM_IMPORTS = (
    "torch, torch._inductor, torch.utils.benchmark, matplotlib.pyplot, tensordict, pytest, nbmake, "
    "ipykernel.kernelapp, helpers.claims, helpers.exercises, helpers.plotting, helpers.records, "
    "helpers.tables"
)


def warm_bytecode(env: dict[str, str]) -> str:
    """Compile what the notebooks import into the bytecode cache of ``env``, so that no notebook's
    time includes compiling torch (the first would otherwise pay for all); a line for the summary."""
    start = time.perf_counter()
    try:
        code = subprocess.run(
            [sys.executable, "-c", f"import {WARM_IMPORTS}"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            timeout=600,
            check=False,
        ).returncode
    except subprocess.TimeoutExpired:
        code = 124
    seconds = time.perf_counter() - start
    return (
        f"compiled bytecode kept in {env['PYTHONPYCACHEPREFIX']} (this Python keeps none): "
        f"{seconds:.0f} s to compile what the notebooks import"
        + ("" if code == 0 else f" (exit {code})")
    )


def gpu_run(
    out: Path,
    notebooks: list[Path],
    quick: bool,
    skip_tests: bool,
    full: bool = True,
    quick_gpu_gib: float | None = None,
) -> int:
    from helpers import hardware, records

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
    base_env = bytecode_env(dict(os.environ))
    if base_env.get("PYTHONPYCACHEPREFIX") != os.environ.get("PYTHONPYCACHEPREFIX"):
        summary.append(warm_bytecode(base_env))
    if not skip_tests:
        code, seconds = run_logged(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "-m",
                "gpu or gpu2",
                "--durations=10",
                "tests",
            ],
            logs / "gpu-tests.log",
            base_env,
            TEST_TIMEOUT_S,
        )
        summary.append(f"gpu tests: exit {code} in {seconds:.0f} s")
        failures += code != 0
        pack(out, machine, summary)
    # each live experiment appends its memory footprint; gathered into results/<machine>/footprints.json
    footprints = {mode: build / f"footprints-{mode}.jsonl" for mode in ("full", "quick")}
    live_env = {
        **base_env,
        "COURSE_RECORD": "1",
        "COURSE_QUICK": "0",
        "COURSE_FOOTPRINT_OUT": str(footprints["full"]),
    }
    for nb in notebooks if full else []:
        code, seconds = execute_notebook(nb, build / "live", live_env, logs)
        records.gather_footprints(footprints["full"], ROOT / "results" / machine)
        summary.append(
            f"live full  {nb.name}: {'passed' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s"
        )
        failures += code != 0
        if code == 0:
            summary.append(record_times(machine, "full", build / "live" / nb.name))
        pack(out, machine, summary)
    if quick:
        quick_env = {
            **base_env,
            "COURSE_QUICK": "1",
            "COURSE_FOOTPRINT_OUT": str(footprints["quick"]),
        }
        if quick_gpu_gib is not None:
            quick_env["COURSE_GPU_MEMORY_GIB"] = str(quick_gpu_gib)
            summary.append(f"quick pass: at most {quick_gpu_gib:g} GiB on each GPU")
        for nb in notebooks:
            code, seconds = execute_notebook(nb, build / "quick", quick_env, logs)
            records.gather_footprints(footprints["quick"], ROOT / "results" / machine)
            summary.append(
                f"live quick {nb.name}: {'passed' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s"
            )
            failures += code != 0
            if code == 0:
                summary.append(record_times(machine, "quick", build / "quick" / nb.name))
            pack(out, machine, summary)
    print("\n".join(summary[2:]), flush=True)
    return 1 if failures else 0


# ---------------------------------------------------------------- unpack: one transaction

ARCHIVE_PREFIX, ARCHIVE_SUFFIX = "gpu-results-", ".tar.gz"
# hardware.machine_name joins different GPU models with '+' (a mixed machine: 2xA+B).
MACHINE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
MAX_ARCHIVE_BYTES = 2 * 2**30  # unpacked; a whole course's recordings are a few MB
TOPS = ("results", "gpu-executed")  # the archive's two top folders, each holding <machine>/
ARCHIVE_ERRORS = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError)


class Refused(Exception):
    """Why an archive cannot be unpacked; ``unpack`` turns it into a SystemExit."""


def machine_of(archive: Path) -> str:
    """The machine named by ``gpu-results-<machine>.tar.gz``, refused unless a safe folder name."""
    name = archive.name
    if not name.startswith(ARCHIVE_PREFIX) or not name.endswith(ARCHIVE_SUFFIX):
        raise Refused(
            f"expected a {ARCHIVE_PREFIX}<machine>{ARCHIVE_SUFFIX} file from "
            f"`make gpu-all`, got {archive}"
        )
    machine = name[len(ARCHIVE_PREFIX) : -len(ARCHIVE_SUFFIX)]
    if not MACHINE_NAME.fullmatch(machine) or ".." in machine:
        raise Refused(
            f"the machine name {machine!r} in {name} is not a plain folder name "
            f"(letters, digits, '.', '_', '+', '-'; no '..')"
        )
    return machine


def check_member(member: tarfile.TarInfo, machine: str) -> None:
    """Refuse a member unless it is a regular file or folder under one of the machine's folders."""
    name = member.name
    if not (member.isreg() or member.isdir()):
        raise Refused(f"{name!r} is a {member_kind(member)}; only files and folders are accepted")
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise Refused(f"{name!r} is not a plain relative path (absolute, '.', '..' or '//')")
    if parts[0] not in TOPS:
        raise Refused(f"{name!r} is outside results/{machine}/ and gpu-executed/{machine}/")
    if len(parts) < 2 or parts[1] != machine:
        raise Refused(f"{name!r} is not under {parts[0]}/{machine}/ (another machine's folder?)")
    if len(parts) == 2 and not member.isdir():
        raise Refused(f"{name!r} must be a folder")


def member_kind(member: tarfile.TarInfo) -> str:
    """A word for what a member is, for messages."""
    kinds = [
        (member.issym, "symlink"),
        (member.islnk, "hardlink"),
        (member.ischr, "device"),
        (member.isblk, "device"),
        (member.isfifo, "fifo"),
    ]
    return next((word for test, word in kinds if test()), f"member of type {member.type!r}")


def check_gzip_intact(archive: Path) -> None:
    """Read the whole gzip stream once, so a truncated or corrupt archive is refused up front."""
    try:
        with gzip.open(archive, "rb") as stream:
            while stream.read(1 << 20):
                pass
    except ARCHIVE_ERRORS as e:
        raise Refused(f"cannot read {archive.name}: {e or type(e).__name__}") from e


def extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> None:
    """Create ``member`` under ``dest``: a folder, or a new 0o644 file holding its bytes."""
    path = dest.joinpath(*member.name.split("/"))
    if member.isdir():
        path.mkdir(parents=True, exist_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    source = tar.extractfile(member)
    if source is None:
        raise Refused(f"{member.name!r} has no data")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with source, os.fdopen(os.open(path, flags, 0o644), "wb") as target:
        shutil.copyfileobj(source, target)


def extract_checked(archive: Path, machine: str, dest: Path) -> None:
    """Extract the archive into ``dest`` member by member, refusing it whole at the first bad one."""
    check_gzip_intact(archive)
    seen: set[str] = set()
    member = None
    total = 0
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                check_member(member, machine)
                if member.name in seen:
                    raise Refused(f"{member.name!r} appears twice in the archive")
                seen.add(member.name)
                total += member.size
                if total > MAX_ARCHIVE_BYTES:
                    raise Refused(
                        f"the archive unpacks to more than {MAX_ARCHIVE_BYTES // 2**30} GiB "
                        f"(at {member.name!r}); recordings are a few MB"
                    )
                extract_member(tar, member, dest)
    except ARCHIVE_ERRORS as e:
        where = f" at {member.name!r}" if member is not None else ""
        raise Refused(f"cannot read {archive.name}{where}: {e or type(e).__name__}") from e


def drop_recorded_gaps(extracted: Path, machine: str) -> list[str]:
    """Remove from the extracted results/<machine>/gaps.json each experiment the archive has
    recorded (the GPU machine packed the gaps file it was sent); the keys removed."""
    from helpers import records

    folder = extracted / "results" / machine
    path = folder / records.GAPS_FILE
    if not path.exists():
        return []
    gaps = records.recording_gaps(folder)
    done = [key for key in gaps if (folder / f"{key}.json").exists()]
    kept = {key: why for key, why in gaps.items() if key not in done}
    if kept:
        path.write_text(json.dumps(kept, indent=2) + "\n")
    else:
        path.unlink()
    return done


def validate_extracted(extracted: Path, machine: str) -> None:
    """Refuse unless the extracted results/<machine>/ holds recordings that all validate."""
    folder = extracted / "results" / machine
    if not any(folder.glob("*/*.json")):
        raise Refused(f"no recordings (results/{machine}/<notebook>/*.json) in the archive")
    try:
        from helpers import records

        problems = records.validate_machine_folder(folder, machine)
    except Exception as e:  # a validator that cannot run must not let the archive through
        raise Refused(f"cannot validate results/{machine}/: {type(e).__name__}: {e}") from e
    if (folder / notebook_times.RUN_TIMES).exists():
        problems += notebook_times.run_times_problems(folder / notebook_times.RUN_TIMES)
    if problems:
        prefix = f"{extracted}{os.sep}"
        raise Refused(
            "recordings that do not validate:\n  "
            + "\n  ".join(str(p).replace(prefix, "") for p in problems)
        )


def check_no_links(root: Path, machine: str) -> None:
    """Refuse if a folder unpack would write into is a symlink or not a folder."""
    for rel in (
        "results",
        f"results/{machine}",
        "build",
        "build/gpu-executed",
        f"build/gpu-executed/{machine}",
    ):
        path = root / rel
        if path.is_symlink():
            raise Refused(f"{rel} is a symlink; unpack never follows links")
        if path.exists() and not path.is_dir():
            raise Refused(f"{rel} is not a folder")


def install(extracted: Path, machine: str, root: Path) -> None:
    """Replace results/<machine>/ and build/gpu-executed/<machine>/ with the extracted ones, as
    one step for every reader (``records.replace_folders``: staged copies, a journal, renames;
    rolled back on any failure or signal, or by the next command if this one was killed)."""
    from helpers import records

    results = root / "results"
    sources = {
        results / machine: extracted / "results" / machine,
        root / "build" / "gpu-executed" / machine: extracted / "gpu-executed" / machine,
    }
    try:
        records.replace_folders(
            results, {target: src if src.is_dir() else None for target, src in sources.items()}
        )
    except records.Interrupted as e:
        if e.committed:
            raise SystemExit(f"unpack of results/{machine} interrupted: {e}") from None
        raise Refused(f"could not put the results in place: {e}") from e


def unpack(archive: Path, root: Path = ROOT) -> int:
    """Put a GPU run's recordings under results/ and its executed notebooks under build/.

    All or nothing: on any problem raises SystemExit naming the member or file and the reason,
    with the repository unchanged.
    """
    try:
        machine = machine_of(archive)
        check_no_links(root, machine)
        tmp = Path(tempfile.mkdtemp(prefix="gpu-unpack-"))
        try:
            extract_checked(archive, machine, tmp)
            recorded = drop_recorded_gaps(tmp, machine)
            validate_extracted(tmp, machine)
            check_no_links(root, machine)
            install(tmp, machine, root)
            count = sum(p.is_file() for p in (tmp / "results" / machine).rglob("*"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except Refused as e:
        raise SystemExit(f"unpack refused {archive}: {e}") from None
    print(
        f"{count} files under results/{machine}/; "
        f"executed notebooks under build/gpu-executed/{machine}/"
    )
    if recorded:
        print(f"recorded now, so no longer listed in its gaps.json: {', '.join(recorded)}")
    return 0


def interrupt(signum: int, frame: object) -> None:
    """A signal handler: stop as Ctrl-C does (an unpack then rolls back and says so)."""
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def mark_installed(site: Path) -> Path:
    """Make this clone count as the installed course for the Python that has ``site`` on its
    path: write ``<name>-<version>.dist-info/METADATA`` there, with pyproject.toml's name and
    version. The lent GPU machines import the course from the clone (PYTHONPATH, no pip
    install, no network); the notebooks' first cell and ``datamove --version`` read the
    distribution's version, and without it the cell would try to fetch the course. Returns the
    folder written.
    """
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    for old in site.glob(f"{name.replace('-', '_')}-*.dist-info"):
        shutil.rmtree(old)
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (folder / "INSTALLER").write_text(
        "tools/gpu_run.py --mark-installed (the clone on PYTHONPATH)\n"
    )
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for the archives (the device tool's $OUT)")
    parser.add_argument("--quick", action="store_true", help="also time a quick-mode live run")
    parser.add_argument(
        "--only-quick",
        action="store_true",
        help="time the quick-mode live run alone: no full-size run, nothing recorded",
    )
    parser.add_argument("--skip-tests", action="store_true", help="do not run the GPU tests")
    parser.add_argument(
        "--quick-gpu-gib",
        type=float,
        metavar="N",
        help="the quick pass may take at most N GiB on each GPU (COURSE_GPU_MEMORY_GIB): "
        "does a classroom's run fit a smaller GPU, e.g. 16 for a T4",
    )
    parser.add_argument(
        "--unpack", type=Path, help="a gpu-results-<machine>.tar.gz to put under results/"
    )
    parser.add_argument(
        "--mark-installed",
        type=Path,
        metavar="SITE",
        help="write this clone's dist-info into SITE (a folder on PYTHONPATH), then stop",
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args()
    if args.unpack:
        signal.signal(signal.SIGTERM, interrupt)  # rolled back like Ctrl-C, with its message
        return unpack(args.unpack)
    if args.mark_installed:
        print(f"the clone counts as installed: {mark_installed(args.mark_installed)}")
        return 0
    if not args.out or not args.notebooks:
        parser.error("give --out FOLDER and the notebooks to run")
    return gpu_run(
        args.out,
        args.notebooks,
        args.quick or args.only_quick,
        args.skip_tests,
        full=not args.only_quick,
        quick_gpu_gib=args.quick_gpu_gib,
    )


if __name__ == "__main__":
    sys.exit(main())
