"""Amp ``amp --execute PROMPT --stream-json``.

Facts (from the types of the published ``@sourcegraph/amp-sdk``, which runs
``amp --execute --stream-json``, and Amp's own example of the stream): Claude-
compatible lines — ``system``/``init`` with ``session_id`` (a thread id,
``T-…``), ``cwd``, ``tools`` and ``mcp_servers`` but no ``model``;
``assistant`` API messages (optional ``message.id`` and ``message.model``) that
carry the usage; ``user`` tool results; a last ``result`` with ``duration_ms``,
``num_turns``, an optional ``usage`` (Amp's example prints none), and either
``subtype: "success"``/``result`` or ``is_error: true``, ``subtype``
``error_during_execution``/``error_max_turns`` and the reason in ``error`` (a
string).

Amp's ``input_tokens`` is every prompt token, the cache reads and writes
included (its example: ``input_tokens`` 12783 = 12416 read + 367 written), so
it is not added to them as Anthropic's is.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._claudelike import ClaudeShaped
from .base import Answer, LiveEvent, as_int, fresh, renamed_counts
from .claude import look_alike
from .grammar import NOTE, Grammar, is_, prefix, shape

__all__ = ["AmpProvider", "GRAMMAR", "normalize_amp_usage"]

_T = "T-019b9d03-62e3-772f-9780-3e637f90eaec"

#: ``amp --execute PROMPT --stream-json``: Claude Code's stream, told from it by its thread ids (``T-…``), the
#: one mark Claude never prints (an init without a model is no mark: claude-code-action's sample turns have one).
GRAMMAR = look_alike(
    "amp",
    (
        shape("system", is_("subtype", "init"), prefix("session_id", "T-"), own=True, label="system/init",
              example={"type": "system", "subtype": "init", "cwd": "/w", "session_id": _T, "tools": ["Bash"],
                       "mcp_servers": []}),
        shape("system", prefix("session_id", "T-"), own=True,
              example={"type": "system", "subtype": "status", "session_id": _T}),
        shape("assistant", prefix("session_id", "T-"), own=True,
              example={"type": "assistant", "session_id": _T, "parent_tool_use_id": None,
                       "message": {"model": "m", "content": [{"type": "text", "text": "FINAL-ANSWER"}]}}),
        shape("user", prefix("session_id", "T-"), read=NOTE, own=True,
              example={"type": "user", "session_id": _T, "message": {"role": "user", "content": []}}),
        shape("result", prefix("session_id", "T-"), own=True,
              example={"type": "result", "subtype": "success", "is_error": False, "result": "FINAL-ANSWER",
                       "session_id": _T}),
    ),
    says_answer="`result.result`; if it is empty, the last `assistant` text",
)

#: The counts of a message's usage that are summed over the run (Amp's names).
_COUNTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def normalize_amp_usage(raw: Any) -> dict[str, Any]:
    """Amp usage → normalized names (its ``input_tokens`` already counts the cache)."""
    return renamed_counts(raw, (
        ("input_tokens", "input_tokens"),
        ("cache_read_input_tokens", "cached_input_tokens"),
        ("cache_creation_input_tokens", "cache_write_input_tokens"),
        ("output_tokens", "output_tokens"),
    ))


class AmpProvider(ClaudeShaped):
    grammar: ClassVar[Grammar] = GRAMMAR
    # The run's usage is its assistant messages' (the result prints none): the sums of the messages
    # before the current one, and the current one's id and largest counts (its lines repeat them).
    message_sums: dict[str, int] = fresh(dict)
    messages: int = 0
    _mid: Any = None
    _counts: dict[str, int] = fresh(dict)

    @staticmethod
    def normalize_usage(raw: Any) -> dict[str, Any]:
        return normalize_amp_usage(raw)

    def _assistant(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        msg = d.get("message")
        if isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
            self._count(msg.get("id"), msg["usage"])
        super()._assistant(d, n, t, live)

    def _count(self, mid: Any, raw: dict[str, Any]) -> None:
        """One assistant line's usage: a new message (an id not the current one's, or none) adds up the last."""
        if mid is None or mid != self._mid:
            self._flush()
            self._mid = mid
            self.messages += 1
        cur = self._counts
        for key in _COUNTS:
            value = as_int(raw.get(key))
            if value is not None and value > cur.get(key, -1):
                cur[key] = value

    def _flush(self) -> None:
        for key, value in self._counts.items():
            self.message_sums[key] = self.message_sums.get(key, 0) + value
        self._counts = {}

    def answer(self) -> Answer:
        ans = super().answer()
        if not ans.usage and self.messages:
            self._flush()
            self._mid = None
            ans.usage = normalize_amp_usage(self.message_sums)
            ans.raw_usage = {"assistant_usage": dict(self.message_sums), "messages": self.messages}
        return ans
