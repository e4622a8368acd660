"""The registry of providers: each stdout format's name and class, the fallback, and their grammars.

Apart from the package's face (:mod:`spoolparse.providers`) so that the
engine's auto-detection can ask it for its candidates without a circle: the
face imports the engine.
"""

from __future__ import annotations

from .amp import AmpProvider
from .antigravity import AntigravityProvider
from .base import Provider
from .claude import ClaudeProvider
from .codex import CodexProvider
from .copilot import CopilotProvider
from .cursor import CursorProvider
from .droid import DroidProvider
from .gemini import GeminiProvider
from .generic import GenericProvider
from .grammar import Grammar
from .kilo import KiloProvider
from .kimi import KimiProvider
from .opencode import OpencodeProvider
from .qwen import QwenProvider

__all__ = ["PROVIDERS", "FALLBACK", "names", "grammars"]

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
