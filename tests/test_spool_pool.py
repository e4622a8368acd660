"""Spools are emptied and reused, never while anyone else holds them, never once they belong to a result.

Real processes; what a spool holds is read back from the spool files themselves.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse import _limits
from spoolparse import spool as spool_mod
from spoolparse.spool import empty_pool, open_spool, recycle_spool, writer_end

ANSWER = 'printf \'{"type":"result","result":"%s"}\\n\' '


@pytest.fixture(autouse=True)
def _fresh_pool() -> Any:
    empty_pool()
    yield
    empty_pool()


def _pooled(directory: Path) -> list[Any]:
    return list(spool_mod._pool.get(str(directory), []))


def _inode(f: Any) -> int:
    return os.fstat(f.fileno()).st_ino


def test_a_discarded_small_spool_is_emptied_and_reused(tmp_path: Path) -> None:
    r = spoolparse.run(["sh", "-c", ANSWER + "one; echo noise >&2"], spool_dir=tmp_path, keep_output=False)
    assert r.ok and r.text == "one"
    kept = _pooled(tmp_path)
    assert len(kept) == 2
    inodes = {_inode(f) for f in kept}
    assert all(os.fstat(f.fileno()).st_size == 0 and f.tell() == 0 for f in kept)
    with spoolparse.run(["sh", "-c", ANSWER + "two"], spool_dir=tmp_path) as r2:
        assert r2.text == "two"
        assert r2.stdout is not None and r2.stderr is not None
        # the same files, holding this run's transcript and nothing of the last one
        assert {_inode(r2.stdout), _inode(r2.stderr)} == inodes
        assert r2.stdout.read() == b'{"type":"result","result":"two"}\n'
        assert r2.stderr.read() == b""
    assert _pooled(tmp_path) == []  # handed to a result: closed with it, not reused


def test_a_spool_an_escaped_process_still_writes_to_is_not_reused(tmp_path: Path) -> None:
    mark, go, done = tmp_path / "escaped.pid", tmp_path / "go", tmp_path / "done"
    late = tmp_path / "late.py"
    late.write_text(
        "import os, time\n"
        f"open({str(mark)!r}, 'w').write(str(os.getpid()))\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "print('{\"type\":\"result\",\"result\":\"LATE\"}', flush=True)\n"
        f"open({str(done)!r}, 'w').close()\n"
    )
    # the child leaves a process in a session of its own (out of reach of its group), stdout still the spool;
    # it answers once that process has its session (a group sweep before then would end it)
    script = f"setsid {sys.executable} {late} 2>/dev/null & while [ ! -s {mark} ]; do sleep 0.01; done; "
    r = spoolparse.run(["sh", "-c", script + ANSWER + "first"], spool_dir=tmp_path, keep_output=False,
                       containment=None)
    assert r.ok and r.text == "first"
    escaped = int(mark.read_text())
    try:
        assert os.path.exists(f"/proc/{escaped}")
        assert len(_pooled(tmp_path)) == 1  # stderr, which it does not hold; not stdout
        # the next run writes its answer after the escaped process wrote its line
        nxt = f"touch {go}; while [ ! -e {done} ]; do sleep 0.01; done; " + ANSWER + "next"
        with spoolparse.run(["sh", "-c", nxt], spool_dir=tmp_path) as r2:
            assert r2.stdout is not None and r2.stderr is not None
            assert r2.ok and r2.text == "next"
            assert r2.stdout.read() == b'{"type":"result","result":"next"}\n'
            assert r2.stderr.read() == b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, 9)


def test_a_transcript_kept_in_results_is_never_emptied_by_a_later_task(tmp_path: Path) -> None:
    results = tmp_path / "results"
    tasks = [spoolparse.Task(id=f"t{i}", argv=["sh", "-c", ANSWER + f"answer{i}"]) for i in range(40)]
    outs = list(spoolparse.run_many(tasks, max_concurrent=4, results=results, keep_transcript="all",
                                    spool_dir=tmp_path))
    assert all(o.ok for o in outs)
    for i in range(40):
        kept = json.loads((results / f"t{i}" / "stdout").read_bytes())
        assert kept == {"type": "result", "result": f"answer{i}"}


@pytest.mark.slow  # several seconds: kept out of the quick subset
@pytest.mark.parametrize(("jobs", "most"), [(1, 4), (4, 90)])
def test_a_batch_of_small_tasks_makes_few_spool_files(tmp_path: Path, jobs: int, most: int) -> None:
    seen: list[int] = []
    real_open = os.open

    def counting_open(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        fd = real_open(path, flags, *args, **kw)
        if flags & getattr(os, "O_TMPFILE", 0) == getattr(os, "O_TMPFILE", -1):
            seen.append(fd)
        return fd

    mp = pytest.MonkeyPatch()
    mp.setattr(os, "open", counting_open)
    try:
        outs = list(spoolparse.run_many((["sh", "-c", ANSWER + "x"] for _ in range(60)), max_concurrent=jobs,
                                        spool_dir=tmp_path))
    finally:
        mp.undo()
    assert all(o.ok and o.summary is not None and o.summary["text"] == "x" for o in outs)
    # one at a time: the spool directory's probe and one pair, reused by every task. Four at a time: two per
    # running task, and more where a lease was refused for a moment — a child of another start holds every
    # descriptor of ours between its fork and its exec — (9-11 of them here with two spawner threads; 11-31,
    # and 53 once in CI, with eight: more CPUs, more spawner threads): not two per task
    assert len(seen) <= most, len(seen)


def test_a_large_spool_is_closed_not_reused(tmp_path: Path) -> None:
    size = _limits.CLOSE_INLINE_BYTES + 1
    r = spoolparse.run(["sh", "-c", f"head -c {size} /dev/zero >&2; " + ANSWER + "big"], spool_dir=tmp_path,
                       keep_output=False)
    assert r.text == "big"
    kept = _pooled(tmp_path)
    assert len(kept) == 1 and os.fstat(kept[0].fileno()).st_size == 0  # stdout only: stderr was too large


def test_no_lease_no_reuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = fcntl.fcntl

    def no_leases(fd: int, cmd: int, *args: Any) -> Any:
        if cmd == fcntl.F_SETLEASE:
            raise OSError(22, "Invalid argument")
        return real(fd, cmd, *args)

    monkeypatch.setattr(fcntl, "fcntl", no_leases)
    r = spoolparse.run(["sh", "-c", ANSWER + "x"], spool_dir=tmp_path, keep_output=False)
    assert r.text == "x"
    assert _pooled(tmp_path) == []


def test_a_spool_still_open_elsewhere_or_named_is_not_recycled(tmp_path: Path) -> None:
    f = open_spool(str(tmp_path))
    w = writer_end(f)
    assert w >= 0
    assert not recycle_spool(f, str(tmp_path))  # a writer end is open
    os.close(w)
    os.write(f.fileno(), b"stale")
    named = tmp_path / "named"
    try:
        os.link(f"/proc/self/fd/{f.fileno()}", named, follow_symlinks=True)
    except OSError:
        pass  # no linkat of a nameless file here: that half is not checked
    else:
        assert not recycle_spool(f, str(tmp_path))  # it has a name: a kept transcript
        named.unlink()
    assert recycle_spool(f, str(tmp_path))
    again = open_spool(str(tmp_path))
    assert again is f and os.fstat(f.fileno()).st_size == 0
    f.close()


def test_the_pool_is_bounded(tmp_path: Path) -> None:
    files = [open_spool(str(tmp_path)) for _ in range(_limits.SPOOL_POOL + 5)]
    taken = [recycle_spool(f, str(tmp_path)) for f in files]
    assert taken.count(True) == _limits.SPOOL_POOL
    for f, t in zip(files, taken, strict=True):
        if not t:
            f.close()
    assert empty_pool() == _limits.SPOOL_POOL


def test_a_forked_copy_starts_with_an_empty_pool(tmp_path: Path) -> None:
    f = open_spool(str(tmp_path))
    ours = _inode(f)
    assert recycle_spool(f, str(tmp_path))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            g = open_spool(str(tmp_path))
            os.write(w, json.dumps([spool_mod._pooled, _inode(g) == ours]).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = json.loads(os.read(r, 100))
    os.close(r)
    os.waitpid(pid, 0)
    assert got == [0, False]  # nothing pooled in the copy: it made a spool of its own
    assert open_spool(str(tmp_path)) is f  # the parent's is still there
    f.close()
