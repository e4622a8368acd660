"""Scanner + provider as one sans-I/O object, and ``parse`` for a file on disk.

:class:`StreamParser` is what every driver feeds: ``run`` while the child
writes its spool, ``arun`` from the event loop, ``parse`` from a finished file.
"""

from __future__ import annotations

import fcntl
import io
import mmap
import os
import signal
import stat
import time
from collections.abc import Callable
from typing import IO, Any

from . import _limits
from ._decode.document import DOCUMENT, DocumentScanner, sniff
from .cost import price
from .errors import UsageError
from .lines import NOTE, SKIP, Buffer, Dropped, LineScanner, Loads, Noted, Record, RetainFn
from .options import ChildOptions
from .providers import Engine, Provider, make_provider
from .providers.base import LiveEvent
from .result import Result
from .verdict import StreamFacts, judge, spool_integrity

__all__ = ["StreamParser", "parse", "OnEvent"]

OnEvent = Callable[[LiveEvent], Any]


class StreamParser:
    """Feed a stdout stream in any chunks; read the answer at the end.

    ``feed`` and ``close`` return the :class:`LiveEvent` values of the lines
    they completed, in stream order. ``finish`` builds the :class:`Result`.

    With ``live=False`` nobody listens: no events are returned, and once the
    provider is known the lines it only notes (tool starts and ends, which
    feed nothing but live events) are skipped unread like unretained ones.
    """

    def __init__(
        self,
        provider: str | Provider = "auto",
        *,
        max_line: int = _limits.MAX_LINE,
        max_retained: int = _limits.MAX_RETAINED,
        loads: Loads | None = None,
        live: bool = True,
        tool_output: int = 0,
        allow_empty_answer: bool = False,
    ) -> None:
        #: The provider given (or made by name): the fold of a named one, the :class:`AutoProvider` of ``auto``.
        self.provider = make_provider(provider)
        self.provider.tool_output = tool_output
        self.provider.live = live
        self.provider.max_text = min(self.provider.max_text, max_retained)
        #: Detection, runs and the verdict's facts, from the providers' grammars.
        self.engine = Engine(self.provider, detect_bytes=max_retained)
        self.scanner = LineScanner(self.engine.retain, max_line=max_line, max_retained=max_retained, loads=loads)
        #: Whether a run that finished without an answer is ``ok`` all the same.
        self.allow_empty_answer = allow_empty_answer
        self.dropped: list[dict[str, Any]] = []
        self.dropped_count = 0
        self.live = live
        #: Live events handed on so far (each is stamped with its number).
        self.seq = 0
        self._settled = False
        self._retain_version = -1
        self._update_retain()
        self.closed = False
        #: The smallest spool size seen below what was read (a child that truncated its own stdout).
        self.shrunk_to: int | None = None
        self._loads = loads
        # The stream's first bytes, until they tell JSON lines from a whole document.
        self._head: bytearray | None = bytearray()
        #: Set when the stream is one JSON document (an array or a pretty-printed object).
        self.document: DocumentScanner | None = None

    @classmethod
    def of(cls, options: ChildOptions, *, live: bool = True) -> StreamParser:
        """The parser of a child with these options (how its output is read: provider, bounds, decoder,
        ``tool_output``, ``allow_empty_answer``)."""
        return cls(options.provider, max_line=options.max_line, max_retained=options.max_retained,
                   loads=options.loads, live=live, tool_output=options.tool_output,
                   allow_empty_answer=options.allow_empty_answer)

    @property
    def provider_name(self) -> str:
        return self.engine.provider_name

    def _update_retain(self) -> None:
        """Read the engine's retain function again when it may have changed (a provider was chosen)."""
        engine = self.engine
        if engine.retain_version == self._retain_version:
            return
        self._retain_version = engine.retain_version
        self._settled = engine.decided
        # with nobody listening, once the provider is known the lines it only notes are skipped unread
        retain = engine.retain if self.live or not self._settled else _without_notes(engine.retain)
        keys = engine.retained()
        self.scanner.retain = retain
        # the keys read, when the grammar knows them: the scanner passes over the rest a window at a time
        self.scanner.retained = None if keys is None else frozenset(k for k in keys if retain(k) != SKIP)

    def feed(self, buf: Buffer, start: int = 0, end: int | None = None) -> list[LiveEvent]:
        if self._head is not None:
            return self._sniff(buf, start, len(buf) if end is None else end)
        recs = self.scanner.feed(buf, start, end) if self.document is None else self.document.feed(buf, start, end)
        return self._fold(recs) if recs else []

    def _sniff(self, buf: Buffer, start: int, end: int, *, final: bool = False) -> list[LiveEvent]:
        """Hold the first bytes (at most ``PROBE_BYTES``) until the stream's shape is known."""
        head = self._head
        assert head is not None
        take = min(end - start, _limits.PROBE_BYTES - len(head))
        head += buf[start : start + take]
        full = len(head) >= _limits.PROBE_BYTES
        mode = sniff(bytes(head), final=final or full)
        if mode is None:
            return []
        self._head = None
        if mode == DOCUMENT:
            self.document = DocumentScanner(self.scanner, loads=self._loads)
        live = self.feed(head)
        if start + take < end:
            live.extend(self.feed(buf, start + take, end))
        return live

    def close(self) -> list[LiveEvent]:
        """End of stream (idempotent)."""
        if self.closed:
            return []
        live = self._sniff(b"", 0, 0, final=True) if self._head is not None else []
        self.closed = True
        live.extend(self._fold(self.scanner.end() if self.document is None else self.document.end()))
        # every JSON object of the input, read or skipped (a blank line is none): a whole-document form is the run
        # only when it is the one
        sc = self.scanner
        ended = self.engine.close(objects=sc.lines - sc.invalid_lines - sc.blank_lines)
        live.extend(self._stamp(ended) if self.live else [])
        return live

    def spool_size(self, size: int) -> None:
        """Report the spool's current size: below what was read, the child truncated it."""
        if size < self.scanner.bytes and (self.shrunk_to is None or size < self.shrunk_to):
            self.shrunk_to = size

    def _fold(self, recs: list[Record]) -> list[LiveEvent]:
        live: list[LiveEvent] = []
        engine = self.engine
        for rec in recs:
            if type(rec) is Dropped:
                self.dropped_count += 1
                if len(self.dropped) < _limits.MAX_DROPPED_RECORDS:
                    self.dropped.append(rec.as_dict())
            elif type(rec) is Noted and self._settled and not self.live:
                # classified before detection, in the same read: with nobody listening, a noted line
                # only makes live events, so it goes the way of the lines after it (unread)
                continue
            live.extend(engine.see(rec))
            if engine.retain_version != self._retain_version:
                self._update_retain()  # drops the decisions cached before, which still looked at noted lines
        return self._stamp(live) if self.live else []

    def _stamp(self, live: list[LiveEvent]) -> list[LiveEvent]:
        """Number and time the events handed on (the one place both are set)."""
        if live:
            now = time.time()
            seq = self.seq
            for ev in live:
                seq += 1
                ev.stamp(seq, now)
            self.seq = seq
        return live

    def finish(
        self, *, spool_size: int | None = None, spool_cap: int | None = None, shrunk: str = "", **fields: Any
    ) -> Result:
        """The :class:`Result` for this stream, with its verdict (:func:`spoolparse.verdict.judge`).

        ``fields`` fill the process facts (``returncode``, ``timed_out`` …).
        ``spool_size`` is the spool's size at the end and ``spool_cap`` the
        ``max_spool_bytes`` that bounded the reading: together with what was
        read they tell a spool the child truncated, or output cut at the cap.
        """
        self.close()
        if spool_size is not None:
            self.spool_size(spool_size)
        ans = self.engine.conclude()
        warnings = ans.warnings
        if self.dropped_count > len(self.dropped):
            warnings = [*warnings, f"{self.dropped_count - len(self.dropped)} more dropped lines not listed"]
        if self.scanner.too_deep:
            warnings = [
                *warnings,
                f"{self.scanner.too_deep} lines nested deeper than the JSON decoder allows were counted invalid",
            ]
        spool = None
        if not fields.get("spool_full"):
            spool = spool_integrity(
                read=self.scanner.bytes, size=spool_size, smallest=self.shrunk_to, cap=spool_cap, shrunk=shrunk
            )
        facts = StreamFacts(
            lines=self.scanner.lines,
            invalid_lines=self.scanner.invalid_lines,
            blank_lines=self.scanner.blank_lines,
            returncode=fields.get("returncode"),
            timed_out=bool(fields.get("timed_out")),
            timeout=fields.get("timeout"),
            spool=spool,
            cut_off=self.document.cut_off if self.document is not None else None,
        )
        cost, by_model = price(self.provider_name, ans.model, ans.usage, ans.usage_by_model)
        return Result(
            provider=self.provider_name,
            detected_by=self.engine.detected_by,
            text=ans.text,
            usage=ans.usage,
            usage_by_model=by_model,
            cost_usd=cost.usd,
            cost_source=cost.source,
            cost_note=cost.note,
            raw_usage=ans.raw_usage,
            model=ans.model,
            session_id=ans.session_id,
            error=judge(ans, facts, allow_empty_answer=self.allow_empty_answer),
            warnings=warnings,
            lines=self.scanner.lines,
            invalid_lines=self.scanner.invalid_lines,
            dropped=self.dropped,
            dropped_count=self.dropped_count,
            **fields,
        )


