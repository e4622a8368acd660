"""Task ids in memory that does not grow with their number: those a batch has read (what catches a
duplicate), and those a resumed job log has done (:class:`~.joblog.DoneIds`).

Each id is kept as a fixed-size fingerprint (8 bytes of BLAKE2b) in a slot of an
open-addressing table; the slot also says where the id itself was written in a
spill file, and holds a small value of the id's. A fingerprint met again is
confirmed against the id (two ids may share a fingerprint: the second is no
duplicate for it). The first table (:data:`FIRST_SLOTS` slots, 64 KiB) is in
memory; once it is half full, ids go to a table eight times larger, and so on,
each in the spill file beside the spools (nameless, as a spool is), read and
written a slot window at a time: the kernel's page cache holds them, not the
process. No table is ever rebuilt, so no lookup waits for one: a lookup reads
one window per table (four tables hold 1.2 million ids).

So the process's memory for ids is the first table and one window, whatever
their number. On disk each id takes its own bytes plus 4, and the tables 16
bytes a slot (38 MiB for a million ids; sparse: only the pages of slots
written take blocks).

Where the spill file cannot be made or written (no spool directory, a full
disk), the ids read from then on are kept in memory instead (a warning says
so): a duplicate is still caught.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
from typing import IO

from .._closing import Closing
from ..errors import SpoolFullError
from ..spool import open_spool, resolve_spool_dir

__all__ = ["SeenIds", "duplicate_error", "FIRST_SLOTS", "GROWTH"]

log = logging.getLogger("spoolparse.runner")

#: Slots of the first table, the one in memory (16 bytes each: a fingerprint and where its id was written).
FIRST_SLOTS = 4096
#: Each further table has this many times the slots of the one before.
GROWTH = 8
#: Slots read at once when looking along a table (linear probing at most half full: nearly always one read).
WINDOW = 8

# a slot: the fingerprint (never 0: 0 is an empty slot), then a word: the id's offset in the spill file in its
# low 56 bits, its value in the high 8
_SLOT = struct.Struct("<QQ")
_VALUE_SHIFT = 56
_OFFSET_MASK = (1 << _VALUE_SHIFT) - 1
_LEN = struct.Struct("<I")
_WINDOWS = [struct.Struct(f"<{2 * n}Q") for n in range(WINDOW + 1)]  # n slots at once


def duplicate_error(tid: str) -> str:
    """What a task whose id came before says (never merged with the first, nor skipped for it on resume)."""
    return f"duplicate task id {tid!r}: ids must be unique"


def _fingerprint(raw: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") or 1


class _Table:
    """One open-addressing table of ``slots`` slots: in ``memory``, or at ``base`` in the spill file."""

    __slots__ = ("base", "memory", "slots", "used")

    def __init__(self, slots: int, base: int, memory: bytearray | None) -> None:
        self.slots = slots
        self.base = base
        self.memory = memory
        self.used = 0

    @property
    def full(self) -> bool:
        return self.used * 2 >= self.slots


class SeenIds(Closing):
    """The ids added so far, each with a small value (0 to 255): :meth:`add` says whether an id is new (and
    records it), :meth:`put` and :meth:`get` set and read its value. Close it (or use it as a context manager)
    to free its spill file; ``spill_dir`` is where that goes (default: where spools go)."""

    def __init__(self, spill_dir: str | None = None) -> None:
        self._spill_dir = spill_dir
        self._tables = [_Table(FIRST_SLOTS, 0, bytearray(FIRST_SLOTS * _SLOT.size))]
        self._ids: IO[bytes] | None = None  # the ids themselves, length-prefixed
        self._ids_end = 0
        self._slots: IO[bytes] | None = None  # the tables past the first
        self._slots_end = 0
        self._fallback: dict[str, int] | None = None  # the ids read once the spill file failed

    def close(self) -> None:
        for f in (self._ids, self._slots):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        self._ids = self._slots = None

    def add(self, tid: str, value: int = 0) -> bool:
        """Record ``tid`` (with ``value``); ``False`` (and nothing changed) when it was added before."""
        return self._set(tid, value, replace=False)

    def put(self, tid: str, value: int) -> None:
        """Record ``tid`` with ``value``, or change its value when it was added before."""
        self._set(tid, value, replace=True)

    def get(self, tid: str) -> int | None:
        """The value of ``tid``, or ``None`` when it was never added."""
        if self._fallback is not None and tid in self._fallback:
            return self._fallback[tid]
        raw = tid.encode("utf-8", "surrogatepass")
        found, _ = self._find(raw, _fingerprint(raw))
        return None if found is None else found[2] >> _VALUE_SHIFT

    def __contains__(self, tid: object) -> bool:
        return isinstance(tid, str) and self.get(tid) is not None

    def _set(self, tid: str, value: int, *, replace: bool) -> bool:
        raw = tid.encode("utf-8", "surrogatepass")  # a lone surrogate (a file name's undecodable byte) too
        fp = _fingerprint(raw)
        found, empty = self._find(raw, fp)
        if self._fallback is not None and found is None:
            new = tid not in self._fallback
            if new or replace:
                self._fallback[tid] = value
            return new
        try:
            if found is not None:
                if replace:
                    t, index, word = found
                    self._write(t, index, _SLOT.pack(fp, (word & _OFFSET_MASK) | value << _VALUE_SHIFT))
                return False
            self._insert(raw, fp, empty, value)
        except (OSError, SpoolFullError) as e:
            log.warning("cannot keep the task ids read in a spill file (%s): they are kept in memory from now "
                        "on, which grows with their number", getattr(e, "strerror", None) or e)
            self._fallback = {tid: value}
        return True

    # -- the tables ----------------------------------------------------------------------------------

    def _find(self, raw: bytes, fp: int) -> tuple[tuple[_Table, int, int] | None, int]:
        """The id ``raw`` (fingerprint ``fp``) as (its table, its slot, the slot's word), or ``None``; and the
        empty slot where the newest table would take it. Tables that cannot be read any more (after a failure)
        hold nothing that can be confirmed."""
        empty = -1
        try:
            for t in self._tables:
                if t.used:
                    matches, empty = self._probe(t, fp)
                    for index, word in matches:
                        if self._id_at(word & _OFFSET_MASK) == raw:
                            return (t, index, word), -1
        except OSError:
            return None, -1
        return None, empty if self._tables[-1].used else fp % self._tables[-1].slots

    def _write(self, t: _Table, index: int, data: bytes) -> None:
        if t.memory is not None:
            t.memory[index * _SLOT.size : (index + 1) * _SLOT.size] = data
            return
        assert self._slots is not None
        os.pwrite(self._slots.fileno(), data, t.base + index * _SLOT.size)

    def _probe(self, t: _Table, fp: int) -> tuple[list[tuple[int, int]], int]:
        """The slots along ``fp``'s probe sequence that hold ``fp`` (each as its index and its word), and the
        first empty slot."""
        index = fp % t.slots
        matches: list[tuple[int, int]] = []
        memory = t.memory
        size = _SLOT.size
        while True:
            count = min(WINDOW, t.slots - index)  # to the table's end, then from its start
            if memory is not None:
                window: bytes | bytearray = memory[index * size : (index + count) * size]
            else:
                assert self._slots is not None
                window = os.pread(self._slots.fileno(), count * size, t.base + index * size)
            values = _WINDOWS[count].unpack(window)
            for i in range(0, 2 * count, 2):
                slot_fp = values[i]
                if slot_fp == 0:
                    return matches, index + i // 2
                if slot_fp == fp:
                    matches.append((index + i // 2, values[i + 1]))
            index = (index + count) % t.slots  # a table is never full: an empty slot comes

    def _id_at(self, offset: int) -> bytes:
        assert self._ids is not None
        fd = self._ids.fileno()
        (size,) = _LEN.unpack(os.pread(fd, _LEN.size, offset))
        return os.pread(fd, size, offset + _LEN.size)

    def _insert(self, raw: bytes, fp: int, empty: int, value: int) -> None:
        """Write the id, and its slot at ``empty`` of the newest table (or in a new one when that is half full)."""
        if self._ids is None:
            self._ids = open_spool(resolve_spool_dir(self._spill_dir))
        offset = self._ids_end
        record = _LEN.pack(len(raw)) + raw
        os.pwrite(self._ids.fileno(), record, offset)
        self._ids_end += len(record)
        t = self._tables[-1]
        if t.full:
            t = self._grow(t.slots * GROWTH)
            empty = fp % t.slots  # a new table is empty
        self._write(t, empty, _SLOT.pack(fp, offset | value << _VALUE_SHIFT))
        t.used += 1

    def _grow(self, slots: int) -> _Table:
        """A new, empty table of ``slots`` slots at the end of the slots file (a sparse extension: zeros)."""
        if self._slots is None:
            self._slots = open_spool(resolve_spool_dir(self._spill_dir))
        t = _Table(slots, self._slots_end, None)
        self._slots_end += slots * _SLOT.size
        os.ftruncate(self._slots.fileno(), self._slots_end)
        self._tables.append(t)
        return t
