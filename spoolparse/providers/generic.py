"""Any NDJSON stream: the last ``result``/``text``/``message`` string, the last
``usage`` object, and any ``error``. It keeps every type, so every line under
the cap is decoded; lines over it are dropped and reported.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..lines import KEEP, Dropped, Event
from .base import Answer, LiveEvent, Provider, as_int, message_of

__all__ = ["GenericProvider"]

_TEXT_KEYS = ("result", "text", "message", "content", "response")


class GenericProvider(Provider):
    name: ClassVar[str] = "generic"

    def __init__(self) -> None:
        super().__init__()
        self.text: str | None = None
        self.usage: dict[str, Any] = {}
        self.raw_usage: Any = None
        self.model: str | None = None
        self.session_id: str | None = None
        self.error: str | None = None

    def retain(self, key: str) -> int:
        return KEEP

    def event(self, ev: Event) -> list[LiveEvent]:
        d, n, t = ev.data, ev.lineno, ev.type
        live: list[LiveEvent] = []
        for key in _TEXT_KEYS:
            value = d.get(key)
            if isinstance(value, str) and not (key == "message" and t == "error"):
                self.text = value
                self.answer_from = n
                live.append(LiveEvent("text", n, t, {"text": value}))
                break
        usage = d.get("usage")
        if isinstance(usage, dict):
            self.raw_usage = usage
            self.usage = {k: v for k, v in usage.items() if as_int(v) is not None or isinstance(v, float)}
            live.append(LiveEvent("usage", n, t, {"usage": self.usage}))
        for key in ("model",):
            value = d.get(key)
            if isinstance(value, str) and value:
                self.model = value
        for key in ("session_id", "sessionID", "thread_id", "sessionId"):
            value = d.get(key)
            if isinstance(value, str) and value:
                self.session_id = value
                break
        err = d.get("error")
        if t == "error" or (err is not None and err is not False):
            msg = message_of(err) or message_of(d) or "error"
            self.error = msg
            live.append(LiveEvent("error", n, t, {"message": msg}))
        return live

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        live = super().dropped(rec)
        self._lost = {rec.type: rec}  # every type is kept here: remember only the latest drop
        return live

    def lost_answer(self) -> Dropped | None:
        # any object may carry the answer: a line dropped after the last text may have been it
        r = next(iter(self._lost.values()), None)
        return r if r is not None and r.line >= self.answer_from else None

    def answer(self) -> Answer:
        return Answer(
            text=self.text,
            usage=dict(self.usage),
            raw_usage=self.raw_usage,
            model=self.model,
            session_id=self.session_id,
            error=self.error,
            warnings=self.notes.as_list(),
        )
