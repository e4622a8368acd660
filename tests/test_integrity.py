"""Answer integrity: ``ok`` only when the agent finished and its whole answer is in hand.

Each case is checked on the library and through the CLI (exit status and JSON summary).
"""

from __future__ import annotations

import decimal
import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import spoolparse
from spoolparse import StreamParser
from spoolparse._decode.jsonout import dumps
from spoolparse._decode.topkeys import TopKeys
from spoolparse.cli import main
from spoolparse.lines import Dropped, Event, LineScanner

from .helpers import jl

KIB = 1024
MIB = 1024 * 1024


def summary(data: bytes, **kw: Any) -> dict[str, Any]:
    sp = StreamParser(kw.pop("provider", "auto"), **kw)
    sp.feed(data)
    return sp.finish(args=None).summary()


def chunked(data: bytes, step: int, **kw: Any) -> dict[str, Any]:
    sp = StreamParser(kw.pop("provider", "auto"), **kw)
    for i in range(0, len(data), step):
        sp.feed(data[i : i + step])
    return sp.finish(args=None).summary()


def cli(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, dict[str, Any], str]:
    rc = main(list(argv))
    out, err = capsysbinary.readouterr()
    return rc, loads(out), err.decode()  # integers of any size stay exact


def write(tmp_path: Path, data: bytes, name: str = "t.jsonl") -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def sorted_line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode() + b"\n"


THREAD = {"type": "thread.started", "thread_id": "t-1"}
TURN_DONE = {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}}


def agent(text: str, i: int = 0) -> dict[str, Any]:
    return {"type": "item.completed", "item": {"id": f"item_{i}", "type": "agent_message", "text": text}}


