"""Kimi Code CLI ``kimi --print -p PROMPT --output-format stream-json``.

Facts (MoonshotAI/kimi-cli: ``ui/print/visualize.py`` ``JsonPrinter`` and the
print-mode docs): every line is one chat message, with no ``type`` key —
``{"role": "assistant", "content": …, "tool_calls": [...]}`` (content a
string or a list of parts ``{"type": "text", "text"}``/``{"type": "think",
"think"}``) and ``{"role": "tool", "tool_call_id", "content"}`` with the tool's
output (the big lines). There is no session id, model, usage or terminal
event: the run is over at the last assistant message without ``tool_calls``.
Errors are printed as plain text (not JSON) and the process exits non-zero.

Kimi Code (``@moonshot-ai/kimi-code``, MoonshotAI/kimi-code
``apps/kimi-code/src/cli/prompt-render.ts``) prints the same messages and adds
typed ``meta`` lines: ``system.version``, ``turn.step.retrying`` and, last, after
a turn that completed, ``session.resume_hint`` with the ``session_id``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from .._decode.records import Dropped, Event
from . import _peek, traps
from .base import MISSING, Answer, LiveEvent, Provider
from .grammar import SKIP, Grammar, empty, filled, is_, lacks, shape

__all__ = ["KimiProvider", "GRAMMAR"]

_ROLES = ("assistant", "tool", "user")
_CHAT = (lacks("type", "event"),)  # a chat message: untyped, and no other CLI's envelope
_FINAL = shape("", is_("role", "assistant"), empty("tool_calls"), *_CHAT,
               label="an assistant message without tool calls",
               example={"role": "assistant", "content": [{"type": "text", "text": "FINAL-ANSWER"}]})
_CALLS = shape("", is_("role", "assistant"), filled("tool_calls"), *_CHAT, label="an assistant message with tool calls",
               example={"role": "assistant", "content": "Let me run it.", "tool_calls": [
                   {"type": "function", "id": "Shell:0", "function": {"name": "Shell", "arguments": "{}"}}]})
_TOOL = shape("", is_("role", "tool"), *_CHAT, label="a tool message",
              example={"role": "tool", "content": "hello", "tool_call_id": "Shell:0"})

#: ``kimi --print -p PROMPT --output-format stream-json``: untyped chat messages, no session, model or usage; the
#: run is over at the last assistant message without tool calls.
GRAMMAR = Grammar(
    name="kimi",
    vocabulary=(
        _FINAL, _CALLS, _TOOL,
        shape("", is_("role", "user"), *_CHAT, label="a user message",
              example={"role": "user", "content": "Run echo hello."}),
        # its meta lines are typed: the resume hint is read for the session id, the version line skipped
        shape("session.resume_hint", is_("role", "meta"), own=True,
              example={"role": "meta", "type": "session.resume_hint", "session_id": "s-1"}),
        shape("system.version", is_("role", "meta"), read=SKIP, own=True,
              example={"role": "meta", "type": "system.version", "version": "0.38.0"}),
    ),
    turns=(_CALLS, _TOOL),
    terminal=(_FINAL,),
    # untyped: a dropped line after the last decoded message may have been the answer (see answer_from)
    answer=(_FINAL,),
    typed=False,
    says_answer="that message's text parts (none when it has none: never an earlier message's)",
)


def _text(content: Any) -> tuple[str | None, tuple[str, Any] | None]:
    """A message's text (``None``: it has no text part), and what in it is no text (field, value), if anything."""
    if isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        return None, ("content", content)
    parts: list[str] = []
    for i, p in enumerate(content):
        if isinstance(p, dict) and p.get("type") == "text":
            text = p.get("text", MISSING)
            if not isinstance(text, str):
                return None, (f"content[{i}].text", text)
            parts.append(text)
    return ("".join(parts) if parts else None), None


def _arguments(args: Any) -> Any:
    """A call's arguments: OpenAI-style calls carry them as a JSON string (a kept, bounded line)."""
    if isinstance(args, str):
        try:
            return orjson.loads(args)
        except orjson.JSONDecodeError:
            return args
    return args


class KimiProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    final_text: str | None = None
    last_text: str | None = None
    #: Why the turn was blocked (a known trap), if it was.
    blocked: str | None = None

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        if t == "session.resume_hint":
            # after the answer, not a message: a line dropped before it still loses the answer
            self.take_session(d.get("session_id"), n, t, live)
            return live
        role = d.get("role")
        # Lines are untyped: only a dropped line after the last decoded one may have been the answer.
        self.answer_from = n + 1
        if role == "assistant":
            calls = d.get("tool_calls")
            calls = calls if isinstance(calls, list) else []
            text, bad = _text(d.get("content", MISSING))
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
                    args = fn.get("arguments") if isinstance(fn, dict) else None
                    live.append(self.tool_start(n, t, call.get("id"), name if isinstance(name, str) else None,
                                                _peek.title_of(_arguments(args))))
            sprung = None if calls else traps.check(self.name, t, d)
            if sprung is not None:
                # a known trap: a blocked hook's output written as the last assistant message, no answer
                self.blocked = sprung.error
                self.final_text = self.last_text = None
                live.append(LiveEvent("error", n, t, {"message": sprung.error}))
                live.append(LiveEvent("result", n, t, {"ok": False}))
            elif not calls:
                self.final_text = text
                if bad is not None:  # the answer's line, decoded, with no text in it: lost, as a dropped one is
                    live.append(self.textless(ev, *bad))
                    self.answer_from = n
                live.append(LiveEvent("result", n, t, {"ok": bad is None}))
        elif role == "tool":
            content = d.get("content")
            live.extend(self.tool_end(n, t, d.get("tool_call_id"), size=ev.size,
                                      output=str(content) if self.tool_output and content is not None else None))
        return live

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        # An untyped line may be a tool's output or the answer: no warning here; the verdict
        # says the answer was lost when no decoded message follows it.
        self.remember_lost(rec)
        return [LiveEvent("dropped", rec.line, rec.type, rec.as_dict())]

    def answer(self) -> Answer:
        text = self.final_text if self.ended_at is not None else None
        extra: list[str] = []
        # cut short before its last message: what it said last is all there is (the verdict says it is not done);
        # a last message with no text has none, and no earlier message stands in for it
        if text is None and self.ended_at is None and self.last_text is not None:
            text = self.last_text
            extra.append("the text is taken from the last assistant message")
        return self.found(text, error=self.blocked, warnings=self.notes.as_list() + extra)
