"""A marked runner (a Ray node runner): when it dies, however it dies, its guardian kills every process
carrying its mark — its agents and all they started, in whatever group — and deletes what it leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .runner_support import FAKE_CODEX

RUNNER = textwrap.dedent("""
    import os, subprocess, sys, time
    from spoolparse._os.guardian import MARK_VAR, guardian
    token, left = sys.argv[1], sys.argv[2]
    assert guardian.start(detach=True)
    guardian.mark(token)
    guardian.leave(left)
    os.environ[MARK_VAR] = token
    for _ in range(2):
        subprocess.Popen(sys.argv[3:], start_new_session=True, stdout=subprocess.DEVNULL)
    print("ready", guardian.pid, flush=True)
    if os.environ.get("CANCEL"):
        time.sleep(1)
        print(guardian.finish(10), flush=True)
    time.sleep(3600)
""")


def mark_of(token: str) -> list[int]:
    """Processes carrying the watcher's mark (the test helper looks for its own variable)."""
    from spoolparse._os.guardian import marked

    return marked(token)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, "closed"])
def test_the_guardian_kills_every_marked_process_once_the_runner_is_gone(how: object, tmp_path: Path) -> None:
    token = os.urandom(8).hex()
    left = tmp_path / "node-log.ndjson"
    left.write_text("")
    env = {**os.environ, "CANCEL": "1" if how == "closed" else ""}
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, token, str(left), *FAKE_CODEX, "--size", "4K", "--hang", "60", "--orphan"],
        stdout=subprocess.PIPE, env=env,
    )
    try:
        assert runner.stdout is not None
        word, pid = runner.stdout.readline().split()
        assert word == b"ready"
        # detached: nobody's child (Ray kills a dying worker's children), so not the runner's
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
        assert int(stat[stat.rfind(b")") + 2 :].split()[1]) != runner.pid
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(mark_of(token)) < 4:  # two agents, each with a grandchild
            time.sleep(0.05)
        assert len(mark_of(token)) == 4
        if how == "closed":
            assert runner.stdout.readline() == b"True\n", "the watcher did not report its sweep over"
            assert mark_of(token) == [] and runner.poll() is None
        else:
            assert isinstance(how, signal.Signals)
            runner.send_signal(how)
            runner.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (mark_of(token) or left.exists()):
            time.sleep(0.05)
        assert mark_of(token) == [] and not left.exists()
    finally:
        runner.kill()
        runner.wait()
        for pid in mark_of(token):
            os.kill(pid, signal.SIGKILL)


def test_marked_processes_are_found_by_their_environment() -> None:
    token = os.urandom(8).hex()
    from spoolparse._os.guardian import MARK_VAR, _kill_marked

    p = subprocess.Popen(["sleep", "60"], env={**os.environ, MARK_VAR: token})
    try:
        # Give a loaded machine a moment: the child is looked for until it shows (or 10 s pass).
        deadline = time.monotonic() + 10
        while not mark_of(token) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert p.poll() is None, f"sleep ended early: {p.returncode}"
        assert mark_of(token) == [p.pid]
        assert _kill_marked(token, frozenset()) == 1  # what the guardian does on each round of its sweep
        p.wait(5)
        assert mark_of(token) == []
    finally:
        p.kill()
        p.wait()


LATE = textwrap.dedent("""
    import os, subprocess, sys
    from spoolparse._os.guardian import OWNER_VAR, guardian
    token = guardian.marked_env(None)[OWNER_VAR]  # starts the guardian
    # as a child caught mid-exec when we die: it carries our mark only a moment after we are gone
    subprocess.Popen(["sh", "-c", f"sleep 0.2; exec env {OWNER_VAR}={token} sleep 60"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(token, flush=True)
    os._exit(0)
""")


def test_a_child_that_gets_the_owner_mark_just_after_we_are_gone_is_still_killed() -> None:
    from spoolparse._os.guardian import OWNER_VAR, marked

    from .runner_support import marker, wait_gone

    test_token, env = marker()
    out = subprocess.run([sys.executable, "-c", LATE], env={**os.environ, **env}, capture_output=True, check=True)
    token = out.stdout.decode().strip()
    assert len(token) == 16
    assert wait_gone(test_token, timeout=5.0) == []  # the sleep (and the sh before it) killed by our guardian
    assert marked(token, var=OWNER_VAR) == []


@pytest.mark.parametrize("detach", [False, True], ids=["attached", "detached"])
def test_the_owner_token_is_not_in_the_guardians_command_line(detach: bool) -> None:
    """``/proc/PID/cmdline`` is readable by every user: a token there would let anyone name our agents (and
    mark a process of theirs to be killed with ours). It goes to the guardian over its pipe instead."""
    code = textwrap.dedent("""
        import sys
        from spoolparse._os.guardian import OWNER_VAR, guardian
        assert guardian.start(detach=sys.argv[1] == "1")
        token = guardian.marked_env({})[OWNER_VAR]
        print(guardian.pid, token, flush=True)
        sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", code, "1" if detach else "0"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None
        pid, token = p.stdout.readline().split()
        assert len(token) == 16
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            cmdline = f.read()
        assert b"guardian.py" in cmdline  # the guardian's own, looked at while it runs
        assert token not in cmdline
        with open(f"/proc/{int(pid)}/environ", "rb") as f:
            assert token not in f.read()
    finally:
        p.kill()
        p.wait()


def test_the_guardian_reads_its_owner_token_from_the_pipe() -> None:
    """The owner sweep works with the token given on the pipe: a process carrying it is killed once the pipe
    closes, and the guardian's own parent (which may carry it) is spared."""
    from spoolparse._os.guardian import OWNER_VAR, serve

    token = os.urandom(8).hex()
    victim = subprocess.Popen(["sleep", "60"], env={**os.environ, OWNER_VAR: token})
    r, w = os.pipe()
    try:
        os.write(w, f"+o {token}\n".encode())
        os.close(w)
        serve(r, os.getpid())
        assert victim.wait(10) == -signal.SIGKILL
    finally:
        os.close(r)
        victim.kill()
        victim.wait()