def claude_result(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": text, "session_id": "s", **extra}


CLAUDE_INIT = {"type": "system", "subtype": "init", "session_id": "s", "model": "claude-x"}
GEMINI_INIT = {"type": "init", "timestamp": "t", "session_id": "g", "model": "auto"}


def gemini_delta(text: str) -> dict[str, Any]:
    return {"type": "message", "timestamp": "t", "role": "assistant", "content": text, "delta": True}


GEMINI_RESULT = {"type": "result", "timestamp": "t", "status": "success", "stats": {}}


# -- 1. key order ---------------------------------------------------------------------------------


def test_codex_item_with_type_last_past_the_probe_window(tmp_path: Path, capsysbinary: Any) -> None:
    big = "A" * (100 * KIB)
    data = jl(THREAD) + sorted_line(agent(big)) + jl(TURN_DONE)
    s = summary(data)
    assert s["provider"] == "codex" and s["text"] == big and s["ok"] is True
    for step in (1000, 64 * KIB + 7):
        assert chunked(data, step)["text"] == big
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 0 and out["text"] == big and out["ok"] is True


def test_item_type_nested_past_the_probe_window() -> None:
    # the top-level type comes first, the item's own type after a long field
    line = b'{"type":"item.completed","item":{"id":"i","text":"' + b"B" * (80 * KIB) + b'","type":"agent_message"}}\n'
    s = summary(jl(THREAD) + line + jl(TURN_DONE))
    assert s["text"] == "B" * (80 * KIB) and s["ok"] is True


def test_claude_result_with_type_last(tmp_path: Path, capsysbinary: Any) -> None:
    big = "C" * (100 * KIB)
    data = jl(CLAUDE_INIT) + sorted_line(claude_result(big))
    s = summary(data)
    assert s["provider"] == "claude" and s["text"] == big and s["ok"] is True
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 0 and out["text"] == big


def test_type_last_on_a_line_longer_than_max_line_is_found_by_the_key_scan() -> None:
    big = "D" * (300 * KIB)
    data = jl(THREAD) + sorted_line(agent(big)) + jl(TURN_DONE)
    for step in (4 * KIB, 100 * KIB, len(data)):
        s = chunked(data, step, max_line=64 * KIB, max_retained=1 * MIB)
        assert s["text"] == big and s["ok"] is True and s["dropped"] == []


def test_skipped_type_last_on_a_long_line_is_reported_not_kept() -> None:
    tool = {"type": "item.completed",
            "item": {"id": "x", "type": "command_execution", "aggregated_output": "o" * 200_000}}
    data = jl(THREAD, agent("fine")) + sorted_line(tool) + jl(TURN_DONE)
    s = chunked(data, 8 * KIB, max_line=64 * KIB, max_retained=128 * KIB)
    assert s["text"] == "fine" and s["ok"] is True
    assert s["dropped"] and s["dropped"][0]["type"] == "item.completed/command_execution"
    assert s["dropped"][0]["reason"] == "oversize"


def test_top_keys_scan() -> None:
    def key(data: bytes, step: int = 3) -> tuple[str | None, str | None, str | None]:
        k = TopKeys()
        for i in range(0, len(data), step):
            k.feed(data, i, min(len(data), i + step))
        return k.top, k.sub, k.msg

    assert key(b'{"a":"x\\"type\\":\\"no\\"","b":[{"type":"deep"}],"type":"yes"}') == ("yes", None, None)
    assert key(b'{"item":{"text":"t","type":"agent_message"},"type":"item.completed"}') == (
        "item.completed", "agent_message", None)
    assert key(b'{"id":"0","msg":{"a":{"type":"no"},"type":"token_count"}}') == (None, None, "token_count")
    assert key(b'{"t\\u0079pe":"escaped"}') == ("escaped", None, None)
    assert key(b'{"x":"' + b"\\\\" * 5000 + b'","type":"after"}', 7) == ("after", None, None)
    assert key(b'{"x":1,"type":7}') == (None, None, None)


# -- 2. over-ceiling final answer -------------------------------------------------------------------


def test_codex_final_answer_over_max_retained_is_not_replaced_by_an_earlier_one(
    tmp_path: Path, capsysbinary: Any
) -> None:
    data = jl(THREAD, agent("early progress note", 0), agent("E" * (300 * KIB), 1), TURN_DONE)
    s = summary(data, max_line=64 * KIB, max_retained=128 * KIB)
    assert s["ok"] is False and s["text"] is None
    assert "final answer (300 KiB at line 3) exceeded max_retained (128 KiB) and was dropped" in s["error"]
    rc, out, _ = cli(capsysbinary, "parse", "--max-line", "64K", "--max-retained", "128K", write(tmp_path, data))
    assert rc == 1 and out["ok"] is False and out["text"] is None and "max_retained" in out["error"]


def test_an_earlier_dropped_message_does_not_cost_the_final_answer() -> None:
    data = jl(THREAD, agent("E" * (300 * KIB), 0), agent("final", 1), TURN_DONE)
    s = summary(data, max_line=64 * KIB, max_retained=128 * KIB)
    assert s["ok"] is True and s["text"] == "final" and s["dropped_count"] == 1


def test_claude_result_over_max_retained() -> None:
    data = jl(CLAUDE_INIT, {"type": "assistant", "session_id": "s", "message": {
        "model": "m", "content": [{"type": "text", "text": "earlier"}]}}, claude_result("R" * (200 * KIB)))
    s = summary(data, max_line=64 * KIB, max_retained=128 * KIB)
    assert s["ok"] is False and s["text"] is None and "exceeded max_retained (128 KiB)" in s["error"]


def test_gemini_delta_over_max_retained_loses_the_joined_answer() -> None:
    data = jl(GEMINI_INIT, gemini_delta("part one "), gemini_delta("G" * (200 * KIB)), gemini_delta("end"),
              GEMINI_RESULT)
    s = summary(data, max_line=64 * KIB, max_retained=128 * KIB)
    assert s["provider"] == "gemini" and s["ok"] is False and s["text"] is None
    assert "exceeded max_retained" in s["error"]


def test_opencode_text_over_max_retained() -> None:
    def oc(t: str, **part: Any) -> dict[str, Any]:
        return {"type": t, "timestamp": 1, "sessionID": "ses_1", "part": part}

    data = jl(oc("step_start", id="p0"), oc("text", messageID="m1", text="O" * (200 * KIB)),
              oc("step_finish", reason="stop", tokens={"input": 1, "output": 1}))
    s = summary(data, max_line=64 * KIB, max_retained=128 * KIB)
    assert s["provider"] == "opencode" and s["ok"] is False and "exceeded max_retained" in s["error"]


# -- 2b. an answer line whose text is not text -------------------------------------------------------

NOT_TEXT = {"number": 123, "null": None, "list": ["a"], "object": {"text": "a"}, "missing": KeyError}


def _without_text(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    inner = obj
    for key in path[:-1]:
        inner = inner[key]
    if value is KeyError:
        del inner[path[-1]]
    else:
        inner[path[-1]] = value
    return obj


def _oc(t: str, **part: Any) -> dict[str, Any]:
    return {"type": t, "timestamp": 1, "sessionID": "ses_1", "part": part}


OC_FINISH = _oc("step_finish", reason="stop", tokens={"input": 1, "output": 1})
#: provider -> (lines before the answer, the answer line, the path to its text, lines after it). The lines
#: before hold an earlier message: it must never stand in for the answer that could not be read.
TEXTLESS = {
    "codex": ([THREAD, agent("earlier note", 0)], agent("the answer", 1), ("item", "text"), [TURN_DONE]),
    "codex-legacy": ([{"id": "0", "msg": {"type": "session_configured", "session_id": "s", "model": "m"}},
                      {"id": "1", "msg": {"type": "agent_message", "message": "earlier note"}}],
                     {"id": "1", "msg": {"type": "agent_message", "message": "the answer"}}, ("msg", "message"),
                     [{"id": "1", "msg": {"type": "task_complete", "last_agent_message": "the answer"}}]),
    "gemini": ([GEMINI_INIT, gemini_delta("part one ")], gemini_delta("part two"), ("content",), [GEMINI_RESULT]),
    "opencode": ([_oc("step_start", id="p0"), _oc("text", messageID="m1", text="earlier note"),
                  _oc("step_finish", reason="tool-calls"), _oc("step_start", id="p1")],
                 _oc("text", messageID="m2", text="the answer"), ("part", "text"), [OC_FINISH]),
}


@pytest.mark.parametrize("what", sorted(NOT_TEXT))
@pytest.mark.parametrize("case", sorted(TEXTLESS))
def test_an_answer_line_without_text_is_a_lost_answer(case: str, what: str) -> None:
    """An answer event whose text is missing or not a string: the answer is not in hand. It was ``ok`` with
    ``text: null`` and no word of why, or with an earlier message (opencode) or a part (gemini) as the answer."""
    before, answer, path, after = TEXTLESS[case]
    fine = summary(jl(*before, answer, *after))
    assert fine["ok"] is True and fine["text"] in ("the answer", "part one part two"), fine
    s = summary(jl(*before, _without_text(answer, path, NOT_TEXT[what]), *after))
    assert s["ok"] is False and s["text"] is None, s
    assert f"at line {len(before) + 1}) carries no text" in s["error"], s["error"]
    assert any("carries no text" in w for w in s["warnings"]), s["warnings"]


KIMI_CALL = {"role": "assistant", "content": [{"type": "text", "text": "Let me run it."}],
             "tool_calls": [{"type": "function", "id": "Shell:0", "function": {"name": "Shell", "arguments": "{}"}}]}
KIMI_TOOL = {"role": "tool", "content": [{"type": "text", "text": "hello"}], "tool_call_id": "Shell:0"}


@pytest.mark.parametrize("content", [5, None, KeyError, {"text": "a"}, [{"type": "text", "text": 5}],
                                     [{"type": "text", "text": "half "}, {"type": "text", "text": None}]])
def test_a_kimi_final_message_without_text_is_a_lost_answer(content: Any) -> None:
    """Kimi's answer is its last assistant message (the one without tool calls). When that message's content was
    no text, the text of an earlier one — the message that called a tool — was given as the answer, ``ok``."""
    final: dict[str, Any] = {"role": "assistant"}
    if content is not KeyError:
        final["content"] = content
    s = summary(jl(KIMI_CALL, KIMI_TOOL, final), provider="kimi")
    assert s["ok"] is False and s["text"] is None, s
    assert "at line 3) carries no text" in s["error"], s["error"]


def test_a_kimi_final_message_with_no_text_part_gives_no_earlier_message() -> None:
    """A last message with no text part at all (only thinking): no answer text, and never an earlier message."""
    final = {"role": "assistant", "content": [{"type": "think", "think": "done"}]}
    s = summary(jl(KIMI_CALL, KIMI_TOOL, final), provider="kimi")
    assert s["text"] is None, s
    good = summary(jl(KIMI_CALL, KIMI_TOOL, {"role": "assistant", "content": "the answer"}), provider="kimi")
    assert good["ok"] is True and good["text"] == "the answer", good


@pytest.mark.parametrize("provider", ["claude", "qwen"])
def test_a_claude_result_without_text_never_gives_the_text_before_a_tool_call(provider: str) -> None:
    """With an empty ``result``, the text is taken from the last assistant message (Claude Code has printed an
    empty result after a final text). But the text that came with a tool call was no answer: it was given as
    the answer, ``ok``, when the agent's last turn said nothing."""
    init = {**CLAUDE_INIT, "qwen_code_version": "0.1"} if provider == "qwen" else CLAUDE_INIT
    call = {"type": "assistant", "session_id": "s", "parent_tool_use_id": None, "message": {"model": "m", "content": [
        {"type": "text", "text": "Let me run it."}, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}}
    result = {"type": "user", "session_id": "s", "parent_tool_use_id": None, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "hello"}]}}
    quiet = {"type": "assistant", "session_id": "s", "parent_tool_use_id": None, "message": {"model": "m", "content": [
        {"type": "thinking", "thinking": "done"}]}}
    s = summary(jl(init, call, result, quiet, claude_result("")), provider=provider)
    assert s["text"] is None, s
    said = {"type": "assistant", "session_id": "s", "parent_tool_use_id": None, "message": {"model": "m", "content": [
        {"type": "text", "text": "the answer"}]}}
    s = summary(jl(init, call, result, said, claude_result("")), provider=provider)
    assert s["ok"] is True and s["text"] == "the answer", s  # the empty result's fallback still works


