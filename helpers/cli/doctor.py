"""``datamove doctor``: a preflight of a machine, each check pass / warn / FAIL with its fix.
The checks are pure functions of facts read once (``_doctor_facts``): tests feed them any machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from .. import config, distributed, hardware, records, timing
from .cli_args import GiB
from .cli_output import say

PASS, WARN, FAIL = "pass", "warn", "FAIL"
CPU_ONLY = "CPU only: the notebooks replay the recorded GPU runs (no NVIDIA driver, no CUDA GPU)"
DISK_WARN_BYTES, DISK_FAIL_BYTES = 5 * GiB, 1 * GiB  # traces of a full run take a few hundred MB
MEMLOCK_WARN_BYTES = 1 * GiB
BUSY_PERCENT = 10


@dataclass
class Check:
    """One line of ``datamove doctor``: what was checked, pass / warn / FAIL, what was seen, the fix."""

    name: str
    status: str
    seen: str
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status == PASS:
            self.fix = ""  # a fix is for a warn or a FAIL


def _tiny_all_reduce(rank: int, world_size: int) -> float:
    """A rank of doctor's NCCL check: all_reduce of rank + 1; every rank should end with n(n+1)/2."""
    tensor = torch.full((1024,), rank + 1.0, device=distributed.rank_device())
    dist.all_reduce(tensor)
    distributed.synchronize()
    return float(tensor[0])


def _nccl_fact(gpus: int, timeout_s: float) -> dict[str, Any]:
    """Run the tiny all_reduce on every GPU with a deadline; ok and what was seen."""
    try:
        got = distributed.launch(
            _tiny_all_reduce,
            gpus,
            backend="nccl",
            timeout_s=timeout_s,
            startup_timeout_s=max(60.0, timeout_s),
        )
    except Exception as err:  # noqa: BLE001 - the doctor reports any failure as a FAIL line
        return {"ok": False, "seen": str(err).splitlines()[0][:200]}
    expected = gpus * (gpus + 1) / 2
    return {
        "ok": all(v == expected for v in got),
        "seen": f"{gpus} ranks returned {got} (expected {expected:g})",
    }


def _links_under_load() -> list[dict[str, Any]]:
    """The PCIe links read while every GPU runs a spin kernel (idle GPUs lower the generation)."""
    for i in range(hardware.gpu_count()):
        with torch.cuda.device(i):
            timing.hold_stream(300_000)
    links = hardware.pcie_links()
    timing.synchronize_all()
    return links


def _doctor_facts(nccl_timeout_s: float | None) -> dict[str, Any]:
    """What the doctor's checks read, gathered from the helpers (the checks themselves are pure)."""
    activity = hardware.gpu_activity()  # before this process puts a context on any GPU
    gpus = hardware.gpu_count()
    links = _links_under_load() if gpus else hardware.pcie_links()
    numa = {
        link["index"]: hardware.gpu_numa_node(link["bus_id"])
        for link in links
        if link.get("bus_id")
    }
    traces = config.traces_dir()
    machine = hardware.machine_name(hardware.describe()) if gpus else "cpu-only"
    nccl = None
    if nccl_timeout_s is not None and gpus >= 1 and dist.is_nccl_available():
        nccl = _nccl_fact(gpus, nccl_timeout_s)
    return {
        "course": config.course_version(),
        "commit": config.course_commit(),
        "python": platform.python_version(),
        "os": platform.platform(),
        "gpus": gpus,
        "driver": hardware.driver_present(),
        "driver_version": hardware.driver_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "driver_cuda": hardware.driver_cuda_version(),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "links": links,
        "numa": numa,
        "numa_cpus": {
            node: sorted(hardware.numa_node_cpus(node))
            for node in set(numa.values())
            if node is not None
        },
        "affinity": sorted(hardware.cpu_affinity()),
        "activity": activity,
        "pid": os.getpid(),
        "memlock": hardware.pinned_memory_limit_bytes(),
        "peer": hardware.peer_access(),
        "nccl": nccl,
        "traces": str(traces),
        "free_disk": hardware.free_disk_bytes(traces),
        "machine": machine,
        "recorded": records.recorded_machine_names(),
    }


