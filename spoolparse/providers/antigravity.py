"""Google Antigravity CLI ``agy -p PROMPT --output-format stream-json``.

Facts (from published integrations that read it: a test double of ``agy``
1.2.x written to mirror the real stream, and two readers of it; no source of
the CLI itself is public): every line is ``{"event": E, E: {…}}`` with no
``type`` key —

* ``init``: ``conversation_id`` (the session), ``init`` with ``model``, ``cwd``,
  ``agent``, ``tools``, ``permission_mode``;
* ``step_update``: ``step_update`` with ``conversation_id``, ``step_index``,
  ``state`` (``ACTIVE`` while a step runs, ``DONE``), ``step_type`` from a closed
  set (``user_input`` echoes the prompt, ``system_message``, ``agent_response``
  with ``text_delta``/``thinking_delta`` fragments, ``tool`` with ``tool_name``
  and ``tool_info``, ``checkpoint`` …), per-step ``usage``; the ``DONE`` update of
  an answer names only its step and carries the last fragment (some builds
  repeat the whole text there);
* ``result`` (terminal): ``status`` (``SUCCESS``, else the failure),
  ``response`` (the whole answer; empty after a turn that ended in tools),
  ``usage`` (``input_tokens``, ``output_tokens``, ``thinking_tokens``,
  ``cache_read_tokens``, ``total_tokens``), ``duration_seconds``, ``error``;
* ``error``: ``error`` (a string or ``{message}``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._decode.records import Dropped, Event
from . import _peek, traps
from ._text import BoundedText
from .base import Answer, LiveEvent, Provider, as_int, fresh, message_of, usage_of
from .grammar import Grammar, any_of, is_, kind, lacks, shape

__all__ = ["AntigravityProvider", "GRAMMAR", "normalize_antigravity_usage"]

_C = "9b2f6c1e-4d7a-4c3e-8f21-5a0d3e7b9c44"
_UNTYPED = lacks("type")
_INIT = shape("", is_("event", "init"), any_of("init", "conversation_id"), _UNTYPED, label="{event: init}",
              example={"event": "init", "conversation_id": _C, "init": {"model": "gemini-3.1-pro-high"}})
_RESULT = shape("", is_("event", "result"), kind("result", "object"), _UNTYPED, label="{event: result}",
                example={"event": "result", "result": {"conversation_id": _C, "status": "SUCCESS",
                                                       "response": "FINAL-ANSWER"}})

_END = shape("", is_("event", "result"), label="result")

#: ``agy -p PROMPT --output-format stream-json``: untyped ``{"event": E, E: {…}}`` lines.
GRAMMAR = Grammar(
    name="antigravity",
    vocabulary=(
        _INIT,
        shape("", is_("event", "step_update"), kind("step_update", "object"), _UNTYPED, label="{event: step_update}",
              example={"event": "step_update", "step_update": {"conversation_id": _C, "step_index": 2,
                                                                "state": "ACTIVE", "step_type": "agent_response",
                                                                "text_delta": "FINAL-"}}),
        _RESULT,
        shape("", is_("event", "error"), _UNTYPED, label="{event: error}",
              example={"event": "error", "error": {"message": "500 Internal Server Error"}}),
    ),
    starts=(_INIT,),
    terminal=(_END,),
    final=(_END,),
    # untyped: a line dropped after the last decoded one may have been the result (see answer_from)
    answer=(_END,),
    typed=False,
    says_answer="`result.response`; when it is empty, the fragments of the last `agent_response` step after the "
                "last tool step, with a warning",
    says_no_answer="the result's `error` where it gives one",
)
#: Its tools' argument names for what a call is about (``run_command``'s ``CommandLine``, ``view_file``'s …).
_TITLE_KEYS = ("CommandLine", "AbsolutePath", "TargetFile", "Query", "Url")


def _title(params: Any) -> str | None:
    title = _peek.title_of(params)
    if title is None and isinstance(params, dict):
        for key in _TITLE_KEYS:
            value = params.get(key)
            if isinstance(value, str) and value:
                return _peek.short(value)
    return title


def normalize_antigravity_usage(raw: Any) -> dict[str, Any]:
    """Antigravity usage → normalized names.

    Its four counts are apart: ``total_tokens`` = ``input_tokens`` +
    ``cache_read_tokens`` + ``output_tokens`` + ``thinking_tokens``. So the
    normalized ``input_tokens`` adds the cache reads back (every prompt token),
    ``output_tokens`` the thinking (every generated one), and
    ``cache_read_tokens`` → ``cached_input_tokens``, ``thinking_tokens`` →
    ``reasoning_output_tokens``.
    """
    if not isinstance(raw, dict):
        return {}
    return usage_of(fresh=as_int(raw.get("input_tokens")), read=as_int(raw.get("cache_read_tokens")),
                    output=as_int(raw.get("output_tokens")), reasoning=as_int(raw.get("thinking_tokens")),
                    total=as_int(raw.get("total_tokens")))


class AntigravityProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    response: str | None = None
    status: str | None = None
    failure: str | None = None
    last_error: str | None = None  # the last error event: the failure when no result follows it
    said: str | None = None  # the result's error, even on a success
    step_usage: dict[str, int] = fresh(dict)  # summed per-step usage, for a result without any
    _step: Any = None  # the agent_response step being written
    _text: BoundedText = fresh(BoundedText)  # its fragments, up to max_text characters
    # a line dropped since the last tool step: when the result has no response, the answer is taken from
    # the step updates, and that line may have been one of them
    _dropped_since_tool: Dropped | None = None

    def _session(self, sid: Any, n: int, t: str) -> list[LiveEvent]:
        if isinstance(sid, str) and sid and self.session_id is None:
            self.session_id = sid
            return [LiveEvent("session", n, t, {"session_id": sid, "model": self.model})]
        return []

    def event(self, ev: Event) -> list[LiveEvent]:
        d, n, t = ev.data, ev.lineno, ev.type
        e = d.get("event")
        self.answer_from = n + 1
        live: list[LiveEvent] = []
        if e == "init":
            raw = d.get("init")
            init: dict[str, Any] = raw if isinstance(raw, dict) else {}
            model = init.get("model")
            if isinstance(model, str) and model:
                self.model = model
            live += self._session(d.get("conversation_id") or init.get("conversation_id"), n, t)
        elif e == "step_update":
            s = d.get("step_update")
            if isinstance(s, dict):
                live += self._step_update(s, n, t, ev.size)
        elif e == "result":
            r = d.get("result")
            r = r if isinstance(r, dict) else {}
            live += self._session(r.get("conversation_id"), n, t)
            status = r.get("status")
            self.status = status if isinstance(status, str) else None
            response = r.get("response")
            self.response = response if isinstance(response, str) and response else None
            self.said = message_of(r.get("error"))
            if "usage" in r:
                self.raw_usage = r.get("usage")
            sprung = traps.check(self.name, t, d)
            if self.status not in (None, "SUCCESS"):
                why = message_of(r.get("error")) or self.response or f"status {self.status}"
                self.failure = f"antigravity reported {self.status}: {why}"
                self.response = None  # a failure's text is no answer
            elif sprung is not None:  # a known trap: SUCCESS around the tool calls print mode denied
                self.failure = sprung.error
                self.response = None
            usage = normalize_antigravity_usage(self.raw_usage) or dict(self.step_usage)
            if usage:
                live.append(LiveEvent("usage", n, t, {"usage": usage}))
            live.append(LiveEvent("result", n, t, {"ok": self.failure is None}))
        elif e == "error":
            text = message_of(d.get("error")) or message_of(d) or "error"
            self.last_error = self.warn(f"error: {text}")
            live.append(LiveEvent("error", n, t, {"message": text}))
        return live

    def _step_update(self, s: dict[str, Any], n: int, t: str, size: int) -> list[LiveEvent]:
        live = self._session(s.get("conversation_id"), n, t)
        kind, state, index = s.get("step_type"), s.get("state"), s.get("step_index")
        usage = normalize_antigravity_usage(s.get("usage"))
        for k, v in usage.items():
            self.step_usage[k] = self.step_usage.get(k, 0) + v
        delta = s.get("text_delta")
        delta = delta if isinstance(delta, str) else ""
        if kind == "agent_response" or (kind is None and index is not None and index == self._step):
            if kind == "agent_response" and index != self._step:
                self._step = index  # a new answer step: the answer so far was an earlier message
                self._text.clear()
            thinking = s.get("thinking_delta")
            if isinstance(thinking, str) and thinking and self.live:
                live.append(LiveEvent("thinking", n, t, {"text": thinking, "delta": True}))
            # a DONE update may repeat the whole text (some builds): not added twice
            if delta and not (state == "DONE" and delta == self._text.text()):
                self._text.limit = self.max_text
                self._text.add(delta)
                if self.live:
                    live.append(LiveEvent("text_delta", n, t, {"text": delta}))
        elif kind in ("tool", "user_input"):
            self._dropped_since_tool = None
            # the agent goes on after it: the text of an answer step before it was no answer
            self._step = None
            self._text.clear()
        if kind == "tool":
            call = None if index is None else f"step-{index}"
            name = s.get("tool_name")
            info = s.get("tool_info")
            params = info.get("parameters", info) if isinstance(info, dict) else None
            name = name if isinstance(name, str) else None
            if state == "DONE":
                live.extend(self.tool_end(n, t, call, name=name, title=_title(params), size=size))
            else:
                live.append(self.tool_start(n, t, call, name, _title(params)))
        return live

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        # An untyped line may be a tool step or the result: no warning here; the verdict says the
        # answer was lost when no decoded event follows it. (A typed line is no line of its.)
        if self.remember_lost(rec):
            self._dropped_since_tool = rec
        return [LiveEvent("dropped", rec.line, rec.type, rec.as_dict())]

    def cut(self) -> str | None:
        if self.response is not None or self.failure is not None:
            return None  # the result's response is the whole answer (or there is none to lose)
        r = self._dropped_since_tool
        if r is not None:
            return (f"the result has no response and a line after the last tool step ({r.bytes} bytes at line "
                    f"{r.line}) was dropped ({r.reason}): the answer taken from the step updates may lack it")
        if self._text.cut:
            return f"the answer's text fragments passed max_retained ({self.max_text} characters) and were cut"
        return None

    def answer(self) -> Answer:
        warnings = self.notes.as_list()
        text = self.response
        if text is None and self.failure is None and self._text:
            text = self._text.text()
            warnings = [*warnings, "the text is taken from the answer's step updates (the result has no response)"]
        error = self.failure
        if error is None and self.ended_at is None:
            error = self.last_error  # an error event with no result after it is why the run failed
        usage = normalize_antigravity_usage(self.raw_usage) or dict(self.step_usage)
        return self.found(text, usage=usage, error=error, warnings=warnings, no_answer=self.said)