def test_a_droid_completion_without_text_never_gives_the_text_before_a_tool_call() -> None:
    """The same for Droid: a completion without ``finalText`` takes the last assistant message, but not the one
    its tool call belonged to."""
    def line(**d: Any) -> dict[str, Any]:
        return {**d, "session_id": "s", "timestamp": 1}

    head = [line(type="system", subtype="init", cwd="/w", tools=["Execute"], model="m"),
            line(type="message", role="assistant", id="m-2", text="I'll run it."),
            line(type="tool_call", id="c1", messageId="m-2", toolId="t1", toolName="Execute", parameters={}),
            line(type="tool_result", id="c1", messageId="m-2", toolId="t1", isError=False, value="hello")]
    s = summary(jl(*head, line(type="completion", numTurns=2)), provider="droid")
    assert s["text"] is None, s
    said = line(type="message", role="assistant", id="m-3", text="the answer")
    s = summary(jl(*head, said, line(type="completion", numTurns=2)), provider="droid")
    assert s["ok"] is True and s["text"] == "the answer", s


def test_copilot_never_gives_the_text_of_a_message_that_requested_tools() -> None:
    """Copilot's answer is its last non-empty ``assistant.message``: one that requested tools goes on after
    them, so its text was given as the answer when the last message said nothing."""
    def ev(t: str, **data: Any) -> dict[str, Any]:
        return {"type": t, "id": "e", "timestamp": "t", "data": data}

    call = ev("assistant.message", messageId="m-1", content="Let me run it.",
              toolRequests=[{"toolCallId": "c1", "name": "bash", "arguments": {}}])
    done = {"type": "result", "timestamp": "t", "sessionId": "s", "exitCode": 0}
    s = summary(jl(ev("session.start", sessionId="s"), call, ev("assistant.message", messageId="m-2", content="",
                                                                  toolRequests=[]), done), provider="copilot")
    assert s["text"] is None, s
    s = summary(jl(ev("session.start", sessionId="s"), call, ev("assistant.message", messageId="m-2",
                                                                  content="the answer", toolRequests=[]), done),
                provider="copilot")
    assert s["text"] == "the answer", s


def test_antigravity_never_gives_the_text_before_a_tool_step() -> None:
    """Antigravity's result without a response takes the answer step's text updates; an answer step followed by
    a tool step was no answer, and was given as one when no answer step came after the tool."""
    def step(i: int, kind: str, state: str = "DONE", **more: Any) -> dict[str, Any]:
        return {"event": "step_update", "step_update": {"conversation_id": "c", "step_index": i, "state": state,
                                                         "step_type": kind, **more}}

    init = {"event": "init", "conversation_id": "c", "init": {"model": "m", "cwd": "/w", "tools": []}}
    head = [init, step(0, "user_input", text_delta="go"), step(1, "agent_response", text_delta="I will run it."),
            step(2, "tool", "ACTIVE", tool_name="run_command"), step(2, "tool", tool_name="run_command")]
    done = {"event": "result", "result": {"conversation_id": "c", "status": "SUCCESS", "response": ""}}
    s = summary(jl(*head, done), provider="antigravity")
    assert s["text"] is None, s
    s = summary(jl(*head, step(3, "agent_response", text_delta="the answer"), done), provider="antigravity")
    assert s["ok"] is True and s["text"] == "the answer", s