def _without_notes(retain: RetainFn) -> RetainFn:
    def quiet(key: str) -> int:
        d = retain(key)
        return SKIP if d == NOTE else d

    return quiet


def parse(
    source: str | bytes | os.PathLike[str] | os.PathLike[bytes] | IO[bytes],
    *,
    provider: str | Provider = "auto",
    max_line: int = _limits.MAX_LINE,
    max_retained: int = _limits.MAX_RETAINED,
    on_event: OnEvent | None = None,
    loads: Loads | None = None,
    tool_output: int = 0,
    allow_empty_answer: bool = False,
) -> Result:
    """Parse a transcript already on disk (a path, or a binary file) with bounded memory.

    Returns a :class:`Result` with ``returncode`` ``None``. A regular file
    nobody is writing is read once through ``mmap`` in 8 MiB windows, each
    unmapped before the next and parsed a ``READ_CHUNK`` at a time whose pages
    are let go once parsed (mapped pages count in the resident set), under a
    read lease (see :func:`_feed_mapped`); anything else — pipes, FIFOs,
    character devices, ``/dev/stdin``, files being written, and bytes appended
    meanwhile — in ``READ_CHUNK`` reads. A file that shrank while it was read
    makes the result not ``ok``. Without ``on_event`` nothing
    receives the reports of lines the provider only notes (tool starts and
    ends), so once the provider is known those lines are skipped unread.
    ``tool_output``: characters of each tool's output a ``tool_end`` event
    carries (default 0: only its size), read from the line's bounded head.
    ``allow_empty_answer``: a run that finished without an answer is ``ok`` (by default it is not: "the agent
    finished without an answer").

    .. seealso:: :func:`spoolparse.run`
    """
    start = time.monotonic()
    options = ChildOptions(provider=provider, max_line=max_line, max_retained=max_retained, loads=loads,
                           tool_output=tool_output, allow_empty_answer=allow_empty_answer)  # checked there
    sp = StreamParser.of(options, live=on_event is not None)
    owns = isinstance(source, (str, bytes, os.PathLike))  # a path, bytes too (as open() takes one)
    if not owns and not _binary_reader(source):
        raise UsageError(f"parse takes a path or a file opened in binary mode, not {type(source).__name__}")
    f: IO[bytes] = open(source, "rb") if isinstance(source, (str, bytes, os.PathLike)) else source  # noqa: SIM115

    def fed(live: list[LiveEvent]) -> None:
        if on_event is not None:
            for ev in live:
                on_event(ev)

    total = 0
    size_at_end: int | None = None
    first = 0
    try:
        first = _tell(f)
        total = _feed_mapped(f, sp, fed)
        # pipes, FIFOs, character devices, sockets, and what was appended to a file meanwhile
        buf = bytearray(_limits.READ_CHUNK)
        view = memoryview(buf)
        readinto = getattr(f, "readinto", None)
        while True:
            if readinto is not None:
                n = readinto(view)
                chunk: Buffer = buf
            else:
                data = f.read(_limits.READ_CHUNK)
                n, chunk = len(data), data
            if not n:
                break
            total += n
            fed(sp.feed(chunk, 0, n))
        fed(sp.close())
        size_at_end = _regular_size(f)
    finally:
        if owns:
            f.close()
    return sp.finish(
        args=None,
        stdout_bytes=total,
        duration_s=time.monotonic() - start,
        spool_size=None if size_at_end is None else max(0, size_at_end - first),
        shrunk="the file shrank while it was read",
    )


