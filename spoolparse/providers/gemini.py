"""Gemini CLI ``gemini -p … -o stream-json`` (and the ``-o json`` document).

Facts: every line is ``{type, timestamp, …}``; ``init`` has the session id and
model; the answer is the ``message`` events with role ``assistant`` (delta
chunks), joined in order; ``tool_result`` carries whole tool outputs (the big
lines, never decoded); ``error`` events (severity warning/error) are
non-fatal, except the two the CLI prints when it stops the agent and then
reports success (known traps, :mod:`spoolparse.providers.traps`); ``result`` has
``status``, ``error`` and ``stats`` (usage, with a per-model breakdown). A
failed run can exit 0 with ``result.status: "error"``. ``-o json`` prints one
object ``{session_id?, response, stats, error?, warnings?}`` whose
``stats.models.<name>.tokens`` has the usage.

.. seealso:: :mod:`spoolparse.providers.codex` for the shape every provider follows.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .._decode.records import Dropped, Event, Noted
from .._regex import regex
from . import _peek, traps
from ._text import BoundedText
from .base import MISSING, Answer, LiveEvent, Provider, as_int, clip, fresh, message_of, size_text, sum_usage
from .grammar import NOTE, Grammar, any_of, has, kind, shape

__all__ = ["GeminiProvider", "normalize_gemini_stats", "gemini_counts", "GRAMMAR"]


# Gemini reports retries on stderr; an ``error`` event that speaks of one is a retry, not a failure.
_RETRY = regex(r"\bretry|\bretrying|\battempt \d+", re.IGNORECASE)


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    n = as_int(value)
    if n is not None:
        out[key] = n


def gemini_counts(
    prompt: Any, candidates: Any, total: Any, cached: Any, thoughts: Any = None, tool: Any = None
) -> dict[str, Any]:
    """One model's (or the run's) counts → normalized names, the same rule for both formats.

    Gemini's ``total`` is ``prompt`` + ``tool`` (the tool-use prompt tokens,
    ``toolUsePromptTokenCount``) + ``candidates`` + ``thoughts``. ``-o json``
    reports the four apart: the normalized ``input_tokens`` is ``prompt + tool``,
    every prompt token. Stream-json has neither a ``tool`` nor a ``thoughts``
    count (its ``output_tokens`` are the candidates): its ``input_tokens`` is the
    prompt alone and the tool-use prompt tokens, which it cannot tell apart from
    thinking, fall into the output. So the normalized ``output_tokens`` is
    ``total - input_tokens`` when the total is known: every token past the
    prompt. ``reasoning_output_tokens`` is ``thoughts`` where reported.
    """
    out: dict[str, Any] = {}
    p, c, t, th, tl = as_int(prompt), as_int(candidates), as_int(total), as_int(thoughts), as_int(tool)
    if p is not None:
        p += tl or 0
        out["input_tokens"] = p
    if t is not None and p is not None and t >= p:
        out["output_tokens"] = t - p
    elif c is not None or th is not None:
        out["output_tokens"] = (c or 0) + (th or 0)
    _put(out, "cached_input_tokens", cached)
    if th is not None:
        out["reasoning_output_tokens"] = th
    _put(out, "total_tokens", total)
    return out


def gemini_usage_by_model(stats: Any) -> dict[str, dict[str, Any]] | None:
    """``stats.models`` of either format → ``{model: normalized usage}`` (``None`` when absent)."""
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict):
        return None
    out: dict[str, dict[str, Any]] = {}
    for name, per in models.items():
        if not isinstance(per, dict):
            continue
        tokens = per.get("tokens")
        if isinstance(tokens, dict):  # -o json: {prompt, candidates, total, cached, thoughts, tool}
            usage = gemini_counts(
                tokens.get("prompt"), tokens.get("candidates"), tokens.get("total"),
                tokens.get("cached"), tokens.get("thoughts"), tokens.get("tool"),
            )
        else:  # stream-json: {total_tokens, input_tokens, output_tokens, cached, input}
            usage = _stream_counts(per)
        if usage:
            out[str(name)] = usage
    return out or None


def normalize_gemini_stats(stats: Any) -> dict[str, Any]:
    """``result.stats`` (stream-json) or the ``-o json`` ``stats`` → normalized names.

    Where per-model counts exist the totals are their sums, so they agree with
    ``usage_by_model`` and between the two formats.
    """
    if not isinstance(stats, dict):
        return {}
    per = gemini_usage_by_model(stats)
    if per:
        return sum_usage(per)
    return _stream_counts(stats)


def _stream_counts(d: dict[str, Any]) -> dict[str, Any]:
    return gemini_counts(d.get("input_tokens"), d.get("output_tokens"), d.get("total_tokens"), d.get("cached"))


_T = "2026-11-21T06:00:00.000Z"
_INIT = shape("init", example={"type": "init", "timestamp": _T, "session_id": "g", "model": "auto"})
_RESULT = shape("result", has("status"), example={"type": "result", "timestamp": _T, "status": "success",
                                                  "stats": {"total_tokens": 3}})
_END = shape("result")  # the CLI prints nothing after it (a result without a status is one that says no success)

#: ``gemini -p … -o stream-json`` (and the ``-o json`` document).
GRAMMAR = Grammar(
    name="gemini",
    vocabulary=(
        _INIT,
        shape("message", kind("role", "string"), has("content"),
              example={"type": "message", "timestamp": _T, "role": "assistant", "content": "FINAL", "delta": True}),
        shape("error", has("severity", "message"), shared=("codex", "droid", "gemini"),
              example={"type": "error", "timestamp": _T, "severity": "warning", "message": "Loop detected"}),
        _RESULT,
        # tool_use is small but shares its name with opencode's bulky tool event: noted, as there
        shape("tool_use", has("tool_name"), read=NOTE, own=True,
              example={"type": "tool_use", "timestamp": _T, "tool_name": "run_shell_command", "tool_id": "t1",
                       "parameters": {"command": "echo hello"}}),
        shape("tool_result", has("tool_id"), read=NOTE, own=True,
              example={"type": "tool_result", "timestamp": _T, "tool_id": "t1", "status": "success",
                       "output": "hello"}),
    ),
    starts=(_INIT,),
    terminal=(_END,),
    final=(_END,),
    # the answer is every assistant delta joined: a dropped one anywhere loses a part of it
    answer=(shape("message"),),
    document=shape("", any_of("response", "error"), kind("stats", "object"), label="`-o json` document",
                   example={"session_id": "g", "response": "FINAL", "stats": {"models": {}}}),
    says_answer="every `assistant` `message` delta, joined (at most `max_retained` characters)",
    says_no_answer="the last `error` event's message (a warning, such as a loop detected) where there is one",
)


class GeminiProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    text: BoundedText = fresh(BoundedText)
    document_text: str | None = None
    usage: dict[str, Any] = fresh(dict)
    usage_by_model: dict[str, dict[str, Any]] | None = None
    document_cut: bool = False
    status: str | None = None
    result_seen: bool = False
    result_error: str | None = None
    last_error: str | None = None
    last_said: str | None = None  # the last error event, whatever its severity
    #: Why the CLI stopped the agent (a known trap), when it did: its success after that is no finished run.
    stopped: str | None = None
    # the assistant message streaming now, for its ``text`` event when a tool call or the result ends it
    message: BoundedText = fresh(BoundedText)

    def __init__(self, *, max_text: int | None = None) -> None:
        super().__init__()
        if max_text is not None:
            self.max_text = max_text

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        if t == "message":
            content = d.get("content", MISSING)
            if d.get("role") == "assistant" and not isinstance(content, str):
                live.append(self.textless(ev, "content", content))  # a part of the joined answer is not in hand
            elif d.get("role") == "assistant":
                self.join_text(self.text, content, n, t, live)
                if d.get("delta") is True:
                    if not self.live:
                        return live
                    self.message.limit = self.max_text
                    self.message.add(content)
                    live.append(LiveEvent("text_delta", n, t, {"text": content}))
                else:
                    live.append(LiveEvent("text", n, t, {"text": content}))
        elif t == "init":
            sid, model = d.get("session_id"), d.get("model")
            if isinstance(sid, str) and sid:
                self.session_id = sid
            if isinstance(model, str) and model:
                self.model = model
            live.append(LiveEvent("session", n, t, {"session_id": self.session_id, "model": self.model}))
            live.append(LiveEvent("turn_start", n, t, {}))
        elif t == "error":
            severity = d.get("severity")
            msg = message_of(d.get("message")) or "error"
            sprung = traps.check(self.name, t, d)
            if sprung is not None:
                # a known trap: the CLI stopped the agent, and the result it prints next says success
                self.stopped = sprung.error
            text = self.warn(f"{severity}: {msg}" if isinstance(severity, str) else msg)
            self.last_said = text
            if severity != "warning":
                self.last_error = clip(msg)
            retry = _RETRY.search(msg)
            if retry is not None:
                live.append(LiveEvent("retry", n, t, {"message": text}))
            else:
                live.append(LiveEvent("warning", n, t, {"message": text}))
        elif t == "result":
            self._end_message(n, t, live)
            self._result(d, n, t, live)
            # the turn ends, then the run's result (the last event)
            live.insert(len(live) - 1, LiveEvent("turn_end", n, t, {"ok": self.result_error is None}))
        elif t == "":
            self._document(d, n, t, live)
        return live

    def _usage(self, stats: Any, n: int, t: str, live: list[LiveEvent]) -> None:
        usage = normalize_gemini_stats(stats)
        if isinstance(stats, dict):
            self.raw_usage = stats
            self.usage = usage
            self.usage_by_model = gemini_usage_by_model(stats)
            live.append(LiveEvent("usage", n, t, {"usage": usage}))

    def _result(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        status = d.get("status")
        self.status = status if isinstance(status, str) else None
        self.result_seen = True
        self._usage(d.get("stats"), n, t, live)
        self.result_error = None
        if status == "error":
            self.result_error = clip(message_of(d.get("error")) or self.last_error or "error")
        elif status == "success" and self.stopped is not None:
            self.result_error = self.stopped
        elif status != "success":  # the CLI says success or error: anything else is no word that it finished
            self.result_error = (
                f"the result's status is {clip(status)!r}, not success" if isinstance(status, str)
                else "the result event has no status"
            )
        if self.result_error is not None:
            live.append(LiveEvent("error", n, t, {"message": self.result_error}))
        live.append(LiveEvent("result", n, t, {"ok": self.result_error is None, "status": self.status}))

    def _document(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        sid = d.get("session_id")
        if isinstance(sid, str) and sid:
            self.session_id = sid
        response = d.get("response")
        if isinstance(response, str) and response:
            self.document_text = response[: self.max_text]
            if len(response) > self.max_text:
                self.document_cut = True
                self.warn(f"the answer text passed {self.max_text} characters and was cut")
            live.append(LiveEvent("text", n, t, {"text": self.document_text}))
        self._usage(d.get("stats"), n, t, live)
        stats = d.get("stats")
        models = stats.get("models") if isinstance(stats, dict) else None
        if self.model is None and isinstance(models, dict) and len(models) == 1:
            only = next(iter(models))
            if isinstance(only, str):
                self.model = only
        warnings = d.get("warnings")
        if isinstance(warnings, list):
            for w in warnings:
                msg = message_of(w)
                if msg:
                    self.warn(msg)
        err = d.get("error")
        self.status = "success"
        self.result_seen = True
        sprung = traps.check(self.name, t, d)  # a known trap: the CLI stopped the agent, then reported success
        if err is not None or sprung is not None:
            self.status = "error"
            self.result_error = sprung.error if sprung is not None else clip(message_of(err) or "error")
            live.append(LiveEvent("error", n, t, {"message": self.result_error}))
        live.append(LiveEvent("result", n, t, {"ok": self.result_error is None, "status": self.status}))

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        if rec.type == "error" and self.stopped is None:
            # an error event that cannot be read may have been a stop (a known trap): a success after it is no word
            self.stopped = f"an error event ({size_text(rec.bytes)} at line {rec.line}) {self.why_lost(rec)}: it " \
                           "may have said the CLI stopped the agent"
        return super().dropped(rec)

    def _end_message(self, n: int, t: str, live: list[LiveEvent]) -> None:
        if self.message:
            live.append(LiveEvent("text", n, t, {"text": self.message.text()}))
            self.message.clear()

    def noted(self, rec: Noted) -> list[LiveEvent]:
        n, t = rec.lineno, rec.type
        if t not in ("tool_use", "tool_result"):
            return []
        live: list[LiveEvent] = []
        self._end_message(n, t, live)
        obj = _peek.whole(rec)
        if t == "tool_use":
            if obj is not None:
                name, cid, title = obj.get("tool_name"), obj.get("tool_id"), _peek.title_of(obj.get("parameters"))
            else:
                name, cid, title = _peek.string(rec.head, "tool_name"), _peek.string(rec.head, "tool_id"), None
                title = _peek.title_in(rec.head)
            live.append(self.tool_start(n, t, cid if isinstance(cid, str) else None,
                                        name if isinstance(name, str) else None, title))
            return live
        if obj is not None:
            cid, status, out = obj.get("tool_id"), obj.get("status"), obj.get("output")
        else:
            cid, status = _peek.string(rec.head, "tool_id"), _peek.string(rec.head, "status")
            out = _peek.string(rec.head, "output") if self.tool_output else None
        ok = status == "success" if isinstance(status, str) else None
        live.extend(self.tool_end(n, t, cid if isinstance(cid, str) else None, ok=ok, size=rec.size,
                                  output=out if isinstance(out, str) else None))
        return live

    def answer(self) -> Answer:
        text: str | None = self.text.text() if self.text else self.document_text
        extra: list[str] = []
        if not self.result_seen:
            extra.append("the stream ended without a result event")
        error = self.result_error
        if error is None and not self.result_seen:
            # No result: an error event was the last word.
            error = self.last_error
        warnings = self.notes.as_list()
        if error is not None:
            # An error event that the failed result repeats is the error, not also a warning.
            warnings = [w for w in warnings if w != f"error: {error}"]
        return self.found(text, usage=dict(self.usage), error=error, warnings=warnings + extra,
                          usage_by_model=self.usage_by_model, no_answer=self.last_said)

    def cut(self) -> str | None:
        if self.text.cut or self.document_cut:
            return f"final answer exceeded max_retained ({size_text(self.max_text)}) and was cut"
        return None
