"""What notebook 05 shows of devices and streams: what the current device decides (section 2)
and an event of one GPU holding back a stream of another (section 8). The blog post's experiment
(``A.to("cuda:1")`` beside ``B * B * B * B`` on the receiver, under 8 combinations of streams
and ``non_blocking``, section 7) is in ``peer_combinations``.

Every function takes the notebook's runs (``records.Run``, live or replayed) and measures
nothing. The copies' bandwidth is in ``peer``, the claims table in ``peer_claims``. Tested on
every recorded machine in tests/test_lesson_05.py.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from IPython.display import display

from .. import claims, plotting, tables, trace
from ..records import Run
from .peer_combinations import (
    NOTEBOOK,
    stream_labels,
)

TOLERANCE_US = 10.0  # allowance for the two GPUs' clocks in a trace not agreeing exactly


# ---------------------------------------------------------------- 2. the current device


def _states(current: Run) -> dict[str, dict]:
    return {s["where"]: s for s in current.value["states"]}


def _follows_current_device(state: dict) -> bool:
    """Whether device="cuda", the current stream and .to("cuda") all went to the current device."""
    here = f"cuda:{state['current_device']}"
    return (
        state["empty_on"] == here
        and state["current_stream_on"] == here
        and state["to_cuda_on"] == here
    )


def _set_device_decides(states: dict[str, dict]) -> bool:
    """The streams article's claim, computed: after torch.cuda.set_device(1), cuda:1 is current and
    device="cuda" and the current stream follow it; after set_device(0), cuda:0 again."""
    after_1, after_0 = (
        states["after torch.cuda.set_device(1)"],
        states["after torch.cuda.set_device(0)"],
    )
    return (
        after_1["current_device"] == 1
        and _follows_current_device(after_1)
        and after_0["current_device"] == 0
        and _follows_current_device(after_0)
    )


def set_device_decides(current: Run) -> bool:
    """Whether ``torch.cuda.set_device`` decided what it should: after ``set_device(1)`` cuda:1 was
    current and ``device="cuda"``, the current stream and ``.to("cuda")`` went there; after
    ``set_device(0)``, cuda:0 again.
    """
    return _set_device_decides(_states(current))


def show_current_device(current: Run) -> None:
    """Shows a table of each state of the experiment (the current device, where
    ``device="cuda"``, the current stream and both copies landed, whether the copies' contents
    were right), then prints where a new stream, an operator on a cuda:1 tensor and a mixed-device
    addition went. Returns nothing.
    """
    value = current.value
    table = tables.Table(
        [
            "when",
            "current device",
            'device="cuda" on',
            "current stream on",
            '.to("cuda:1") on',
            '.to("cuda") on',
            "copies' contents",
        ],
        title=plotting.machine_title("The current device", current.machine, current.live),
    )
    for s in value["states"]:
        table.add(
            s["where"],
            f"cuda:{s['current_device']}",
            s["empty_on"],
            s["current_stream_on"],
            s["to_cuda1_on"],
            s["to_cuda_on"],
            "right" if s["to_cuda1_correct"] and s["to_cuda_correct"] else "WRONG",
        )
    display(table)
    op = value["operator_on_cuda1"]
    print(
        f"a torch.cuda.Stream() made inside `with torch.cuda.device(1)` is on {value['stream_made_inside_device_1_on']}"
    )
    print(
        f"x * 2 + 1 with x on cuda:1, cuda:{op['current_device_before']} current: result on {op['result_on']}, "
        f"values {'right' if op['correct'] else 'WRONG'};\n  current device afterwards: cuda:{op['current_device_after']}"
    )
    print(f"a cuda:0 tensor + a cuda:1 tensor:\n  {value['mixed_devices_error'] or 'no error'}")
    print(
        f"current device at the start cuda:{value['start_device']}, after the experiment cuda:{value['restored_to']}"
    )


def see_current_device(current: Run) -> claims.WhatWeSee:
    """What the current device decided (``device="cuda"``, the current stream, ``.to("cuda")``,
    new streams) and what it did not (an operator on a cuda:1 tensor, ``.to("cuda:1")``), counted
    over the experiment's states.
    """
    value, states = current.value, _states(current)
    inside, after = (
        states["inside with torch.cuda.device(1)"],
        states["after leaving with torch.cuda.device(1)"],
    )
    in_stream = states["inside with torch.cuda.stream(<a stream of cuda:1>)"]
    n = len(value["states"])
    copies_right = sum(s["to_cuda1_correct"] and s["to_cuda_correct"] for s in value["states"])
    to_1_there = sum(s["to_cuda1_on"] == "cuda:1" for s in value["states"])
    followed = sum(_follows_current_device(s) for s in value["states"])
    op = value["operator_on_cuda1"]
    seen = claims.WhatWeSee(NOTEBOOK, current)
    seen.say(
        f'In {followed} of the {n} states, `device="cuda"`, the current stream and `.to("cuda")` all went to '
        f"the device `torch.cuda.current_device()` returned; `torch.cuda.set_device(1)` "
        f"{'made' if _set_device_decides(states) else 'did not make'} cuda:1 that device until `set_device(0)`. "
        f"Inside `with torch.cuda.device(1)` the current device was cuda:{inside['current_device']} and a new "
        f'`torch.empty(n, device="cuda")` landed on {inside["empty_on"]}; after the block, '
        f"cuda:{after['current_device']} again. A stream made inside the block with no device given is on "
        f"{value['stream_made_inside_device_1_on']}. Inside `with torch.cuda.stream(<a stream of cuda:1>)` the "
        f"current device was cuda:{in_stream['current_device']}."
    )
    error = value["mixed_devices_error"]
    seen.say(
        f"With cuda:{op['current_device_before']} current, `x * 2 + 1` on a cuda:1 tensor "
        f"{'ran, with the right values,' if op['correct'] else 'ran, with WRONG values,'} and returned its result on "
        f"{op['result_on']}; the current device was cuda:{op['current_device_after']} afterwards. "
        + (
            f'Adding tensors of two GPUs failed: "{error}". '
            if error
            else "Adding tensors of two GPUs raised no error. "
        )
        + f'`.to("cuda:1")` landed on cuda:1 in {to_1_there} of {n} states whatever the current device; the '
        f"copies' contents were right in {copies_right} of them. The experiment left cuda:{value['restored_to']} "
        f"current, as it found it (cuda:{value['start_device']})."
    )
    seen.check(
        '`device="cuda"`, the current stream and `.to("cuda")` follow the current device in every state',
        followed == n,
        f"{followed} of {n} states",
    )
    seen.check(
        '`.to("cuda:1")` lands on cuda:1 whatever the current device, with the right contents',
        to_1_there == n and copies_right == n,
        f"on cuda:1 in {to_1_there} of {n} states, right in {copies_right}",
    )
    return seen


# ---------------------------------------------------------------- 8. events across GPUs


def _kernel_pairs(profile: trace.Profile) -> list[tuple[trace.Interval, trace.Interval]]:
    """(cuda:0's long kernel, cuda:1's short kernel) for each profiled step."""
    first = sorted(profile.select(kind="kernel", device=0), key=lambda iv: iv.start_us)
    second = sorted(profile.select(kind="kernel", device=1), key=lambda iv: iv.start_us)
    return list(zip(first, second, strict=False))


def event_gaps_us(events: Run) -> dict[str, list[float]]:
    """{"with_wait": [...], "without_wait": [...]}: microseconds from the end of cuda:0's kernel
    to the start of cuda:1's, one per profiled step (negative: cuda:1's started first).
    """
    return {
        name: [b.start_us - a.end_us for a, b in _kernel_pairs(prof)]
        for name, prof in events.value.items()
    }


def _waited(gaps: dict[str, list[float]]) -> bool:
    return bool(gaps["with_wait"]) and min(gaps["with_wait"]) >= -TOLERANCE_US


def ran_free(events: Run) -> bool:
    """Whether, without the wait, cuda:1's kernel ran while cuda:0's was still running in every
    step (started more than ``TOLERANCE_US`` before it ended).
    """
    gaps = event_gaps_us(events)["without_wait"]
    return bool(gaps) and max(gaps) < -TOLERANCE_US


def _first_step(profile: trace.Profile) -> list[trace.Interval]:
    """Everything that started before both GPUs' first kernels had ended (the first step)."""
    end = max(iv.end_us for iv in _kernel_pairs(profile)[0])
    return [iv for iv in profile.intervals if iv.start_us <= end]


