"""Fault injection: children that die mid-line, close stdout, leave grandchildren, fill the disk; a bad spool
directory; Ctrl-C during a run. Each fault must end in a typed outcome, no hang, no process left behind."""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

import spoolparse
from spoolparse import SpoolDirWarning, SpoolFullError
from spoolparse import spool as spool_mod
from spoolparse._cli_common import exit_status
from spoolparse.child import Child

from .helpers import ROOT, as_from_a_terminal, open_fds

WRITER = [sys.executable, str(ROOT / "fixtures" / "writer.py")]


def _tagged(tag: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose argv holds ``tag``."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if p.info["status"] != psutil.STATUS_ZOMBIE and tag in (p.info["cmdline"] or []):
                out.append(p)
    return out


def _gone(tag: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _tagged(tag):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(autouse=True, scope="module")
def _warm() -> None:
    """One run first: the process's kept inotify descriptor and its thread are state, not a leak (``_os/wait.py``)."""
    spoolparse.run(["true"]).close()


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    """The spool module warns once per process and remembers it; each test starts clean."""
    spool_mod._warned.clear()
    yield
    spool_mod._warned.clear()


@pytest.fixture
def tag() -> Iterator[str]:
    t = f"spoolparse-fault-{uuid.uuid4().hex}"
    yield t
    for p in _tagged(t):  # never leave a stray behind, even when a test fails
        with contextlib.suppress(psutil.Error):
            p.kill()


def _mount_tmpfs(path: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, check=False).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only: mount is the only honest full disk)."""
    d = tmp_path / "small"
    if not _mount_tmpfs(d, "size=1m,mode=1777"):
        pytest.skip("needs root to mount a 1 MiB tmpfs (run the suite as root, e.g. in a container or VM); "
                    "the RLIMIT_FSIZE test covers the same path meanwhile")
    yield d
    _umount(d)


# -- the child dies or misbehaves ---------------------------------------------------


def test_child_sigkilled_in_the_middle_of_a_line() -> None:
    before = open_fds()
    with spoolparse.run([*WRITER, "--events", "3", "--partial", "--kill-self"], grace=0.2) as r:
        assert r.returncode == -signal.SIGKILL and r.signal == signal.SIGKILL and exit_status(r) == 137
        assert not r.ok
        # the cut line was the answer being written: it is known lost, and no earlier one stands in for it
        assert r.text is None and r.dropped == [{"line": 5, "bytes": 82, "type": "item.completed/agent_message",
                                                 "reason": "invalid"}]
        assert r.error is not None and "was lost" in r.error and "killed by SIGKILL" in r.error
        assert r.session_id == "t-1"
        assert r.lines == 5 and r.invalid_lines == 1  # the half line is counted, never raised
    assert open_fds() == before


def test_child_sigkilled_in_the_middle_of_an_oversize_line() -> None:
    cmd = [sys.executable, "-c", "import os,sys; os.write(1, b'{\"type\":\"thread.started\",\"thread_id\":\"t\"}\\n'"
           "+ b'{\"type\":\"item.completed\",\"item\":{\"id\":\"1\",\"type\":\"agent_message\",\"text\":\"'"
           "+ b'x' * 300000); os.kill(os.getpid(), 9)"]
    with spoolparse.run(cmd, max_line=64 * 1024, max_retained=128 * 1024) as r:
        assert r.returncode == -signal.SIGKILL
        assert r.session_id == "t" and r.text is None
        assert r.dropped_count == 1 and r.dropped[0]["reason"] == "over_ceiling"
        assert r.error is not None and "dropped" in r.error  # the lost answer is reported, not silent


def test_child_closes_stdout_and_keeps_running() -> None:
    t0 = time.monotonic()
    with spoolparse.run([*WRITER, "--events", "2", "--close-stdout", "--sleep", "1", "--exit", "0"]) as r:
        elapsed = time.monotonic() - t0
        assert r.ok and r.text == "ANSWER-1" and r.returncode == 0
    assert elapsed >= 0.9  # the run follows the process, not the stream: it waited for the exit


def test_child_closes_stdout_and_hangs_is_ended_by_the_timeout(tag: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cmd = [*WRITER, "--pidfile", str(pidfile), "--events", "2", "--ignore-term", "--grandchild", tag, "--close-stdout",
           "--sleep", "60"]
    with spoolparse.run(cmd, timeout=1.0, grace=0.3) as r:
        assert r.timed_out and r.returncode == -signal.SIGKILL and exit_status(r) == 124
        assert r.text is None and r.partial_text == "ANSWER-1"  # what it said: not ok, so not the answer
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert _gone(tag)


def test_grandchild_holding_the_spool_and_ignoring_sigterm_is_killed(tag: str) -> None:
    t0 = time.monotonic()
    with spoolparse.run([*WRITER, "--events", "2", "--grandchild", tag], grace=0.3) as r:
        assert r.ok and r.text == "ANSWER-1"
    assert time.monotonic() - t0 < 10  # no wait for the grandchild's sleep or its copy of the spool
    assert _gone(tag, within=1.0)


def test_fake_codex_orphan_is_ended() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with spoolparse.run([sys.executable, str(ROOT / "fixtures" / "fake_codex.py"), "--size", "20K", "--orphan"],
                        grace=0.3) as r:
        assert r.ok and r.text is not None
    time.sleep(0.1)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.status() != "zombie"]
    assert left == []


# -- the spool fills up --------------------------------------------------------------


@pytest.mark.parametrize("keeps_running", [True, False], ids=["child-ignores-ENOSPC", "child-dies-of-ENOSPC"])
def test_spool_on_a_full_filesystem(small_fs: Path, tag: str, keeps_running: bool) -> None:
    cmd = [*WRITER, "--events", "2", "--grandchild", tag]
    cmd += ["--ignore-errors", "--flood", "4M", "--sleep", "60"] if keeps_running else ["--flood", "4M"]
    before = open_fds()
    t0 = time.monotonic()
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run(cmd, spool_dir=small_fs, grace=0.3, timeout=60)
    err = e.value
    assert time.monotonic() - t0 < 30  # no hang, and not ended by the timeout
    assert err.directory == str(small_fs)
    assert 0 < err.bytes_written <= 1 << 20
    assert "no space" in err.reason
    assert str(small_fs) in str(err) and str(err.bytes_written) in str(err)
    assert err.result is not None and err.result.spool_full and not err.result.timed_out
    assert err.result.session_id == "t-1" and err.result.partial_text == "ANSWER-1"  # what was spooled is parsed
    err.result.close()
    assert _gone(tag)
    assert open_fds() == before
    assert os.listdir(small_fs) == []  # nameless spools: nothing to clean up


def test_child_that_dies_of_enospc_before_any_poll_is_spool_full(small_fs: Path) -> None:
    # no poll sees the disk full while the child runs: the check at its exit must (it raced before)
    child = Child(["head", "-c", "4000000", "/dev/zero"], spool_dir=small_fs)
    try:
        while not child.exited():
            child.wait_exit(0.05)
        child.settle()
        res, _ = child.result(keep_output=False)
    finally:
        child.close()
    assert res.returncode == 1 and res.spool_full and "no space left" in (res.error or "")


@pytest.mark.slow
def test_a_batch_ends_a_child_whose_spool_filesystem_is_full(small_fs: Path, tag: str) -> None:
    # the batch's once-a-second check (one look at the filesystem for all its children) sees the full disk of
    # a child that ignores ENOSPC and keeps running: it ends failed, long before its timeout. One child: with
    # several, one that dies first frees its spool, and a later look finds room (the README's table of failures)
    cmd = [*WRITER, "--ignore-errors", "--events", "2", "--grandchild", tag, "--flood", "2M", "--sleep", "60"]
    t0 = time.monotonic()
    outs = list(spoolparse.run_many([cmd], spool_dir=small_fs, memory_per_task=1 << 20, timeout=60, grace=0.3))
    assert time.monotonic() - t0 < 30
    assert [o.verdict for o in outs] == ["failed"]
    assert "no space left" in (outs[0].error or ""), outs[0].error
    assert _gone(tag)


def _need_prlimit() -> None:
    if shutil.which("prlimit") is None:
        pytest.skip("needs prlimit (util-linux: apt-get install util-linux)")


def test_spool_file_size_limit_kills_a_child_with_sigxfsz() -> None:
    _need_prlimit()
    cmd = ["sh", "-c", 'echo \'{"type":"thread.started","thread_id":"t-1"}\'; '
           f"exec prlimit --fsize={256 * 1024} -- head -c 4000000 /dev/zero"]
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run(cmd)
    err = e.value
    assert "RLIMIT_FSIZE" in err.reason and err.directory == spool_mod.resolve_spool_dir()
    assert err.result is not None and err.result.returncode == -signal.SIGXFSZ and err.result.session_id == "t-1"
    err.result.close()


def test_spool_file_size_limit_inherited_by_a_child_that_ignores_sigxfsz() -> None:
    # Python ignores SIGXFSZ: its writes fail with EFBIG and it exits 1; the spool's size tells the cause
    _need_prlimit()
    limit = 256 * 1024
    cmd = ["prlimit", f"--fsize={limit}", "--", sys.executable, "-m", "spoolparse", "run", "--",
           *WRITER, "--events", "2", "--flood", "4M"]
    proc = subprocess.run(cmd, capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert proc.returncode == 125, proc.stderr
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("spoolparse: error: spool full in ") and f"RLIMIT_FSIZE) of {limit} bytes" in err
    summary = json.loads(proc.stdout)
    assert summary["spool_full"] is True and summary["partial_text"] == "ANSWER-1" and summary["text"] is None
    assert summary["returncode"] in (1, -signal.SIGTERM)  # it exits of EFBIG, or a poll sees the limit first


def test_max_spool_bytes_exceeded(tag: str) -> None:
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run([*WRITER, "--events", "2", "--grandchild", tag, "--flood", "64M", "--sleep", "60"],
                       max_spool_bytes=512 * 1024, grace=0.3)
    err = e.value
    assert "max_spool_bytes 524288 exceeded" in err.reason and err.bytes_written > 512 * 1024
    assert err.result is not None and err.result.partial_text == "ANSWER-1"
    err.result.close()
    assert _gone(tag)


# -- PDD_AGENT_SPOOL_DIR is unusable ---------------------------------------------------


def _unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "ro"
    if _mount_tmpfs(d, "ro,size=64k"):
        try:
            yield d
        finally:
            _umount(d)
        return
    d.mkdir()
    d.chmod(0o555)
    if os.access(d, os.W_OK):
        pytest.skip("needs a directory this user cannot write: run as a non-root user, or as root where mount works")
    yield d


@pytest.mark.parametrize("kind", ["file", "missing", "unwritable"])
def test_bad_spool_dir_env_warns_once_and_falls_back(kind: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with contextlib.ExitStack() as stack:
        if kind == "file":
            target = tmp_path / "a-file"
            target.write_text("x")
            why = "is not a directory"
        elif kind == "missing":
            target = tmp_path / "missing" / "dir"
            why = "does not exist"
        else:
            target = stack.enter_context(contextlib.contextmanager(_unwritable_dir)(tmp_path))
            why = "not writable"
        monkeypatch.setenv(spool_mod.ENV_VAR, str(target))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                with spoolparse.run([*WRITER, "--events", "2"]) as r:
                    assert r.ok and r.text == "ANSWER-1"
                    assert r.stdout is not None
                    assert os.readlink(f"/proc/self/fd/{r.stdout.fileno()}").startswith(tempfile.gettempdir())
        mine = [w for w in caught if issubclass(w.category, SpoolDirWarning)]
        assert len(mine) == 1, [str(w.message) for w in mine]
        text = str(mine[0].message)
        assert str(target) in text and why in text and tempfile.gettempdir() in text


# -- Ctrl-C -------------------------------------------------------------------------------


@pytest.mark.slow
def test_keyboard_interrupt_while_waiting(tag: str) -> None:
    before = open_fds()
    timer = threading.Timer(0.7, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            spoolparse.run([*WRITER, "--events", "2", "--ignore-term", "--grandchild", tag, "--sleep", "60"])
    finally:
        timer.cancel()
    assert _gone(tag, within=2.0)
    assert open_fds() == before


def test_cli_sigint_exits_130_and_leaves_no_process(tag: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    cmd = [sys.executable, "-m", "spoolparse", "run", "--", *WRITER, "--events", "2", "--ignore-term",
           "--grandchild", tag, "--pidfile", str(pidfile), "--sleep", "60"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                          preexec_fn=as_from_a_terminal) as proc:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and _tagged(tag)):
            assert time.monotonic() < deadline and proc.poll() is None, "the child never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert err.decode().strip() == "spoolparse: error: interrupted by SIGINT"
    assert b"Traceback" not in err
    summary = orjson.loads(out)  # what the run had come to, never ok
    assert summary["ok"] is False and summary["error"].startswith("interrupted by SIGINT")
    assert _gone(tag, within=2.0)
    assert not psutil.pid_exists(int(pidfile.read_text()))


def test_no_room_to_create_a_spool_is_the_runs_failure_not_a_usage_error(tmp_path: Path) -> None:
    d = tmp_path / "full"
    if not _mount_tmpfs(d, "size=1m,nr_inodes=3,mode=1777"):
        pytest.skip("needs root to mount a tmpfs (run the suite as root, e.g. in a container or VM)")
    try:
        n = 0
        with contextlib.suppress(OSError):  # use up every inode: creating a spool then fails with ENOSPC
            while n < 100:
                (d / f"f{n}").touch()
                n += 1
        run = subprocess.run([sys.executable, "-m", "spoolparse", "run", "--spool-dir", str(d), "--", "true"],
                             capture_output=True, timeout=60)
        assert run.returncode == 125, run.stderr
        assert b"cannot create a spool: No space left on device" in run.stderr
        batch = subprocess.run([sys.executable, "-m", "spoolparse", "batch", "-", "--spool-dir", str(d)],
                               input=b'{"id":"t","cmd":["true"]}\n', capture_output=True, timeout=60)
        out = orjson.loads(batch.stdout)
        assert batch.returncode == 1 and out["verdict"] == "spawn_error" and "No space left" in out["error"]
    finally:
        _umount(d)
