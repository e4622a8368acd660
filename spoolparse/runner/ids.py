"""The task ids a batch has read, in memory that does not grow with their number: what catches a duplicate.

Each id is kept as a fixed-size fingerprint (8 bytes of BLAKE2b) in a slot of an
open-addressing table; the slot also says where the id itself was written in a
spill file, so a fingerprint met again is confirmed against the id (two ids may
share a fingerprint: the second is no duplicate for it). The first table
(:data:`FIRST_SLOTS` slots, 64 KiB) is in memory; once it is half full, ids go
to a table eight times larger, and so on, each in the spill file beside the
spools (nameless, as a spool is), read and written a slot window at a time: the
kernel's page cache holds them, not the process. No table is ever rebuilt, so
no lookup waits for one: a lookup reads one window per table (four tables hold
1.2 million ids). The process's memory for ids is so the first table and one
window, whatever their number; on disk each id takes its own bytes plus 4, and
the tables 32 bytes an id at most (sparse files: only written slots take blocks).

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

_SLOT = struct.Struct("<QQ")  # fingerprint (never 0: 0 is an empty slot), offset of the id in the spill file
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


class SeenIds:
    """The ids added so far: :meth:`add` says whether an id is new (and records it). Close it (or use it as a
    context manager) to free its spill file; ``spill_dir`` is where that goes (default: where spools go)."""

    def __init__(self, spill_dir: str | None = None) -> None:
        self._spill_dir = spill_dir
        self._tables = [_Table(FIRST_SLOTS, 0, bytearray(FIRST_SLOTS * _SLOT.size))]
        self._ids: IO[bytes] | None = None  # the ids themselves, length-prefixed
        self._ids_end = 0
        self._slots: IO[bytes] | None = None  # the tables past the first
        self._slots_end = 0
        self._fallback: set[str] | None = None  # the ids read once the spill file failed
        self.count = 0

    def __enter__(self) -> SeenIds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for f in (self._ids, self._slots):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        self._ids = self._slots = None

    def add(self, tid: str) -> bool:
        """Record ``tid``; ``False`` when it was added before."""
        raw = tid.encode("utf-8", "surrogatepass")  # a lone surrogate (a file name's undecodable byte) too
        fp = _fingerprint(raw)
        if self._fallback is not None:
            if tid in self._fallback or self._seen(raw, fp)[0]:
                return False
            self._fallback.add(tid)
        else:
            try:
                seen, empty = self._seen(raw, fp)
                if seen:
                    return False
                self._insert(raw, fp, empty)
            except (OSError, SpoolFullError) as e:
                log.warning("cannot keep the task ids read in a spill file (%s): they are kept in memory from now "
                            "on, which grows with their number", getattr(e, "strerror", None) or e)
                self._fallback = {tid}
        self.count += 1
        return True

    def __contains__(self, tid: object) -> bool:
        if not isinstance(tid, str):
            return False
        if self._fallback is not None and tid in self._fallback:
            return True
        raw = tid.encode("utf-8", "surrogatepass")
        return self._seen(raw, _fingerprint(raw))[0]

    # -- the tables ----------------------------------------------------------------------------------

    def _seen(self, raw: bytes, fp: int) -> tuple[bool, int]:
        """Whether the id ``raw`` (fingerprint ``fp``) is in a table, and the empty slot where the newest table
        would take it. Tables that cannot be read any more (after a failure) hold nothing that can be confirmed."""
        empty = -1
        try:
            for t in self._tables:
                if t.used:
                    offsets, empty = self._probe(t, fp)
                    if offsets and any(self._id_at(offset) == raw for offset in offsets):
                        return True, -1
        except OSError:
            return False, -1
        return False, empty if self._tables[-1].used else fp % self._tables[-1].slots

    def _write(self, t: _Table, index: int, data: bytes) -> None:
        if t.memory is not None:
            t.memory[index * _SLOT.size : (index + 1) * _SLOT.size] = data
            return
        assert self._slots is not None
        os.pwrite(self._slots.fileno(), data, t.base + index * _SLOT.size)

    def _probe(self, t: _Table, fp: int) -> tuple[list[int], int]:
        """The id offsets of the slots along ``fp``'s probe sequence that hold ``fp``, and the first empty slot."""
        index = fp % t.slots
        offsets: list[int] = []
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
                    return offsets, index + i // 2
                if slot_fp == fp:
                    offsets.append(values[i + 1])
            index = (index + count) % t.slots  # a table is never full: an empty slot comes

    def _id_at(self, offset: int) -> bytes:
        assert self._ids is not None
        fd = self._ids.fileno()
        (size,) = _LEN.unpack(os.pread(fd, _LEN.size, offset))
        return os.pread(fd, size, offset + _LEN.size)

    def _insert(self, raw: bytes, fp: int, empty: int) -> None:
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
        self._write(t, empty, _SLOT.pack(fp, offset))
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
