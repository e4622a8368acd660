"""The bounded line scanner: bytes in, records out (no I/O, no waiting).

A line is classified by its *type key* before anything is decoded:

* ``"T"`` for a top-level ``"type": "T"``;
* ``"T/S"`` when ``T`` starts with ``item.`` and the nested ``item.type``
  (or ``item.item_type``) is ``S`` (Codex items);
* ``"msg/S"`` for the legacy Codex envelope ``{"id": …, "msg": {"type": "S"}}``;
* ``""`` for an object with no type.

Key order does not matter. When the probe window holds no type (or a Codex
``item.*`` type without its nested item type), a line up to ``max_line`` is
decoded whole, once, and classified by its keys; a longer one is classified
by a bounded scan of its top-level keys (:class:`~spoolparse._topkeys.TopKeys`)
while it is drained, so it is never held past ``max_retained``.

A *retain* function maps the key to :data:`SKIP` (count the line, touch
nothing else), :data:`NOTE` (report the key and size, undecoded) or
:data:`KEEP` (decode it with ``loads``). Only kept lines are ever decoded, and
a line whose type is skipped is never buffered past the probe window, however
long it is. Memory per line is bounded by ``max_retained`` (a kept line) plus
the caller's read window.
"""

from __future__ import annotations

import decimal
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Final, Protocol, Union

import orjson

from . import _ijson, _limits, _longline
from ._topkeys import TopKeys
from .errors import SpoolFullError, UsageError

__all__ = [
    "SKIP",
    "NOTE",
    "KEEP",
    "Event",
    "Noted",
    "Dropped",
    "Record",
    "LineScanner",
    "LineReader",
    "iter_lines",
    "probe_type",
]

SKIP: Final = 0
NOTE: Final = 1
KEEP: Final = 2

RetainFn = Callable[[str], int]
Loads = Callable[[bytes | str], Any]


class Buffer(Protocol):
    """What the scanner needs of a buffer: ``bytes``, ``bytearray`` and ``mmap`` all fit."""

    def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
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

# Anchored on a line's first bytes. Every real agent CLI writes compact JSON
# with "type" first, so nearly every line is classified by this one match.
_FAST = re.compile(
    rb'[ \t\x1e]*(?:\xef\xbb\xbf)?[ \t]*\{[ \t]*"type"[ \t]*:[ \t]*"([^"\\]*)"'
    rb'(?:[ \t]*,[ \t]*"item"[ \t]*:[ \t]*\{[ \t]*"id"[ \t]*:[ \t]*"[^"\\]*"'
    rb'[ \t]*,[ \t]*"(?:item_)?type"[ \t]*:[ \t]*"([^"\\]*)")?'
)
# _FAST without the optional blanks, for the feed loop: on compact lines it
# yields the same groups, and since no class admits "\n" it cannot run past
# the line's end, so the loop needs no per-line bound on the match window.
_COMPACT = re.compile(rb'\{"type":"([^"\\\n]*)"(?:,"item":\{"id":"[^"\\\n]*","(?:item_)?type":"([^"\\\n]*)")?')
# The pre-2025-10 Codex envelope: {"id":"0","msg":{"type":"agent_message",...}}
_ENVELOPE = re.compile(
    rb'[ \t\x1e]*(?:\xef\xbb\xbf)?[ \t]*\{[ \t]*"id"[ \t]*:[ \t]*"[^"\\]*"[ \t]*,'
    rb'[ \t]*"msg"[ \t]*:[ \t]*\{[ \t]*"type"[ \t]*:[ \t]*"([^"\\]*)"'
)
_NOTE_HEAD = _limits.NOTE_HEAD
_NOTE_TAIL = _limits.NOTE_TAIL
#: Cached decisions past this many are no longer added to the SKIP pattern.
_SKIP_KEYS = 64


def _skip_pattern(cache: dict[tuple[bytes, bytes | None], tuple[str, int]]) -> re.Pattern[bytes] | None:
    """One anchored match for the compact lines whose cached decision is SKIP.

    It matches exactly where :data:`_COMPACT` would yield groups cached as
    SKIP, so a match settles a line with no group extraction or lookup.
    """
    tops: dict[bytes, list[bytes] | None] = {}
    for (top, sub), (_, decision) in cache.items():
        if decision != SKIP or b"\n" in top:
            continue
        if not top.startswith(b"item."):
            tops[top] = None  # the key is the top-level type whatever follows
        elif sub is not None and b"\n" not in sub:
            subs = tops.setdefault(top, [])
            if subs is not None:
                subs.append(sub)
    alts = [
        re.escape(top) + b'"'
        if subs is None
        else re.escape(top)
        + rb'","item":\{"id":"[^"\\\n]*","(?:item_)?type":"(?:'
        + b"|".join(re.escape(s) for s in subs)
        + b')"'
        for top, subs in tops.items()
    ]
    return re.compile(rb'\{"type":"(?:' + b"|".join(alts) + b")") if alts else None


