"""OpenAI Codex ``codex exec --json`` (thread/turn/item), and its older shapes.

Facts: ``thread.started`` carries the session id; the answer is the last
``item.completed`` whose item is an ``agent_message``; usage is the last
``turn.completed.usage`` (cumulative over the turn); ``turn.failed`` is the
terminal error; ``item.completed`` items of type ``error`` are warnings
(model metadata, reroutes, deprecations). Older shapes: the
pre-2025-10 envelope ``{"id", "msg": {"type"}}``, the experimental
``session.created``/``item_type`` events, and ``result``/``session.end``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._decode.records import Event, Noted
from .._regex import regex
from . import _peek
from .base import MISSING, Answer, LiveEvent, Provider, as_int, fresh, message_of
from .grammar import NOTE, SKIP, Grammar, any_of, has, lacks, shape

__all__ = ["CodexProvider", "normalize_codex_usage", "GRAMMAR"]

_ITEM_KINDS = ("command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call")
_RECONNECT = regex(r"(\d+)\s*/\s*(\d+)")
_USAGE_KEYS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "cache_write_input_tokens",
    "total_tokens",
)


def normalize_codex_usage(raw: Any) -> dict[str, Any]:
    """Codex already uses the normalized names; keep every integer it gives."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        n = as_int(value)
        if n is not None:
            out[key] = n
    return out


def _tool_name(kind: str, item: dict[str, Any]) -> str:
    """``server.tool`` for an MCP call, the tool of a collab call, else the item type."""
    server, tool = item.get("server"), item.get("tool")
    if isinstance(server, str) and isinstance(tool, str):
        return f"{server}.{tool}"
    return tool if isinstance(tool, str) else kind


def _retry_or(message: str, n: int, t: str) -> LiveEvent:
    """``Reconnecting... 2/5 (…)`` is Codex retrying its stream, not (yet) an error."""
    if message.startswith("Reconnecting"):
        m = _RECONNECT.search(message)
        attempt, most = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        return LiveEvent("retry", n, t, {"message": message, "attempt": attempt, "max_attempts": most})
    return LiveEvent("error", n, t, {"message": message})


_THREAD = shape("thread.started", example={"type": "thread.started", "thread_id": "t-1"})
_SESSION = shape("session.created", example={"type": "session.created", "session_id": "s-1"})
_CONFIGURED = shape("msg/session_configured", label="the envelope's session_configured",
                    example={"id": "0", "msg": {"type": "session_configured", "session_id": "s-1"}})
