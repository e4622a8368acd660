"""opencode ``opencode run --format json``.

Facts: every line is ``{type, timestamp (epoch ms), sessionID, part|error}``;
``text`` events carry a finished text part (``part.text``, ``part.messageID``);
``tool_use`` is emitted once a tool finished and carries its whole output (the
big lines, never decoded); ``step_finish.part`` has ``tokens`` and ``cost`` for
one step only, so usage is their sum; ``error`` is the run's failure
(``{name, data: {message}}``); ``done`` ends an idle session.

.. seealso:: :mod:`spoolparse.providers.codex` for the shape every provider follows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._decode.records import Dropped, Event, Noted
from . import _peek, traps
from ._text import BoundedText
from .base import MISSING, Answer, LiveEvent, Provider, as_int, fresh, size_text, usage_of
from .grammar import NOTE, Grammar, is_not, kind, shape

__all__ = ["OpencodeProvider", "normalize_opencode_tokens", "GRAMMAR"]

_SUMMED = ("input", "output", "reasoning", "total")


def normalize_opencode_tokens(raw: Any) -> dict[str, Any]:
    """A (summed) opencode usage object → normalized names.

    opencode reports ``input`` without the cache reads and writes and
    ``output`` without the reasoning tokens (its session usage is ``output =
    outputTokens - reasoningTokens``, ``input = inputTokens - cache.read -
    cache.write``); the normalized counts add them back, so nothing is
    counted twice.
    """
    if not isinstance(raw, dict):
        return {}
    cache = raw.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    return usage_of(fresh=as_int(raw.get("input")), read=as_int(cache.get("read")), write=as_int(cache.get("write")),
                    output=as_int(raw.get("output")), reasoning=as_int(raw.get("reasoning")),
                    total=as_int(raw.get("total")), cost=raw.get("cost"))


def _add(sums: dict[str, Any], counts: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Add the whole counts at ``keys`` to ``sums`` (one step's tokens: every step_finish has them)."""
    for key in keys:
        v = counts.get(key)
        if type(v) is not int:  # (the common case needs no call)
            v = as_int(v)
            if v is None:
                continue
        sums[key] = sums.get(key, 0) + v


#: Finish reasons of a last step whose answer the model did not end (the AI SDK's ``finishReason``; ``stop`` ended
#: it, ``tool-calls`` goes on, ``other`` and ``unknown`` say nothing either way).
_UNFINISHED = {
    "length": "stopped at its output limit",
    "content-filter": "was stopped by a content filter",
    "error": "was stopped by an error",
}


_S = "ses_3b1f0c2d9ffeAbCdEf012345"
_SESSION = kind("sessionID", "string")  # on every line opencode prints
_STEP = shape("step_start", _SESSION, own=True,
              example={"type": "step_start", "timestamp": 1, "sessionID": _S, "part": {"messageID": "msg_1"}})
_TEXT = shape("text", _SESSION, own=True,
              example={"type": "text", "timestamp": 1, "sessionID": _S,
                       "part": {"messageID": "msg_1", "text": "FINAL-ANSWER"}})
_FINISH = shape("step_finish", _SESSION, own=True,
                example={"type": "step_finish", "timestamp": 1, "sessionID": _S,
                         "part": {"reason": "stop", "tokens": {"input": 1, "output": 1}}})
_ERROR = shape("error", _SESSION, own=True,
               example={"type": "error", "timestamp": 1, "sessionID": _S,
                        "error": {"name": "APIError", "data": {"message": "mock: simulated 500 failure"}}})
_DONE = shape("done", _SESSION, own=True,
              example={"type": "done", "timestamp": 1, "sessionID": _S, "reason": "idle", "rejected": []})
# the run's failure, and an idle session: opencode prints nothing more of the run after either
_ERROR_END, _DONE_END = shape("error"), shape("done")

