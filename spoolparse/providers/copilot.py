"""GitHub Copilot CLI ``copilot -p PROMPT --output-format json --allow-all-tools``.

Facts (published reports of the stream, not the closed-source CLI itself:
github/copilot-cli#4107, harbor-framework/harbor#1985, the session-event log
the CLI also writes): JSON lines of Copilot's session events, namespaced
``type`` values with the payload in ``data`` — ``user.message``,
``assistant.turn_start``, ``assistant.message`` (``data.content``,
``data.toolRequests``, ``data.outputTokens``), ``assistant.message_delta``,
``tool.execution_start`` (``data.toolCallId``, ``data.toolName``),
``tool.execution_complete`` (the tool's result: the big lines, never
decoded), ``assistant.turn_end``, ``session.*`` — and a terminal ``result``
carrying ``sessionId``, ``exitCode`` and ``usage`` with only
``premiumRequests``, ``totalApiDurationMs``, ``sessionDurationMs`` and
``codeChanges`` (no prompt tokens).

Copilot CLI 1.0.8x–1.0.9x add (published runs and readers of them): the model
that answered on each ``assistant.message`` (``data.model``; ``session.start``
names the one selected, which may be ``auto``), and ``session.usage_checkpoint``
lines whose ``data`` holds the session's running billing totals —
``totalPremiumRequests``, ``totalNanoAiu`` (AI credits × 10⁹),
``totalApiDurationMs`` — beside prompt-cache diagnostics, and no token counts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._decode.records import Event, Noted
from . import _peek
from .base import Answer, LiveEvent, Provider, as_int, clip, fresh, message_of
from .grammar import NOTE, SKIP, Grammar, has, kind, shape

__all__ = ["CopilotProvider", "GRAMMAR"]

_DATA = kind("data", "object")  # every session event carries its payload in ``data``
_START = shape("session.start", _DATA,
               example={"type": "session.start", "id": "e-0", "data": {"sessionId": "s", "selectedModel": "gpt-5"}})
_MESSAGE = shape("assistant.message", _DATA,
                 example={"type": "assistant.message", "id": "e-6",
                          "data": {"messageId": "m-2", "content": "FINAL-ANSWER", "toolRequests": []}})
_RESULT = shape("result", has("sessionId"), own=True,
                example={"type": "result", "sessionId": "s", "exitCode": 0, "usage": {"premiumRequests": 1}})

_END = shape("result")  # the CLI prints nothing after it

#: ``copilot -p PROMPT --output-format json``: namespaced session events with their payload in ``data``, then a
#: ``result``.
GRAMMAR = Grammar(
    name="copilot",
    vocabulary=(
        _START, _MESSAGE, _RESULT,
        shape("tool.execution_start", _DATA,
              example={"type": "tool.execution_start", "data": {"toolCallId": "c1", "toolName": "bash"}}),
        shape("session.error", _DATA, example={"type": "session.error", "data": {"message": "quota exceeded"}}),
        shape("session.usage_checkpoint", _DATA,
              example={"type": "session.usage_checkpoint", "data": {"totalPremiumRequests": 1}}),
        shape("tool.execution_complete", read=NOTE,
              example={"type": "tool.execution_complete", "data": {"toolCallId": "c1", "success": True}}),
        *(shape(k, read=SKIP) for k in (
            "user.message", "assistant.turn_start", "assistant.turn_end", "assistant.message_delta",
            "assistant.reasoning", "assistant.reasoning_delta", "tool.execution_partial_result", "session.info",
            "session.shutdown")),
    ),
    starts=(_START,),
    terminal=(_END,),
    final=(_END,),
    answer=(shape("assistant.message"),),
    says_answer="the last non-empty `assistant.message` `data.content` that requested no tools",
)


class CopilotProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    text: str | None = None
    output_tokens: int = 0
    counted: bool = False
    raw: dict[str, Any] = fresh(dict)
    #: The last ``session.usage_checkpoint``'s totals (cumulative: each replaces the one before).
    checkpoint: dict[str, Any] = fresh(dict)
    result_seen: bool = False
    exit_code: int | None = None
    error: str | None = None

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        data = d.get("data")
        data = data if isinstance(data, dict) else {}
        if t == "assistant.message":
            model = data.get("model")
            if isinstance(model, str) and model and model != self.model:
                # the model that answered (session.start names the one selected, "auto" among them)
                self.model = model
                live.append(LiveEvent("session", n, t, {"session_id": self.session_id, "model": model}))
            content = data.get("content")
            requests = data.get("toolRequests")
            calls = isinstance(requests, list) and bool(requests)
            if calls:
                self.text = None  # it goes on after its tools: what it said is no answer
            if isinstance(content, str) and content:
                text = content[: self.max_text]
                if len(content) > self.max_text:
                    self.warn(f"assistant text at line {n} cut to {self.max_text} characters")
                if not calls:
                    self.answer_from = n
                    self.text = text
                live.append(LiveEvent("text", n, t, {"text": text}))
            tokens = as_int(data.get("outputTokens"))
            if tokens is not None:
                self.output_tokens += tokens
                self.counted = True
                live.append(LiveEvent("usage", n, t, {"usage": {"output_tokens": self.output_tokens}}))
        elif t == "tool.execution_start":
            name = data.get("toolName")
            live.append(self.tool_start(n, t, data.get("toolCallId"), name if isinstance(name, str) else None,
                                        _peek.title_of(data.get("arguments"))))
        elif t == "session.start":
            model = data.get("selectedModel") or data.get("model")
            if isinstance(model, str) and model and self.model is None:
                self.model = model
            self.take_session(data.get("sessionId"), n, t, live, self.model)
        elif t == "session.usage_checkpoint":
            # billing totals only (premium requests, nano-AIU, API time): kept whole in raw_usage, no tokens
            self.checkpoint = {k: v for k, v in data.items()
                               if isinstance(v, (int, float)) and not isinstance(v, bool)}
        elif t == "session.error":
            self.error = clip(message_of(data) or "session error")
            live.append(LiveEvent("error", n, t, {"message": self.error}))
        elif t == "result":
            self.result_seen = True
            self.take_session(d.get("sessionId"), n, t, live, self.model)
            usage = d.get("usage")
            if isinstance(usage, dict):
                self.raw = dict(usage)
            self.exit_code = as_int(d.get("exitCode"))
            failed = self.exit_code not in (None, 0) or self.error is not None
            if failed and self.error is None:
                self.error = f"copilot reported exit code {self.exit_code}"
                live.append(LiveEvent("error", n, t, {"message": self.error}))
            live.append(LiveEvent("result", n, t, {"ok": not failed, "exit_code": self.exit_code}))
        return live

    def noted(self, rec: Noted) -> list[LiveEvent]:
        if rec.type == "tool.execution_complete":
            ok = _peek.scalar(rec.head, "success")
            return self.tool_end(rec.lineno, rec.type, _peek.string(rec.head, "toolCallId"),
                                 ok=ok if isinstance(ok, bool) else None, size=rec.size,
                                 output=_peek.string(rec.head, "content") if self.tool_output else None)
        return []

    def answer(self) -> Answer:
        usage: dict[str, Any] = {"output_tokens": self.output_tokens} if self.counted else {}
        raw: dict[str, Any] | None = dict(self.raw) if self.raw else None
        if self.counted:
            raw = {**(raw or {}), "outputTokens": self.output_tokens}
        if self.checkpoint:
            raw = {**(raw or {}), "usage_checkpoint": dict(self.checkpoint)}
        return self.found(self.text, usage=usage, raw_usage=raw, error=self.error)
