"""The runner's watcher: when the runner dies, however it dies, its agents (and theirs) die too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from .runner_support import FAKE_CODEX

RUNNER = textwrap.dedent("""
    import os, subprocess, sys, time
    from spoolparse.runner import reaper
    token = sys.argv[1]
    os.environ[reaper.MARK_VAR] = token
    w = reaper.start(token)
    for _ in range(2):
        subprocess.Popen(sys.argv[2:], start_new_session=True, stdout=subprocess.DEVNULL)
    print("ready", flush=True)
    if os.environ.get("CANCEL"):
        time.sleep(1)
        print(reaper.finished(w, 10), flush=True)
    time.sleep(3600)
""")


def mark_of(token: str) -> list[int]:
    """Processes carrying the watcher's mark (the test helper looks for its own variable)."""
    from spoolparse.runner.reaper import marked

    return marked(token)


@pytest.mark.parametrize("how", [signal.SIGKILL, "closed"])
def test_the_watcher_kills_every_marked_process_once_the_runner_is_gone(how: object) -> None:
    token = os.urandom(8).hex()
    env = {**os.environ, "CANCEL": "1" if how == "closed" else ""}
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, token, *FAKE_CODEX, "--size", "4K", "--hang", "60", "--orphan"],
        stdout=subprocess.PIPE, env=env,
    )
    try:
        assert runner.stdout is not None and runner.stdout.readline() == b"ready\n"
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
        while time.monotonic() < deadline and mark_of(token):
            time.sleep(0.05)
        assert mark_of(token) == []
    finally:
        runner.kill()
        runner.wait()
        for pid in mark_of(token):
            os.kill(pid, signal.SIGKILL)


def test_marked_processes_are_found_by_their_environment() -> None:
    token = os.urandom(8).hex()
    from spoolparse.runner.reaper import MARK_VAR, sweep

    p = subprocess.Popen(["sleep", "60"], env={**os.environ, MARK_VAR: token})
    try:
        # Give a loaded machine a moment: the child is looked for until it shows (or 10 s pass).
        deadline = time.monotonic() + 10
        while not mark_of(token) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert p.poll() is None, f"sleep ended early: {p.returncode}"
        assert mark_of(token) == [p.pid]
        assert sweep(token) == 1
        p.wait(5)
        assert mark_of(token) == []
    finally:
        p.kill()
        p.wait()
