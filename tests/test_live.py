"""Live events from the synchronous ``run``: while the child runs, equal to a post-hoc parse, clean failure."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse._os import wait as _wait
from spoolparse.child import Child

from .helpers import FAKE_CODEX, FIXTURES, event_dict, group_gone, open_fds

LIVE_AGENT = [sys.executable, str(FIXTURES / "live_agent.py")]


class Boom(Exception):
    pass


def _posthoc(r: spoolparse.Result, **options: Any) -> list[dict[str, Any]]:
    """The events a post-hoc ``parse`` of the run's own spooled stdout reports."""
    assert r.stdout is not None
    r.stdout.seek(0)
    seen: list[dict[str, Any]] = []
    spoolparse.parse(r.stdout, on_event=lambda ev: seen.append(event_dict(ev)), **options)
    return seen


def test_events_arrive_while_the_child_runs(tmp_path: Path) -> None:
    go = tmp_path / "go"
    started: list[Child] = []
    early: list[tuple[str, bool, bool]] = []

    def on_event(ev: spoolparse.LiveEvent) -> None:
        child = started[0]
        if not go.exists():
            # the child cannot finish before this file exists: it waits for it
            early.append((ev.kind, child.exited(), group_gone(child.pgid)))
            if ev.kind == "tool_start":
                go.touch()

    with spoolparse.run([*LIVE_AGENT, "--wait-for", str(go)], on_event=on_event, on_start=started.append) as r:
        assert r.ok and r.text == "FINAL-ANSWER: live"
    assert [k for k, _, _ in early] == ["session", "turn_start", "tool_start"]
    assert all(not exited and not gone for _, exited, gone in early)


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        ([*FAKE_CODEX, "--size", "600K", "--noise", "--warning", "careful", "--error", "boom"], {}),
        ([*FAKE_CODEX, "--size", "200K", "--blob", "3M", "--pause", "0.0005"], {"max_line": 1 << 20}),
        ([*FAKE_CODEX, "--size", "50K", "--fail", "model overloaded"], {}),
        ([*LIVE_AGENT, "--ticks", "5", "--interval", "0.02", "--partial"], {}),
        ([*FAKE_CODEX, "--size", "20K", "--no-newline"], {"provider": "codex"}),
    ],
    ids=["noise-warning-error", "oversize-line", "failed", "partial-line", "no-final-newline"],
)
def test_live_events_equal_posthoc_parse(argv: list[str], options: dict[str, Any]) -> None:
    live: list[dict[str, Any]] = []
    with spoolparse.run(argv, on_event=lambda ev: live.append(event_dict(ev)), **options) as r:
        assert live, "no events"
        assert live == _posthoc(r, **options)


def test_partial_line_waits_for_its_newline() -> None:
    texts: list[str] = []

    def on_event(ev: spoolparse.LiveEvent) -> None:
        if ev.kind == "text":
            texts.append(ev.data["text"])

    with spoolparse.run([*LIVE_AGENT, "--ticks", "0", "--partial"], on_event=on_event) as r:
        assert r.text == "FINAL-ANSWER: live"
    assert texts == ["FINAL-ANSWER: live"]
    assert r.invalid_lines == 0


