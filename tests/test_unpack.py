"""`make unpack`: a GPU run's archive goes in whole, or the repository is left exactly as it was.

Every case builds a small archive with tarfile and unpacks it into a fake repository root under
tmp_path; after every refusal the whole fake root (files, folders, links) must be unchanged and
the temporary extraction folder gone.
"""

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from helpers import records

ROOT = Path(__file__).resolve().parent.parent
M = "1xGPU-Test"
OTHER = "other-machine"
REAL = "2xNVIDIA-H200"  # a recorded machine whose 00_start_here is copied for the real validator


def load_gpu_run():
    spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "tools" / "gpu_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_run = load_gpu_run()


# ---------------------------------------------------------------- building archives and roots


def entry(name, data=b"", kind=tarfile.REGTYPE, linkname=""):
    """One archive member: (TarInfo, bytes or None)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    return info, None


def good_entries(machine=M):
    return [
        entry(f"results/{machine}", kind=tarfile.DIRTYPE),
        entry(f"results/{machine}/nb", kind=tarfile.DIRTYPE),
        entry(f"results/{machine}/nb/exp.json", b'{"new": 1}'),
        entry(f"gpu-executed/{machine}", kind=tarfile.DIRTYPE),
        entry(f"gpu-executed/{machine}/live/nb.ipynb", b"{}"),
        entry(f"gpu-executed/{machine}/logs/nb.log", b"passed"),
    ]


def write_archive(folder, entries, machine=M):
    """Write ``entries`` to ``folder/gpu-results-<machine>.tar.gz``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gpu-results-{machine}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def snapshot(root):
    """Every file's bytes, every folder, every link's target under ``root`` (links not followed)."""
    files, dirs, links = {}, set(), {}
    for here, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(here) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                links[rel] = os.readlink(path)
            elif path.is_dir():
                dirs.add(rel)
            else:
                files[rel] = path.read_bytes()
    return files, dirs, links


@pytest.fixture
def root(tmp_path):
    """A fake repository: this machine's old results and executed notebooks, another machine's
    results, and files that must never be touched."""
    r = tmp_path / "repo"
    for rel, text in {
        f"results/{M}/nb/old.json": "old",
        f"results/{OTHER}/nb/exp.json": "other",
        f"build/gpu-executed/{M}/live/old.ipynb": "old notebook",
        "Makefile": "all:\n",
        "helpers/x.py": "x = 1\n",
        ".git/hooks/pre-commit": "#!/bin/sh\n",
    }.items():
        (r / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / rel).write_text(text)
    return r