def _event_stream_names(profile: trace.Profile) -> dict[int, str]:
    """The spin kernels' streams: s0 on cuda:0, s1 on cuda:1 (when their ids differ)."""
    return stream_labels(
        {
            (iv.device, iv.stream): f"cuda:{iv.device} side stream s{iv.device}"
            for iv in profile.select(kind="kernel")
        }
    )


def show_event_wait(events: Run) -> None:
    """Prints, for each profiled step, the microseconds from the end of cuda:0's kernel to the
    start of cuda:1's with and without the wait, whether cuda:1 waited and whether it ran free,
    and draws the first step of each with the host's CUDA calls. Returns nothing.
    """
    gaps = event_gaps_us(events)
    print(
        "microseconds from the end of cuda:0's kernel to the start of cuda:1's (negative: before it ends)"
    )
    for name, values in gaps.items():
        print(f"  {name.replace('_', ' ')}: {', '.join(f'{g:+.1f}' for g in values)} us")
    print(
        f"with the wait, cuda:1's kernel waited for cuda:0's event: {_waited(gaps)};\n"
        f"without it, cuda:1's kernel ran while cuda:0's was still running: {ran_free(events)}"
    )
    shown = {name: _first_step(prof) for name, prof in events.value.items()}
    longest_us = max(
        max(iv.end_us for iv in ivs) - min(iv.start_us for iv in ivs) for ivs in shown.values()
    )
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 3.5 * len(shown)), squeeze=False)
    for ax, (name, intervals) in zip(axes[:, 0], shown.items(), strict=True):
        plotting.timeline(
            intervals,
            title=name.replace("_", " "),
            ax=ax,
            unit="us",
            include_host=True,
            stream_names=_event_stream_names(events.value[name]),
        )
        ax.set_xlim(0, longest_us * 1.02)
    fig.suptitle(
        plotting.machine_title(
            "An event recorded on cuda:0, waited for on cuda:1 (first step)",
            events.machine,
            events.live,
        )
    )
    fig.tight_layout()
    plt.show()


def see_event_wait(events: Run) -> claims.WhatWeSee:
    """When cuda:1's kernel started against the end of cuda:0's (us, each profiled step), with
    the wait and without it, and whether that is waiting or running free.
    """
    gaps = event_gaps_us(events)
    steps = len(gaps["with_wait"])
    seen = claims.WhatWeSee(NOTEBOOK, events)
    seen.say(
        f"With the wait, cuda:1's kernel started {', '.join(f'{g:+.1f}' for g in gaps['with_wait'])} us after "
        f"cuda:0's kernel ended (one value per profiled step, {steps} steps; "
        f"{'it waited: none started earlier than' if _waited(gaps) else 'it did not wait: it started earlier than'} "
        f"-{TOLERANCE_US:.0f} us, the allowance for the two GPUs' clocks); without it, "
        f"{', '.join(f'{g:+.1f}' for g in gaps['without_wait'])} us: "
        f"{'while cuda:0 was still spinning' if ran_free(events) else 'not while cuda:0 was spinning'}."
    )
    return seen
