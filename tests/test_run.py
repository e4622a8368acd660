"""Running a child on spools: input, cwd/env, timeouts, group kill, spool full, errors."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
import time
import warnings
from pathlib import Path

import pytest

import spoolparse
from spoolparse import SpawnError, SpoolDirError, SpoolDirWarning, SpoolFullError, UsageError
from spoolparse import spool as spool_mod

from .helpers import FAKE_CODEX, group_gone, open_fds

ECHO_STDIN = [sys.executable, "-c", "import sys; d=sys.stdin.buffer.read(); "
              "print('{\"type\":\"result\",\"result\":\"%d:%s\"}' % (len(d), d[:20].decode()))"]


def test_demo_answer_and_counters() -> None:
    with spoolparse.run([*FAKE_CODEX, "--size", "2M", "--stderr", "20K", "--noise"]) as r:
        assert r.ok and r.returncode == 0
        assert r.text == "FINAL-ANSWER: the bug is fixed in src/main.py"
        assert r.usage == {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}
        assert r.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
        assert r.provider == "codex"
        assert r.stdout_bytes == len(r.stdout.read())  # type: ignore[union-attr]
        assert r.stderr_bytes == 20 * 1024
        assert len(r.stderr_tail) == spoolparse.limits.STDERR_TAIL
        assert r.invalid_lines >= 2
        assert r.lines > 100
        spools = [r.stdout, r.stderr]
    assert all(f.closed for f in spools)  # type: ignore[union-attr]
    assert r.stdout is None


def test_spool_files_have_no_name_and_mode_0600() -> None:
    with spoolparse.run([*FAKE_CODEX, "--size", "10K"]) as r:
        assert r.stdout is not None
        fd = r.stdout.fileno()
        target = os.readlink(f"/proc/self/fd/{fd}")
        assert target.endswith("(deleted)") or "/#" in target
        assert os.fstat(fd).st_mode & 0o777 == 0o600


@pytest.mark.parametrize("kind", ["bytes", "str", "path", "file", "bytesio"])
def test_input_kinds(kind: str, tmp_path: Path) -> None:
    payload = b"prompt: fix the bug \xe2\x9c\x93" * 1000
    p = tmp_path / "in.txt"
    p.write_bytes(payload)
    inp = {
        "bytes": payload,
        "str": payload.decode(),
        "path": p,
        "file": open(p, "rb"),  # noqa: SIM115
        "bytesio": io.BytesIO(payload),
    }[kind]
    with spoolparse.run(ECHO_STDIN, input=inp) as r:  # type: ignore[arg-type]
        assert r.text == f"{len(payload)}:prompt: fix the bug "
    if kind == "file":
        inp.close()  # type: ignore[union-attr]


def test_no_input_is_dev_null() -> None:
    with spoolparse.run(ECHO_STDIN) as r:
        assert r.text == "0:"


def test_cwd_and_env(tmp_path: Path) -> None:
    code = ("import os,json; print(json.dumps({'type':'result','result':os.getcwd()+'|'+os.environ.get('SP_X','')}))")
    with spoolparse.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "SP_X": "42"}) as r:
        assert r.text == f"{tmp_path}|42"


def test_child_runs_in_its_own_group() -> None:
    code = "import os,json; print(json.dumps({'type':'result','result':'%d %d' % (os.getpid(), os.getpgid(0))}))"
    with spoolparse.run([sys.executable, "-c", code]) as r:
        pid, pgid = r.text.split()  # type: ignore[union-attr]
        assert pid == pgid and int(pgid) != os.getpgid(0)


def test_timeout_term_then_kill_whole_group() -> None:
    t0 = time.monotonic()
    with spoolparse.run([*FAKE_CODEX, "--size", "10K", "--hang", "60", "--ignore-term", "--orphan"],
                        timeout=0.5, grace=0.5) as r:
        took = time.monotonic() - t0
        assert r.timed_out and not r.ok
        assert r.returncode == -signal.SIGKILL
        assert r.exit_status() == 124
        assert r.session_id is not None  # what was spooled before the timeout is parsed
    assert took < 10
    # the leader's pid was the group id: nothing of the group survives
    assert group_gone(_last_pgid)


_last_pgid = 0


@pytest.fixture(autouse=True)
def _track_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remember the process group of every child started, so tests can check it is gone."""
    from spoolparse import process

    real_init = process.Child.__init__

    def init(self, *a, **kw):  # type: ignore[no-untyped-def]
        global _last_pgid
        real_init(self, *a, **kw)
        _last_pgid = self.pgid

    monkeypatch.setattr(process.Child, "__init__", init)


def test_timeout_sigterm_is_enough_for_a_polite_child() -> None:
    with spoolparse.run([*FAKE_CODEX, "--hang", "60"], timeout=0.3, grace=5) as r:
        assert r.timed_out and r.returncode == -signal.SIGTERM
    assert group_gone(_last_pgid)


def test_grandchild_left_behind_is_ended() -> None:
    t0 = time.monotonic()
    with spoolparse.run([*FAKE_CODEX, "--size", "10K", "--orphan"], grace=0.3) as r:
        assert r.ok and r.text is not None
    assert group_gone(_last_pgid)
    assert time.monotonic() - t0 < 10


def test_exit_code_and_signal() -> None:
    with spoolparse.run([*FAKE_CODEX, "--exit", "3"]) as r:
        assert r.returncode == 3 and not r.ok and r.exit_status() == 1 and r.text is None and r.partial_text
    with spoolparse.run(["sh", "-c", "kill -TERM $$"]) as r:
        assert r.returncode == -signal.SIGTERM and r.signal == signal.SIGTERM and r.exit_status() == 128 + 15


