"""The type key of a JSON object fed in pieces, in bounded memory.

For lines too long to read whole (past ``max_line``) whose ``"type"`` is not
in the first bytes: JSON objects have no key order, and serializers that sort
keys or flatten structs put ``"type"`` anywhere. :class:`TopKeys` walks the
object's structure without building it: it tracks nesting depth and strings,
and keeps only short keys and values at the first two levels (the top-level
``type``, ``item.type``/``item.item_type`` and ``msg.type``). Memory is a few
hundred bytes whatever the line's size; big string values are skipped by one
C-level search per escape.
"""

from __future__ import annotations

import json
from typing import Final, Protocol

from .._regex import regex

__all__ = ["TopKeys"]

#: Longest key or type value captured; longer ones cannot be the keys looked for.
_CAP: Final = 256
_STRUCT = regex(rb'["{}\[\]:,]')
_IN_STRING = regex(rb'["\\]')
_KEY, _VALUE = 0, 1


class _Buf(Protocol):
    def __getitem__(self, index: slice, /) -> bytes | bytearray | memoryview: ...
    def __len__(self) -> int: ...


def _text(raw: bytes) -> str | None:
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    try:
        value = json.loads(b'"' + raw + b'"')
    except ValueError:
        return None
    if not isinstance(value, str):
        return None
    # a lone surrogate escape reads as U+FFFD, as in a decoded line
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class TopKeys:
    """Feed one line's bytes in order with :meth:`feed`; ``done`` once the type key is settled.

    ``top``, ``sub`` and ``msg`` are the top-level ``type``, the nested
    ``item.type`` (or ``item.item_type``) and ``msg.type`` found so far.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.capture: bytearray | None = None
        self.capture_role = _KEY
        self.is_obj = [False, False, False]  # per level 1..2
        self.expect = [_KEY, _KEY, _KEY]
        self.key: list[bytes | None] = [None, None, None]
        self.top: str | None = None
        self.sub: str | None = None
        self.msg: str | None = None
        self.done = False
        self.ended = False

    def _wants(self) -> tuple[bool, int]:
        """Whether the string starting now is captured, and as a key or a value."""
        d = self.depth
        if d == 1:
            if self.expect[1] == _KEY:
                return True, _KEY
            return self.key[1] == b"type", _VALUE
        if d == 2 and self.is_obj[2] and self.key[1] in (b"item", b"msg"):
            if self.expect[2] == _KEY:
                return True, _KEY
            return self.key[2] in (b"type", b"item_type"), _VALUE
        return False, _KEY

    def _string_done(self) -> None:
        cap, self.capture = self.capture, None
        if cap is None:
            return
        d = self.depth
        raw = bytes(cap) if len(cap) <= _CAP else None
        if self.capture_role == _KEY:
            text = _text(raw) if raw is not None else None
            self.key[d] = text.encode("utf-8", "replace") if text is not None else None
            return
        value = _text(raw) if raw is not None else None
        if value is None:
            return
        if d == 1:
            if self.top is None:
                self.top = value
        elif self.key[1] == b"item":
            if self.key[2] == b"type" or self.sub is None:
                self.sub = value
        elif self.key[2] == b"type" and self.msg is None:
            self.msg = value
        if self.top is not None and (self.sub is not None or not self.top.startswith("item.")):
            self.done = True

    def feed(self, buf: _Buf, start: int = 0, end: int | None = None) -> None:
        """Scan ``buf[start:end]`` (a piece of the line, in order)."""
        if end is None:
            end = len(buf)
        pos = start
        while pos < end and not self.done and not self.ended:
            if self.in_string:
                if self.escape:
                    if self.capture is not None and len(self.capture) <= _CAP:
                        self.capture += buf[pos : pos + 1]
                    self.escape = False
                    pos += 1
                    continue
                m = _IN_STRING.search(buf, pos, end)  # type: ignore[call-overload]
                stop = end if m is None else m.start()
                if self.capture is not None and len(self.capture) <= _CAP:
                    self.capture += buf[pos : min(stop, pos + _CAP + 1)]
                if m is None:
                    return
                pos = stop + 1
                if buf[stop : stop + 1] == b"\\":
                    if self.capture is not None and len(self.capture) <= _CAP:
                        self.capture += b"\\"
                    self.escape = True
                else:
                    self.in_string = False
                    self._string_done()
                continue
            m = _STRUCT.search(buf, pos, end)  # type: ignore[call-overload]
            if m is None:
                return
            c = m.group()
            pos = m.end()
            d = self.depth
            if c == b'"':
                self.in_string = True
                wanted, role = self._wants() if d in (1, 2) else (False, _KEY)
                self.capture = bytearray() if wanted else None
                self.capture_role = role
            elif c == b"{" or c == b"[":
                d = self.depth = d + 1
                if d <= 2:
                    self.is_obj[d] = c == b"{"
                    self.expect[d] = _KEY if c == b"{" else _VALUE
                    self.key[d] = None
            elif c == b"}" or c == b"]":
                self.depth = d - 1
                if self.depth <= 0:
                    self.ended = True
            elif c == b":":
                if d in (1, 2):
                    self.expect[d] = _VALUE
            elif d in (1, 2) and self.is_obj[d]:  # ","
                self.expect[d] = _KEY
