"""Amp ``amp --execute PROMPT --stream-json``.

Facts (from the types of the published ``@sourcegraph/amp-sdk``, which runs
``amp --execute --stream-json``): Claude-compatible lines — ``system``/``init``
with ``session_id`` (a thread id, ``T-…``), ``cwd``, ``tools`` and
``mcp_servers`` but no ``model``; ``assistant`` API messages (``message.model``,
``message.usage`` in Anthropic's counting); ``user`` tool results; a last
``result`` with ``duration_ms``, ``num_turns``, optional ``usage`` and either
``subtype: "success"``/``result`` or ``is_error: true``, ``subtype``
``error_during_execution``/``error_max_turns`` and the reason in ``error``
(a string).
"""

from __future__ import annotations

from typing import ClassVar

from ..lines import Event, Noted
from ._claudelike import ClaudeShaped

__all__ = ["AmpProvider"]


class AmpProvider(ClaudeShaped):
    name: ClassVar[str] = "amp"

    @classmethod
    def detect(cls, rec: Event | Noted) -> bool:
        if not isinstance(rec, Event) or rec.type not in ("system", "assistant", "user", "result"):
            return False
        d = rec.data
        # Amp's thread ids are the one mark Claude never prints (an init without a model
        # is no mark: claude-code-action's sample turns have one).
        sid = d.get("session_id")
        return isinstance(sid, str) and sid.startswith("T-")