def test_opencode_never_gives_the_text_of_a_step_that_ended_in_tool_calls() -> None:
    """opencode's answer is the last message's text. A step that finished with ``tool-calls`` goes on after its
    tools: when the next step said nothing, the text said before the tools was given as the answer."""
    head = [_oc("step_start", messageID="m1"), _oc("text", messageID="m1", text="Let me run it."),
            _oc("step_finish", messageID="m1", reason="tool-calls"), _oc("step_start", messageID="m2")]
    s = summary(jl(*head, _oc("step_finish", messageID="m2", reason="stop")), provider="opencode")
    assert s["text"] is None, s
    s = summary(jl(*head, _oc("text", messageID="m2", text="the answer"),
                   _oc("step_finish", messageID="m2", reason="stop")), provider="opencode")
    assert s["ok"] is True and s["text"] == "the answer", s


def test_a_later_answer_replaces_one_without_text() -> None:
    data = jl(THREAD, _without_text(agent("x", 0), ("item", "text"), None), agent("the answer", 1), TURN_DONE)
    s = summary(data)
    assert s["ok"] is True and s["text"] == "the answer", s
    assert any("carries no text" in w for w in s["warnings"]), s["warnings"]


# -- 3. unfinished runs -----------------------------------------------------------------------------

OC_START = {"type": "step_start", "timestamp": 1, "sessionID": "ses_1", "part": {"id": "p"}}
UNFINISHED = {
    "codex": (jl(THREAD, {"type": "turn.started"}), "stream ended before turn.completed"),
    "claude": (jl(CLAUDE_INIT, {"type": "assistant", "session_id": "s", "message": {
        "model": "m", "content": [{"type": "text", "text": "half"}]}}), "stream ended before result"),
    "gemini": (jl(GEMINI_INIT, gemini_delta("half")), "stream ended before result"),
    "opencode": (jl(OC_START), "stream ended before step_finish"),
    "opencode-tool-step": (jl(OC_START, {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1",
                                         "part": {"reason": "tool-calls"}}), "stream ended before step_finish"),
}


@pytest.mark.parametrize("case", sorted(UNFINISHED))
def test_unfinished_runs_are_not_ok(case: str, tmp_path: Path, capsysbinary: Any) -> None:
    data, error = UNFINISHED[case]
    s = summary(data)
    assert s["provider"] == case.split("-")[0] and s["ok"] is False and s["error"] == error
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 1 and out["ok"] is False and out["error"] == error


def test_opencode_finished_runs() -> None:
    step = {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"reason": "stop"}}
    text = {"type": "text", "timestamp": 1, "sessionID": "ses_1", "part": {"messageID": "m", "text": "hi"}}
    assert summary(jl(OC_START, text, step))["ok"] is True
    old = {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"tokens": {"input": 1}}}
    assert summary(jl(OC_START, text, old))["ok"] is True  # versions without a reason


@pytest.mark.parametrize(
    ("reason", "error"),
    [("length", "stopped at its output limit"), ("content-filter", "stopped by a content filter"),
     ("error", "stopped by an error")],
)
def test_an_opencode_answer_the_model_did_not_finish_is_not_ok(reason: str, error: str) -> None:
    """The last step's finish reason (the AI SDK's) says whether the model ended its answer: ``length`` cut it
    at the output limit, ``content-filter`` and ``error`` stopped it. Each was ``ok`` with the partial text."""
    text = {"type": "text", "timestamp": 1, "sessionID": "ses_1", "part": {"messageID": "m", "text": "half an"}}
    step = {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"reason": reason}}
    s = summary(jl(OC_START, text, step))
    assert s["ok"] is False and error in s["error"] and f"finish reason {reason}" in s["error"], s
    assert s["text"] is None and s["partial_text"] == "half an"  # what there is; the verdict says it is not whole
    later = {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"reason": "stop"}}
    assert summary(jl(OC_START, text, step, OC_START, text, later))["ok"] is True  # a later step finished it


@pytest.mark.parametrize("case", ["codex", "opencode", "claude"])
def test_a_turn_begun_after_the_end_must_end_too(case: str) -> None:
    """A new turn (codex ``turn.started``) or step (opencode ``step_start``) after the terminal event means the
    agent went on: a stream cut there did not finish, whatever the earlier end said. It was ``ok`` with the
    unfinished turn's message as the answer."""
    if case == "codex":
        head = [THREAD, {"type": "turn.started"}, agent("first", 0), TURN_DONE, {"type": "turn.started"}]
        tail, more, end = [agent("second, half", 1)], [agent("second", 2)], TURN_DONE
        awaited = "stream ended before turn.completed"
    elif case == "claude":  # with stream-json input: a result per turn, the next turn's messages after it
        def said(t: str) -> dict[str, Any]:
            return {"type": "assistant", "session_id": "s", "message": {"model": "m", "content": [
                {"type": "text", "text": t}]}}

        head, tail, more = [CLAUDE_INIT, said("first"), claude_result("first")], [said("second, half")], []
        end = claude_result("second")
        awaited = "stream ended before result"
    else:
        def text(mid: str, t: str) -> dict[str, Any]:
            return {"type": "text", "timestamp": 1, "sessionID": "ses_1", "part": {"messageID": mid, "text": t}}

        stop = {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"reason": "stop"}}
        head = [OC_START, text("m1", "first"), stop, OC_START]
        tail, more, end = [text("m2", "second, half")], [text("m3", "second")], stop
        awaited = "stream ended before step_finish"
    # cut where the new turn began (claude's begins with its first message), and after its first words
    for cut in ([head + tail] if case == "claude" else [head, head + tail]):
        s = summary(jl(*cut))
        assert s["ok"] is False and awaited in s["error"], s
    s = summary(jl(*head, *tail, *more, end))
    assert s["ok"] is True and s["text"] == "second", s


@pytest.mark.parametrize(("status", "error"), [("cancelled", "status is 'cancelled', not success"),
                                               (None, "the result event has no status")])
def test_a_gemini_result_that_does_not_say_success_is_not_ok(status: str | None, error: str) -> None:
    """Gemini's result says ``success`` or ``error``. Any other status (or none) was ``ok`` — with a warning,
    when it had none, that the stream ended without a result event."""
    result = {"type": "result", "timestamp": "t", "stats": {}}
    if status is not None:
        result["status"] = status
    s = summary(jl(GEMINI_INIT, gemini_delta("x"), result), provider="gemini")
    assert s["ok"] is False and error in s["error"], s
    assert not any("without a result event" in w for w in s["warnings"]), s["warnings"]


