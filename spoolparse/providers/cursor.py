"""Cursor Agent ``cursor-agent -p PROMPT --output-format stream-json`` (and ``json``).

Facts (Cursor's CLI reference, "Output format"): ``system``/``init`` once
(``apiKeySource`` ``env|flag|login``, ``cwd``, ``session_id``, ``model`` — a
display name —, ``permissionMode``; no tool list); ``user`` echoes the prompt;
``assistant`` lines carry ``message.content[]`` text, one line per assistant
message (text deltas with ``--stream-partial-output``); ``thinking`` lines;
``tool_call`` lines with ``subtype`` ``started``/``completed``, a ``call_id``
and ``tool_call: {<name>ToolCall: {args, result}}``; a terminal ``result``
(``subtype: "success"``, ``is_error``, ``duration_ms``, ``result``, the full
text, ``session_id``, ``request_id``). No usage is printed. On failure the
process exits non-zero and may end without a ``result`` (the error goes to
stderr). ``--output-format json`` prints only the ``result`` object.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..lines import Dropped, Event, Noted
from ._claudelike import ClaudeShaped
from .base import LiveEvent

__all__ = ["CursorProvider"]

_KEY_SOURCES = ("env", "flag", "login")


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
    name: ClassVar[str] = "cursor"
    keep: ClassVar[frozenset[str]] = ClaudeShaped.keep | {"tool_call"}
    # Cursor's ``user`` line echoes the prompt (tool results are in ``tool_call``): skipped.
    note: ClassVar[frozenset[str]] = frozenset()
    known: ClassVar[frozenset[str]] = ClaudeShaped.known | {"tool_call", "thinking"}

    @classmethod
    def detect(cls, rec: Event | Noted) -> bool:
        if rec.type in ("tool_call", "thinking"):
            # Cursor's own types (Droid's tool_call has a toolName and no subtype).
            return not isinstance(rec, Event) or "toolName" not in rec.data
        if not isinstance(rec, Event):
            return False
        d = rec.data
        if rec.type == "result":
            # The ``json`` form's lone object: a request id, and none of Claude's usage fields.
            return "request_id" in d and not ("usage" in d or "modelUsage" in d or "total_cost_usd" in d)
        if rec.type != "system":
            return False
        return d.get("subtype") == "init" and d.get("apiKeySource") in _KEY_SOURCES and "tools" not in d

    def event(self, ev: Event) -> list[LiveEvent]:
        if ev.type != "tool_call":
            return super().event(ev)
        d, n, t = ev.data, ev.lineno, ev.type
        live: list[LiveEvent] = []
        sid = d.get("session_id")
        if isinstance(sid, str) and sid and sid != self.session_id:
            self.session_id = sid
            live.append(LiveEvent("session", n, t, {"session_id": sid, "model": self.init_model}))
        name, title = _tool(d.get("tool_call"))
        data: dict[str, Any] = {"tool": name, "id": d.get("call_id")}
        if title is not None:
            data["title"] = title
        kind = "tool_start" if d.get("subtype") == "started" else "tool_end"
        live.append(LiveEvent(kind, n, t, data))
        return live

    def noted(self, rec: Noted) -> list[LiveEvent]:
        return []

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        if rec.type == "tool_call":
            # A finished tool with a huge result: the answer is not in it.
            return [LiveEvent("dropped", rec.line, rec.type, rec.as_dict())]
        return super().dropped(rec)
