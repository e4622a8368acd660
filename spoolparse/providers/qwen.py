"""Qwen Code ``qwen -p … --output-format stream-json`` (and ``--output-format json``).

Facts (from the published ``@qwen-code/qwen-code`` bundle, its
``nonInteractive`` output adapters): the stream copies Claude Code's —
``system``/``init`` first (``session_id``, ``model``, ``tools``,
``permission_mode`` and a ``qwen_code_version`` no other CLI prints),
``assistant`` messages with ``message.content[]`` blocks, tool results as
``user`` lines, ``system`` ``retry``/``task_*`` notices, optional
``stream_event`` lines, and a last ``result``. A failed ``result`` has
``is_error: true``, ``subtype`` ``error_*`` and the reason in
``error.message`` (no ``result`` text). Usage is counted the Gemini way:
``input_tokens`` is every prompt token (cached ones included),
``cache_read_input_tokens`` the cached part, ``output_tokens`` the
candidates (thinking not included), ``total_tokens`` the sum the CLI keeps.
``--output-format json`` prints the same messages as one JSON array.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._claudelike import ClaudeShaped
from .base import LiveEvent, renamed_counts
from .claude import look_alike
from .grammar import Grammar, has, is_, shape

__all__ = ["QwenProvider", "normalize_qwen_usage", "GRAMMAR"]


def normalize_qwen_usage(raw: Any) -> dict[str, Any]:
    """Qwen Code usage → normalized names (its ``input_tokens`` already counts cached tokens)."""
    return renamed_counts(raw, (
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("cache_read_input_tokens", "cached_input_tokens"),
        ("total_tokens", "total_tokens"),
    ))


#: ``qwen -p … --output-format stream-json`` (``json``: the same events as one array): Claude Code's stream, told
#: from it by the version its init names.
GRAMMAR = look_alike(
    "qwen",
    (
        shape("system", is_("subtype", "init"), has("qwen_code_version"), own=True, label="system/init",
              example={"type": "system", "subtype": "init", "session_id": "s", "model": "qwen3-coder-plus",
                       "qwen_code_version": "0.24.4"}),
    ),
    says_answer="`result.result`; if it is empty, the last `assistant` text (not when it repeats the failure)",
)


class QwenProvider(ClaudeShaped):
    grammar: ClassVar[Grammar] = GRAMMAR

    @staticmethod
    def normalize_usage(raw: Any) -> dict[str, Any]:
        return normalize_qwen_usage(raw)

    def _result(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        super()._result(d, n, t, live)
        stats = d.get("stats")
        if isinstance(stats, dict) and isinstance(self.raw_usage, dict):
            self.raw_usage["stats"] = stats

    def _system(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        super()._system(d, n, t, live)
        if d.get("subtype") == "retry":
            data = d.get("data")
            data = data if isinstance(data, dict) else {}
            attempt, most = data.get("attempt"), data.get("maxRetries")
            text = self.warn(
                f"model request retried ({data.get('reason', 'retry')}"
                + (f", attempt {attempt}/{most}" if attempt is not None else "")
                + ")"
            )
            live.append(LiveEvent("warning", n, t, {"message": text}))
