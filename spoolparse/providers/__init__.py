"""Providers: one per stdout format, each with its grammar, plus auto-detection.

``PROVIDERS`` maps a name to its class. :func:`make_provider` builds one by
name; ``"auto"`` builds an :class:`AutoProvider`, for which the engine
(:mod:`spoolparse.providers.engine`) chooses the provider by the events'
evidence against every grammar (else ``generic``).
"""

from __future__ import annotations

from ..errors import UsageError
from . import grammar
from .base import Answer, LiveEvent, Provider
from .engine import AutoProvider, Engine
from .registry import FALLBACK, PROVIDERS, grammars, names

__all__ = [
    "PROVIDERS", "FALLBACK", "AutoProvider", "Engine", "make_provider", "Provider", "Answer", "LiveEvent", "names",
    "grammars", "ok_table",
]

#: The generic provider's row: it has no grammar, and any JSON event will do.
_GENERIC_ROW = ("| generic | — (one run) | none: any JSON event | the last `result`, `text`, `message`, `content` or "
                "`response` string | — |\n")


def ok_table() -> str:
    """The docs' "What ``ok`` means" table (``docs/concepts/verdict.md``): one row per provider, from its grammar."""
    return grammar.ok_table(grammars()) + _GENERIC_ROW


def make_provider(name: str | Provider = "auto") -> Provider:
    """A fresh provider by name (``auto``, ``generic``, or a key of ``PROVIDERS``)."""
    if isinstance(name, Provider):
        return name
    if name == "auto":
        return AutoProvider()
    if name == FALLBACK.name:
        return FALLBACK()
    cls = PROVIDERS.get(name)
    if cls is None:
        raise UsageError(f"unknown provider {name!r}; choose one of {', '.join(names())}")
    return cls()
