"""What the live views show: the current tool and its title, tokens, retries; per task in a batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import spoolparse
from spoolparse.progress import MAX_TASK_LINES, Activity, RunningTasks

from .helpers import FIXTURES, on_a_terminal

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
    status, out, drawn = on_a_terminal([*CLI, "batch", "--progress", "--retries", "0", "-j", "2", str(tasks)],
                               {**os.environ, "COLUMNS": "120"})
    outcomes = [json.loads(line) for line in out.splitlines()]
    assert status == 1 and sorted(o["id"] for o in outcomes) == ["t0", "t1"]
    assert b"t0  0:00:0" in drawn and b"t1  0:00:0" in drawn
    assert b"command_execution: ls" in drawn
    assert b"done " in drawn and b"running " in drawn


# -- nothing an agent or a task file controls reaches the terminal raw ---------------------------------------

#: What an agent or a task file can put in a tool name, a title, an id or a message: a window title (OSC ... BEL),
#: a screen clear, the 8-bit CSI, line breaks of every kind, a bidi override, a zero-width space, a lone surrogate.
HOSTILE = ["\x1b]0;pwned\x07", "\x1b[2J", "\u009b31m", "a\nb", "a\rb", "\u0085", "\u2028", "\u202e", "\u200b",
           "\x7f", "\x00", "\t", "\udcff"]


def _raw_controls(text: str) -> list[str]:
    import unicodedata

    return [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_tool_name_title_or_task_id_is_drawn_printable(hostile: str) -> None:
    """A tool name, a command title or a task id holding ``ESC ]0;…BEL``, ``ESC [2J``, U+009B or a newline went to
    ``batch --progress`` as it was: the window title and the screen changed, and the redraw broke."""
    lines = RunningTasks()
    lines.on_event(f"id{hostile}", spoolparse.LiveEvent(
        "tool_start", 1, "t", {"call_id": "c", "name": f"sh{hostile}", "title": f"make {hostile}"}))
    drawn = lines.lines(width=200)
    assert len(drawn) == 1 and _raw_controls(drawn[0]) == [], drawn
    # shown, not obeyed: e.g. \x1b]0;pwned\x07, in the id, the name and the title
    spelled = "".join((f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if _raw_controls(c) else c
                      for c in hostile)
    assert drawn[0].count(spelled) == 3, (drawn, spelled)


def test_printable_keeps_ordinary_text_and_spells_out_the_rest() -> None:
    from spoolparse._terminal import printable

    for text in ["plain", "héllo wörld", "日本語", "emoji 🎉", "a\u00a0b", ""]:
        assert printable(text) == text
    assert printable("a\x1b[2Jb\u009b\n\u2028\U000e0001") == "a\\x1b[2Jb\\x9b\\x0a\\u2028\\U000e0001"
    assert printable("\ud800") == "\\ud800"


def test_a_message_on_stderr_is_one_printable_line(tmp_path: Path) -> None:
    """A file name is anyone's to choose: ``parse`` named a missing one in its error as it was."""
    name = str(tmp_path / "x\x1b]0;pwned\x07\x1b[2J\ny")
    p = subprocess.run([*CLI, "parse", name], capture_output=True, timeout=60)
    assert p.returncode == 2
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err, err
    assert "x\\x1b]0;pwned\\x07\\x1b[2J\\x0ay" in err, err


def test_json_output_escapes_line_and_paragraph_separators_and_c1(tmp_path: Path) -> None:
    """The summary was exact JSON but carried U+2028, U+2029, U+0085 and U+009B raw: a reader splitting lines
    (JavaScript, Python's ``str.splitlines``) cut it in two, and a terminal showing it met an 8-bit CSI."""
    answer = "one\u2028two\u2029three\u0085four\u009b2J\x7fend"
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"type": "thread.started", "thread_id": "t"}) + "\n"
        + json.dumps({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": answer}}) + "\n"
        + json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}) + "\n"
    )
    p = subprocess.run([*CLI, "parse", str(transcript)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode("utf-8")
    assert len(out.splitlines()) == 1, out
    for raw in ("\u2028", "\u2029", "\u0085", "\u009b", "\x7f"):
        assert raw not in out
    assert json.loads(out)["text"] == answer  # exact all the same


HOSTILE_AGENT = r"""
import json, sys, time
title = sys.argv[1]
print(json.dumps({"type": "thread.started", "thread_id": "t"}), flush=True)
print(json.dumps({"type": "item.started", "item": {"id": "c", "type": "command_execution", "command": title}}),
      flush=True)
time.sleep(1.0)
print(json.dumps({"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "ok"}}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}))
"""


@pytest.mark.slow
def test_batch_progress_on_a_terminal_obeys_nothing_a_task_wrote(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "id\x1b[2J\n\u2028", "cmd": [sys.executable, "-c", HOSTILE_AGENT,
                                                             "ls \x1b]0;pwned\x07\u009b2J"]}) + "\n")
    status, out, drawn = on_a_terminal([*CLI, "batch", "--progress", str(tasks)], {**os.environ, "COLUMNS": "200"})
    assert status == 0 and [json.loads(line)["verdict"] for line in out.splitlines()] == ["ok"]
    assert b"ls \\x1b]0;pwned\\x07\\x9b2J" in drawn, drawn
    assert b"id\\x1b[2J\\x0a\\u2028" in drawn, drawn
    for raw in (b"\x1b]0;", b"\x07", b"\x1b[2J", "\u009b".encode(), "\u2028".encode()):
        assert raw not in drawn, (raw, drawn)
