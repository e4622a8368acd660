"""The seams between the CLIs' streams, one case each: detection by evidence, runs, a lost answer whatever its
key order, ``--provider`` on another CLI's stream, and no ``ok`` without an answer."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse import StreamParser, parse

from .helpers import FIXTURES, jl


def lines_of(name: str) -> list[bytes]:
    return [ln for ln in (FIXTURES / name).read_bytes().splitlines(keepends=True) if ln.strip()]


def objects(name: str) -> list[dict[str, Any]]:
    out = []
    for ln in lines_of(name):
        try:
            obj = json.loads(ln)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def summary(data: bytes, **kw: Any) -> dict[str, Any]:
    return dict(parse(io.BytesIO(data), **kw).summary())


SUCCESS = {
    "claude": "claude/success.jsonl", "qwen": "qwen/success.jsonl", "amp": "amp/success.jsonl",
    "cursor": "cursor/success.jsonl", "droid": "droid/success.jsonl", "gemini": "gemini/success.jsonl",
    "opencode": "opencode/success.jsonl", "copilot": "copilot/success.jsonl", "kimi": "kimi/success.jsonl",
    "antigravity": "antigravity/success.jsonl", "codex": "codex/realcli_A.jsonl",
}


# -- 1. detection commits on no shared event ---------------------------------------------------------------


def _with_init(name: str, init: dict[str, Any]) -> bytes:
    objs = objects(name)
    return jl(init, *objs[1:])


def test_a_claude_init_with_only_the_shared_fields_is_not_droids() -> None:
    shared = {"type": "system", "subtype": "init", "session_id": "s", "model": "claude-x", "tools": ["Bash"],
              "cwd": "/w"}
    s = summary(_with_init("claude/success.jsonl", shared))
    assert (s["provider"], s["ok"], s["text"]) == ("claude", True, "FINAL-ANSWER-claude"), s


@pytest.mark.parametrize("init", [
    {"type": "system", "subtype": "init", "session_id": "s", "cwd": "/w"},  # no model, no tools
    {"type": "system", "subtype": "init", "session_id": "s", "cwd": "/w", "tools": ["Read"], "model": "m",
     "permissionMode": "auto"},
    {"type": "system", "subtype": "init", "session_id": "s", "cwd": "/w", "tools": ["Read"], "model": "m",
     "mcp_servers": []},
    {"type": "system", "subtype": "init", "session_id": "s", "cwd": "/w", "tools": ["Read"], "model": "m",
     "apiKeySource": "none"},
])
def test_a_droid_init_with_claudes_fields_is_still_droids(init: dict[str, Any]) -> None:
    s = summary(_with_init("droid/success.jsonl", init))
    assert (s["provider"], s["ok"], s["text"]) == ("droid", True, "FINAL-ANSWER-droid"), s


@pytest.mark.parametrize("cli", sorted(SUCCESS))
def test_an_untyped_role_line_first_does_not_make_every_stream_kimis(cli: str) -> None:
    stray = jl({"role": "assistant", "content": "a log line that looks like a chat message"})
    data = stray + (FIXTURES / SUCCESS[cli]).read_bytes()
    s = summary(data)
    want = summary((FIXTURES / SUCCESS[cli]).read_bytes())
    if cli == "kimi":
        assert s["ok"] is True and s["provider"] == "kimi" and s["text"] == want["text"], s
        return
    assert (s["provider"], s["ok"], s["text"]) == (cli, True, want["text"]), s
    assert any("kimi" in w for w in s["warnings"]), s["warnings"]  # the switch is said


# -- 2. events no grammar claims do not use the budget up ---------------------------------------------------


def _stream_event(i: int) -> dict[str, Any]:
    return {"type": "stream_event", "uuid": f"u{i}", "session_id": "s", "parent_tool_use_id": None,
            "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}}


def test_a_claude_stream_of_partial_messages_without_its_init_is_claudes() -> None:
    deltas = [_stream_event(i) for i in range(40)]
    said = {"type": "assistant", "session_id": "s", "message": {"model": "m", "content": [
        {"type": "text", "text": "FINAL"}]}}
    cut = summary(jl(*deltas, said))
    assert cut["provider"] == "claude" and cut["ok"] is False, cut
    assert cut["error"] == "stream ended before result" and cut["text"] is None
    done = summary(jl(*deltas, said, {"type": "result", "subtype": "success", "is_error": False,
                                      "result": "FINAL", "session_id": "s"}))
    assert (done["provider"], done["ok"], done["text"]) == ("claude", True, "FINAL"), done


# -- 3. an untyped line is no gemini result ----------------------------------------------------------------


@pytest.mark.parametrize("stray", [{}, {"level": "warn", "msg": "slow"}, {"response": "x", "stats": {}}])
@pytest.mark.parametrize("where", [1, 2, -1])
def test_an_untyped_line_in_a_gemini_stream_cut_before_its_result_is_not_ok(stray: dict[str, Any],
                                                                          where: int) -> None:
    objs = objects("gemini/success.jsonl")[:-1]  # cut before the result
    at = where if where >= 0 else len(objs)
    s = summary(jl(*objs[:at], stray, *objs[at:]))
    assert s["provider"] == "gemini" and s["ok"] is False, s
    assert s["error"] == "stream ended before result", s


def test_the_gemini_document_is_the_result_only_when_it_is_the_whole_input() -> None:
    doc = {"session_id": "g", "response": "FINAL", "stats": {"models": {}}}
    alone = summary(jl(doc))
    assert (alone["provider"], alone["ok"], alone["text"]) == ("gemini", True, "FINAL"), alone
    two = summary(jl(doc, {"level": "info"}))
    assert two["ok"] is False, two


# -- 4. a second run is a new run ------------------------------------------------------------------------------


RUN_START_CUTS = {  # each CLI's complete run, then the next run cut where it had said the least
    "gemini": ("gemini/success.jsonl", 1),
    "copilot": ("copilot/success.jsonl", 1),
    "droid": ("droid/success.jsonl", 1),
    "antigravity": ("antigravity/success.jsonl", 1),
    "codex": ("codex/realcli_A.jsonl", 2),  # thread.started and its warning item, before turn.started
    "claude": ("claude/success.jsonl", 1),
    "qwen": ("qwen/success.jsonl", 1),
    "amp": ("amp/success.jsonl", 1),
}


@pytest.mark.parametrize("cli", sorted(RUN_START_CUTS))
def test_a_second_run_cut_short_is_unfinished(cli: str) -> None:
    name, keep = RUN_START_CUTS[cli]
    whole = lines_of(name)
    firsts = [ln for ln in whole if ln.lstrip().startswith(b"{")]
    for n in range(keep, len(firsts)):
        data = b"".join(whole) + b"".join(firsts[:n])
        s = summary(data)
        assert s["provider"] == cli and s["ok"] is False and s["text"] is None, (n, s)
        assert "stream ended before" in s["error"], s
        assert any("2 runs" in w for w in s["warnings"]), s["warnings"]


def test_two_complete_gemini_runs_give_the_last_runs_answer_and_both_usages() -> None:
    one = (FIXTURES / "gemini/success.jsonl").read_bytes()
    s = summary(one + one)
    single = summary(one)
    assert s["ok"] is True and s["text"] == single["text"] == "Running it. FINAL-ANSWER-gemini", s
    assert s["usage"] == single["usage"]
    assert s["raw_usage"] == [single["raw_usage"], single["raw_usage"]]
    assert any("2 runs" in w for w in s["warnings"]), s["warnings"]


# -- 5. lost means lost, whatever the key order ------------------------------------------------------------


def _type_last(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(reversed(list(obj.items())))


@pytest.mark.parametrize("bad", [b"\\q", b"\x01"])
def test_an_undecodable_codex_answer_with_its_type_last_is_lost(bad: bytes) -> None:
    thread = {"type": "thread.started", "thread_id": "t"}
    early = {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "early"}}
    line = (b'{"type":"item.completed","item":{"id":"item_1","text":"the answer ' + bad
            + b'","type":"agent_message"}}\n')
    done = {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}
    for answer in (line, b'{"item":{"id":"item_1","text":"the answer ' + bad + b'","type":"agent_message"},'
                         b'"type":"item.completed"}\n'):
        s = summary(jl(thread, {"type": "turn.started"}, early) + answer + jl(done))
        assert s["ok"] is False and s["text"] is None and s["partial_text"] is None, s
        assert "final answer" in s["error"] and "could not be decoded" in s["error"], s


def test_an_undecodable_gemini_delta_in_the_middle_loses_the_joined_answer() -> None:
    objs = objects("gemini/success.jsonl")
    deltas = [i for i, o in enumerate(objs) if o.get("role") == "assistant"]
    assert len(deltas) >= 2
    at = deltas[0]
    bad = b'{"content":"Runn\\qing it.","delta":true,"role":"assistant","timestamp":"t","type":"message"}\n'
    data = jl(*objs[:at]) + bad + jl(*objs[at + 1 :])
    s = summary(data)
    assert s["ok"] is False and s["text"] is None, s
    assert "could not be decoded" in s["error"], s


@pytest.mark.parametrize("name", ["gemini/success.jsonl", "copilot/success.jsonl", "opencode/success.jsonl",
                                  "codex/realcli_A.jsonl"])
def test_a_run_whose_last_event_cannot_be_read_is_not_ok(name: str) -> None:
    """Its status, exit code or step reason was in that line: the run ended, but whether it succeeded is not
    known (it was ok, by the line's type alone)."""
    whole = lines_of(name)
    last = json.loads(whole[-1])
    bad = b'{"bad":"\\q",' + json.dumps(_type_last(last), separators=(",", ":")).encode()[1:] + b"\n"
    s = summary(b"".join(whole[:-1]) + bad)
    assert s["ok"] is False and s["error"].startswith("the run's last event"), s
    assert s["error"].endswith("could not be decoded (not a JSON object, or nested too deep) and was lost: how the "
                               "run ended is not known"), s["error"]


# -- 6. --provider X on another CLI's stream ---------------------------------------------------------------


def test_naming_a_provider_whose_events_the_stream_lacks_is_not_ok() -> None:
    s = summary((FIXTURES / "gemini/fatal_error.jsonl").read_bytes(), provider="claude")
    assert s["ok"] is False and "no claude event in the stream" in s["error"], s
    assert s["detected_by"] == "--provider"


# -- 7. no ok without an answer; text only when ok -----------------------------------------------------------


def _antigravity_denied() -> bytes:
    objs = objects("antigravity/success.jsonl")
    tool_done = max(i for i, o in enumerate(objs) if o.get("step_update", {}).get("step_type") == "tool")
    result = {"event": "result", "result": {"conversation_id": "c", "status": "SUCCESS", "response": "",
                                            "usage": {"total_tokens": 4935}}}
    return jl(*objs[: tool_done + 1], result)


def test_a_finished_run_without_an_answer_is_not_ok() -> None:
    s = summary(_antigravity_denied())
    assert s["provider"] == "antigravity" and s["ok"] is False and s["text"] is None, s
    assert s["error"].startswith("the agent finished without an answer"), s
    allowed = dict(parse(io.BytesIO(_antigravity_denied()), allow_empty_answer=True).summary())
    assert allowed["ok"] is True and allowed["error"] is None, allowed


def test_a_failed_run_gives_what_it_said_last_as_partial_text() -> None:
    thread = {"type": "thread.started", "thread_id": "t"}
    said = {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "progress note 225"}}
    failed = {"type": "turn.failed", "error": {"message": "model overloaded"}}
    s = summary(jl(thread, {"type": "turn.started"}, said, failed))
    assert s["ok"] is False and s["text"] is None and s["partial_text"] == "progress note 225", s
    ok = summary(jl(thread, {"type": "turn.started"}, said, {"type": "turn.completed", "usage": {}}))
    assert ok["ok"] is True and ok["text"] == "progress note 225" and ok["partial_text"] is None


