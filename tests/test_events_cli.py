"""``spoolparse run --events / --events-file / --progress``: NDJSON events, one summary last on stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

import spoolparse

from .helpers import FAKE_CODEX, FIXTURES, on_a_terminal
from .runner_support import wait_for

CLI = [sys.executable, "-m", "spoolparse"]
LIVE_AGENT = [sys.executable, str(FIXTURES / "live_agent.py")]
TRANSCRIPT = [*FAKE_CODEX, "--size", "300K", "--noise", "--warning", "careful", "--pause", "0.0002"]


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], capture_output=True, timeout=120, check=False)


def _ndjson(data: bytes) -> list[dict[str, Any]]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


#: An agent's line for a codex message "hello", as Python source (the agents below write many of them)
HELLO_LINE = "line = b'{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"hello\"}}\\n'\n"

#: An agent that writes 100,000 such lines at once, then sleeps a minute
FLOOD_THEN_SLEEP = (
    "import sys, time\n" + HELLO_LINE + "sys.stdout.buffer.write(line * 100000); sys.stdout.flush(); time.sleep(60)\n"
)


def _read_slowly(stream: IO[bytes], chunk: int, pause: float) -> tuple[threading.Thread, list[bytes]]:
    """A reader of ``stream`` slower than its writer (``chunk`` bytes every ``pause`` seconds), started; what
    it read so far."""
    got: list[bytes] = []

    def read() -> None:
        while data := stream.read1(chunk):  # type: ignore[attr-defined]
            got.append(data)
            time.sleep(pause)

    reader = threading.Thread(target=read)
    reader.start()
    return reader, got


def _interrupt(proc: subprocess.Popen[bytes], reader: threading.Thread, got: list[bytes]) -> tuple[bytes, bytes]:
    """Ctrl-C to ``proc`` (stderr read by ``reader`` into ``got``): its stdout and stderr once it ended with the
    signal's exit status."""
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.stdout is not None
        out = proc.stdout.read()
        assert proc.wait(60) == 128 + signal.SIGINT
    finally:
        proc.kill()
        proc.wait()
        reader.join(60)
    return out, b"".join(got)


def _ends_with_the_interrupt(err: bytes) -> list[dict[str, Any]]:
    """The events of an interrupted run's stderr, checked to be whole NDJSON lines, the last the one error
    that says why it ended."""
    assert err.endswith(b"\n"), err[-300:]
    lines = [json.loads(line) for line in err.splitlines()]
    assert lines[-1]["kind"] == "error" and "SIGINT" in lines[-1]["message"], lines[-3:]
    assert sum(1 for ev in lines if ev["kind"] == "error") == 1
    return lines


def _expected_events(tmp_path: Path) -> list[dict[str, Any]]:
    """The events a post-hoc parse reports for the same (deterministic) transcript."""
    path = tmp_path / "transcript.jsonl"
    with open(path, "wb") as f:
        subprocess.run(TRANSCRIPT, stdout=f, check=True)
    seen: list[dict[str, Any]] = []
    spoolparse.parse(path, on_event=lambda ev: seen.append(json.loads(json.dumps(ev.as_dict()))))
    return _untimed(seen)


