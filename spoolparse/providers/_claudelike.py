"""The shared fold of the agent CLIs whose stream copies Claude Code's ``stream-json``.

Qwen Code, Amp and Cursor Agent print ``system``/``assistant``/``user``/``result``
lines shaped like Claude's, with differences that change the answer: where the
failure text is (a top-level ``error`` instead of ``errors[]``), what
``usage.input_tokens`` counts, and which extra types they add. A subclass
names those differences; the fold itself stays :class:`ClaudeProvider`'s, so
a Claude stream read by it gives exactly the Claude result.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import LiveEvent, clip, message_of
from .claude import ClaudeProvider, normalize_claude_usage

__all__ = ["ClaudeShaped"]


class ClaudeShaped(ClaudeProvider):
    """A Claude-shaped stream: override :meth:`normalize_usage` and :meth:`failure_text`."""

    name: ClassVar[str] = "claude-shaped"

    @staticmethod
    def normalize_usage(raw: Any) -> dict[str, Any]:
        return normalize_claude_usage(raw)

    @staticmethod
    def failure_text(d: dict[str, Any]) -> str | None:
        """The failure's own words on a failed ``result`` (``None``: Claude's rules apply)."""
        return message_of(d.get("error"))

    def _result(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        seen: list[LiveEvent] = []
        super()._result(d, n, t, seen)
        if self.result_error is not None:
            own = self.failure_text(d)
            if own:
                self.result_error = clip(own)
            if self.last_text is not None and self.last_text.strip() == self.result_error.strip():
                # The CLI repeated its error as an assistant message: a report, not an answer.
                self.last_text = None
        for ev in seen:
            if ev.kind == "error":
                ev = LiveEvent("error", ev.lineno, ev.type, {"message": self.result_error})
            live.append(ev)