@pytest.fixture(autouse=True)
def tmpdir_here(tmp_path, monkeypatch):
    """Point tempfile at a folder of ours, to check that unpack removes its temporary folder."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield scratch
    assert list(scratch.iterdir()) == [], "unpack left its temporary folder behind"


@pytest.fixture
def validator(monkeypatch):
    """Replace the recordings validator; ``validator.problems`` is what it returns."""

    class Fake:
        problems: list = []
        calls: list = []

        def __call__(self, folder, machine):
            self.calls.append(
                (Path(folder), machine, sorted(p.name for p in Path(folder).rglob("*")))
            )
            return [p.format(folder=folder) for p in self.problems]

    fake = Fake()
    fake.problems, fake.calls = [], []
    monkeypatch.setattr(records, "validate_machine_folder", fake, raising=False)
    return fake


def refused(archive, root, match):
    """Unpack must refuse with a message matching ``match`` and leave ``root`` unchanged."""
    before = snapshot(root)
    with pytest.raises(SystemExit) as info:
        gpu_run.unpack(archive, root=root)
    message = str(info.value.code)
    assert info.value.code not in (0, None)
    assert match in message, message
    assert snapshot(root) == before
    return message


# ---------------------------------------------------------------- the machine name


@pytest.mark.parametrize(
    "machine", ["..", ".", "", "a b", "x;y", "-x", ".hidden", "a..b", "a\\b", "a$b", "ä"]
)
def test_bad_machine_names_are_refused(tmp_path, root, validator, machine):
    archive = tmp_path / "in" / f"gpu-results-{machine}.tar.gz"
    archive.parent.mkdir()
    shutil.copyfile(write_archive(tmp_path / "src", good_entries()), archive)
    refused(archive, root, "not a plain folder name")
    assert validator.calls == []


def test_a_file_not_named_like_an_archive_is_refused(tmp_path, root, validator):
    refused(tmp_path / "other.tar.gz", root, "gpu-results")


@pytest.mark.parametrize(
    "machine",
    [
        "1xNVIDIA-H100-80GB-HBM3",
        "2xNVIDIA-H200",
        "cpu-only",
        "a.b_c",
        "2xNVIDIA-A100-SXM4-80GB+NVIDIA-H100-80GB-HBM3",
    ],
)
def test_real_machine_names_are_accepted(machine):
    assert gpu_run.machine_of(Path(f"gpu-results-{machine}.tar.gz")) == machine


def test_an_archive_that_unpacks_too_large_is_refused(tmp_path, root, validator, monkeypatch):
    monkeypatch.setattr(gpu_run, "MAX_ARCHIVE_BYTES", 10)
    refused(write_archive(tmp_path / "src", good_entries()), root, "unpacks to more than")


# ---------------------------------------------------------------- unreadable archives


def test_an_empty_file_is_refused(tmp_path, root, validator):
    archive = tmp_path / f"gpu-results-{M}.tar.gz"
    archive.write_bytes(b"")
    refused(archive, root, "cannot read")
    assert (root / "results" / M / "nb" / "old.json").read_text() == "old"


def test_an_archive_without_members_is_refused(tmp_path, root, validator):
    refused(write_archive(tmp_path, []), root, "no recordings")


def test_an_archive_without_recordings_is_refused(tmp_path, root, validator):
    entries = [e for e in good_entries() if not e[0].name.startswith("results/")]
    refused(write_archive(tmp_path, entries), root, "no recordings")


@pytest.mark.parametrize("keep", [0.5, 0.9, -4])
def test_a_truncated_archive_is_refused(tmp_path, root, validator, keep):
    noise = entry(f"results/{M}/nb/noise.bin", os.urandom(300_000))  # does not compress
    data = write_archive(tmp_path / "src", good_entries() + [noise]).read_bytes()
    archive = tmp_path / f"gpu-results-{M}.tar.gz"
    archive.write_bytes(data[: int(len(data) * keep)] if keep > 0 else data[:keep])
    refused(archive, root, "cannot read")


def test_a_gzip_that_is_not_a_tar_is_refused(tmp_path, root, validator):
    import gzip

    archive = tmp_path / f"gpu-results-{M}.tar.gz"
    archive.write_bytes(gzip.compress(b"hello, not a tar file\n" * 100))
    refused(archive, root, "cannot read")


def test_a_file_that_is_not_gzip_is_refused(tmp_path, root, validator):
    archive = tmp_path / f"gpu-results-{M}.tar.gz"
    archive.write_text("just text")
    refused(archive, root, "cannot read")


def test_a_missing_archive_is_refused(tmp_path, root, validator):
    refused(tmp_path / f"gpu-results-{M}.tar.gz", root, "cannot read")


# ---------------------------------------------------------------- members that are refused


def test_a_symlink_then_a_file_of_the_same_name_is_refused(tmp_path, root, validator):
    """The attack the data filter lets through: a link inside the repository, then a write."""
    entries = good_entries() + [
        entry(f"results/{M}/nb/link", kind=tarfile.SYMTYPE, linkname="../../../Makefile"),
        entry(f"results/{M}/nb/link", b"pwned"),
    ]
    refused(write_archive(tmp_path, entries), root, "symlink")
    assert (root / "Makefile").read_text() == "all:\n"


BAD_MEMBERS = {
    "symlink": entry(f"results/{M}/nb/s", kind=tarfile.SYMTYPE, linkname="exp.json"),
    "hardlink": entry(f"results/{M}/nb/h", kind=tarfile.LNKTYPE, linkname="Makefile"),
    "char device": entry(f"results/{M}/nb/c", kind=tarfile.CHRTYPE),
    "block device": entry(f"results/{M}/nb/b", kind=tarfile.BLKTYPE),
    "fifo": entry(f"results/{M}/nb/f", kind=tarfile.FIFOTYPE),
    "absolute": entry(f"/results/{M}/nb/abs.json", b"{}"),
    "absolute elsewhere": entry("/tmp/evil.json", b"{}"),
    "dotdot out": entry(f"results/{M}/../../Makefile", b"pwned"),
    "dotdot sideways": entry(f"results/{M}/nb/../../{OTHER}/nb/exp.json", b"pwned"),
    "dot": entry(f"./results/{M}/nb/dot.json", b"{}"),
    "double slash": entry(f"results/{M}//nb/x.json", b"{}"),
    "other machine": entry(f"results/{OTHER}/nb/exp.json", b"pwned"),
    "other machine executed": entry(f"gpu-executed/{OTHER}/nb.ipynb", b"{}"),
    "outside prefixes": entry("Makefile", b"pwned"),
    "git hook": entry(".git/hooks/pre-commit", b"pwned"),
    "helpers": entry("helpers/x.py", b"pwned"),
    "results itself": entry("results", kind=tarfile.DIRTYPE),
    "machine folder as a file": entry(f"results/{M}", b"{}"),
    "prefix lookalike": entry(f"results/{M}x/nb/exp.json", b"{}"),
}


@pytest.mark.parametrize("bad", list(BAD_MEMBERS), ids=list(BAD_MEMBERS))
@pytest.mark.parametrize("where", ["first", "last"])
def test_a_bad_member_refuses_the_whole_archive(tmp_path, root, validator, bad, where):
    entries = good_entries()
    entries.insert(0 if where == "first" else len(entries), BAD_MEMBERS[bad])
    message = refused(write_archive(tmp_path, entries), root, "")
    assert BAD_MEMBERS[bad][0].name in message
    assert validator.calls == []


def test_a_duplicate_member_is_refused(tmp_path, root, validator):
    entries = good_entries() + [entry(f"results/{M}/nb/exp.json", b'{"again": 1}')]
    refused(write_archive(tmp_path, entries), root, "appears twice")


def test_a_file_where_a_folder_must_go_is_refused(tmp_path, root, validator):
    entries = [entry(f"results/{M}/nb", b"a file"), entry(f"results/{M}/nb/exp.json", b"{}")]
    refused(write_archive(tmp_path, entries), root, f"results/{M}/nb/exp.json")


# ---------------------------------------------------------------- validation of the recordings


def test_the_validator_sees_the_extracted_folder_outside_the_repository(tmp_path, root, validator):
    gpu_run.unpack(write_archive(tmp_path, good_entries()), root=root)
    ((folder, machine, names),) = validator.calls
    assert machine == M and folder.name == M and folder.parent.name == "results"
    assert root not in folder.parents and names == ["exp.json", "nb"]


def test_a_recording_that_fails_validation_is_refused(tmp_path, root, validator):
    validator.problems = ["{folder}/nb/exp.json: bandwidth 900 GB/s is over the ceiling"]
    message = refused(write_archive(tmp_path, good_entries()), root, "over the ceiling")
    assert f"results/{M}/nb/exp.json" in message and str(tmp_path / "scratch") not in message


def test_a_validator_that_raises_refuses(tmp_path, root, monkeypatch):
    def broken(folder, machine):
        raise ValueError("boom")

    monkeypatch.setattr(records, "validate_machine_folder", broken, raising=False)
    refused(write_archive(tmp_path, good_entries()), root, "boom")


def test_a_missing_validator_refuses(tmp_path, root, monkeypatch):
    monkeypatch.delattr(records, "validate_machine_folder", raising=False)
    refused(write_archive(tmp_path, good_entries()), root, "cannot validate")


def real_copy(dest, machine=REAL):
    """The repository's own 00_start_here recordings of ``machine`` copied into ``dest/<machine>``,
    with their lines of its checksums.json; return the notebook folder."""
    src = ROOT / "results" / machine
    shutil.copytree(src / "00_start_here", dest / machine / "00_start_here")
    sums = json.loads((src / records.CHECKSUMS).read_text())
    kept = {k: v for k, v in sums.items() if k.startswith("00_start_here/")}
    (dest / machine / records.CHECKSUMS).write_text(json.dumps(kept))
    return dest / machine / "00_start_here"


def folder_entries(folder, machine=REAL):
    """The archive members of a copied results/<machine> folder (files and folders)."""
    entries = [entry(f"results/{machine}", kind=tarfile.DIRTYPE)]
    for p in sorted(folder.rglob("*")):
        name = f"results/{machine}/{p.relative_to(folder).as_posix()}"
        if p.is_symlink():
            entries.append(entry(name, kind=tarfile.SYMTYPE, linkname=os.readlink(p)))
        elif p.is_dir():
            entries.append(entry(name, kind=tarfile.DIRTYPE))
        else:
            entries.append(entry(name, p.read_bytes()))
    return entries


def real_recording_entries(extra=()):
    """The repository's own 00_start_here recordings of REAL, as archive members."""
    with tempfile.TemporaryDirectory() as tmp:
        entries = folder_entries(real_copy(Path(tmp)).parent)
    return entries + list(extra) + [entry(f"gpu-executed/{REAL}/logs/x.log", b"ok")]


