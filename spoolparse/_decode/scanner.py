"""The bounded line scanner: bytes in, records out (no I/O, no waiting).

A line is classified by its type key (:mod:`.probe`) before anything is
decoded. When the probe window holds no type (or a Codex ``item.*`` type
without its nested item type), a line up to ``max_line`` is decoded whole,
once, and classified by its keys; a longer one is classified by a bounded
scan of its top-level keys while it is drained, so it is never held past
``max_retained``.

The retain function decides what a line costs: a skipped line is counted and
touched no further (never buffered past the probe window, however long), a
noted one reported by its key, size and ends, a kept one decoded with
``loads`` — from the read buffer itself when it lies whole in it. Memory per
line is bounded by ``max_retained`` (a kept line) plus the caller's read
window.

The lines of a window that end in it are read line by line (one ``find`` and
an anchored match each), or, when the retained keys are known and the lines
are short, a window at a time (:mod:`.window`); a line the window cuts goes
on in a small state object (:mod:`.states`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

from .. import _limits
from .._regex import regex
from ..errors import UsageError
from . import longline, window
from .longline import OpenSpill, Spill
from .probe import COMPACT, FAST, compose, key_of, probe_type, unsure
from .reading import TOO_DEEP, default_loads, read, read_json
from .records import KEEP, NOTE, SKIP, Buffer, Dropped, Event, Loads, Noted, Record, RetainFn
from .states import Held, Line, Probing, ends
from .topkeys import TopKeys

__all__ = ["LineScanner"]

_NOTE_HEAD = _limits.NOTE_HEAD
_NOTE_TAIL = _limits.NOTE_TAIL
#: Cached decisions past this many are no longer added to the SKIP pattern.
_SKIP_KEYS = 64
_LEAD = frozenset(b" \t\r\n\x1e")
_BOM = b"\xef\xbb\xbf"
#: Kept lines up to this long are copied out of the read buffer to be decoded (less work than a view of it);
#: a longer one is decoded where it lies, so that it is not in memory twice.
_VIEW_BYTES = 1 << 16
#: Kept lines up to this long (and within the probe window) are decoded in the feed loop itself, once their cached
#: decision says KEEP: the calls complete() makes around the decode cost more than the decode of such a line. An
#: untyped line this short is classified there too.
SHORT_KEPT = _VIEW_BYTES
#: A blank line (its newline aside): counted apart, not as invalid.
_BLANK_LINE = regex(rb"[ \t\r]*")

Bytes = bytes | bytearray | memoryview


def _skip_pattern(cache: dict[tuple[bytes, bytes | None], tuple[str, int]]) -> re.Pattern[bytes] | None:
    """One anchored match for the compact lines whose cached decision is SKIP.

    It matches exactly where :data:`COMPACT` would yield groups cached as
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


def _keep_all(key: str) -> int:
    return KEEP


def _stripped(data: Bytes) -> tuple[int, int]:
    """Where a line's JSON text starts and ends, without the blanks, record separators and byte-order mark JSON
    printers put around it (as :func:`.probe.strip`, without a copy)."""
    a, b = 0, len(data)
    while a < b and data[a] in _LEAD:
        a += 1
    if data[a : a + 3] == _BOM:
        a += 3
        while a < b and data[a] in _LEAD:
            a += 1
    while b > a and data[b - 1] in _LEAD:
        b -= 1
    return a, b