@pytest.mark.parametrize("last", [{"type": "result", "is_error": True, "result": "x"}, {"ok": False, "result": "r"},
                                  {"success": False}, {"status": "error", "message": "x"},
                                  {"type": "done", "status": "failed"}])
def test_a_generic_stream_that_says_it_failed_is_not_ok(last: dict[str, Any]) -> None:
    """Any NDJSON printer: an ``error`` key was its failure, but a line that says so by a flag (``is_error``,
    ``ok: false``, ``success: false``, a failed ``status``) was ``ok``. A tool's result saying so is the tool's."""
    s = summary(jl({"type": "start"}, {"text": "working"}, last), provider="generic")
    assert s["ok"] is False and s["error"], s
    tool = {"type": "tool_result", "is_error": True, "status": "error", "content": "no such file"}
    s = summary(jl({"type": "start"}, tool, {"text": "the answer"}), provider="generic")
    assert s["ok"] is True and s["text"] == "the answer", s


NOT_TRANSCRIPTS = {
    "empty": (b"", "no JSON event: the transcript is empty"),
    "gzip": (gzip.compress(jl(THREAD, agent("x"), TURN_DONE)), "no JSON event: not a recognised format"),
    "readme": (b"# spoolparse\n\nA README is not a transcript.\n", "no JSON event: not a recognised format"),
    "arrays": (b"[1]\n[2]\n", "no JSON event: not a recognised format"),
}


@pytest.mark.parametrize("case", sorted(NOT_TRANSCRIPTS))
def test_not_a_transcript_is_not_ok(case: str, tmp_path: Path, capsysbinary: Any) -> None:
    data, error = NOT_TRANSCRIPTS[case]
    s = spoolparse.parse(write(tmp_path, data)).summary()
    assert s["ok"] is False and s["error"].startswith(error)
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 1 and out["error"].startswith(error)


def test_a_run_that_prints_nothing_has_no_answer() -> None:
    """As a parse of its empty transcript says (``test_allow_empty_answer`` has every path); a failed child is
    told by its exit."""
    r = spoolparse.run(["true"])
    assert not r.ok and r.error == "no JSON event: the transcript is empty"
    r = spoolparse.run(["false"])
    assert not r.ok and r.error == "the process exited with status 1"
    r = spoolparse.run([sys.executable, "-c", "print('not json')"])
    assert not r.ok and r.error is not None and r.error.startswith("no JSON event: not a recognised format")
    r = spoolparse.run(["true"], provider="codex")
    assert not r.ok and r.error == "no JSON event: the transcript is empty"


def test_error_is_always_a_sentence_when_not_ok() -> None:
    r = spoolparse.run(["sleep", "5"], timeout=0.2, grace=0.2)
    assert r.timed_out and not r.ok and r.error == "timed out after 0.2 s"
    r = spoolparse.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert not r.ok and r.error == "the process was killed by SIGKILL"


def test_ok_is_the_same_verdict_for_run_arun_and_parse(tmp_path: Path) -> None:
    data = jl(THREAD, {"type": "turn.started"})
    path = write(tmp_path, data)
    cmd = ["cat", path]
    res = [spoolparse.run(cmd), spoolparse.parse(path)]
    import asyncio

    async def arun() -> spoolparse.Result:
        return await spoolparse.arun(cmd)

    res.append(asyncio.run(arun()))
    assert [(r.ok, r.error) for r in res] == [(False, "stream ended before turn.completed")] * 3


# -- 4. numbers and depth ---------------------------------------------------------------------------


def test_nan_and_infinity_are_accepted(tmp_path: Path, capsysbinary: Any) -> None:
    data = (b'{"type":"thread.started","thread_id":"t","x":NaN}\n'
            b'{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"ans","w":-Infinity}}\n'
            b'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":2,"z":Infinity}}\n')
    s = summary(data)
    assert s["ok"] is True and s["text"] == "ans" and s["invalid_lines"] == 0
    assert math.isinf(s["raw_usage"]["z"])
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 0 and out["text"] == "ans" and out["raw_usage"]["z"] is None  # JSON has no Infinity


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity"])
def test_a_usage_count_that_is_not_a_number_is_named_in_a_warning(value: bytes) -> None:
    """A count of NaN or Infinity is no count: it was left out of ``usage`` without a word."""
    data = (b'{"type":"thread.started","thread_id":"t"}\n'
            b'{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"ans"}}\n'
            b'{"type":"turn.completed","usage":{"input_tokens":' + value + b',"output_tokens":2}}\n')
    s = summary(data)
    assert s["ok"] is True and s["text"] == "ans" and s["usage"] == {"output_tokens": 2}, s
    name = value.decode().lstrip("-")
    assert any("input_tokens" in w and name in w for w in s["warnings"]), s["warnings"]


def test_a_generic_usage_value_that_is_not_a_number_is_not_counted_either() -> None:
    """The warning says such a value is not counted: the generic provider, which keeps the numbers of a usage
    object under their own names, kept NaN among them."""
    s = summary(b'{"text":"a","usage":{"input_tokens":NaN,"cost":1.5}}\n', provider="generic")
    assert s["usage"] == {"cost": 1.5}, s
    assert any("input_tokens is NaN" in w for w in s["warnings"]), s["warnings"]


BIG = 2**64 + 7
HUGE = 10**5000 - 1  # past str(int)'s 4300-digit limit
HUGE_TEXT = b"9" * 5000


def loads(data: bytes | str) -> Any:
    return json.loads(data, parse_int=lambda t: int(decimal.Decimal(t)))