needs_validator = pytest.mark.skipif(
    not hasattr(records, "validate_machine_folder"),
    reason="helpers.records.validate_machine_folder does not exist yet",
)


@needs_validator
def test_real_recordings_pass_the_real_validator(tmp_path, root):
    archive = write_archive(tmp_path, real_recording_entries(), machine=REAL)
    assert gpu_run.unpack(archive, root=root) == 0
    src = ROOT / "results" / REAL / "00_start_here"
    for p in src.iterdir():
        assert (root / "results" / REAL / "00_start_here" / p.name).read_bytes() == p.read_bytes()


@needs_validator
def test_a_recording_that_does_not_decode_is_refused_by_the_real_validator(tmp_path, root):
    broken = entry(f"results/{REAL}/00_start_here/broken.json", b'{"header": ')
    archive = write_archive(tmp_path, real_recording_entries([broken]), machine=REAL)
    refused(archive, root, "broken.json")


@needs_validator
def test_a_recording_of_another_machine_is_refused_by_the_real_validator(tmp_path, root):
    archive = write_archive(tmp_path / "a", real_recording_entries(), machine=REAL)
    renamed = tmp_path / f"gpu-results-{M}.tar.gz"  # REAL's recordings under M's name
    with tarfile.open(archive) as src, tarfile.open(renamed, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read() if member.isreg() else None
            member.name = member.name.replace(REAL, M)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    message = refused(renamed, root, f"results/{M}/00_start_here/first_timeline.json")
    assert REAL in message


# ---------------------------------------------------------------- links in the repository


@pytest.mark.parametrize(
    "rel", ["results", f"results/{M}", "build", "build/gpu-executed", f"build/gpu-executed/{M}"]
)
def test_a_symlinked_target_folder_is_refused(tmp_path, root, validator, rel):
    elsewhere = tmp_path / "elsewhere"
    shutil.move(root / rel, elsewhere)
    (root / rel).symlink_to(elsewhere, target_is_directory=True)
    before_elsewhere = snapshot(elsewhere)
    refused(write_archive(tmp_path / "in", good_entries()), root, "symlink")
    assert snapshot(elsewhere) == before_elsewhere


# ---------------------------------------------------------------- the happy paths


def outside_targets(snap):
    """A snapshot without this machine's two target folders."""
    files, dirs, links = snap
    mine = (f"results/{M}", f"build/gpu-executed/{M}")

    def keep(rel):
        return not any(rel == m or rel.startswith(m + "/") for m in mine)

    return {k: v for k, v in files.items() if keep(k)}, {d for d in dirs if keep(d)}, links


def assert_no_hidden_folders(root):
    for folder in (root / "results", root / "build" / "gpu-executed"):
        assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_unpack_replaces_this_machines_folders_and_nothing_else(tmp_path, root, validator, capsys):
    before = snapshot(root)
    assert gpu_run.unpack(write_archive(tmp_path, good_entries()), root=root) == 0
    assert not (root / "results" / M / "nb" / "old.json").exists()
    assert (root / "results" / M / "nb" / "exp.json").read_bytes() == b'{"new": 1}'
    assert (root / "build" / "gpu-executed" / M / "live" / "nb.ipynb").read_bytes() == b"{}"
    assert (root / "build" / "gpu-executed" / M / "logs" / "nb.log").read_bytes() == b"passed"
    assert not (root / "build" / "gpu-executed" / M / "live" / "old.ipynb").exists()
    assert outside_targets(snapshot(root)) == outside_targets(before)
    assert (root / "results" / M / "nb" / "exp.json").stat().st_mode & 0o777 == 0o644
    assert_no_hidden_folders(root)
    assert f"1 files under results/{M}/" in capsys.readouterr().out


def test_unpack_drops_the_gaps_the_archive_has_recorded(tmp_path, root, validator, capsys):
    """The GPU machine packs the gaps.json it was sent: what it recorded leaves the list there."""
    gaps = {"nb/exp": "no such machine was lent", "nb/other": "not lent either"}
    entries = good_entries() + [entry(f"results/{M}/gaps.json", json.dumps(gaps).encode())]
    assert gpu_run.unpack(write_archive(tmp_path, entries), root=root) == 0
    kept = json.loads((root / "results" / M / "gaps.json").read_text())
    assert kept == {"nb/other": "not lent either"}
    assert "no longer listed in its gaps.json: nb/exp" in capsys.readouterr().out
    only = good_entries() + [entry(f"results/{M}/gaps.json", b'{"nb/exp": "not lent"}')]
    assert gpu_run.unpack(write_archive(tmp_path / "b", only), root=root) == 0
    assert not (root / "results" / M / "gaps.json").exists()  # nothing left to list


def test_unpack_into_a_repository_without_build_or_this_machine(tmp_path, root, validator):
    shutil.rmtree(root / "build")
    shutil.rmtree(root / "results" / M)
    assert gpu_run.unpack(write_archive(tmp_path, good_entries()), root=root) == 0
    assert (root / "results" / M / "nb" / "exp.json").exists()
    assert (root / "build" / "gpu-executed" / M / "live" / "nb.ipynb").exists()
    assert_no_hidden_folders(root)


def test_an_archive_without_executed_notebooks_clears_the_old_ones(tmp_path, root, validator):
    entries = [e for e in good_entries() if e[0].name.startswith("results/")]
    assert gpu_run.unpack(write_archive(tmp_path, entries), root=root) == 0
    assert (root / "results" / M / "nb" / "exp.json").exists()
    assert not (root / "build" / "gpu-executed" / M).exists()
    assert_no_hidden_folders(root)


def test_pack_then_unpack_round_trip(tmp_path, root, validator):
    there, out = tmp_path / "gpu", tmp_path / "out"
    (there / "results" / M / "nb").mkdir(parents=True)
    (there / "results" / M / "nb" / "exp.json").write_text("{}")
    (there / "build" / "gpu" / "logs").mkdir(parents=True)
    (there / "build" / "gpu" / "logs" / "gpu-tests.log").write_text("ok")
    out.mkdir()
    archive = gpu_run.pack(out, M, ["summary"], root=there)
    assert gpu_run.unpack(archive, root=root) == 0
    assert (root / "results" / M / "nb" / "exp.json").read_text() == "{}"
    assert (root / "build" / "gpu-executed" / M / "logs" / "gpu-tests.log").read_text() == "ok"


# ---------------------------------------------------------------- a failure during the swap


def failing_rename(monkeypatch, fail_on):
    """Make the ``fail_on``-th call of os.rename (1-based) raise; return the list of calls."""
    calls = []
    real = os.rename

    def rename(src, dst, *args, **kwargs):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == fail_on:
            raise OSError(28, "No space left on device (simulated)")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", rename)
    return calls


@pytest.mark.parametrize("fail_on", [1, 2, 3, 4])
def test_a_failed_rename_leaves_everything_in_place(
    tmp_path, root, validator, monkeypatch, fail_on
):
    """Renames: results aside (1), staging in (2), executed aside (3), staging in (4)."""
    archive = write_archive(tmp_path, good_entries())
    calls = failing_rename(monkeypatch, fail_on)
    refused(archive, root, "simulated")
    assert len(calls) >= fail_on
    assert (root / "results" / M / "nb" / "old.json").read_text() == "old"


def test_a_failed_rename_removes_the_folders_it_created(tmp_path, root, validator, monkeypatch):
    shutil.rmtree(root / "build")
    archive = write_archive(tmp_path, good_entries())
    failing_rename(monkeypatch, 3)  # results swapped in, then the executed notebooks fail
    refused(archive, root, "simulated")
    assert not (root / "build").exists()


def test_a_failed_copy_into_staging_changes_nothing(tmp_path, root, validator, monkeypatch):
    def copytree(*args, **kwargs):
        raise OSError(13, "Permission denied (simulated)")

    monkeypatch.setattr(shutil, "copytree", copytree)
    refused(write_archive(tmp_path, good_entries()), root, "simulated")


# ---------------------------------------------------------------- the command line


def test_the_command_line_exits_non_zero_with_one_message(tmp_path):
    archive = tmp_path / "gpu-results-...tar.gz"  # machine ".." would have meant the repository
    shutil.copyfile(write_archive(tmp_path / "src", good_entries()), archive)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_run.py"), "--unpack", str(archive)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "not a plain folder name" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- the member filter, clause by clause

BAD_MEMBER_REASONS = {
    "symlink": "is a symlink",
    "hardlink": "is a hardlink",
    "char device": "is a device",
    "block device": "is a device",
    "fifo": "is a fifo",
    "absolute": "not a plain relative path",
    "absolute elsewhere": "not a plain relative path",
    "dotdot out": "not a plain relative path",
    "dotdot sideways": "not a plain relative path",
    "dot": "not a plain relative path",
    "double slash": "not a plain relative path",
    "other machine": "another machine's folder",
    "other machine executed": "another machine's folder",
    "outside prefixes": "is outside results/",
    "git hook": "is outside results/",
    "helpers": "is outside results/",
    "results itself": "another machine's folder",
    "machine folder as a file": "must be a folder",
    "prefix lookalike": "another machine's folder",
}


@pytest.mark.parametrize("bad", list(BAD_MEMBERS), ids=list(BAD_MEMBERS))
def test_each_bad_member_is_refused_for_its_own_reason(bad):
    assert set(BAD_MEMBER_REASONS) == set(BAD_MEMBERS)
    with pytest.raises(gpu_run.Refused, match=BAD_MEMBER_REASONS[bad]):
        gpu_run.check_member(BAD_MEMBERS[bad][0], M)


@pytest.mark.parametrize(
    "name, kind",
    [
        (f"results/{M}", tarfile.DIRTYPE),
        (f"gpu-executed/{M}", tarfile.DIRTYPE),
        (f"results/{M}/nb", tarfile.DIRTYPE),
        (f"results/{M}/nb/exp.json", tarfile.REGTYPE),
        (f"results/{M}/gaps.json", tarfile.REGTYPE),
        (f"gpu-executed/{M}/live/nb.ipynb", tarfile.REGTYPE),
        (f"gpu-executed/{M}/logs/nb.log", tarfile.REGTYPE),
        (f"results/{M}/nb/exp.trace.json.gz", tarfile.REGTYPE),
    ],
)
def test_files_and_folders_under_this_machines_folders_are_accepted(name, kind):
    gpu_run.check_member(entry(name, kind=kind)[0], M)  # raises nothing


# ---------------------------------------------------------------- interrupted at every step

STEPS = [(os, "rename"), (os, "replace"), (os, "unlink"), (shutil, "rmtree"), (shutil, "copytree")]


def interrupt_at(monkeypatch, stop_at, kill):
    """Count every rename, replace, unlink, rmtree, copytree and Path.write_text; the
    ``stop_at``-th raises KeyboardInterrupt, and with ``kill`` every later one does too (nothing
    can run after it, as after SIGKILL). Return the list of calls made."""
    calls = []

    def wrap(owner, name):
        real = getattr(owner, name)

        def step(*args, **kwargs):
            calls.append(name)
            if len(calls) == stop_at or (kill and len(calls) > stop_at):
                raise KeyboardInterrupt(f"{name}, step {len(calls)}")
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, step)

    for owner, name in [*STEPS, (Path, "write_text")]:
        wrap(owner, name)
    return calls


