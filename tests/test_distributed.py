"""Tests of helpers.distributed: launching ranks with deadlines, and nccl-tests' bandwidths.

The CPU tests start real gloo process groups (two or four ranks, forked from the forkserver,
which imports torch once); the ``gpu2`` tests need two CUDA GPUs and use NCCL. Tests of
faults check that no process, child of a rank, or temporary folder is left behind.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import cloudpickle
import matplotlib
import pytest
import torch
import torch.distributed as dist

from helpers import distributed, forkserver, hardware, plotting

matplotlib.use("Agg")
# Workers travel to the ranks by value, as notebook functions do: the ranks need not import
# this module (nor pytest and matplotlib with it), which keeps each launch short.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROOT = Path(__file__).resolve().parent.parent
needs_two_gpus = pytest.mark.skipif(hardware.gpu_count() < 2, reason="needs two CUDA GPUs")


# ---------------------------------------------------------------- launch: arguments


def _nothing(rank, world_size):
    return rank


def _takes_one(rank, world_size, value):
    return value


@pytest.fixture
def temp_folder(tmp_path, monkeypatch):
    """Where launches make their temporary folders during the test (empty when they cleaned up)."""
    # The forkserver that starts the ranks lives as long as this process, with its socket in a
    # temporary folder of its own: start it first, so that the folder holds only what launches leave.
    if forkserver.context().get_start_method() == "forkserver":
        import multiprocessing.forkserver

        multiprocessing.forkserver.ensure_running()
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _gone(pid):
    """Whether process ``pid`` has ended (a zombie that nobody reaped has ended too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _all_gone_within(pids, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return all(_gone(pid) for pid in pids)


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to see processes end"
)

BAD_ARGUMENTS = [
    (dict(worker="not a function"), TypeError, "a function worker"),
    (dict(worker=lambda: None), TypeError, "take the rank and the world size"),
    (dict(world_size=0), ValueError, ">= 1"),
    (dict(world_size=1.5), ValueError, "whole number"),
    (dict(world_size="2"), ValueError, "whole number"),
    (dict(world_size=10_000), ValueError, "at most 64"),
    (dict(backend="mpi"), ValueError, "'gloo'"),
    (dict(backend="GLOO"), ValueError, "'gloo'"),
    (dict(timeout_s=0), ValueError, "positive"),
    (dict(timeout_s=-1.0), ValueError, "positive"),
    (dict(timeout_s=float("nan")), ValueError, "finite"),
    (dict(timeout_s=float("inf")), ValueError, "finite"),
    (dict(timeout_s=1e12), ValueError, "at most 86400 s"),
    (dict(timeout_s="60"), TypeError, "a number"),
    (dict(timeout_s=True), TypeError, "a number"),
    (dict(startup_timeout_s=0), ValueError, "positive"),
    (dict(startup_timeout_s=1e12), ValueError, "at most 86400 s"),
    (dict(args=5), TypeError, "a tuple"),
    (dict(args="ab"), TypeError, "a tuple"),
    (dict(args=(1,)), TypeError, "1 args"),
    (dict(worker=_takes_one), TypeError, "take the rank"),
    (dict(kwargs=[1]), TypeError, "a dict"),
    (dict(kwargs={1: 2}), TypeError, "names as strings"),
    (dict(kwargs={"colour": "red"}), TypeError, "'colour'"),
    (dict(worker=_takes_one, args=(threading.Lock(),)), TypeError, "pickling"),
    (dict(env={"A": 1}), TypeError, "as strings"),
    (dict(env=[("A", "B")]), TypeError, "as strings"),
    (dict(env={"RANK": "3"}), ValueError, "'RANK'"),
    (dict(env={"NCCL_NVLS_ENABLE": "1"}), ValueError, "RANK_ENV"),
]


@pytest.mark.parametrize(
    "function", [distributed.launch, distributed.supervise], ids=["launch", "supervise"]
)
@pytest.mark.parametrize(("kwargs", "error", "words"), BAD_ARGUMENTS)
def test_bad_arguments_are_answered_before_anything_starts(
    function, kwargs, error, words, temp_folder
):
    call = dict(worker=_nothing, world_size=2, backend="gloo")
    call.update(kwargs)
    with pytest.raises(error, match=re.escape(words)):
        function(call.pop("worker"), **call)
    assert mp.active_children() == [] and list(temp_folder.iterdir()) == []


@pytest.mark.skipif(hardware.gpu_count() >= 2, reason="this machine has the GPUs NCCL needs")
def test_nccl_without_enough_gpus_says_what_to_do():
    with pytest.raises(ValueError, match="gloo"):
        distributed.launch(_nothing, 2, backend="nccl")


# ---------------------------------------------------------------- launch: gloo ranks


def _report(rank, world_size, greeting):
    import subprocess

    child = subprocess.Popen(["sleep", "120"])  # left running: the launcher must end it
    distributed.mark("started")
    print(f"{greeting} from rank {rank}")
    total = torch.tensor([rank + 1.0, 10.0 * (rank + 1)])
    dist.all_reduce(total)
    shared = torch.tensor([7, 8, 9]) if rank == 0 else torch.zeros(3, dtype=torch.int64)
    dist.broadcast(shared, src=0, async_op=True).wait()
    message = torch.zeros(4)
    if rank == 0:
        dist.send(torch.arange(4.0), dst=world_size - 1)
    elif rank == world_size - 1:
        dist.recv(message, src=0)
    return {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "backend": dist.get_backend(),
        "device": str(distributed.rank_device()),
        "child": child.pid,
        "pid": __import__("os").getpid(),
        "all_reduce": total,
        "broadcast": shared,
        "recv": message,
    }


@pytest.mark.parametrize("world_size", [2, 4])
def test_ranks_run_collectives_and_report_in_rank_order(world_size, temp_folder):
    outcome = distributed.supervise(
        _report, world_size, backend="gloo", timeout_s=60, args=("hello",)
    )
    assert outcome.ok, outcome.describe()
    results = outcome.results
    assert [r["rank"] for r in results] == list(range(world_size))
    assert all(
        r["world_size"] == world_size and r["backend"] == "gloo" and r["device"] == "cpu"
        for r in results
    )
    n = world_size
    assert [r["all_reduce"] for r in results] == [
        [n * (n + 1) / 2, 10 * n * (n + 1) / 2]
    ] * n  # tensors: lists
    assert [r["broadcast"] for r in results] == [[7, 8, 9]] * n
    assert [r["recv"] for r in results] == [[0.0] * 4] * (n - 1) + [
        [0.0, 1.0, 2.0, 3.0]
    ]  # rank 0 to the last
    assert [outcome.reached(r) for r in range(n)] == [["started"]] * n
    assert outcome.exited == [True] * n  # let go, they ended by themselves: nothing was killed
    assert [p.strip() for p in outcome.printed] == [f"hello from rank {r}" for r in range(n)]
    assert (
        outcome.startup_s is not None
        and outcome.elapsed_s is not None
        and outcome.failure_order == []
    )
    # what the ranks started went with them, and nothing is left behind
    assert _all_gone_within([r["child"] for r in results] + [r["pid"] for r in results], 5)
    assert mp.active_children() == [] and list(temp_folder.iterdir()) == []


def _environment(rank, world_size, name):
    return os.environ.get(name)


def test_ranks_take_the_environment_at_the_launch_and_start_without_importing_torch(monkeypatch):
    """Ranks are forked from a forkserver started once (it imported torch then): each launch still
    gives them the environment the notebook has now, and starts them in well under a second."""
    monkeypatch.setenv("COURSE_TEST_VALUE", "first")
    assert (
        distributed.launch(_environment, 2, backend="gloo", args=("COURSE_TEST_VALUE",))
        == ["first"] * 2
    )
    monkeypatch.setenv("COURSE_TEST_VALUE", "second")
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    outcome = distributed.supervise(
        _environment, 2, backend="gloo", args=("COURSE_TEST_VALUE",), env={"NCCL_DEBUG": "WARN"}
    )
    assert outcome.results == ["second"] * 2, outcome.describe()
    assert (
        distributed.launch(
            _environment, 2, backend="gloo", args=("NCCL_DEBUG",), env={"NCCL_DEBUG": "WARN"}
        )
        == ["WARN"] * 2
    )
    if forkserver.context().get_start_method() == "forkserver":
        assert outcome.startup_s < 1.5, (
            f"start-up took {outcome.startup_s} s: a fork, not an import of torch"
        )


def _fails_on_last_rank(rank, world_size):
    if rank == world_size - 1:
        raise ValueError("the last rank is unhappy")
    time.sleep(60)  # the others would wait: they must be stopped, not waited for


def test_an_exception_in_a_worker_is_reported_with_its_rank(temp_folder):
    start = time.monotonic()
    with pytest.raises(distributed.WorkerError, match="rank 1 of 2 .gloo. raised:") as caught:
        distributed.launch(_fails_on_last_rank, 2, backend="gloo", timeout_s=60)
    assert "the last rank is unhappy" in str(caught.value)
    assert caught.value.rank == 1
    outcome = caught.value.outcome
    assert outcome.status == ["stopped", "raised"] and outcome.failure_order == [1]
    assert outcome.elapsed_s < distributed.FAILURE_GRACE_S + distributed.DEATH_NEWS_S + 1.0
    assert time.monotonic() - start - outcome.startup_s < 15  # stopped, not waited for (60 s)
    assert list(temp_folder.iterdir()) == []  # removed after a failure too


def _dies_in_a_collective(rank, world_size, how):
    import os
    import signal

    dist.barrier()  # every rank has joined: the others fail only because this one dies
    if rank == world_size - 1:
        if how == "SIGKILL":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)
    dist.all_reduce(torch.ones(4))  # waits for the rank that died: cut off, it raises or hangs
    return rank


