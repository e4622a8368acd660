"""Per-task cgroups on a real cgroup v2 hierarchy: the kernel's kill, throttling, pids, cgroup.kill, delegation.

These run as root from the root cgroup of a v2 kernel: on a host that mounts
cgroup v1 only, ``python tests/vm/run_cgroup2.py`` boots one under qemu and
runs them there. Children are shell tools (``dd``, ``sleep``) or ``python
-S`` where a test needs numbers from inside: under qemu's TCG every Python
start costs seconds. Anything that must run inside a cgroup of its own, or as
another user, runs in a forked copy of this process (no new interpreter).
"""

from __future__ import annotations

import json
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spoolparse._os.cgroup import CGROUP2, LEAF, WATCHDOG, Placement, wait_removed
from spoolparse._os.cgroupfs import v2_dir
from spoolparse.runner import Task, run_many
from spoolparse.runner.memory import HostMemory

from .runner_support import FixedProbe, MiB, marked_pids, marker, one_each, wait_gone

CG = "/sys/fs/cgroup"
BIG = 1 << 40
NOBODY = 65534


def _why_not() -> str | None:
    if not os.path.isfile(os.path.join(CG, "cgroup.controllers")):
        return "no cgroup v2 hierarchy at /sys/fs/cgroup (this host mounts cgroup v1)"
    offered = Path(CG, "cgroup.controllers").read_text().split()
    if not {"memory", "pids"} <= set(offered):
        return f"the v2 root offers {offered}, not memory and pids"
    if os.geteuid() != 0:
        return "needs root (it makes, delegates and removes cgroups)"
    if v2_dir() != CG:
        return "needs to start in the root cgroup (it makes sibling cgroups and moves processes)"
    return None


_WHY = _why_not()
#: Set by tests/vm/run_cgroup2.py in the guest: there, nothing may be skipped.
IN_VM = os.environ.get("SPOOLPARSE_VM") == "1"
pytestmark = [
    pytest.mark.cgroup2,
    pytest.mark.skipif(
        _WHY is not None and not IN_VM,
        reason=f"{_WHY}; run them in a v2 kernel under qemu: python tests/vm/run_cgroup2.py",
    ),
]


def test_this_kernel_offers_what_these_tests_need() -> None:
    assert _WHY is None, _WHY
    assert Placement.detect().kind == "v2"


def _ours(parent: str, pid: int) -> list[str]:
    return sorted(n for n in os.listdir(parent) if n.startswith(f"spoolparse-{pid}-"))


def _cgroup_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text().split("::", 1)[1].strip()


def in_child(fn: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Run ``fn`` in a forked copy of this process and return what it returns (or raise what it raised)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            res: tuple[str, Any] = ("ok", fn())
        except BaseException:
            res = ("err", traceback.format_exc())
        try:
            data = pickle.dumps(res)
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"the forked test body did not finish within {timeout} s")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "err":
        raise AssertionError(f"in the forked test body:\n{value}")
    return value


class Watch:
    """Counts, in a thread, the live processes carrying a marker token: ``most`` is the largest count seen."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.most = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._done.is_set():
            self.most = max(self.most, len(marked_pids(self.token)))
            time.sleep(0.05)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _scratch_cgroup(name: str) -> str:
    d = os.path.join(CG, f"test-{name}-{os.getpid()}")
    os.mkdir(d)
    return d


def _remove_tree(d: str) -> None:
    """Kill and remove a test cgroup and everything under it (deepest first)."""
    if not os.path.isdir(d):
        return
    for sub, _dirs, _files in sorted(os.walk(d), key=lambda t: -t[0].count("/")):
        with open(os.path.join(sub, "cgroup.kill"), "w") as f:
            f.write("1")
        for _ in range(200):
            try:
                os.rmdir(sub)
                break
            except OSError:
                time.sleep(0.01)


# -- memory -------------------------------------------------------------------------------------------------


def test_a_task_over_its_memory_limit_is_killed_by_the_kernel() -> None:
    # dd reads 200 MiB of zeros into one buffer: every page is touched, no Python start-up needed
    hog = ["dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1"]
    outs = one_each(
        run_many([Task(argv=hog, id="over", memory_limit=40 * MiB)], memory_probe=FixedProbe(BIG)), ["over"]
    )
    o = outs["over"]
    assert o.verdict == "killed_memory", o
    assert o.enforcement == CGROUP2
    assert o.signal == signal.SIGKILL
    assert o.peak_source == "cgroup" and o.peak_memory is not None
    assert 30 * MiB <= o.peak_memory <= 40 * MiB
    assert o.error is not None
    assert f"memory.peak {o.peak_memory}" in o.error
    assert "the kernel's OOM killer ended 1 process" in o.error, o.error  # dd alone (memory.oom.group counts it twice)
    assert _ours(CG, os.getpid()) == []


GROW = r"""
import json, os, sys, time
out = open(sys.argv[1], "w")
cg = "/sys/fs/cgroup" + open("/proc/self/cgroup").read().split("::", 1)[1].strip()
def rd(name):
    with open(os.path.join(cg, name)) as f:
        return f.read().strip()
