"""Known traps: CLI bugs whose stdout looks like success are not ok, matched only on each one's exact marker;
and the docs' table of them is the table in the code."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from spoolparse import parse
from spoolparse.providers import PROVIDERS, traps

from .helpers import FIXTURES, jl


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def copy(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(obj))
    return out


# ---------------------------------------------------------------- Qwen Code: "[API Error: …]" reported as success


def test_qwen_api_error_reported_as_success_is_not_ok() -> None:
    r = parse(FIXTURES / "qwen/api_error_success.jsonl")
    assert r.provider == "qwen"
    assert not r.ok and r.text is None
    assert r.error == "[API Error: 401 status code (no body)]"


@pytest.mark.parametrize("answer", [
    "The log says [API Error: 401 status code (no body)] when the key is wrong.",
    "[API Error: 401] is what you get with a bad key.\nFix: set OPENAI_API_KEY.",
    "API Error: 401 status code (no body)",
    "Fixed the handling of API Error responses in client.py.",
])
def test_qwen_answer_that_mentions_an_api_error_stays_ok(answer: str) -> None:
    lines = rows("qwen/api_error_success.jsonl")
    lines[1]["message"]["content"][0]["text"] = answer
    lines[2]["result"] = answer
    r = parse(io.BytesIO(jl(*lines)))
    assert r.ok and r.text == answer and r.error is None


def test_qwen_marker_needs_every_field() -> None:
    lines = rows("qwen/api_error_success.jsonl")
    for key, value in (("subtype", "done"), ("is_error", None)):
        changed = copy(lines[2])
        if value is None:
            del changed[key]
        else:
            changed[key] = value
        assert traps.check("qwen", "result", changed) is None
    assert traps.check("qwen", "result", lines[2]) is not None
    # the same line from Claude Code is Claude's business, not Qwen's trap
    assert traps.check("claude", "result", lines[2]) is None


# ---------------------------------------------------------------- Claude: the <synthetic> message


def test_claude_synthetic_message_is_the_error_never_the_answer() -> None:
    r = parse(FIXTURES / "claude/api_error.jsonl")
    assert not r.ok and r.text is None
    sprung = traps.check("claude", "assistant", rows("claude/api_error.jsonl")[1])
    assert sprung is not None and sprung.trap.event == "assistant"
    assert "synthetic" in sprung.trap.marker


def test_claude_real_message_springs_nothing() -> None:
    msg = {"type": "assistant", "message": {"model": "claude-opus-4-8", "role": "assistant",
                                            "content": [{"type": "text", "text": "API Error: none here"}]}}
    assert traps.check("claude", "assistant", msg) is None


# ---------------------------------------------------------------- opencode: an error line alone, exit 0


def test_opencode_error_only_stream_is_not_ok() -> None:
    r = parse(FIXTURES / "opencode/api_error.jsonl")
    assert not r.ok and r.text is None
    assert r.error == "APIError: mock: simulated 500 failure"
    assert traps.check("kilo", "error", rows("opencode/api_error.jsonl")[0]) is not None


# ---------------------------------------------------------------- Gemini: stopped by the CLI, then "success"


def test_gemini_max_session_turns_then_success_is_not_ok() -> None:
    r = parse(FIXTURES / "gemini/max_session_turns.jsonl")
    assert r.provider == "gemini" and not r.ok
    assert r.error == ("the agent reached Gemini CLI's maximum session turns (Maximum session turns exceeded); "
                       "the answer is what it had said by then")


def test_gemini_loop_detected_then_success_is_not_ok() -> None:
    r = parse(FIXTURES / "gemini/loop_detected.jsonl")
    assert not r.ok
    assert r.error is not None and r.error.startswith("Gemini CLI detected a loop and stopped the agent")


def test_gemini_other_error_events_before_success_stay_warnings() -> None:
    lines = rows("gemini/max_session_turns.jsonl")
    for message in ("Maximum session turns exceeded soon", "maximum session turns exceeded",
                    "Agent execution blocked: policy", "Loop detected"):
        lines[3]["message"] = message
        r = parse(io.BytesIO(jl(*lines)))
        assert r.ok and r.text == "Let me look at the test first.", message


def test_gemini_document_with_the_stop_warning_is_not_ok() -> None:
    doc = json.loads((FIXTURES / "gemini/output_json.json").read_text())
    doc["warnings"] = ["Loop detected, stopping execution"]
    r = parse(io.BytesIO(jl(doc)))
    assert not r.ok and r.error is not None and "loop" in r.error
    doc["warnings"] = ["Some other warning"]
    r = parse(io.BytesIO(jl(doc)))
    assert r.ok and r.text == "FINAL-ANSWER-gemini"


# ---------------------------------------------------------------- Antigravity: denied actions, status SUCCESS


def test_antigravity_denied_actions_are_not_ok() -> None:
    r = parse(FIXTURES / "antigravity/denied_actions.jsonl")
    assert r.provider == "antigravity" and not r.ok and r.text is None
    assert r.error == "antigravity denied 1 tool action(s) in print mode (RunCommand): the task was not done"


def test_antigravity_empty_denied_list_is_no_trap() -> None:
    lines = rows("antigravity/denied_actions.jsonl")
    lines[-1]["result"]["denied_actions"] = []
    assert traps.check("antigravity", "", lines[-1]) is None
    lines[-1]["result"]["denied_actions"] = [{"action": "command"}]
    lines[-1]["result"]["status"] = "ERROR"  # a failed status is the failure already, by its own words
    assert traps.check("antigravity", "", lines[-1]) is None


# ---------------------------------------------------------------- Kimi Code: a blocked hook's output as a message


def test_kimi_blocked_hook_message_is_not_an_answer() -> None:
    r = parse(FIXTURES / "kimi/hook_blocked.jsonl")
    assert r.provider == "kimi" and not r.ok and r.text is None
    assert r.error == "a Kimi Code UserPromptSubmit hook blocked the request: prompts that touch production are " \
                      "not allowed"


@pytest.mark.parametrize("text", [
    "The UserPromptSubmit hook blocked\nthe request earlier; I removed it.",
    "Your pre-commit hook blocked\n\nthe commit because of lint errors.",
    "UserPromptSubmit hook\n\nprompt recorded",
])
def test_kimi_answer_about_hooks_stays_an_answer(text: str) -> None:
    r = parse(io.BytesIO(jl({"role": "assistant", "content": text})))
    assert r.ok and r.text == text


# ---------------------------------------------------------------- the table itself


def test_every_trap_names_known_providers_and_a_source() -> None:
    for trap in traps.TRAPS:
        assert trap.clis and set(trap.clis) <= set(PROVIDERS), trap.clis
        assert trap.versions and trap.marker and trap.means and trap.source


def test_unknown_cli_or_line_springs_nothing() -> None:
    assert traps.check("codex", "result", {"subtype": "success"}) is None
    assert traps.check("qwen", "assistant", {"result": "[API Error: x]"}) is None


def test_checking_a_familys_clis_at_once_springs_what_checking_them_one_by_one_springs() -> None:
    """check_any matches a trap the CLIs share once: the same trap and error as asking each CLI in turn, for every
    order of every family's CLIs, on every line of the fixtures of a type a trap is on."""
    events = {t.event for t in traps.TRAPS}
    lines = [json.loads(line) for path in sorted(FIXTURES.glob("*/*.jsonl"))
             for line in path.read_text().splitlines() if line.startswith("{")]
    lines += [{"type": "result", "subtype": "success", "is_error": False, "result": "[API Error: 500]"},
              {"type": "assistant", "message": {"model": "<synthetic>", "content": [{"type": "text", "text": "x"}]}}]
    families = [("claude", "qwen", "amp", "cursor"), ("qwen", "claude"), ("opencode", "kilo"), ("gemini",)]
    sprung = 0
    for clis in (c for f in families for c in (f, f[::-1])):
        for d in lines:
            t = d.get("type") if isinstance(d.get("type"), str) else ""
            for event in {t} & events or {""}:
                one_by_one = next((s for s in (traps.check(c, event, d) for c in clis) if s is not None), None)
                at_once = traps.check_any(clis, event, d)
                assert _what(at_once) == _what(one_by_one), (clis, d)
                sprung += at_once is not None
    assert sprung >= 4  # the lines that spring one did, in every order


def _what(s: traps.Sprung | None) -> tuple[traps.Trap, str] | None:
    return None if s is None else (s.trap, s.error)