@pytest.mark.parametrize(
    ("world_size", "how", "words"),
    [
        (2, "exit", "exited with code 3"),
        (4, "SIGKILL", "died with SIGKILL"),
    ],
)
def test_a_rank_that_dies_is_named_with_its_exit_code_or_signal(world_size, how, words):
    outcome = distributed.supervise(
        _dies_in_a_collective, world_size, backend="gloo", timeout_s=60, args=(how,)
    )
    last = world_size - 1
    assert outcome.status[last] == "died" and outcome.errors[last] == f"{words} before returning"
    assert all(s in ("raised", "stopped") for s in outcome.status[:last]), outcome.describe()
    assert outcome.failure_order[0] == last and outcome.reason.startswith(f"rank {last} {words}")
    assert outcome.elapsed_s < distributed.FAILURE_GRACE_S + distributed.DEATH_NEWS_S + 1.0
    with pytest.raises(
        distributed.WorkerError, match=f"rank {last} of {world_size} .gloo. {words}"
    ) as caught:
        outcome.raise_for_status()
    assert caught.value.rank == last


def _wait_on_own_child(rank, world_size):
    """Rank 1 starts a child and waits for it: a hang that only the deadline ends. (A recv whose
    send never comes, as notebook 06 shows, is not deterministic here: when rank 0's side of the
    gloo pair goes away first, the recv raises "Connection closed by peer" before the deadline.)"""
    import subprocess

    if rank == 1:
        child = subprocess.Popen(["sleep", "120"])
        distributed.mark(f"child {child.pid}")
    distributed.mark("before wait")
    if rank == 1:
        child.wait()  # 120 s, far past the deadline; no peer can cut it short
        distributed.mark("after wait")
    return rank


