"""Known traps: agent-CLI bugs and quirks whose stdout looks like success, matched on each one's exact marker.

A trap is one line of one CLI's stream that says something the rest of the
stream does not: a ``result`` that reports success around an API error's
text, an ``error`` event after which the CLI still prints a successful
result, a success envelope that lists the tool calls print mode denied.
Each entry names the CLI, the versions it was seen in, the marker, what it
means and where it was found; :func:`check` is the one lookup the providers
make, so whatever decides the verdict can own it without the table changing.

Markers are matched narrowly, on the CLI's own wording and fields (a whole
``[API Error: …]`` result, an exact message), never on a word a real answer
could contain: an answer that merely mentions "API Error" stays an answer.
The versions are where a trap was reported or read in the source; the
marker is matched whatever version prints it, as none of these is fixed in
a release this table knows of.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._regex import regex
from ._text import message_text
from .base import clip, message_of

__all__ = ["Trap", "Sprung", "TRAPS", "check", "check_any", "markdown"]


@dataclass(frozen=True, slots=True)
class Trap:
    """One known trap: where it is, what marks it, what it means, and the error sentence it gives."""

    #: The providers that consult it, the CLI it was found in first.
    clis: tuple[str, ...]
    #: The CLI versions it was reported in or read from the source of.
    versions: str
    #: The line's type key (``""`` for an untyped line).
    event: str
    #: The marker, as the docs state it.
    marker: str
    #: What the marker means for the run.
    means: str
    #: The error the run gets, as the docs state it.
    says: str
    #: Where it was found.
    source: str
    #: The error sentence when the decoded line carries the marker, else ``None``.
    match: Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class Sprung:
    """A trap a line carried, and the error sentence the run gets from it."""

    trap: Trap
    error: str


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# -- qwen ---------------------------------------------------------------------

#: The whole result is Qwen Code's rendering of a failed API call: ``[API Error: <the provider's message>]``.
_QWEN_API_ERROR = regex(r"\[API Error: [^\n]*\]", re.DOTALL)


def _qwen_api_error(d: Mapping[str, Any]) -> str | None:
    text = _str(d.get("result"))
    if d.get("subtype") != "success" or d.get("is_error") is not False or text is None:
        return None
    return clip(text) if _QWEN_API_ERROR.fullmatch(text.strip()) else None


# -- claude -------------------------------------------------------------------

_SYNTHETIC = "<synthetic>"


def _claude_synthetic(d: Mapping[str, Any]) -> str | None:
    msg = d.get("message")
    model = msg.get("model") if type(msg) is dict or isinstance(msg, Mapping) else None  # (an ABC check is slow)
    err = _str(d.get("error")) or None
    if model != _SYNTHETIC and err is None:
        return None
    text = message_text(msg)
    reason = err or "api_error"
    return clip(f"{text} ({reason})" if text else reason)


# -- gemini -------------------------------------------------------------------

#: The messages Gemini CLI's non-interactive runner prints when it stops the agent, then reports success.
_GEMINI_STOPS = {
    "Loop detected, stopping execution": "Gemini CLI detected a loop and stopped the agent",
    "Maximum session turns exceeded": "the agent reached Gemini CLI's maximum session turns",
}


def _gemini_stop(message: Any) -> str | None:
    why = _GEMINI_STOPS.get(message) if isinstance(message, str) else None
    return f"{why} ({message}); the answer is what it had said by then" if why else None


def _gemini_stop_event(d: Mapping[str, Any]) -> str | None:
    return _gemini_stop(d.get("message"))


def _gemini_stop_document(d: Mapping[str, Any]) -> str | None:
    warnings = d.get("warnings")
    if not isinstance(warnings, list) or d.get("error") is not None:
        return None
    return next((s for s in map(_gemini_stop, warnings) if s), None)


# -- opencode -----------------------------------------------------------------


def _opencode_error(d: Mapping[str, Any]) -> str | None:
    err = d.get("error")
    msg = message_of(err) or "error"
    name = err.get("name") if isinstance(err, Mapping) else None
    if isinstance(name, str) and name and name != msg:
        msg = f"{name}: {msg}"
    return clip(msg)


# -- antigravity --------------------------------------------------------------


def _antigravity_denied(d: Mapping[str, Any]) -> str | None:
    r = d.get("result") if d.get("event") == "result" else None
    if not isinstance(r, Mapping) or r.get("status") != "SUCCESS":
        return None
    denied = r.get("denied_actions")
    if not isinstance(denied, list) or not denied:
        return None
    names: list[str] = []
    for entry in denied:
        name = entry.get("display_name") or entry.get("action") if isinstance(entry, Mapping) else None
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    listed = f" ({', '.join(names[:10])})" if names else ""
    return clip(f"antigravity denied {len(denied)} tool action(s) in print mode{listed}: the task was not done")


# -- kimi ---------------------------------------------------------------------

#: Kimi Code writes a prompt hook's result as an assistant message: "<HookEvent> hook blocked\n\n<its output>".
_KIMI_HOOK_BLOCKED = regex(r"([A-Z][A-Za-z]*) hook blocked\n\n(.*)", re.DOTALL)


def _kimi_hook_blocked(d: Mapping[str, Any]) -> str | None:
    text = _str(d.get("content"))
    if d.get("role") != "assistant" or d.get("tool_calls") or text is None:
        return None
    m = _KIMI_HOOK_BLOCKED.fullmatch(text)
    if m is None:
        return None
    said = m.group(2).strip().splitlines()
    return clip(f"a Kimi Code {m.group(1)} hook blocked the request" + (f": {said[0]}" if said else ""))


#: The table. Order is the docs' order: by CLI, then by the line the marker is on.
TRAPS: tuple[Trap, ...] = (
    Trap(
        clis=("claude", "qwen", "amp", "cursor"),
        versions="2.x (seen in 2.1.197)",
        event="assistant",
        marker='an `assistant` line whose `message.model` is `"<synthetic>"`, or that carries a top-level '
               '`error` string',
        means="an API failure written as an assistant message: its text is the error, never the answer; with no "
              "`result` after it, it is the run's error",
        says="the message's text and its `error` (`Invalid API key (authentication_failed)`)",
        source="anthropics/claude-agent-sdk-python `tests/test_message_parser.py` (AssistantMessageError); "
               "a real claude 2.1.197 run against a failing mock server",
        match=_claude_synthetic,
    ),
    Trap(
        clis=("qwen",),
        versions="0.21.9 (reported; the issue is open)",
        event="result",
        marker='`result` with `subtype: "success"`, `is_error: false` and a `result` that is wholly '
               '`[API Error: …]`',
        means="a failed API call reported as a successful run (exit status 0); the text is the error",
        says="the result's text (`[API Error: 401 status code (no body)]`)",
        source="QwenLM/qwen-code#8920",
        match=_qwen_api_error,
    ),
    Trap(
        clis=("gemini",),
        versions="stream-json since it appeared (October 2025); read at 0.56.0-nightly (commit 5411f11)",
        event="error",
        marker='an `error` event whose `message` is exactly "Loop detected, stopping execution" or '
               '"Maximum session turns exceeded", then `result` with `status: "success"`',
        means="Gemini CLI stopped the agent; the success that follows is no finished answer",
        says="`Gemini CLI detected a loop and stopped the agent (…)` or `the agent reached Gemini CLI's maximum "
             "session turns (…)`, then `; the answer is what it had said by then`",
        source="google-gemini/gemini-cli `packages/cli/src/nonInteractiveCli.ts` (LoopDetected, MaxSessionTurns) "
               "and its stream-json snapshots",
        match=_gemini_stop_event,
    ),
    Trap(
        clis=("gemini",),
        versions="`-o json` (read at 0.56.0-nightly, commit 5411f11)",
        event="",
        marker="the `-o json` document with no `error` whose `warnings` hold one of those two messages",
        means="the same stop, in the one-document form",
        says="as for the stream",
        source="google-gemini/gemini-cli `packages/cli/src/nonInteractiveCli.ts` (`warnings` of the JSON output)",
        match=_gemini_stop_document,
    ),
    Trap(
        clis=("opencode", "kilo"),
        versions="exit status 0 after a session error from 0.x (#2489) to 1.14.41 (#26509)",
        event="error",
        marker="an `error` event (`{name, data: {message}}`), however the process exited",
        means="the run failed, even when the stream holds nothing else and the exit status is 0",
        says="`<name>: <message>` (`APIError: mock: simulated 500 failure`)",
        source="anomalyco/opencode#2489, #14551, #26509; a real opencode 1.18.33 run (an error line alone)",
        match=_opencode_error,
    ),
    Trap(
        clis=("antigravity",),
        versions="1.2.5",
        event="",
        marker='`result` with `status: "SUCCESS"` and a non-empty `denied_actions` list',
        means="print mode denied tool calls it could not ask about; the turn ended without doing the task",
        says="`antigravity denied N tool action(s) in print mode (RunCommand): the task was not done`",
        source="an agy 1.2.5 integration's envelope check (`denied_actions`, verified against agy 1.2.5)",
        match=_antigravity_denied,
    ),
    Trap(
        clis=("kimi",),
        versions="Kimi Code 0.38.0",
        event="",
        marker="an assistant message, without tool calls, that is wholly `<HookEvent> hook blocked` + a blank "
               "line + the hook's output",
        means="a hook blocked the prompt; the message is the hook's output, not an answer (the CLI then exits "
              "non-zero, and prints no resume hint)",
        says="`a Kimi Code <HookEvent> hook blocked the request: <the output's first line>`",
        source="MoonshotAI/kimi-code `apps/kimi-code/src/cli/prompt-render.ts` (`writeHookResult`) and "
               "`run-prompt.ts` (a blocked turn)",
        match=_kimi_hook_blocked,
    ),
)


def _index() -> dict[tuple[str, str], tuple[Trap, ...]]:
    out: dict[tuple[str, str], list[Trap]] = {}
    for trap in TRAPS:
        for cli in trap.clis:
            out.setdefault((cli, trap.event), []).append(trap)
    return {key: tuple(found) for key, found in out.items()}


_BY_LINE = _index()


def check(cli: str, event: str, data: Mapping[str, Any]) -> Sprung | None:
    """The trap a decoded line of ``cli``'s stream (type key ``event``) springs, if it springs one."""
    for trap in _BY_LINE.get((cli, event), ()):
        error = trap.match(data)
        if error is not None:
            return Sprung(trap, error)
    return None


