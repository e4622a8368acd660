"""A kept line too long to hold twice: held in a file, decoded in pieces.

A short kept line is decoded whole by orjson. Decoded that way a long one (an
agent's final answer of tens of MiB) costs about three times its size at the
peak: the raw line, orjson's unescape buffer and the decoded text are alive
together. Past ``SPILL_BYTES`` the scanner appends the line to a nameless file
where the spools go instead (:class:`Spill`), and at its end :func:`decode`
reads it back a window at a time:

1. one pass splits the line into a *skeleton* (the line with each string
   longer than ``LONG_STRING`` raw bytes replaced by a short placeholder) and
   the byte spans of those long strings;
2. the skeleton is decoded like any line (it is small);
3. each long string is decoded a piece at a time, cut where no escape and no
   UTF-8 sequence is split, twice: once to learn its length and its widest
   character, then into a ``str`` made at that size once and filled in place.

The peak is the decoded text plus a few windows, whatever the line's length.
Making a ``str`` and then filling it is how CPython's own decoders build one
(``PyUnicode_New``); it is reached through ``ctypes`` and checked at its first
use against strings of every width. Where that check fails (another interpreter),
the pieces are joined instead: about twice the text at the peak.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from .. import _limits
from .._regex import regex

__all__ = ["Spill", "OpenSpill", "decode", "LongStringError"]

#: Read window while splitting a line and size of a long string's pieces (13 bytes at least: a cut
#: steps back over a UTF-8 sequence or an escape pair, 12 bytes, and must still leave a piece). A piece
#: is held about four times while it is decoded (read, quoted, orjson's unescape buffer, its text): at
#: 256 KiB that is 1 MiB beside the string being filled (at 1 MiB pieces a 17 MiB answer peaked at 1.63x).
_WINDOW = 1 << 18
#: Bytes read past a piece's end to see whether an escape continues there.
_LOOKAHEAD = 16
_QUOTE, _BACKSLASH = 0x22, 0x5C

Read = Callable[[int, int], bytes]


class LongStringError(ValueError):
    """A long string that no decoder reads (the line is then not JSON)."""


class Spill:
    """A nameless file a long line is appended to, read back with ``pread``.

    Whoever hands it in makes the file (where spools go: it takes disk, never memory, wherever they do) and
    says how to close it (a large file's close frees its blocks, which a supervising thread must not wait for).
    """

    def __init__(self, file: IO[bytes], close: Callable[[IO[bytes]], None]) -> None:
        self._file = file
        self._close = close
        self._fd = file.fileno()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
            self.size += n

    def read(self, offset: int, size: int) -> bytes:
        out = os.pread(self._fd, size, offset)
        while len(out) < size:  # a short read is legal even from a regular file
            more = os.pread(self._fd, size - len(out), offset + len(out))
            if not more:
                raise OSError(f"spill file ended at {offset + len(out)} of {self.size} bytes")
            out += more
        return out

    def close(self) -> None:
        self._close(self._file)


#: Makes a spill file in a directory (``None``: where spools go by default); raises ``OSError`` or
#: :class:`~spoolparse.errors.SpoolFullError` when there is no room for one.
OpenSpill = Callable[[str | None], Spill]


# -- 1. skeleton and spans ----------------------------------------------------

# A placeholder no real string equals: a NUL, a per-process random token, the span's index.
_TOKEN = "\x00spoolparse-long-" + os.urandom(8).hex() + "-"  # (not secrets: it loads OpenSSL, 4 MiB)
_TOKEN_JSON = b'"\\u0000' + _TOKEN[1:].encode()


# A string's body up to its closing quote: runs of plain bytes and whole escapes, in C. It stops at the
# closing quote, at the window's end, or at a backslash that is the window's last byte (its escape goes on).
# Possessive repeats (Python 3.11+) never keep backtracking points: five times faster on escape-dense text.
if sys.version_info >= (3, 11):
    _BODY = regex(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
else:  # Python 3.10
    _BODY = regex(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)


def split(read: Read, size: int, long_string: int) -> tuple[bytes, list[tuple[int, int]]]:
    """The skeleton of the line ``read(0, size)`` and the spans ``[start, end)`` of its long strings' contents."""
    skel = bytearray()
    spans: list[tuple[int, int]] = []
    in_str = escaped = False  # inside a string; the last window ended on the backslash of an escape
    held: bytearray | None = None  # a string's raw bytes while it is short enough to copy
    start = 0  # where the open string's content starts
    base = 0
    while base < size:
        chunk = read(base, min(_WINDOW, size - base))
        i, n = 0, len(chunk)
        while i < n:
            if not in_str:
                q = chunk.find(b'"', i)
                if q < 0:
                    skel += chunk[i:]
                    break
                skel += chunk[i:q]
                in_str, held, start = True, bytearray(b'"'), base + q + 1
                i = q + 1
                continue
            if escaped:  # the escaped byte opens this window: it is part of the string whatever it is
                stop, escaped = i + 1, False
            else:
                stop = _BODY.match(chunk, i).end()  # type: ignore[union-attr] # it matches the empty string
                if stop < n and chunk[stop] == _BACKSLASH:  # the window's last byte: its escape goes on
                    stop, escaped = n, True
            if held is not None:
                held += chunk[i:stop]
                if len(held) > long_string:
                    held = None
            i = stop
            if i == n or escaped or chunk[i] != _QUOTE:
                continue  # more of the string follows (in this window or the next)
            if held is not None:
                held.append(_QUOTE)
                skel += held
            else:
                skel += _TOKEN_JSON + b'%d"' % len(spans)
                spans.append((start, base + i))
            in_str, held = False, None
            i += 1
        base += n
    if in_str:  # cut inside a string: the skeleton stays as broken as the line
        skel += held if held is not None else b'"'
    return bytes(skel), spans


# -- 2. a long string, a piece at a time --------------------------------------


def _starts_escape(raw: bytes, k: int) -> bool:
    """Whether the backslash ``raw[k]`` starts an escape (``raw`` starts at a token)."""
    j = k
    while j > 0 and raw[j - 1] == _BACKSLASH:
        j -= 1
    return (k - j) % 2 == 0


def _high_surrogate(raw: bytes, k: int) -> bool:
    """Whether an escape starting at ``raw[k]`` is the first half of a surrogate pair."""
    return raw[k + 1 : k + 2] == b"u" and raw[k + 2 : k + 3] in b"dD" and raw[k + 3 : k + 4] in b"89abAB"


def _cut(raw: bytes, want: int) -> int:
    """A place at or before ``want``, after ``0``, that splits no escape, surrogate pair or UTF-8 sequence.

    ``raw`` starts where a piece may start (the string's start or an earlier
    cut) and holds at least 12 bytes past ``want``.
    """
    c = want
    for _ in range(3):  # a UTF-8 sequence has at most three continuation bytes
        if c > 1 and 0x80 <= raw[c] <= 0xBF:
            c -= 1
    b = raw.rfind(b"\\", max(0, c - 6), c)
    if b < 0 or not _starts_escape(raw, b):
        return c  # no escape (6 bytes at most) reaches across c, or the last one is a \\ that ends before it
    end = b + (6 if raw[b + 1 : b + 2] == b"u" else 2)
    if c >= end and not (c == end and _high_surrogate(raw, b)):
        return c
    # cut before the escape at b, and before a high surrogate that ends there (the pair stays whole)
    if b >= 6 and raw[b - 6] == _BACKSLASH and _high_surrogate(raw, b - 6) and _starts_escape(raw, b - 6):
        b -= 6
    if b > 0:
        return b
    # the piece's first token (only in a window shorter than an escape pair): take it whole
    end = 6 if raw[1:2] == b"u" else 2
    return end + 6 if _high_surrogate(raw, 0) and raw[end : end + 2] == b"\\u" else end


def _pieces(read: Read, start: int, end: int) -> Iterator[bytes]:
    pos = start
    while pos < end:
        raw = read(pos, min(end, pos + _WINDOW + _LOOKAHEAD) - pos)
        c = _cut(raw, _WINDOW) if pos + _WINDOW < end else len(raw)
        yield raw[:c]
        pos += c


def _piece_text(raw: bytes, read_json: Callable[[bytes], Any]) -> str:
    """One piece decoded as a JSON string by the line's own reader (orjson, then its fallbacks)."""
    value = read_json(b'"' + raw + b'"')
    if not isinstance(value, str):
        raise LongStringError("a long string no decoder reads")
    return value


_ABOVE_1 = regex("[^\x00-\xff]")
_ABOVE_2 = regex("[^\x00-\uffff]")
_ENCODING = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}


