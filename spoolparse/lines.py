"""The bounded line reader: JSON lines in, records out, with fixed memory.

A line is classified by its *type key* before anything is decoded:

* ``"T"`` for a top-level ``"type": "T"``;
* ``"T/S"`` when ``T`` starts with ``item.`` and the nested ``item.type``
  (or ``item.item_type``) is ``S`` (Codex items);
* ``"msg/S"`` for the legacy Codex envelope ``{"id": …, "msg": {"type": "S"}}``;
* ``""`` for an object with no type.

Key order does not matter. When the probe window holds no type (or a Codex
``item.*`` type without its nested item type), a line up to ``max_line`` is
decoded whole, once, and classified by its keys; a longer one is classified
by a bounded scan of its top-level keys while it is drained, so it is never
held past ``max_retained``.

A *retain* function maps the key to :data:`SKIP` (count the line, touch
nothing else), :data:`NOTE` (report the key and size, undecoded) or
:data:`KEEP` (decode it with ``loads``). Only kept lines are ever decoded, and
a line whose type is skipped is never buffered past the probe window, however
long it is. Memory per line is bounded by ``max_retained`` (a kept line) plus
the caller's read window.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO

from . import _limits
from ._closing import Closing
from ._decode.longline import Spill
from ._decode.probe import probe_type
from ._decode.reading import read_json
from ._decode.records import KEEP, NOTE, SKIP, Buffer, Dropped, Event, Loads, Noted, Record, RetainFn
from ._decode.scanner import LineScanner as _LineScanner
from .errors import UsageError

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
    "read_json",
    "spill_beside_spools",
    "Buffer",
    "Loads",
    "RetainFn",
]


def spill_beside_spools(directory: str | None) -> Spill:
    """A spill file for a long kept line, made as a spool is: nameless, in ``directory`` (a run's spool directory),
    else where spools go by default ($PDD_AGENT_SPOOL_DIR, else the temporary directory); closed as a spool is."""
    from .spool import close_spool, open_spool, resolve_spool_dir  # here: few streams hold a line that long

    return Spill(open_spool(directory if directory is not None else resolve_spool_dir()), close_spool)


def _spill_beside_spools(directory: str | None) -> Spill:
    return spill_beside_spools(directory)  # looked up at each call: spill_beside_spools may be replaced


class LineScanner(_LineScanner):
    __doc__ = _LineScanner.__doc__
    spill = _spill_beside_spools  # the public scanner (the parser's, the reader's) spills beside the spools


class LineReader(Closing):
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
        wanted = None if types is None else frozenset(types)
        if wanted is not None:

            def retain_types(key: str) -> int:
                return KEEP if key in wanted else SKIP

            retain = retain_types
        self._owns = isinstance(file, (str, os.PathLike))
        self._file: IO[bytes] = open(file, "rb") if isinstance(file, (str, os.PathLike)) else file  # noqa: SIM115
        if read_size < 1:
            raise UsageError(f"read_size must be positive, not {read_size}")
        self._read_size = min(read_size, max_line)
        self.scanner = LineScanner(retain, max_line=max_line, max_retained=max_retained, loads=loads)
        self.scanner.retained = wanted

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