def check_any(clis: tuple[str, ...], event: str, data: Mapping[str, Any]) -> Sprung | None:
    """:func:`check` for a stream that may be any of ``clis``' (one family's, none of its marks seen)."""
    traps = _ANY.get((clis, event))
    if traps is None:
        traps = tuple(dict.fromkeys(t for cli in clis for t in _BY_LINE.get((cli, event), ())))
        if len(_ANY) < _ANY_KEPT:
            _ANY[clis, event] = traps
    for trap in traps:  # a trap several of them share is matched once (a family's are mostly one)
        error = trap.match(data)
        if error is not None:
            return Sprung(trap, error)
    return None


#: The traps :func:`check_any` matches, by CLIs and line type: the providers ask for every line they decode.
_ANY: dict[tuple[tuple[str, ...], str], tuple[Trap, ...]] = {}
_ANY_KEPT = 256


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The docs' table of known traps, one row per trap, from :data:`TRAPS`."""
    rows = ["| CLI | versions | line | marker | what it means | error | source |", "|---|---|---|---|---|---|---|"]
    for t in TRAPS:
        clis = t.clis[0] + (f" (also read for {', '.join(t.clis[1:])})" if len(t.clis) > 1 else "")
        line = f"`{t.event}`" if t.event else "untyped"
        rows.append("| " + " | ".join(_cell(c) for c in (clis, t.versions, line, t.marker, t.means, t.says, t.source))
                    + " |")
    return "\n".join(rows) + "\n"