class LineScanner:
    """Split a byte stream into lines and classify them, within fixed bounds.

    Feed it any chunking of the stream with :meth:`feed`; call :meth:`end` once
    at end of stream. Both return the records for the lines they completed.
    Counters: ``lines``, ``blank_lines`` (nothing but spaces, tabs and a
    carriage return: no event, and no error either), ``invalid_lines`` (not
    JSON, not an object, or a kept line that fails to decode) and ``bytes``.

    The ``retain`` function may change between feeds (assign ``retain``);
    ``retained``, the keys it does not skip when they are known, lets whole
    windows be scanned at once. ``open_spill`` makes the file a kept line past
    ``SPILL_BYTES`` is held in (default: the class's :attr:`spill`).
    """

    #: What makes the spill files of a scanner made without ``open_spill`` (``None``: none; a long kept line
    #: stays in memory, within ``max_retained``).
    spill: ClassVar[OpenSpill | None] = None

    def __init__(
        self,
        retain: RetainFn | None = None,
        *,
        max_line: int = _limits.MAX_LINE,
        max_retained: int = _limits.MAX_RETAINED,
        probe_bytes: int = _limits.PROBE_BYTES,
        loads: Loads | None = None,
        open_spill: OpenSpill | None = None,
    ) -> None:
        if max_line < 1:
            raise UsageError(f"max_line must be at least 1 byte, not {max_line}")
        if max_retained < max_line:
            raise UsageError(f"max_retained ({max_retained}) must be at least max_line ({max_line})")
        self.max_line = max_line
        self.max_retained = max_retained
        self.probe_bytes = max(1, min(probe_bytes, max_line))
        self._loads: Loads = loads or default_loads
        self._retain: RetainFn = retain or _keep_all
        self._retained: frozenset[str] | None = None
        self._candidates: window.Candidates | None = None
        self._cache: dict[tuple[bytes, bytes | None], tuple[str, int]] = {}
        self._skip: re.Pattern[bytes] | None = None  # the cached SKIP decisions as one match
        self.lines = 0
        self.blank_lines = 0
        self.invalid_lines = 0
        #: Lines counted invalid because they nest deeper than the JSON decoders allow.
        self.too_deep = 0
        self.bytes = 0
        self._line: Line | None = None  # a line the last window cut
        self._line_bytes = 0.0  # how long the last window's lines were, on average (which path reads the next)
        self._open_spill = open_spill if open_spill is not None else type(self).spill
        #: Where a spill file goes (``None``: where spools go by default); a run sets its spool directory.
        self.spill_dir: str | None = None

    @property
    def held(self) -> int:
        """Bytes held in memory of the line the last window cut: its first bytes, or a kept line up to
        ``SPILL_BYTES`` (past it, in its spill file)."""
        return 0 if self._line is None else self._line.held_bytes()

    @property
    def retain(self) -> RetainFn:
        return self._retain

    @retain.setter
    def retain(self, fn: RetainFn) -> None:
        self._retain = fn
        self._cache.clear()
        self._skip = None
        self.retained = None

    @property
    def retained(self) -> frozenset[str] | None:
        """The keys ``retain`` does not skip, when they are known (``None``: any key may be read). Set it after
        ``retain``, which resets it."""
        return self._retained

    @retained.setter
    def retained(self, keys: frozenset[str] | None) -> None:
        # the window's pattern vouches for the first FAST_PROBE_BYTES of a line, where the line-by-line path looks
        self._retained = keys if self.probe_bytes >= _limits.FAST_PROBE_BYTES else None
        self._candidates = None  # compiled when a window first needs it

    # -- decisions ---------------------------------------------------------

    def _decide_fast(self, groups: tuple[bytes, bytes | None]) -> tuple[str, int] | None:
        top, sub = groups
        if sub is None and top.startswith(b"item."):
            return None  # the nested item type was not within the fast window
        key = compose(top.decode("utf-8", "replace"), sub.decode("utf-8", "replace") if sub else None, None)
        decision = (key, self._retain(key))
        if len(self._cache) < 4096:  # untrusted input could invent endless types
            self._cache[groups] = decision
            if decision[1] == SKIP and len(self._cache) <= _SKIP_KEYS:
                self._skip = _skip_pattern(self._cache)
        return decision

    def classify(self, head: bytes) -> tuple[str | None, int]:
        """A line's key (``None``: not an object) and its decision, from its first bytes."""
        m = FAST.match(head, 0, _limits.FAST_PROBE_BYTES)
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
        if self._line is not None:
            pos = self._continue(buf, pos, end, out)
        if pos < end:
            first = self.lines
            keys = self._retained
            if keys is not None and self._line_bytes < window.LINE_BYTES and end - pos >= window.MIN_WINDOW:
                cands = self._candidates = self._candidates or window.candidates(keys)
                rest = window.scan(self, buf, pos, end, cands, out)
            else:
                rest = self._line_by_line(buf, pos, end, out)
            if self.lines > first:
                self._line_bytes = (rest - pos) / (self.lines - first)
            if rest < end:
                self._line = Probing().take(self, buf, rest, end, False)
        return out

    def _line_by_line(self, buf: Buffer, pos: int, end: int, out: list[Record]) -> int:
        """Read the lines of ``buf[pos:end]`` that end in it, one at a time; return where the rest starts."""
        find = buf.find
        skip = self._skip
        compact = COMPACT.match
        match = FAST.match
        cache = self._cache
        append = out.append
        max_line = self.max_line
        fast = _limits.FAST_PROBE_BYTES
        loads = self._loads
        # a kept line its probe window holds whole is what complete() would decode the same way (its first bytes
        # are the window the cached decision came from; nothing to strip between the braces); such a line with no
        # type key in it, nor an escape that could spell one, is untyped, as probe_type would find
        short = min(SHORT_KEPT, self.probe_bytes) if self.probe_bytes >= fast else -1
        untyped: tuple[str, int] | None = None  # the decision for "" (asked for once, when a line needs it)
        lineno = self.lines
        # One memchr and one or two anchored matches per line (and two more
        # memchr-like searches for an untyped one): a line of a skipped type
        # costs no more; a cached NOTE decision is settled here too, and
        # neither copies any of the line; a short kept line is decoded here,
        # with no call of its own.
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
                elif nl - pos <= short and buf[pos : pos + 1] == b"{" and find(b'type"', pos, nl) < 0 \
                        and find(b"\\", pos, nl) < 0:
                    # an object with no type key anywhere on it (a logger's line): probe_type's ""
                    d = untyped = untyped or ("", self._retain(""))
                else:
                    d = None
                if d is not None:
                    if d[1] == SKIP:
                        pos = nl + 1
                        continue
                    if d[1] == NOTE:
                        append(Noted(lineno, d[0], nl - pos, bytes(buf[pos : min(nl, pos + _NOTE_HEAD)]),
                                     bytes(buf[max(pos, nl - _NOTE_TAIL) : nl])))
                        pos = nl + 1
                        continue
                    if nl - pos <= short:  # a short kept line, braces at both ends: decoded here
                        line = buf[pos:nl]
                        if line[-1] == 125 and line[0] == 123:
                            obj = read(line, loads)
                            if isinstance(obj, dict):
                                t = obj.get("type")
                                key = t if isinstance(t, str) and not t.startswith("item.") else key_of(obj)
                                append(Event(lineno, key, obj, nl - pos))
                                pos = nl + 1
                                continue
            self.lines = lineno
            self.complete(bytes(buf[pos : min(nl, pos + self.probe_bytes)]), buf, pos, nl, out)
            skip = self._skip  # the line may have taught a new SKIP decision
            pos = nl + 1
        self.lines = lineno
        return pos

    def _continue(self, buf: Buffer, pos: int, end: int, out: list[Record]) -> int:
        """Carry on with a line begun in an earlier feed; return where the next line starts."""
        line = self._line
        assert line is not None
        nl = buf.find(b"\n", pos, end)
        line = line.take(self, buf, pos, end if nl < 0 else nl, nl >= 0)
        if nl < 0:
            self._line = line
            return end
        self._line = None
        self.lines += 1
        line.done(self, out)
        return nl + 1

    def end(self) -> list[Record]:
        """End of stream: settle a last line that has no newline."""
        out: list[Record] = []
        line, self._line = self._line, None
        if line is not None:
            self.lines += 1
            line.done(self, out)
        return out

    def spiller(self) -> Callable[[], Spill] | None:
        """What makes a spill file for a line held now (``None``: it stays in memory)."""
        open_spill = self._open_spill
        if open_spill is None or self._loads is not default_loads:
            return None
        directory = self.spill_dir
        return lambda: open_spill(directory)

    # -- one whole line ----------------------------------------------------

    def complete(self, head: bytes, buf: Buffer, a: int, b: int, out: list[Record]) -> None:
        """A whole line ``buf[a:b]`` (no newline) whose first bytes are ``head``."""
        key, decision = self.classify(head)
        size = b - a
        if key is None:
            if _BLANK_LINE.fullmatch(buf, a, b) is not None:  # type: ignore[call-overload]
                self.blank_lines += 1
            else:
                self.invalid_lines += 1
            return
        if size > len(head) and unsure(key):
            # the type may lie past the probe window: a line read whole is decoded once and
            # classified by its keys; a longer one by a scan of its top-level keys
            if size <= self.max_line:
                if size > _limits.SPILL_BYTES and self._loads is default_loads:
                    self._emit_long(_reader(buf, a), size, out, None)
                else:
                    _at(buf, a, b, lambda line: self._emit_decoded(line, out))
                return
            keys = TopKeys()
            keys.feed(buf, a, b)
            key = compose(keys.top, keys.sub, keys.msg)
            decision = self._retain(key)
        if size > self.max_line and (decision != KEEP or size > self.max_retained):
            out.append(Dropped(self.lines, size, key, "over_ceiling" if decision == KEEP else "oversize"))
            return
        if decision == KEEP:
            if size > _limits.SPILL_BYTES and self._loads is default_loads:
                self._emit_long(_reader(buf, a), size, out, key)
            else:
                _at(buf, a, b, lambda line: self._emit_kept(line, out, key))
        elif decision == NOTE:
            out.append(Noted(self.lines, key, size, bytes(buf[a : min(b, a + _NOTE_HEAD)]),
                             bytes(buf[max(a, b - _NOTE_TAIL) : b])))

    def end_held(self, held: Held, key: str | None, out: list[Record]) -> None:
        """The end of a held line that came in more than one feed: kept as ``key``, or (``None``) classified once
        decoded; from memory (where it lies: no copy) or from its spill file."""
        spill = held.spill
        if spill is None:
            pend, held.pend = held.pend, bytearray()
            with memoryview(pend) as line:
                if key is None:
                    self._emit_decoded(line, out)
                else:
                    self._emit_kept(line, out, key)
            return
        held.spill = None
        try:
            self._emit_long(spill.read, spill.size, out, key)
        finally:
            spill.close()

    # -- decoding ----------------------------------------------------------

    def _decode(self, data: Bytes) -> dict[str, Any] | None:
        """One line's object (``None``: not a JSON object; counted invalid)."""
        a, b = _stripped(data)
        obj = read(data[a:b] if b - a < len(data) else data, self._loads)
        if obj is TOO_DEEP:
            self.too_deep += 1
        if not isinstance(obj, dict):
            self.invalid_lines += 1
            return None
        return obj

    def _emit_kept(self, data: Bytes, out: list[Record], key: str | None) -> None:
        obj = self._decode(data)
        if obj is not None:
            self._emit_event(obj, len(data), out)
        elif key is not None:
            self._lost(key, len(data), "invalid", out)

    def _emit_decoded(self, data: Bytes, out: list[Record]) -> None:
        """A whole line whose type was not in its first bytes: decoded once, then classified."""
        obj = self._decode(data)
        if obj is not None:
            self._emit_classified(obj, len(data), lambda: (bytes(data[:_NOTE_HEAD]), bytes(data[-_NOTE_TAIL:])), out)
        else:
            self._lost_undecodable((data,), len(data), out)

    def _lost(self, key: str, size: int, reason: str, out: list[Record]) -> None:
        """A line retained by its type (an object's, untyped ones included: an untyped format's answer is one)
        that could not be had, besides any count: a dropped record, so that a lost answer is known as one and no
        earlier message stands in."""
        out.append(Dropped(self.lines, size, key, reason))

    def _emit_event(self, obj: dict[str, Any], size: int, out: list[Record]) -> None:
        t = obj.get("type")
        key = key_of(obj) if not isinstance(t, str) or t.startswith("item.") else t
        out.append(Event(self.lines, key, obj, size))

    def _emit_long(self, read_at: longline.Read, size: int, out: list[Record], key: str | None) -> None:
        """A line too long to decode whole without holding it three times (see :mod:`.longline`): kept as
        ``key``, or (``None``: its type was not in its first bytes) classified by its keys once decoded."""
        try:
            obj = longline.decode(read_at, size, self._decode, read_json)
        except (longline.LongStringError, OSError) as e:
            unreadable = isinstance(e, OSError)  # the spill file could not be read back; else not JSON
            if key is not None:
                self._lost(key, size, "unreadable" if unreadable else "invalid", out)
            if key is None or not unreadable:
                self.invalid_lines += 1
            if key is None and not unreadable:
                self._lost_undecodable(_windows(read_at, size), size, out)
            return
        if obj is None:  # not a JSON object (counted invalid by the decode)
            if key is not None:
                self._lost(key, size, "invalid", out)
            else:
                self._lost_undecodable(_windows(read_at, size), size, out)
            return
        if key is not None:
            self._emit_event(obj, size, out)
        else:
            self._emit_classified(obj, size, lambda: ends(read_at, size), out)

    def _lost_undecodable(self, windows: Iterable[Bytes], size: int, out: list[Record]) -> None:
        """A line that could not be decoded and whose type was not in its first bytes: its type is found by a scan
        of its top-level keys (a bad escape or a raw control character in a string does not stop it), so that a
        retained line is lost whether its type came before or after the bad bytes."""
        keys = TopKeys()
        for piece in windows:
            keys.feed(piece)
            if keys.done or keys.ended:
                break
        key = compose(keys.top, keys.sub, keys.msg)
        if self._retain(key) == KEEP:
            self._lost(key, size, "invalid", out)

    def _emit_classified(self, obj: dict[str, Any], size: int, line_ends: Callable[[], tuple[bytes, bytes]],
                         out: list[Record]) -> None:
        """A decoded line classified by its keys; ``line_ends`` gives its first and last bytes for a note."""
        key = key_of(obj)
        decision = self._retain(key)
        if decision == KEEP:
            out.append(Event(self.lines, key, obj, size))
        elif decision == NOTE:
            out.append(Noted(self.lines, key, size, *line_ends()))


def _at(buf: Buffer, a: int, b: int, emit: Callable[[Bytes], None]) -> None:
    """``emit`` the line ``buf[a:b]``: a copy of a short one, a view of a long one (decoded where it lies)."""
    if b - a <= _VIEW_BYTES:
        emit(buf[a:b])
        return
    with memoryview(buf)[a:b] as line:  # type: ignore[arg-type]  # released: a map cannot close while a view
        emit(line)  # of it is alive


def _reader(buf: Buffer, a: int) -> longline.Read:
    """Reads of a line that starts at ``buf[a]``, a copy of each window only."""

    def read_at(at: int, n: int) -> bytes:
        with memoryview(buf) as whole:  # type: ignore[arg-type]
            return bytes(whole[a + at : a + at + n])

    return read_at


def _windows(read_at: longline.Read, size: int) -> Iterator[bytes]:
    """A held line, a read window at a time (an unreadable spill file ends it early)."""
    for at in range(0, size, _limits.READ_CHUNK):
        try:
            yield read_at(at, min(_limits.READ_CHUNK, size - at))
        except OSError:
            return