def test_integers_of_any_size_are_kept_exactly(tmp_path: Path, capsysbinary: Any) -> None:
    usage = b'{"input_tokens":%d,"output_tokens":%s,"cached_input_tokens":-%d}' % (BIG, HUGE_TEXT, BIG)
    data = jl(THREAD, agent("ans")) + b'{"type":"turn.completed","usage":' + usage + b"}\n"
    s = summary(data)
    assert s["usage"] == {"input_tokens": BIG, "output_tokens": HUGE, "cached_input_tokens": -BIG}
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 0 and out["usage"]["input_tokens"] == BIG and out["usage"]["output_tokens"] == HUGE
    assert loads(dumps({"n": [BIG, -BIG, HUGE, 1.5]})) == {"n": [BIG, -BIG, HUGE, 1.5]}


def test_big_integers_in_a_batch_keep_the_outcome_and_its_job_log_line(tmp_path: Path) -> None:
    data = jl(THREAD, agent("ans")) + b'{"type":"turn.completed","usage":{"input_tokens":%d}}\n' % BIG
    src = write(tmp_path, data)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "big", "cmd": ["cat", src]}) + "\n")
    log = tmp_path / "jobs.ndjson"
    p = subprocess.run([sys.executable, "-m", "spoolparse", "batch", str(tasks), "--joblog", str(log)],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[0])
    assert out["verdict"] == "ok" and out["summary"]["usage"]["input_tokens"] == BIG
    assert json.loads(log.read_text().splitlines()[0])["verdict"] == "ok"


def test_nesting_too_deep_is_counted_invalid_with_a_warning(tmp_path: Path, capsysbinary: Any) -> None:
    deep = b'{"type":"item.completed","item":{"id":"d","type":"agent_message","text":"x","n":'
    deep += b"[" * 3000 + b"]" * 3000
    data = jl(THREAD, agent("ans")) + deep + b"}}\n" + jl(TURN_DONE)
    s = summary(data)
    # the last message is the answer: lost, not replaced by the one before it
    assert s["ok"] is False and s["text"] is None and s["invalid_lines"] == 1
    assert "could not be decoded" in s["error"] and s["dropped"][0]["reason"] == "invalid"
    assert any("nested deeper" in w for w in s["warnings"])
    # deep enough for orjson's writer (254), not for its reader (1024): kept, and written without a crash
    mid = b'{"type":"turn.completed","usage":{"input_tokens":1,"x":' + b"[" * 400 + b"]" * 400 + b"}}\n"
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, jl(THREAD, agent("ans")) + mid))
    assert rc == 0 and out["ok"] is True and out["usage"] == {"input_tokens": 1}
    rc, out, _ = cli(capsysbinary, "parse", write(tmp_path, data))
    assert rc == 1 and out["ok"] is False and out["invalid_lines"] == 1


def test_nothing_exits_70(tmp_path: Path) -> None:
    weird = (b'{"type":"turn.completed","usage":{"input_tokens":%s,"x":NaN,"y":' % HUGE_TEXT
             + b"[" * 600 + b"]" * 600 + b"}}\n")
    src = write(tmp_path, jl(THREAD, agent("a")) + weird)
    for argv in (["parse", src], ["run", "--", "cat", src], ["run", "--events", "--no-progress", "--", "cat", src]):
        p = subprocess.run([sys.executable, "-m", "spoolparse", *argv], capture_output=True, timeout=60)
        assert p.returncode == 0, (argv, p.stderr)
        assert loads(p.stdout)["usage"]["input_tokens"] == HUGE


# -- 5. spool integrity -----------------------------------------------------------------------------


def test_output_cut_at_max_spool_bytes_by_a_child_that_exits_first(capsysbinary: Any) -> None:
    script = ("import sys\nw=sys.stdout.write\nw('{\"type\":\"thread.started\",\"thread_id\":\"t\"}\\n')\n"
              "w('{\"type\":\"item.updated\",\"item\":{\"id\":\"x\",\"type\":\"todo_list\",\"p\":\"'"
              " + 'x'*300000 + '\"}}\\n')\n"
              "w('{\"type\":\"item.completed\",\"item\":{\"id\":\"a\",\"type\":\"agent_message\",\"text\":\"ans\"}}\\n')\n"
              "w('{\"type\":\"turn.completed\",\"usage\":{}}\\n')\n")
    # whether the follower sees the cap before or after the exit, the run is not ok
    try:
        r = spoolparse.run([sys.executable, "-c", script], max_spool_bytes=64 * KIB)
    except spoolparse.SpoolFullError as e:
        assert e.result is not None
        r = e.result
    assert not r.ok and r.error is not None and "max-spool-bytes" in r.error.replace("_", "-")
    rc, out, _ = cli(capsysbinary, "run", "--max-spool-bytes", "64K", "--", sys.executable, "-c", script)
    assert rc != 0 and out["ok"] is False and "max-spool-bytes" in out["error"].replace("_", "-")


def test_the_verdict_on_a_spool_cut_at_its_cap_or_shrunk() -> None:
    data = jl(THREAD, agent("ans"), TURN_DONE)
    sp = StreamParser("auto")
    sp.feed(data)
    r = sp.finish(args=["x"], returncode=0, spool_size=len(data) + 5000, spool_cap=len(data))
    assert not r.ok and r.error == (
        f"output cut at --max-spool-bytes ({len(data)} bytes): 5000 bytes written past it were not read")
    sp = StreamParser("auto")
    sp.feed(data)
    sp.spool_size(10)  # seen while following
    r = sp.finish(args=["x"], returncode=0, spool_size=len(data) + 10)
    assert not r.ok and r.error == f"spool truncated by the child (size went from {len(data)} to 10 bytes)"


