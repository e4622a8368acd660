"""The watchdog (no cgroup): every process of a task counts against its memory limit, also one that a double fork
took out of the agent's process tree (reparented away, still in the task's session). Real processes."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest

from spoolparse.runner import Task, run_many
from spoolparse.runner.memory import sample_trees

from .runner_support import HOG, FixedProbe, MiB, marked_pids, marker, one_each, wait_for, wait_gone

BIG = 1 << 40


def _double_fork(hog_mib: int, env: dict[str, str]) -> list[str]:
    """A task that starts a hog through a double fork (the subshell exits: the hog's parent is no longer in the
    task's tree), then waits; the hog keeps the task's session and process group."""
    hog = " ".join([*HOG, "--mib", str(hog_mib), "--hold", "8"])
    return ["sh", "-c", f"echo '{{\"type\":\"result\",\"result\":\"done\"}}'; ({hog} > /dev/null &); sleep 8"]


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def test_tree_sampling_counts_a_double_forked_descendant() -> None:
    token, env = marker()
    p = subprocess.Popen(_double_fork(60, env), env={**os.environ, **env}, start_new_session=True,
                         stdout=subprocess.DEVNULL)
    try:
        def hog_ready() -> bool:  # out of the task's tree, its memory touched
            hogs = [pid for pid in marked_pids(token) if pid != p.pid and _ppid(pid) != p.pid]
            try:
                return any(psutil.Process(pid).memory_info().rss >= 60 * MiB for pid in hogs)
            except psutil.Error:
                return False

        assert wait_for(hog_ready, 6)
        assert sample_trees([p.pid])[p.pid] >= 60 * MiB
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        wait_gone(token)


@pytest.mark.slow
def test_the_watchdog_limit_kills_a_task_whose_hog_double_forked() -> None:
    token, env = marker()
    tasks = [Task(argv=_double_fork(300, env), id="doublefork", env=env, memory_limit=100 * MiB)]
    outs = one_each(run_many(tasks, enforce="watchdog", memory_probe=FixedProbe(BIG)), ["doublefork"])
    out = outs["doublefork"]
    assert out.enforcement == "watchdog"
    assert out.verdict == "killed_memory", out
    assert wait_gone(token, 10) == []


@pytest.mark.parametrize("where", ["task", "batch"])
@pytest.mark.parametrize("says", ["nothing", "a stream cut short"])
def test_a_memory_kill_names_the_limit_and_where_it_came_from(where: str, says: str) -> None:
    """The error says which limit was passed (its bytes, set by the task or the batch), whatever the run's own
    error says (a codex stream cut short by the kill says only that)."""
    limit = 48 * MiB
    hog = " ".join([*HOG, "--mib", "120", "--step", "8", "--hold", "5"])
    started = "echo '{\"type\":\"thread.started\",\"thread_id\":\"t\"}'; " if says != "nothing" else ""
    task = Task(argv=["sh", "-c", f"{started}exec {hog} > /dev/null"], id="over",
                memory_limit=limit if where == "task" else None, provider="codex" if says != "nothing" else None)
    batch = {"memory_limit": limit} if where == "batch" else {}
    outs = one_each(run_many([task], enforce="watchdog", memory_probe=FixedProbe(BIG), sample_interval=0.03,
                             **batch), ["over"])
    out = outs["over"]
    assert out.verdict == "killed_memory" and out.error is not None
    assert out.error.startswith(f"killed: process tree over its memory limit {limit} bytes (48 MiB, "), out.error
    named = "the task's memory_limit" if where == "task" else "the batch's memory_limit (--memory-limit)"
    assert named in out.error and "watchdog" in out.error
    if says != "nothing":
        assert "turn.completed" in out.error  # the run's own error is kept after it