_TURN = shape("turn.started", example={"type": "turn.started"})
_DONE = shape("turn.completed", example={"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
_FAILED = shape("turn.failed", example={"type": "turn.failed", "error": {"message": "model overloaded"}})
_MESSAGE = shape("item.completed/agent_message", label="agent_message item",
                 example={"type": "item.completed", "item": {"id": "item_1", "type": "agent_message",
                                                             "text": "FINAL-ANSWER"}})
_ASSISTANT = shape("item.completed/assistant_message", label="assistant_message item (experimental JSON)",
                   example={"type": "item.completed", "item": {"id": "item_1", "item_type": "assistant_message",
                                                               "text": "FINAL-ANSWER"}})
_ENVELOPE_MESSAGE = shape("msg/agent_message", label="the envelope's agent_message",
                          example={"id": "1", "msg": {"type": "agent_message", "message": "FINAL-ANSWER"}})
# The older shapes' ``result``: a claude result has a ``subtype`` or its cost, but one with neither is either's
_RESULT = shape("result", any_of("result", "text"), lacks("subtype", "total_cost_usd"),
                shared=("codex", "claude", "qwen", "amp", "cursor"),
                example={"type": "result", "result": "FINAL-ANSWER", "session_id": "s-1"})
_END = shape("session.end", example={"type": "session.end", "usage": {"input_tokens": 1}})
_COMPLETE = shape("msg/task_complete", label="the envelope's task_complete",
                  example={"id": "2", "msg": {"type": "task_complete", "last_agent_message": "FINAL-ANSWER"}})

#: ``codex exec --json`` (thread/turn/item), the experimental ``item_type`` events and the pre-2025-10 envelope.
GRAMMAR = Grammar(
    name="codex",
    vocabulary=(
        _THREAD, _SESSION, _CONFIGURED, _TURN, _DONE, _FAILED, _MESSAGE, _ASSISTANT, _ENVELOPE_MESSAGE, _RESULT,
        _END, _COMPLETE,
        shape("error", has("message"), shared=("codex", "droid"),
              example={"type": "error", "message": "Reconnecting... 1/5"}),
        shape("item.completed/error", label="error item (a warning)",
              example={"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "note"}}),
        shape("item.completed/plan", example={"type": "item.completed", "item": {"id": "item_2", "type": "plan",
                                                                                 "text": "1. do it"}}),
        *(shape(f"msg/{k}", label=f"the envelope's {k}")
          for k in ("token_count", "error", "stream_error", "exec_command_begin")),
        *(shape(f"{a}/{k}", read=NOTE) for a in ("item.started", "item.completed") for k in _ITEM_KINDS),
        *(shape(k, read=NOTE) for k in ("msg/exec_command_end", "item.completed/reasoning", "msg/agent_reasoning")),
        *(shape(k, read=SKIP) for k in (
            "item.completed/todo_list", "item.started/todo_list", "item.updated/todo_list",
            "item.updated/command_execution", "item.updated/mcp_tool_call", "item.plan.delta", "request_user_input",
            "msg/exec_command_output_delta", "msg/agent_message_delta", "msg/agent_reasoning_delta",
            "msg/task_started")),
    ),
    starts=(_THREAD, _SESSION, _CONFIGURED),
    turns=(_TURN,),
    # ``codex exec`` ends its turn with turn.completed/turn.failed; the older shapes with result/session.end, the
    # envelope with task_complete (when printed)
    terminal=(_DONE, _FAILED, _RESULT, _END, _COMPLETE),
    answer=(_MESSAGE, _ASSISTANT, _ENVELOPE_MESSAGE, _RESULT),
    says_answer="the last `agent_message` item's `text` (else the last `plan` item's)",
)


class CodexProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    text: str | None = None
    plan_text: str | None = None
    usage: dict[str, Any] = fresh(dict)
    failed: str | None = None
    last_error: str | None = None
    result_seen: bool = False

    def new_turn(self, line: int) -> None:
        self.text = self.plan_text = self.failed = self.last_error = None

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        model = d.get("model")
        if isinstance(model, str) and model:
            self.model = model
        if t == "thread.started" or t == "session.created":
            sid = d.get("thread_id", d.get("session_id"))
            if isinstance(sid, str):
                self.session_id = sid
                live.append(LiveEvent("session", n, t, {"session_id": sid}))
        elif t.startswith("item.completed/"):
            item = d.get("item")
            item = item if isinstance(item, dict) else {}
            kind = t.partition("/")[2]
            if kind in ("agent_message", "assistant_message"):
                self._answer(ev, "item.text", item.get("text", MISSING), live)
            elif kind == "plan":
                text = item.get("text")
                if isinstance(text, str):
                    self.plan_text = text
            elif kind == "error":
                msg = message_of(item) or "error item"
                live.append(LiveEvent("warning", n, t, {"message": self.warn(msg)}))
        elif t == "turn.started":
            live.append(LiveEvent("turn_start", n, t, {}))
        elif t == "turn.completed":
            self._usage(d.get("usage"), n, t, live)
            if self.last_error is not None:
                # A transient stream error the turn recovered from is a warning, not the outcome.
                self.warn(self.last_error)
                self.last_error = None
            live.append(LiveEvent("turn_end", n, t, {"ok": True}))
        elif t == "turn.failed":
            self.failed = message_of(d.get("error")) or "turn failed"
            live.append(LiveEvent("error", n, t, {"message": self.failed}))
            live.append(LiveEvent("turn_end", n, t, {"ok": False}))
        elif t == "error":
            self.last_error = message_of(d) or "error"
            live.append(_retry_or(self.last_error, n, t))
        elif t == "result":
            if not self.result_seen:
                self.result_seen = True
                text = d.get("result", d.get("text"))
                if isinstance(text, str):
                    self._answer(ev, "result", text, live)
                self._usage(d.get("usage"), n, t, live)
                sid = d.get("session_id")
                if isinstance(sid, str):
                    self.session_id = sid
                if d.get("is_error") is True:
                    self.failed = message_of(d.get("error")) or (text if isinstance(text, str) else "error")
        elif t == "session.end":
            self._usage(d.get("usage"), n, t, live)
        elif t.startswith("msg/"):
            self._legacy(t[4:], ev, live)
        return live

    def _answer(self, ev: Event, field: str, text: Any, live: list[LiveEvent]) -> None:
        """An answer line's text (``field``): the answer from here on, with a ``text`` event; a missing or
        non-string one loses the answer (:meth:`~spoolparse.providers.base.Provider.textless`)."""
        if isinstance(text, str):
            self.text = text
            self.answer_from = ev.lineno
            live.append(LiveEvent("text", ev.lineno, ev.type, {"text": text}))
        else:
            live.append(self.textless(ev, field, text))

    def _legacy(self, kind: str, ev: Event, live: list[LiveEvent]) -> None:
        d, t, n = ev.data, ev.type, ev.lineno
        msg = d.get("msg")
        msg = msg if isinstance(msg, dict) else {}
        model = msg.get("model")
        if isinstance(model, str) and model:
            self.model = model
        if kind == "agent_message":
            self._answer(ev, "msg.message", msg.get("message", MISSING), live)
        elif kind == "task_complete":
            text = msg.get("last_agent_message")
            if isinstance(text, str) and self.text is None:
                self.text = text
        elif kind == "token_count":
            info = msg.get("info")
            raw = info.get("total_token_usage") if isinstance(info, dict) else msg
            self._usage(raw, n, t, live)
        elif kind == "session_configured":
            sid = msg.get("session_id")
            if isinstance(sid, str):
                self.session_id = sid
                live.append(LiveEvent("session", n, t, {"session_id": sid, "model": self.model}))
        elif kind == "error":
            self.last_error = message_of(msg) or "error"
            live.append(_retry_or(self.last_error, n, t))
        elif kind == "stream_error":
            text = self.warn(message_of(msg) or "stream error")
            live.append(LiveEvent("retry", n, t, {"message": text}))
        elif kind == "exec_command_begin":
            cid = msg.get("call_id")
            live.append(self.tool_start(n, t, cid if isinstance(cid, str) else None, "shell",
                                        _peek.title_of({"command": msg.get("command")})))

    def noted(self, rec: Noted) -> list[LiveEvent]:
        """Tool starts and ends, and reasoning, from the line's bounded head and tail."""
        t, n, head = rec.type, rec.lineno, rec.head
        action, _, kind = t.partition("/")
        if kind in ("reasoning", "agent_reasoning"):
            obj = _peek.whole(rec)
            if obj is not None:
                inner = obj.get("item") if action != "msg" else obj.get("msg")
                text = inner.get("text") if isinstance(inner, dict) else None
            else:
                text = _peek.string(head, "text")
            return [LiveEvent("thinking", n, t, {"text": text, "delta": False})] if isinstance(text, str) else []
        if action == "msg":  # exec_command_end
            cid = _peek.string(head, "call_id")
            code = _peek.scalar(rec.tail, "exit_code")
            code = code if type(code) is int else None
            out = _peek.string(head, "aggregated_output") if self.tool_output else None
            return self.tool_end(n, t, cid, ok=None if code is None else code == 0, exit_code=code,
                                 size=rec.size, output=out)
        obj = _peek.whole(rec)
        item = obj.get("item") if obj is not None else None
        if isinstance(item, dict):
            cid, name, title = item.get("id"), _tool_name(kind, item), _peek.title_of(item)
            status, code = item.get("status"), item.get("exit_code")
            output = item.get("aggregated_output")
        else:
            cid = _peek.string(head, "id")
            server, tool = _peek.string(head, "server"), _peek.string(head, "tool")
            name = f"{server}.{tool}" if server and tool else tool or kind
            title = _peek.title_in(head)
            status = _peek.string(rec.tail, "status", last=True)
            code = _peek.scalar(rec.tail, "exit_code")
            output = _peek.string(head, "aggregated_output") if self.tool_output else None
        cid = cid if isinstance(cid, str) else None
        if action == "item.started":
            return [self.tool_start(n, t, cid, name, title)]
        code = code if type(code) is int else None
        ok = None if status is None and code is None else status not in ("failed", "declined") and code in (0, None)
        return self.tool_end(n, t, cid, name=name, title=title, ok=ok, exit_code=code, size=rec.size,
                             output=output if isinstance(output, str) else None)

    def _usage(self, raw: Any, n: int, t: str, live: list[LiveEvent]) -> None:
        usage = normalize_codex_usage(raw)
        if usage:
            self.raw_usage = raw
            self.usage = usage
            live.append(LiveEvent("usage", n, t, {"usage": usage}))

    def answer(self) -> Answer:
        text = self.text if self.text is not None else self.plan_text
        error = self.failed if self.failed is not None else self.last_error
        return self.found(text, usage=dict(self.usage), error=error)