_LEAD = b" \t\r\n\x1e"
#: A blank line (its newline aside): counted apart, not as invalid.
_BLANK_LINE = re.compile(rb"[ \t\r]*")
_BOM = b"\xef\xbb\xbf"

# Scanner modes for a line still waiting for its newline. _UNSURE: the probe window held
# no type, the line is held (it is decoded whole if it ends within max_line); _SCANNING:
# past max_line, the top-level keys are scanned for the type, the line held up to max_retained.
_NONE, _COLLECT, _KEEPING, _SKIPPING, _UNSURE, _SCANNING = 0, 1, 2, 3, 4, 5
#: A run of digits that may be an integer orjson would read as a float (beyond 64 bits), in a line translated
#: by _DIGITS (a digit is "1", any other byte "0"); a regex for it costs ten times as much.
_LONG_DIGITS = b"1" * 19
_DIGITS = bytes(0x31 if 0x30 <= i <= 0x39 else 0x30 for i in range(256))
#: Lines up to this long are searched for such a run before their object is walked for a float.
_SEARCH_FIRST = 4096


def _unsure(key: str) -> bool:
    """Whether a probe's key may be incomplete: no type seen, or an item type without its nested type."""
    return key == "" or (key.startswith("item.") and "/" not in key)


def _strip(data: bytes) -> bytes:
    data = data.strip(_LEAD)
    if data.startswith(_BOM):
        data = data[3:].strip(_LEAD)
    return data


def _compose(top: str | None, sub: str | None, msg: str | None) -> str:
    if top is not None:
        if sub is not None and top.startswith("item."):
            return f"{top}/{sub}"
        return top
    if msg is not None:
        return f"msg/{msg}"
    return ""


def probe_type(prefix: bytes) -> str | None:
    """The type key of a line from its first bytes, or ``None`` if it is not a JSON object.

    Decodes nothing but the few keys it looks for; a prefix cut anywhere is fine.
    """
    m = _FAST.match(prefix)
    if m is not None:
        top, sub = m.group(1, 2)
        if sub is not None or not top.startswith(b"item."):
            return _compose(top.decode("utf-8", "replace"), sub.decode("utf-8", "replace") if sub else None, None)
    m = _ENVELOPE.match(prefix)
    if m is not None:
        return "msg/" + m.group(1).decode("utf-8", "replace")
    data = _strip(prefix)
    if not data.startswith(b"{"):
        return None
    if b'type"' not in data and b"\\" not in data:
        # no "type" or "item_type" key can be here (an escaped key name would show its backslash):
        # an untyped object, told without the incremental parser's ~10 µs
        return ""
    # bad UTF-8 reads as U+FFFD here as in a kept line's decode, so it cannot hide the type
    return _probe_json(_ijson.module().parse, data.decode("utf-8", "replace").encode())


def _probe_json(parse: Callable[[IO[bytes]], Iterator[tuple[str, str, Any]]], data: bytes) -> str:
    top = sub = msg = None
    depth = 0  # ijson joins keys with dots: a top-level key "msg.type" has the path of msg's "type"
    try:
        for path, event, value in parse(io.BytesIO(data)):
            if event != "string":
                if event == "start_map" or event == "start_array":
                    depth += 1
                elif event == "end_map" or event == "end_array":
                    depth -= 1
                continue
            if path == "type":
                top = value
                if not top.startswith("item.") or sub is not None:
                    break
            elif depth != 2:
                continue
            elif path in ("item.type", "item.item_type"):
                sub = value
                if top is not None:
                    break
            elif path == "msg.type":
                msg = value
    except UnicodeDecodeError:
        if parse is not _ijson.python_parse():
            # yajl cannot decode a lone surrogate escape; the pure-Python parser can, and it reads as
            # U+FFFD, as in a kept line's decode
            key: str = _no_surrogates(_probe_json(_ijson.python_parse(), data))
            return key
    except Exception:
        key = _compose(top, sub, msg)
        if _unsure(key):
            # not JSON past some point (a bad escape or a raw control character before the type, or the window's
            # end): the key scan reads on through it, so a type after the bad bytes is still the line's type
            keys = TopKeys()
            keys.feed(data)
            return _compose(keys.top, keys.sub, keys.msg)
        return key
    return _compose(top, sub, msg)


def _default_loads(data: bytes | str) -> Any:
    return orjson.loads(data)


_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89abcdefABCDEF]")
#: What :func:`_lenient_loads` returns for a value nested deeper than the decoders allow.
TOO_DEEP: Final = object()


