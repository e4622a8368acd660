"""Per-child cgroups: the cap, the exact peak, escaped processes, and cleanup (skipped where none can be made)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spoolparse._os.cgroup import ENFORCEMENTS, Placement, wait_removed
from spoolparse.runner import Task, run_many

from .helpers import ANSWERS
from .runner_support import HOG, FixedProbe, MiB, marked_pids, marker, one_each, our_cgroups, wait_gone

WHERE = Placement.detect()
pytestmark = pytest.mark.skipif(
    WHERE.kind is None,
    reason="needs a writable memory cgroup: root with /sys/fs/cgroup mounted read-write, or a delegated "
    "cgroup v2 subtree",
)
BIG = 1 << 40


def test_cgroup_caps_a_hog_and_reports_the_exact_peak() -> None:
    tasks = [
        Task(argv=[*HOG, "--mib", "100", "--hold", "2"], id="over", memory_limit=40 * MiB),
        Task(argv=[*HOG, "--mib", "20"], id="under", memory_limit=80 * MiB),
    ]
    outs = one_each(run_many(tasks, max_concurrent=2, memory_probe=FixedProbe(BIG)), ["over", "under"])
    kind = WHERE.enforcement
    assert outs["over"].verdict == "killed_memory" and outs["over"].enforcement == kind
    assert outs["over"].peak_source == "cgroup"
    assert outs["over"].peak_memory is not None and outs["over"].peak_memory <= 40 * MiB
    peak_name = "memory.peak" if WHERE.kind == "v2" else "memory.max_usage_in_bytes"
    assert outs["over"].error is not None and f"{peak_name} {outs['over'].peak_memory}" in outs["over"].error
    assert f"over its memory limit {40 * MiB} bytes (40 MiB, the task's memory_limit; {kind})" in outs["over"].error
    assert outs["under"].ok and outs["under"].enforcement == kind
    assert outs["under"].peak_memory is not None and 20 * MiB <= outs["under"].peak_memory <= 80 * MiB
    assert our_cgroups() == []


def test_every_task_is_in_its_cgroup_before_exec() -> None:
    # the exec'd shell itself (not a later fork) must already be inside: it reads its own cgroup first thing;
    # with a memory limit or without one, a cgroup of its own is what ends whatever it starts with it
    check = ["sh", "-c", "grep -q /spoolparse- /proc/$$/cgroup"]
    tasks = [Task(argv=check, id="capped", memory_limit=64 * MiB), Task(argv=check, id="plain")]
    # (its exit status is the point: it prints nothing)
    outs = one_each(run_many(tasks, memory_probe=FixedProbe(BIG), allow_empty_answer=True), ["capped", "plain"])
    assert outs["capped"].ok, outs["capped"]
    assert outs["plain"].ok, outs["plain"]
    watched = one_each(run_many([Task(argv=check, id="w")], enforce="watchdog", memory_probe=FixedProbe(BIG),
                                allow_empty_answer=True), ["w"])
    assert watched["w"].verdict == "failed" and watched["w"].enforcement == "none"  # the one way to have none


def test_timeout_kills_a_process_that_escaped_the_group(tmp_path: Path) -> None:
    token, env = marker()
    pid_file = tmp_path / "pid"
    task = Task(
        argv=[*HOG, "--escape", "--pid-file", str(pid_file), "--mib", "1", "--hold", "60"],
        id="escape", timeout=1.0, env=env,
    )
    outs = one_each(run_many([task], enforce="cgroup", grace=0.3, memory_probe=FixedProbe(BIG)), ["escape"])
    assert outs["escape"].verdict == "timeout"
    escaped = int(pid_file.read_text())
    assert escaped != 0
    assert wait_gone(token) == []
    assert our_cgroups() == []


def test_escaped_leftovers_of_a_finished_task_are_killed_too(tmp_path: Path) -> None:
    token, env = marker()
    task = Task(argv=[*HOG, "--escape", "--mib", "1"], id="left", env=env)
    t0 = time.monotonic()
    outs = one_each(run_many([task], enforce="cgroup", grace=0.3, memory_probe=FixedProbe(BIG)), ["left"])
    assert outs["left"].ok
    assert time.monotonic() - t0 < 10
    assert wait_gone(token) == []
    assert our_cgroups() == []


def test_pids_max_stops_a_fork_bomb_early() -> None:
    bomb = Task(argv=["sh", "-c", "for i in $(seq 50); do sleep 5 & done; wait"], id="bomb")
    outs = one_each(
        run_many([bomb], enforce="cgroup", pids_max=10, timeout=8, grace=0.2, memory_probe=FixedProbe(BIG)), ["bomb"]
    )
    assert outs["bomb"].summary is not None
    assert "fork" in outs["bomb"].summary["stderr_tail"].lower() or "resource" in outs["bomb"].summary[
        "stderr_tail"
    ].lower()
    if WHERE.pids_parent is not None:  # where there is a pids controller, the outcome names it
        assert outs["bomb"].error is not None and "pids.max 10 reached" in outs["bomb"].error, outs["bomb"]
    assert our_cgroups() == []


def test_outcomes_name_the_enforcement_that_ran() -> None:
    assert WHERE.enforcement in ENFORCEMENTS and WHERE.enforcement == {"v2": "cgroup2", "v1": "cgroup1"}[WHERE.kind]
    tasks = [Task(argv=ANSWERS, id="capped", memory_limit=64 * MiB), Task(argv=ANSWERS, id="plain")]
    outs = one_each(run_many(tasks, memory_probe=FixedProbe(BIG)), ["capped", "plain"])
    assert outs["capped"].enforcement == WHERE.enforcement
    assert outs["plain"].enforcement == WHERE.enforcement  # contained by its cgroup, no limit in it
    assert outs["plain"].peak_source == "cgroup"


def test_stale_cgroups_of_a_dead_runner_are_removed() -> None:
    assert WHERE.memory_parent is not None
    # a pid no process can have (above pid_max), in our PID namespace: provably gone
    stale = os.path.join(WHERE.memory_parent, f"spoolparse-999999999-1-{os.stat('/proc/self/ns/pid').st_ino}-1")
    os.mkdir(stale)
    try:
        Placement.detect()
        assert not os.path.exists(stale)
    finally:
        if os.path.exists(stale):
            os.rmdir(stale)


def test_a_cgroup_with_one_nested_in_it_is_killed_and_removed_whole() -> None:
    # a task that runs a runner of its own makes cgroups inside its task cgroup
    cg = WHERE.create(memory_limit=64 * MiB, pids_max=None)
    inner = os.path.join(cg.mem, "nested")
    os.mkdir(inner)
    p = subprocess.Popen(["sleep", "60"])
    try:
        with open(os.path.join(inner, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        assert p.pid in cg.procs()
        cg.remove()  # never waits: what is still dying is removed in the background
        assert wait_removed(10)
        assert p.wait(timeout=10) == -signal.SIGKILL
        assert not os.path.exists(cg.mem)
    finally:
        p.kill()
        p.wait()


def test_kill_9_of_the_batch_leaves_no_cgroup_and_no_escapee() -> None:
    # the guardian holds each task's cgroup directories: it kills their processes and removes them
    token, env = marker()
    escape = "setsid sh -c 'trap \"\" TERM; exec sleep 300' & exec sleep 300"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the batch that gets SIGKILLed
        try:
            tasks = [Task(argv=["sh", "-c", escape], id=str(i), env=env) for i in range(3)]
            for _ in run_many(tasks, enforce="cgroup", max_concurrent=3, memory_probe=FixedProbe(BIG)):
                pass
        finally:
            os._exit(1)
    assert WHERE.memory_parent is not None
    parent = WHERE.memory_parent

    def theirs() -> list[str]:
        return [n for n in os.listdir(parent) if n.startswith(f"spoolparse-{pid}-")]

    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (len(theirs()) < 3 or len(marked_pids(token)) < 6):
            time.sleep(0.05)
        assert len(theirs()) == 3 and len(marked_pids(token)) >= 6
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    deadline = time.monotonic() + 10
    while theirs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert theirs() == []
    assert wait_gone(token, 10) == []


def _cgroup_dir(proc_cgroup: str) -> str:
    """The task's memory cgroup directory, from what it read in its ``/proc/self/cgroup``."""
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if WHERE.kind == "v2" and controllers == "":
            return "/sys/fs/cgroup" + path
        if WHERE.kind == "v1" and "memory" in controllers.split(","):
            return "/sys/fs/cgroup/memory" + path
    raise AssertionError(proc_cgroup)