def test_the_summary_says_what_decided_the_provider(tmp_path: Path) -> None:
    s = summary((FIXTURES / "qwen/success.jsonl").read_bytes())
    assert s["provider"] == "qwen" and "line 1" in s["detected_by"] and "qwen_code_version" in s["detected_by"]
    assert list(s)[:3] == ["provider", "detected_by", "ok"]
    assert "partial_text" in spoolparse.SUMMARY_FIELDS


def test_stream_parser_takes_allow_empty_answer() -> None:
    sp = StreamParser(allow_empty_answer=True)
    sp.feed(_antigravity_denied())
    assert sp.finish(args=None).ok



# -- the bounds: what detection holds, and the runs' usage kept ------------------------------------------------


SHARED_INIT = {"type": "system", "subtype": "init", "session_id": "s", "model": "m"}  # Claude's and Droid's alike


def test_detection_holds_at_most_its_byte_budget_then_decides() -> None:
    """Lines no grammar claims do not use up the count once a claimed one is held, but they count against
    max_retained bytes: past it the evidence so far decides (here: two families, so generic, said so)."""
    sp = StreamParser(max_line=1024, max_retained=64 * 1024)
    engine = sp.engine
    sp.feed(jl(SHARED_INIT))
    peak = 0
    for i in range(400):
        sp.feed(jl({"kind": "tick", "n": i, "pad": "x" * 600}))
        peak = max(peak, engine._bytes)
        if engine.decided:
            break
    assert engine.decided and sp.provider_name == "generic" and engine._buffer is None, i
    assert 64 * 1024 < peak <= 64 * 1024 + 1024  # the budget, and at most one record past it
    res = sp.finish(args=None)
    assert res.detected_by == "ambiguous: qwen, amp, cursor, droid and claude"
    assert any("fit qwen, amp, cursor, droid and claude alike" in w for w in res.warnings)


