"""A bounded text accumulator for answers that arrive in pieces (deltas, parts)."""

from __future__ import annotations

__all__ = ["BoundedText"]


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
