"""Notebook 05, section 2 (what the current device decides, and what it does not) and section 8
(an event recorded on one GPU's stream holding back a stream of another)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from IPython.display import display

from ... import claims, plotting, tables, trace
from ...records import Run
from . import NOTEBOOK, stream_labels

TOLERANCE_US = 10.0  # allowance for the two GPUs' clocks in a trace not agreeing exactly

# ---------------------------------------------------------------- 2. the current device


def follows_current_device(state: dict) -> bool:
    """Whether device="cuda", the current stream and .to("cuda") all went to the current device."""
    here = f"cuda:{state['current_device']}"
    return state["empty_on"] == state["current_stream_on"] == state["to_cuda_on"] == here


@dataclass(frozen=True)
class Current:
    """Section 2's facts, counted over the experiment's states (one dict each, by where)."""

    states: dict[str, dict]
    followed: int  # states where device="cuda", the current stream and .to("cuda") followed
    to_1_there: int  # states where .to("cuda:1") landed on cuda:1
    copies_right: int  # states where both copies' contents were right

    @property
    def count(self) -> int:
        return len(self.states)

    @property
    def set_device_decides(self) -> bool:
        """After set_device(1) cuda:1 is current and followed; after set_device(0), cuda:0 again."""
        after = [self.states[f"after torch.cuda.set_device({d})"] for d in (1, 0)]
        return [s["current_device"] for s in after] == [1, 0] and all(
            map(follows_current_device, after)
        )


def current_facts(current: Run) -> Current:
    states = current.value["states"]
    return Current(
        {s["where"]: s for s in states},
        sum(map(follows_current_device, states)),
        sum(s["to_cuda1_on"] == "cuda:1" for s in states),
        sum(s["to_cuda1_correct"] and s["to_cuda_correct"] for s in states),
    )


def set_device_decides(current: Run) -> bool:
    """Whether ``torch.cuda.set_device`` decided what it should (``Current.set_device_decides``)."""
    return current_facts(current).set_device_decides


def show_current_device(current: Run) -> None:
    """Shows each state: the current device, where ``device="cuda"``, the current stream and both
    copies landed, whether the copies were right. Returns nothing."""
    columns = ["when", "current device", 'device="cuda" on', "current stream on"]
    table = tables.Table(
        [*columns, '.to("cuda:1") on', '.to("cuda") on', "copies' contents"],
        title=plotting.machine_title("The current device", current.machine, current.live),
    )
    for s in current.value["states"]:
        right = s["to_cuda1_correct"] and s["to_cuda_correct"]
        table.add(
            s["where"], f"cuda:{s['current_device']}", s["empty_on"], s["current_stream_on"],
            s["to_cuda1_on"], s["to_cuda_on"], "right" if right else "WRONG",
        )  # fmt: skip
    display(table)  # where new streams, operators and mixed devices went: in the sentences


def see_current_device(current: Run) -> claims.WhatWeSee:
    """What the current device decided (``device="cuda"``, the current stream, ``.to("cuda")``,
    new streams) and what it did not (an operator on a cuda:1 tensor, ``.to("cuda:1")``), counted
    over the experiment's states."""
    value, f = current.value, current_facts(current)
    inside = f.states["inside with torch.cuda.device(1)"]
    after = f.states["after leaving with torch.cuda.device(1)"]
    in_stream = f.states["inside with torch.cuda.stream(<a stream of cuda:1>)"]
    op, error, n = value["operator_on_cuda1"], value["mixed_devices_error"], f.count
    seen = claims.WhatWeSee(NOTEBOOK, current)
    seen.say(
        f'In {f.followed} of the {n} states, `device="cuda"`, the current stream and `.to("cuda")` '
        "all went to the device `torch.cuda.current_device()` returned; `torch.cuda.set_device(1)` "
        f"{'made' if f.set_device_decides else 'did not make'} cuda:1 that device until "
        f"`set_device(0)`. Inside `with torch.cuda.device(1)` the current device was "
        f'cuda:{inside["current_device"]} and a new `torch.empty(n, device="cuda")` landed on '
        f"{inside['empty_on']}; after the block, cuda:{after['current_device']} again. A stream made "
        f"inside the block with no device given is on {value['stream_made_inside_device_1_on']}. "
        "Inside `with torch.cuda.stream(<a stream of cuda:1>)` the current device was "
        f"cuda:{in_stream['current_device']}."
    )
    failed = f'Adding tensors of two GPUs failed: "{error}". '
    seen.say(
        f"With cuda:{op['current_device_before']} current, `x * 2 + 1` on a cuda:1 tensor ran, "
        f"with {'the right' if op['correct'] else 'WRONG'} values, and returned its result on "
        f"{op['result_on']}; the current device was cuda:{op['current_device_after']} afterwards. "
        + (failed if error else "Adding tensors of two GPUs raised no error. ")
        + f'`.to("cuda:1")` landed on cuda:1 in {f.to_1_there} of {n} states whatever the current '
        f"device; the copies' contents were right in {f.copies_right} of them. The experiment left "
        f"cuda:{value['restored_to']} current, as it found it (cuda:{value['start_device']})."
    )
    seen.check(
        '`device="cuda"`, the current stream and `.to("cuda")` follow the current device in every state',
        f.followed == n,
        f"{f.followed} of {n} states",
    )
    seen.check(
        '`.to("cuda:1")` lands on cuda:1 whatever the current device, with the right contents',
        f.to_1_there == n == f.copies_right,
        f"on cuda:1 in {f.to_1_there} of {n} states, right in {f.copies_right}",
    )
    return seen