def events():
    return dict((k, int(v)) for k, v in (l.split() for l in rd("memory.events").splitlines()))
def note(**kw):
    out.write(json.dumps(dict(kw, current=int(rd("memory.current")), events=events())) + "\n")
    out.flush()
note(phase="start", high=rd("memory.high"), max=rd("memory.max"), swap_max=rd("memory.swap.max"),
     oom_group=rd("memory.oom.group"), pids_max=rd("pids.max"))
high = int(rd("memory.high"))
blocks = []
t0 = time.monotonic()
while int(rd("memory.current")) < high + (1 << 20):   # 1 MiB at a time until just past memory.high
    b = bytearray(1 << 20)
    b[::4096] = b"x" * 256
    blocks.append(b)
note(phase="over_high", seconds=time.monotonic() - t0)
b = bytearray(200 << 20)  # now far past memory.max
b[::4096] = b"x" * len(range(0, len(b), 4096))
note(phase="survived")
"""


def test_memory_high_throttles_below_max_before_the_kernel_kills(tmp_path: Path) -> None:
    facts = tmp_path / "facts.ndjson"
    task = Task(argv=[sys.executable, "-S", "-c", GROW, str(facts)], id="grow", memory_limit=64 * MiB, timeout=120)
    o = one_each(run_many([task], memory_probe=FixedProbe(BIG)), ["grow"])["grow"]
    lines = [json.loads(line) for line in facts.read_text().splitlines()]
    start = lines[0]
    assert start["max"] == str(64 * MiB)
    assert start["high"] == str(48 * MiB)  # memory.high at 75 % of the limit
    assert start["swap_max"] == "0"
    assert start["oom_group"] == "1"
    assert start["pids_max"] == "512"  # the default pids.max
    over = lines[1]
    assert over["phase"] == "over_high"
    # the kernel throttled and reclaimed at memory.high while nothing was killed yet
    assert over["events"]["high"] > 0 and over["events"]["oom_kill"] == 0, over
    assert over["current"] < 64 * MiB
    assert [line["phase"] for line in lines] == ["start", "over_high"]  # it never got past memory.max
    assert o.verdict == "killed_memory" and o.enforcement == CGROUP2
    assert o.error is not None and "memory.high 50331648 reached" in o.error and "OOM killer" in o.error, o.error


# -- pids -----------------------------------------------------------------------------------------------------


def test_pids_max_contains_a_fork_bomb_and_the_outcome_says_so() -> None:
    token, env = marker()
    bomb = Task(argv=["sh", "-c", "while :; do sleep 60 & done"], id="bomb", env=env, timeout=60)
    with Watch(token) as seen:
        outs = one_each(
            run_many([bomb], enforce="cgroup", pids_max=24, grace=0.5, memory_probe=FixedProbe(BIG)), ["bomb"]
        )
    o = outs["bomb"]
    assert o.verdict != "ok" and o.enforcement == CGROUP2
    assert o.error is not None and "pids.max 24 reached" in o.error and "forks refused" in o.error, o
    assert 0 < seen.most <= 24
    assert wait_gone(token, 10) == []
    assert _ours(CG, os.getpid()) == []


# -- cgroup.kill ----------------------------------------------------------------------------------------------

ESCAPE = "setsid sh -c 'trap \"\" TERM; exec sleep 300' & exec sleep 300"


def test_a_timeout_ends_a_setsid_escapee_with_its_task() -> None:
    token, env = marker()
    task = Task(argv=["sh", "-c", ESCAPE], id="escape", env=env, timeout=5.0)
    with Watch(token) as seen:
        outs = one_each(run_many([task], enforce="cgroup", grace=0.5, memory_probe=FixedProbe(BIG)), ["escape"])
    assert seen.most >= 2  # the task and its escapee in a session of its own, which ignores SIGTERM
    assert outs["escape"].verdict == "timeout" and outs["escape"].enforcement == CGROUP2
    assert wait_gone(token, 10) == []
    assert _ours(CG, os.getpid()) == []


def test_cgroup_kill_reaches_processes_forked_during_the_kill() -> None:
    # a loop forking setsid children as fast as it can: walking cgroup.procs would race it, cgroup.kill does not
    token, env = marker()
    where = Placement.detect()
    assert where.kind == "v2"
    cg = where.create(memory_limit=None, pids_max=None)
    proc = subprocess.Popen(
        ["sh", "-c", "while :; do setsid sleep 300 & done"], env={**os.environ, **env}, preexec_fn=cg.preexec(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    cg.attached()
    try:
        deadline = time.monotonic() + 30
        while len(cg.procs()) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(cg.procs()) >= 10
        cg.kill(signal.SIGKILL)  # once
        deadline = time.monotonic() + 10
        while cg.procs() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cg.procs() == []
        assert wait_gone(token, 10) == []
    finally:
        proc.kill()
        proc.wait()
        cg.remove()  # what still dies is removed in the background, within the second it is given
        assert wait_removed(10) and not os.path.exists(cg.mem)


# -- delegation and admission ---------------------------------------------------------------------------------


def test_a_runner_in_a_delegated_cgroup_makes_task_cgroups_under_its_own_subtree() -> None:
    # the systemd user-slice case: a non-root user owns one cgroup (not the root) and runs in it
    slice_ = _scratch_cgroup("delegated")
    Path(slice_, "memory.max").write_text(str(512 * MiB))
    for name in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
        os.chown(os.path.join(slice_, name), NOBODY, NOBODY)

    def body() -> dict[str, Any]:
        Path(slice_, "cgroup.procs").write_text("0")
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        out = tempfile.mkdtemp(dir="/tmp")
        check = "cat /proc/self/cgroup > {}/$0; cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.max >> {}/$0"
        script = check.format(out, out)
        # (the tasks print nothing: their point is where they ran, not an answer)
        tasks = [Task(argv=["sh", "-c", script, f"t{i}"], id=f"t{i}", memory_limit=64 * MiB, allow_empty_answer=True)
                 for i in range(3)]
        batch = run_many(tasks, max_concurrent=3)
        outs = [o.to_dict() for o in batch]
        probe = HostMemory()
        seen = {f: Path(out, f).read_text().split("\n") for f in os.listdir(out)}
        shutil.rmtree(out)
        return {
            "pid": os.getpid(), "uid": os.getuid(), "outs": outs, "seen": seen,
            "own": _cgroup_of(os.getpid()), "total": batch.probe.total(), "max_concurrent": batch.max_concurrent,
            "probe": (probe.total(), probe.source, probe.where),
            "subtree": Path(slice_, "cgroup.subtree_control").read_text().split(),
            "left": _ours(slice_, os.getpid()),
        }

    try:
        r = in_child(body)
    finally:
        _remove_tree(slice_)
    name = os.path.basename(slice_)
    assert r["uid"] == NOBODY
    assert r["own"] == f"/{name}/{LEAF}"  # the runner moved itself into a leaf ("no internal processes")
    assert {"memory", "pids"} <= set(r["subtree"])
    assert [o["verdict"] for o in r["outs"]] == ["ok"] * 3, r["outs"]
    assert {o["enforcement"] for o in r["outs"]} == {CGROUP2}
    for i in range(3):
        path, limit = r["seen"][f"t{i}"][:2]
        assert path.startswith(f"0::/{name}/spoolparse-{r['pid']}-"), path
        assert limit == str(64 * MiB)
    assert r["left"] == []
    # admission's total is the delegated cgroup's memory.max, read from inside the leaf
    assert r["total"] == 512 * MiB
    assert r["probe"] == (512 * MiB, "cgroup2", slice_)


def test_a_runner_in_a_cgroup_shared_with_another_program_leaves_it_alone() -> None:
    # a terminal's scope holds the shell too: moving the shell into a leaf is not the runner's call
    shared = _scratch_cgroup("shared")
    other = subprocess.Popen(["sleep", "300"])  # not the runner's descendant
    Path(shared, "cgroup.procs").write_text(str(other.pid))

    def body() -> tuple[str | None, list[str], list[str], list[str]]:
        Path(shared, "cgroup.procs").write_text("0")
        kind = Placement.detect().kind
        task = Task(argv=["true"], id="t", memory_limit=64 * MiB)
        outs = [o.enforcement for o in run_many([task], memory_probe=FixedProbe(BIG))]
        subdirs = sorted(e.name for e in os.scandir(shared) if e.is_dir())
        return kind, outs, subdirs, Path(shared, "cgroup.subtree_control").read_text().split()

    try:
        kind, enforcements, subdirs, subtree = in_child(body)
        assert _cgroup_of(other.pid) == "/" + os.path.basename(shared)
    finally:
        other.kill()
        other.wait()
        _remove_tree(shared)
    assert kind is None and enforcements == [WATCHDOG]
    assert subdirs == [] and subtree == []


def test_admission_takes_the_enclosing_cgroups_memory_max_as_total() -> None:
    outer = _scratch_cgroup("admission")
    Path(outer, "memory.max").write_text(str(300 * MiB))
    Path(outer, "cgroup.subtree_control").write_text("+memory +pids")
    inner = os.path.join(outer, "inner")  # no limit of its own
    os.mkdir(inner)

    def body() -> tuple[int, str, str | None, int, int]:
        Path(inner, "cgroup.procs").write_text("0")
        probe = HostMemory()
        batch = run_many([Task(argv=["true"], id="t")], memory_per_task=50 * MiB)
        with batch:
            list(batch)
        return probe.total(), probe.source, probe.where, probe.used(), batch.max_concurrent

    try:
        total, source, where, used, jobs = in_child(body)
    finally:
        _remove_tree(outer)
    assert (total, source, where) == (300 * MiB, "cgroup2", outer)
    assert 0 < used < 300 * MiB
    assert jobs == 3  # (300 MiB - reserve 150 MiB) / 50 MiB


# -- nothing left behind --------------------------------------------------------------------------------------


def test_no_cgroup_is_left_after_200_tasks() -> None:
    before = sorted(os.listdir(CG))
    tasks = [Task(argv=["true"], id=str(i), allow_empty_answer=True) for i in range(200)]
    outs = one_each(
        run_many(tasks, enforce="cgroup", max_concurrent=8, memory_probe=FixedProbe(BIG)), [str(i) for i in range(200)]
    )
    assert {o.enforcement for o in outs.values()} == {CGROUP2}
    assert all(o.ok for o in outs.values())
    assert _ours(CG, os.getpid()) == []
    assert sorted(os.listdir(CG)) == before


def test_no_cgroup_or_task_is_left_after_kill_9_of_the_batch() -> None:
    token, env = marker()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the batch that gets SIGKILLed
        try:
            tasks = [Task(argv=["sh", "-c", ESCAPE], id=str(i), env=env) for i in range(4)]
            for _ in run_many(tasks, enforce="cgroup", max_concurrent=4, memory_probe=FixedProbe(BIG)):
                pass
        finally:
            os._exit(1)
    try:
        # every task and its escapee running: seen twice in a row (a process in the middle of its exec may be
        # missed by one look at /proc), and the assert on the look that ended the wait, not on a later one
        deadline = time.monotonic() + 60
        looks: list[tuple[int, int]] = []
        while time.monotonic() < deadline and not (len(looks) >= 2 and all(c == 4 and m >= 8 for c, m in looks[-2:])):
            looks.append((len(_ours(CG, pid)), len(marked_pids(token))))
            time.sleep(0.1)
        assert looks[-1][0] == 4 and looks[-1][1] >= 8, looks[-5:]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # the runner is gone: its guardian kills what is in its cgroups (escapees too) and removes them
    deadline = time.monotonic() + 30
    while _ours(CG, pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ours(CG, pid) == []
    assert wait_gone(token, 10) == []