def _binary_reader(source: Any) -> bool:
    """Whether ``source`` reads bytes: a binary file, or anything with ``readinto`` or ``read`` but a text file."""
    return not isinstance(source, io.TextIOBase) and (hasattr(source, "readinto") or hasattr(source, "read"))


def _regular_size(f: IO[bytes]) -> int | None:
    """The size of a regular file (``None`` for anything else, or a reader without a descriptor)."""
    try:
        st = os.fstat(f.fileno())
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _tell(f: IO[bytes]) -> int:
    """Where reading begins (a caller's file may be positioned past 0; 0 for a pipe)."""
    try:
        return f.tell()
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):
        return 0


#: The signal a lease break sends: ignored by default, so a break never ends the process.
_LEASE_SIGNAL = getattr(signal, "SIGURG", 23)
_F_SETSIG = getattr(fcntl, "F_SETSIG", 10)


def _lease(fd: int) -> bool:
    """A read lease on ``fd``'s file: granted only while nobody has it open for writing; a later
    open for writing or a truncation waits (up to the kernel's lease-break time) until it is released."""
    f_setlease = getattr(fcntl, "F_SETLEASE", None)
    if f_setlease is None:
        return False
    try:
        fcntl.fcntl(fd, _F_SETSIG, _LEASE_SIGNAL)
        fcntl.fcntl(fd, f_setlease, fcntl.F_RDLCK)
    except OSError:
        return False
    return True


