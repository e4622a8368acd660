"""What closes is its own context manager: ``with`` gives it back and closes it at the block's end."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["Closing"]

_C = TypeVar("_C", bound="Closing")


class Closing:
    """A base for values with a ``close()``: a reader, a result's spools, a batch. ``with x:`` closes ``x``
    however the block ends, and never hides the block's exception."""

    __slots__ = ()

    def close(self) -> object:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
