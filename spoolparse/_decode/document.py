"""Whole-document JSON output: one pretty-printed object, or a top-level array of events.

``claude --output-format json`` and ``gemini -o json`` print one object, and
some tools print their events as one JSON array spread over many lines. These
are not JSON lines, so :func:`sniff` tells them apart from the first
non-blank bytes of the stream, and :class:`DocumentScanner` turns them into the
same records the line scanner gives (one per array item, or one for the
object), so a provider folds them unchanged.

Bounds: a document up to ``max_retained`` bytes is held and decoded whole with
the scanner's ``loads``. Past that, an array is streamed item by item through
ijson's push interface, behind a byte-level pre-scan that

* holds an open string back until it closes and hands it to ijson in one
  piece (ijson copies a pending token on every push, so a long string fed in
  windows costs time quadratic in its length);
* stops an item that grows past ``max_retained``: its rest is skipped, and
  ijson sees the item closed where it was cut, so it is reported as
  :class:`~spoolparse.lines.Dropped` by its type, never folded.

So the memory of the streaming path is ``max_retained`` (the item being built)
plus one read window. An object past ``max_retained`` is drained and reported
dropped.

A document whose brackets are still open where the stream ends was cut off
(a killed CLI, a full disk): :attr:`DocumentScanner.cut_off` says so, for the
verdict, and an array held whole is then read item by item as a streamed one
is, so the items before the cut are not lost with it.

.. seealso:: :class:`spoolparse.lines.LineScanner`, the line-by-line path.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from .. import _limits
from .._regex import regex
from . import ijson_lazy
from .probe import key_of, probe_type
from .reading import TOO_DEEP, lenient_loads
from .records import KEEP, NOTE, Buffer, Dropped, Event, Loads, Noted, Record
from .scanner import LineScanner

__all__ = ["sniff", "DocumentScanner", "LINES", "DOCUMENT"]

LINES: Final = "lines"
DOCUMENT: Final = "document"

_BLANK = b" \t\r\n\x1e"
_BOM = b"\xef\xbb\xbf"
# A whole string (skipped in one match), one of { } [ ] , or the quote of a string the window cuts.
_TOKEN = regex(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],]|"', re.S)
_CLOSE = {ord("{"): b"}", ord("["): b"]"}


def _skip_blank(head: bytes) -> int:
    i = 0
    while True:
        while i < len(head) and head[i] in _BLANK:
            i += 1
        if head.startswith(_BOM, i):
            i += 3
            continue
        return i


def sniff(head: bytes, *, final: bool = False) -> str | None:
    """``LINES`` or ``DOCUMENT`` from a stream's first bytes; ``None`` when more are needed.

    A document starts with ``[`` then ``{`` or ``]`` (an array of events), or
    with a ``{`` alone on its line (how every pretty-printer starts an object).
    Anything else is JSON lines. ``final``: no more bytes will come.
    """
    i = _skip_blank(head)
    if i >= len(head):
        return LINES if final else None
    first = head[i]
    if first == ord("["):
        # An array of events, not a bracketed banner such as "[SandboxDebug] …".
        j = i + 1 + _skip_blank(head[i + 1 :])
        if j >= len(head):
            return DOCUMENT if final else None
        return DOCUMENT if head[j] in b"{]" else LINES
    if first != ord("{"):
        return LINES
    j = i + 1
    while j < len(head) and head[j] in b" \t\r":
        j += 1
    if j >= len(head):
        return DOCUMENT if final else None
    return DOCUMENT if head[j] == ord("\n") else LINES


@dataclass(slots=True)
class _Item:
    """A top-level array item between the pre-scan (size, cut) and ijson (its value)."""

    size: int = -1
    cut: bool = False
    done: bool = False  # ijson has produced it
    value: Any = None


class _ArrayStream:
    """The pre-scan and the ijson push parser for an array past ``max_retained``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        ijson = ijson_lazy.module()
        self.sink = ijson.sendable_list()
        self.coro = ijson.items_coro(self.sink, "item", use_float=True)
        self.offset = 0  # stream offset of the next byte
        self.depth = 0
        self.stack = bytearray()  # the open levels of the current item
        self.in_str = False
        self.esc = False  # an open string's last byte so far is an unpaired backslash
        self.str_start = 0  # stream offset of the open string's quote
        self.str_out = 0  # where the open string begins in ``out`` (-1: it was cut)
        self.item_start = 0
        self.skipping = False  # the current item was cut: drop its bytes until it closes
        self.items: deque[_Item] = deque()
        self.produced = 0  # how many of ``items`` ijson has produced
        self.current: _Item | None = None
        self.hold = bytearray()

    def feed(self, data: bytes) -> None:
        out = self.hold
        self.hold = bytearray()
        n, base = len(data), self.offset
        i = emit = 0  # data[emit:] is not in ``out`` yet: untouched stretches are copied once, at the end
        while i < n:
            if self.in_str:
                i = emit = self._string(data, i, n, base, out)
                continue
            i = n
            for m in _TOKEN.finditer(data, emit):
                k = m.start()
                c = data[k]
                if c == 0x22:  # "
                    e = m.end()
                    if e - k > 1:  # a whole string in this window
                        if not self.skipping and base + e - self._budget_start(base + k) > self.limit:
                            out += data[emit:k]
                            out += b'""'
                            emit = e
                            if self.current is not None:
                                self.current.cut = True
                        continue
                    # A string still open at the window's end: follow it across windows.
                    if not self.skipping:
                        out += data[emit:k]
                        self.str_out = len(out)
                        out.append(c)
                    self.in_str, self.esc, self.str_start = True, False, base + k
                    i = emit = k + 1
                    break
                emit = self._struct(c, k, base, data, emit, out)
        self.offset = base + n
        if not self.skipping:
            out += data[emit:n]
        if self.in_str and self.str_out >= 0 and not self.skipping:
            # Keep the open string back: it goes to ijson whole, in one push.
            self.hold = out[self.str_out :]
            del out[self.str_out :]
            self.str_out = 0
        if out:
            self.coro.send(bytes(out))

    def _budget_start(self, string_start: int) -> int:
        return self.item_start if self.depth >= 2 else string_start

    def _string(self, data: bytes, i: int, n: int, base: int, out: bytearray) -> int:
        j = i
        while True:
            q = data.find(b'"', j, n)
            if q < 0:
                break
            run = 0
            p = q - 1
            while p >= i and data[p] == 0x5C:
                run += 1
                p -= 1
            if p < i and self.esc:
                run += 1
            if run % 2 == 0:
                break
            j = q + 1
        end = n if q < 0 else q + 1
        keep = self.str_out >= 0 and not self.skipping
        if keep:
            out += data[i:end]
        if q < 0:
            run = len(data[i:n]) - len(data[i:n].rstrip(b"\\"))
            self.esc = (run + (1 if self.esc and run == n - i else 0)) % 2 == 1
        else:
            self.in_str = False
            self.esc = False
        if keep and base + end - self._budget_start(self.str_start) > self.limit:
            # Too long to hand to ijson (or to keep): the string becomes "" and its item is dropped.
            del out[self.str_out :]
            self.str_out = -1
            if self.current is not None:
                self.current.cut = True
        if not self.in_str and self.str_out < 0:
            if not self.skipping:
                out += b'""'
            self.str_out = 0
        return end

    def _struct(self, c: int, k: int, base: int, data: bytes, emit: int, out: bytearray) -> int:
        """Track one of ``{ [ } ] ,`` at ``data[k]``; return the new ``emit`` mark."""
        at = base + k
        if c == 0x7B or c == 0x5B:  # { [
            self.depth += 1
            if self.depth == 2:
                self.item_start = at
                self.stack = bytearray()
                self.current = _Item()
                self.items.append(self.current)
            if self.depth >= 2 and not self.skipping:  # (a cut item's levels were closed at the cut)
                self.stack.append(c)
        elif c == 0x7D or c == 0x5D:  # } ]
            if self.depth >= 2 and self.stack and not self.skipping:
                self.stack.pop()
            self.depth -= 1
            if self.depth == 1 and self.current is not None:
                self.current.size = at + 1 - self.item_start
                # Past the ceiling in its last bytes (numbers, literals): dropped like any longer item.
                self.current.cut |= self.current.size > self.limit
                self.current = None
                if self.skipping:
                    self.skipping = False
                    return k + 1  # its closers were sent when it was cut
        if self.skipping or self.depth < 2 or self.current is None or at + 1 - self.item_start <= self.limit:
            return emit
        # Close the item here for ijson (valid after any of , { [ } ]) and skip its rest.
        out += data[emit:k] if c == 0x2C else data[emit : k + 1]
        out += b"".join(_CLOSE[x] for x in reversed(self.stack))
        self.stack = bytearray()  # the levels it held are closed: what follows of the item is only counted
        self.current.cut = True
        self.skipping = True
        return k + 1

    def close(self) -> None:
        if self.hold:
            self.coro.send(bytes(self.hold))
            self.hold = bytearray()
        self.coro.close()


class DocumentScanner:
    """The records of a whole JSON document, fed in any chunks.

    It shares the line scanner's retain function, bounds and counters
    (``lines`` counts the array items, or 1 for an object), so the caller
    reads one set of numbers whichever path the stream took.

    .. seealso:: :func:`sniff`, which picks this scanner in :class:`~spoolparse.StreamParser`.
    """

    def __init__(self, scanner: LineScanner, *, loads: Loads | None = None) -> None:
        self.scanner = scanner
        self._loads = loads
        self._whole: bytearray | None = bytearray()
        self._array: _ArrayStream | None = None
        self._head = b""  # the document's first bytes, to name an object drained unread
        self._size = 0
        self._broken = False
        self._closed = False
        #: Why the document is not whole (its brackets still open where the stream ended), or ``None``.
        self.cut_off: str | None = None

    # The line scanner's counters are the parser's counters.
    def _count_invalid(self) -> None:
        self.scanner.invalid_lines += 1

    def feed(self, buf: Buffer, start: int = 0, end: int | None = None) -> list[Record]:
        if end is None:
            end = len(buf)
        out: list[Record] = []
        if end <= start:
            return out
        self.scanner.bytes += end - start
        step = _limits.READ_CHUNK
        for a in range(start, end, step):
            self._feed(bytes(buf[a : min(end, a + step)]), out)
        return out

    def _feed(self, data: bytes, out: list[Record]) -> None:
        if self._broken:
            return
        self._size += len(data)
        if len(self._head) < _limits.PROBE_BYTES:
            self._head += data[: _limits.PROBE_BYTES - len(self._head)]
        if self._whole is not None:
            self._whole += data
            if len(self._whole) <= self.scanner.max_retained:
                return
            whole, self._whole = self._whole, None
            i = _skip_blank(bytes(whole[: _limits.PROBE_BYTES]))
            if whole[i : i + 1] == b"[":
                self._array = _ArrayStream(self.scanner.max_retained)
                step = _limits.READ_CHUNK
                for a in range(i, len(whole), step):
                    self._push(bytes(whole[a : a + step]), out)
            return
        if self._array is not None:
            self._push(data, out)

    def _push(self, data: bytes, out: list[Record]) -> None:
        assert self._array is not None
        try:
            self._array.feed(data)
        except (ijson_lazy.module().JSONError, UnicodeDecodeError):  # yajl cannot decode a lone surrogate escape
            # The items before the bad bytes still count; the rest of the document is not read.
            self._broken = True
            self._count_invalid()
            self._settle(out)
            return
        self._drain(out)

    def _settle(self, out: list[Record]) -> None:
        """The document ended (or broke): report what ijson produced, an item cut short as dropped."""
        arr = self._array
        if arr is None:
            return
        self._drain(out)
        for it in arr.items:
            if it.done:
                size = it.size if it.size >= 0 else arr.offset - arr.item_start
                self._emit(it.value, size, out, cut=True)
        self._array = None

    def _drain(self, out: list[Record]) -> None:
        arr = self._array
        if arr is None:
            return
        sink, items = arr.sink, arr.items
        for value in sink:
            if isinstance(value, (dict, list)):
                # Items come out of ijson in the order the pre-scan opened them: the done ones are a prefix.
                if arr.produced >= len(items):  # never for a document ijson accepted; counted, not raised
                    self.scanner.lines += 1
                    self._count_invalid()
                    continue
                it = items[arr.produced]
                it.done, it.value = True, value
                arr.produced += 1
            else:
                self.scanner.lines += 1
                self._count_invalid()
        sink.clear()
        while items and items[0].done and items[0].size >= 0:
            it = items.popleft()
            arr.produced -= 1
            self._emit(it.value, it.size, out, cut=it.cut)

    def end(self) -> list[Record]:
        out: list[Record] = []
        if self._closed:
            return out
        self._closed = True
        if self._broken:
            return out
        if self._whole is not None:
            whole, self._whole = self._whole, None
            self._decode_whole(whole, out)  # an array cut off goes on below, as a streamed one
            if self._broken or self._array is None:
                return out
        if self._array is not None:
            arr = self._array
            if arr.depth > 0 or arr.in_str:
                self._cut("array", b"]", partial=arr.current is not None)
            try:
                arr.close()
            except (ijson_lazy.module().JSONError, UnicodeDecodeError):
                if self.cut_off is None:  # a document cut off is said as such, not as a bad line
                    self._count_invalid()
            self._settle(out)
        else:
            key = probe_type(self._head) or ""
            self.scanner.lines += 1
            out.append(Dropped(1, self._size, key, "over_ceiling" if self.scanner.retain(key) == KEEP else "oversize"))
        return out

    def _cut(self, what: str, closer: bytes, *, partial: bool) -> None:
        """The document ends before its closing bracket: say so; an item (or the object) it cuts is a line that
        could not be read."""
        self.cut_off = (f"the JSON document is cut off: the {what} ends after {self._size} bytes, before its "
                        f"closing {closer.decode()}")
        if partial:
            self.scanner.lines += 1
            self._count_invalid()

    def _decode_whole(self, data: bytearray, out: list[Record]) -> None:
        start = _skip_blank(bytes(data[: _limits.PROBE_BYTES]))
        view = memoryview(data)[start:]  # orjson reads it in place: no second copy of the document
        try:
            doc = self._loads(bytes(view)) if self._loads is not None else _orjson_loads(view)
        except Exception:  # a bad document is counted, never raised
            # valid JSON orjson refuses (a lone surrogate escape, invalid UTF-8 in a string) is
            # read as a kept line would be, rather than losing the whole document
            doc = lenient_loads(bytes(view)) if self._loads is None else None
            if doc is None and _open_at_end(view):
                self._read_cut_off(data, start, out)
                return
            if doc is None or doc is TOO_DEEP:
                if doc is TOO_DEEP:
                    self.scanner.too_deep += 1
                self._count_invalid()
                return
        finally:
            view.release()
        if isinstance(doc, list):
            for item in doc:
                self._emit(item, _size_of(item), out)
        else:
            end = len(data)
            while end > start and data[end - 1] in _BLANK:
                end -= 1
            self._emit(doc, end - start, out)

    def _read_cut_off(self, data: bytearray, start: int, out: list[Record]) -> None:
        """A document held whole that ends before its brackets close: an array is read as a streamed one is (the
        items before the cut are had, :meth:`end` says the rest); an object is one line that could not be read."""
        if data[start : start + 1] != b"[":
            self._cut("object", b"}", partial=True)
            return
        self._array = _ArrayStream(self.scanner.max_retained)
        step = _limits.READ_CHUNK
        for a in range(start, len(data), step):
            self._push(bytes(data[a : a + step]), out)
        if self._broken:  # not JSON before the cut (counted): still an array that never closed
            self._cut("array", b"]", partial=False)

    def _emit(self, value: Any, size: int, out: list[Record], *, cut: bool = False) -> None:
        sc = self.scanner
        sc.lines += 1
        if not isinstance(value, dict):
            sc.invalid_lines += 1
            return
        key = key_of(value)
        decision = sc.retain(key)
        if cut:
            out.append(Dropped(sc.lines, size, key, "over_ceiling" if decision == KEEP else "oversize"))
        elif decision == KEEP:
            out.append(Event(sc.lines, key, value, size))
        elif size > sc.max_line:
            out.append(Dropped(sc.lines, size, key, "oversize"))
        elif decision == NOTE:
            out.append(Noted(sc.lines, key, size))


def _open_at_end(data: bytes | memoryview) -> bool:
    """Whether a bracket (or a string) of the JSON text ``data`` is still open at its end: the text was cut off,
    not malformed before its end. Only a document that failed to decode is scanned (once)."""
    depth = 0
    for m in _TOKEN.finditer(data):  # a memoryview is searched in place
        c = data[m.start()]
        if c == 0x22:  # "
            if m.end() - m.start() == 1:
                return True  # a string the end cuts
        elif c == 0x7B or c == 0x5B:
            depth += 1
        elif c == 0x7D or c == 0x5D:
            depth -= 1
    return depth > 0


def _orjson_loads(data: bytes | memoryview) -> Any:
    import orjson

    return orjson.loads(data)


def _size_of(value: Any) -> int:
    """An item's size as compact JSON (the document itself may be pretty-printed)."""
    from .jsonout import dumps

    return len(dumps(value, non_str_keys=False))
