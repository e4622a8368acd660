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

from ..lines import Event, Noted
from ._text import BoundedText
from .base import Answer, LiveEvent, Provider, as_int, clip, message_of, size_text

__all__ = ["OpencodeProvider", "normalize_opencode_tokens"]

_SUMMED = ("input", "output", "reasoning", "total")


def normalize_opencode_tokens(raw: Any) -> dict[str, Any]:
    """A (summed) opencode usage object → normalized names.

    opencode reports ``input`` without the cache reads and writes and
    ``output`` without the reasoning tokens (its session usage is ``output =
    outputTokens - reasoningTokens``, ``input = inputTokens - cache.read -
    cache.write``); the normalized counts add them back, so nothing is
    counted twice.
    """
    out: dict[str, Any] = {}
    if not isinstance(raw, dict):
        return out
    fresh, output, reasoning = (as_int(raw.get(k)) for k in ("input", "output", "reasoning"))
    cache = raw.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    read, write = as_int(cache.get("read")), as_int(cache.get("write"))
    if fresh is not None or read is not None or write is not None:
        out["input_tokens"] = (fresh or 0) + (read or 0) + (write or 0)
    if output is not None or reasoning is not None:
        out["output_tokens"] = (output or 0) + (reasoning or 0)
    if read is not None:
        out["cached_input_tokens"] = read
    if write is not None:
        out["cache_write_input_tokens"] = write
    if reasoning is not None:
        out["reasoning_output_tokens"] = reasoning
    total = as_int(raw.get("total"))
    if total is not None:
        out["total_tokens"] = total
    cost = raw.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost_usd"] = float(cost)
    return out


class OpencodeProvider(Provider):
    name: ClassVar[str] = "opencode"
    keep: ClassVar[frozenset[str]] = frozenset({"step_start", "text", "step_finish", "error", "done"})
    # Finished tools, with their whole output: reported by size only.
    note: ClassVar[frozenset[str]] = frozenset({"tool_use"})
    known: ClassVar[frozenset[str]] = keep | note | frozenset({"reasoning"})
    #: A step that finished for any reason but ``tool-calls`` ends the run; so do ``done``
    #: (an idle session) and ``error`` (the run's failure).
    terminal: ClassVar[tuple[str, ...]] = ("step_finish", "done", "error")
    answer_types: ClassVar[frozenset[str]] = frozenset({"text"})

    def __init__(self) -> None:
        super().__init__()
        self.text = BoundedText(self.max_text)
        self.message_id: Any = None
        self.session_id: str | None = None
        self.sums: dict[str, Any] = {}
        self.steps = 0
        self.error: str | None = None
        self.truncation_noted = False

    @classmethod
    def detect(cls, rec: Event | Noted) -> bool:
        if not isinstance(rec, Event):
            return False
        return isinstance(rec.data.get("sessionID"), str) and rec.type in cls.keep

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        sid = d.get("sessionID")
        if isinstance(sid, str) and sid and sid != self.session_id:
            self.session_id = sid
            live.append(LiveEvent("session", n, t, {"session_id": sid}))
        part = d.get("part")
        part = part if isinstance(part, dict) else {}
        if t == "text":
            self._text(part, n, t, live)
        elif t == "step_finish":
            self._step(part, n, t, live)
        elif t == "error":
            err = d.get("error")
            msg = message_of(err) or "error"
            name = err.get("name") if isinstance(err, dict) else None
            if isinstance(name, str) and name and name != msg:
                msg = f"{name}: {msg}"
            self.error = clip(msg)
            live.append(LiveEvent("error", n, t, {"message": self.error}))
        elif t == "done":
            rejected = d.get("rejected")
            if isinstance(rejected, list) and rejected:
                names = ", ".join(str(r) for r in rejected[:20])
                live.append(LiveEvent("warning", n, t, {"message": self.warn(f"permissions rejected: {names}")}))
            live.append(LiveEvent("result", n, t, {"ok": self.error is None, "reason": d.get("reason")}))
        return live

    def _text(self, part: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        text = part.get("text")
        if not isinstance(text, str):
            return
        # The answer is the last message's text: parts of one message join, a new message starts over.
        mid = part.get("messageID")
        if mid is None or mid != self.message_id:
            self.text.clear()
            self.truncation_noted = False
            self.message_id = mid
            self.answer_from = n
        self.text.limit = self.max_text
        self.text.add(text)
        if self.text.cut and not self.truncation_noted:
            self.truncation_noted = True
            msg = self.warn(f"the answer text passed {self.max_text} characters and was cut at line {n}")
            live.append(LiveEvent("warning", n, t, {"message": msg}))
        live.append(LiveEvent("text", n, t, {"text": text}))

    def _step(self, part: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        tokens = part.get("tokens")
        cost = part.get("cost")
        if not isinstance(tokens, dict) and not isinstance(cost, (int, float)):
            return
        self.steps += 1
        s = self.sums
        if isinstance(tokens, dict):
            for key in _SUMMED:
                v = as_int(tokens.get(key))
                if v is not None:
                    s[key] = s.get(key, 0) + v
            cache = tokens.get("cache")
            if isinstance(cache, dict):
                c = s.setdefault("cache", {})
                for key in ("read", "write"):
                    v = as_int(cache.get(key))
                    if v is not None:
                        c[key] = c.get(key, 0) + v
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            s["cost"] = s.get("cost", 0) + cost
        s["steps"] = self.steps
        live.append(LiveEvent("usage", n, t, {"usage": normalize_opencode_tokens(s)}))

    def is_terminal(self, ev: Event) -> bool:
        if ev.type != "step_finish":
            return True
        part = ev.data.get("part")
        reason = part.get("reason") if isinstance(part, dict) else None
        return reason != "tool-calls"  # older versions give no reason: any step may be the last

    def cut(self) -> str | None:
        if self.text.cut:
            return f"final answer exceeded max_retained ({size_text(self.max_text)}) and was cut"
        return None

    def noted(self, rec: Noted) -> list[LiveEvent]:
        if rec.type == "tool_use":
            return [LiveEvent("tool_end", rec.lineno, rec.type, {"bytes": rec.size})]
        return []

    def answer(self) -> Answer:
        text = self.text.text() if self.text else None
        error = self.error
        raw = {**self.sums, "cache": dict(self.sums["cache"])} if "cache" in self.sums else dict(self.sums)
        return Answer(
            text=text,
            usage=normalize_opencode_tokens(self.sums),
            raw_usage=raw or None,
            model=None,
            session_id=self.session_id,
            error=error,
            warnings=self.notes.as_list(),
        )
