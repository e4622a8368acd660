"""What the line scanner hands on: the decisions a retain function makes and the records of the lines.

A *retain* function maps a line's type key to :data:`SKIP` (count the line,
touch nothing else), :data:`NOTE` (report the key and size, undecoded) or
:data:`KEEP` (decode it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol, Union

__all__ = ["SKIP", "NOTE", "KEEP", "RetainFn", "Loads", "Buffer", "Event", "Noted", "Dropped", "Record"]

SKIP: Final = 0
NOTE: Final = 1
KEEP: Final = 2

RetainFn = Callable[[str], int]
Loads = Callable[[bytes | str], Any]


class Buffer(Protocol):
    """What the scanner needs of a buffer: ``bytes``, ``bytearray`` and ``mmap`` all fit."""

    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
    def rfind(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
    def __getitem__(self, index: slice, /) -> bytes | bytearray: ...
    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Event:
    """A kept line, decoded: ``data`` is the JSON object."""

    lineno: int
    type: str
    data: dict[str, Any]
    size: int


@dataclass(frozen=True, slots=True)
class Noted:
    """A line reported by its type key and size, never decoded here.

    ``head`` and ``tail`` are its first ``NOTE_HEAD`` and last ``NOTE_TAIL``
    bytes (the whole line when it is that short): enough for a provider to
    name a tool call without touching its output.
    """

    lineno: int
    type: str
    size: int
    head: bytes = b""
    tail: bytes = b""


@dataclass(frozen=True, slots=True)
class Dropped:
    """A line that was not kept because of its size.

    ``reason`` is ``"oversize"`` (longer than ``max_line`` and not retained),
    ``"over_ceiling"`` (retained, but longer than ``max_retained``),
    ``"invalid"`` (retained by its type, but not a JSON object: also counted in
    ``invalid_lines``) or ``"unreadable"`` (retained and held in a spill file
    that could not be read back). ``line`` is 1-based; ``bytes`` excludes the
    line ending.
    """

    line: int
    bytes: int
    type: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "bytes": self.bytes, "type": self.type, "reason": self.reason}


Record = Union[Event, Noted, Dropped]  # noqa: UP007 - a runtime alias on 3.10