def test_failing_callback_stops_the_run_cleanly(tmp_path: Path) -> None:
    before = open_fds()
    started: list[Child] = []

    def on_event(ev: spoolparse.LiveEvent) -> None:
        raise Boom(ev.kind)

    # the child would wait 30 s for a file nobody creates: only the kill ends it early
    with pytest.raises(Boom, match="session"):
        spoolparse.run([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")], on_event=on_event,
                       on_start=started.append)
    pgid = started[0].pgid
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    assert open_fds() == before


def test_failing_callback_on_the_last_event_closes_everything() -> None:
    before = open_fds()

    def on_event(ev: spoolparse.LiveEvent) -> None:
        if ev.kind == "usage":
            raise Boom("late")

    with pytest.raises(Boom, match="late"):
        spoolparse.run([*LIVE_AGENT], on_event=on_event)
    assert open_fds() == before


@pytest.mark.slow
def test_timeout_still_reports_the_events_before_it(tmp_path: Path) -> None:
    kinds: list[str] = []
    started: list[Child] = []
    with spoolparse.run([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")], timeout=2.0, grace=0.5,
                        on_event=lambda ev: kinds.append(ev.kind), on_start=started.append) as r:
        assert r.timed_out and not r.ok
    assert kinds[:3] == ["session", "turn_start", "tool_start"]
    assert group_gone(started[0].pgid)


def _record_waiters(monkeypatch: pytest.MonkeyPatch) -> list[_wait.SpoolWaiter]:
    """Every SpoolWaiter made from now on, to see which way it waited."""
    waiters: list[_wait.SpoolWaiter] = []
    real_init = _wait.SpoolWaiter.__init__

    def init(self: _wait.SpoolWaiter, *a: Any, **kw: Any) -> None:
        real_init(self, *a, **kw)
        waiters.append(self)

    monkeypatch.setattr(_wait.SpoolWaiter, "__init__", init)
    return waiters


def test_polling_fallback_gives_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [*LIVE_AGENT, "--ticks", "4", "--interval", "0.01", "--partial"]
    with spoolparse.run(argv, on_event=None) as r:
        expected = _posthoc(r)
    monkeypatch.setattr(_wait, "_shared_dispatcher", lambda: None)  # as where inotify is missing
    live: list[dict[str, Any]] = []
    waiters = _record_waiters(monkeypatch)
    with spoolparse.run(argv, on_event=lambda ev: live.append(event_dict(ev))) as r:
        assert r.ok
    assert live == expected
    assert waiters and not waiters[0].event_driven  # the fallback really ran


def test_inotify_reports_writes_to_a_nameless_spool(tmp_path: Path) -> None:
    ino = _wait.open_inotify()
    if ino is None:
        pytest.skip("needs inotify (Linux with fs.inotify.max_user_instances > 0: sysctl fs.inotify)")
    spool = spoolparse.spool.open_spool(str(tmp_path))
    try:
        wd = ino.watch(spool.fileno())
        assert ino.drain() == set()
        spool.write(b"x\n")
        spool.flush()
        assert ino.drain() == {wd}
        assert ino.drain() == set()
        ino.unwatch(wd)
        spool.write(b"y\n")
        spool.flush()
        assert ino.drain() == set()
    finally:
        ino.close()
        spool.close()
    assert ino.closed


def test_waiter_wakes_on_a_write_not_on_its_timeout(tmp_path: Path) -> None:
    ino = _wait.open_inotify()
    if ino is None:
        pytest.skip("needs inotify (Linux with fs.inotify.max_user_instances > 0: sysctl fs.inotify)")
    ino.close()
    spool = spoolparse.spool.open_spool(str(tmp_path))
    r, w = os.pipe()  # a stand-in pidfd that never becomes readable
    waiter = _wait.SpoolWaiter((spool.fileno(),), r)
    try:
        assert waiter.event_driven
        assert waiter.next_interval(None) == _wait.IDLE_WAKE
        timer = threading.Timer(0.05, lambda: (spool.write(b"line\n"), spool.flush()))
        timer.start()
        # a wait of an hour that returns means the write woke it
        waiter.wait(3600)
        timer.join()
        assert waiter.wakeups == 1
    finally:
        waiter.close()
        spool.close()
        os.close(r)
        os.close(w)


def test_polling_backoff_is_capped() -> None:
    steps = [_wait.next_interval(None, event_driven=False)]
    for _ in range(20):
        steps.append(_wait.next_interval(steps[-1], event_driven=False))
    assert steps[0] == spoolparse.limits.POLL_MIN
    assert max(steps) == _wait.POLL_IDLE
    assert steps == sorted(steps)


def test_events_written_during_the_grace_reach_the_callback() -> None:
    # the child ignores SIGTERM and keeps writing through its grace, until SIGKILL
    argv = [*FAKE_CODEX, "--size", "400K", "--ignore-term", "--pause", "0.01"]
    live: list[dict[str, Any]] = []
    with spoolparse.run(argv, timeout=1.0, grace=0.3, on_event=lambda ev: live.append(event_dict(ev))) as r:
        assert r.timed_out and r.returncode in (-9, -15)  # -15: TERM came before the child's handler
        assert live == _posthoc(r)


def _inotify_instances() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                n += 1
        except OSError:
            pass
    return n


@pytest.mark.slow
def test_two_hundred_threads_share_one_inotify_instance() -> None:
    """The per-user limit is 128 instances by default: one per thread would run out of them."""
    from concurrent.futures import ThreadPoolExecutor

    argv = [*LIVE_AGENT, "--ticks", "3", "--interval", "0.05"]
    seen: list[int] = []

    def one(_: int) -> bool:
        with spoolparse.run(argv, containment=None) as r:
            seen.append(_inotify_instances())
            return r.ok

    with ThreadPoolExecutor(200) as pool:
        oks = list(pool.map(one, range(200)))
    assert all(oks)
    assert max(seen) <= 1


def test_descriptor_numbers_past_1024_are_fine() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"needs a hard RLIMIT_NOFILE of at least 1200 (it is {hard}): ulimit -Hn")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while len(held) < 1100:  # every descriptor the run opens now has a number past 1024
            held.append(os.open(os.devnull, os.O_RDONLY))
        assert min(held[-50:]) > 1024
        with spoolparse.run([*LIVE_AGENT, "--ticks", "3", "--interval", "0.02"]) as r:
            assert r.ok, r.error
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_no_inotify_instance_to_be_had_falls_back_to_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any) -> None:
        raise OSError(errno.EMFILE, "Too many open files")  # as at the per-user instance limit

    monkeypatch.setattr(_wait, "_dispatcher", None)
    monkeypatch.setattr(_wait, "_dispatcher_failed", False)
    monkeypatch.setattr(_wait.Inotify, "__init__", refuse)
    waiters = _record_waiters(monkeypatch)
    with spoolparse.run([*LIVE_AGENT, "--ticks", "3", "--interval", "0.02"]) as r:
        assert r.ok, r.error
    assert waiters and not waiters[0].event_driven


