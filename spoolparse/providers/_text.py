"""A bounded text accumulator for answers that arrive in pieces (deltas, parts), and the text of an API message."""

from __future__ import annotations

from typing import Any

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


class BoundedText:
    """Pieces of text joined on demand, never more than ``limit`` characters in all.

    Past the limit the rest of the pieces are counted, not kept: ``cut`` is the
    number of characters left out.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self._parts: list[str] = []
        self._size = 0
        self.cut = 0

    def add(self, piece: str) -> None:
        room = self.limit - self._size
        if len(piece) > room:
            self.cut += len(piece) - max(room, 0)
            piece = piece[: max(room, 0)]
        if piece:
            self._parts.append(piece)
            self._size += len(piece)

    def clear(self) -> None:
        self._parts.clear()
        self._size = 0
        self.cut = 0

    def __bool__(self) -> bool:
        return bool(self._parts)

    def __len__(self) -> int:
        return self._size

    def text(self) -> str:
        if len(self._parts) > 1:
            # Join once and keep the joined string: answers are read more than once.
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""
