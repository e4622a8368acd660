"""Kilo CLI ``kilo run --format json PROMPT`` (``@kilocode/cli``, an opencode fork).

Facts (Kilo-Org/kilocode ``packages/opencode/src/cli/cmd/run.ts``): the JSON
events are opencode's, written by the same ``emit`` — ``{type, timestamp,
sessionID, part|error}`` with ``step_start``, ``text``, ``reasoning``,
``tool_use``, ``step_finish`` and ``error`` — so nothing in the stream tells
Kilo from opencode: auto-detection reports the ``opencode`` family and
``--provider kilo`` names it exactly. The fold is opencode's.
"""

from __future__ import annotations

from typing import ClassVar

from ..lines import Event, Noted
from .opencode import OpencodeProvider

__all__ = ["KiloProvider"]


class KiloProvider(OpencodeProvider):
    name: ClassVar[str] = "kilo"

    @classmethod
    def detect(cls, rec: Event | Noted) -> bool:
        # Indistinguishable from opencode: chosen by name only.
        return False
