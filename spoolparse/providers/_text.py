"""A bounded text accumulator for answers that arrive in pieces (deltas, parts), and the text of an API message."""

from __future__ import annotations

from typing import Any

from .. import _limits

__all__ = ["BoundedText", "message_text"]


def message_text(message: Any) -> str | None:
    """The text blocks of an API message (Anthropic's shape), joined; ``None`` when it has none."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [
        b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "".join(parts) if parts else None


#: Characters of small pieces joined into one string as they come: a string object costs about 50 bytes besides its
#: text, so an answer streamed a character or two a delta would cost 30 times its text as separate pieces.
JOIN_CHARS = 4096


class BoundedText:
    """Pieces of text joined on demand, never more than ``limit`` characters in all.

    Past the limit the rest of the pieces are counted, not kept: ``cut`` is the
    number of characters left out. Small pieces are joined in runs of about
    ``JOIN_CHARS`` characters as they come, so the text costs about its size
    however finely it was cut.
    """

    def __init__(self, limit: int = _limits.MAX_RETAINED) -> None:
        self.limit = max(0, limit)
        self._parts: list[str] = []
        self._pending: list[str] = []  # the latest small pieces, joined into one part once they add up
        self._pending_size = 0
        self._size = 0
        self.cut = 0

    def add(self, piece: str) -> None:
        room = self.limit - self._size
        if len(piece) > room:
            self.cut += len(piece) - max(room, 0)
            piece = piece[: max(room, 0)]
        if piece:
            self._pending.append(piece)
            self._pending_size += len(piece)
            self._size += len(piece)
            if self._pending_size >= JOIN_CHARS:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._parts.append("".join(self._pending))
            self._pending.clear()
            self._pending_size = 0

    def clear(self) -> None:
        self._parts.clear()
        self._pending.clear()
        self._pending_size = 0
        self._size = 0
        self.cut = 0

    def __bool__(self) -> bool:
        return self._size > 0

    def __len__(self) -> int:
        return self._size

    def text(self) -> str:
        self._flush()
        if len(self._parts) > 1:
            # Join once and keep the joined string: answers are read more than once.
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""
