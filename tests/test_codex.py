"""The Codex provider: every rule of the answer, on hand-made streams."""

from __future__ import annotations

import io

from spoolparse import StreamParser, parse

from .helpers import jl

THREAD = {"type": "thread.started", "thread_id": "th-1"}
USAGE = {"input_tokens": 2468, "cached_input_tokens": 0, "cache_write_input_tokens": 0, "output_tokens": 112,
         "reasoning_output_tokens": 7}


def msg(text: str, n: int = 1) -> dict:  # type: ignore[type-arg]
    return {"type": "item.completed", "item": {"id": f"item_{n}", "type": "agent_message", "text": text}}


def summary(data: bytes, **kw) -> dict:  # type: ignore[no-untyped-def, type-arg]
    return parse(io.BytesIO(data), **kw).summary()


def test_current_format_answer_usage_session() -> None:
    s = summary(jl(THREAD, {"type": "turn.started"}, msg("first", 1),
                   {"type": "item.completed", "item": {"id": "item_2", "type": "command_execution",
                                                       "aggregated_output": "x" * 100}},
                   msg("last", 3), {"type": "turn.completed", "usage": USAGE}))
    assert s["provider"] == "codex"
    assert s["text"] == "last"
    assert s["usage"] == USAGE
    assert s["raw_usage"] == USAGE
    assert s["session_id"] == "th-1"
    assert s["ok"] is True and s["error"] is None


def test_error_item_is_a_warning_not_an_error() -> None:
    warn = {"type": "item.completed", "item": {"id": "item_0", "type": "error",
                                               "message": "Model metadata for `mock-model` not found."}}
    s = summary(jl(THREAD, warn, {"type": "turn.started"}, msg("ok"), {"type": "turn.completed", "usage": USAGE}))
    assert s["ok"] is True
    assert s["warnings"] == ["Model metadata for `mock-model` not found."]


def test_turn_failed_is_the_error() -> None:
    s = summary(jl(THREAD, {"type": "turn.started"},
                   *[{"type": "error", "message": f"Reconnecting... {i}/5"} for i in range(1, 6)],
                   {"type": "error", "message": "We’re currently experiencing high demand"},
                   {"type": "turn.failed", "error": {"message": "stream disconnected"}}))
    assert s["error"] == "stream disconnected"
    assert s["ok"] is False
    assert s["text"] is None


def test_last_error_without_terminal_event() -> None:
    s = summary(jl(THREAD, {"type": "turn.started"}, {"type": "error", "message": "boom"}))
    assert s["ok"] is False and s["error"] == "boom; stream ended before turn.completed"


def test_recovered_stream_error_becomes_a_warning() -> None:
    s = summary(jl(THREAD, {"type": "error", "message": "Reconnecting... 1/5"}, msg("fine"),
                   {"type": "turn.completed", "usage": USAGE}))
    assert s["error"] is None and s["ok"] is True
    assert s["warnings"] == ["Reconnecting... 1/5"]


def test_legacy_envelope() -> None:
    s = summary(jl({"approval": "never", "model": "o4-mini", "sandbox": "read-only"},
                   {"prompt": "fix it"},
                   {"id": "0", "msg": {"type": "session_configured", "session_id": "sess-9", "model": "o4-mini"}},
                   {"id": "1", "msg": {"type": "exec_command_end", "stdout": "x" * 50}},
                   {"id": "1", "msg": {"type": "agent_message", "message": "legacy answer"}},
                   {"id": "1", "msg": {"type": "token_count", "input_tokens": 10, "output_tokens": 2}}),
                provider="codex")
    assert s["ok"] is False and s["partial_text"] == "legacy answer"  # no task_complete printed: unfinished
    assert s["usage"] == {"input_tokens": 10, "output_tokens": 2}
    assert s["session_id"] == "sess-9"
    assert s["model"] == "o4-mini"


def test_legacy_envelope_is_detected_and_error() -> None:
    s = summary(jl({"id": "0", "msg": {"type": "agent_message", "message": "partial"}},
                   {"id": "0", "msg": {"type": "error", "message": "quota exceeded"}}))
    assert s["provider"] == "codex"
    assert s["error"] == "quota exceeded; stream ended before turn.completed"


def test_result_event_first_one_wins_and_session_end() -> None:
    s = summary(jl({"type": "result", "result": "one", "session_id": "s1", "usage": {"input_tokens": 1}},
                   {"type": "result", "result": "two"},
                   {"type": "session.end", "model": "gpt-5-codex", "usage": {"input_tokens": 5, "output_tokens": 6}}),
                provider="codex")
    assert s["text"] == "one"
    assert s["session_id"] == "s1"
    assert s["model"] == "gpt-5-codex"
    assert s["usage"] == {"input_tokens": 5, "output_tokens": 6}


def test_experimental_item_type_shape() -> None:
    s = summary(jl({"type": "session.created", "session_id": "x-1"},
                   {"type": "item.completed", "item": {"id": "item_0", "item_type": "assistant_message",
                                                       "text": "exp answer"}}))
    assert (s["provider"], s["partial_text"], s["session_id"]) == ("codex", "exp answer", "x-1")  # no turn end


def test_dropped_answer_is_an_error_not_silence() -> None:
    data = jl(THREAD, msg("z" * 5000), {"type": "turn.completed", "usage": USAGE})
    s = summary(data, max_line=1000, max_retained=2000)
    assert s["text"] is None
    assert s["dropped"] == [{"line": 2, "bytes": len(jl(msg("z" * 5000))) - 1,
                             "type": "item.completed/agent_message", "reason": "over_ceiling"}]
    assert "dropped" in s["error"]
    assert any("item.completed/agent_message" in w for w in s["warnings"])


def test_tool_events_are_live_without_decoding() -> None:
    sp = StreamParser("codex")
    live = sp.feed(jl(THREAD, {"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                                                 "command": "ls", "aggregated_output": ""}},
                      {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                                          "aggregated_output": "big"}}))
    assert [e.kind for e in live] == ["session", "tool_start", "tool_end"]
    assert live[2].data["name"] == "command_execution" and live[2].data["call_id"] == "item_1"