def _untimed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without their read time, the one field that differs between two reads of a stream."""
    return [{k: v for k, v in e.items() if k != "time"} for e in events]


def test_events_on_stderr_are_ndjson_and_the_summary_is_alone_on_stdout(tmp_path: Path) -> None:
    p = _cli("run", "--events", "--", *TRANSCRIPT)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)  # exactly one JSON document
    assert p.stdout.count(b"\n") == 1
    assert summary["ok"] and summary["text"].startswith("FINAL-ANSWER")
    events = _ndjson(p.stderr)
    assert _untimed(events) == _expected_events(tmp_path)
    kinds = {e["kind"] for e in events}
    assert {"session", "warning", "tool_start", "tool_end", "text", "usage"} <= kinds


def test_events_file_leaves_stderr_quiet(tmp_path: Path) -> None:
    out = tmp_path / "events.ndjson"
    p = _cli("run", "--events-file", str(out), "--", *TRANSCRIPT)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    assert json.loads(p.stdout)["ok"]
    assert _untimed(_ndjson(out.read_bytes())) == _expected_events(tmp_path)


def test_no_events_and_no_progress_by_default_off_a_terminal() -> None:
    p = _cli("run", "--", *LIVE_AGENT)
    assert p.returncode == 0
    assert p.stderr == b""
    assert json.loads(p.stdout)["text"] == "FINAL-ANSWER: live"


def test_forced_progress_off_a_terminal_keeps_the_contract() -> None:
    p = _cli("run", "--progress", "--events", "--", *LIVE_AGENT, "--ticks", "2")
    assert p.returncode == 0
    assert json.loads(p.stdout)["ok"]
    assert p.stdout.count(b"\n") == 1


def test_events_file_that_cannot_be_opened_is_one_line_and_no_child(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    p = _cli("run", "--events-file", str(tmp_path / "no" / "such" / "dir"), "--", "touch", str(marker))
    assert p.returncode == 125  # a file spoolparse writes could not be: its own failure
    assert p.stdout == b""
    assert p.stderr.count(b"\n") == 1 and p.stderr.startswith(b"spoolparse: error:")
    assert not marker.exists()


def test_failed_run_still_prints_events_then_summary() -> None:
    p = _cli("run", "--events", "--", *FAKE_CODEX, "--size", "5K", "--fail", "model overloaded")
    assert p.returncode == 1
    events = _ndjson(p.stderr)
    failed = [e for e in events if e["type"] == "turn.failed"]
    assert [(e["kind"], e.get("message"), e.get("ok")) for e in failed] == [
        ("error", "model overloaded", None), ("turn_end", None, False)]
    assert failed[-1] == events[-1]
    assert json.loads(p.stdout)["error"] == "model overloaded"


def test_progress_is_drawn_on_a_terminal_stderr() -> None:
    status, out, drawn = on_a_terminal([*CLI, "run", "--", *LIVE_AGENT, "--ticks", "3", "--interval", "0.4"],
                               {**os.environ, "TERM": "xterm", "COLUMNS": "120"})
    assert status == 0
    assert json.loads(out)["ok"]
    assert b"spooled" in drawn and b"tokens" in drawn and b"tools" in drawn
    assert b"\x1b[" in drawn  # drawn in place, not printed line after line


def test_help_lists_the_options() -> None:
    p = _cli("run", "--help")
    for opt in (b"--events", b"--events-file", b"--progress", b"--no-progress"):
        assert opt in p.stdout


@pytest.mark.slow
def test_events_into_a_pipe_nobody_reads_hold_up_no_timeout() -> None:
    """``run --events`` with stderr a pipe that nobody drains: the writes block, the timeout does not. The
    agent is gone on time (looked for in /proc by its mark); once stderr is read, every event comes out."""
    from .runner_support import marked_pids, marker, wait_for, wait_gone

    token, mark = marker()
    # the agent alone marked (not the CLI, which lives on while stderr is full)
    agent = ["env", *(f"{k}={v}" for k, v in mark.items()), sys.executable, "-c", FLOOD_THEN_SLEEP]
    proc = subprocess.Popen([*CLI, "run", "--events", "--timeout", "1", "--", *agent],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: marked_pids(token)), "the agent never started"
        assert wait_gone(token, timeout=15.0) == [], "the agent outlived its timeout behind a full stderr"
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 124, err[-2000:]
    events = [json.loads(line) for line in err.splitlines() if line.startswith(b"{")]
    assert sum(ev.get("kind") == "text" for ev in events) == 100000
    assert json.loads(out)["timed_out"] is True


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "batch"])
def test_an_interrupt_while_events_stream_to_a_slow_reader_leaves_whole_lines(command: str) -> None:
    """Ctrl-C while the events are written to a slow reader of stderr: the stream stays NDJSON to its end —
    no line cut short, none written after the error line that says why the run ended."""
    agent = [sys.executable, "-c", FLOOD_THEN_SLEEP]
    if command == "run":
        argv, task = [*CLI, "run", "--events", "--", *agent], b""
    else:
        argv, task = [*CLI, "batch", "--events", "-"], json.dumps({"id": "a", "cmd": agent}).encode() + b"\n"
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(task)
    proc.stdin.close()
    reader, got = _read_slowly(proc.stderr, 4096, 0.01)
    ready = wait_for(lambda: len(got) > 20)
    _, err = _interrupt(proc, reader, got)
    assert ready, "no events came"
    _ends_with_the_interrupt(err)


@pytest.mark.slow
@pytest.mark.parametrize("events", [100_000, 900], ids=["backlog-unparsed", "all-parsed-and-queued"])
def test_an_interrupt_after_the_agent_exited_while_its_events_are_still_written(events: int) -> None:
    """The agent is done; its events are still going out to a slow reader when Ctrl-C comes (its backlog not
    yet parsed, or parsed and waiting for the listener). The run keeps the verdict it earned: its summary is
    printed, ok, the exit status is the signal's, and stderr is whole lines."""
    code = (
        "import sys\n" + HELLO_LINE + f"sys.stdout.buffer.write(line * {events})\n"
        "sys.stdout.buffer.write(b'{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\\n')\n"
    )
    proc = subprocess.Popen([*CLI, "run", "--events", "--", sys.executable, "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    reader, got = _read_slowly(proc.stderr, 1024, 0.05)
    time.sleep(1.5)  # the agent has exited; a pipe's 64 KiB and 20 KiB/s read: seconds of events to go
    still_writing = proc.poll() is None
    out, err = _interrupt(proc, reader, got)
    assert still_writing, "the events were all written already"
    _ends_with_the_interrupt(err)
    summary = json.loads(out)
    assert summary["ok"] is True and summary["text"] == "hello", (summary["error"], summary["warnings"])
