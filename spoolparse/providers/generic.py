"""Any NDJSON stream: the last ``result``/``text``/``message`` string, the last
``usage`` object, and any ``error``. It keeps every type, so every line under
the cap is decoded; lines over it are dropped and reported.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from .._decode.records import KEEP, Dropped, Event
from . import _peek
from .base import Answer, LiveEvent, Provider, as_int, fresh, message_of

__all__ = ["GenericProvider"]

_TOOL_STARTS = frozenset({"tool_start", "tool_call", "tool_use"})
_TOOL_ENDS = frozenset({"tool_end", "tool_result"})
_TEXT_KEYS = ("result", "text", "message", "content", "response")


def _first(d: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = d.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _failed_flag(d: dict[str, Any]) -> str | None:
    """How a line says the run failed, by a common flag (``is_error: true``, ``ok: false``, ``success: false``,
    a failed ``status``), or ``None``."""
    for key, failed in (("is_error", True), ("ok", False), ("success", False)):
        if d.get(key) is failed:
            return f"{key}: {str(failed).lower()}"
    status = d.get("status")
    if isinstance(status, str) and status.lower() in _FAILED_STATUSES:
        return f"status: {status}"
    return None


_FAILED_STATUSES = frozenset({"error", "failed", "failure", "fail"})


class GenericProvider(Provider):
    name: ClassVar[str] = "generic"
    text: str | None = None
    usage: dict[str, Any] = fresh(dict)
    error: str | None = None

    def retain(self, key: str) -> int:
        return KEEP

    def event(self, ev: Event) -> list[LiveEvent]:
        d, n, t = ev.data, ev.lineno, ev.type
        live: list[LiveEvent] = []
        if t in _TOOL_STARTS or t in _TOOL_ENDS:
            self._tool(ev, live)
        for key in _TEXT_KEYS:
            value = d.get(key)
            if isinstance(value, str) and not (key == "message" and t == "error"):
                self.text = value
                self.answer_from = n
                delta = d.get("delta") is True or t.endswith("delta")
                live.append(LiveEvent("text_delta" if delta else "text", n, t, {"text": value}))
                break
        usage = d.get("usage")
        if isinstance(usage, dict):
            self.raw_usage = usage
            # counts, and costs (floats); NaN and the infinities are no number (the verdict's warning names them)
            self.usage = {k: v for k, v in usage.items()
                          if as_int(v) is not None or (isinstance(v, float) and math.isfinite(v))}
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
        flag = None if t in _TOOL_ENDS else _failed_flag(d)  # a tool's failure is the tool's, not the run's
        if t == "error" or (err is not None and err is not False):
            msg = message_of(err) or message_of(d) or "error"
        elif flag is not None:
            said = message_of(d.get("message")) or message_of(d.get("detail"))
            msg = f"the stream said {flag}" + (f" ({said})" if said else "")
        else:
            return live
        self.error = msg
        live.append(LiveEvent("error", n, t, {"message": msg}))
        return live

    def _tool(self, ev: Event, live: list[LiveEvent]) -> None:
        """``tool_start``/``tool_call``/``tool_use`` and ``tool_end``/``tool_result`` lines, by common key names."""
        d, n, t = ev.data, ev.lineno, ev.type
        cid = _first(d, ("call_id", "tool_call_id", "tool_use_id", "tool_id", "callID", "id"))
        name = _first(d, ("name", "tool_name", "tool"))
        args = next((d[k] for k in ("input", "arguments", "parameters", "args") if k in d), d)
        if t in _TOOL_STARTS:
            live.append(self.tool_start(n, t, cid, name, _peek.title_of(args)))
            return
        code = as_int(d.get("exit_code"))
        err, status = d.get("is_error"), d.get("status")
        ok = (not err) if isinstance(err, bool) else status in ("success", "completed", "ok") if isinstance(
            status, str) else None if code is None else code == 0
        out = _first(d, ("output", "content", "result"))
        live.extend(self.tool_end(n, t, cid, name=name, ok=ok, exit_code=code, size=ev.size, output=out))

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        live = super().dropped(rec)
        self._lost = {rec.type: rec}  # every type is kept here: remember only the latest drop
        return live

    def lost_answer(self) -> Dropped | None:
        # any object may carry the answer: a line dropped after the last text may have been it
        r = next(iter(self._lost.values()), None)
        return r if r is not None and r.line >= self.answer_from else None

    def answer(self) -> Answer:
        return self.found(self.text, usage=dict(self.usage), error=self.error)
