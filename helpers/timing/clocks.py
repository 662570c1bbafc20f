"""The clocks ``cuda_events``, ``host_clock`` and ``benchmark``, and the GPU hold (``hold_stream``)."""

from __future__ import annotations

import math
import numbers
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from .. import checks
from .measures import Timing

MOST_CALLS_PER_SAMPLE = 1000  # the most calls per sample that target_s chooses
LONGEST_TARGET_S = 10.0  # the longest sample target_s may ask for, in seconds
AUTO_HOLD_FLOOR_US = 100.0  # hold_us="auto": microseconds added to twice the queueing time


def _check_counts(fn: Any, repeats: int, warmup: int, calls: int | None) -> None:
    if not callable(fn):
        raise TypeError(
            f"pass the work to time as a function of no arguments (e.g. lambda: dst.copy_(src)), "
            f"got {type(fn).__name__} {fn!r:.60}"
        )
    checks.check_count(repeats, "repeats", 1)
    checks.check_count(warmup, "warmup", 0)
    if calls is not None:
        checks.check_count(calls, "calls_per_sample", 1)


def _check_target(calls_per_sample: int | None, target_s: float | None) -> None:
    if target_s is None:
        return
    if calls_per_sample is not None:
        raise ValueError(
            f"pass calls_per_sample= or target_s=, not both (got {calls_per_sample!r} and "
            f"{target_s!r}): target_s chooses the number of calls per sample itself"
        )
    if not checks.is_number(target_s):
        raise TypeError(
            f"target_s is the seconds one sample should last, e.g. 2e-3; got {target_s!r}"
        )
    if not (math.isfinite(target_s) and 0 < target_s <= LONGEST_TARGET_S):
        raise ValueError(
            f"target_s is the seconds one sample should last, above 0 and at most "
            f"{LONGEST_TARGET_S:g} (e.g. 2e-3); got {target_s!r}"
        )


def _sized(
    target_s: float | None, calls_per_sample: int | None, time_one_call: Callable[[], float]
) -> tuple[int, dict[str, float]]:
    """Calls per sample (as given, else 1, else enough for ``target_s`` judged from one call), and
    what ``Timing.extra`` records of how they were chosen."""
    if target_s is None:
        return (1 if calls_per_sample is None else calls_per_sample), {}
    one_call_s = time_one_call()
    calls = calls_for(one_call_s, target_s, most=MOST_CALLS_PER_SAMPLE)
    return calls, {"target_s": float(target_s), "one_call_s": one_call_s}


def _warn_if_noisy(result: Timing) -> Timing:
    if result.is_noisy():
        warnings.warn(
            f"{result.label or 'timing'}: samples spread by {result.spread:.0%} of the median "
            f"(IQR); take more samples or look for other work on the machine",
            stacklevel=3,
        )
    return result


_SLEEP_CYCLES_PER_US: dict[int, float] = {}


def _cuda_index(device: Any, what: str) -> int:
    """The index of the CUDA device ``device`` names (None: the current one)."""
    if not torch.cuda.is_available():
        raise ValueError(
            f"{what} holds a CUDA stream and needs a CUDA GPU; on a machine without one there is "
            f"nothing to hold"
        )
    if device is None:
        return torch.cuda.current_device()
    if not (checks.is_whole(device) or isinstance(device, (str, torch.device))):
        raise TypeError(
            f"{what}: device is a CUDA device index, 'cuda:N' or a torch.device (or None for the "
            f"current one), got {device!r}"
        )
    if isinstance(device, numbers.Integral):
        index = int(device)
    else:
        try:
            as_device = torch.device(device)
        except RuntimeError as err:
            raise ValueError(
                f"{what}: {device!r} is not a device; pass 'cuda:N' or a GPU index"
            ) from err
        if as_device.type != "cuda":
            raise ValueError(
                f"{what} holds a CUDA stream, and {device!r} is not a CUDA device; pass a GPU "
                f"index or 'cuda:N'"
            )
        index = torch.cuda.current_device() if as_device.index is None else as_device.index
    if not 0 <= index < torch.cuda.device_count():
        raise ValueError(
            f"{what}: device is a CUDA device index 0-{torch.cuda.device_count() - 1} (or None for "
            f"the current one), got {device!r}"
        )
    return index


def load_spin_kernel(device: int | str | torch.device | None = None) -> None:
    """Load ``torch.cuda._sleep``'s kernel on ``device`` (its first call costs 0.3-0.47 s on H200s)."""
    index = _cuda_index(device, "load_spin_kernel")
    with torch.cuda.device(index):
        torch.cuda._sleep(1000)


