"""A line still waiting for its newline: one small state object for each way it is being read.

A line the read window cuts is first *probed*: its first ``probe_bytes`` are
held until they tell its type (:class:`Probing`). Then, chosen from
:data:`AFTER_PROBE` by that decision, it goes on as

* :class:`Kept` — held (in memory up to ``SPILL_BYTES``, then in a spill file:
  :class:`Held`) until its end, then decoded; past ``max_retained`` it is
  dropped and drained (it, :class:`Unsure` and :class:`Scanning` are
  :class:`Holding`, a :class:`Typed` line);
* :class:`Noting` — drained, keeping its first and last bytes for the note;
* :class:`Skipped` — drained, counting its size (and a reason, when a kept line
  was lost on the way);
* :class:`NotAnObject` — drained and counted invalid;
* :class:`Unsure` — no type in its first bytes: held and decoded whole at its end,
  unless it grows past ``max_line``; then :class:`Scanning` — its top-level keys
  are scanned for the type while it is held up to ``max_retained``.

Each state takes the line's next bytes with ``take`` (they hold no newline)
and returns the state the line goes on in; ``done`` gives the line's records
when its newline (or the stream's end) comes. The scanner (``sc``) is handed
in for its bounds, its retain function, its counters and its decoding; a
state holds only its own fields. h11's ``_readers.py`` reads HTTP the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final, Protocol

from .. import _limits
from ..errors import SpoolFullError
from .longline import Spill
from .probe import compose, unsure
from .records import KEEP, NOTE, SKIP, Buffer, Dropped, Noted, Record, RetainFn
from .topkeys import TopKeys

__all__ = ["Scanner", "Line", "Held", "Probing", "Typed", "Holding", "Kept", "Noting", "Skipped", "NotAnObject",
           "Unsure", "Scanning", "AFTER_PROBE", "UNSURE", "NOT_AN_OBJECT"]

_NOTE_HEAD = _limits.NOTE_HEAD
_NOTE_TAIL = _limits.NOTE_TAIL
#: What a probe says besides the retain function's decisions: its key may be incomplete, or the line is no object.
UNSURE: Final = -1
NOT_AN_OBJECT: Final = -2


class Scanner(Protocol):
    """What a line state (and a window's scan) needs of its scanner (:class:`~.scanner.LineScanner`)."""

    max_line: int
    max_retained: int
    probe_bytes: int
    lines: int
    invalid_lines: int

    @property
    def retain(self) -> RetainFn: ...
    def classify(self, head: bytes) -> tuple[str | None, int]: ...
    def complete(self, head: bytes, buf: Buffer, a: int, b: int, out: list[Record]) -> None: ...
    def end_held(self, held: Held, key: str | None, out: list[Record]) -> None: ...
    def spiller(self) -> Callable[[], Spill] | None: ...


class Held:
    """The bytes of a line held to its end: in memory up to ``SPILL_BYTES``, then in a spill file.

    ``spill`` makes the file (``None``: the line stays in memory); it is tried
    once a line: with no room for a file, or one that stops taking writes, the
    line is held in memory, within ``max_retained`` still.
    """

    __slots__ = ("_open", "pend", "spill")

    def __init__(self, data: bytes | bytearray, spill: Callable[[], Spill] | None) -> None:
        self.pend = bytearray(data)
        self.spill: Spill | None = None
        self._open = spill

    def add_from(self, buf: Buffer, pos: int, stop: int) -> bool:
        """Hold ``buf[pos:stop]`` too, copied once: into the held bytes or the spill file (as :meth:`add`)."""
        with memoryview(buf)[pos:stop] as piece:  # type: ignore[arg-type]  # released: a map cannot close while
            return self.add(piece)  # a view of it is alive

    def add(self, data: bytes | bytearray | memoryview) -> bool:
        """Hold more of the line; ``False`` when what was held is lost (a spill file that failed both ways)."""
        spill = self.spill
        if spill is None:
            self.pend += data
            if len(self.pend) > _limits.SPILL_BYTES and self._open is not None:
                self._start_spill()
            return True
        written = spill.size
        try:
            spill.write(data)
        except OSError:
            # the file may have taken part of it (a write cut short by a full disk): the rest goes to memory
            with memoryview(data) as rest:
                return self._unspill(rest[spill.size - written :])
        return True

    def _start_spill(self) -> None:
        open_spill, self._open = self._open, None
        assert open_spill is not None
        try:
            spill = open_spill()
        except (OSError, SpoolFullError):
            return  # no room for a temporary file: this line stays in memory
        try:
            spill.write(self.pend)
        except OSError:
            spill.close()
            return
        self.spill = spill
        self.pend = bytearray()

    def _unspill(self, data: bytes | bytearray | memoryview) -> bool:
        """A spill file that stopped taking writes: back to memory (what it holds is still readable)."""
        spill = self.spill
        assert spill is not None
        self.spill = None
        try:
            self.pend = bytearray(spill.read(0, spill.size))
            self.pend += data
        except OSError:
            self.pend = bytearray()
            return False
        finally:
            spill.close()
        return True

    def windows(self) -> Iterator[bytes | bytearray]:
        """What is held, a read window at a time (``OSError``: the spill file cannot be read back)."""
        spill = self.spill
        if spill is None:
            yield self.pend
            return
        for at in range(0, spill.size, _limits.READ_CHUNK):
            yield spill.read(at, min(_limits.READ_CHUNK, spill.size - at))

    def ends(self) -> tuple[bytes, bytes]:
        """The first ``NOTE_HEAD`` and last ``NOTE_TAIL`` bytes held (``OSError`` as above)."""
        spill = self.spill
        if spill is None:
            return bytes(self.pend[:_NOTE_HEAD]), bytes(self.pend[-_NOTE_TAIL:])
        return ends(spill.read, spill.size)

    def drop(self) -> None:
        self.pend = bytearray()
        if self.spill is not None:
            self.spill.close()
            self.spill = None


def ends(read: Callable[[int, int], bytes], size: int) -> tuple[bytes, bytes]:
    """A held line's first ``NOTE_HEAD`` and last ``NOTE_TAIL`` bytes, read back from its spill file."""
    return read(0, min(size, _NOTE_HEAD)), read(max(0, size - _NOTE_TAIL), min(size, _NOTE_TAIL))


class Line:
    """A line still waiting for its newline (the base of the states)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    @classmethod
    def start(cls, sc: Scanner, head: bytearray, key: str) -> Line:
        """The line's state once its probe decided: its first bytes, ``head``, are taken; ``key`` is its type."""
        return cls(len(head))

    def take(self, sc: Scanner, buf: Buffer, pos: int, stop: int, newline: bool) -> Line:
        """More of the line, ``buf[pos:stop]`` (``newline``: its end follows); the state it goes on in."""
        self.size += stop - pos
        return self

    def done(self, sc: Scanner, out: list[Record]) -> None:
        """The line's end: its records (``sc.lines`` is its number)."""

    def held_bytes(self) -> int:
        """Bytes of the line held in memory."""
        return 0


class Probing(Line):
    """The line's first bytes, held until there are ``probe_bytes`` of them."""

    __slots__ = ("head",)

    def __init__(self) -> None:
        super().__init__(0)
        self.head = bytearray()

    def take(self, sc: Scanner, buf: Buffer, pos: int, stop: int, newline: bool) -> Line:
        head = self.head
        taken = min(stop, pos + sc.probe_bytes - len(head))
        head += buf[pos:taken]
        self.size = len(head)
        if (newline and taken == stop) or len(head) < sc.probe_bytes:
            return self  # its end is here (the whole line is classified then), or more of its head is to come
        key, decision = sc.classify(bytes(head))
        if key is None:
            decision = NOT_AN_OBJECT
        elif unsure(key):
            decision = UNSURE
        line = AFTER_PROBE[decision](sc, head, key or "")
        return line.take(sc, buf, taken, stop, newline) if taken < stop else line

    def done(self, sc: Scanner, out: list[Record]) -> None:
        head = bytes(self.head)
        sc.complete(head, head, 0, len(head), out)

    def held_bytes(self) -> int:
        return len(self.head)


class Typed(Line):
    """A line of a type key (a loss is recorded under it)."""

    __slots__ = ("key",)

    def __init__(self, key: str, size: int) -> None:
        super().__init__(size)
        self.key = key

    @classmethod
    def start(cls, sc: Scanner, head: bytearray, key: str) -> Line:
        return cls(key, len(head))


class Holding(Typed):
    """A line whose bytes are held (:class:`Held`)."""

    __slots__ = ("held",)

    def __init__(self, key: str, size: int, held: Held) -> None:
        super().__init__(key, size)
        self.held = held

    @classmethod
    def start(cls, sc: Scanner, head: bytearray, key: str) -> Line:
        return cls(key, len(head), Held(head, sc.spiller()))

    def held_bytes(self) -> int:
        return len(self.held.pend)


class Kept(Holding):
    """A line its type keeps: held until its end, then decoded."""

    __slots__ = ()

    def take(self, sc: Scanner, buf: Buffer, pos: int, stop: int, newline: bool) -> Line:
        self.size += stop - pos
        if self.size > sc.max_retained:
            self.held.drop()
            return Skipped(self.key, self.size, "over_ceiling")
        if not self.held.add_from(buf, pos, stop):
            return Skipped(self.key, self.size, "unreadable")
        return self

    def done(self, sc: Scanner, out: list[Record]) -> None:
        sc.end_held(self.held, self.key, out)


class Noting(Typed):
    """A line its type notes: drained, its first and (so far) last bytes kept."""

    __slots__ = ("head", "tail")

    def __init__(self, key: str, size: int, head: bytes, tail: bytes) -> None:
        super().__init__(key, size)
        self.head = head
        self.tail = tail

    @classmethod
    def start(cls, sc: Scanner, head: bytearray, key: str) -> Line:
        return cls(key, len(head), bytes(head[:_NOTE_HEAD]), bytes(head[-_NOTE_TAIL:]))

    def take(self, sc: Scanner, buf: Buffer, pos: int, stop: int, newline: bool) -> Line:
        self.size += stop - pos
        if stop > pos:
            self.tail = (self.tail + bytes(buf[max(pos, stop - _NOTE_TAIL) : stop]))[-_NOTE_TAIL:]
        return self

    def done(self, sc: Scanner, out: list[Record]) -> None:
        if self.size > sc.max_line:
            out.append(Dropped(sc.lines, self.size, self.key, "oversize"))
        else:
            out.append(Noted(sc.lines, self.key, self.size, self.head, self.tail))


class Skipped(Typed):
    """A line drained unread. ``reason`` ``"oversize"``: skipped by its type, reported only past ``max_line``;
    any other: a kept line lost on the way, always reported."""

    __slots__ = ("reason",)

    def __init__(self, key: str, size: int, reason: str = "oversize") -> None:
        super().__init__(key, size)
        self.reason = reason

    def done(self, sc: Scanner, out: list[Record]) -> None:
        if self.reason != "oversize" or self.size > sc.max_line:
            out.append(Dropped(sc.lines, self.size, self.key, self.reason))


class NotAnObject(Line):
    """A line whose first bytes are no JSON object: drained and counted invalid."""

    __slots__ = ()

    def done(self, sc: Scanner, out: list[Record]) -> None:
        sc.invalid_lines += 1


class Unsure(Holding):
    """A line with no type in its first bytes (or an item type without its nested one): held whole, to be
    decoded and classified by its keys at its end, while it is no longer than ``max_line``. Its key is the
    probe's: a loss before the type is known is recorded under it."""

    __slots__ = ()

    @classmethod
    def start(cls, sc: Scanner, head: bytearray, key: str) -> Line:
        return cls(key, len(head), Held(head, sc.spiller()))._past_max_line(sc)

    def take(self, sc: Scanner, buf: Buffer, pos: int, stop: int, newline: bool) -> Line:
        ok = self.held.add_from(buf, pos, stop)
        self.size += stop - pos
        if not ok:
            return Skipped(self.key, self.size, "unreadable")
        return self._past_max_line(sc)

    def _past_max_line(self, sc: Scanner) -> Line:
        """Past ``max_line`` the line is no longer decoded whole: its top-level keys are scanned instead."""
        if self.size <= sc.max_line:
            return self
        line = Scanning(self.key, self.size, self.held, TopKeys())
        try:
            for window in self.held.windows():
                line.keys.feed(window)
        except OSError:  # the spill file cannot be read back: the line is lost, and says so as a dropped record
            self.held.drop()
            line.reason = "unreadable"
        return line.settle(sc)

    def done(self, sc: Scanner, out: list[Record]) -> None:
        sc.end_held(self.held, None, out)


class Scanning(Holding):
    """A line past ``max_line`` whose type is not known yet: its top-level keys are scanned as it comes, and it is
    held up to ``max_retained`` in case the type turns out kept. ``reason``: why it no longer is held."""

    __slots__ = ("keys", "reason")

    def __init__(self, key: str, size: int, held: Held, keys: TopKeys) -> None:
        super().__init__(key, size, held)
        self.keys = keys
        self.reason = ""

    def take(self, sc: Scanner, buf: Buffer, pos: int, stop: int, newline: bool) -> Line:
        self.keys.feed(buf, pos, stop)
        self.size += stop - pos
        if not self.reason and self.size <= sc.max_retained and not self.held.add_from(buf, pos, stop):
            return Skipped(self.key, self.size, "unreadable")
        return self.settle(sc)

    def settle(self, sc: Scanner) -> Line:
        """Leave scanning once the keys tell the type; drop the held bytes past ``max_retained``."""
        if self.size > sc.max_retained and not self.reason:
            self.held.drop()
            self.reason = "over_ceiling"
        keys = self.keys
        if not keys.done:
            return self
        key = compose(keys.top, keys.sub, keys.msg)
        decision = sc.retain(key)
        if decision == KEEP and not self.reason:
            return Kept(key, self.size, self.held)
        line: Line
        if decision == NOTE:
            try:
                line = Noting(key, self.size, *self.held.ends())
            except OSError:
                line = Skipped(key, self.size)
        else:
            line = Skipped(key, self.size, (self.reason or "over_ceiling") if decision == KEEP else "oversize")
        self.held.drop()
        return line

    def done(self, sc: Scanner, out: list[Record]) -> None:
        keys = self.keys
        key = compose(keys.top, keys.sub, keys.msg)
        decision = sc.retain(key)
        if decision == KEEP and not self.reason:
            sc.end_held(self.held, key, out)  # kept by the key the scan found: a loss is recorded under it
            return
        self.held.drop()
        out.append(Dropped(sc.lines, self.size, key, (self.reason or "over_ceiling") if decision == KEEP
                           else "oversize"))


#: The state a line goes on in once its first bytes are classified: by the retain function's decision, or by
#: what the probe found (no type yet, no object).
AFTER_PROBE: Final[dict[int, Callable[[Scanner, bytearray, str], Line]]] = {
    KEEP: Kept.start,
    NOTE: Noting.start,
    SKIP: Skipped.start,
    UNSURE: Unsure.start,
    NOT_AN_OBJECT: NotAnObject.start,
}