def _widest(text: str) -> int:
    """The largest code point class in ``text``, as ``PyUnicode_New`` takes it."""
    if text.isascii():
        return 0x7F
    if _ABOVE_1.search(text) is None:
        return 0xFF
    if _ABOVE_2.search(text) is None:
        return 0xFFFF
    return 0x10FFFF


class _Filler:
    """Make a ``str`` of a given length and width and fill it in place (CPython)."""

    def __init__(self) -> None:
        import ctypes

        new = ctypes.pythonapi.PyUnicode_New
        new.restype = ctypes.py_object
        new.argtypes = (ctypes.c_ssize_t, ctypes.c_uint32)
        self._new = new
        self._memmove = ctypes.memmove

    def build(self, length: int, widest: int, texts: Iterator[str]) -> str:
        kind = 1 if widest <= 0xFF else 2 if widest <= 0xFFFF else 4
        out: str = self._new(length, widest)
        # a fresh compact str: its characters follow its header, (length + 1) * kind bytes with the NUL
        data = id(out) + sys.getsizeof(out) - (length + 1) * kind
        encoding = _ENCODING[kind]
        pos = 0
        for text in texts:
            if pos + len(text) > length:
                raise LongStringError("a long string decoded longer the second time")
            raw = text.encode(encoding, "surrogatepass")
            self._memmove(data + pos * kind, raw, len(raw))
            pos += len(text)
        if pos != length:
            raise LongStringError("a long string decoded shorter the second time")
        return out


