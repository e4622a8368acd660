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

from ._claudelike import ClaudeShaped
from .claude import look_alike
from .grammar import NOTE, Grammar, is_, prefix, shape

__all__ = ["AmpProvider", "GRAMMAR"]

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


class AmpProvider(ClaudeShaped):
    name: ClassVar[str] = "amp"
    grammar: ClassVar[Grammar] = GRAMMAR