def test_child_truncating_its_own_spool(capsysbinary: Any) -> None:
    # reopening stdout with O_TRUNC (what `> /dev/stdout` does) cuts the spool under the reader
    script = ("import sys, time\nsys.stdout.write('{\"type\":\"thread.started\",\"thread_id\":\"t\"}\\n'"
              " + '{\"type\":\"item.completed\",\"item\":{\"id\":\"a\",\"type\":\"agent_message\","
              "\"text\":\"ANSWER\"}}\\n'"
              " + '{\"type\":\"turn.completed\",\"usage\":{}}\\n')\nsys.stdout.flush()\ntime.sleep(0.5)\n"
              "open('/dev/stdout', 'w').write('{\"type\":\"x\"}\\n')\n")
    r = spoolparse.run([sys.executable, "-c", script])
    assert not r.ok and r.error is not None and "spool truncated by the child (size went from" in r.error
    rc, out, _ = cli(capsysbinary, "run", "--", "sh", "-c", "printf '%s\\n' '{\"type\":\"turn.completed\"}'; "
                     "sleep 0.3; echo '{}' > /dev/stdout")
    assert rc != 0 and "spool truncated by the child" in out["error"]


# -- 6. parse of anything readable ------------------------------------------------------------------

GOOD = jl(THREAD, agent("piped"), TURN_DONE)


def test_parse_reads_stdin_pipes_and_fifos(tmp_path: Path) -> None:
    for argv, kw in ((["parse", "/dev/stdin"], {"input": GOOD}), (["parse", "-"], {"input": GOOD})):
        p = subprocess.run([sys.executable, "-m", "spoolparse", *argv], capture_output=True, timeout=60, **kw)
        assert p.returncode == 0 and json.loads(p.stdout)["text"] == "piped", p.stderr
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "spoolparse", "parse", str(fifo)], stdout=subprocess.PIPE)
    with open(fifo, "wb") as w:
        w.write(GOOD)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and json.loads(out)["text"] == "piped"
    src = write(tmp_path, GOOD)
    p = subprocess.run(["bash", "-c", f'{sys.executable} -m spoolparse parse <(cat {src})'], capture_output=True,
                       timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout)["text"] == "piped", p.stderr


def test_parse_of_a_directory_or_a_missing_file_is_a_usage_error(tmp_path: Path, capsysbinary: Any) -> None:
    assert main(["parse", str(tmp_path)]) == 2
    assert main(["parse", str(tmp_path / "nope")]) == 2
    assert "no such file" in capsysbinary.readouterr().err.decode()


def test_a_file_truncated_while_parse_maps_it_is_an_error_not_sigbus(tmp_path: Path) -> None:
    src = tmp_path / "big.jsonl"
    line = b'{"type":"item.started","item":{"id":"x","type":"command_execution","command":"' + b"c" * 4000 + b'"}}\n'
    with open(src, "wb") as f:
        f.write(jl(THREAD))
        for _ in range(64):
            f.write(line * 1024)  # 256 MiB of skipped lines
        f.write(jl(agent("ans"), TURN_DONE))
    script = (
        "import subprocess, sys, spoolparse\n"
        "started = []\n"
        "def on_event(ev):\n"
        "    if not started:\n"
        "        cut = 'import os, sys; os.truncate(sys.argv[1], 4096)'\n"
        "        started.append(subprocess.Popen([sys.executable, '-c', cut, sys.argv[1]]))\n"
        "r = spoolparse.parse(sys.argv[1], on_event=on_event)\n"
        "started[0].wait()\n"
        "print(r.ok, r.error)\n"
    )
    p = subprocess.run([sys.executable, "-c", script, str(src)], capture_output=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])  # -7 would be SIGBUS
    ok, _, error = p.stdout.decode().strip().partition(" ")
    assert ok == "False" and "the file shrank while it was read (size went from" in error
    assert os.path.getsize(src) == 4096


# -- 7. usage per model -----------------------------------------------------------------------------


def test_claude_usage_counts_every_model_and_matches_the_cost() -> None:
    model_usage = {
        "claude-opus-4-8[1m]": {"inputTokens": 2468, "outputTokens": 112, "cacheReadInputTokens": 100,
                                "cacheCreationInputTokens": 10, "costUSD": 0.015, "contextWindow": 1000000},
        "claude-haiku-4-5": {"inputTokens": 300, "outputTokens": 20, "costUSD": 0.001, "webSearchRequests": 0},
    }
    data = jl(CLAUDE_INIT, claude_result("ok", usage={"input_tokens": 2468, "output_tokens": 112},
                                         modelUsage=model_usage, total_cost_usd=0.016))
    s = summary(data)
    assert s["usage_by_model"] == {
        "claude-opus-4-8[1m]": {"input_tokens": 2578, "cached_input_tokens": 100, "cache_write_input_tokens": 10,
                                "output_tokens": 112, "cost_usd": 0.015, "cost_source": "reported"},
        "claude-haiku-4-5": {"input_tokens": 300, "output_tokens": 20, "cost_usd": 0.001, "cost_source": "reported"},
    }
    assert s["usage"] == {"input_tokens": 2878, "cached_input_tokens": 100, "cache_write_input_tokens": 10,
                          "output_tokens": 132, "cost_usd": 0.016}
    assert (s["cost_usd"], s["cost_source"], s["cost_note"]) == (0.016, "reported", None)  # the run's own total
    assert s["raw_usage"]["usage"] == {"input_tokens": 2468, "output_tokens": 112}  # main loop only