def _check(filler: _Filler) -> bool:
    samples = ["plain ascii", "caf\xe9 \xff", "\u20ac and \u0100", "emoji \U0001f600 \u20ac \xe9"]
    for sample in samples:
        parts = [sample[: len(sample) // 2], sample[len(sample) // 2 :]]
        made = filler.build(len(sample), max(_widest(p) for p in parts), iter(parts))
        if made != sample or hash(made) != hash(sample) or made.encode() != sample.encode():
            return False
    return True


def _make_filler() -> _Filler | None:
    try:
        filler = _Filler()
        return filler if _check(filler) else None
    except Exception:  # no ctypes, no pythonapi, another layout: join the pieces instead
        return None


_FILLER: _Filler | bool | None = False  # made and checked at the first long string (ctypes loads then)


def filler() -> _Filler | None:
    global _FILLER
    if _FILLER is False:
        _FILLER = _make_filler() if sys.implementation.name == "cpython" else None
    assert _FILLER is not True
    return _FILLER


def long_string(read: Read, start: int, end: int, read_json: Callable[[bytes], Any]) -> str:
    """The decoded JSON string whose raw contents (no quotes) are ``read(start, end - start)``."""
    fill = filler()
    if fill is None:
        return "".join(_piece_text(p, read_json) for p in _pieces(read, start, end))
    length, widest = 0, 0x7F
    for piece in _pieces(read, start, end):
        text = _piece_text(piece, read_json)
        length += len(text)
        widest = max(widest, _widest(text))
    return fill.build(length, widest, (_piece_text(p, read_json) for p in _pieces(read, start, end)))


# -- 3. the whole line --------------------------------------------------------


def _substitute(obj: Any, values: dict[str, str]) -> Any:
    """``obj`` with each placeholder (as a value or a key) replaced by its long string."""
    if isinstance(obj, str):
        return values.get(obj, obj)
    left = len(values)
    stack = [obj]
    while stack and left:
        item = stack.pop()
        if isinstance(item, dict) and any(k in values for k in item):
            pairs = [(values.get(k, k), v) for k, v in item.items()]
            left -= sum(1 for k, _ in item.items() if k in values)
            item.clear()
            item.update(pairs)
        slots = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for k, v in slots:
            if isinstance(v, str):
                if v in values:
                    item[k] = values[v]  # a value replaced in place: the dict's size does not change
                    left -= 1
            elif isinstance(v, (dict, list)):
                stack.append(v)
    return obj


def decode(
    read: Read,
    size: int,
    decode_small: Callable[[bytes], Any],
    read_json: Callable[[bytes], Any],
    *,
    long_string_bytes: int | None = None,
) -> Any:
    """The line ``read(0, size)`` decoded as ``decode_small`` would decode it whole, or ``None``.

    ``decode_small`` reads the skeleton (and says ``None`` for a line that is
    not a JSON object); ``read_json`` reads a piece of a long string (with its quotes) as lines are read.
    Raises :class:`LongStringError` when a long string cannot be read.
    """
    skeleton, spans = split(read, size, _limits.LONG_STRING if long_string_bytes is None else long_string_bytes)
    obj = decode_small(skeleton)
    del skeleton
    if obj is None or not spans:
        return obj
    values = {f"{_TOKEN}{i}": long_string(read, a, b, read_json) for i, (a, b) in enumerate(spans)}
    return _substitute(obj, values)
