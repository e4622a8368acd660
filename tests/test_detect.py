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
    for s in (auto, named):
        s.pop("duration_s")
    assert named.pop("detected_by") == "--provider" and auto.pop("detected_by").startswith("line ")
    assert auto == named


#: The provider each fixture directory's streams are detected as: its own, except
#: where the stream is another CLI's format unchanged (Kilo prints opencode's).
FAMILY = {
    "codex": "codex",
    "claude": "claude",
    "gemini": "gemini",
    "opencode": "opencode",
    "qwen": "qwen",
    "amp": "amp",
    "cursor": "cursor",
    "droid": "droid",
    "kimi": "kimi",
    "copilot": "copilot",
    "kilo": "opencode",
    "antigravity": "antigravity",
}
ALL_FIXTURES = sorted(
    str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*") if p.suffix in (".json", ".jsonl")
)


def test_every_provider_has_fixtures() -> None:
    dirs = {name.split("/")[0] for name in ALL_FIXTURES}
    # codex's streams come from fixtures/fake_codex.py rather than files
    assert dirs | {"codex"} == set(FAMILY) == set(PROVIDERS)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_detection_across_the_fixture_set(name: str) -> None:
    """Every fixture of every provider is read by its own provider (or the format it copies)."""
    cli = name.split("/")[0]
    auto = parse(FIXTURES / name)
    assert auto.provider == FAMILY[cli]
    # --provider NAME reads the same stream the same way, and says which it was.
    named = parse(FIXTURES / name, provider=cli).summary()
    got = auto.summary()
    for s in (got, named):
        s.pop("duration_s")
        s.pop("detected_by")
    assert named.pop("provider") == cli
    got.pop("provider")
    assert got == named


def test_detection_order_and_names() -> None:
    assert list(PROVIDERS) == [
        "codex", "qwen", "amp", "cursor", "droid", "claude", "gemini", "opencode", "kilo", "copilot", "kimi",
        "antigravity",
    ]
    assert names() == ["auto", *PROVIDERS, "generic"]
    for name in names():
        p = make_provider(name)
        assert p.name == name
    with pytest.raises(UsageError):
        make_provider("agy")


@pytest.mark.parametrize(
    ("first", "provider"),
    [
        ({"type": "thread.started", "thread_id": "t"}, "codex"),
        ({"id": "0", "msg": {"type": "agent_message", "message": "hi"}}, "codex"),
        ({"type": "init", "timestamp": "2026-01-01T00:00:00.000Z", "session_id": "s", "model": "m"}, "gemini"),
        ({"type": "step_start", "timestamp": 1, "sessionID": "ses_1", "part": {}}, "opencode"),
        # Claude-shaped look-alikes, told apart by what Claude Code never prints
        ({"type": "system", "subtype": "init", "session_id": "s", "model": "m", "qwen_code_version": "0.24.4"}, "qwen"),
        ({"type": "system", "subtype": "init", "session_id": "T-019b", "cwd": "/", "tools": []}, "amp"),
        ({"type": "result", "subtype": "success", "session_id": "T-019b", "result": "x"}, "amp"),
        ({"type": "system", "subtype": "init", "session_id": "s", "apiKeySource": "login", "model": "GPT-5"}, "cursor"),
        ({"type": "tool_call", "subtype": "started", "call_id": "c", "tool_call": {}}, "cursor"),
        ({"type": "message", "role": "assistant", "id": "m", "text": "hi", "timestamp": 1, "session_id": "s"},
         "droid"),
        ({"type": "assistant.message", "data": {"content": "hi"}, "id": "e"}, "copilot"),
        ({"role": "assistant", "content": "hi"}, "kimi"),
        # ... while Claude's own lines stay Claude's
        ({"type": "system", "subtype": "init", "session_id": "s", "tools": ["Bash"], "model": "m",
          "apiKeySource": "none", "permissionMode": "default"}, "claude"),
        ({"type": "system", "subtype": "init", "session_id": "s", "apiKeySource": "ANTHROPIC_API_KEY", "model": "m"},
         "claude"),
        ({"type": "system", "subtype": "init", "session_id": "s", "claude_code_version": "2.1.197"}, "claude"),
        # an event Claude and its look-alikes share is Claude's until a look-alike's own mark shows
        ({"type": "result", "subtype": "success", "result": "x", "session_id": "s", "usage": {}}, "claude"),
        ({"type": "assistant", "session_id": "s", "message": {"model": "m", "content": []}}, "claude"),
        ({"type": "message", "timestamp": "t", "role": "assistant", "content": "hi"}, "gemini"),
    ],
)
def test_first_event_settles_the_choice(first: dict[str, Any], provider: str) -> None:
    sp = StreamParser()
    sp.feed(b"not json at all\n" + jl(first))  # noise first, then one event
    assert isinstance(sp.provider, AutoProvider)
    assert sp.provider_name == provider


