"""Auto-detection: the provider is chosen from the stream's first events, never by re-reading it."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest

from spoolparse import PROVIDERS, AutoProvider, StreamParser, UsageError, make_provider, parse
from spoolparse.providers import names

from .helpers import FIXTURES, jl

EXPECTED = {
    "claude/success.jsonl": "claude",
    "claude/missing_result.jsonl": "claude",
    "claude/killed_while_retrying.jsonl": "claude",
    "claude/output_json.json": "claude",
    "claude/stream_array.json": "claude",
    "gemini/success.jsonl": "gemini",
    "gemini/fatal_error.jsonl": "gemini",
    "gemini/killed.jsonl": "gemini",
    "gemini/output_json.json": "gemini",
    "gemini/output_json_error.json": "gemini",
    "opencode/success.jsonl": "opencode",
    "opencode/api_error.jsonl": "opencode",
    "opencode/stream_error.jsonl": "opencode",
}


@pytest.mark.parametrize(("name", "provider"), sorted(EXPECTED.items()))
def test_fixture_is_detected(name: str, provider: str) -> None:
    assert parse(FIXTURES / name).provider == provider


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_auto_gives_the_named_provider_summary(name: str) -> None:
    auto = parse(FIXTURES / name).summary()
    named = parse(FIXTURES / name, provider=EXPECTED[name]).summary()
    auto.pop("duration_s")
    named.pop("duration_s")
    assert auto == named


def test_detection_order_and_names() -> None:
    assert list(PROVIDERS) == ["codex", "claude", "gemini", "opencode"]
    assert names() == ["auto", "codex", "claude", "gemini", "opencode", "generic"]
    for name in names():
        p = make_provider(name)
        assert p.name == name
    with pytest.raises(UsageError):
        make_provider("cursor")


@pytest.mark.parametrize(
    ("first", "provider"),
    [
        ({"type": "thread.started", "thread_id": "t"}, "codex"),
        ({"id": "0", "msg": {"type": "agent_message", "message": "hi"}}, "codex"),
        ({"type": "system", "subtype": "init", "session_id": "s", "model": "m"}, "claude"),
        ({"type": "init", "timestamp": "2026-01-01T00:00:00.000Z", "session_id": "s", "model": "m"}, "gemini"),
        ({"type": "step_start", "timestamp": 1, "sessionID": "ses_1", "part": {}}, "opencode"),
    ],
)
def test_first_event_settles_the_choice(first: dict[str, Any], provider: str) -> None:
    sp = StreamParser()
    sp.feed(b"not json at all\n" + jl(first))  # noise first, then one event
    assert isinstance(sp.provider, AutoProvider)
    assert sp.provider_name == provider


def test_claude_tool_results_before_the_first_assistant_message() -> None:
    user = {"type": "user", "message": {"content": [{"type": "tool_result", "content": "z" * 500}]}}
    seen: list[Any] = []

    def loads(data: bytes | str) -> Any:
        obj = orjson.loads(data)
        seen.append(obj)
        return obj

    s = parse(io.BytesIO(jl(user, user, {"type": "assistant", "message": {"model": "m", "content": "hi"}})),
              loads=loads)
    assert s.provider == "claude" and s.text == "hi"
    assert all(o["type"] != "user" for o in seen)  # skipped undecoded, even before detection


def test_bulky_types_are_not_decoded_before_detection() -> None:
    seen: list[Any] = []

    def loads(data: bytes | str) -> Any:
        obj = orjson.loads(data)
        seen.append(obj)
        return obj

    bulky = [{"type": t, "output": "x" * 100} for t in ("tool_result", "tool_use", "user")]
    parse(io.BytesIO(jl(*bulky)), loads=loads)
    assert seen == []


def test_generic_fallback() -> None:
    data = jl({"event": "start", "session_id": "g-1"}, {"kind": "progress", "n": 1},
              {"result": "the answer", "usage": {"input_tokens": 3, "output_tokens": 4}})
    s = parse(io.BytesIO(data)).summary()
    assert s["provider"] == "generic"
    assert s["text"] == "the answer"
    assert s["usage"] == {"input_tokens": 3, "output_tokens": 4}
    assert s["session_id"] == "g-1"


def test_generic_after_the_detection_window() -> None:
    many = [{"kind": "tick", "n": i} for i in range(40)]
    sp = StreamParser()
    sp.feed(jl(*many))
    assert sp.provider_name == "generic"  # settled after the first events, before the end
    late = {"type": "system", "subtype": "init", "session_id": "s"}
    sp.feed(jl(late))
    assert sp.provider_name == "generic"  # a late marker does not switch providers


def test_empty_stream_is_generic() -> None:
    r = parse(io.BytesIO(b""))
    assert r.provider == "generic" and r.text is None and r.lines == 0
