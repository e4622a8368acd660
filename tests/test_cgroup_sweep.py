"""The sweep of task cgroups left by runners that died: only what is provably abandoned goes.

A runner in another PID namespace (a container sharing the cgroup parent, ``unshare --pid``) names its cgroups
after a pid that means another process here, or none: its live tasks must survive a runner started on the
host. Real namespaces, real processes, checked in ``/proc`` and the cgroup hierarchy.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spoolparse._os.cgroup import Placement, sweep_stale

from .helpers import BOOTTIME, identity_of_child, time_namespaces
from .runner_support import escapee_tag, sleeping, wait_for

WHERE = Placement.detect()
pytestmark = pytest.mark.skipif(
    WHERE.kind is None or os.geteuid() != 0,
    reason="needs root and a writable memory cgroup (task cgroups to sweep)",
)

# In the namespace: burn pids until the next child is WANT (a number no process has on the host), and have that
# child run the batch: its cgroups are then named after a pid that looks dead from the host.
_INNER = """
import os, sys
want, tasks, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while True:
    pid = os.fork()
    if pid == 0:
        if os.getpid() == want:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.execv(sys.executable, [sys.executable, "-m", "spoolparse", "batch", tasks])
        os._exit(0)
    if pid >= want:
        break
    os.waitpid(pid, 0)
os.waitpid(pid, 0)
"""


def _free_pid() -> int:
    """A pid number no process of the host has now (and well above what a fresh namespace has used)."""
    for pid in range(400, 4000):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    pytest.skip("needs a pid number below 4000 that no process of the host has")


def _named(pid: int) -> list[str]:
    parent = WHERE.memory_parent
    assert parent is not None
    return sorted(os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f"spoolparse-{pid}-"))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) to make a PID namespace")
def test_a_host_sweep_spares_the_live_tasks_of_a_runner_in_another_pid_namespace(tmp_path: Path) -> None:
    tag = escapee_tag()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "victim", "cmd": ["sh", "-c", f"echo {{}}; exec sleep {tag}"]}) + "\n")
    want = _free_pid()
    ns = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", _INNER, str(want), str(tasks),
         str(tmp_path / "inner.out")],
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: sleeping(tag) and _named(want), 60), (tmp_path / "inner.out").read_text()
        victim = sleeping(tag)
        assert not os.path.exists(f"/proc/{want}"), "the pid number was taken on the host meanwhile"
        theirs = _named(want)
        # a runner starting on the host: it probes the placement, which sweeps what it takes for stale
        Placement.detect()
        assert not set(sweep_stale(os.path.dirname(theirs[0]))) & set(theirs)
        assert sleeping(tag) == victim
        assert _named(want) == theirs
        for d in theirs:
            with open(os.path.join(d, "cgroup.procs")) as f:
                assert set(victim) <= {int(x) for x in f.read().split()}
        # once nothing is left in that namespace, what its runner left is provably abandoned: the sweep takes it
        os.killpg(ns.pid, signal.SIGKILL)
        ns.wait()
        assert wait_for(lambda: not os.path.exists(f"/proc/{victim[0]}"), 10)
        # its guardian died with the namespace: the cgroup is left (made empty by the namespace's end)
        Placement.detect()
        assert _named(want) == []
    finally:
        with contextlib.suppress(OSError):
            os.killpg(ns.pid, signal.SIGKILL)
        ns.wait()
        for pid in sleeping(tag):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for d in _named(want):
            with contextlib.suppress(OSError):
                os.rmdir(d)


@pytest.mark.parametrize("clock", [
    pytest.param([], id="our clock"),
    pytest.param(BOOTTIME, id="time namespace",
                 marks=pytest.mark.skipif(not time_namespaces(), reason="needs unshare --time (Linux 5.6)")),
])
@pytest.mark.parametrize("case", ["dead", "pid reused", "alive", "pid alone"])
def test_the_sweep_takes_a_cgroup_whose_runner_is_provably_gone_and_no_other(case: str, clock: list[str]) -> None:
    # "pid alone": the name of an older runner, a pid and nothing else: no evidence its runner is gone. A runner in
    # a time namespace of its own reads start times shifted by its clock's offset: it is the same process all
    # the same
    parent = WHERE.memory_parent
    assert parent is not None
    ident, p = identity_of_child(alive=case in ("pid reused", "alive"), clock=clock)
    if case == "pid reused":
        pid, start, ns = ident.split("-")
        ident = f"{pid}-{int(start) - 1}-{ns}"  # that pid's number, held now by a process started later
    name = f"spoolparse-{ident}-1" if case != "pid alone" else f"spoolparse-{p.pid}-1"
    d = os.path.join(parent, name)
    os.mkdir(d)
    try:
        swept = sweep_stale(parent)
        assert (d in swept) == (case in ("dead", "pid reused"))
        assert os.path.exists(d) == (case in ("alive", "pid alone"))
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(d)
        if p.returncode is None:
            assert p.stdin is not None
            p.stdin.close()
            p.wait()


def test_a_runner_names_its_cgroups_after_its_identity() -> None:
    from spoolparse._os.identity import identity

    cg = WHERE.create(memory_limit=None, pids_max=None)
    try:
        assert all(os.path.basename(d).startswith(f"spoolparse-{identity()}-") for d in cg.dirs)
        assert str(identity()).startswith(f"{os.getpid()}-")
    finally:
        cg.remove()
    assert wait_for(lambda: not any(os.path.exists(d) for d in cg.dirs), 10)


def test_identity_after_fork_is_the_child_s() -> None:
    from spoolparse._os.identity import identity

    mine = str(identity())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked child
        os.write(w, str(identity()).encode())
        os._exit(0)
    os.close(w)
    theirs = os.read(r, 200).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert theirs.startswith(f"{pid}-") and theirs != mine
    assert theirs.split("-")[2] == mine.split("-")[2]  # one namespace
