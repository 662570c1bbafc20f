"""Choosing the world size and backend, and checking ``launch``'s arguments before any process starts."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cloudpickle
import torch.distributed as dist

from .. import checks, hardware
from .bandwidth import check_positive
from .launch_settings import BACKENDS, LAUNCHER_ENV, MAX_TIMEOUT_S, MAX_WORLD_SIZE, RANK_ENV


def default_world_size() -> int:
    """One rank per GPU when there are at least two GPUs, else 2 (gloo ranks on the CPU)."""
    gpus = hardware.gpu_count()
    return gpus if gpus >= 2 else 2


def choose_backend(world_size: int) -> str:
    """'nccl' when this machine has a GPU for every rank (and PyTorch has NCCL), else 'gloo'."""
    if hardware.gpu_count() >= world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def check_launch(
    worker: Any,
    world_size: Any,
    backend: Any,
    timeout_s: Any,
    startup_timeout_s: Any,
    args: Any,
    kwargs: Any,
    env: Any,
) -> tuple[int, str]:
    """The world size and backend to use; ValueError / TypeError saying what to pass."""
    _check_worker(worker, args, kwargs)
    world_size, backend = _check_ranks(world_size, backend)
    for value, name, what in (
        (timeout_s, "timeout_s", "seconds the workers may run"),
        (startup_timeout_s, "startup_timeout_s", "seconds to start the ranks and join the group"),
    ):
        if check_positive(value, name, what) > MAX_TIMEOUT_S:
            raise ValueError(
                f"{name}={value!r} s is longer than a demonstration may hold the machine "
                f"(at most {MAX_TIMEOUT_S:g} s, a day); pass the seconds you would wait, e.g. 60"
            )
    _check_env(env)
    return world_size, backend


def _check_worker(worker: Any, args: Any, kwargs: Any) -> None:
    if not callable(worker):
        raise TypeError(
            f"worker must be a function worker(rank, world_size, ...), got {type(worker).__name__}"
        )
    if isinstance(args, str) or not isinstance(args, (tuple, list)):
        raise TypeError(
            f"args must be a tuple of extra positional arguments for the worker, got {type(args).__name__}"
        )
    if kwargs is not None and not (
        isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)
    ):
        raise TypeError(
            f"kwargs must be a dict of keyword arguments for the worker (names as strings), "
            f"got {kwargs!r:.80}"
        )
    try:
        signature = inspect.signature(worker)
    except (TypeError, ValueError):
        return  # a built-in without a signature: the ranks will say if the call is wrong
    try:
        signature.bind(0, 1, *args, **(kwargs or {}))
    except TypeError as err:
        raise TypeError(
            f"worker{signature} cannot be called as worker(rank, world_size, *args, **kwargs) with "
            f"{len(args)} args and kwargs {sorted(kwargs or {})} ({err}): it must take the rank and "
            f"the world size first, then what args and kwargs pass"
        ) from None


def _check_ranks(world_size: Any, backend: Any) -> tuple[int, str]:
    """The number of ranks and the backend, defaults filled in."""
    if world_size is None:
        world_size = default_world_size()
    world_size = checks.check_count(world_size, "world_size", 1, "ranks")
    if world_size > MAX_WORLD_SIZE:
        raise ValueError(
            f"world_size={world_size} would start {world_size} processes on this machine; "
            f"pass at most {MAX_WORLD_SIZE} (a demonstration needs 2 to 8)"
        )
    if backend is None:
        backend = choose_backend(world_size)
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be 'nccl' (GPUs), 'gloo' (CPU) or None to choose, got {backend!r}"
        )
    if backend == "nccl" and not dist.is_nccl_available():
        raise ValueError(
            "backend='nccl' needs a PyTorch build with NCCL (a CUDA build); pass backend='gloo'"
        )
    if backend == "nccl" and hardware.gpu_count() < world_size:
        raise ValueError(
            f"backend='nccl' needs one GPU per rank: world_size={world_size} but this machine has "
            f"{hardware.gpu_count()} GPU(s); pass backend='gloo' (CPU ranks) or fewer ranks"
        )
    return world_size, backend


def _check_env(env: Any) -> None:
    if env is None:
        return
    if not (
        isinstance(env, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise TypeError(
            "env must be a dict of environment variables, names and values as strings, "
            "e.g. {'NCCL_DEBUG': 'INFO'}"
        )
    fixed = sorted(set(env) & (set(LAUNCHER_ENV) | set(RANK_ENV)))
    if fixed:
        raise ValueError(
            f"env may not set {fixed}: the launcher sets them for every rank (LAUNCHER_ENV, and "
            f"RANK_ENV, which the shared GPU machines require); pass other variables, "
            f"e.g. {{'NCCL_DEBUG': 'INFO'}}"
        )


def worker_payload(
    worker: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any] | None
) -> bytes:
    """The worker and its arguments pickled for the ranks; TypeError if they cannot travel."""
    try:
        return cloudpickle.dumps((worker, tuple(args), dict(kwargs or {})))
    except Exception as err:  # noqa: BLE001 - pickling raises many kinds; all mean the same here
        raise TypeError(
            f"the worker and its args / kwargs travel to the ranks by pickling, which failed: {err}; "
            f"pass plain values (numbers, strings, lists, dicts, tensors), not locks, open files "
            f"or generators"
        ) from err
