"""Which machines have recordings, and replacing a machine's folders as one step.

``replace_folders``, under a lock, copies each new folder beside its target, writes a journal
naming every rename, renames (old aside, new in), and deletes the journal, which is the commit.
Until then any interruption is rolled back: by the unpack itself, or, if it was killed, by
``machine_folders`` (every reader's listing) or the next unpack. Names starting with '.' are
never machines: they are an unpack's staging and old copies and its journal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from .. import config

JOURNAL = ".unpack-journal.json"
# What an unpack (this one or an older version of it) leaves beside a target while it works.
LEFTOVER = re.compile(r"\.(incoming|old)-.+-[0-9a-f]{8}|\.unpack-journal\.json\.tmp")


class Interrupted(Exception):
    """An unpack that failed or was interrupted while replacing folders; the message says what
    state it left. ``committed``: the new folders were in place (only old copies were left)."""

    def __init__(self, message: str, committed: bool) -> None:
        super().__init__(message)
        self.committed = committed


@contextlib.contextmanager
def _locked(results: Path) -> Iterator[None]:
    """Hold an exclusive lock on the results folder itself (no lock file is left behind)."""
    fd = os.open(results, os.O_RDONLY)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        except ImportError:  # no advisory locks (Windows): readers still roll back leftovers
            pass
        yield
    finally:
        os.close(fd)


def _build_folder(results: Path) -> Path:
    return results.parent / "build" / "gpu-executed"


def _rollback(results: Path) -> str:
    """Undo the swaps the journal names, delete its staging copies, the folders it created and
    the journal itself; return what was done, in words ("" when there was no journal)."""
    journal = results / JOURNAL
    if not journal.exists():
        return ""
    plan = json.loads(journal.read_text())
    base = results.parent
    for swap in reversed(plan["swaps"]):
        target, old = base / swap["target"], base / swap["old"]
        staging = base / swap["staging"] if swap["staging"] else None
        if staging is not None and not staging.exists() and target.exists():
            os.rename(target, staging)  # the new copy was in place: back to staging
        if old.exists() and not target.exists():
            os.rename(old, target)
        if staging is not None and staging.exists():
            shutil.rmtree(staging)
    for created in reversed(plan["created"]):
        with contextlib.suppress(OSError):  # not empty: something else was put there meanwhile
            (base / created).rmdir()
    os.unlink(journal)
    return f"rolled back an interrupted unpack of {', '.join(s['target'] for s in plan['swaps'])}"


def _remove_leftovers(results: Path) -> list[str]:
    """Delete staging and old copies no journal names (an interrupted copy, an interrupted
    delete after the commit, an older unpack's); return their names."""
    removed = []
    for folder in (results, _build_folder(results)):
        if not folder.is_dir():
            continue
        for item in sorted(folder.iterdir()):
            if LEFTOVER.fullmatch(item.name):
                if item.is_dir() and not item.is_symlink():
                    shutil.rmtree(item)
                else:
                    os.unlink(item)
                removed.append(str(item))
    return removed


def recover(results: Path) -> str:
    """Roll back an interrupted unpack and delete leftovers (the caller holds the lock); return
    what was done, in words ("" when nothing was left)."""
    done = _rollback(results)
    removed = _remove_leftovers(results)
    if removed:
        done += ("; " if done else "") + f"deleted leftovers {', '.join(removed)}"
    return done


def _check_layout(root: Path) -> bool:
    """Whether ``root`` exists; a results folder one level too high or too low is refused, as is
    a missing one that ``COURSE_RESULTS_DIR`` names (each a ``ValueError`` naming the variable)."""
    named = os.environ.get(config.RESULTS_ENV)
    source = f"{config.RESULTS_ENV}={named}" if named else f"the results folder {root}"
    if not root.is_dir():
        if not named or root != config.results_dir():
            return False
        raise ValueError(
            f"{source} is not a folder: set {config.RESULTS_ENV} to the folder that holds "
            f"<machine>/<notebook>/<experiment>.json (a clone's results/), or unset it"
        )
    if (root / "results").is_dir() and (root / "results" / "index.jsonl").exists():
        raise ValueError(
            f"{source} is one level too high: it holds results/; set "
            f"{config.RESULTS_ENV}={root / 'results'}"
        )
    if (root / "run_times.json").exists() or any(root.glob("[0-9][0-9]_*/*.json")):
        raise ValueError(
            f"{source} is one level too low: it is one machine's folder; set "
            f"{config.RESULTS_ENV}={root.parent}"
        )
    return True


def machine_folders(root: Path | None = None) -> list[Path]:
    """``results/<machine>/`` of every machine with recordings, sorted by name, after rolling
    back an interrupted unpack (messages go to stderr)."""
    root = root or config.results_dir()
    if not _check_layout(root):
        return []
    with _locked(root):
        with contextlib.suppress(OSError):  # a read-only copy (an installed course) has none
            done = recover(root)
            if done:
                print(f"results: {done}", file=sys.stderr)
        return sorted(
            p
            for p in root.iterdir()
            if not p.name.startswith(".") and p.is_dir() and any(p.glob("*/*.json"))
        )


def _make_parents(folder: Path, created: list[Path]) -> None:
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
        created.append(path)


def replace_folders(results: Path, sources: dict[Path, Path | None]) -> None:
    """Replace each target folder (a key, under ``results.parent``) with a copy of its source
    (None: remove it), all or none; any exception, even KeyboardInterrupt, raises ``Interrupted``
    saying what state it left."""
    results.mkdir(parents=True, exist_ok=True)
    base = results.parent
    with _locked(results):
        done = recover(results)
        if done:
            print(f"results: {done}", file=sys.stderr)
        created: list[Path] = []
        swaps = []
        try:
            for target, source in sources.items():
                staging = None
                _make_parents(target.parent, created)
                if source is not None:
                    staging = target.with_name(f".incoming-{target.name}-{secrets.token_hex(4)}")
                    shutil.copytree(source, staging, symlinks=True)
                old = target.with_name(f".old-{target.name}-{secrets.token_hex(4)}")
                swaps.append((staging, target, old))
            plan = {
                "created": [str(p.relative_to(base)) for p in created],
                "swaps": [
                    {
                        "staging": str(s.relative_to(base)) if s else None,
                        "target": str(t.relative_to(base)),
                        "old": str(o.relative_to(base)),
                    }
                    for s, t, o in swaps
                ],
            }
            tmp = results / f"{JOURNAL}.tmp"
            tmp.write_text(json.dumps(plan))
            os.replace(tmp, results / JOURNAL)  # from here on, a kill is rolled back
            for staging, target, old in swaps:
                if target.exists():
                    os.rename(target, old)
                if staging is not None:
                    os.rename(staging, target)
            os.unlink(results / JOURNAL)  # the commit
        except BaseException as err:
            message, committed = _undo(results, swaps, list(sources), created, err)
            raise Interrupted(message, committed) from err
        try:
            for _, _, old in swaps:  # committed: the old copies are leftovers now
                shutil.rmtree(old, ignore_errors=True)
        except BaseException as err:
            raise Interrupted(
                f"{_what(err)} after the new folders were in place; the old copies left beside "
                f"them are deleted by the next command that lists recorded machines",
                True,
            ) from err


def _what(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _undo(
    results: Path,
    swaps: list[tuple[Path | None, Path, Path]],
    targets: list[Path],
    created: list[Path],
    err: BaseException,
) -> tuple[str, bool]:
    """Roll back after ``err`` stopped ``replace_folders``: the sentence that says the state it
    left, and whether the new folders are in place."""
    what = _what(err)
    named = " and ".join(str(t.relative_to(results.parent)) for t in targets)
    committed = (
        len(swaps) == len(targets)
        and not (results / JOURNAL).exists()
        and all(
            target.exists() != (staging is None) and not (staging and staging.exists())
            for staging, target, _ in swaps
        )
    )
    try:
        if committed:  # interrupted just after the journal was deleted: the new copies stay
            _remove_leftovers(results)
            return f"{what} after the new folders were in place: {named} are the new ones", True
        if not (results / JOURNAL).exists():  # interrupted before the first rename
            _remove_leftovers(results)  # the staging copies, whole or not
            for path in reversed(created):
                with contextlib.suppress(OSError):
                    path.rmdir()
        else:
            recover(results)
    except BaseException as again:
        return (
            f"{what}; rolling back failed too ({_what(again)}): the next `make unpack` or "
            f"command that lists recorded machines rolls it back (results/{JOURNAL})"
        ), False
    return f"{what}; rolled back: {named} are as they were", False
