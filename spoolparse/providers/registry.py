"""The registry of providers: each stdout format's name and class, the fallback, and their grammars.

Apart from the package's face (:mod:`spoolparse.providers`) so that the
engine's auto-detection can ask it for its candidates without a circle: the
face imports the engine. The names and where each provider lives are
:mod:`spoolparse.providers.evidence`'s table: a provider's module is imported
when its class is first asked for, so a run with a named provider imports that
one alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from . import evidence
from .base import Provider
from .evidence import names
from .generic import GenericProvider
from .grammar import Grammar

__all__ = ["PROVIDERS", "FALLBACK", "names", "grammars"]


class _Registry(Mapping[str, type[Provider]]):
    """Specific providers by name, in :data:`~spoolparse.providers.evidence.REGISTERED`'s order; each class is
    imported when it is first looked up."""

    def __init__(self) -> None:
        self._at = {e.name: e.at for e in evidence.TABLE}
        self._loaded: dict[str, type[Provider]] = {}

    def __getitem__(self, name: str) -> type[Provider]:
        cls = self._loaded.get(name)
        if cls is None:
            cls = self._loaded[name] = evidence.load(self._at[name])  # KeyError: no such provider
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, name: object) -> bool:
        return name in self._at  # without importing it

    def __repr__(self) -> str:
        return f"<providers {', '.join(self._at)}>"


#: Specific providers (see :data:`~spoolparse.providers.evidence.REGISTERED` for their order).
PROVIDERS: Mapping[str, type[Provider]] = _Registry()
FALLBACK: type[Provider] = GenericProvider


def grammars() -> list[Grammar]:
    """Every registered provider's grammar, in registry order (this imports every provider)."""
    return [cls.grammar for cls in PROVIDERS.values() if cls.grammar is not None]