def sleep_cycles_per_us(device: int | str | torch.device | None = None) -> float:
    """``torch.cuda._sleep`` cycles per microsecond on ``device``, measured once per GPU."""
    index = _cuda_index(device, "sleep_cycles_per_us")
    if index not in _SLEEP_CYCLES_PER_US:
        load_spin_kernel(index)
        with torch.cuda.device(index):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            cycles = 20_000_000
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            _SLEEP_CYCLES_PER_US[index] = cycles / (start.elapsed_time(end) * 1e3)
    return _SLEEP_CYCLES_PER_US[index]


def hold_stream(microseconds: float, device: int | str | torch.device | None = None) -> None:
    """Keep ``device``'s current stream busy for about ``microseconds`` with a spin kernel, so
    that work queued after it is not timed with its launch cost (nvbandwidth's method)."""
    if not checks.is_number(microseconds):
        raise TypeError(
            f"microseconds is how long to hold the stream, a number >= 0, got {microseconds!r}"
        )
    if not (math.isfinite(microseconds) and microseconds >= 0):
        raise ValueError(f"microseconds must be a finite number >= 0, got {microseconds!r}")
    index = _cuda_index(device, "hold_stream")
    cycles = int(microseconds * sleep_cycles_per_us(index))
    with torch.cuda.device(index):
        torch.cuda._sleep(cycles)


def cuda_events(
    fn: Callable[[], Any],
    *,
    repeats: int = 10,
    warmup: int = 3,
    calls_per_sample: int | None = None,
    target_s: float | None = None,
    nbytes: int | None = None,
    hold_us: float | str = 0.0,
    label: str = "",
) -> Timing:
    """Time ``fn`` on the current CUDA stream with events around a batch of calls, in seconds per call.

    ``calls_per_sample`` (default 1), or ``target_s``: as many calls (at most
    ``MOST_CALLS_PER_SAMPLE``) as make a sample last that long. ``hold_us`` > 0 holds the stream
    with a spin kernel first, so the calls are queued before the start event and their launch
    cost stays out; "auto" sizes the hold from the queueing time and retakes, with the hold
    doubled, a sample whose queueing outlasted it. Work on other streams must join this one.
    """
    _check_counts(fn, repeats, warmup, calls_per_sample)
    _check_target(calls_per_sample, target_s)
    auto_hold = _check_hold(hold_us)
    if not torch.cuda.is_available():
        raise ValueError("cuda_events needs a CUDA GPU; on a machine without one use host_clock")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    one_call = (lambda: _events_queued_call_s(fn)) if auto_hold else (lambda: _events_s(fn))
    calls_per_sample, sizing = _sized(target_s, calls_per_sample, one_call)
    hold = _auto_hold_us(fn, calls_per_sample) if auto_hold else float(hold_us)
    samples: list[float] = []
    enqueue_us: list[float] = []
    retakes = 0
    while len(samples) < repeats:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hold:
            hold_stream(hold)
        start.record()
        queued_at = time.perf_counter()
        for _ in range(calls_per_sample):
            fn()
        queued = (time.perf_counter() - queued_at) * 1e6
        end.record()
        end.synchronize()
        if auto_hold and queued > hold and retakes < repeats:
            hold, retakes = hold * 2, retakes + 1  # launch cost leaked in: take it again
            continue
        enqueue_us.append(queued)
        samples.append(start.elapsed_time(end) / 1e3 / calls_per_sample)
    extra = {"hold_us": hold, "enqueue_us": statistics.median(enqueue_us)} if hold else {}
    if auto_hold:
        extra["hold_auto"] = 1.0
    result = Timing(
        samples, "cuda events", nbytes, label, calls_per_sample, warmup, {**extra, **sizing}
    )
    if hold and extra["enqueue_us"] > hold:
        warnings.warn(
            f"{label or 'timing'}: queueing {calls_per_sample} calls took {extra['enqueue_us']:.0f} us, "
            f"longer than the {hold:.0f} us hold, so launch cost leaked into the time; "
            f"raise hold_us or lower calls_per_sample",
            stacklevel=2,
        )
    return _warn_if_noisy(result)


def _check_hold(hold_us: Any) -> bool:
    """Whether ``hold_us`` asks for an automatic hold; ValueError unless a number >= 0 or "auto"."""
    if hold_us == "auto":
        return True
    if not checks.is_finite_at_least(hold_us, 0):
        raise ValueError(
            f"hold_us is how long to hold the stream before each sample, in microseconds (a number "
            f'>= 0), or "auto" to size it from the calls; got {hold_us!r}'
        )
    return False


def _auto_hold_us(fn: Callable[[], Any], calls: int) -> float:
    """``hold_us="auto"``: twice the microseconds the host takes to queue ``calls`` calls of ``fn``,
    plus ``AUTO_HOLD_FLOOR_US`` (the GPU is waited for after)."""
    queued_at = time.perf_counter()
    for _ in range(calls):
        fn()
    queued = (time.perf_counter() - queued_at) * 1e6
    torch.cuda.synchronize()
    return queued * 2 + AUTO_HOLD_FLOOR_US