def _check_gpus(f: dict[str, Any]) -> list[Check]:
    name = "GPUs visible"
    if f["gpus"]:
        return [Check(name, PASS, f"{f['gpus']} CUDA GPU(s) visible to torch {f['torch']}")]
    if not f["driver"]:
        return [Check(name, PASS, CPU_ONLY)]
    seen = (
        f"an NVIDIA driver answers but torch {f['torch']} sees no GPU "
        f"(CUDA_VISIBLE_DEVICES={f['visible_devices']!r})"
    )
    fix = "install PyPI's CUDA build of torch (make setup here), and check CUDA_VISIBLE_DEVICES"
    return [Check(name, FAIL, seen, fix)]


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or "")[:2])


def _check_driver(f: dict[str, Any]) -> list[Check]:
    name, driver, built = "driver vs torch's CUDA", f["driver_cuda"], f["torch_cuda"]
    if not f["driver"]:
        return []  # CPU only: no driver to match (said once, by the GPUs check)
    if not built:
        fix = "install PyPI's CUDA build: pip install 'torch>=2.11,<2.15' (make setup does)"
        return [Check(name, FAIL, f"torch {f['torch']} is a CPU build", fix)]
    if driver and _version(driver) < _version(built):
        seen = f"driver supports CUDA {driver}, torch needs {built}"
        fix = f"update the driver, or install a torch built for CUDA <= {driver}"
        return [Check(name, FAIL, seen, fix)]
    return [Check(name, PASS, f"driver supports CUDA {driver or '?'}, torch built for {built}")]


def _check_links(f: dict[str, Any]) -> list[Check]:
    checks = []
    for link in f["links"]:
        name, now = f"GPU {link['index']} PCIe link", (link["gen_current"], link["width_current"])
        seen = f"gen {now[0]} x{now[1]} now, gen {link['gen_max']} x{link['width_max']} at most (read under load)"
        if None in (*now, link["gen_max"], link["width_max"]):
            check = Check(
                name, WARN, "not reported by the driver", "read it with nvidia-smi -q -d PCI"
            )
        elif now[1] < link["width_max"]:
            fix = (
                "a degraded width: reseat the card or move it to a full-width "
                "slot; check the riser and BIOS lane settings"
            )
            check = Check(name, FAIL, seen, fix)
        elif now[0] < link["gen_max"]:
            fix = (
                "below its generation under load: check the BIOS PCIe speed "
                "setting and the slot; idle power saving can also show this"
            )
            check = Check(name, WARN, seen, fix)
        else:
            check = Check(name, PASS, seen)
        checks.append(check)
    return checks


def _check_numa(f: dict[str, Any]) -> list[Check]:
    checks, mine = [], set(f["affinity"])
    for index, node in sorted(f["numa"].items()):
        cpus = set(f["numa_cpus"].get(node, []))
        name = f"GPU {index} NUMA node"
        if node is None or not cpus:
            checks.append(Check(name, PASS, "one NUMA node (or not reported): nothing to match"))
        elif mine & cpus:
            seen = f"node {node}; this process may run on {len(mine & cpus)} of its CPUs"
            checks.append(Check(name, PASS, seen))
        else:
            seen = f"node {node}, but this process runs only on other nodes' CPUs"
            fix = f"numactl --cpunodebind={node} --membind={node} <command> (pinned buffers near the GPU)"
            checks.append(Check(name, WARN, seen, fix))
    return checks


def _check_activity(f: dict[str, Any]) -> list[Check]:
    checks = []
    fix = "wait for them, or choose an idle GPU with CUDA_VISIBLE_DEVICES: shared GPUs give wrong timings"
    for gpu in f["activity"]:
        others = [pid for pid in gpu["pids"] if pid != f["pid"]]
        busy = (gpu["utilization_pct"] or 0) > BUSY_PERCENT
        seen = f"{gpu['utilization_pct']}% busy, other processes: {others or 'none'}"
        checks.append(
            Check(f"GPU {gpu['index']} other work", WARN if others or busy else PASS, seen, fix)
        )
    return checks