def unpacked_copy(tmp_path, root, archive):
    """The snapshot of ``root`` after a whole, uninterrupted unpack of ``archive`` (on a copy)."""
    done = tmp_path / "reference"
    shutil.copytree(root, done, symlinks=True)
    assert gpu_run.unpack(archive, root=done) == 0
    return snapshot(done)


def steps_of_a_whole_unpack(tmp_path, root, archive, monkeypatch):
    copy = tmp_path / "count"
    shutil.copytree(root, copy, symlinks=True)
    with monkeypatch.context() as m:
        calls = interrupt_at(m, 10**9, kill=False)
        assert gpu_run.unpack(archive, root=copy) == 0
    assert "rename" in calls and "replace" in calls and "write_text" in calls
    return len(calls)


@pytest.mark.parametrize("no_build", [False, True], ids=["replace", "first-unpack"])
def test_ctrl_c_at_any_step_leaves_old_or_new_and_says_which(
    tmp_path, root, validator, monkeypatch, tmpdir_here, no_build
):
    """A KeyboardInterrupt at each rename, write and delete in turn: the unpack rolls back (or,
    past the commit, keeps the new folders) before it exits, and its message says which."""
    if no_build:
        shutil.rmtree(root / "build")
    archive = write_archive(tmp_path / "archive", good_entries())
    before, after = snapshot(root), unpacked_copy(tmp_path, root, archive)
    total = steps_of_a_whole_unpack(tmp_path, root, archive, monkeypatch)
    for k in range(1, total + 1):
        with monkeypatch.context() as m:
            calls = interrupt_at(m, k, kill=False)
            with pytest.raises((SystemExit, KeyboardInterrupt)) as info:
                gpu_run.unpack(archive, root=root)
        message = str(info.value.code if isinstance(info.value, SystemExit) else info.value)
        now = visible(snapshot(root))
        where = f"interrupted at {calls[k - 1]} (step {k} of {total}): {message}"
        assert now in (before, after), where
        if now == before:
            assert "rolled back" in message, where
        elif isinstance(info.value, SystemExit):
            assert "in place" in message, where
        assert records.recorded_machine_names(root / "results") == [M, OTHER], where
        assert snapshot(root) == now, where  # and the listing deleted what was left hidden
        restore(root, before)
        for left in tmpdir_here.iterdir():  # the extraction folder a real Ctrl-C may leave
            shutil.rmtree(left)


