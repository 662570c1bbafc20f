"""``datamove``'s arguments (sizes, tolerances, ops, whole numbers) and its one-line errors."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

MiB, GiB = 2**20, 2**30

# A number and a unit: "KiB" binary, "KB" decimal, and "K" alone binary as nccl-tests reads it
# (-e 128M is 128 MiB).
_SIZE = re.compile(r"(\d+)\s*(?:([kmgt])(i?b)?|b)?", re.IGNORECASE)
SIZE_HELP = (
    "bytes (4096) or with a unit (4KiB, 64MiB, 1GiB, nccl-tests' 128M = 128 MiB; 1GB = 10^9)"
)


class UsageError(Exception):
    """A request this machine or these arguments cannot serve: one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (no usage block) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_size(text: str) -> int:
    """``"4096"``, ``"4KiB"``, ``"64MiB"``, ``"128M"`` (nccl-tests: MiB), ``"1GB"`` -> bytes."""
    match = _SIZE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a size: pass {SIZE_HELP}")
    number, prefix, suffix = match.groups()
    power = "kmgt".index(prefix.lower()) + 1 if prefix else 0
    nbytes = int(number) * (1000 if (suffix or "").lower() == "b" else 1024) ** power
    if nbytes <= 0:
        raise ValueError(f"{text!r} is not a positive size: pass {SIZE_HELP}")
    return nbytes


def parse_sizes(text: str) -> list[int]:
    """Bytes from ``"4KiB:1GiB"`` (x4 steps, as notebook 01), ``"4KiB:1GiB:2"``, ``"4KiB,1MiB"``."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text!r} is not a list of sizes: pass e.g. 4KiB:1GiB or 4KiB,64MiB")
    if ":" not in text:
        return [parse_size(part) for part in text.split(",")]
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(
            f"{text!r}: a range is SMALLEST:LARGEST or SMALLEST:LARGEST:FACTOR, e.g. 4KiB:1GiB"
        )
    factor = parts[2].strip() if len(parts) == 3 else "4"
    if not factor.isdigit() or int(factor) < 2:
        raise ValueError(f"{text!r}: the step factor is a whole number >= 2, e.g. 4KiB:1GiB:2")
    return size_range(parse_size(parts[0]), parse_size(parts[1]), factor=int(factor), text=text)


def size_range(
    smallest: int,
    largest: int,
    *,
    factor: int | None = None,
    step: int | None = None,
    text: str = "",
) -> list[int]:
    """nccl-tests' sizes in bytes, times ``factor`` (-f) or plus ``step`` bytes (-i) each time."""
    from .. import timing  # here: importing them imports torch

    where = f"{text!r}: " if text else ""
    if largest < smallest:
        raise ValueError(
            f"{where}the largest size ({largest} B) is below the smallest ({smallest} B): "
            f"pass the smallest first, e.g. -b 8 -e 128M"
        )
    if factor is not None:
        if factor < 2:
            raise ValueError(f"{where}the step factor is a whole number >= 2, e.g. -f 2")
        return timing.sizes_pow2(smallest, largest, factor)
    if step is None or step < 1:
        raise ValueError(f"{where}pass a step factor (-f 2) or a step in bytes (-i 1M)")
    sizes = range(smallest, largest + 1, step)  # counted before it is listed: -i 1 -e 1G is 10^9
    if len(sizes) > 1000:
        raise ValueError(
            f"{where}{len(sizes)} sizes is more than a sweep needs: pass a bigger step or -f 2"
        )
    return list(sizes)


def parse_tolerance(text: str) -> float:
    """``"5%"`` or ``"0.05"`` -> 0.05: how far below its baseline a figure may fall."""
    text = text.strip() if isinstance(text, str) else ""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise ValueError(
            f"{text!r} is not a tolerance: pass a percentage below 100, e.g. 5% (or 0.05)"
        )
    return value


def parse_ops(text: str) -> list[str]:
    """``"all_reduce,all_gather"`` or ``"all"`` -> names from ``distributed.COLLECTIVE_OPS``."""
    from .. import distributed  # here: importing them imports torch

    if text.strip() == "all":
        return list(distributed.COLLECTIVE_OPS)
    ops = [op.strip() for op in text.split(",") if op.strip()]
    unknown = [op for op in ops if op not in distributed.COLLECTIVE_OPS]
    if unknown or not ops:
        raise ValueError(
            f"unknown collective {', '.join(unknown) or repr(text)}: pass 'all' or names from "
            f"{','.join(distributed.COLLECTIVE_OPS)}"
        )
    return ops


def whole(least: int) -> Callable[[str], int]:
    """A parser of whole numbers >= ``least`` (ranks, calls, samples) with a ValueError that says so."""

    def parse_whole(text: str) -> int:
        if not text.strip().isdigit() or int(text) < least:
            raise ValueError(f"{text!r} is not a whole number >= {least}")
        return int(text)

    return parse_whole


def one_of(*choices: str, why: str) -> Callable[[str], str]:
    """A parser that accepts only ``choices`` (nccl-tests' -o sum, -d float), saying ``why`` otherwise."""

    def parse_choice(text: str) -> str:
        if text.strip().lower() not in choices:
            raise ValueError(f"{text!r}: {why}; pass {' or '.join(choices)}")
        return text.strip().lower()

    return parse_choice


def argtype(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` for argparse: its ValueError becomes argparse's one-line error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = parse.__name__.removeprefix("parse_")
    return convert


def need_gpus(n: int, why: str = "") -> None:
    """Raise ``UsageError`` unless this machine has ``n`` CUDA GPUs."""
    from .. import hardware  # here: importing them imports torch

    have = hardware.gpu_count()
    if have < n:
        raise UsageError(
            f"needs {n} CUDA GPU(s){why}, this machine has {have}; run it on a GPU machine "
            f"(the notebooks replay recordings elsewhere)"
        )


def parse_ranks(text: str) -> int:
    """Ranks a launch can start: a whole number from 1 to ``distributed.MAX_WORLD_SIZE``."""
    from .. import distributed  # here: importing them imports torch

    ranks = whole(1)(text)
    if ranks > distributed.MAX_WORLD_SIZE:
        raise ValueError(
            f"{text!r} ranks is more than a launch starts on one machine: pass at most "
            f"{distributed.MAX_WORLD_SIZE} (a demonstration needs 2 to 8)"
        )
    return ranks


def parse_seconds(text: str) -> float:
    """A timeout in seconds: positive, finite, at most ``distributed.MAX_TIMEOUT_S`` (a day)."""
    from .. import distributed  # here: importing them imports torch

    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= distributed.MAX_TIMEOUT_S):
        raise ValueError(
            f"{text!r} is not a timeout: pass the seconds you would wait, a positive number up "
            f"to {distributed.MAX_TIMEOUT_S:g}, e.g. 60"
        )
    return seconds


def parse_output_file(text: str) -> Path:
    """A file the command writes at the end, checked writable before any measurement starts."""
    path = Path(text).expanduser()
    folder = path.parent
    if not text.strip() or path.is_dir():
        raise ValueError(f"{text!r} is a folder: pass a file name, e.g. {path / 'results.json'}")
    if not folder.is_dir():
        raise ValueError(f"{text!r}: the folder {folder} does not exist: create it or pass another")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{text!r} cannot be written here: pass a file in a folder you can write")
    return path