def _check_memlock(f: dict[str, Any]) -> list[Check]:
    limit, name = f["memlock"], "pinned-memory limit (ulimit -l)"
    if not f["gpus"]:
        return []  # CPU only: nothing is pinned without a GPU
    if limit is None:
        return [Check(name, PASS, "unlimited")]
    fix = (
        "raise it: ulimit -l unlimited (limits.conf memlock; docker "
        "--ulimit memlock=-1); registering host memory needs it"
    )
    status = PASS if limit >= MEMLOCK_WARN_BYTES else WARN
    return [Check(name, status, timing.format_bytes(limit) if limit else "0 B", fix)]


def _check_peers(f: dict[str, Any]) -> list[Check]:
    peer, n = f["peer"], len(f["peer"])
    if n < 2:
        return [Check("peer access", PASS, f"{n} GPU(s): no pair to check")] if n else []
    missing = [f"{i}->{j}" for i in range(n) for j in range(n) if i != j and not peer[i][j]]
    if missing:
        fix = "those copies go through host memory: check nvidia-smi topo -m and IOMMU/ACS settings"
        return [Check("peer access", WARN, f"no direct access for {', '.join(missing)}", fix)]
    return [Check("peer access", PASS, f"every pair of the {n} GPUs")]


def _check_nccl(f: dict[str, Any]) -> list[Check]:
    name, nccl = "NCCL all_reduce", f["nccl"]
    if nccl is None:
        if not f["gpus"]:
            return []  # CPU only: nothing for NCCL to run on
        return [Check(name, WARN, "not run (--skip-nccl, or a torch build without NCCL)")]
    fix = "rerun with NCCL_DEBUG=INFO; keep NCCL_NVLS_ENABLE=0; try NCCL_P2P_DISABLE=1 to isolate the link"
    return [Check(name, PASS if nccl["ok"] else FAIL, nccl["seen"], fix)]


def _check_disk(f: dict[str, Any]) -> list[Check]:
    free = f["free_disk"]
    status = PASS if free >= DISK_WARN_BYTES else WARN if free >= DISK_FAIL_BYTES else FAIL
    seen = f"{timing.format_bytes(free)} free at {f['traces']}"
    fix = "free some space, or set COURSE_TRACES_DIR to a roomier folder"
    return [Check("free disk for traces", status, seen, fix)]


def _check_recordings(f: dict[str, Any]) -> list[Check]:
    machine, recorded = f["machine"], f["recorded"]
    if machine in recorded:
        return [Check("recordings for this machine", PASS, f"results/{machine}/ exists")]
    if not f["gpus"]:
        seen = ", ".join(recorded) or "none under results/"
        fix = "git checkout results/ (the clone's recordings are missing)"
        return [Check("recordings to replay", PASS if recorded else FAIL, seen, fix)]
    fix = "datamove record, then a pull request with results/<machine>/ (CONTRIBUTING.md: Add your machine)"
    return [Check("recordings for this machine", WARN, f"none for {machine}", fix)]


DOCTOR_CHECKS = (
    _check_gpus,
    _check_driver,
    _check_links,
    _check_numa,
    _check_activity,
    _check_memlock,
    _check_peers,
    _check_nccl,
    _check_disk,
    _check_recordings,
)


def cmd_doctor(args: argparse.Namespace) -> int:
    """``datamove doctor``: exit 1 on a FAIL."""
    facts = _doctor_facts(None if args.skip_nccl else args.timeout)
    checks = [check for rule in DOCTOR_CHECKS for check in rule(facts)]
    rows = [asdict(c) for c in checks]
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    payload = {
        "command": "doctor",
        "machine": facts["machine"],
        "counts": counts,
        "rows": rows,
        "facts": facts,
    }
    if args.json:
        say(json.dumps(payload, indent=2, default=str))
    else:
        say(
            _doctor_text(rows)
            + f"\n{counts[PASS]} pass, {counts[WARN]} warn, {counts[FAIL]} FAIL on "
            f"{facts['machine']}"
        )
    return 1 if counts[FAIL] else 0


def _doctor_text(rows: list[dict[str, Any]]) -> str:
    """Status, check and what was seen on one line; the fix indented below it."""
    width = max(len(r["name"]) for r in rows)
    lines = []
    for r in rows:
        lines.append(f"{r['status']:>4}  {r['name']:<{width}}  {r['seen']}")
        if r["fix"]:
            lines.append(f"{'':>4}  {'':<{width}}  fix: {r['fix']}")
    return "\n".join(lines)