def _lenient_loads(data: bytes) -> Any:
    """JSON that orjson refuses or reads inexactly, or ``None`` (``TOO_DEEP`` when nested too deep).

    JavaScript's ``JSON.stringify`` writes a lone surrogate (half an emoji cut
    by a text split) as a ``\\udXXX`` escape, which orjson rejects; one such
    character must not cost a kept event, so the standard library reads it and
    the lone surrogate becomes U+FFFD (the summary must still print as UTF-8).
    Python's ``json.dumps`` writes ``NaN`` and ``Infinity``: they are read as
    floats. Integers beyond 64 bits (orjson reads them as floats) are kept exact.
    """
    try:
        obj = json.loads(data.decode("utf-8", "replace"), parse_int=_any_int)
        if isinstance(obj, (dict, list)) and _deeper_than(obj, _READ_DEPTH):
            return TOO_DEEP
        # only a \\udXXX escape can leave a lone surrogate: walk the object only then
        return _no_surrogates(obj) if _SURROGATE_ESCAPE.search(data) is not None else obj
    except RecursionError:
        return TOO_DEEP
    except ValueError:
        return None


#: Deepest nesting read: orjson's own limit. The standard library reads deeper on Python 3.12+
#: (and raises RecursionError on 3.10/3.11), so the lenient path checks it too: one answer everywhere.
_READ_DEPTH = 1024


