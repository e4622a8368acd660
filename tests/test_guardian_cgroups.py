"""The guardian and the task cgroups: it knows each before it exists, and a cgroup it cannot remove yet is tried
again, never counted gone. Real processes, ``kill -9``, checked in ``/proc`` and the cgroup hierarchy."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spoolparse._os.cgroup import Placement

from .runner_support import wait_for

WHERE = Placement.detect()
pytestmark = pytest.mark.skipif(
    WHERE.kind is None or os.geteuid() != 0,
    reason="needs root and a writable memory cgroup (task cgroups for the guardian to hold)",
)


def _theirs(pid: int) -> list[str]:
    """The cgroup directories a spoolparse of ``pid`` made that still exist."""
    found = []
    for parent in {WHERE.memory_parent, WHERE.pids_parent} - {None}:
        assert parent is not None
        found += [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f"spoolparse-{pid}-")]
    return found


def _defaults() -> None:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "batch"])
def test_kill_9_at_start_leaves_no_cgroup(command: str, tmp_path: Path) -> None:
    """Killed at random instants around the making of its first cgroups, spoolparse leaves none behind: the
    guardian was told of each before it was made."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "cmd": ["true"]}) + "\n" for i in range(2000)))
    argv = ["run", "--", "sleep", "5"] if command == "run" else ["batch", str(tasks), "-j", "8"]
    left: dict[int, list[str]] = {}
    for _ in range(12):
        p = subprocess.Popen([sys.executable, "-m", "spoolparse", *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=_defaults, cwd=tmp_path)
        try:
            assert wait_for(lambda: _theirs(p.pid) or p.poll() is not None, 30)  # noqa: B023
            if command == "batch":
                wait_for(lambda: False, random.uniform(0, 0.3))
            p.kill()
            p.wait()
            if not wait_for(lambda: not _theirs(p.pid), 5):  # noqa: B023
                left[p.pid] = _theirs(p.pid)
        finally:
            p.kill()
            p.wait()
            for d in sorted(_theirs(p.pid), reverse=True):
                with contextlib.suppress(OSError):
                    os.rmdir(d)
    assert left == {}


def test_the_guardian_holds_a_cgroup_before_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    from spoolparse._os import cgroup
    from spoolparse._os.guardian import guardian

    seen: list[str] = []
    real_send, real_mkdir = guardian._send, os.mkdir

    def send(line: str) -> None:
        seen.extend(f"told {x}" for x in line.splitlines())
        real_send(line)

    def mkdir(path: str, *args: object, **kw: object) -> None:
        seen.append(f"made {path}")
        real_mkdir(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(guardian, "_send", send)
    monkeypatch.setattr(cgroup.os, "mkdir", mkdir)
    cg = WHERE.create(memory_limit=64 << 20, pids_max=64)
    monkeypatch.undo()
    cg.remove()
    assert cg.dirs == [] or wait_for(lambda: not any(os.path.exists(d) for d in cg.dirs), 10)
    made = [x[len("made "):] for x in seen if x.startswith("made ")]
    assert made
    for d in made:
        assert f"told +c {d}" in seen and seen.index(f"told +c {d}") < seen.index(f"made {d}")


def test_the_guardian_removes_a_cgroup_with_one_nested_in_it() -> None:
    """A task that runs a runner of its own has cgroups inside its own: the guardian kills and removes them all,
    rather than count the outer one done when its rmdir fails."""
    from spoolparse._os.guardian import serve

    parent = WHERE.memory_parent
    assert parent is not None
    outer = os.path.join(parent, f"spoolparse-test-{os.getpid()}")
    inner = os.path.join(outer, "nested")
    os.mkdir(outer)
    os.mkdir(inner)
    victim = subprocess.Popen(["sleep", "60"])
    r, w = os.pipe()
    try:
        with open(os.path.join(inner, "cgroup.procs"), "w") as f:
            f.write(str(victim.pid))
        os.write(w, f"+c {outer}\n".encode())
        os.close(w)
        serve(r, os.getpid())
        assert victim.wait(10) == -signal.SIGKILL
        assert not os.path.exists(outer)
    finally:
        os.close(r)
        victim.kill()
        victim.wait()
        for d in (inner, outer):
            with contextlib.suppress(OSError):
                os.rmdir(d)


def test_the_guardian_never_kills_the_pids_it_excludes_in_a_cgroup(tmp_path: Path) -> None:
    """A thread of spoolparse's may sit in a task's cgroup while it starts the task (a joined start): the
    guardian's cgroup kill passes over the pids it excludes (ours and its parent's), as the sweep does."""
    from spoolparse._os.guardian import _kill_cgroup

    d = tmp_path / "task"
    d.mkdir()
    (d / "cgroup.procs").write_text(f"{os.getpid()}\n")
    assert _kill_cgroup(str(d), frozenset({os.getpid()})) is False  # still there (a plain directory here)
    assert d.exists()


def test_a_cgroup_that_cannot_be_joined_is_the_starts_failure_not_the_programs(tmp_path: Path) -> None:
    from spoolparse._os.joined import JoinError, joined

    missing = str(tmp_path / "gone")
    with pytest.raises(JoinError) as e, joined([missing], []):
        pass
    assert e.value.filename == os.path.join(missing, "tasks")