# ---------------------------------------------------------------- 8. events across GPUs


def kernel_pairs(profile: trace.Profile) -> list[tuple[trace.Interval, trace.Interval]]:
    """(cuda:0's long kernel, cuda:1's short kernel) for each profiled step."""
    first, second = (
        sorted(profile.select(kind="kernel", device=d), key=lambda iv: iv.start_us) for d in (0, 1)
    )
    return list(zip(first, second, strict=False))


@dataclass(frozen=True)
class Events:
    """Section 8's facts: microseconds from the end of cuda:0's kernel to the start of cuda:1's,
    one per profiled step (negative: cuda:1's started first), with and without the wait."""

    with_wait: list[float]
    without_wait: list[float]

    @property
    def waited(self) -> bool:
        """With the wait, no step's cuda:1 kernel started before cuda:0's ended (within tolerance)."""
        return bool(self.with_wait) and min(self.with_wait) >= -TOLERANCE_US

    @property
    def ran_free(self) -> bool:
        """Without the wait, cuda:1's kernel ran while cuda:0's still ran, in every step."""
        return bool(self.without_wait) and max(self.without_wait) < -TOLERANCE_US


def event_facts(events: Run) -> Events:
    gaps = {
        name: [b.start_us - a.end_us for a, b in kernel_pairs(profile)]
        for name, profile in events.value.items()
    }
    return Events(gaps["with_wait"], gaps["without_wait"])


def _listed(gaps: list[float]) -> str:
    return ", ".join(f"{g:+.1f}" for g in gaps)


def show_event_wait(events: Run) -> None:
    """Draws the first step with the wait and without it, the host's CUDA calls underneath (the
    gaps are in the sentences). Returns nothing."""
    shown = {}  # everything that started before both GPUs' first kernels had ended
    for name, profile in events.value.items():
        end = max(iv.end_us for iv in kernel_pairs(profile)[0])
        shown[name] = [iv for iv in profile.intervals if iv.start_us <= end]
    longest_us = max(
        max(iv.end_us for iv in ivs) - min(iv.start_us for iv in ivs) for ivs in shown.values()
    )
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 3.5 * len(shown)), squeeze=False)
    for ax, (name, intervals) in zip(axes[:, 0], shown.items(), strict=True):
        kernels = events.value[name].select(kind="kernel")  # s0 on cuda:0, s1 on cuda:1
        streams = stream_labels(
            {(iv.device, iv.stream): f"cuda:{iv.device} side stream s{iv.device}" for iv in kernels}
        )
        title = name.replace("_", " ")
        plotting.timeline(
            intervals, title=title, ax=ax, unit="us", include_host=True, stream_names=streams
        )
        ax.set_xlim(0, longest_us * 1.02)
    what = "An event recorded on cuda:0, waited for on cuda:1 (first step)"
    fig.suptitle(plotting.machine_title(what, events.machine, events.live))
    fig.tight_layout()
    plt.show()


def see_event_wait(events: Run) -> claims.WhatWeSee:
    """When cuda:1's kernel started against the end of cuda:0's (us, each profiled step), with
    the wait and without it, and whether that is waiting or running free."""
    f = event_facts(events)
    waited = (
        "it waited: none started earlier than"
        if f.waited
        else "it did not wait: it started earlier than"
    )
    free = "while cuda:0 was still spinning" if f.ran_free else "not while cuda:0 was spinning"
    seen = claims.WhatWeSee(NOTEBOOK, events)
    seen.say(
        f"With the wait, cuda:1's kernel started {_listed(f.with_wait)} us after cuda:0's kernel "
        f"ended (one value per profiled step, {len(f.with_wait)} steps; {waited} "
        f"-{TOLERANCE_US:.0f} us, the allowance for the two GPUs' clocks); without it, "
        f"{_listed(f.without_wait)} us: {free}."
    )
    return seen