@pytest.mark.parametrize("recovered_by", ["listing", "unpack"])
def test_a_kill_at_any_step_is_rolled_back_by_the_next_command(
    tmp_path, root, validator, monkeypatch, tmpdir_here, recovered_by
):
    """Nothing runs after the k-th rename, write or delete (as after SIGKILL): whatever it left,
    the next listing of recorded machines sees the old or the new folders, both, never a
    missing machine or a hidden folder; the next unpack finishes with the new ones."""
    archive = write_archive(tmp_path / "archive", good_entries())
    before, after = snapshot(root), unpacked_copy(tmp_path, root, archive)
    total = steps_of_a_whole_unpack(tmp_path, root, archive, monkeypatch)
    for k in range(1, total + 1):
        with monkeypatch.context() as m:
            calls = interrupt_at(m, k, kill=True)
            with pytest.raises((SystemExit, KeyboardInterrupt)):
                gpu_run.unpack(archive, root=root)
        where = f"killed at {calls[k - 1]} (step {k} of {total})"
        if recovered_by == "listing":
            assert records.recorded_machine_names(root / "results") == [M, OTHER], where
            assert snapshot(root) in (before, after), where
        else:
            assert gpu_run.unpack(archive, root=root) == 0, where
            assert snapshot(root) == after, where
        restore(root, before)
        for left in tmpdir_here.iterdir():
            shutil.rmtree(left)


