"""Many sequential runs leave the process as they found it: fds, threads, children, temp-dir entries.

The loop mixes the ways a run ends: a result closed by ``with``, ``keep_output=False``, bytes ``input``
(a third spool), a command that cannot start, and a child that fails.
"""

from __future__ import annotations

import gc
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

import spoolparse
from spoolparse import SpawnError
from spoolparse.spool import empty_pool

from .helpers import ANSWERS, placement_fd


def _snapshot(spool_dir: Path) -> dict[str, object]:
    empty_pool()  # spools kept for reuse are closed first: what is left open is a leak
    me = psutil.Process()
    return {
        "fds": sorted(fd for fd in os.listdir("/proc/self/fd") if not placement_fd(fd)),
        "threads": threading.active_count(),
        "tasks": len(os.listdir("/proc/self/task")),
        "children": sorted(p.pid for p in me.children(recursive=True)),
        "tmp": sorted(os.listdir(tempfile.gettempdir())),
        "spool_dir": sorted(os.listdir(spool_dir)),
    }


def _one(i: int, spool_dir: Path) -> None:
    kind = i % 10
    if kind == 0:
        with pytest.raises(SpawnError):
            spoolparse.run(["/nonexistent/spoolparse-leak-check"], spool_dir=spool_dir)
    elif kind == 1:
        with spoolparse.run(["cat"], input=b'{"type":"result","result":"x"}\n', spool_dir=spool_dir) as r:
            assert r.text == "x"
    elif kind == 2:
        r = spoolparse.run(["false"], spool_dir=spool_dir, keep_output=False)
        assert r.returncode == 1 and r.stdout is None
    elif kind % 2:
        r = spoolparse.run(ANSWERS, keep_output=False)
        assert r.ok
    else:
        with spoolparse.run(ANSWERS, spool_dir=spool_dir) as r:
            assert r.ok and r.stdout is not None


def _check_runs(n: int, spool_dir: Path) -> None:
    for i in range(20):  # warm-up: lazy imports and caches settle before the baseline
        _one(i, spool_dir)
    before = _snapshot(spool_dir)
    for i in range(n):
        _one(i, spool_dir)
    after = _snapshot(spool_dir)
    assert after == before
    print(f"\n{n} runs: {len(before['fds'])} fds, {before['threads']} threads, "  # type: ignore[arg-type]
          f"{len(before['children'])} children, {len(before['tmp'])} temp-dir entries before and after")  # type: ignore[arg-type]


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private system temp dir (default spools land there) and a private spool dir: nobody else's files count."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.delenv("PDD_AGENT_SPOOL_DIR", raising=False)
    d = tmp_path / "spools"
    d.mkdir()
    return d


def test_runs_leave_nothing_behind(spool_dir: Path) -> None:
    _check_runs(200, spool_dir)


@pytest.mark.slow
def test_runs_from_short_lived_threads_leave_no_descriptor(spool_dir: Path) -> None:
    # nothing may be kept per thread; the one thread that forks for short-lived ones is made once
    # (spools in both directories: where a process makes its spools is settled at its first one there)
    warm = threading.Thread(target=lambda: (_one(3, spool_dir), _one(4, spool_dir)))
    warm.start()
    warm.join()
    # a joined thread's OS task lingers for a moment after join returns
    end = time.monotonic() + 5
    while len(os.listdir("/proc/self/task")) > threading.active_count() and time.monotonic() < end:
        time.sleep(0.01)
    before = _snapshot(spool_dir)
    for _ in range(50):
        threads = [threading.Thread(target=_one, args=(i, spool_dir)) for i in range(3, 7)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    gc.collect()
    assert _snapshot(spool_dir) == before


@pytest.mark.slow
def test_ten_thousand_runs_leave_nothing_behind(spool_dir: Path) -> None:
    _check_runs(10_000, spool_dir)


def test_a_child_made_ready_runs_only_when_launched_and_leaves_nothing_if_never(spool_dir: Path) -> None:
    from spoolparse._os.guardian import guardian
    from spoolparse.child import Child

    _one(4, spool_dir)  # warm: the guardian runs, the spool placement is made
    before = _snapshot(spool_dir)

    def children() -> list[int]:
        return [p.pid for p in psutil.Process().children() if p.pid != guardian.pid]

    # the process group alone (a cgroup's start would bring up the process's shared spawner thread, kept for good)
    ready = Child(["cat"], input=b'{"type":"result","result":"launched"}\n', spool_dir=spool_dir, launch=False,
                  containment=None)
    assert ready.pid == 0 and children() == []  # made ready: spools and stdin, no process
    ready.close()  # never launched: all of it goes
    assert _snapshot(spool_dir) == before

    child = Child(["cat"], input=b'{"type":"result","result":"launched"}\n', spool_dir=spool_dir, launch=False,
                  containment=None)
    launcher = threading.Thread(target=child.launch)  # as a batch does: the exec waited for in another thread
    launcher.start()
    launcher.join()
    try:
        assert child.pid > 0 and children() == [child.pid]
        child.settle()
        res, _ = child.result(keep_output=False)
        assert res.ok and res.text == "launched"
    finally:
        child.close()
    with pytest.raises(spoolparse.UsageError, match="launch=False, once"):
        child.launch()
    assert _snapshot(spool_dir) == before