@linux_only
def test_a_hanging_rank_is_stopped_at_the_deadline_with_what_it_started():
    timeout_s = 2.0
    start = time.monotonic()
    with pytest.raises(
        distributed.LaunchTimeout, match=r"ranks \[1\] .* within timeout_s=2 s"
    ) as caught:
        distributed.launch(_wait_on_own_child, 2, backend="gloo", timeout_s=timeout_s)
    outcome = caught.value.outcome
    returned = time.monotonic()
    assert outcome.status == ["returned", "stopped"]
    assert outcome.exited == [False, False]  # the stopped rank and the one waiting for it: killed
    assert outcome.reached(1)[1:] == ["before wait"]
    # Stopped at the deadline: not before it, and within a second after it (the parent's wake-up).
    # Start-up is left out of every bound: under heavy load it alone can take half a minute.
    assert timeout_s <= outcome.elapsed_s < timeout_s + 1.0
    assert (
        returned - start - outcome.startup_s < timeout_s + 10
    )  # the kill and the collection are quick
    child = int(outcome.reached(1)[0].split()[1])
    assert _all_gone_within([child], 5), "the hanging rank's child outlived it"


def test_a_start_up_timeout_is_reported_with_its_value(temp_folder):
    # 1 ms: less than forking two ranks and joining them in a group takes (tens of ms at least)
    outcome = distributed.supervise(
        _nothing, 2, backend="gloo", timeout_s=60, startup_timeout_s=0.001
    )
    assert outcome.status == ["stopped", "stopped"] and outcome.startup_s is None
    assert 0.001 <= outcome.elapsed_s < 1.0
    assert "startup_timeout_s=0.001 s" in outcome.reason
    with pytest.raises(
        distributed.LaunchTimeout, match=r"within startup_timeout_s=0.001 s .* stopped after 0.\d s"
    ):
        outcome.raise_for_status()
    assert mp.active_children() == [] and list(temp_folder.iterdir()) == []