def test_agent_error_with_exit_zero() -> None:
    with spoolparse.run([*FAKE_CODEX, "--fail", "rate limited", "--exit", "0"]) as r:
        assert r.returncode == 0 and r.error == "rate limited" and not r.ok and r.exit_status() == 1


def test_check_raises_like_subprocess() -> None:
    with pytest.raises(spoolparse.CalledProcessError) as e:
        spoolparse.run([*FAKE_CODEX, "--fail", "nope"], check=True)
    assert e.value.returncode == 1 and "nope" in str(e.value)
    with pytest.raises(spoolparse.TimeoutExpired):
        spoolparse.run([*FAKE_CODEX, "--hang", "30"], timeout=0.2, check=True)


def test_keyboard_interrupt_kills_the_group_and_reraises() -> None:
    def boom(ev: spoolparse.LiveEvent) -> None:
        if ev.kind == "session":
            raise KeyboardInterrupt

    before = open_fds()
    with pytest.raises(KeyboardInterrupt):
        spoolparse.run([*FAKE_CODEX, "--pause", "0.05", "--size", "50K", "--orphan", "--ignore-term"], on_event=boom)
    assert group_gone(_last_pgid)
    assert open_fds() == before


def test_spawn_errors_are_typed_and_name_the_command(tmp_path: Path) -> None:
    with pytest.raises(SpawnError) as e:
        spoolparse.run(["definitely-not-a-command-xyz", "--json"])
    assert e.value.argv == ["definitely-not-a-command-xyz", "--json"]
    assert "definitely-not-a-command-xyz" in str(e.value)
    script = tmp_path / "noexec.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(SpawnError, match=r"noexec\.sh"):
        spoolparse.run([str(script)])
    with pytest.raises(UsageError):
        spoolparse.run([])
    with pytest.raises(UsageError):
        spoolparse.run("echo hi")  # a string needs shell=True
    with spoolparse.run('echo \'{"type":"result","result":"via sh"}\'', shell=True) as r:
        assert r.text == "via sh"
    # what cannot be passed to a process at all (a NUL byte; "=" in a name) is a SpawnError too, not a ValueError
    for argv, kw in ((["tr\0ue"], {}), (["true"], {"env": {"A": "x\0y"}}), (["true"], {"env": {"A=B": "x"}}),
                     (["true"], {"cwd": "/tm\0p"})):
        with pytest.raises(SpawnError, match="cannot start"):
            spoolparse.run(argv, **kw)


def test_max_spool_bytes_kills_and_reports() -> None:
    before = open_fds()
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run([*FAKE_CODEX, "--size", "200M"], max_spool_bytes=2 << 20)
    err = e.value
    assert err.directory == spool_mod.resolve_spool_dir()
    assert err.bytes_written > 2 << 20
    assert err.result is not None and err.result.spool_full and not err.result.ok
    assert "spool full" in (err.result.error or "")
    assert err.result.session_id is not None
    err.result.close()
    assert group_gone(_last_pgid)
    assert open_fds() == before


def test_file_size_limit_is_spool_full() -> None:
    with pytest.raises(SpoolFullError, match="RLIMIT_FSIZE"):
        spoolparse.run(["sh", "-c", "ulimit -f 64; exec head -c 10000000 /dev/zero"])


def test_spool_dir_argument_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool_mod, "_warned", set())
    d = tmp_path / "spools"
    d.mkdir()
    monkeypatch.setenv("PDD_AGENT_SPOOL_DIR", str(d))
    assert spool_mod.resolve_spool_dir() == str(d)
    assert spool_mod.resolve_spool_dir(tmp_path) == str(tmp_path)
    with pytest.raises(SpoolDirError) as missing:
        spoolparse.run([*FAKE_CODEX], spool_dir=tmp_path / "missing")
    # a file-system condition, not a malformed call: an OSError with errno and filename, not a UsageError
    assert isinstance(missing.value, OSError) and not isinstance(missing.value, UsageError)
    assert missing.value.errno == errno.ENOENT and missing.value.filename == str(tmp_path / "missing")
    assert "does not exist" in str(missing.value)
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("PDD_AGENT_SPOOL_DIR", str(afile))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with spoolparse.run([*FAKE_CODEX, "--size", "1K"]) as r:
                assert r.ok
    assert len([w for w in caught if issubclass(w.category, SpoolDirWarning)]) == 1
    assert "is not a directory" in str(caught[0].message)


def test_bounds_are_arguments() -> None:
    with spoolparse.run([*FAKE_CODEX, "--size", "100K", "--answer-size", "3K"], max_line=1024,
                        max_retained=2048) as r:
        assert r.text is None and r.dropped and r.dropped[-1]["reason"] == "over_ceiling"
        assert all(d["reason"] == "oversize" for d in r.dropped[:-1])
        assert r.dropped_count == len(r.dropped)


def test_a_fast_writer_past_max_spool_bytes_is_stopped_at_once() -> None:
    """A child that floods stdout with tiny kept lines: killed within a step, and the rest never parsed."""
    t0 = time.monotonic()
    with pytest.raises(SpoolFullError) as e:
        spoolparse.run(["sh", "-c", "yes '{}'"], max_spool_bytes=64 * 1024)
    took = time.monotonic() - t0
    res = e.value.result
    assert res is not None
    assert res.stdout_bytes >= 64 * 1024
    # parsed up to the cap and not a byte more: the cut last line is counted invalid
    assert res.lines == 64 * 1024 // 3 + 1 and res.invalid_lines == 1
    res.close()
    assert group_gone(_last_pgid)
    assert took < 30, took