def _deeper_than(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _any_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits(): Decimal converts without that limit
        return int(decimal.Decimal(text))


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    return value


class LineScanner:
    """Split a byte stream into lines and classify them, within fixed bounds.

    Feed it any chunking of the stream with :meth:`feed`; call :meth:`end` once
    at end of stream. Both return the records for the lines they completed.
    Counters: ``lines``, ``blank_lines`` (nothing but spaces, tabs and a
    carriage return: no event, and no error either), ``invalid_lines`` (not
    JSON, not an object, or a kept line that fails to decode) and ``bytes``.

    The ``retain`` function may change between feeds (assign ``retain``).
    """

    def __init__(
        self,
        retain: RetainFn | None = None,
        *,
        max_line: int = _limits.MAX_LINE,
        max_retained: int = _limits.MAX_RETAINED,
        probe_bytes: int = _limits.PROBE_BYTES,
        loads: Loads | None = None,
    ) -> None:
        if max_line < 1:
            raise UsageError(f"max_line must be at least 1 byte, not {max_line}")
        if max_retained < max_line:
            raise UsageError(f"max_retained ({max_retained}) must be at least max_line ({max_line})")
        self.max_line = max_line
        self.max_retained = max_retained
        self.probe_bytes = max(1, min(probe_bytes, max_line))
        self._loads: Loads = loads or _default_loads
        self._retain: RetainFn = retain or _keep_all
        self._cache: dict[tuple[bytes, bytes | None], tuple[str, int]] = {}
        self._skip: re.Pattern[bytes] | None = None  # the cached SKIP decisions as one match
        self.lines = 0
        self.blank_lines = 0
        self.invalid_lines = 0
        #: Lines counted invalid because they nest deeper than the JSON decoders allow.
        self.too_deep = 0
        self.bytes = 0
        self._keys: TopKeys | None = None
        self._mode = _NONE
        self._pend = bytearray()
        self._size = 0
        self._key: str | None = None
        self._reason = ""
        self._note = False
        # a noted line streaming in: its first and (so far) last bytes
        self._nhead = self._ntail = b""
        # a kept line past SPILL_BYTES: held in a file, not in _pend
        self._spill: _longline.Spill | None = None
        #: Where such a file goes (``None``: where spools go by default); a run sets its spool directory.
        self.spill_dir: str | None = None
        self._no_spill = False

    @property
    def retain(self) -> RetainFn:
        return self._retain

    @retain.setter
    def retain(self, fn: RetainFn) -> None:
        self._retain = fn
        self._cache.clear()
        self._skip = None

    # -- decisions ---------------------------------------------------------

    def _decide_fast(self, groups: tuple[bytes, bytes | None]) -> tuple[str, int] | None:
        top, sub = groups
        if sub is None and top.startswith(b"item."):
            return None  # the nested item type was not within the fast window
        key = _compose(top.decode("utf-8", "replace"), sub.decode("utf-8", "replace") if sub else None, None)
        decision = (key, self._retain(key))
        if len(self._cache) < 4096:  # untrusted input could invent endless types
            self._cache[groups] = decision
            if decision[1] == SKIP and len(self._cache) <= _SKIP_KEYS:
                self._skip = _skip_pattern(self._cache)
        return decision

    def _classify(self, head: bytes) -> tuple[str | None, int]:
        m = _FAST.match(head, 0, _limits.FAST_PROBE_BYTES)
        if m is not None:
            groups: tuple[bytes, bytes | None] = m.group(1, 2)  # type: ignore[assignment]
            d = self._cache.get(groups) or self._decide_fast(groups)
            if d is not None:
                return d
        key = probe_type(head)
        if key is None:
            return None, SKIP
        return key, self._retain(key)

    # -- feeding -----------------------------------------------------------

    def feed(self, buf: Buffer, start: int = 0, end: int | None = None) -> list[Record]:
        """Scan ``buf[start:end]``; return the records of the lines completed in it.

        ``buf`` is not kept: a partial last line is copied (at most the probe
        window, or the kept line up to ``max_retained``).
        """
        if end is None:
            end = len(buf)
        out: list[Record] = []
        self.bytes += end - start
        pos = start
        if self._mode != _NONE:
            pos = self._continue(buf, pos, end, out)
        find = buf.find
        skip = self._skip
        compact = _COMPACT.match
        match = _FAST.match
        cache = self._cache
        append = out.append
        max_line = self.max_line
        fast = _limits.FAST_PROBE_BYTES
        lineno = self.lines
        # One memchr and one or two anchored matches per line: a line of a
        # skipped type costs no more; a cached NOTE decision is settled here
        # too, and neither copies any of the line.
        while True:
            nl = find(b"\n", pos, end)
            if nl < 0:
                break
            lineno += 1
            if nl - pos <= max_line:
                if skip is not None and skip.match(buf, pos, pos + fast) is not None:  # type: ignore[call-overload]
                    pos = nl + 1
                    continue
                m = compact(buf, pos, pos + fast)  # type: ignore[call-overload]
                if m is None:
                    m = match(buf, pos, min(nl, pos + fast))  # type: ignore[call-overload]
                if m is not None:
                    d = cache.get(m.group(1, 2))
                    if d is not None:
                        if d[1] == SKIP:
                            pos = nl + 1
                            continue
                        if d[1] == NOTE:
                            append(Noted(lineno, d[0], nl - pos, bytes(buf[pos : min(nl, pos + _NOTE_HEAD)]),
                                         bytes(buf[max(pos, nl - _NOTE_TAIL) : nl])))
                            pos = nl + 1
                            continue
            self.lines = lineno
            self._complete(bytes(buf[pos : min(nl, pos + self.probe_bytes)]), buf, pos, nl, out)
            skip = self._skip  # the line may have taught a new SKIP decision
            pos = nl + 1
        self.lines = lineno
        if pos < end:
            self._start_partial(buf, pos, end, out)
        return out

    def end(self) -> list[Record]:
        """End of stream: settle a last line that has no newline."""
        out: list[Record] = []
        mode = self._mode
        if mode == _NONE:
            return out
        self.lines += 1
        if mode == _COLLECT:
            data = bytes(self._pend)
            self._reset()
            self._complete(data[: self.probe_bytes], data, 0, len(data), out)
        elif mode in (_KEEPING, _UNSURE):
            self._end_held(out, classify=mode == _UNSURE)
        elif mode == _SCANNING:
            self._finish_scan(out)
        else:
            self._finish_skip(out)
        return out

    def _reset(self) -> None:
        self._mode = _NONE
        self._pend = bytearray()
        self._size = 0
        self._key = None
        self._reason = ""
        self._note = False
        self._nhead = self._ntail = b""
        self._keys = None
        self._no_spill = False
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _complete(self, head: bytes, buf: Buffer, a: int, b: int, out: list[Record]) -> None:
        """A whole line ``buf[a:b]`` (no newline) whose first bytes are ``head``."""
        key, decision = self._classify(head)
        size = b - a
        if key is None:
            if _BLANK_LINE.fullmatch(buf, a, b) is not None:  # type: ignore[call-overload]
                self.blank_lines += 1
            else:
                self.invalid_lines += 1
            return
        if size > len(head) and _unsure(key):
            # the type may lie past the probe window: a line read whole is decoded once and
            # classified by its keys; a longer one by a scan of its top-level keys
            if size <= self.max_line:
                if size > _limits.SPILL_BYTES and self._loads is _default_loads:
                    self._emit_long(lambda at, n: bytes(buf[a + at : a + at + n]), size, out, None)
                else:
                    self._emit_decoded(bytes(buf[a:b]), out)
                return
            keys = TopKeys()
            keys.feed(buf, a, b)
            key = _compose(keys.top, keys.sub, keys.msg)
            decision = self._retain(key)
        if size > self.max_line and (decision != KEEP or size > self.max_retained):
            out.append(Dropped(self.lines, size, key, "over_ceiling" if decision == KEEP else "oversize"))
            return
        if decision == KEEP:
            if size > _limits.SPILL_BYTES and self._loads is _default_loads:
                self._emit_long(lambda at, n: bytes(buf[a + at : a + at + n]), size, out, key)
            else:
                self._emit_kept(bytes(buf[a:b]), out, key)
        elif decision == NOTE:
            out.append(Noted(self.lines, key, size, bytes(buf[a : min(b, a + _NOTE_HEAD)]),
                             bytes(buf[max(a, b - _NOTE_TAIL) : b])))

    def _decode(self, data: bytes) -> dict[str, Any] | None:
        """One line's object (``None``: not a JSON object; counted invalid)."""
        obj = _read(_strip(data), self._loads)
        if obj is TOO_DEEP:
            self.too_deep += 1
        if not isinstance(obj, dict):
            self.invalid_lines += 1
            return None
        return obj

    def _emit_kept(self, data: bytes, out: list[Record], key: str | None) -> None:
        obj = self._decode(data)
        if obj is not None:
            self._emit_event(obj, len(data), out)
        elif key is not None:
            self._lost(key, len(data), "invalid", out)

    def _lost(self, key: str, size: int, reason: str, out: list[Record]) -> None:
        """A line retained by its type (an object's, untyped ones included: an untyped format's answer is one)
        that could not be had, besides any count: a dropped record, so that a lost answer is known as one and no
        earlier message stands in."""
        out.append(Dropped(self.lines, size, key, reason))

    def _emit_event(self, obj: dict[str, Any], size: int, out: list[Record]) -> None:
        t = obj.get("type")
        key = self._key_of(obj) if not isinstance(t, str) or t.startswith("item.") else t
        out.append(Event(self.lines, key, obj, size))

    def _emit_long(self, read: _longline.Read, size: int, out: list[Record], key: str | None) -> None:
        """A line too long to decode whole without holding it three times (see :mod:`._longline`): kept as
        ``key``, or (``None``: its type was not in its first bytes) classified by its keys once decoded."""
        try:
            obj = _longline.decode(read, size, self._decode, read_json)
        except (_longline.LongStringError, OSError) as e:
            unreadable = isinstance(e, OSError)  # the spill file could not be read back; else not JSON
            if key is not None:
                self._lost(key, size, "unreadable" if unreadable else "invalid", out)
            if key is None or not unreadable:
                self.invalid_lines += 1
            if key is None and not unreadable:
                self._lost_undecodable(_windows(read, size), size, out)
            return
        if obj is None:  # not a JSON object (counted invalid by the decode)
            if key is not None:
                self._lost(key, size, "invalid", out)
            else:
                self._lost_undecodable(_windows(read, size), size, out)
            return
        if key is not None:
            self._emit_event(obj, size, out)
        else:
            self._emit_classified(obj, size, lambda: _ends(read, size), out)

    def _keep(self, data: bytes | bytearray) -> None:
        """Hold more of a line: in memory up to ``SPILL_BYTES``, then in a spill file."""
        spill = self._spill
        if spill is None:
            self._pend += data
            if len(self._pend) > _limits.SPILL_BYTES and not self._no_spill and self._loads is _default_loads:
                self._start_spill()
            return
        try:
            spill.write(data)
        except OSError:
            self._unspill(data)

    def _start_spill(self) -> None:
        try:
            spill = _longline.Spill(self.spill_dir)
        except (OSError, SpoolFullError):
            self._no_spill = True  # no room for a temporary file: this line stays in memory
            return
        try:
            spill.write(self._pend)
        except OSError:
            spill.close()
            self._no_spill = True
            return
        self._spill = spill
        self._pend = bytearray()

    def _unspill(self, data: bytes | bytearray) -> None:
        """A spill file that stopped taking writes: back to memory (what it holds is still readable)."""
        spill = self._spill
        assert spill is not None
        self._spill = None
        self._no_spill = True
        try:
            self._pend = bytearray(spill.read(0, spill.size))
            self._pend += data
        except OSError:
            self._mode = _SKIPPING  # unreadable too: the line is lost, and says so as a dropped record
            self._reason = "unreadable"
            self._pend = bytearray()
        finally:
            spill.close()

    def _end_held(self, out: list[Record], *, classify: bool = False) -> None:
        """The end of a held line that came in more than one feed: kept, or with ``classify`` classified
        once decoded; from memory or from its spill file."""
        spill, key = self._spill, None if classify else self._key
        if spill is None:
            data = bytes(self._pend)
            self._reset()
            if classify:
                self._emit_decoded(data, out)
            else:
                self._emit_kept(data, out, key)
            return
        self._spill = None
        try:
            self._reset()
            self._emit_long(spill.read, spill.size, out, key)
        finally:
            spill.close()

    def _held_windows(self) -> Iterator[bytes | bytearray]:
        """What is held of the line, a read window at a time."""
        spill = self._spill
        if spill is None:
            yield self._pend
            return
        for at in range(0, spill.size, _limits.READ_CHUNK):
            yield spill.read(at, min(_limits.READ_CHUNK, spill.size - at))

    def _held_ends(self) -> tuple[bytes, bytes]:
        spill = self._spill
        if spill is None:
            return bytes(self._pend[:_NOTE_HEAD]), bytes(self._pend[-_NOTE_TAIL:])
        return _ends(spill.read, spill.size)

    def _drop_held(self) -> None:
        self._pend = bytearray()
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _emit_decoded(self, data: bytes, out: list[Record]) -> None:
        """A whole line whose type was not in its first bytes: decoded once, then classified."""
        obj = self._decode(data)
        if obj is not None:
            self._emit_classified(obj, len(data), lambda: (data[:_NOTE_HEAD], data[-_NOTE_TAIL:]), out)
        else:
            self._lost_undecodable((data,), len(data), out)

    def _lost_undecodable(self, windows: Iterable[bytes | bytearray], size: int, out: list[Record]) -> None:
        """A line that could not be decoded and whose type was not in its first bytes: its type is found by a scan
        of its top-level keys (a bad escape or a raw control character in a string does not stop it), so that a
        retained line is lost whether its type came before or after the bad bytes."""
        keys = TopKeys()
        for window in windows:
            keys.feed(window)
            if keys.done or keys.ended:
                break
        key = _compose(keys.top, keys.sub, keys.msg)
        if self._retain(key) == KEEP:
            self._lost(key, size, "invalid", out)

    def _emit_classified(self, obj: dict[str, Any], size: int, ends: Callable[[], tuple[bytes, bytes]],
                         out: list[Record]) -> None:
        """A decoded line classified by its keys; ``ends`` gives its first and last bytes for a note."""
        key = self._key_of(obj)
        decision = self._retain(key)
        if decision == KEEP:
            out.append(Event(self.lines, key, obj, size))
        elif decision == NOTE:
            out.append(Noted(self.lines, key, size, *ends()))

    @staticmethod
    def _key_of(obj: dict[str, Any]) -> str:
        t = obj.get("type")
        top = t if isinstance(t, str) else None
        sub = msg = None
        item = obj.get("item")
        if isinstance(item, dict):
            s = item.get("type", item.get("item_type"))
            sub = s if isinstance(s, str) else None
        m = obj.get("msg")
        if isinstance(m, dict) and isinstance(m.get("type"), str):
            msg = m["type"]
        return _compose(top, sub, msg)

    def _start_partial(self, buf: Buffer, pos: int, end: int, out: list[Record]) -> None:
        self._mode = _COLLECT
        self._pend = bytearray(buf[pos : min(end, pos + self.probe_bytes)])
        self._size = len(self._pend)
        if self._size >= self.probe_bytes:
            self._decide_partial()
            rest = pos + self._size
            if rest < end:
                self._continue(buf, rest, end, out)

    def _decide_partial(self) -> None:
        key, decision = self._classify(bytes(self._pend))
        self._key = key
        if key is not None and _unsure(key):
            self._mode = _UNSURE
            self._check_unsure()
        elif key is not None and decision == KEEP:
            self._mode = _KEEPING
            self._check_ceiling()
        else:
            self._mode = _SKIPPING
            self._reason = "oversize"
            self._note = decision == NOTE
            if self._note:
                self._nhead = bytes(self._pend[:_NOTE_HEAD])
                self._ntail = bytes(self._pend[-_NOTE_TAIL:])
            self._pend = bytearray()

    def _check_unsure(self) -> None:
        """Past ``max_line`` an unsure line is no longer decoded whole: scan its top-level keys."""
        if self._size <= self.max_line:
            return
        self._mode = _SCANNING
        self._keys = TopKeys()
        try:
            for window in self._held_windows():
                self._keys.feed(window)
        except OSError:  # the spill file cannot be read back: the line is lost, and says so as a dropped record
            self._drop_held()
            self._reason = "unreadable"
        self._settle_scan()

    def _settle_scan(self) -> None:
        """Leave scanning once the keys tell the type; drop the held bytes past ``max_retained``."""
        keys = self._keys
        assert keys is not None
        if self._size > self.max_retained and not self._reason:
            self._drop_held()
            self._reason = "over_ceiling"
        if not keys.done:
            return
        key = _compose(keys.top, keys.sub, keys.msg)
        decision = self._retain(key)
        self._key = key
        self._keys = None
        if decision == KEEP and not self._reason:
            self._mode = _KEEPING
        else:
            self._mode = _SKIPPING
            self._note = decision == NOTE
            if self._note:
                try:
                    self._nhead, self._ntail = self._held_ends()
                except OSError:
                    self._note = False
            self._drop_held()
            self._reason = (self._reason or "over_ceiling") if decision == KEEP else "oversize"

    def _finish_scan(self, out: list[Record]) -> None:
        """End of a line whose type was still being scanned for."""
        keys = self._keys
        assert keys is not None
        key = _compose(keys.top, keys.sub, keys.msg)
        decision = self._retain(key)
        if decision == KEEP and not self._reason:
            self._key = key  # kept by the key the scan found (the probe's was unsure): a loss is recorded under it
            self._end_held(out)
            return
        size, reason = self._size, self._reason
        self._reset()
        out.append(Dropped(self.lines, size, key, (reason or "over_ceiling") if decision == KEEP else "oversize"))

    def _check_ceiling(self) -> None:
        if self._size > self.max_retained:
            self._mode = _SKIPPING
            self._reason = "over_ceiling"
            self._drop_held()
            self._note = False

    def _continue(self, buf: Buffer, pos: int, end: int, out: list[Record]) -> int:
        """Carry on with a line begun in an earlier feed; return where the next line starts."""
        while self._mode != _NONE and pos < end:
            nl = buf.find(b"\n", pos, end)
            stop = end if nl < 0 else nl
            mode = self._mode
            if mode == _COLLECT:
                take = min(stop, pos + self.probe_bytes - len(self._pend))
                self._pend += buf[pos:take]
                self._size += take - pos
                pos = take
                if nl >= 0 and pos == nl:
                    self.lines += 1
                    data = bytes(self._pend)
                    self._reset()
                    self._complete(data[: self.probe_bytes], data, 0, len(data), out)
                    return nl + 1
                if len(self._pend) >= self.probe_bytes:
                    self._decide_partial()
                continue
            if mode == _KEEPING:
                self._size += stop - pos
                self._check_ceiling()
                if self._mode == _KEEPING:
                    self._keep(buf[pos:stop])
            elif mode == _UNSURE:
                self._keep(buf[pos:stop])
                self._size += stop - pos
                if self._mode == _UNSURE:  # (not when a spill file failed and the line was given up)
                    self._check_unsure()
            elif mode == _SCANNING:
                assert self._keys is not None
                self._keys.feed(buf, pos, stop)
                self._size += stop - pos
                if not self._reason and self._size <= self.max_retained:  # still held
                    self._keep(buf[pos:stop])
                if self._mode == _SCANNING:
                    self._settle_scan()
            else:
                self._size += stop - pos
                if self._note and stop > pos:
                    self._ntail = (self._ntail + bytes(buf[max(pos, stop - _NOTE_TAIL) : stop]))[-_NOTE_TAIL:]
            if nl < 0:
                return end
            self.lines += 1
            mode = self._mode
            if mode == _KEEPING:
                self._end_held(out)
            elif mode == _UNSURE:
                self._end_held(out, classify=True)
            elif mode == _SCANNING:
                self._finish_scan(out)
            else:
                self._finish_skip(out)
            return nl + 1
        return pos

    def _finish_skip(self, out: list[Record]) -> None:
        key, size, reason = self._key, self._size, self._reason
        note, head, tail = self._note, self._nhead, self._ntail
        self._reset()
        if key is None:
            self.invalid_lines += 1
        elif reason != "oversize" or size > self.max_line:
            out.append(Dropped(self.lines, size, key, reason))
        elif note:
            out.append(Noted(self.lines, key, size, head, tail))


def _read(data: bytes, loads: Loads) -> Any:
    """``data`` decoded (``None``: by nothing; ``TOO_DEEP``): ``loads``, then ``loads`` on the text with bad
    UTF-8 replaced, then (the default ``loads``) the lenient reader; integers past 64 bits kept exact."""
    try:
        obj = loads(data)
        return exact_ints(obj, data) if loads is _default_loads else obj
    except Exception:
        pass
    try:
        return loads(data.decode("utf-8", "replace"))
    except Exception:
        return _lenient_loads(data) if loads is _default_loads else None


def read_json(data: bytes) -> Any:
    """One JSON text decoded as the parser decodes a line (``None`` when it is none; ``TOO_DEEP``)."""
    return _read(data, _default_loads)


def exact_ints(obj: Any, data: bytes) -> Any:
    """``obj``, which orjson decoded from ``data``, with any integer past 64 bits (a float there) read exactly."""
    # orjson reads an integer past 64 bits as a float: one is there only if the object holds a float and the
    # line a run of 19 digits. The cheaper test goes first: on a short line the run (one translate and one
    # search, in C) costs a tenth of a walk of its object; a long line is mostly text, few values to walk
    if len(data) <= _SEARCH_FIRST:
        if _LONG_DIGITS not in data.translate(_DIGITS):
            return obj
        return _exact_ints(obj, data) if _has_float(obj, 0) else obj
    if _has_float(obj, 0) and _LONG_DIGITS in data.translate(_DIGITS):
        return _exact_ints(obj, data)
    return obj


def _windows(read: _longline.Read, size: int) -> Iterator[bytes]:
    """A held line, a read window at a time (an unreadable spill file ends it early)."""
    for at in range(0, size, _limits.READ_CHUNK):
        try:
            yield read(at, min(_limits.READ_CHUNK, size - at))
        except OSError:
            return


def _ends(read: _longline.Read, size: int) -> tuple[bytes, bytes]:
    """A held line's first ``NOTE_HEAD`` and last ``NOTE_TAIL`` bytes, read back from its spill file."""
    return read(0, min(size, _NOTE_HEAD)), read(max(0, size - _NOTE_TAIL), min(size, _NOTE_TAIL))


def _exact_ints(obj: Any, data: bytes) -> Any:
    """``obj`` (with a float orjson read, and a run of 19 digits in ``data``) read again exactly."""
    exact = _lenient_loads(data)
    return obj if exact is None or exact is TOO_DEEP else exact


def _has_float(value: Any, depth: int) -> bool:
    if isinstance(value, float):
        return True
    if depth > 64:
        return True  # rare and deep: let the exact reader decide
    if isinstance(value, dict):
        return any(_has_float(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v, depth + 1) for v in value)
    return False


def _keep_all(key: str) -> int:
    return KEEP


class LineReader:
    """Read JSON lines from a binary file with bounded memory.

    Iterating yields :class:`Event` for each kept object and :class:`Dropped`
    for each line dropped for its size (and :class:`Noted` for types the
    ``retain`` function notes). ``types`` keeps only those type keys (``None``:
    every object). Reads are ``read_size`` bytes at most, never unbounded.

    A reader is an iterable and a context manager; closing it closes the file
    only when the reader opened it (a path was given).
    """

    def __init__(
        self,
        file: IO[bytes] | str | os.PathLike[str],
        *,
        types: set[str] | frozenset[str] | None = None,
        retain: RetainFn | None = None,
        max_line: int = _limits.MAX_LINE,
        max_retained: int = _limits.MAX_RETAINED,
        read_size: int = _limits.READ_CHUNK,
        loads: Loads | None = None,
    ) -> None:
        if types is not None and retain is not None:
            raise UsageError("give types or retain, not both")
        if types is not None:
            wanted = frozenset(types)

            def retain_types(key: str) -> int:
                return KEEP if key in wanted else SKIP

            retain = retain_types
        self._owns = isinstance(file, (str, os.PathLike))
        self._file: IO[bytes] = open(file, "rb") if isinstance(file, (str, os.PathLike)) else file  # noqa: SIM115
        if read_size < 1:
            raise UsageError(f"read_size must be positive, not {read_size}")
        self._read_size = min(read_size, max_line)
        self.scanner = LineScanner(retain, max_line=max_line, max_retained=max_retained, loads=loads)

    @property
    def lines(self) -> int:
        return self.scanner.lines

    @property
    def invalid_lines(self) -> int:
        return self.scanner.invalid_lines

    def __iter__(self) -> Iterator[Record]:
        buf = bytearray(self._read_size)
        view = memoryview(buf)
        readinto = getattr(self._file, "readinto", None)
        scanner = self.scanner
        while True:
            if readinto is not None:
                n = readinto(view)
                chunk: Buffer = buf
            else:
                data = self._file.read(self._read_size)
                n, chunk = len(data), data
            if not n:
                break
            yield from scanner.feed(chunk, 0, n)
        yield from scanner.end()

    def close(self) -> None:
        if self._owns:
            self._file.close()

    def __enter__(self) -> LineReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def iter_lines(
    file: IO[bytes] | str | os.PathLike[str],
    *,
    types: set[str] | frozenset[str] | None = None,
    max_line: int = _limits.MAX_LINE,
    max_retained: int = _limits.MAX_RETAINED,
    read_size: int = _limits.READ_CHUNK,
    loads: Loads | None = None,
) -> LineReader:
    """The bounded line reader on its own: ``for rec in iter_lines(f): …``.

    .. seealso:: :class:`LineReader`
    """
    return LineReader(
        file, types=types, max_line=max_line, max_retained=max_retained, read_size=read_size, loads=loads
    )