def _until_gone(pgid: int, within: float = 20.0) -> bool:
    """Wait (a listener holding up its caller) until the group is gone; whether it went in time."""
    deadline = time.monotonic() + within
    while not group_gone(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return group_gone(pgid)


@pytest.mark.slow
def test_a_slow_listener_holds_up_no_timeout(tmp_path: Path) -> None:
    """A listener that blocks (a display that hangs, ``--events`` into a full pipe) delays the events, never
    the run's timeout: the child is killed on time while the listener is still in its first event. Every event
    still reaches it, in order, before ``run`` returns."""
    started: list[Child] = []
    seen: list[dict[str, Any]] = []
    gone_in_time: list[bool] = []

    def on_event(ev: spoolparse.LiveEvent) -> None:
        if not gone_in_time:
            gone_in_time.append(_until_gone(started[0].pgid))
        seen.append(event_dict(ev))

    with spoolparse.run([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")], timeout=1.0, grace=0.5,
                        on_event=on_event, on_start=started.append) as r:
        assert gone_in_time == [True], "the timeout waited for the listener"
        assert r.timed_out and not r.ok
        assert seen and seen == _posthoc(r)


@pytest.mark.slow
def test_events_to_a_stalled_listener_stay_within_their_bound() -> None:
    """While the listener is stalled, output is not parsed into events beyond EVENT_BACKLOG: memory stays
    bounded (the spool holds the rest), and the events all come once it takes them again."""
    from spoolparse import _limits

    line = b'{"type":"item.completed","item":{"type":"agent_message","text":"hi"}}\n'
    count = 60_000
    release = threading.Event()
    peak: list[int] = []
    started: list[Child] = []
    kinds: list[str] = []

    def on_event(ev: spoolparse.LiveEvent) -> None:
        if not release.is_set():
            # stalled until the child has exited (its whole output is then on disk, most of it unparsed)
            child = started[0]
            while not child.exited():
                time.sleep(0.02)
            time.sleep(0.3)  # the run's loop has had time to parse all it would
            peak.append(child.offset)
            release.set()
        kinds.append(ev.kind)

    end = b'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\n'
    writer = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({line!r} * {count} + {end!r})"]
    r = spoolparse.run(writer, on_event=on_event, on_start=started.append, keep_output=False)
    assert r.ok and r.text == "hi"
    assert kinds.count("text") == count
    # what was parsed while the listener stalled: at most the bound and a slice's worth of lines
    per_slice = _limits.PARSE_SLICE // len(line) + 1
    assert peak[0] <= (_limits.EVENT_BACKLOG + per_slice + 1) * len(line) + _limits.PARSE_SLICE, peak


@pytest.mark.slow
@pytest.mark.parametrize("api", ["run", "run_many"])
def test_large_events_waiting_for_a_stalled_listener_stay_within_a_byte_bound(api: str) -> None:
    """EVENT_BACKLOG counts events; large ones (an agent's 4 MiB messages) must not add up to GBs while the
    listener stalls: the waiting events are bounded by the bytes they came from too (EVENT_BACKLOG_BYTES).
    Peak RSS, in a process of its own: 150 messages of 4 MiB (600 MiB of them) while the listener stalls."""
    import json
    import subprocess

    code = r'''
import json, resource, sys, threading, time
import spoolparse
api = sys.argv[1]
agent = """
import sys, json
line = json.dumps({"type":"item.completed","item":{"type":"agent_message","text":"x" * (4 << 20)}}).encode() + b"\\n"
for _ in range(150): sys.stdout.buffer.write(line)
sys.stdout.buffer.write(b'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}\\n')
"""
seen = []
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def stall(*_):
    if not seen:
        time.sleep(4)  # the agent is done in well under that: all its output is there to parse
        seen.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
if api == "run":
    r = spoolparse.run([sys.executable, "-c", agent], on_event=lambda ev: stall(), keep_output=False)
    ok, text = r.ok, r.text
else:
    batch = spoolparse.run_many([[sys.executable, "-c", agent]])
    batch.on_event = stall
    (o,) = list(batch)
    ok, text = o.ok, o.summary["text"]
print(json.dumps({"ok": ok, "text_mib": len(text) >> 20, "base_mib": base >> 10, "stalled_mib": seen[0] >> 10}))
'''
    p = subprocess.run([sys.executable, "-c", code, api], capture_output=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert got["ok"] and got["text_mib"] == 4, got
    # the bound (16 MiB of lines), one message in flight, a slice: far below the 600 MiB it would be
    assert got["stalled_mib"] - got["base_mib"] < 128, got
