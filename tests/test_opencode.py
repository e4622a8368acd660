"""The opencode provider: every rule of the answer, on hand-made transcripts."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson

from spoolparse import LiveEvent, parse
from spoolparse.providers.opencode import OpencodeProvider, normalize_opencode_tokens

from .helpers import FIXTURES, jl

OPENCODE = FIXTURES / "opencode"
SID = "ses_3b1f0c2d9ffeAbCdEf012345"


def summary(source: Path | bytes, **kw: Any) -> dict[str, Any]:
    src = io.BytesIO(source) if isinstance(source, bytes) else source
    return parse(src, **kw).summary()


def ev(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": t, "timestamp": 1763704800000, "sessionID": SID, **kw}


def text(mid: str, t: str) -> dict[str, Any]:
    return ev("text", part={"type": "text", "messageID": mid, "text": t, "time": {"start": 1, "end": 2}})


def test_success_text_and_multi_step_usage_sums() -> None:
    s = summary(OPENCODE / "success.jsonl")
    assert s["provider"] == "opencode"
    assert s["ok"] is True and s["error"] is None
    assert s["text"] == "FINAL-ANSWER-opencode"  # the last message's text parts, joined
    assert s["session_id"] == SID
    assert s["model"] is None
    # steps: (1234 in, 56 out) + (1000 in, 40 out, 16 reasoning, 234 cache read, 10 cache write, $0.0125)
    assert s["usage"] == {"input_tokens": 1234 + 1000 + 234 + 10, "output_tokens": 56 + 40 + 16,
                          "cached_input_tokens": 234, "cache_write_input_tokens": 10,
                          "reasoning_output_tokens": 16, "total_tokens": 1290 + 1300, "cost_usd": 0.0125}
    assert s["raw_usage"] == {"input": 2234, "output": 96, "reasoning": 16, "total": 2590,
                              "cache": {"read": 234, "write": 10}, "cost": 0.0125, "steps": 2}
    assert s["invalid_lines"] == 1


def test_tool_use_is_never_decoded_but_reported() -> None:
    seen: list[Any] = []

    def loads(data: bytes | str) -> Any:
        obj = orjson.loads(data)
        seen.append(obj)
        return obj

    live: list[LiveEvent] = []
    parse(OPENCODE / "success.jsonl", loads=loads, on_event=live.append)
    assert seen and not any(obj["type"] == "tool_use" for obj in seen)
    ends = [e for e in live if e.kind == "tool_end"]
    assert len(ends) == 1 and ends[0].data["bytes"] > 200
    usage = [e.data["usage"]["input_tokens"] for e in live if e.kind == "usage"]
    assert usage == [1234, 2478]  # running totals, step by step


def test_api_error_is_the_only_event() -> None:
    s = summary(OPENCODE / "api_error.jsonl")
    assert s["provider"] == "opencode"
    assert s["ok"] is False
    assert s["error"] == "APIError: mock: simulated 500 failure"
    assert s["session_id"] == SID
    assert s["usage"] == {} and s["raw_usage"] is None


def test_retried_steps_then_error() -> None:
    s = summary(OPENCODE / "stream_error.jsonl")
    assert s["error"].startswith("UnknownError: {")
    assert s["text"] is None


def test_error_name_only() -> None:
    s = summary(jl(ev("error", error={"name": "ProviderAuthError"})))
    assert s["error"] == "ProviderAuthError"


def test_rejected_permissions_are_warnings() -> None:
    s = summary(jl(text("m1", "done"), ev("done", reason="idle", rejected=["bash"])))
    assert s["text"] == "done"
    assert s["warnings"] == ["permissions rejected: bash"]


def test_text_is_bounded() -> None:
    s = summary(jl(*(text("m1", "x" * 400) for _ in range(5))), max_line=1024, max_retained=1024)
    assert s["partial_text"] == "x" * 1024 and s["ok"] is False
    assert len([w for w in s["warnings"] if "cut" in w]) == 1


def test_normalize_tokens() -> None:
    assert normalize_opencode_tokens({"input": 5, "output": 1}) == {"input_tokens": 5, "output_tokens": 1}
    assert normalize_opencode_tokens([]) == {}


def test_declared_types() -> None:
    assert "tool_use" in OpencodeProvider.note and "tool_use" not in OpencodeProvider.keep
    assert {"text", "step_finish", "error"} <= OpencodeProvider.keep


def test_a_dropped_first_part_of_the_last_message_loses_the_answer() -> None:
    """The next part's message started the answer over past the unread line: the answer was the rest of the
    message, ok. The unread part's message is not known, so the answer may lack it: not ok."""
    first, second = text("m2", "FINAL-"), text("m2", "ANSWER")
    bad = b'{"bad":"\\q",' + json.dumps(first, separators=(",", ":")).encode()[1:] + b"\n"
    s = summary(jl(text("m1", "Running it."), ev("step_finish", part={"reason": "tool-calls"})) + bad
                + jl(second, ev("step_finish", part={"reason": "stop"})))
    assert s["ok"] is False and s["text"] is None and "could not be decoded" in s["error"], s