def test_gemini_stream_json_and_output_json_differ_only_by_the_tool_use_prompt_tokens() -> None:
    per = {"gemini-3.5-flash-lite": (1234, 56, 10, 0, 0), "gemini-3.8-flash": (2468, 112, 40, 200, 5)}

    def stream_model(p: int, c: int, th: int, cached: int, tool: int) -> dict[str, int]:
        return {"total_tokens": p + c + th + tool, "input_tokens": p, "output_tokens": c, "cached": cached,
                "input": p - cached}

    stats = {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "input": 0,
             "models": {m: stream_model(*v) for m, v in per.items()}}
    for m in stats["models"].values():  # type: ignore[union-attr]
        for k in ("total_tokens", "input_tokens", "output_tokens", "cached", "input"):
            stats[k] += m[k]  # type: ignore[operator]
    stream = summary(jl(GEMINI_INIT, gemini_delta("x"), {**GEMINI_RESULT, "stats": stats}))
    doc = {"session_id": "g", "response": "x", "stats": {"models": {
        m: {"tokens": {"prompt": p, "candidates": c, "total": p + c + th + tool, "cached": cached, "thoughts": th,
                       "tool": tool}} for m, (p, c, th, cached, tool) in per.items()}}}
    whole = summary(json.dumps(doc, indent=2).encode())
    assert stream["ok"] and whole["ok"]
    keys = ("cached_input_tokens", "total_tokens")
    assert {k: stream["usage"][k] for k in keys} == {k: whole["usage"][k] for k in keys}
    # stream-json cannot tell the tool-use prompt tokens (5) from thinking: they fall into its output;
    # -o json names them (tokens.tool), and they are prompt tokens
    assert stream["usage"]["output_tokens"] == 56 + 10 + 112 + 40 + 5  # thoughts included, not just candidates
    assert whole["usage"]["output_tokens"] == 56 + 10 + 112 + 40
    assert whole["usage"]["input_tokens"] == stream["usage"]["input_tokens"] + 5 == 1234 + 2468 + 5
    for m, (_p, _c, _th, _cached, tool) in per.items():
        s_m, w_m = stream["usage_by_model"][m], whole["usage_by_model"][m]
        assert {k: s_m[k] for k in keys} == {k: w_m[k] for k in keys}
        assert (w_m["input_tokens"] - s_m["input_tokens"], s_m["output_tokens"] - w_m["output_tokens"]) == (tool, tool)
    assert whole["usage"]["reasoning_output_tokens"] == 50


def test_opencode_reasoning_is_not_counted_twice() -> None:
    # opencode's step usage is output = outputTokens - reasoningTokens: the normalized output adds it back once
    step = {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"reason": "stop", "tokens": {
        "total": 1300, "input": 1000, "output": 200, "reasoning": 100, "cache": {"read": 0, "write": 0}}}}
    s = summary(jl(OC_START, step))
    assert s["usage"]["output_tokens"] == 300 and s["usage"]["reasoning_output_tokens"] == 100
    assert s["usage"]["input_tokens"] + s["usage"]["output_tokens"] == s["usage"]["total_tokens"]


# -- scanner-level checks ---------------------------------------------------------------------------


def test_scanner_decodes_an_unsure_line_once() -> None:
    calls = []

    def loads(data: bytes | str) -> Any:
        calls.append(len(data))
        return json.loads(data)

    sc = LineScanner(loads=loads)
    recs = sc.feed(sorted_line(agent("Z" * (70 * KIB))))
    assert len(calls) == 1 and isinstance(recs[0], Event) and recs[0].type == "item.completed/agent_message"


def test_scanner_drops_an_unsure_line_over_the_ceiling_by_its_real_type() -> None:
    sc = LineScanner(max_line=64 * KIB, max_retained=96 * KIB)
    line = sorted_line(agent("Z" * (200 * KIB)))
    recs = [r for i in range(0, len(line), 10 * KIB) for r in sc.feed(line[i : i + 10 * KIB])]
    assert len(recs) == 1 and isinstance(recs[0], Dropped)
    want = ("item.completed/agent_message", "over_ceiling", len(line) - 1)
    assert (recs[0].type, recs[0].reason, recs[0].bytes) == want
    assert sc.held == 0


# -- the key-order property -------------------------------------------------------------------------

PROP_LINE = 4 * KIB  # max_line; fields grow to 2 x max_line
PROP_RETAINED = 6 * KIB


def _transcript(provider: str, pad: str, text: str) -> tuple[list[dict[str, Any]], int]:
    """A finished transcript; the index of the kept event that carries ``pad`` (and the answer)."""
    if provider == "codex":
        item = {"id": "item_1", "type": "agent_message", "text": text, "pad": pad}
        return [THREAD, {"type": "item.completed", "item": item}, TURN_DONE], 1
    if provider == "claude":
        return [CLAUDE_INIT, {**claude_result(text), "pad": pad}], 1
    if provider == "gemini":
        return [GEMINI_INIT, {**gemini_delta(text), "pad": pad}, GEMINI_RESULT], 1
    part = {"id": "p1", "messageID": "m1", "type": "text", "text": text, "pad": pad}
    return [OC_START, {"type": "text", "timestamp": 1, "sessionID": "ses_1", "part": part},
            {"type": "step_finish", "timestamp": 1, "sessionID": "ses_1", "part": {"reason": "stop"}}], 1


def _reorder(obj: dict[str, Any], order: list[int], inner: list[int]) -> dict[str, Any]:
    """``obj`` with its keys (and those of its ``item``/``part``) in the order of two permutations."""
    keys = list(obj)
    out = {}
    for i in (j for j in order if j < len(keys)):
        k = keys[i]
        v = obj[k]
        if isinstance(v, dict) and k in ("item", "part"):
            sub = list(v)
            v = {sub[j]: v[sub[j]] for j in inner if j < len(sub)}
        out[k] = v
    return out


@given(
    provider=st.sampled_from(["codex", "claude", "gemini", "opencode"]),
    pad_size=st.integers(0, 2 * PROP_LINE),
    text_size=st.integers(1, 2 * PROP_LINE),
    order=st.permutations(range(8)),
    inner=st.permutations(range(8)),
    step=st.integers(1, 3 * PROP_LINE),
)
def test_key_order_does_not_change_the_summary(
    provider: str, pad_size: int, text_size: int, order: list[int], inner: list[int], step: int
) -> None:
    events, i = _transcript(provider, "p" * pad_size, "t" * text_size)
    first = jl(*events)
    shuffled = jl(*events[:i], _reorder(events[i], order, inner), *events[i + 1 :])
    kw = {"max_line": PROP_LINE, "max_retained": PROP_RETAINED}
    want = chunked(first, step, **kw)
    got = chunked(shuffled, step, **kw)
    for s in (want, got):
        s.pop("duration_s")
    assert got == want
    line = len(jl(events[i])) - 1
    if line > PROP_RETAINED:
        assert got["ok"] is False and "exceeded max_retained" in got["error"] and got["text"] is None
    else:
        assert got["ok"] is True and got["text"] == "t" * text_size