@pytest.mark.parametrize(
    ("first", "fits"),
    [
        # what Claude Code's init shares with Droid's (and its look-alikes'): no evidence either way
        ({"type": "system", "subtype": "init", "session_id": "s", "model": "m"}, "qwen, amp, cursor, droid and claude"),
        ({"type": "system", "subtype": "init", "session_id": "s", "tools": ["Read"], "model": "m"},
         "qwen, amp, cursor, droid and claude"),
        ({"type": "system", "subtype": "init", "session_id": "s", "tools": [], "mcp_servers": []},
         "qwen, amp, cursor, droid and claude"),
        ({"type": "error", "message": "boom"}, "codex and droid"),
    ],
)
def test_an_event_two_clis_print_decides_nothing(first: dict[str, Any], fits: str) -> None:
    sp = StreamParser()
    sp.feed(jl(first))
    assert sp.provider_name == "auto"  # still undecided, the event held
    res = sp.finish(args=None)
    # the end came with the evidence still shared: no provider's verdict, said so
    assert res.provider == "generic" and res.detected_by == f"ambiguous: {fits}"
    assert f"fit {fits} alike: read as generic" in res.warnings[0]


def test_claude_tool_results_before_the_first_assistant_message() -> None:
    user = {"type": "user", "message": {"content": [{"type": "tool_result", "content": "z" * 500}]}}
    seen: list[Any] = []

    def loads(data: bytes | str) -> Any:
        obj = orjson.loads(data)
        seen.append(obj)
        return obj

    s = parse(io.BytesIO(jl(user, user, {"type": "assistant", "message": {"model": "m", "content": "hi"}})),
              loads=loads)
    assert s.provider == "claude" and s.partial_text == "hi" and not s.ok  # no result: unfinished
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
    sp.feed(jl({"kind": "tick", "n": 41}))
    assert sp.provider_name == "generic"  # more of the same changes nothing
    # a late event a grammar claims is detected as at the start: the lines before it were no CLI's
    sp.feed(jl({"type": "init", "session_id": "g", "model": "m"}))
    assert sp.provider_name == "gemini"
    r = sp.finish(args=None)
    assert (r.provider, r.ok, r.detected_by) == ("gemini", False, "line 42: init"), r.summary()
    assert any("line 42: the lines before it hold no event of a known format" in w for w in r.warnings), r.warnings


def test_empty_stream_is_generic() -> None:
    r = parse(io.BytesIO(b""))
    assert r.provider == "generic" and r.text is None and r.lines == 0


# -- a named provider that the stream's own marks contradict --------------------------------------------------

CLAUDE_FAMILY = ["claude", "qwen", "amp", "cursor", "droid"]


# (a Droid stream read as a look-alike's shows its marks on types the look-alike does not read: not looked at)
@pytest.mark.parametrize("actual", CLAUDE_FAMILY[:-1])
@pytest.mark.parametrize("named", CLAUDE_FAMILY)
def test_a_named_provider_the_streams_marks_contradict_is_read_as_named_with_a_warning(actual: str,
                                                                                        named: str) -> None:
    """``parse --provider qwen`` of a Claude Code stream (whose init carries Claude's own marks), and the
    reverse, read it as the named CLI's without a word. It is still read as named (the answer the same), and a
    warning names the line and the other CLI, as auto-detection names a switch."""
    path = FIXTURES / actual / "success.jsonl"
    got = parse(path, provider=named).summary()
    said = [w for w in got["warnings"] if w.startswith(f"--provider {named}: ")]
    if named == actual:
        assert said == [], said
        return
    assert len(said) == 1, got["warnings"]
    assert f"is {actual}'s, not {named}'s: read as {named}, as --provider says" in said[0], said
    assert got["provider"] == named and got["detected_by"] == "--provider"
    if got["ok"]:
        assert got["text"] == parse(path).text  # the answer auto-detection reads


def test_a_given_candidate_that_renames_a_registered_grammar_is_detected() -> None:
    """Detection names what it finds by the grammar that claims it: a given subclass that names itself otherwise
    (MyClaude with Claude's grammar) is chosen for Claude's stream, not a KeyError."""
    from spoolparse.providers import AutoProvider
    from spoolparse.providers.claude import ClaudeProvider

    class MyClaude(ClaudeProvider):
        name = "myclaude"

    r = parse(FIXTURES / "claude" / "empty_result.jsonl", provider=AutoProvider([MyClaude]))
    assert r.provider == "myclaude"
