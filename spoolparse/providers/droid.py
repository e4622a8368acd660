"""Factory Droid ``droid exec --output-format stream-json PROMPT``.

Facts (Factory's Droid Exec docs; BloopAI/vibe-kanban's typed reader of this
stream): ``system`` (``subtype: "init"``, ``session_id``, ``cwd``, ``tools``,
``model``) first; ``message`` lines (``role`` user/assistant, ``id``,
``text``, ``timestamp`` in epoch ms, ``session_id``); ``tool_call``
(``toolId``, ``toolName``, ``parameters``, ``messageId``); ``tool_result``
(``toolId``, ``isError``, ``value`` or ``error``: the big lines, never
decoded); ``error`` (``source``, ``message``); a terminal ``completion``
(``finalText``, ``numTurns``, ``durationMs``, ``session_id``) which, as the real
CLI (0.225.2) prints it, carries ``usage`` in Anthropic's counting
(``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``, plus ``factory_credits`` and ``ttft_ms``).
"""

from __future__ import annotations

from typing import ClassVar

from .._decode.records import Dropped, Event, Noted
from . import _peek
from .base import Answer, LiveEvent, Provider, clip, message_of
from .claude import FAMILY, normalize_claude_usage
from .grammar import NOTE, Grammar, has, kind, lacks, shape

__all__ = ["DroidProvider", "GRAMMAR"]

_S = "b7f0b4a2-2c1e-4a8e-9c55-3d9f1f0e6a11"
_INIT = FAMILY[0]  # Claude Code's system/init, field for field: nothing in it tells the two apart
_COMPLETION = shape("completion", has("finalText"), own=True,
                    example={"type": "completion", "finalText": "FINAL-ANSWER", "numTurns": 1, "durationMs": 10,
                             "session_id": _S})

_END = shape("completion")

#: ``droid exec --output-format stream-json PROMPT``: its init is Claude Code's (with or without a model, tools,
#: permission mode, MCP servers or key source), so its own messages, tool calls and completion tell it.
GRAMMAR = Grammar(
    name="droid",
    vocabulary=(
        _INIT,
        shape("message", kind("text", "string"), has("role"), lacks("content"), own=True,
              example={"type": "message", "role": "assistant", "id": "m-2", "text": "FINAL-ANSWER",
                       "timestamp": 1763704800500, "session_id": _S}),
        shape("tool_call", has("toolName"), own=True,
              example={"type": "tool_call", "id": "call_1", "messageId": "m-2", "toolId": "toolu_01",
                       "toolName": "Execute", "parameters": {"command": "echo hello"}, "session_id": _S}),
        shape("tool_result", has("toolId"), read=NOTE, own=True,
              example={"type": "tool_result", "id": "call_1", "toolId": "toolu_01", "isError": False,
                       "value": "hello", "session_id": _S}),
        shape("error", has("message"), shared=("codex", "droid"),
              example={"type": "error", "source": "cli", "message": "Request failed with status code 500",
                       "timestamp": 1763704801000}),
        _COMPLETION,
    ),
    starts=(_INIT,),
    terminal=(_END,),
    final=(_END,),
    answer=(_END,),
    says_answer="`completion.finalText`, else the last assistant `message`, with a warning",
)


class DroidProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    last_text: str | None = None
    said_from: int = 0  # where a message that may stand in for an empty completion can begin
    final_text: str | None = None
    completed: bool = False
    error: str | None = None

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        self.take_session(d.get("session_id"), n, t, live, self.model)
        if t == "system":
            model = d.get("model")
            if isinstance(model, str) and model:
                self.model = model
                live.append(LiveEvent("session", n, t, {"session_id": self.session_id, "model": model}))
        elif t == "message":
            text = d.get("text")
            if d.get("role") == "assistant" and isinstance(text, str):
                if len(text) > self.max_text:
                    text = text[: self.max_text]
                    self.warn(f"assistant text at line {n} cut to {self.max_text} characters")
                self.last_text = text
                self.said_from = n + 1
                live.append(LiveEvent("text", n, t, {"text": text}))
        elif t == "tool_call":
            self.last_text = None  # the message it belongs to goes on after the tool: its text is no answer
            self.said_from = n + 1
            name = d.get("toolName")
            live.append(self.tool_start(n, t, d.get("toolId"), name if isinstance(name, str) else None,
                                        _peek.title_of(d.get("parameters"))))
        elif t == "error":
            msg = message_of(d.get("message")) or message_of(d) or "error"
            self.error = clip(msg)
            live.append(LiveEvent("error", n, t, {"message": self.error}))
        elif t == "completion":
            self.completed = True
            self.answer_from = n
            text = d.get("finalText")
            if isinstance(text, str):
                self.final_text = text[: self.max_text]
                if len(text) > self.max_text:
                    self.warn(f"the answer text passed {self.max_text} characters and was cut")
                live.append(LiveEvent("text", n, t, {"text": self.final_text}))
            usage = d.get("usage")
            if isinstance(usage, dict):
                self.raw_usage = usage
            live.append(LiveEvent("result", n, t, {"ok": True, "turns": d.get("numTurns")}))
        return live

    def lost_answer(self) -> Dropped | None:
        r = super().lost_answer()
        if r is None and self.completed and not self.final_text:
            # the answer is then the last assistant message's: one after it that could not be read may have been it
            m = self.last_lost("message")
            r = m if m is not None and m.line >= self.said_from else None
        return r

    def noted(self, rec: Noted) -> list[LiveEvent]:
        if rec.type == "tool_result":
            err = _peek.scalar(rec.head, "isError")
            return self.tool_end(rec.lineno, rec.type, _peek.string(rec.head, "toolId"),
                                 ok=None if not isinstance(err, bool) else not err, size=rec.size,
                                 output=_peek.string(rec.head, "value") if self.tool_output else None)
        return []

    def answer(self) -> Answer:
        text, extra = self.final_or_last(
            self.final_text, self.last_text, ended=self.completed, end="completion", lost_in=("completion", "message")
        )
        # An error the run recovered from (a completion followed) is a warning, not the outcome;
        # a stream that ends without a completion is judged by the verdict ("stream ended before completion").
        error = None if self.completed else self.error
        warnings = self.notes.as_list()
        if self.completed and self.error is not None:
            warnings.append(f"error before completion: {self.error}")
        return self.found(text, usage=normalize_claude_usage(self.raw_usage), error=error, warnings=warnings + extra)
