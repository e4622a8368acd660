"""The published samples (fixtures/published/samples, provenance and licenses in
fixtures/published/SOURCES.md): the facts their reference states about each one hold for what
spoolparse makes of it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from spoolparse import parse
from spoolparse.providers.gemini import normalize_gemini_stats

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "published" / "samples"


def summary(name: str, **kw: Any) -> dict[str, Any]:
    return parse(SAMPLES / name, **kw).summary()


def summary_bytes(data: bytes, **kw: Any) -> dict[str, Any]:
    return parse(io.BytesIO(data), **kw).summary()


def test_every_sample_parses_to_a_provider() -> None:
    files = sorted(p for p in SAMPLES.rglob("*") if p.is_file())
    assert files
    for path in files:
        s = parse(path).summary()
        folder = path.parent.name
        if path.name == "stream_stats_multi_model_example.json":
            assert s["provider"] == "generic"  # a stats value, not an event
        else:
            assert s["provider"] == folder, path.name


# -- codex -------------------------------------------------------------------------------------------


def test_codex_docs_sample() -> None:
    s = summary("codex/docs_exec_md_sample.jsonl")
    assert s["text"] == "Yep — there’s a `README.md` in the repository root."
    assert s["usage"] == {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}
    assert s["session_id"] == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert s["model"] is None  # no exec event carries the model
    assert s["error"] is None and s["lines"] == 8


def test_codex_experimental_json_excerpt() -> None:
    s = summary("codex/legacy_experimental_json_pr4250_excerpt.jsonl")
    assert s["session_id"] == "019982d1-75f0-7920-b051-e0d3731a5ed8"  # session.created
    # item_type assistant_message; the excerpt stops before turn.completed: unfinished, so what it said is partial
    assert s["partial_text"] == "Running `echo` to confirm shell access and print output." and s["ok"] is False
    assert s["usage"] == {}
    assert s["lines"] == 6


# -- claude ------------------------------------------------------------------------------------------


def test_claude_code_action_pretty_array() -> None:
    s = summary("claude/claude_code_action_sample_turns.json")  # a pretty-printed array of 9 messages
    assert s["provider"] == "claude" and s["lines"] == 9 and s["invalid_lines"] == 0
    assert s["text"] == ("Successfully removed debug print statement from file and added review comment "
                         "to document the change.")
    assert s["model"] == "claude-test-model" and s["session_id"] == "sample-session-id"
    assert s["usage"] == {"cost_usd": 0.0347}  # the result has only total_cost_usd
    assert s["ok"] is True  # no subtype, no is_error


def test_claude_message_parser_dicts() -> None:
    path = SAMPLES / "claude/sdk_python_test_message_parser_dicts.jsonl"
    s = summary("claude/sdk_python_test_message_parser_dicts.jsonl")
    assert s["lines"] == 55 and s["invalid_lines"] == 0
    assert s["model"] != "<synthetic>"
    lines = path.read_bytes().splitlines(keepends=True)
    synthetic = [json.loads(x) for x in lines if b'"model":"<synthetic>"' in x]
    assert len(synthetic) == 3
    for obj in synthetic:  # each API-error message alone: an error naming its kind, never a model
        one = summary_bytes(json.dumps(obj).encode() + b"\n")
        assert one["error"].endswith(f"({obj['error']}); stream ended before result")
        assert one["model"] is None and one["text"] is None
    for raw in lines:
        obj = json.loads(raw)
        if obj["type"] != "result":
            continue
        one = summary_bytes(raw, provider="claude")
        if "errors" in obj:
            assert one["error"] == "; ".join(obj["errors"])
        elif "api_error_status" in obj:
            assert one["error"] == f"API error (HTTP {obj['api_error_status']})"
        elif obj.get("is_error") or str(obj.get("subtype", "")).startswith("error_"):
            assert one["error"] == obj["subtype"]  # no errors[], no result text
        elif obj.get("result"):
            assert one["error"] is None
            assert one["text"] == obj["result"]
        else:  # a success without its text, and no message before it: finished, with no answer
            assert one["error"] is not None and one["error"].startswith("the agent finished without an answer")


def test_claude_result_with_model_usage() -> None:
    path = SAMPLES / "claude/sdk_python_test_message_parser_dicts.jsonl"
    raw = next(x for x in path.read_bytes().splitlines(keepends=True) if b'"modelUsage"' in x)
    s = summary_bytes(raw)
    assert s["text"] == "Hello"
    # result.usage (3 in) leaves out the 20,012 cache reads that modelUsage and the cost include
    assert s["usage"] == {"input_tokens": 20015, "cached_input_tokens": 20012, "output_tokens": 24, "cost_usd": 0.0106}
    assert s["usage_by_model"] == {"claude-sonnet-4-5-20250929": {**s["usage"], "cost_source": "reported"}}
    assert s["raw_usage"]["usage"] == {"input_tokens": 3, "output_tokens": 24}
    assert s["raw_usage"]["modelUsage"]["claude-sonnet-4-5-20250929"]["cacheReadInputTokens"] == 20012
    assert s["session_id"] == "fdf2d90a-fd9e-4736-ae35-806edd13643f"


def test_claude_integration_dicts_budget_error() -> None:
    s = summary("claude/sdk_python_test_integration_dicts.jsonl")
    assert s["lines"] == 7
    assert s["error"] == "error_max_budget_usd"  # subtype error_* even with is_error false
    assert s["usage"] == {"input_tokens": 100, "output_tokens": 50, "cost_usd": 0.0002}
    assert s["session_id"] == "test-session-budget"


@pytest.mark.parametrize(
    ("name", "text", "session", "lines", "error"),
    [
        ("claude/sdk_python_test_client_dicts.jsonl", "Done", "test", 3, None),
        ("claude/sdk_python_test_query_dicts.jsonl", "Hello!", "s", 16, None),
        # assistant messages after its last result: a turn that began and did not end
        ("claude/sdk_python_test_streaming_client_dicts.jsonl", "World", "test", 12, "stream ended before result"),
    ],
)
def test_claude_results_without_text_fall_back(name: str, text: str, session: str, lines: int,
                                               error: str | None) -> None:
    s = summary(name)
    assert s["provider"] == "claude" and s["lines"] == lines and s["invalid_lines"] == 0
    said = s["text"] if error is None else s["partial_text"]  # the answer only when ok
    assert said == text and s["session_id"] == session and s["error"] == error
    assert any("last assistant message" in w for w in s["warnings"])


def test_claude_rate_limit_events() -> None:
    s = summary("claude/sdk_python_test_rate_limit_event_repro_dicts.jsonl")
    assert s["provider"] == "claude" and s["partial_text"] == "hello"  # no result: unfinished
    assert "rate limit reached (seven_day)" in s["warnings"]  # the one "rejected" event
    assert s["model"] == "claude-sonnet-4-6-20250929"


# -- gemini ------------------------------------------------------------------------------------------


def test_gemini_json_output_document() -> None:
    s = summary("gemini/headless_md_json_output_example.json")
    assert s["provider"] == "gemini" and s["lines"] == 1
    assert s["text"] == "The capital of France is Paris."
    # input_tokens: the prompt and the tool-use prompt tokens (flash's tool 28); output_tokens: candidates, thoughts
    assert s["usage"] == {"input_tokens": 24939 + 8965 + 28, "output_tokens": 20 + 154 + 10 + 30,
                          "cached_input_tokens": 21263, "reasoning_output_tokens": 154 + 30,
                          "total_tokens": 25113 + 9033}
    assert set(s["raw_usage"]["models"]) == {"gemini-2.5-pro", "gemini-2.5-flash"}


def test_gemini_docs_stream_example_with_timestamp_last() -> None:
    s = summary("gemini/headless_md_stream_json_example.jsonl")
    assert s["text"] == "Here are the files..."
    assert s["usage"] == {"input_tokens": 50, "output_tokens": 200, "total_tokens": 250}
    assert s["session_id"] == "abc123" and s["model"] == "gemini-2.0-flash-exp"
    assert s["ok"] is True


def _snapshot(name: str) -> bytes:
    """The snapshot with its non-JSON ``<DURATION>`` placeholder made a number."""
    return (SAMPLES / "gemini" / name).read_bytes().replace(b"<DURATION>", b"0")


@pytest.mark.parametrize("name", ["snapshot_loop_detected.jsonl", "snapshot_max_session_turns.jsonl",
                                  "snapshot_streaming_events.jsonl", "snapshot_streaming_events_v2025-11.jsonl"])
def test_gemini_snapshot_placeholder_line_is_counted_invalid(name: str) -> None:
    s = summary(f"gemini/{name}")
    assert s["provider"] == "gemini" and s["invalid_lines"] == 1  # "duration_ms":<DURATION>
    assert s["session_id"] == "test-session-id" and s["model"] == "test-model"


def test_gemini_loop_detected_then_success_is_not_ok() -> None:
    # the CLI stopped the agent and still reports success: a known trap (spoolparse.providers.traps)
    s = summary_bytes(_snapshot("snapshot_loop_detected.jsonl"))
    assert s["ok"] is False and s["text"] is None
    assert s["error"].startswith("Gemini CLI detected a loop and stopped the agent")
    assert s["warnings"] == ["warning: Loop detected, stopping execution"]


def test_gemini_max_turns_error_event_then_success_is_not_ok() -> None:
    s = summary_bytes(_snapshot("snapshot_max_session_turns.jsonl"))
    assert s["ok"] is False  # the result still says success
    assert s["error"].startswith("the agent reached Gemini CLI's maximum session turns")
    assert s["warnings"] == ["error: Maximum session turns exceeded"]


@pytest.mark.parametrize("name", ["snapshot_streaming_events.jsonl", "snapshot_streaming_events_v2025-11.jsonl"])
def test_gemini_streaming_deltas_join(name: str) -> None:
    s = summary_bytes(_snapshot(name))
    assert s["text"] == "Thinking...Final answer"
    assert s["usage"]["input_tokens"] == 0 and s["usage"]["output_tokens"] == 0
    assert ("cached_input_tokens" in s["usage"]) is (name == "snapshot_streaming_events.jsonl")
    assert s["ok"] is True and s["invalid_lines"] == 0


def test_gemini_formatter_events() -> None:
    s = summary("gemini/stream_json_formatter_test_events.jsonl")
    # two results: gemini prints nothing after its result, so the second is a run of its own, the summary's
    assert s["error"] == "Maximum session turns exceeded" and s["text"] is None
    assert s["usage"] == {"input_tokens": 50, "output_tokens": 50, "cached_input_tokens": 0, "total_tokens": 100}
    assert [u["tool_calls"] for u in s["raw_usage"]] == [2, 0]  # both runs' usage
    assert "the stream held 2 runs; the summary is the last one's (from line 9)" in s["warnings"]
    first = summary_bytes(b"".join((SAMPLES / "gemini/stream_json_formatter_test_events.jsonl").read_bytes()
                                   .splitlines(keepends=True)[:8]))
    # the first run: the CLI stopped the agent (a known trap), then said success; "4" is what it had said
    assert (first["ok"], first["partial_text"], first["session_id"]) == (False, "4", "test-session-123")
    assert first["error"].startswith("Gemini CLI detected a loop and stopped the agent")


def test_gemini_multi_model_stats() -> None:
    stats = json.loads((SAMPLES / "gemini/stream_stats_multi_model_example.json").read_bytes())
    assert normalize_gemini_stats(stats) == {"input_tokens": 150, "output_tokens": 100, "cached_input_tokens": 0,
                                             "total_tokens": 250}
    per = stats["models"]
    assert sum(m["input_tokens"] for m in per.values()) == stats["input_tokens"]
