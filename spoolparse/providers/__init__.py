"""Providers: one per stdout format, each with its grammar, plus auto-detection.

``PROVIDERS`` maps a name to its class. :func:`make_provider` builds one by
name; ``"auto"`` builds an :class:`AutoProvider`, for which the engine
(:mod:`spoolparse.providers.engine`) chooses the provider by the events'
evidence against every grammar (else ``generic``).

Every name here loads on first use: the command line asks for :func:`names`
alone (``--provider``'s choices), and a provider's module is imported only when
it is named or its evidence is seen (:mod:`spoolparse.providers.evidence`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Answer, LiveEvent, Provider
    from .engine import AutoProvider, Engine
    from .evidence import names
    from .registry import FALLBACK, PROVIDERS, grammars

__all__ = [
    "PROVIDERS", "FALLBACK", "AutoProvider", "Engine", "make_provider", "Provider", "Answer", "LiveEvent", "names",
    "grammars", "ok_table",
]

#: Where each name lives.
_LAZY = {
    "Answer": ".base", "LiveEvent": ".base", "Provider": ".base", "AutoProvider": ".engine", "Engine": ".engine",
    "names": ".evidence", "FALLBACK": ".registry", "PROVIDERS": ".registry", "grammars": ".registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


#: The generic provider's row: it has no grammar, and any JSON event will do.
_GENERIC_ROW = ("| generic | — (one run) | none: any JSON event | the last `result`, `text`, `message`, `content` or "
                "`response` string | — |\n")


def ok_table() -> str:
    """The docs' "What ``ok`` means" table (``docs/concepts/verdict.md``): one row per provider, from its grammar."""
    from . import grammar
    from .registry import grammars

    return grammar.ok_table(grammars()) + _GENERIC_ROW


def make_provider(name: str | Provider = "auto") -> Provider:
    """A fresh provider by name (``auto``, ``generic``, or a key of ``PROVIDERS``)."""
    from .base import Provider
    from .engine import AutoProvider
    from .registry import FALLBACK, PROVIDERS

    if isinstance(name, Provider):
        return name
    if name == "auto":
        return AutoProvider()
    if name == FALLBACK.name:
        return FALLBACK()
    cls = PROVIDERS.get(name)
    if cls is None:
        from ..errors import UsageError
        from .evidence import names

        raise UsageError(f"unknown provider {name!r}; choose one of {', '.join(names())}")
    return cls()