#: ``opencode run --format json`` (Kilo prints it unchanged).
GRAMMAR = Grammar(
    name="opencode",
    vocabulary=(
        _STEP, _TEXT, _FINISH, _ERROR, _DONE,
        # finished tools, with their whole output, and reasoning: read from their bounded heads and tails, and
        # only when someone listens
        shape("tool_use", _SESSION, read=NOTE, own=True,
              example={"type": "tool_use", "timestamp": 1, "sessionID": _S,
                       "part": {"type": "tool", "tool": "bash", "callID": "c1", "state": {"status": "completed"}}}),
        shape("reasoning", _SESSION, read=NOTE, own=True,
              example={"type": "reasoning", "timestamp": 1, "sessionID": _S, "part": {"text": "hmm"}}),
    ),
    turns=(shape("step_start"),),
    # a step that finished for any reason but tool-calls (versions without a reason: any step may be the last)
    terminal=(shape("step_finish", is_not("part.reason", "tool-calls"), label="step_finish"), _DONE_END, _ERROR_END),
    final=(_DONE_END, _ERROR_END),
    answer=(shape("text"),),
    says_answer="the `part.text` of the last message's `text` parts, joined",
    says_no_answer="the permissions `done` says were rejected, where it lists them",
)


class OpencodeProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    text: BoundedText = fresh(BoundedText)
    message_id: Any = None
    sums: dict[str, Any] = fresh(dict)
    steps: int = 0
    error: str | None = None
    #: The last step's finish reason (the AI SDK's ``finishReason``), where the version gives one.
    finish_reason: str | None = None
    step_message: Any = None  # the messageID of the step running now
    in_step: bool = False
    rejected: str | None = None  # the permissions ``done`` says were rejected
    unread_part: int | None = None  # a text part dropped since the last one read, whose message is unknown

    def new_turn(self, line: int) -> None:
        self.text.clear()
        self.message_id = self.finish_reason = self.unread_part = None
        self.truncation_noted = False

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        self.take_session(d.get("sessionID"), n, t, live)
        part = d.get("part")
        part = part if isinstance(part, dict) else {}
        if t == "text":
            self._text(ev, part, live)
        elif t == "step_start":
            mid = part.get("messageID")
            if self.live:  # a step's start and end feed live events only (one of each per tool call)
                if self.in_step and mid is not None and mid == self.step_message:
                    # the same message's step again, with no finish between: opencode retried the request
                    live.append(LiveEvent("retry", n, t, {"message": "step restarted (request retried)"}))
                else:
                    live.append(LiveEvent("turn_start", n, t, {}))
            self.in_step, self.step_message = True, mid
        elif t == "step_finish":
            reason = part.get("reason")
            self.finish_reason = reason if isinstance(reason, str) else None
            if reason == "tool-calls":
                # the agent goes on after the tools: what this step said is no answer (the next text starts one)
                self.text.clear()
                self.message_id = None
            self._step(part, n, t, live)
            if self.live and self.text:
                live.append(LiveEvent("text", n, t, {"text": self.text.text()}))
            self.in_step = False
            if self.live:
                live.append(LiveEvent("turn_end", n, t, {"ok": True}))
        elif t == "error":
            # the run's failure, however the process exited (a known trap: opencode has exited 0 after one)
            sprung = traps.check(self.name, t, d)
            self.error = sprung.error if sprung is not None else "error"
            live.append(LiveEvent("error", n, t, {"message": self.error}))
            if self.in_step:
                self.in_step = False
                live.append(LiveEvent("turn_end", n, t, {"ok": False}))
        elif t == "done":
            rejected = d.get("rejected")
            if isinstance(rejected, list) and rejected:
                names = ", ".join(str(r) for r in rejected[:20])
                self.rejected = self.warn(f"permissions rejected: {names}")
                live.append(LiveEvent("warning", n, t, {"message": self.rejected}))
            reason = d.get("reason")
            live.append(LiveEvent("result", n, t, {"ok": self._failure() is None,
                                                   "status": reason if isinstance(reason, str) else None}))
        return live

    def _text(self, ev: Event, part: dict[str, Any], live: list[LiveEvent]) -> None:
        n, t = ev.lineno, ev.type
        text = part.get("text", MISSING)
        # The answer is the last message's text: parts of one message join, a new message starts over.
        mid = part.get("messageID")
        if mid is None or mid != self.message_id:
            self.text.clear()
            self.truncation_noted = False
            self.message_id = mid
            # a text part lost just before may have been this message's first: its answer would lack it
            self.answer_from = n if self.unread_part is None else self.unread_part
        self.unread_part = None
        if not isinstance(text, str):
            live.append(self.textless(ev, "part.text", text))  # this message's answer is not in hand
            return
        self.join_text(self.text, text, n, t, live)
        live.append(LiveEvent("text_delta", n, t, {"text": text}))

    def _step(self, part: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        tokens = part.get("tokens")
        cost = part.get("cost")
        if not isinstance(tokens, dict) and not isinstance(cost, (int, float)):
            return
        self.steps += 1
        s = self.sums
        if isinstance(tokens, dict):
            _add(s, tokens, _SUMMED)
            cache = tokens.get("cache")
            if isinstance(cache, dict):
                _add(s.setdefault("cache", {}), cache, ("read", "write"))
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            s["cost"] = s.get("cost", 0) + cost
        s["steps"] = self.steps
        if self.live:  # the running usage feeds live events only (the answer normalizes the sums once)
            live.append(LiveEvent("usage", n, t, {"usage": normalize_opencode_tokens(s)}))

    def cut(self) -> str | None:
        if self.text.cut:
            return f"final answer exceeded max_retained ({size_text(self.max_text)}) and was cut"
        return None

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        if rec.type == "text":
            self.unread_part = rec.line
        return super().dropped(rec)

    def noted(self, rec: Noted) -> list[LiveEvent]:
        """A finished tool (its start and end at once) or a reasoning part."""
        n, t, head, tail = rec.lineno, rec.type, rec.head, rec.tail
        obj = _peek.whole(rec)
        part = obj.get("part") if obj is not None else None
        if t == "reasoning":
            text = part.get("text") if isinstance(part, dict) else _peek.string(head, "text")
            return [LiveEvent("thinking", n, t, {"text": text, "delta": False})] if isinstance(text, str) else []
        if isinstance(part, dict):
            state = part.get("state")
            state = state if isinstance(state, dict) else {}
            meta = state.get("metadata")
            cid, name, status = part.get("callID"), part.get("tool"), state.get("status")
            title = state.get("title") or _peek.title_of(state.get("input"))
            code = meta.get("exit") if isinstance(meta, dict) else None
            out = state.get("output")
        else:
            cid, name = _peek.string(head, "callID"), _peek.string(head, "tool")
            status = _peek.string(head, "status")
            # the title comes after the output: in the tail, else the call's input in the head
            title = _peek.string(tail, "title", last=True) or _peek.title_in(head)
            code = _peek.scalar(tail, "exit")
            out = _peek.string(head, "output") if self.tool_output else None
        code = code if type(code) is int else None
        return self.tool_end(
            n, t, cid if isinstance(cid, str) else None, name=name if isinstance(name, str) else None,
            title=title, ok=None if not isinstance(status, str) else status == "completed", exit_code=code,
            size=rec.size, output=out if isinstance(out, str) else None,
        )

    def _failure(self) -> str | None:
        """The agent's error, or why the model did not end its answer (the text is then what there is)."""
        if self.error is None and self.finish_reason in _UNFINISHED:
            return f"the model {_UNFINISHED[self.finish_reason]} (finish reason {self.finish_reason})"
        return self.error

    def answer(self) -> Answer:
        text = self.text.text() if self.text else None
        error = self._failure()
        raw = {**self.sums, "cache": dict(self.sums["cache"])} if "cache" in self.sums else dict(self.sums)
        return self.found(text, usage=normalize_opencode_tokens(self.sums), raw_usage=raw or None, error=error,
                          no_answer=self.rejected)