def test_an_interrupt_leaves_no_rank_nor_folder_behind(temp_folder, monkeypatch):
    pids = []

    def interrupted(run, startup_timeout_s, timeout_s):
        pids.extend(rank.process.pid for rank in run.ranks)
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed.supervisor, "_watch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        distributed.supervise(_nothing, 2, backend="gloo")
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)
    assert mp.active_children() == [] and list(temp_folder.iterdir()) == []


def _store_greeting(rank, world_size):
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=10),
    )
    return store.get("greeting").decode()


def test_ranks_meet_at_the_store_the_launcher_serves_before_they_start(monkeypatch):
    """torchrun's way: the launcher serves the store, so no rank waits for rank 0 to serve it."""
    served = []

    def serve_and_greet(world_size, patience_s):
        store = supervisor_serve(world_size, patience_s)
        store.set("greeting", "hello from the launcher")
        served.append(store.port)
        return store

    supervisor_serve = distributed.supervisor._serve_store
    monkeypatch.setattr(distributed.supervisor, "_serve_store", serve_and_greet)
    outcome = distributed.supervise(_store_greeting, 2, backend="gloo", timeout_s=20)
    assert outcome.results == ["hello from the launcher"] * 2, outcome.describe()
    assert len(served) == 1 and served[0] > 0  # a port the system picked


def test_a_failure_while_launching_removes_the_folder(temp_folder, monkeypatch):
    def no_port(world_size, patience_s):
        raise OSError("no free port")

    monkeypatch.setattr(distributed.supervisor, "_serve_store", no_port)
    with pytest.raises(OSError, match="no free port"):
        distributed.supervise(_nothing, 2, backend="gloo")
    assert list(temp_folder.iterdir()) == []


_LAUNCHER = """
import sys

from helpers import distributed


def worker(rank, world_size, folder):
    import os, pathlib, subprocess, time

    child = subprocess.Popen(["sleep", "120"])
    path = pathlib.Path(folder, f"rank{rank}")
    path.with_suffix(".tmp").write_text(f"{os.getpid()} {child.pid}")
    path.with_suffix(".tmp").rename(path.with_suffix(".pids"))
    time.sleep(120)


if __name__ == "__main__":
    distributed.supervise(worker, 2, backend="gloo", timeout_s=120, args=(sys.argv[1],))
"""


