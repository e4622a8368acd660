"""Providers: one per stdout format, plus auto-detection.

``PROVIDERS`` maps a name to its class. :func:`make_provider` builds one by
name; ``"auto"`` builds an :class:`AutoProvider` that watches the first events
and hands the stream to the provider that recognizes it (else ``generic``).
"""

from __future__ import annotations

import functools
from typing import ClassVar

from .. import _limits
from ..errors import UsageError
from ..lines import KEEP, NOTE, SKIP, Dropped, Event, Noted, Record
from .amp import AmpProvider
from .antigravity import AntigravityProvider
from .base import Answer, LiveEvent, Provider
from .claude import ClaudeProvider
from .codex import CodexProvider
from .copilot import CopilotProvider
from .cursor import CursorProvider
from .droid import DroidProvider
from .gemini import GeminiProvider
from .generic import GenericProvider
from .kilo import KiloProvider
from .kimi import KimiProvider
from .opencode import OpencodeProvider
from .qwen import QwenProvider

__all__ = ["PROVIDERS", "AutoProvider", "make_provider", "Provider", "Answer", "LiveEvent"]

#: Specific providers, in detection order. ``generic`` is the fallback, never detected.
#: The Claude-shaped formats (Qwen Code, Amp, Cursor) and Droid (whose ``system`` init
#: looks like Claude's and whose ``message`` type is Gemini's too) are asked before
#: Claude and claim a stream only by what Claude never prints. Kilo prints opencode's
#: stream unchanged: it is chosen by name only.
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


class AutoProvider(Provider):
    """Detects the format from the first events, then delegates to its provider.

    Until it knows, it keeps what any provider keeps and every type no
    provider knows (the generic provider may need it), and skips the types
    some provider knows to be bulky. Records seen before detection (at most
    ``DETECT_EVENTS``) are replayed into the chosen provider, so nothing is
    read twice.
    """

    name: ClassVar[str] = "auto"

    def __init__(self, candidates: list[type[Provider]] | None = None) -> None:
        super().__init__()
        self.candidates = list(candidates if candidates is not None else PROVIDERS.values())
        self.chosen: Provider | None = None
        self._buffer: list[Record] = []
        self._keep, self._note, self._known = _unions(tuple(self.candidates))

    @property
    def provider_name(self) -> str:
        return self.chosen.name if self.chosen is not None else "auto"

    def retain(self, key: str) -> int:
        if self.chosen is not None:
            return self.chosen.retain(key)
        if key in self._keep:
            return KEEP
        if key in self._note:
            return NOTE
        if key in self._known:
            return SKIP
        return KEEP

    def _choose(self, cls: type[Provider]) -> list[LiveEvent]:
        chosen = self.chosen = cls()
        chosen.max_text = self.max_text
        chosen.tool_output = self.tool_output
        chosen.live = self.live
        buffered, self._buffer = self._buffer, []
        live: list[LiveEvent] = []
        for rec in buffered:
            live.extend(_dispatch(chosen, rec))
        return live

    def _see(self, rec: Record) -> list[LiveEvent]:
        if self.chosen is not None:
            return _dispatch(self.chosen, rec)
        self._buffer.append(rec)
        if not isinstance(rec, Dropped):
            for cls in self.candidates:
                if cls.detect(rec):
                    return self._choose(cls)
        if len(self._buffer) >= _limits.DETECT_EVENTS:
            return self._choose(FALLBACK)
        return []

    def see(self, rec: Record) -> list[LiveEvent]:
        if self.chosen is not None:  # straight to the chosen provider, which keeps the verdict facts
            return self.chosen.see(rec)
        return self._see(rec)

    def event(self, ev: Event) -> list[LiveEvent]:
        return self._see(ev)

    def noted(self, rec: Noted) -> list[LiveEvent]:
        return self._see(rec)

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        return self._see(rec)

    def settle(self) -> list[LiveEvent]:
        """End of stream before detection: the generic provider takes what was seen."""
        if self.chosen is None:
            return self._choose(FALLBACK)
        return []

    def answer(self) -> Answer:
        self.settle()
        assert self.chosen is not None
        return self.chosen.answer()

    def conclude(self) -> Answer:
        self.settle()
        assert self.chosen is not None
        return self.chosen.conclude()


@functools.lru_cache(maxsize=32)
def _unions(candidates: tuple[type[Provider], ...]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The kept, noted and known type keys of a set of providers (made once per set, not per run)."""
    keep: frozenset[str] = frozenset().union(*(c.keep for c in candidates))
    note = frozenset().union(*(c.note for c in candidates)) - keep
    known = frozenset().union(*(c.known | c.keep | c.note for c in candidates))
    return keep, note, known


def _dispatch(provider: Provider, rec: Record) -> list[LiveEvent]:
    return provider.see(rec)
