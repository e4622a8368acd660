"""Kilo CLI ``kilo run --format json PROMPT`` (``@kilocode/cli``, an opencode fork).

Facts (Kilo-Org/kilocode ``packages/opencode/src/cli/cmd/run.ts``): the JSON
events are opencode's, written by the same ``emit`` — ``{type, timestamp,
sessionID, part|error}`` with ``step_start``, ``text``, ``reasoning``,
``tool_use``, ``step_finish`` and ``error`` — so nothing in the stream tells
Kilo from opencode: auto-detection reports the ``opencode`` family and
``--provider kilo`` names it exactly. The fold is opencode's.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from .grammar import Grammar
from .opencode import GRAMMAR as OPENCODE
from .opencode import OpencodeProvider

__all__ = ["KiloProvider", "GRAMMAR"]

#: opencode's grammar under Kilo's name: nothing in the stream tells the two apart, so it is chosen by name only.
GRAMMAR = dataclasses.replace(OPENCODE, name="kilo", detected=False)


class KiloProvider(OpencodeProvider):
    grammar: ClassVar[Grammar] = GRAMMAR