def _events_queued_call_s(fn: Callable[[], Any], calls: int = 10) -> float:
    """Seconds per call of ``fn``, from ``calls`` calls queued behind a hold: how ``hold_us="auto"``
    sizes a sample without the launch cost of one launched call."""
    return _events_s(fn, calls, _auto_hold_us(fn, calls))


def _events_s(fn: Callable[[], Any], calls: int = 1, hold_us: float = 0.0) -> float:
    """Seconds per call of ``calls`` calls of ``fn`` between two CUDA events, after a hold."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if hold_us:
        hold_stream(hold_us)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def synchronize_all() -> None:
    """Wait for every GPU here to finish its queued work."""
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            torch.cuda.synchronize(index)


def host_clock(
    fn: Callable[[], Any],
    *,
    repeats: int = 10,
    warmup: int = 3,
    calls_per_sample: int | None = None,
    target_s: float | None = None,
    nbytes: int | None = None,
    label: str = "",
) -> Timing:
    """Time ``fn`` with ``time.perf_counter`` between synchronisations of every GPU, in seconds per
    call (launch costs included); ``calls_per_sample`` or ``target_s`` as for ``cuda_events``."""
    _check_counts(fn, repeats, warmup, calls_per_sample)
    _check_target(calls_per_sample, target_s)
    for _ in range(warmup):
        fn()
    calls_per_sample, sizing = _sized(target_s, calls_per_sample, lambda: _host_seconds(fn, 1))
    samples = [_host_seconds(fn, calls_per_sample) / calls_per_sample for _ in range(repeats)]
    result = Timing(
        samples, "synchronised host clock", nbytes, label, calls_per_sample, warmup, sizing
    )
    return _warn_if_noisy(result)


def _host_seconds(fn: Callable[[], Any], calls: int) -> float:
    """Seconds of ``calls`` calls of ``fn``, every GPU synchronised before and after."""
    synchronize_all()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize_all()
    return time.perf_counter() - start


def benchmark(
    fn: Callable[[], Any],
    *,
    min_run_time: float = 1.0,
    max_run_time: float = 20.0,
    nbytes: int | None = None,
    label: str = "",
) -> Timing:
    """Time ``fn`` with ``torch.utils.benchmark.Timer(...).adaptive_autorange``, as the tutorial
    does; each sample is one block's mean per call."""
    _check_counts(fn, 1, 0, 1)
    if not (checks.is_number(min_run_time) and checks.is_number(max_run_time)):
        raise TypeError(
            f"min_run_time and max_run_time are seconds, got {min_run_time!r} and {max_run_time!r}"
        )
    if min_run_time <= 0 or max_run_time < min_run_time:
        raise ValueError("need 0 < min_run_time <= max_run_time (seconds)")
    # imported here, not with the module: its import prints "No CUDA runtime is found" (in red, in
    # a notebook) wherever a CUDA build of torch runs without a driver, as on a CPU-only runtime
    import torch.utils.benchmark as torch_benchmark

    timer = torch_benchmark.Timer(stmt="fn()", globals={"fn": fn}, label=label)
    measurement = timer.adaptive_autorange(min_run_time=min_run_time, max_run_time=max_run_time)
    times, calls = list(measurement.times), int(measurement.number_per_run)
    return _warn_if_noisy(Timing(times, "torch.utils.benchmark", nbytes, label, calls))


def calls_for(seconds_per_call: float, target_s: float = 2e-3, most: int = 1000) -> int:
    """How many calls make a sample last about ``target_s`` seconds."""
    for name, value in (("seconds_per_call", seconds_per_call), ("target_s", target_s)):
        if not checks.is_finite_at_least(value, 0):
            raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    most = checks.check_count(most, "most", 1)
    if seconds_per_call == 0:
        return most
    return max(1, min(most, round(target_s / seconds_per_call)))


def verify_copy(expected: torch.Tensor, actual: torch.Tensor, what: str = "copy") -> None:
    """``AssertionError`` unless ``actual`` holds exactly ``expected``'s contents."""
    if not isinstance(expected, torch.Tensor) or not isinstance(actual, torch.Tensor):
        raise TypeError(
            f"verify_copy compares two tensors (the source, then the copy), got "
            f"{type(expected).__name__} and {type(actual).__name__}"
        )
    if expected.shape != actual.shape:
        raise AssertionError(
            f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
        )
    if not torch.equal(expected.cpu(), actual.cpu()):
        raise AssertionError(f"{what}: contents differ from the source")
