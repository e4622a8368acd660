"""The Gemini CLI provider: every rule of the answer, on hand-made transcripts."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson

from spoolparse import LiveEvent, StreamParser, parse
from spoolparse.providers.gemini import GeminiProvider, normalize_gemini_stats

from .helpers import FIXTURES, jl

GEMINI = FIXTURES / "gemini"
SID = "0c7e3a52-9f0a-4f6b-8d7c-2e9b5a1d4f30"
TS = "2026-11-21T06:00:00.000Z"


def summary(source: Path | bytes, **kw: Any) -> dict[str, Any]:
    src = io.BytesIO(source) if isinstance(source, bytes) else source
    return parse(src, **kw).summary()


def ev(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": t, "timestamp": TS, **kw}


def delta(text: str) -> dict[str, Any]:
    return ev("message", role="assistant", content=text, delta=True)


INIT = ev("init", session_id=SID, model="gemini-test")


def test_success_deltas_usage_model_session() -> None:
    s = summary(GEMINI / "success.jsonl")
    assert s["provider"] == "gemini"
    assert s["ok"] is True
    assert s["text"] == "Running it. FINAL-ANSWER-gemini"  # the assistant deltas, joined in order
    assert s["model"] == "auto"
    assert s["session_id"] == SID
    assert s["usage"] == {"input_tokens": 3702, "output_tokens": 168, "cached_input_tokens": 200,
                          "total_tokens": 3870}
    assert set(s["raw_usage"]["models"]) == {"gemini-3.5-flash-lite", "gemini-3.8-flash"}
    assert s["invalid_lines"] == 1  # the non-JSON "Ripgrep" line


def test_tool_events_are_never_decoded_but_reported() -> None:
    seen: list[Any] = []

    def loads(data: bytes | str) -> Any:
        obj = orjson.loads(data)
        seen.append(obj)
        return obj

    live: list[LiveEvent] = []
    parse(GEMINI / "success.jsonl", loads=loads, on_event=live.append)
    assert seen and not any(obj["type"] in ("tool_use", "tool_result") for obj in seen)
    kinds = [e.kind for e in live]
    assert kinds.index("tool_start") < kinds.index("tool_end")
    assert [e.data["text"] for e in live if e.kind == "text_delta"] == ["Running it.", " FINAL-", "ANSWER-gemini"]


def test_loop_detected_then_success_is_not_ok() -> None:
    # Gemini CLI stopped the agent and still reports success: a known trap (tests/test_traps.py)
    s = summary(GEMINI / "loop_detected.jsonl")
    assert s["ok"] is False
    assert s["error"] == ("Gemini CLI detected a loop and stopped the agent (Loop detected, stopping execution); "
                          "the answer is what it had said by then")
    assert s["warnings"] == ["warning: Loop detected, stopping execution"]


def test_error_event_with_a_successful_result_is_a_warning() -> None:
    s = summary(jl(INIT, ev("error", severity="error", message="Quota nearly used"),
                   ev("result", status="success", stats={})))
    # not the run's failure, but the reason it finished without an answer
    assert s["error"] == "the agent finished without an answer (error: Quota nearly used)"
    assert s["warnings"] == ["error: Quota nearly used"]
    s = summary(jl(INIT, ev("error", severity="error", message="Quota nearly used"), delta("4"),
                   ev("result", status="success", stats={})))
    assert s["ok"] is True and s["text"] == "4" and s["warnings"] == ["error: Quota nearly used"]


def test_fatal_error_result() -> None:
    s = summary(GEMINI / "fatal_error.jsonl")
    assert s["ok"] is False
    assert s["error"].startswith("[API Error: {")
    assert s["text"] is None
    assert s["usage"]["input_tokens"] == 0


def test_stream_error_then_failed_result_is_one_error() -> None:
    s = summary(GEMINI / "stream_error.jsonl")
    assert s["error"] == "Model stream ended without a finish reason."
    assert s["warnings"] == []


def test_failed_result_without_message_uses_the_error_event() -> None:
    s = summary(jl(INIT, ev("error", severity="error", message="quota"), ev("result", status="error")))
    assert s["error"] == "quota"


def test_no_result() -> None:
    s = summary(GEMINI / "killed.jsonl")
    assert s["text"] is None and s["ok"] is False and s["error"] == "stream ended before result"
    assert s["warnings"] == ["the stream ended without a result event"]
    s = summary(jl(INIT, ev("error", severity="error", message="stream broke")))
    assert s["error"] == "stream broke; stream ended before result"


def test_user_messages_are_not_the_answer() -> None:
    s = summary(jl(INIT, ev("message", role="user", content="question"), delta("answer"),
                   ev("result", status="success", stats={})))
    assert s["text"] == "answer"


def test_text_is_bounded_by_the_retained_ceiling() -> None:
    chunks = [delta("abcdefghij" * 30) for _ in range(10)]  # 3000 characters
    s = summary(jl(INIT, *chunks, ev("result", status="success", stats={})), max_line=1024, max_retained=1024)
    assert s["ok"] is False and s["partial_text"] == ("abcdefghij" * 30 * 10)[:1024]
    assert len([w for w in s["warnings"] if "cut" in w]) == 1


def test_text_bound_given_to_the_provider() -> None:
    sp = StreamParser(GeminiProvider(max_text=5))
    sp.feed(jl(INIT, delta("hello "), delta("world")))
    r = sp.finish(args=None)
    assert r.partial_text == "hello" and r.text is None
    assert any("passed 5 characters" in w for w in r.warnings)


def test_output_json_document() -> None:
    s = summary(GEMINI / "output_json.json")
    assert s["provider"] == "gemini"
    assert s["text"] == "FINAL-ANSWER-gemini"
    assert s["session_id"] == SID
    assert s["model"] == "gemini-3.8-flash"
    # the tool-use prompt tokens (tool 20) are prompt tokens: input is prompt + tool, output candidates + thoughts
    assert s["usage"] == {"input_tokens": 2488, "output_tokens": 112, "cached_input_tokens": 200,
                          "reasoning_output_tokens": 12, "total_tokens": 2600}
    per = s["usage_by_model"]["gemini-3.8-flash"]
    assert {k: v for k, v in per.items() if not k.startswith("cost_")} == s["usage"]
    assert (per["cost_usd"], per["cost_source"]) == (s["cost_usd"], s["cost_source"])  # the one model is the run
    assert s["raw_usage"]["tools"]["totalCalls"] == 1
    e = summary(GEMINI / "output_json_error.json")
    assert e["provider"] == "gemini" and e["error"] == "Reached max session turns" and e["text"] is None


def test_normalize_stats_shapes() -> None:
    old = {"total_tokens": 250, "input_tokens": 50, "output_tokens": 200, "duration_ms": 3000, "tool_calls": 1}
    assert normalize_gemini_stats(old) == {"input_tokens": 50, "output_tokens": 200, "total_tokens": 250}
    assert normalize_gemini_stats("nope") == {}
    assert normalize_gemini_stats({"models": {}}) == {}


def test_declared_types() -> None:
    assert "tool_result" not in GeminiProvider.keep and "tool_result" in GeminiProvider.note
    assert {"init", "message", "error", "result"} <= GeminiProvider.keep


def test_two_megabyte_tool_output_is_reported_by_size_only() -> None:
    # The shape of a real run whose shell tool printed 2,000,000 bytes: one huge tool_result line.
    tool = ev("tool_result", tool_id="run_shell_command_1", status="success", output="x" * 2_000_000)
    data = jl(INIT, ev("tool_use", tool_name="run_shell_command", tool_id="run_shell_command_1", parameters={}),
              tool, delta("FINAL-ANSWER-gemini"), ev("result", status="success", stats={}))
    live: list[LiveEvent] = []
    r = parse(io.BytesIO(data), on_event=live.append)
    assert r.text == "FINAL-ANSWER-gemini" and r.dropped == []
    end = next(e for e in live if e.kind == "tool_end")
    assert end.data["bytes"] == len(jl(tool)) - 1


def test_output_json_with_an_empty_response_has_no_text() -> None:
    doc = {"session_id": SID, "response": "", "stats": {"models": {}},
           "error": {"type": "unknown", "message": "Model stream ended without a finish reason."}}
    s = summary(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    assert s["provider"] == "gemini" and s["text"] is None
    assert s["error"] == "Model stream ended without a finish reason."