@linux_only
def test_no_rank_outlives_its_parent(tmp_path):
    """A notebook kernel killed while its ranks run: the ranks, and what they started, end too."""
    script, folder = tmp_path / "launcher.py", tmp_path / "pids"
    script.write_text(_LAUNCHER)
    folder.mkdir()
    # Its stderr goes to a file: once it is killed, multiprocessing's resource tracker says (rightly)
    # that it cleaned up the launcher's semaphores.
    with (tmp_path / "launcher.stderr").open("wb") as stderr:
        parent = subprocess.Popen(
            [sys.executable, str(script), str(folder)],
            cwd=ROOT,
            stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        end = (
            time.monotonic() + 150
        )  # start-up under heavy load; the ranks write their pids at once after it
        while (
            len(list(folder.glob("*.pids"))) < 2
            and time.monotonic() < end
            and parent.poll() is None
        ):
            time.sleep(0.1)
        pids = [int(pid) for path in folder.glob("*.pids") for pid in path.read_text().split()]
        assert len(pids) == 4, (
            f"the ranks did not start (launcher exit code {parent.poll()}):\n"
            f"{(tmp_path / 'launcher.stderr').read_text()[-3000:]}"
        )
        assert not any(_gone(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    assert _all_gone_within(pids, 10), [pid for pid in pids if not _gone(pid)]


# ---------------------------------------------------------------- drawing


def test_draw_before_after_draws_one_row_per_collective():
    data = {
        "broadcast": {
            "before": [[1, 2, 3], [0, 0, 0]],
            "after": [[1, 2, 3], [1, 2, 3]],
            "call": "broadcast(t, src=0)",
        },
        "gather": {"before": [[0, 1], [1, 2]], "after": [[[0, 1], [1, 2]], None]},
    }
    fig = plotting.draw_before_after(data, title="test")
    assert len(fig.axes) == 4
    with pytest.raises(ValueError):
        plotting.draw_before_after({"x": {"before": [1], "after": [1, 2]}}, title="bad")
    with pytest.raises(ValueError):
        plotting.draw_before_after({}, title="empty")


# ---------------------------------------------------------------- NCCL (two GPUs)


def _nccl_all_reduce(rank, world_size):
    device = distributed.rank_device()
    t = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(t)
    return {"device": str(device), "values": sorted(set(t.tolist()))}


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_all_reduce_on_two_gpus():
    results = distributed.launch(_nccl_all_reduce, 2, backend="nccl", timeout_s=120)
    assert [r["device"] for r in results] == ["cuda:0", "cuda:1"]
    assert [r["values"] for r in results] == [[3.0], [3.0]]


def _connect_pair(rank, device):
    """One matched send/recv between ranks 0 and 1: NCCL connects the pair."""
    warm = torch.zeros(3, device=device)
    if rank == 0:
        dist.send(warm, dst=1)
    else:
        dist.recv(warm, src=0)
    torch.cuda.synchronize()


def _nccl_missing_send(rank, world_size):
    device = distributed.rank_device()
    _connect_pair(rank, device)
    distributed.mark("warmed up")
    if rank == 1:
        t = torch.empty(3, device=device)
        dist.recv(t, src=0)  # no matching send
        distributed.mark("recv returned")
        t.tolist()  # the host waits for data that never comes
        distributed.mark("data read")
    return rank


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_missing_send_ends_within_its_timeout():
    timeout_s = 5.0
    start = time.monotonic()
    outcome = distributed.supervise(_nccl_missing_send, 2, backend="nccl", timeout_s=timeout_s)
    assert outcome.status == ["returned", "stopped"], outcome.describe()
    assert outcome.reached(1)[0] == "warmed up"  # notebook 06 shows where it stopped after that
    assert outcome.elapsed_s < timeout_s + 1.0
    assert time.monotonic() - start < timeout_s + 120


def _nccl_unmatched_irecv(rank, world_size):
    device = distributed.rank_device()
    _connect_pair(rank, device)
    if rank == 1:
        dist.irecv(torch.empty(3, device=device), src=0)  # never matched, never waited for
    return rank


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_ranks_with_a_receive_never_matched_still_end_by_themselves():
    """destroy_process_group never returned in such a group (2xH200, torch 2.11), so the ranks
    were killed after TEARDOWN_S; they end without it, at once."""
    outcome = distributed.supervise(_nccl_unmatched_irecv, 2, backend="nccl", timeout_s=60)
    assert outcome.status == ["returned", "returned"], outcome.describe()
    assert outcome.exited == [True, True], outcome.describe()


def _nccl_wait_timeout(rank, world_size):
    device = distributed.rank_device()
    if rank == 1:
        work = dist.irecv(torch.empty(3, device=device), src=0)
        distributed.mark("waiting")
        try:
            work.wait(timeout=timedelta(seconds=2))
        except Exception as err:  # noqa: BLE001 - the point is that it raises
            distributed.mark("wait raised")
            return type(err).__name__
        distributed.mark("wait returned")
        return "wait returned"
    time.sleep(5)
    return None


@pytest.mark.gpu2
@needs_two_gpus
def test_nccl_wait_with_timeout_on_a_missing_send_is_bounded_by_the_launcher():
    """wait(timeout=2 s) on a recv nobody sends: whatever NCCL does with that timeout - raise, end the
    process (its watchdog), or never give the host back (2xH200, torch 2.11: seen 2026-11-21) - the
    launcher's deadline bounds it and the Outcome says which it was. A wait that returns is wrong."""
    deadline_s = 10.0
    start = time.monotonic()
    outcome = distributed.supervise(_nccl_wait_timeout, 2, backend="nccl", timeout_s=deadline_s)
    print(outcome.describe())
    assert time.monotonic() - start - (outcome.startup_s or 0.0) < deadline_s + 15, (
        outcome.describe()
    )
    case = outcome.status[1]
    if case == "returned":  # the wait raised at its timeout and the worker caught it
        assert outcome.reached(1) == ["waiting", "wait raised"], outcome.describe()
        assert outcome.status[0] == "returned" and outcome.elapsed_s < deadline_s
    elif case == "stopped":  # the wait kept the host, or irecv itself did while NCCL connects the
        # pair lazily and the peer never comes (2xH200, torch 2.11: seen 2026-11-23): the deadline ended it
        assert outcome.reached(1) in ([], ["waiting"]) and outcome.reason.startswith("the deadline")
        assert (
            outcome.status[0] == "returned" and deadline_s <= outcome.elapsed_s < deadline_s + 1.0
        )
    else:  # NCCL ended the process itself: named with how it ended, before the deadline
        assert case == "died" and outcome.failure_order[0] == 1, outcome.describe()
        assert (
            outcome.errors[1].startswith(("died with", "exited with code"))
            and outcome.elapsed_s < deadline_s
        )


_START_FORKSERVER = """
import os, sys, time
from helpers import forkserver

def server_running():  # a child of ours runs the forkserver (once its exec is done)
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            for pid in f.read().split():
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"multiprocessing.forkserver import main" in f.read():
                        return True
    return False

started = forkserver.start()
end = time.monotonic() + 10
while not server_running() and time.monotonic() < end:
    time.sleep(0.01)
print(started, "torch" in sys.modules, server_running())
"""


@linux_only
def test_the_forkserver_starts_in_the_background_without_importing_torch_here():
    """Notebook 06 starts the ranks' server first thing, so its import of torch runs beside the
    notebook's: start() must return with the server started and torch not imported here."""
    done = subprocess.run(
        [sys.executable, "-c", _START_FORKSERVER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["True", "False", "True"], done.stdout + done.stderr


def _three_rounds(rank, world_size):
    from helpers.distributed import spin_barrier

    barrier = spin_barrier.on_one_host(rank, world_size)
    for _ in range(3):
        barrier.wait(timeout_s=20)
    return barrier.round


def test_the_spin_barrier_holds_two_rank_processes_of_one_host_together():
    """-G's host barrier across real rank processes (gloo here): both map one page and pass three
    rounds, and no page is left in /dev/shm."""
    before = {f for f in os.listdir("/dev/shm") if f.startswith("datamove-")}
    assert distributed.launch(_three_rounds, 2, backend="gloo") == [3, 3]
    assert {f for f in os.listdir("/dev/shm") if f.startswith("datamove-")} <= before
