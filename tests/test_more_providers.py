"""The readers of Qwen Code, Amp, Cursor Agent, Factory Droid, Kimi Code, Copilot CLI and Kilo,
on fixtures made from each CLI's published format (fixtures/<cli>/SOURCES.md)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from spoolparse import LiveEvent, parse

from .helpers import FIXTURES, jl


def events(name: str, **kw: Any) -> tuple[Any, list[LiveEvent]]:
    seen: list[LiveEvent] = []
    r = parse(FIXTURES / name, on_event=seen.append, **kw)
    return r, seen


def kinds(seen: list[LiveEvent]) -> list[str]:
    return [e.kind for e in seen]


# ---------------------------------------------------------------- Qwen Code


def test_qwen_success() -> None:
    r, seen = events("qwen/success.jsonl")
    assert r.provider == "qwen" and r.ok and r.error is None
    assert r.text == "FINAL-ANSWER-qwen"
    assert r.model == "qwen3-coder-plus"
    assert r.session_id == "7c2f3a4e-5b6d-4e8f-9a0b-1c2d3e4f5a6b"
    # Qwen's input_tokens already count the cached ones (Claude's do not): never added twice.
    assert r.usage == {"input_tokens": 2468, "output_tokens": 112, "cached_input_tokens": 1000, "total_tokens": 2580}
    assert r.raw_usage["usage"]["cache_read_input_tokens"] == 1000
    assert [e.data["name"] for e in seen if e.kind == "tool_start"] == ["run_shell_command"]
    assert kinds(seen).count("tool_end") == 1
    assert seen[-1].kind == "result" and seen[-1].data["ok"] is True
    # running totals per API message while the run goes, then the result's own
    assert [e.data["usage"] for e in seen if e.kind == "usage"][-1] == r.usage


def test_qwen_read_as_claude_would_double_count_the_cache() -> None:
    claude = parse(FIXTURES / "qwen/success.jsonl", provider="claude")
    assert claude.usage["input_tokens"] == 3468  # why Qwen needs its own provider


def test_qwen_failure_names_the_error() -> None:
    r, seen = events("qwen/api_error.jsonl")
    assert r.provider == "qwen" and not r.ok
    assert r.error == "[API Error: 500 mock: simulated 500 failure]"
    assert r.text is None
    assert r.warnings == ["model request retried (retry, attempt 1/3)"]
    assert [e.data["message"] for e in seen if e.kind == "error"] == [r.error]
    assert seen[-1].kind == "result" and seen[-1].data["ok"] is False


def test_qwen_json_array_equals_the_stream() -> None:
    stream = parse(FIXTURES / "qwen/success.jsonl").summary()
    doc = parse(FIXTURES / "qwen/output_json.json").summary()
    for s in (stream, doc):
        s.pop("duration_s")
        s.pop("stdout_bytes")
    assert doc == stream


# ---------------------------------------------------------------- Amp


def test_amp_success() -> None:
    r = parse(FIXTURES / "amp/success.jsonl")
    assert r.provider == "amp" and r.ok
    assert r.text == "FINAL-ANSWER-amp"
    assert r.session_id == "T-019b9d03-62e3-772f-9780-3e637f90eaec"
    assert r.model == "claude-sonnet-4-5-20250929"  # from the messages: Amp's init names none
    # the messages' usage, summed (the result prints none; tests/test_cli_usage.py has the rules)
    assert r.usage == {
        "input_tokens": 2468,
        "cached_input_tokens": 1200,
        "cache_write_input_tokens": 1268,
        "output_tokens": 112,
    }


def test_amp_error_is_the_error_field() -> None:
    r = parse(FIXTURES / "amp/error.jsonl")
    assert r.provider == "amp" and not r.ok
    assert r.error == "Anthropic API error: 500 Internal Server Error"
    # read as Claude, only the subtype would be left
    assert parse(FIXTURES / "amp/error.jsonl", provider="claude").error == "error_during_execution"


# ---------------------------------------------------------------- Cursor Agent


def test_cursor_success_and_tool_calls() -> None:
    r, seen = events("cursor/success.jsonl")
    assert r.provider == "cursor" and r.ok
    # Cursor's result is every assistant text delta joined: that is its answer.
    assert r.text == "I'll run the command.FINAL-ANSWER-cursor"
    assert r.model == "Claude 4 Sonnet"
    assert r.session_id == "c6b62c6f-7ead-4fd6-9922-e952131177ff"
    assert r.usage == {} and r.raw_usage is None
    tools = [(e.kind, e.data["name"], e.data["call_id"], e.data["title"]) for e in seen if e.kind.startswith("tool")]
    assert tools == [
        ("tool_start", "shell", "toolu_vrtx_01", "echo hello"),
        ("tool_end", "shell", "toolu_vrtx_01", "echo hello"),
    ]


def test_cursor_without_result() -> None:
    r = parse(FIXTURES / "cursor/no_result.jsonl")
    assert r.provider == "cursor" and not r.ok
    assert r.text is None and r.partial_text == "I'll run the command."
    assert any("no result event" in w for w in r.warnings)


def test_cursor_json_object() -> None:
    r = parse(FIXTURES / "cursor/output_json.json")
    assert r.provider == "cursor" and r.ok and r.text == "FINAL-ANSWER-cursor"


def test_cursor_huge_tool_result_is_dropped_without_a_warning() -> None:
    init = {"type": "system", "subtype": "init", "apiKeySource": "env", "session_id": "s", "model": "GPT-5"}
    big = {"type": "tool_call", "subtype": "completed", "call_id": "c", "tool_call": {"readToolCall": {
        "args": {"path": "a"}, "result": {"success": {"content": "x" * 5000}}}}, "session_id": "s"}
    res = {"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": "s"}
    r = parse(io.BytesIO(jl(init, big, res)), max_line=1000, max_retained=1000)
    assert r.provider == "cursor" and r.ok and r.text == "done"
    assert r.dropped_count == 1 and r.warnings == []


# ---------------------------------------------------------------- Factory Droid


def test_droid_success() -> None:
    r, seen = events("droid/success.jsonl")
    assert r.provider == "droid" and r.ok
    assert r.text == "FINAL-ANSWER-droid"
    assert r.model == "claude-sonnet-4-5-20250929"
    assert r.session_id == "b7f0b4a2-2c1e-4a8e-9c55-3d9f1f0e6a11"
    assert r.usage == {}
    assert [(e.kind, e.data.get("name")) for e in seen if e.kind.startswith("tool")] == [
        ("tool_start", "Execute"),
        ("tool_end", "Execute"),
    ]
    assert seen[-1].kind == "result"


def test_droid_error_without_completion() -> None:
    r = parse(FIXTURES / "droid/error.jsonl")
    assert r.provider == "droid" and not r.ok
    assert r.error == "Request failed with status code 500; stream ended before completion"


def test_droid_ends_without_completion() -> None:
    lines = (FIXTURES / "droid/success.jsonl").read_bytes().splitlines(keepends=True)[:-1]
    r = parse(io.BytesIO(b"".join(lines)))
    assert r.provider == "droid" and not r.ok
    assert r.error == "stream ended before completion"
    assert r.partial_text == "FINAL-ANSWER-droid" and r.text is None  # the last assistant message, with a warning
    assert any("no completion event" in w for w in r.warnings)


def test_droid_error_then_completion_is_a_warning() -> None:
    lines = (FIXTURES / "droid/success.jsonl").read_bytes().splitlines(keepends=True)
    err = jl({"type": "error", "source": "tool", "message": "transient", "timestamp": 1})
    r = parse(io.BytesIO(b"".join(lines[:-1]) + err + lines[-1]))
    assert r.ok and r.error is None and "error before completion: transient" in r.warnings


# ---------------------------------------------------------------- Kimi Code


def test_kimi_success() -> None:
    r, seen = events("kimi/success.jsonl")
    assert r.provider == "kimi" and r.ok
    assert r.text == "FINAL-ANSWER-kimi"
    assert (r.session_id, r.model, r.usage) == (None, None, {})
    assert [(e.kind, e.data.get("name"), e.data.get("call_id")) for e in seen if e.kind.startswith("tool")] == [
        ("tool_start", "Shell", "Shell:0"),
        ("tool_end", "Shell", "Shell:0"),
    ]


def test_kimi_unfinished_turn_is_not_ok() -> None:
    r = parse(FIXTURES / "kimi/provider_error.jsonl")
    assert r.provider == "kimi" and not r.ok
    assert r.error == "stream ended before an assistant message without tool calls"
    assert r.invalid_lines == 1  # the plain-text error line


def test_kimi_dropped_tool_output_is_not_an_error_but_a_dropped_answer_is() -> None:
    call = {"role": "assistant", "content": "run", "tool_calls": [
        {"type": "function", "id": "t", "function": {"name": "Shell", "arguments": "{}"}}]}
    tool = {"role": "tool", "tool_call_id": "t", "content": "x" * 5000}
    final = {"role": "assistant", "content": "done"}
    r = parse(io.BytesIO(jl(call, tool, final)), max_line=1000, max_retained=1000)
    assert r.ok and r.text == "done" and r.dropped_count == 1
    lost = {"role": "assistant", "content": "y" * 5000}
    r = parse(io.BytesIO(jl(call, {**tool, "content": "ok"}, lost)), max_line=1000, max_retained=1000)
    assert not r.ok and r.error is not None and "dropped" in r.error


# ---------------------------------------------------------------- Copilot CLI


def test_copilot_success() -> None:
    r, seen = events("copilot/success.jsonl")
    assert r.provider == "copilot" and r.ok
    assert r.text == "FINAL-ANSWER-copilot"
    assert r.model == "gpt-5"
    assert r.session_id == "0f3c1c9e-7d0a-4b3b-8f51-6e2a9b4c7d10"
    assert r.usage == {"output_tokens": 112}  # the stream has no prompt tokens
    assert r.raw_usage["premiumRequests"] == 1 and r.raw_usage["outputTokens"] == 112
    assert [(e.kind, e.data.get("name")) for e in seen if e.kind.startswith("tool")] == [
        ("tool_start", "bash"),
        ("tool_end", "bash"),
    ]


def test_copilot_failure() -> None:
    r = parse(FIXTURES / "copilot/api_error.jsonl")
    assert r.provider == "copilot" and not r.ok
    assert r.error == "Failed to get response from the AI model: 500 mock: simulated 500 failure"


def test_copilot_exit_code_or_missing_result() -> None:
    lines = (FIXTURES / "copilot/success.jsonl").read_bytes().splitlines(keepends=True)
    r = parse(io.BytesIO(b"".join(lines[:-1])))
    assert not r.ok and r.error == "stream ended before result"
    failed = lines[-1].replace(b'"exitCode":0', b'"exitCode":2')
    r = parse(io.BytesIO(b"".join(lines[:-1]) + failed))
    assert not r.ok and r.error == "copilot reported exit code 2"


# ---------------------------------------------------------------- Antigravity


def test_antigravity_success() -> None:
    r, seen = events("antigravity/success.jsonl")
    assert r.provider == "antigravity" and r.ok and r.error is None
    assert r.text == "FINAL-ANSWER-antigravity" and r.warnings == []
    assert (r.model, r.session_id) == ("gemini-3.1-pro-high", "9b2f6c1e-4d7a-4c3e-8f21-5a0d3e7b9c44")
    # thinking is generated output: counted in output_tokens and named apart
    assert r.usage == {"input_tokens": 4890, "output_tokens": 45, "cached_input_tokens": 2048,
                       "reasoning_output_tokens": 14, "total_tokens": 4935}
    assert r.raw_usage["cache_read_tokens"] == 2048
    assert [(e.kind, e.data.get("name"), e.data.get("title")) for e in seen if e.kind.startswith("tool")] == [
        ("tool_start", "run_command", "echo hello"), ("tool_end", "run_command", "echo hello")]
    assert "".join(e.data["text"] for e in seen if e.kind == "text_delta") == (
        "I will run the command.FINAL-ANSWER-antigravity")
    assert [e.kind for e in seen if e.kind in ("session", "thinking", "usage", "result")] == [
        "session", "thinking", "usage", "result"]


def test_antigravity_result_without_response_takes_the_last_answer_step() -> None:
    r = parse(FIXTURES / "antigravity/empty_response.jsonl")
    assert r.ok and r.text == "FINAL-ANSWER-antigravity"  # not the earlier "I will run the command."
    assert any("step updates" in w for w in r.warnings)
    assert r.usage == {"total_tokens": 4935}


def test_antigravity_failed_result_and_a_killed_stream_are_not_ok() -> None:
    r = parse(FIXTURES / "antigravity/api_error.jsonl")
    assert r.provider == "antigravity" and not r.ok and r.text is None
    assert r.error == "antigravity reported ERROR: 500 Internal Server Error: mock: simulated 500 failure"
    r = parse(FIXTURES / "antigravity/killed.jsonl")
    assert not r.ok and r.error == "stream ended before result"


def test_antigravity_error_event_without_a_result_is_the_error_and_one_before_success_a_warning() -> None:
    lines = (FIXTURES / "antigravity/success.jsonl").read_bytes().splitlines(keepends=True)
    err = jl({"event": "error", "error": "quota exceeded"})
    r = parse(io.BytesIO(b"".join(lines[:-1]) + err))
    assert not r.ok and r.error is not None and "quota exceeded" in r.error
    r = parse(io.BytesIO(b"".join(lines[:-1]) + err + lines[-1]))
    assert r.ok and "error: quota exceeded" in r.warnings


def test_antigravity_done_update_repeating_the_whole_text_is_not_doubled() -> None:
    lines = (FIXTURES / "antigravity/empty_response.jsonl").read_bytes().splitlines(keepends=True)
    whole = lines[8].replace(b'"text_delta":""', b'"text_delta":"FINAL-ANSWER-antigravity"')
    last = lines[8].replace(b'"text_delta":""', b'"text_delta":"!"')
    assert parse(io.BytesIO(b"".join([*lines[:8], whole, lines[9]]))).text == "FINAL-ANSWER-antigravity"
    assert parse(io.BytesIO(b"".join([*lines[:8], last, lines[9]]))).text == "FINAL-ANSWER-antigravity!"


def test_antigravity_dropped_result_loses_the_answer_but_a_dropped_tool_step_does_not() -> None:
    lines = (FIXTURES / "antigravity/success.jsonl").read_bytes().splitlines(keepends=True)
    big_tool = jl({"event": "step_update", "step_update": {"step_index": 9, "state": "DONE", "step_type": "tool",
                                                           "tool_name": "view_file", "tool_info": "x" * 5000}})
    r = parse(io.BytesIO(b"".join([*lines[:-1], big_tool, lines[-1]])), max_line=2000, max_retained=2000)
    assert r.ok and r.text == "FINAL-ANSWER-antigravity" and r.dropped_count == 1
    big_result = lines[-1].replace(b'"response":"FINAL-ANSWER-antigravity"', b'"response":"' + b"y" * 5000 + b'"')
    r = parse(io.BytesIO(b"".join([*lines[:-1], big_result])), max_line=2000, max_retained=2000)
    assert not r.ok and r.text is None and r.error is not None and "dropped" in r.error


def test_antigravity_answer_from_fragments_is_lost_when_one_of_them_was_dropped() -> None:
    lines = (FIXTURES / "antigravity/empty_response.jsonl").read_bytes().splitlines(keepends=True)
    big = lines[6].replace(b'"text_delta":"FINAL-ANSWER-"', b'"text_delta":"' + b"z" * 5000 + b'"')
    r = parse(io.BytesIO(b"".join([*lines[:6], big, *lines[7:]])), max_line=2000, max_retained=2000)
    # the result has no response: the text would come from the fragments, one of which was dropped
    assert not r.ok and r.error is not None and "dropped" in r.error
    full = (FIXTURES / "antigravity/success.jsonl").read_bytes().splitlines(keepends=True)
    r = parse(io.BytesIO(b"".join([*full[:6], big, *full[7:]])), max_line=2000, max_retained=2000)
    assert r.ok and r.text == "FINAL-ANSWER-antigravity"  # the result's response is the whole answer


def test_antigravity_is_told_from_other_untyped_lines() -> None:
    kimi = jl({"role": "assistant", "content": "hi"})
    assert parse(io.BytesIO(kimi)).provider == "kimi"
    other = jl({"event": "progress", "progress": {}}, {"text": "x"})
    assert parse(io.BytesIO(other)).provider == "generic"


# ---------------------------------------------------------------- Kilo


@pytest.mark.parametrize("name", ["kilo/success.jsonl", "kilo/api_error.jsonl"])
def test_kilo_reads_as_opencode_and_by_name(name: str) -> None:
    auto = parse(FIXTURES / name)
    named = parse(FIXTURES / name, provider="kilo")
    assert auto.provider == "opencode" and named.provider == "kilo"
    assert (named.text, named.error, named.usage, named.session_id) == (
        auto.text,
        auto.error,
        auto.usage,
        auto.session_id,
    )


def test_kilo_success() -> None:
    r = parse(FIXTURES / "kilo/success.jsonl", provider="kilo")
    assert r.ok and r.text == "FINAL-ANSWER-kilo"
    assert r.usage["input_tokens"] == 2478 and r.usage["output_tokens"] == 112


# ---------------------------------------------------------------- recorded from the real Qwen Code 0.24.4


def test_qwen_recorded_answer() -> None:
    r = parse(FIXTURES / "qwen/real_A.jsonl")
    assert r.provider == "qwen" and r.ok and r.text == "FINAL-ANSWER-qwen"
    assert r.usage == {"input_tokens": 2468, "output_tokens": 112, "cached_input_tokens": 0, "total_tokens": 2580}
    assert r.model == "mock-model" and r.lines == 6 and r.dropped_count == 0


def test_qwen_recorded_stream_error_is_not_an_answer() -> None:
    """Qwen repeats the error as an assistant message before its failed result: that text is no answer."""
    r = parse(FIXTURES / "qwen/real_Bevent.jsonl")
    assert r.provider == "qwen" and not r.ok
    assert r.error == "[API Error: mock: simulated stream failure]"
    assert r.text is None and r.warnings == []


# ---------------------------------------------------------------- recorded from the real Droid 0.225.2


def test_droid_recorded_answer_and_usage() -> None:
    r, seen = events("droid/real_A.jsonl")
    assert r.provider == "droid" and r.ok and r.text == "FINAL-ANSWER-droid" and r.warnings == []
    # completion.usage in Anthropic's counting (cache reads and writes apart from input_tokens)
    assert r.usage == {"input_tokens": 2468, "cached_input_tokens": 0, "cache_write_input_tokens": 0,
                       "output_tokens": 112}
    assert r.raw_usage["factory_credits"] == 0
    assert r.session_id == "bceea9de-8b2d-435b-863d-adfa464dbc75" and r.lines == 6
    assert [(e.kind, e.data.get("name")) for e in seen if e.kind.startswith("tool")] == [
        ("tool_start", "Execute"), ("tool_end", "Execute")]


# ---------------------------------------------------------------- odd input never crashes them

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spoolparse.providers import PROVIDERS  # noqa: E402

_ADDED = ("qwen", "amp", "cursor", "droid", "kimi", "copilot", "kilo", "antigravity")
#: Every field the added providers read, at the top level or one level down.
_FIELDS = (
    "subtype", "session_id", "model", "message", "content", "text", "result", "is_error", "error", "errors",
    "usage", "stats", "data", "role", "tool_calls", "tool_call", "call_id", "tool_call_id", "finalText",
    "numTurns", "toolName", "toolId", "parameters", "sessionId", "exitCode", "outputTokens", "toolCallId",
    "selectedModel", "qwen_code_version", "apiKeySource", "tools", "request_id", "function", "name", "id",
    "attempt", "maxRetries", "reason", "input_tokens", "output_tokens", "cache_read_input_tokens",
    "total_tokens", "modelUsage", "total_cost_usd", "parent_tool_use_id", "part", "sessionID",
    "conversation_id", "step_index", "state", "step_type", "text_delta", "thinking_delta", "tool_name", "tool_info",
    "status", "response", "thinking_tokens", "cache_read_tokens", "init",
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_FIELDS), inner, max_size=4),
    max_leaves=8,
)


@st.composite
def _streams(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(_ADDED))
    cls = PROVIDERS[name]
    types = sorted(cls.keep | cls.note | cls.known)
    objs = []
    for _ in range(draw(st.integers(1, 5))):
        obj: dict[str, Any] = dict(draw(st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=6)))
        t = draw(st.sampled_from(types))
        if t:
            obj = {"type": t, **obj}
        elif name == "antigravity":  # its envelope: {"event": E, E: {...}}, E from its vocabulary
            e = draw(st.sampled_from(["init", "step_update", "result", "error", "other"]))
            obj = {"event": e, e: obj, **draw(st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=2))}
        objs.append(obj)
    return name, jl(*objs)


@given(_streams())
def test_any_fields_any_values(stream: tuple[str, bytes]) -> None:
    name, data = stream
    seen: list[LiveEvent] = []
    r = parse(io.BytesIO(data), provider=name, on_event=seen.append)
    assert r.provider == name
    assert isinstance(r.ok, bool)
    assert r.error is None or isinstance(r.error, str)
    for ev in seen:
        ev.as_dict()


_COUNT_VALUES = st.one_of(st.integers(-5, 10**12), st.floats(allow_nan=False), st.booleans(), st.text(max_size=3),
                          st.none(), st.just([1]))


@given(st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "cache_read_input_tokens",
                                        "cache_creation_input_tokens", "total_tokens", "inputTokens", "outputTokens",
                                        "cacheReadTokens", "cacheWriteTokens", "cacheReadInputTokens",
                                        "cacheCreationInputTokens", "other"]), _COUNT_VALUES))
def test_usage_renamed_from_a_table_keeps_whole_numbers_only(raw: dict[str, Any]) -> None:
    from spoolparse.providers.amp import normalize_amp_usage
    from spoolparse.providers.claude import normalize_claude_model_usage, normalize_claude_usage
    from spoolparse.providers.cursor import normalize_cursor_usage
    from spoolparse.providers.qwen import normalize_qwen_usage

    def whole(key: str) -> int | None:
        v = raw.get(key)
        if isinstance(v, bool):
            return None
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v if isinstance(v, int) else None

    def expect(pairs: dict[str, str]) -> dict[str, int]:
        return {dst: n for src, dst in pairs.items() if (n := whole(src)) is not None}

    assert normalize_amp_usage(raw) == expect({"input_tokens": "input_tokens",
                                               "cache_read_input_tokens": "cached_input_tokens",
                                               "cache_creation_input_tokens": "cache_write_input_tokens",
                                               "output_tokens": "output_tokens"})
    assert normalize_qwen_usage(raw) == expect({"input_tokens": "input_tokens", "output_tokens": "output_tokens",
                                                "cache_read_input_tokens": "cached_input_tokens",
                                                "total_tokens": "total_tokens"})
    cursor = expect({"inputTokens": "input_tokens", "cacheReadTokens": "cache_read_input_tokens",
                     "cacheWriteTokens": "cache_creation_input_tokens", "outputTokens": "output_tokens"})
    assert normalize_cursor_usage(raw) == normalize_claude_usage(cursor)
    model = expect({"inputTokens": "input_tokens", "cacheReadInputTokens": "cache_read_input_tokens",
                    "cacheCreationInputTokens": "cache_creation_input_tokens", "outputTokens": "output_tokens"})
    assert normalize_claude_model_usage(raw) == normalize_claude_usage(model)
    for f in (normalize_amp_usage, normalize_qwen_usage, normalize_cursor_usage, normalize_claude_model_usage):
        assert f([1]) == {} and f(None) == {}


@pytest.mark.parametrize(("name", "line"), [
    ("claude", lambda sid: {"type": "system", "subtype": "status", "session_id": sid}),
    ("cursor", lambda sid: {"type": "system", "subtype": "status", "session_id": sid}),
    ("droid", lambda sid: {"type": "system", "session_id": sid}),
    ("opencode", lambda sid: {"type": "step_start", "sessionID": sid}),
    ("kimi", lambda sid: {"type": "session.resume_hint", "session_id": sid}),
    ("copilot", lambda sid: {"type": "result", "sessionId": sid}),
])
def test_a_session_event_marks_each_new_session_id_once(name: str, line: Any) -> None:
    from spoolparse.lines import Event

    p = PROVIDERS[name]()
    said = []
    for n, sid in enumerate(["s1", "s1", "", 7, "s2", "s2", "s1"], 1):
        d = line(sid)
        said += [(e.lineno, e.data["session_id"], p.session_id) for e in p.see(Event(n, d["type"], d, 10))
                 if e.kind == "session"]
    assert said == [(1, "s1", "s1"), (5, "s2", "s2"), (7, "s1", "s1")], name


@pytest.mark.parametrize(("name", "piece"), [
    ("gemini", lambda text, mid: {"type": "message", "role": "assistant", "content": text, "delta": True}),
    ("opencode", lambda text, mid: {"type": "text", "part": {"messageID": mid, "text": text}}),
])
@pytest.mark.parametrize("limit", [0, 3, 5, 9])
def test_an_answer_joined_past_max_text_is_cut_and_said_once(name: str, piece: Any, limit: int) -> None:
    from spoolparse.lines import Event

    p = PROVIDERS[name]()
    p.max_text = limit
    warned = []
    for n, text in enumerate(["abcd", "efgh", "ijkl"], 1):
        d = piece(text, "m1")
        warned += [(e.lineno, e.data["message"]) for e in p.see(Event(n, d["type"], d, 10)) if e.kind == "warning"]
    first = next(n for n, end in enumerate((4, 8, 12), 1) if end > limit)
    assert warned == [(first, f"the answer text passed {limit} characters and was cut at line {first}")], name
    assert p.conclude().lost is not None


def _parts_usage(fresh: Any, read: Any, write: Any, output: Any, reasoning: Any, total: Any,
                 cost: Any) -> dict[str, Any]:
    """The normalized usage of a format's parts, as the docs' usage page states the rule."""
    def whole(v: Any) -> int | None:
        return None if isinstance(v, bool) else int(v) if isinstance(v, float) and v.is_integer() else (
            v if isinstance(v, int) else None)
    fresh, read, write, output, reasoning, total = map(whole, (fresh, read, write, output, reasoning, total))
    out: dict[str, Any] = {}
    if {fresh, read, write} != {None}:
        out["input_tokens"] = (fresh or 0) + (read or 0) + (write or 0)
    if {output, reasoning} != {None}:
        out["output_tokens"] = (output or 0) + (reasoning or 0)
    named = {"cached_input_tokens": read, "cache_write_input_tokens": write, "reasoning_output_tokens": reasoning,
             "total_tokens": total}
    out.update({k: v for k, v in named.items() if v is not None})
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost_usd"] = float(cost)
    return out


_PART = st.one_of(st.none(), st.integers(0, 10**9), st.floats(0, 1e6), st.booleans(), st.text(max_size=2))


@given(st.tuples(*[_PART] * 7))
def test_usage_from_parts_counts_each_token_once(parts: tuple[Any, ...]) -> None:
    from spoolparse.providers.antigravity import normalize_antigravity_usage
    from spoolparse.providers.claude import normalize_claude_usage
    from spoolparse.providers.opencode import normalize_opencode_tokens

    fresh, read, write, output, reasoning, total, cost = parts
    assert normalize_claude_usage({"input_tokens": fresh, "cache_read_input_tokens": read,
                                   "cache_creation_input_tokens": write, "output_tokens": output}, cost) == \
        _parts_usage(fresh, read, write, output, None, None, cost)
    assert normalize_claude_usage(None, cost) == _parts_usage(None, None, None, None, None, None, cost)
    assert normalize_opencode_tokens({"input": fresh, "output": output, "reasoning": reasoning, "total": total,
                                      "cost": cost, "cache": {"read": read, "write": write}}) == \
        _parts_usage(fresh, read, write, output, reasoning, total, cost)
    assert normalize_antigravity_usage({"input_tokens": fresh, "cache_read_tokens": read, "output_tokens": output,
                                        "thinking_tokens": reasoning, "total_tokens": total}) == \
        _parts_usage(fresh, read, None, output, reasoning, total, None)
    for f in (normalize_opencode_tokens, normalize_antigravity_usage):
        assert f(None) == {} and f([1]) == {}
