"""Notebook 05, section 2 (what the current device decides, and what not) and section 8 (an event
recorded on one GPU's stream holding back a stream of another)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import claims, plotting, tables, trace
from ...records import Run
from . import NOTEBOOK, stream_labels

TOLERANCE_US = 10.0  # allowance for the two GPUs' clocks in a trace not agreeing exactly
LANDED = ("empty_on", "current_stream_on", "to_cuda1_on", "to_cuda_on")
FOLLOW = (
    '`device="cuda"`, the current stream and `.to("cuda")` follow the current device in every state'
)
TO_1 = '`.to("cuda:1")` lands on cuda:1 whatever the current device, with the right contents'


def follows(state: dict) -> bool:
    """Whether device="cuda", the current stream and .to("cuda") all went to the current device."""
    here = f"cuda:{state['current_device']}"
    return state["empty_on"] == state["current_stream_on"] == state["to_cuda_on"] == here


def right(state: dict) -> bool:
    return state["to_cuda1_correct"] and state["to_cuda_correct"]


@dataclass(frozen=True)
class Current:
    """Section 2's facts, counted over the experiment's states (by where)."""

    states: dict[str, dict]
    followed: int  # states where device="cuda", the current stream and .to("cuda") followed
    to_1_there: int  # states where .to("cuda:1") landed on cuda:1
    copies_right: int  # states where both copies' contents were right
    set_device_decides: bool  # set_device(1) made cuda:1 current and followed, set_device(0) back


def current_facts(current: Run) -> Current:
    states = current.value["states"]
    by = {s["where"]: s for s in states}
    after = [by[f"after torch.cuda.set_device({d})"] for d in (1, 0)]
    decides = [s["current_device"] for s in after] == [1, 0] and all(map(follows, after))
    there = sum(s["to_cuda1_on"] == "cuda:1" for s in states)
    return Current(by, sum(map(follows, states)), there, sum(map(right, states)), decides)


def show_current_device(current: Run) -> None:
    """Each state: the current device, where allocations, streams and copies landed."""
    columns = ["when", "current device", 'device="cuda" on', "current stream on"]
    columns += ['.to("cuda:1") on', '.to("cuda") on', "copies' contents"]
    table = tables.Table(columns, title=plotting.titled("The current device", current))
    for s in current.value["states"]:
        contents = "right" if right(s) else "WRONG"
        table.add(s["where"], f"cuda:{s['current_device']}", *[s[k] for k in LANDED], contents)
    display(table)  # where new streams, operators and mixed devices went: in the sentences


def see_current_device(current: Run) -> claims.WhatWeSee:
    """What the current device decided and what it did not, counted over the states."""
    value, f = current.value, current_facts(current)
    inside = f.states["inside with torch.cuda.device(1)"]
    after = f.states["after leaving with torch.cuda.device(1)"]
    in_stream = f.states["inside with torch.cuda.stream(<a stream of cuda:1>)"]
    op, error, n = value["operator_on_cuda1"], value["mixed_devices_error"], len(f.states)
    failed = f'Adding tensors of two GPUs failed: "{error}". '
    seen = claims.WhatWeSee(NOTEBOOK, current).say(
        f'In {f.followed} of the {n} states, `device="cuda"`, the current stream and `.to("cuda")` '
        "all went to the device `torch.cuda.current_device()` returned; `torch.cuda.set_device(1)` "
        f"{'made' if f.set_device_decides else 'did not make'} cuda:1 that device until "
        f"`set_device(0)`. Inside `with torch.cuda.device(1)` the current device was "
        f'cuda:{inside["current_device"]} and a new `torch.empty(n, device="cuda")` landed on '
        f"{inside['empty_on']}; after the block, cuda:{after['current_device']} again. A stream made "
        f"inside the block with no device given is on {value['stream_made_inside_device_1_on']}. "
        "Inside `with torch.cuda.stream(<a stream of cuda:1>)` the current device was "
        f"cuda:{in_stream['current_device']}.",
        f"With cuda:{op['current_device_before']} current, `x * 2 + 1` on a cuda:1 tensor ran, "
        f"with {'the right' if op['correct'] else 'WRONG'} values, and returned its result on "
        f"{op['result_on']}; the current device was cuda:{op['current_device_after']} afterwards. "
        + (failed if error else "Adding tensors of two GPUs raised no error. ")
        + f'`.to("cuda:1")` landed on cuda:1 in {f.to_1_there} of {n} states whatever the current '
        f"device; the copies' contents were right in {f.copies_right} of them. The experiment left "
        f"cuda:{value['restored_to']} current, as it found it (cuda:{value['start_device']}).",
    )
    seen.check(FOLLOW, f.followed == n, f"{f.followed} of {n} states")
    there = f"on cuda:1 in {f.to_1_there} of {n} states, right in {f.copies_right}"
    seen.check(TO_1, f.to_1_there == n == f.copies_right, there)
    return seen


def kernel_pairs(profile: trace.Profile) -> list[tuple[trace.Interval, trace.Interval]]:
    """(cuda:0's long kernel, cuda:1's short kernel) for each profiled step."""
    by_device = [
        sorted(profile.select(kind="kernel", device=d), key=lambda iv: iv.start_us) for d in (0, 1)
    ]
    return list(zip(*by_device, strict=False))


@dataclass(frozen=True)
class Events:
    """Section 8's facts: us from cuda:0's kernel's end to cuda:1's start, per step (< 0: cuda:1 first)."""

    with_wait: list[float]
    without_wait: list[float]
    waited: bool  # with the wait, no step's cuda:1 kernel started before cuda:0's ended
    ran_free: bool  # without it, cuda:1's kernel ran while cuda:0's still ran, in every step


def event_facts(events: Run) -> Events:
    gaps = {k: [b.start_us - a.end_us for a, b in kernel_pairs(p)] for k, p in events.value.items()}
    with_wait, without = gaps["with_wait"], gaps["without_wait"]
    waited = bool(with_wait) and min(with_wait) >= -TOLERANCE_US  # within the clocks' tolerance
    ran_free = bool(without) and max(without) < -TOLERANCE_US
    return Events(with_wait, without, waited, ran_free)


def show_event_wait(events: Run) -> None:
    """The first step with the wait and without it, the host's CUDA calls underneath."""
    shown = {}  # everything that started before both GPUs' first kernels had ended
    for name, profile in events.value.items():
        end = max(iv.end_us for iv in kernel_pairs(profile)[0])
        shown[name] = [iv for iv in profile.intervals if iv.start_us <= end]
    longest_us = max(trace.span_us(ivs) for ivs in shown.values())
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 3.5 * len(shown)), squeeze=False)
    for ax, (name, intervals) in zip(axes[:, 0], shown.items(), strict=True):
        kernels = events.value[name].select(kind="kernel")  # s0 on cuda:0, s1 on cuda:1
        lanes = {(k.device, k.stream): f"cuda:{k.device} side stream s{k.device}" for k in kernels}
        title, names = name.replace("_", " "), stream_labels(lanes)
        plotting.timeline(intervals, title=title, ax=ax, unit="us", stream_names=names)
        ax.set_xlim(0, longest_us * 1.02)
    fig.suptitle(
        plotting.titled("An event recorded on cuda:0, waited for on cuda:1 (first step)", events)
    )
    fig.tight_layout()
    plt.show()


def see_event_wait(events: Run) -> claims.WhatWeSee:
    """When cuda:1's kernel started against the end of cuda:0's (us per step), with the wait and without."""
    f, listed = event_facts(events), lambda gaps: ", ".join(f"{g:+.1f}" for g in gaps)
    waited = "it waited: none" if f.waited else "it did not wait: it"
    free = "while cuda:0 was still spinning" if f.ran_free else "not while cuda:0 was spinning"
    return claims.WhatWeSee(NOTEBOOK, events).say(
        f"With the wait, cuda:1's kernel started {listed(f.with_wait)} us after cuda:0's kernel "
        f"ended (one value per profiled step, {len(f.with_wait)} steps; {waited} started earlier "
        f"than -{TOLERANCE_US:.0f} us, the allowance for the two GPUs' clocks); without it, "
        f"{listed(f.without_wait)} us: {free}."
    )
