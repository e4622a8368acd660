"""The Claude Code provider: every rule of the answer, on hand-made transcripts."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson

from spoolparse import LiveEvent, parse
from spoolparse.providers.claude import ClaudeProvider, normalize_claude_usage

from .helpers import FIXTURES, jl

CLAUDE = FIXTURES / "claude"
SID = "5d1c8f1e-2b7a-4c8e-9a51-0f6e1d2c3b4a"


def summary(source: Path | bytes, **kw: Any) -> dict[str, Any]:
    src = io.BytesIO(source) if isinstance(source, bytes) else source
    return parse(src, **kw).summary()


def recording_loads(seen: list[Any]) -> Any:
    def loads(data: bytes | str) -> Any:
        obj = orjson.loads(data)
        seen.append(obj)
        return obj

    return loads


def assistant(text: str, model: str = "claude-opus-4-8", **extra: Any) -> dict[str, Any]:
    return {"type": "assistant", "message": {"model": model, "content": [{"type": "text", "text": text}]},
            "session_id": SID, **extra}


def test_success_text_usage_model_session() -> None:
    s = summary(CLAUDE / "success.jsonl")
    assert s["provider"] == "claude"
    assert s["ok"] is True and s["error"] is None
    assert s["text"] == "FINAL-ANSWER-claude"
    assert s["model"] == "claude-opus-4-8[1m]"  # system/init wins over message.model
    assert s["session_id"] == SID
    # input = fresh 2468 + cache read 100 + cache write 20
    assert s["usage"] == {"input_tokens": 2588, "cached_input_tokens": 100, "cache_write_input_tokens": 20,
                          "output_tokens": 112, "cost_usd": 0.01514}
    assert s["raw_usage"]["usage"]["input_tokens"] == 2468
    assert s["raw_usage"]["modelUsage"]["claude-opus-4-8[1m]"]["costUSD"] == 0.01514
    assert s["raw_usage"]["total_cost_usd"] == 0.01514
    assert s["invalid_lines"] == 1  # the [SandboxDebug] line (a blank line is no invalid one)
    assert s["warnings"] == []


def test_tool_results_are_never_decoded_but_reported() -> None:
    seen: list[Any] = []
    live: list[LiveEvent] = []
    for provider in ("auto", "claude"):
        seen.clear()
        live.clear()
        parse(CLAUDE / "success.jsonl", provider=provider, loads=recording_loads(seen), on_event=live.append)
        assert seen and all(obj["type"] != "user" for obj in seen)
        kinds = [ev.kind for ev in live]
        assert "tool_start" in kinds and "tool_end" in kinds
        start = next(ev for ev in live if ev.kind == "tool_start")
        assert start.data["name"] == "Bash" and start.data["title"] == "echo hello"
        end = next(ev for ev in live if ev.kind == "tool_end")
        assert end.type == "user" and end.data["bytes"] > 100
        assert kinds[-1] == "result"


def test_missing_result_falls_back_to_last_assistant_text() -> None:
    s = summary(CLAUDE / "missing_result.jsonl")
    assert s["partial_text"] == "FINAL-ANSWER-only-in-assistant"  # text blocks joined, thinking left out
    assert s["ok"] is False and s["error"] == "stream ended before result"  # the run did not finish
    assert any("no result event" in w and "last assistant message" in w for w in s["warnings"])


def test_empty_result_text_falls_back_with_a_warning() -> None:
    s = summary(CLAUDE / "empty_result.jsonl")
    assert s["text"] == "FINAL-ANSWER-claude"
    assert s["ok"] is True
    assert any("result event has no text" in w for w in s["warnings"])


def test_api_error_success_subtype_with_is_error() -> None:
    s = summary(CLAUDE / "api_error.jsonl")
    assert s["ok"] is False
    assert s["error"].startswith("API Error: 500 mock: simulated 500 failure")
    assert s["text"] is None  # the result text was the error report
    assert s["model"] == "claude-opus-4-8[1m]"  # never "<synthetic>"


def test_synthetic_api_error_without_result() -> None:
    data = jl(assistant("Rate limit exceeded", model="<synthetic>", error="rate_limit"))
    s = summary(data)
    assert s["provider"] == "claude"
    assert s["error"] == "Rate limit exceeded (rate_limit); stream ended before result"
    assert s["text"] is None
    assert s["model"] is None


def test_result_error_message_wins_over_synthetic_message() -> None:
    data = jl(assistant("Invalid API key", model="<synthetic>", error="authentication_failed"),
              {"type": "result", "subtype": "success", "is_error": True, "result": "Invalid API key · Fix it",
               "session_id": SID})
    s = summary(data)
    assert s["error"] == "Invalid API key · Fix it"


def test_error_max_turns_uses_errors_list() -> None:
    s = summary(CLAUDE / "error_max_turns.jsonl")
    assert s["ok"] is False
    assert s["error"] == "Reached maximum number of turns (1)"
    assert s["usage"]["output_tokens"] == 112


def test_error_subtype_without_is_error_is_an_error() -> None:
    data = jl(assistant("Starting"), {"type": "result", "subtype": "error_max_budget_usd", "is_error": False,
                                      "session_id": SID, "usage": {"input_tokens": 100, "output_tokens": 50}})
    s = summary(data)
    assert s["error"] == "error_max_budget_usd"
    assert s["partial_text"] == "Starting" and s["text"] is None
    assert s["usage"] == {"input_tokens": 100, "output_tokens": 50}


def test_killed_while_retrying_reports_retries() -> None:
    s = summary(CLAUDE / "killed_while_retrying.jsonl")
    assert s["text"] is None and s["ok"] is False and s["error"] == "stream ended before result"
    assert s["warnings"][:2] == ["API retry 1/10 after HTTP 500: server_error",
                                 "API retry 2/10 after HTTP 500: server_error"]
    assert "the stream ended without a result event" in s["warnings"]


def test_subagent_message_is_not_the_answer() -> None:
    s = summary(CLAUDE / "subagent_last.jsonl")
    assert s["partial_text"] == "FINAL-ANSWER-claude"  # no result: unfinished, and the subagent's words are not it


def test_model_from_message_when_no_init_and_from_model_usage_last() -> None:
    assert summary(jl(assistant("x", model="claude-a")))["model"] == "claude-a"
    s = summary(CLAUDE / "output_json.json")  # --output-format json: the result object alone
    assert s["model"] == "claude-opus-4-8[1m]"
    assert s["text"] == "FINAL-ANSWER-claude"


def test_whole_document_forms_give_the_stream_summary() -> None:
    stream = summary(CLAUDE / "success.jsonl")
    for name in ("stream_array.json", "output_json.json"):
        s = summary(CLAUDE / name)
        for key in ("provider", "text", "usage", "raw_usage", "session_id", "error"):
            assert s[key] == stream[key], (name, key)


def test_last_result_of_several_turns_wins() -> None:
    data = jl({"type": "result", "subtype": "error_during_execution", "is_error": True, "errors": ["boom"],
               "session_id": SID},
              {"type": "result", "subtype": "success", "is_error": False, "result": "second", "session_id": SID})
    s = summary(data)
    assert s["text"] == "second" and s["error"] is None


def test_dropped_result_is_reported_and_never_replaced_by_a_message() -> None:
    big = {"type": "result", "subtype": "success", "is_error": False, "result": "x" * 5000, "session_id": SID}
    s = summary(jl(assistant("from the message"), big), max_line=1024, max_retained=2048)
    assert s["dropped"][0]["type"] == "result"
    assert s["ok"] is False and s["text"] is None  # the earlier message is not the answer
    assert s["error"] == "final answer (5 KiB at line 2) exceeded max_retained (2 KiB) and was dropped"
    assert any("dropped" in w for w in s["warnings"])


def test_rejected_rate_limit_is_a_warning() -> None:
    data = jl({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "rateLimitType": "five_hour"},
               "session_id": SID}, assistant("hi"))
    s = summary(data, provider="claude")
    assert "rate limit reached (five_hour)" in s["warnings"]


def test_normalize_usage() -> None:
    assert normalize_claude_usage({"input_tokens": 3, "output_tokens": 24}, 0.0106) == {
        "input_tokens": 3, "output_tokens": 24, "cost_usd": 0.0106}
    assert normalize_claude_usage(None) == {}
    assert normalize_claude_usage({"cache_read_input_tokens": 7}) == {"input_tokens": 7, "cached_input_tokens": 7}


def test_declared_types() -> None:
    assert ClaudeProvider.keep == {"system", "assistant", "result", "rate_limit_event"}
    assert "user" in ClaudeProvider.note and "user" not in ClaudeProvider.keep
    assert "stream_event" in ClaudeProvider.known