def test_claimed_events_that_decide_nothing_use_up_detect_events() -> None:
    from spoolparse import limits

    sp = StreamParser()
    errors = [{"type": "error", "message": f"e{i}"} for i in range(limits.DETECT_EVENTS + 5)]  # codex's or droid's
    for i, ev in enumerate(errors, 1):
        sp.feed(jl(ev))
        assert sp.engine.decided is (i >= limits.DETECT_EVENTS), i
    assert sp.provider_name == "generic" and sp.engine._buffer is None


def test_a_decision_keeps_detect_events_records_for_a_switch_then_lets_them_go() -> None:
    from spoolparse import limits

    sp = StreamParser()
    sp.feed(jl({"type": "system", "subtype": "init", "session_id": "s", "claude_code_version": "2"}))
    assert sp.provider_name == "claude"
    for i in range(limits.DETECT_EVENTS):
        sp.feed(jl({"type": "rate_limit_event", "session_id": "s", "rate_limit_info": {"status": "allowed"}}))
        assert sp.engine._buffer is not None and len(sp.engine._buffer) == i + 2
    sp.feed(jl({"type": "rate_limit_event", "session_id": "s"}))
    assert sp.engine._buffer is None
    # a switch now reads on from where it happens, and says so
    sp.feed(jl({"type": "message", "role": "assistant", "id": "m", "text": "hi", "timestamp": 1, "session_id": "s"}))
    res = sp.finish(args=None)
    assert res.provider == "droid" and any("read as droid from line 19 on" in w for w in res.warnings), res.warnings


