"""Cursor Agent ``cursor-agent -p PROMPT --output-format stream-json`` (and ``json``).

Facts (Cursor's CLI reference, "Output format"): ``system``/``init`` once
(``apiKeySource`` ``env|flag|login``, ``cwd``, ``session_id``, ``model`` — a
display name —, ``permissionMode``; no tool list); ``user`` echoes the prompt;
``assistant`` lines carry ``message.content[]`` text, one line per assistant
message (text deltas with ``--stream-partial-output``); ``thinking`` lines;
``tool_call`` lines with ``subtype`` ``started``/``completed``, a ``call_id``
and ``tool_call: {<name>ToolCall: {args, result}}``; a terminal ``result``
(``subtype: "success"``, ``is_error``, ``duration_ms``, ``result``, the full
text, ``session_id``, ``request_id``; since the 2026 builds also ``usage``:
``inputTokens``, ``outputTokens``, ``cacheReadTokens``, ``cacheWriteTokens``, the
cache reads and writes outside ``inputTokens``). On failure the process exits
non-zero and may end without a ``result`` (the error goes to stderr).
``--output-format json`` prints only the ``result`` object.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._decode.records import Dropped, Event, Noted
from ._claudelike import ClaudeShaped
from .base import LiveEvent, renamed_counts
from .claude import FAMILY, LOOKALIKES, look_alike, normalize_claude_usage
from .grammar import SKIP, Grammar, has, is_, kind, lacks, shape

__all__ = ["CursorProvider", "GRAMMAR", "normalize_cursor_usage"]

_KEY_SOURCES = ("env", "flag", "login")
_S = "c6b62c6f-7ead-4fd6-9922-e952131177ff"

#: ``cursor-agent -p PROMPT --output-format stream-json`` (``json``: the result alone): Claude Code's stream, told
#: from it by its key sources on an init without a tool list, its ``tool_call`` and ``thinking`` types and the
#: request id of its result.
GRAMMAR = look_alike(
    "cursor",
    (
        shape("system", is_("subtype", "init"), is_("apiKeySource", *_KEY_SOURCES), lacks("tools"), own=True,
              label="system/init",
              example={"type": "system", "subtype": "init", "apiKeySource": "login", "cwd": "/w", "session_id": _S,
                       "model": "Claude 4 Sonnet", "permissionMode": "default"}),
        shape("tool_call", kind("tool_call", "object"), own=True,
              example={"type": "tool_call", "subtype": "started", "call_id": "c", "session_id": _S,
                       "tool_call": {"shellToolCall": {"args": {"command": "echo hello"}}}}),
        shape("result", has("request_id"), own=True,
              example={"type": "result", "subtype": "success", "is_error": False, "result": "FINAL-ANSWER",
                       "session_id": _S, "request_id": "r"}),
        shape("thinking", read=SKIP, own=True,
              example={"type": "thinking", "subtype": "delta", "text": "hmm", "session_id": _S}),
        # its user line echoes the prompt (tool results are in tool_call): skipped
        shape("user", read=SKIP, shared=LOOKALIKES,
              example={"type": "user", "session_id": _S, "message": {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]}}),
        shape("stream_event", read=SKIP, shared=LOOKALIKES,
              example={"type": "stream_event", "session_id": _S, "event": {"type": "message_stop"}}),
    ),
    shared=tuple(s for s in FAMILY if s.key not in ("user", "stream_event")),
    says_answer="`result.result` (every text delta joined, as Cursor defines it)",
)


def normalize_cursor_usage(raw: Any) -> dict[str, Any]:
    """Cursor's camelCase ``result.usage`` → normalized names.

    ``inputTokens`` leaves out the cache reads and writes, as Anthropic's
    ``input_tokens`` does: the normalized ``input_tokens`` is the three summed,
    by :func:`~spoolparse.providers.claude.normalize_claude_usage`'s rule.
    """
    return normalize_claude_usage(renamed_counts(raw, (
        ("inputTokens", "input_tokens"),
        ("cacheReadTokens", "cache_read_input_tokens"),
        ("cacheWriteTokens", "cache_creation_input_tokens"),
        ("outputTokens", "output_tokens"),
    )))


def _tool(call: Any) -> tuple[str | None, str | None]:
    """The tool's name and title from a ``tool_call`` object ``{<name>ToolCall: {args, …}}``."""
    if not isinstance(call, dict) or not call:
        return None, None
    key = next(iter(call))
    body = call[key]
    args = body.get("args") if isinstance(body, dict) else None
    args = args if isinstance(args, dict) else {}
    name = key[: -len("ToolCall")] if key.endswith("ToolCall") else key
    if name == "mcp":
        named = args.get("toolName") or args.get("name")
        name = named if isinstance(named, str) and named else name
    title = None
    for field in ("command", "path", "pattern", "globPattern", "query"):
        value = args.get(field)
        if isinstance(value, str) and value:
            title = value
            break
    return name, title


class CursorProvider(ClaudeShaped):
    grammar: ClassVar[Grammar] = GRAMMAR

    @staticmethod
    def normalize_usage(raw: Any) -> dict[str, Any]:
        return normalize_cursor_usage(raw)

    def event(self, ev: Event) -> list[LiveEvent]:
        if ev.type != "tool_call":
            return super().event(ev)
        d, n, t = ev.data, ev.lineno, ev.type
        live: list[LiveEvent] = []
        self.take_session(d.get("session_id"), n, t, live, self.init_model)
        name, title = _tool(d.get("tool_call"))
        cid = d.get("call_id")
        if d.get("subtype") == "started":
            live.append(self.tool_start(n, t, cid, name, title))
            return live
        call = d.get("tool_call")
        body = next(iter(call.values()), None) if isinstance(call, dict) and call else None
        result = body.get("result") if isinstance(body, dict) else None
        done = result.get("success") if isinstance(result, dict) else None
        code = done.get("exitCode") if isinstance(done, dict) else None
        ok = None if not isinstance(result, dict) else "success" in result
        out = done.get("stdout") if isinstance(done, dict) else None
        live.extend(self.tool_end(n, t, cid, name=name, title=title, ok=ok,
                                  exit_code=code if type(code) is int else None, size=ev.size,
                                  output=out if isinstance(out, str) else None))
        return live

    def noted(self, rec: Noted) -> list[LiveEvent]:
        return []

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        if rec.type == "tool_call":
            # A finished tool with a huge result: the answer is not in it.
            return [LiveEvent("dropped", rec.line, rec.type, rec.as_dict())]
        return super().dropped(rec)