FREEZER = "/sys/fs/cgroup/freezer"


@pytest.mark.slow
@pytest.mark.skipif(WHERE.kind != "v1" or not os.access(FREEZER, os.W_OK),
                    reason="needs the cgroup v1 freezer (root on a v1 host) to hold a process in a task's cgroup")
def test_a_cgroup_whose_processes_take_long_to_go_is_removed_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process in a task's cgroup that outlives SIGKILL for a while (frozen here; a fork bomb's hundreds take
    their time to die too): the cgroup's removal is retried until it is empty, past the outcome, and the batch
    ends only once it is gone. The guardian holds the path until then (it would remove it if we died)."""
    import threading

    from spoolparse._os.guardian import guardian

    released: list[tuple[str, bool]] = []
    real_release = guardian.release

    def release(pgid: int | None, cgroups: list[str]) -> None:
        released.extend((d, os.path.exists(d)) for d in cgroups)
        real_release(pgid, cgroups)

    monkeypatch.setattr(guardian, "release", release)
    where = tmp_path / "cgroup"
    task = Task(argv=["sh", "-c", f"cat /proc/self/cgroup > {where}.part; mv {where}.part {where}; sleep 0.5"], id="t")
    ice = os.path.join(FREEZER, f"spoolparse-test-{os.getpid()}")
    os.mkdir(ice)
    frozen = subprocess.Popen(["sleep", "60"])
    outcome_seen = threading.Event()
    state: dict[str, str] = {}

    def freeze_one_in_the_task() -> None:
        while not where.exists():
            time.sleep(0.01)
        d = state["dir"] = _cgroup_dir(where.read_text())
        Path(ice, "cgroup.procs").write_text(str(frozen.pid))
        Path(ice, "freezer.state").write_text("FROZEN")
        Path(d, "cgroup.procs").write_text(str(frozen.pid))
        outcome_seen.wait(60)
        time.sleep(0.3)
        Path(ice, "freezer.state").write_text("THAWED")  # now the SIGKILL it got takes it

    helper = threading.Thread(target=freeze_one_in_the_task)
    helper.start()
    try:
        batch = run_many([task], enforce="cgroup", grace=0.2, memory_probe=FixedProbe(BIG))
        outs = []
        for o in batch:
            outs.append(o)
            d = state["dir"]
            assert os.path.exists(d) and frozen.poll() is None  # the outcome came while it was still there
            outcome_seen.set()
        assert [o.id for o in outs] == ["t"]
        assert frozen.wait(10) in (-signal.SIGTERM, -signal.SIGKILL)  # what it was sent while frozen
        assert not os.path.exists(d)  # gone by the batch's end
        assert our_cgroups() == []
        assert [r for r in released if r[0] == d] == [(d, False)]  # released once, and only once gone
    finally:
        outcome_seen.set()
        helper.join(30)
        with contextlib.suppress(OSError):
            Path(ice, "freezer.state").write_text("THAWED")
        frozen.kill()
        frozen.wait()
        os.rmdir(ice)


@pytest.mark.parametrize(
    ("kind", "limit", "events", "said"),
    [
        # memory.oom.group: the kernel counts the task's victim once when it picks it and again when it kills
        # the group, so a group kill of one process is 2 oom_kill and 1 oom_group_kill
        ("v2", 64 * MiB, "oom 1\noom_kill 2\noom_group_kill 1\n", "the kernel's OOM killer ended 1 process"),
        ("v2", 64 * MiB, "oom 1\noom_kill 4\noom_group_kill 1\n", "the kernel's OOM killer ended 3 processes"),
        ("v2", 64 * MiB, "oom 2\noom_kill 5\noom_group_kill 2\n", "the kernel's OOM killer ended 3 processes"),
        # a kernel without the group counter: the processes cannot be counted, and no number is made up
        ("v2", 64 * MiB, "oom 1\noom_kill 2\n", "the kernel's OOM killer ended the task (memory.oom.group)"),
        ("v1", 64 * MiB, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "the kernel's OOM killer ended 2 processes"),
        ("v1", 64 * MiB, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", "the kernel's OOM killer ended 1 process"),
    ],
)
def test_the_oom_note_counts_processes_not_kill_events(
    tmp_path: Path, kind: str, limit: int, events: str, said: str
) -> None:
    import shutil

    from spoolparse._os.cgroup import ChildCgroup

    cg = ChildCgroup(Placement(kind, str(tmp_path), None), memory_limit=limit, pids_max=None)
    try:
        events_file = "memory.events" if kind == "v2" else "memory.oom_control"
        peak_file = "memory.peak" if kind == "v2" else "memory.max_usage_in_bytes"
        Path(cg.mem, events_file).write_text(events)
        Path(cg.mem, peak_file).write_text(str(limit))
        note = cg.memory_note()
        assert said in note, note
        assert "OOM killer ended 2 processes" not in note or said.endswith("2 processes")
    finally:
        shutil.rmtree(cg.mem)