def _lease_held(fd: int) -> bool:
    # during a break F_GETLEASE reports the lease type the breaker needs (F_UNLCK), not ours
    return bool(fcntl.fcntl(fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK)


def _feed_mapped(f: IO[bytes], sp: StreamParser, fed: Callable[[list[LiveEvent]], None]) -> int:
    """Feed a regular file through ``mmap`` windows while that is safe; return the bytes fed.

    Touching a mapped page past a truncated end is SIGBUS, which no handler can
    recover from. So a file is mapped only under a read lease: the lease is
    refused while anyone has the file open for writing (a file still being
    written is read with plain reads), and anyone who opens it for writing or
    truncates it later waits until the lease is released — which happens at
    the next window, where the break is seen; the rest is read with plain reads.
    """
    try:
        fd = f.fileno()
        st = os.fstat(fd)
        pos = f.tell()
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):  # a reader with only read()
        return 0
    if not stat.S_ISREG(st.st_mode) or st.st_size <= pos:
        return 0
    try:
        # a description of our own: the lease and its signal must not touch the caller's
        lfd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    total = 0
    try:
        if not _lease(lfd):
            return 0
        try:
            size = os.fstat(lfd).st_size
            off = pos - pos % mmap.ALLOCATIONGRANULARITY
            step = _limits.READ_CHUNK  # a small first window: the provider is usually known after it
            while off < size and _lease_held(lfd) and os.fstat(lfd).st_size >= off + min(step, size - off):
                n = min(step, size - off)
                step = _limits.MAP_WINDOW
                with mmap.mmap(lfd, n, access=mmap.ACCESS_READ, offset=off) as m:
                    if hasattr(m, "madvise"):
                        m.madvise(mmap.MADV_SEQUENTIAL)
                    # a READ_CHUNK at a time, as a spool is read: the records of a feed are alive together until
                    # they are folded, and a window's worth of small kept lines, decoded, is several times its size;
                    # the pages read are let go (mapped pages count in RSS while they are mapped)
                    a = pos - off
                    while a < n:
                        b = min(n, a - a % _limits.READ_CHUNK + _limits.READ_CHUNK)
                        fed(sp.feed(m, a, b))
                        if hasattr(m, "madvise"):
                            page = a - a % mmap.PAGESIZE
                            m.madvise(mmap.MADV_DONTNEED, page, b - page)
                        a = b
                total += off + n - pos
                off = pos = off + n
        finally:
            fcntl.fcntl(lfd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        f.seek(pos)
    finally:
        os.close(lfd)
    return total

