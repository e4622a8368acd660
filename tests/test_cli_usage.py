"""What the newer agent-CLI versions print about usage, model and session, read as their sources say
(fixtures/PROVIDER-SOURCES.md names each source and version)."""

from __future__ import annotations

import io
import json
from typing import Any

from spoolparse import LiveEvent, parse

from .helpers import FIXTURES, jl


def events(name: str, **kw: Any) -> tuple[Any, list[LiveEvent]]:
    seen: list[LiveEvent] = []
    r = parse(FIXTURES / name, on_event=seen.append, **kw)
    return r, seen


def lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


# ---------------------------------------------------------------- Cursor Agent: result.usage, camelCase


def test_cursor_result_usage_counts_cache_reads_and_writes_as_prompt_tokens() -> None:
    r, seen = events("cursor/usage.jsonl")
    assert r.provider == "cursor" and r.ok
    # inputTokens leaves the cache out: 1234 fresh + 1200 read + 34 written are the prompt
    assert r.usage == {"input_tokens": 2468, "cached_input_tokens": 1200, "cache_write_input_tokens": 34,
                       "output_tokens": 112}
    assert r.raw_usage == {"usage": {"inputTokens": 1234, "outputTokens": 112, "cacheReadTokens": 1200,
                                     "cacheWriteTokens": 34}}
    assert [e.data["usage"] for e in seen if e.kind == "usage"] == [r.usage]


def test_cursor_json_document_usage() -> None:
    doc = lines("cursor/usage.jsonl")[-1]
    r = parse(io.BytesIO(jl(doc)), provider="cursor")
    assert r.ok and r.usage["input_tokens"] == 2468 and r.usage["output_tokens"] == 112


def test_cursor_without_usage_has_none() -> None:
    r = parse(FIXTURES / "cursor/success.jsonl")
    assert r.usage == {} and r.raw_usage is None
