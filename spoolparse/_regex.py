"""A regular expression compiled on first use: no module of the package compiles a pattern when imported.

``_SPACE = regex(r"\\s+")`` is ``re.compile(r"\\s+")`` made the first time one of its methods is asked for;
from then on the compiled pattern's bound methods are the object's own attributes, so ``_SPACE.sub(...)``
costs what it costs on the compiled pattern. Type checkers see an ``re.Pattern``. (Not for a pattern handed
to ``re``'s functions or checked with ``isinstance``: it is a stand-in; its methods and attributes are the
pattern's.)
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

__all__ = ["regex"]

#: What is copied onto the stand-in when the pattern is compiled: every method and attribute of a pattern.
_ATTRIBUTES = ("match", "fullmatch", "search", "finditer", "findall", "split", "sub", "subn", "scanner", "pattern",
               "flags", "groups", "groupindex")


class _OnFirstUse:
    """The stand-in: the pattern's source and flags until it is compiled, then the compiled pattern's attributes."""

    def __init__(self, source: str | bytes, flags: int) -> None:
        self._source = source
        self._flags = flags

    def __getattr__(self, name: str) -> Any:  # only for what is not yet an attribute: the first use
        if name.startswith("__") or name in ("_source", "_flags"):
            raise AttributeError(name)
        compiled = re.compile(self._source, self._flags)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"regex({self._source!r}, {self._flags})"


def regex(source: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(source, flags)``, done when the pattern is first used."""
    return cast("re.Pattern[AnyStr]", _OnFirstUse(source, flags))
