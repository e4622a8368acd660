"""What the live views show: the current tool and its title, tokens, retries; per task in a batch."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

import spoolparse
from spoolparse.progress import MAX_TASK_LINES, Activity, RunningTasks

from .helpers import FIXTURES

CLI = [sys.executable, "-m", "spoolparse"]
LIVE_AGENT = [sys.executable, str(FIXTURES / "live_agent.py")]


def _fold(path: Path) -> list[str]:
    """``Activity.summary()`` after each event of a transcript."""
    act = Activity()
    seen: list[str] = []

    def on_event(ev: spoolparse.LiveEvent) -> None:
        act.on_event(ev)
        seen.append(act.summary())

    spoolparse.parse(path, on_event=on_event)
    return seen


def test_activity_follows_a_claude_run() -> None:
    seen = _fold(FIXTURES / "claude" / "realcli_A_partial.jsonl")
    assert "Bash: echo hello · 1.2k in / 1 out · 0 tools" in seen  # tokens so far, per API message
    assert seen[-1] == "done · 2.5k in / 112 out · 1 tool"


def test_activity_counts_retries() -> None:
    seen = _fold(FIXTURES / "claude" / "realcli_B_retries.jsonl")
    assert seen[-1] == "retrying · 0 in / 0 out · 0 tools · 5 retries"


def test_activity_shows_the_latest_call_still_open() -> None:
    act = Activity()
    for kind, data in [("tool_start", {"call_id": "a", "name": "Read", "title": "/a"}),
                       ("tool_start", {"call_id": "b", "name": "Grep", "title": "TODO"}),
                       ("tool_end", {"call_id": "b"})]:
        act.on_event(spoolparse.LiveEvent(kind, 1, "t", data))  # type: ignore[arg-type]
    assert act.doing() == "Read: /a" and act.tools == 1
    act.on_event(spoolparse.LiveEvent("tool_end", 2, "t", {"call_id": "a"}))
    assert act.doing() == "waiting" and act.tools == 2


def test_task_lines_are_bounded() -> None:
    lines = RunningTasks()
    for i in range(MAX_TASK_LINES + 5):
        lines.on_event(f"task-{i}", spoolparse.LiveEvent("tool_start", 1, "t", {"call_id": "x", "name": "sh",
                                                                                 "title": "make " + "x" * 300}))
    drawn = lines.lines(width=80)
    assert len(drawn) == MAX_TASK_LINES + 1 and drawn[-1] == "  … and 5 more running"
    assert all(len(line) <= 80 for line in drawn)
    assert drawn[0].startswith("  task-0  0:00:00  sh: make xxx")
    lines.finished("task-0")
    assert lines.lines()[0].startswith("  task-1 ")


@pytest.mark.slow
def test_batch_progress_shows_each_running_tasks_tool(tmp_path: Path) -> None:
    never = tmp_path / "never"
    tasks = tmp_path / "tasks.jsonl"
    # each task starts its tool ("ls"), then waits for a file that never comes and gives up after 1.5 s
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "cmd": [*LIVE_AGENT, "--wait-for", str(never),
                                                                 "--wait-timeout", "1.5"]}) + "\n" for i in range(2)))
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([*CLI, "batch", "--progress", "--retries", "0", "-j", "2", str(tasks)],
                                stdout=subprocess.PIPE, stderr=slave, env={**os.environ, "COLUMNS": "120"})
        os.close(slave)
        slave = -1
        drawn = b""
        while select.select([master], [], [], 30)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            drawn += chunk
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    outcomes = [json.loads(line) for line in out.splitlines()]
    assert sorted(o["id"] for o in outcomes) == ["t0", "t1"]
    assert b"t0  0:00:0" in drawn and b"t1  0:00:0" in drawn
    assert b"command_execution: ls" in drawn
    assert b"done " in drawn and b"running " in drawn