def test_the_usage_of_at_most_max_warnings_earlier_runs_is_kept() -> None:
    from spoolparse import limits

    run = (FIXTURES / "gemini/success.jsonl").read_bytes()
    n = limits.MAX_WARNINGS + 50
    s = summary(run * n)
    assert s["ok"] is True and len(s["raw_usage"]) == limits.MAX_WARNINGS + 1  # and the last run's, always
    assert f"the stream held {n} runs; the summary is the last one's" in s["warnings"][-2]
    assert s["warnings"][-1] == f"the usage of {n - 1 - limits.MAX_WARNINGS} earlier runs was not kept"


# -- known traps across the seams -----------------------------------------------------------------------------


def test_a_look_alikes_trap_holds_when_the_stream_reads_as_claudes_for_want_of_its_mark() -> None:
    """Qwen Code's '[API Error: …]' success without its init (the one line that marks it) reads as Claude's: it
    may be any of the family's, so each one's traps apply, and it was ok with the error as its answer."""
    objs = objects("qwen/api_error_success.jsonl")
    s = summary(jl(*objs[1:]))
    assert s["provider"] == "claude" and s["ok"] is False and "[API Error:" in s["error"], s
    named = summary(jl(*objs[1:]), provider="claude")
    assert named["ok"] is True  # named, it is Claude's stream, read by Claude's traps alone


def test_an_unreadable_gemini_error_event_leaves_the_success_after_it_unknown() -> None:
    """It may have been a stop (a known trap): the success after it is no word that the run finished."""
    objs = objects("gemini/loop_detected.jsonl")
    at = next(i for i, o in enumerate(objs) if o.get("type") == "error")
    bad = b'{"bad":"\\q",' + json.dumps(_type_last(objs[at]), separators=(",", ":")).encode()[1:] + b"\n"
    s = summary(jl(*objs[:at]) + bad + jl(*objs[at + 1 :]))
    assert s["ok"] is False and "may have said the CLI stopped the agent" in s["error"], s