def visible(snap):
    """A snapshot without the hidden entries inside the repository's folders (an unpack's
    leftovers, which no reader reads)."""
    files, dirs, links = snap

    def shown(rel):
        return not any(part.startswith(".") for part in rel.split("/")[1:])

    return {k: v for k, v in files.items() if shown(k)}, {d for d in dirs if shown(d)}, links


def restore(root, snap):
    """Make ``root`` hold exactly the snapshot ``snap`` (files and folders; no links in it)."""
    shutil.rmtree(root)
    root.mkdir()
    files, dirs, _ = snap
    for rel in sorted(dirs):
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (root / rel).write_bytes(data)


# ---------------------------------------------------------------- recordings that know their content

ATTACHMENT = "first_timeline.0.first_timeline.trace.json.gz"


def corrupt(folder, case, outside):
    """Damage a copy of 00_start_here's recordings; return the file a message must name."""
    trace = folder / ATTACHMENT
    if case == "flipped byte":
        data = bytearray(trace.read_bytes())
        for i in range(len(data) // 2, len(data) // 2 + 16):
            data[i] ^= 0xFF
        trace.write_bytes(bytes(data))
        return trace
    if case == "samples x10":
        path = folder / "first_bandwidth_curve.json"
        text = path.read_text()
        record = json.loads(text)
        found = []

        def times_ten(value):
            if isinstance(value, dict):
                if "samples_s" in value:
                    value["samples_s"] = [s * 10 for s in value["samples_s"]]
                    found.append(1)
                for v in value.values():
                    times_ten(v)
            elif isinstance(value, list):
                for v in value:
                    times_ten(v)

        times_ten(record["result"])
        assert found
        from helpers import codec

        path.write_text(codec.dumps(record))  # valid JSON, a valid recording, other numbers
        return path
    if case == "missing attachment":
        trace.unlink()
        return trace
    if case == "linked attachment":
        outside.mkdir(exist_ok=True)
        shutil.copyfile(trace, outside / trace.name)
        trace.unlink()
        trace.symlink_to(outside / trace.name)
        return trace
    raise AssertionError(case)


CASES = ["flipped byte", "samples x10", "missing attachment", "linked attachment"]


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_recording_is_named_when_loaded(tmp_path, case):
    folder = real_copy(tmp_path / "results")
    named = corrupt(folder, case, tmp_path / "elsewhere")
    recording = folder / (
        "first_bandwidth_curve.json" if case == "samples x10" else "first_timeline.json"
    )
    with pytest.raises(records.RecordingError, match="git checkout") as info:
        records.load(recording)
    assert str(named) in str(info.value)
    header = records.read_header(recording)  # the header alone still reads (for listings)
    assert header["experiment"] == recording.stem


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_recording_is_caught_by_the_guard(tmp_path, case):
    folder = real_copy(tmp_path / "results")
    named = corrupt(folder, case, tmp_path / "elsewhere")
    problems = records.check_recordings(
        [ROOT / "notebooks" / "00_start_here.ipynb"], tmp_path / "results"
    )
    assert problems and any(str(named) in p.text for p in problems), problems
    assert problems == [p for p in problems if p.machine == REAL]


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_recording_is_refused_by_unpack(tmp_path, root, case):
    folder = real_copy(tmp_path / "results")
    named = corrupt(folder, case, tmp_path / "elsewhere")
    archive = write_archive(
        tmp_path / "archive",
        folder_entries(folder.parent) + [entry(f"gpu-executed/{REAL}/logs/x.log", b"ok")],
        machine=REAL,
    )
    expected = "symlink" if case == "linked attachment" else named.name
    message = refused(archive, root, expected)
    assert case != "linked attachment" or named.name in message


def test_an_archive_without_checksums_is_refused_naming_the_file(tmp_path, root):
    folder = real_copy(tmp_path / "results")
    (folder.parent / records.CHECKSUMS).unlink()
    archive = write_archive(tmp_path / "archive", folder_entries(folder.parent), machine=REAL)
    refused(archive, root, records.CHECKSUMS)


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_recording_fails_the_truth_check_before_any_replay(tmp_path, case):
    folder = real_copy(tmp_path / "results")
    named = corrupt(folder, case, tmp_path / "elsewhere")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "replay_all.py"), "--notebook", "00_start_here"],
        capture_output=True,
        text=True,
        env={**os.environ, "COURSE_RESULTS_DIR": str(tmp_path / "results")},
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nothing was replayed" in proc.stdout and str(named) in proc.stdout, proc.stdout
