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


# ---------------------------------------------------------------- Copilot CLI 1.0.9x


def test_copilot_model_is_the_assistant_messages_and_billing_is_the_checkpoints() -> None:
    r, seen = events("copilot/usage_checkpoint.jsonl")
    assert r.provider == "copilot" and r.ok and r.text == "FINAL-ANSWER-copilot"
    # session.start says "auto"; the messages name the model that answered
    assert r.model == "claude-sonnet-4.5"
    assert r.session_id == "3a0e6f52-1c4b-4f0e-9d7a-2b8c5e1f7a90"
    # the checkpoint counts premium requests and AI credits (nano-AIU), never tokens: no normalized usage
    assert r.usage == {}
    assert r.raw_usage["usage_checkpoint"] == {"totalNanoAiu": 27401400000, "totalPremiumRequests": 1,
                                               "totalApiDurationMs": 3100}
    assert r.raw_usage["premiumRequests"] == 1  # the result's own usage object, kept as before
    assert [e.data["model"] for e in seen if e.kind == "session"][-1] == "claude-sonnet-4.5"


def test_copilot_checkpoint_keeps_only_the_latest_totals() -> None:
    rows = lines("copilot/usage_checkpoint.jsonl")
    first = json.loads(json.dumps(rows[7]))
    first["data"]["totalNanoAiu"], first["data"]["totalPremiumRequests"] = 1000, 0
    r = parse(io.BytesIO(jl(*rows[:7], first, *rows[7:])))
    assert r.raw_usage["usage_checkpoint"]["totalNanoAiu"] == 27401400000  # cumulative: the last one, not a sum


def test_copilot_model_falls_back_to_the_session_start() -> None:
    r = parse(FIXTURES / "copilot/success.jsonl")
    assert r.model == "gpt-5"


# ---------------------------------------------------------------- Amp: usage on assistant messages only


def test_amp_usage_is_the_sum_of_its_assistant_messages() -> None:
    r, seen = events("amp/success.jsonl")
    assert r.provider == "amp" and r.ok and r.text == "FINAL-ANSWER-amp"
    # Amp's input_tokens already count the cache (12783 = 12416 read + 367 written in Amp's own example)
    assert r.usage == {"input_tokens": 2468, "cached_input_tokens": 1200, "cache_write_input_tokens": 1268,
                       "output_tokens": 112}
    assert r.raw_usage == {"assistant_usage": {"input_tokens": 2468, "cache_creation_input_tokens": 1268,
                                               "cache_read_input_tokens": 1200, "output_tokens": 112},
                           "messages": 2}
    assert [e.data["usage"] for e in seen if e.kind == "usage"][-1] == r.usage


def test_amp_usage_is_the_same_whether_anyone_listens() -> None:
    quiet = parse(FIXTURES / "amp/success.jsonl")
    heard, _ = events("amp/success.jsonl")
    assert quiet.usage == heard.usage and quiet.raw_usage == heard.raw_usage


def test_amp_repeated_lines_of_one_message_count_once() -> None:
    rows = lines("amp/success.jsonl")
    # one message printed as two lines (its text block, then its tool call), each with the message's usage
    again = json.loads(json.dumps(rows[4]))
    r = parse(io.BytesIO(jl(*rows[:5], again, *rows[5:])))
    assert r.usage["input_tokens"] == 2468 and r.usage["output_tokens"] == 112
    # the largest counts of the message stand: a snapshot with output 1 then the final 56
    snap = json.loads(json.dumps(rows[4]))
    snap["message"]["usage"]["output_tokens"] = 1
    r = parse(io.BytesIO(jl(*rows[:4], snap, *rows[4:])))
    assert r.usage["output_tokens"] == 112


def test_amp_messages_without_an_id_each_count() -> None:
    rows = lines("amp/success.jsonl")
    for row in (rows[2], rows[4]):
        del row["message"]["id"]
    r = parse(io.BytesIO(jl(*rows)))
    assert r.usage["input_tokens"] == 2468 and r.raw_usage["messages"] == 2


def test_amp_result_usage_wins_over_the_messages() -> None:
    rows = lines("amp/success.jsonl")
    rows[-1]["usage"] = {"input_tokens": 3000, "output_tokens": 200, "cache_read_input_tokens": 1000,
                         "cache_creation_input_tokens": 500}
    r = parse(io.BytesIO(jl(*rows)))
    assert r.usage == {"input_tokens": 3000, "cached_input_tokens": 1000, "cache_write_input_tokens": 500,
                       "output_tokens": 200}


# ---------------------------------------------------------------- Antigravity: input leaves the cache out


def test_antigravity_input_counts_the_cache_reads() -> None:
    r = parse(FIXTURES / "antigravity/success.jsonl")
    # 2842 fresh + 2048 read; total = input + output + thinking + cache reads, as agy reports it
    assert r.usage == {"input_tokens": 4890, "output_tokens": 45, "cached_input_tokens": 2048,
                       "reasoning_output_tokens": 14, "total_tokens": 4935}
    assert r.usage["input_tokens"] + r.usage["output_tokens"] == r.usage["total_tokens"]


def test_antigravity_step_usage_by_the_same_rule() -> None:
    rows = lines("antigravity/success.jsonl")
    del rows[-1]["result"]["usage"]
    rows[3]["step_update"]["usage"]["cache_read_tokens"] = 100
    r = parse(io.BytesIO(jl(*rows)))
    assert r.usage == {"input_tokens": 2512, "output_tokens": 23, "cached_input_tokens": 100,
                       "reasoning_output_tokens": 14}


# ---------------------------------------------------------------- Kimi Code: the session id on a meta line


def test_kimi_session_id_from_the_resume_hint() -> None:
    r, seen = events("kimi/resume_hint.jsonl")
    assert r.provider == "kimi" and r.ok and r.text == "FINAL-ANSWER-kimi"
    assert r.session_id == "ses_3f9a1c2b7d"
    assert [e.data["session_id"] for e in seen if e.kind == "session"] == ["ses_3f9a1c2b7d"]


def test_kimi_without_the_hint_has_no_session_id() -> None:
    assert parse(FIXTURES / "kimi/success.jsonl").session_id is None


# ---------------------------------------------------------------- Gemini -o json: tool-use prompt tokens are input


def test_gemini_document_counts_tool_use_prompt_tokens_as_input() -> None:
    r = parse(FIXTURES / "gemini/output_json.json")
    # prompt 2468 + tool-use prompt 20 in; candidates 100 + thoughts 12 out; total 2600
    assert r.usage == {"input_tokens": 2488, "output_tokens": 112, "cached_input_tokens": 200,
                       "reasoning_output_tokens": 12, "total_tokens": 2600}
    assert r.usage_by_model is not None
    per = r.usage_by_model["gemini-3.8-flash"]
    assert list(r.usage_by_model) == ["gemini-3.8-flash"]
    assert {k: v for k, v in per.items() if not k.startswith("cost_")} == r.usage
