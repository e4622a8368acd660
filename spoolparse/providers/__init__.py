"""Providers: one per stdout format, each with its grammar, plus auto-detection.

``PROVIDERS`` maps a name to its class. :func:`make_provider` builds one by
name; ``"auto"`` builds an :class:`AutoProvider`, for which the engine
(:mod:`spoolparse.providers.engine`) chooses the provider by the events'
evidence against every grammar (else ``generic``).
"""

from __future__ import annotations

from ..errors import UsageError
from . import grammar
from .amp import AmpProvider
from .antigravity import AntigravityProvider
from .base import Answer, LiveEvent, Provider
from .claude import ClaudeProvider
from .codex import CodexProvider
from .copilot import CopilotProvider
from .cursor import CursorProvider
from .droid import DroidProvider
from .engine import AutoProvider, Engine
from .gemini import GeminiProvider
from .generic import GenericProvider
from .grammar import Grammar
from .kilo import KiloProvider
from .kimi import KimiProvider
from .opencode import OpencodeProvider
from .qwen import QwenProvider

__all__ = [
    "PROVIDERS", "AutoProvider", "Engine", "make_provider", "Provider", "Answer", "LiveEvent", "grammars", "ok_table",
]

#: Specific providers. ``generic`` is the fallback, never detected. Detection asks every grammar
#: at once; this order only breaks a tie where no evidence can (and orders the docs' tables).
#: Qwen Code, Amp and Cursor are Claude's look-alikes (their grammars' ``family``): a stream with
#: none of their own marks reads as Claude's. Kilo prints opencode's stream unchanged: it is
#: chosen by name only.
PROVIDERS: dict[str, type[Provider]] = {
    CodexProvider.name: CodexProvider,
    QwenProvider.name: QwenProvider,
    AmpProvider.name: AmpProvider,
    CursorProvider.name: CursorProvider,
    DroidProvider.name: DroidProvider,
    ClaudeProvider.name: ClaudeProvider,
    GeminiProvider.name: GeminiProvider,
    OpencodeProvider.name: OpencodeProvider,
    KiloProvider.name: KiloProvider,
    CopilotProvider.name: CopilotProvider,
    KimiProvider.name: KimiProvider,
    AntigravityProvider.name: AntigravityProvider,
}
FALLBACK: type[Provider] = GenericProvider


def names() -> list[str]:
    return ["auto", *PROVIDERS, FALLBACK.name]


def grammars() -> list[Grammar]:
    """Every registered provider's grammar, in registry order."""
    return [cls.grammar for cls in PROVIDERS.values() if cls.grammar is not None]


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
