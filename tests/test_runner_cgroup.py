"""Per-child cgroups: the cap, the exact peak, escaped processes, and cleanup (skipped where none can be made)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spoolparse.runner import Task, run_many
from spoolparse.runner.cgroup import ENFORCEMENTS, Placement

from .runner_support import HOG, FixedProbe, MiB, marker, one_each, our_cgroups, wait_gone

WHERE = Placement.detect()
pytestmark = pytest.mark.skipif(WHERE.kind is None, reason="no writable memory cgroup here")
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
    assert outs["under"].ok and outs["under"].enforcement == kind
    assert outs["under"].peak_memory is not None and 20 * MiB <= outs["under"].peak_memory <= 80 * MiB
    assert our_cgroups() == []


def test_the_child_is_in_its_cgroup_before_exec() -> None:
    # the exec'd shell itself (not a later fork) must already be inside: it reads its own cgroup first thing
    check = ["sh", "-c", "grep -q /spoolparse- /proc/$$/cgroup"]
    tasks = [Task(argv=check, id="capped", memory_limit=64 * MiB), Task(argv=check, id="plain")]
    outs = one_each(run_many(tasks, memory_probe=FixedProbe(BIG)), ["capped", "plain"])
    assert outs["capped"].ok, outs["capped"]
    assert outs["plain"].verdict == "failed"  # no limit, no cgroup: the check itself can fail


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
    tasks = [Task(argv=["true"], id="capped", memory_limit=64 * MiB), Task(argv=["true"], id="plain")]
    outs = one_each(run_many(tasks, memory_probe=FixedProbe(BIG)), ["capped", "plain"])
    assert outs["capped"].enforcement == WHERE.enforcement
    assert outs["plain"].enforcement == "none"


def test_stale_cgroups_of_a_dead_runner_are_removed() -> None:
    assert WHERE.memory_parent is not None
    stale = os.path.join(WHERE.memory_parent, "spoolparse-999999999-1")
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
        assert cg.remove()
        assert p.wait(timeout=10) == -signal.SIGKILL
        assert not os.path.exists(cg.mem)
    finally:
        p.kill()
        p.wait()
