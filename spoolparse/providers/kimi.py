"""Kimi Code CLI ``kimi --print -p PROMPT --output-format stream-json``.

Facts (MoonshotAI/kimi-cli: ``ui/print/visualize.py`` ``JsonPrinter`` and the
print-mode docs): every line is one chat message, with no ``type`` key —
``{"role": "assistant", "content": …, "tool_calls": [...]}`` (content a
string or a list of parts ``{"type": "text", "text"}``/``{"type": "think",
"think"}``) and ``{"role": "tool", "tool_call_id", "content"}`` with the tool's
output (the big lines). There is no session id, model, usage or terminal
event: the run is over at the last assistant message without ``tool_calls``.
Errors are printed as plain text (not JSON) and the process exits non-zero.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..lines import Dropped, Event, Noted
from .base import Answer, LiveEvent, Provider

__all__ = ["KimiProvider"]

_ROLES = ("assistant", "tool", "user")


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [
        p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]
    return "".join(parts) if parts else None


class KimiProvider(Provider):
    name: ClassVar[str] = "kimi"
    # Untyped lines: every message is "" to the line reader, tool outputs included.
    keep: ClassVar[frozenset[str]] = frozenset({""})
    known: ClassVar[frozenset[str]] = keep

    def __init__(self) -> None:
        super().__init__()
        self.final_text: str | None = None
        self.last_text: str | None = None
        self.finished = False
        self.last_line = 0

    @classmethod
    def detect(cls, rec: Event | Noted) -> bool:
        if not isinstance(rec, Event) or rec.type != "":
            return False
        d = rec.data
        return d.get("role") in _ROLES and ("content" in d or "tool_calls" in d) and "type" not in d

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        role = d.get("role")
        self.last_line = n
        if role == "assistant":
            calls = d.get("tool_calls")
            calls = calls if isinstance(calls, list) else []
            text = _text(d.get("content"))
            if text is not None:
                if len(text) > self.max_text:
                    text = text[: self.max_text]
                    self.warn(f"assistant text at line {n} cut to {self.max_text} characters")
                self.last_text = text
                live.append(LiveEvent("text", n, t, {"text": text}))
            for call in calls:
                if isinstance(call, dict):
                    fn = call.get("function")
                    name = fn.get("name") if isinstance(fn, dict) else None
                    live.append(LiveEvent("tool_start", n, t, {"tool": name, "id": call.get("id")}))
            # The reply that calls no tool is the last one of the turn.
            self.finished = not calls
            if self.finished:
                self.final_text = text
                live.append(LiveEvent("result", n, t, {"ok": True}))
        elif role == "tool":
            self.finished = False
            content = d.get("content")
            size = len(content) if isinstance(content, str) else None
            live.append(LiveEvent("tool_end", n, t, {"id": d.get("tool_call_id"), "bytes": size}))
        return live

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        # Lines are untyped, so a dropped one may be a tool's output or the answer:
        # only the answer's absence, checked at the end, makes it an error.
        self._lost[rec.type] = rec
        self.finished = False
        return [LiveEvent("dropped", rec.line, rec.type, rec.as_dict())]

    def answer(self) -> Answer:
        text = self.final_text
        error: str | None = None
        extra: list[str] = []
        if not self.finished:
            r = self.last_lost("")
            if r is not None and (self.last_text is None or r.line > self.last_line):
                error = f"the last message ({r.bytes} bytes at line {r.line}) was dropped: {r.reason}"
            else:
                # No reply without tool calls: the agent did not finish (Kimi prints its
                # errors as plain text, counted as invalid lines, and exits non-zero).
                error = "the stream ended before the final answer (an assistant message without tool calls)"
            if text is None and self.last_text is not None:
                text = self.last_text
                extra.append("the text is taken from the last assistant message")
        return Answer(
            text=text,
            usage={},
            raw_usage=None,
            model=None,
            session_id=None,
            error=error,
            warnings=self.notes.as_list() + extra,
        )
