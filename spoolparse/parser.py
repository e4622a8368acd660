"""Scanner + provider as one sans-I/O object, and ``parse`` for a file on disk.

:class:`StreamParser` is what every driver feeds: ``run`` while the child
writes its spool, ``arun`` from the event loop, ``parse`` from a finished file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import IO, Any

from . import _limits
from .lines import Buffer, Dropped, Event, LineScanner, Loads, Noted, Record
from .providers import AutoProvider, Provider, make_provider
from .providers.base import LiveEvent
from .result import Result

__all__ = ["StreamParser", "parse", "OnEvent"]

OnEvent = Callable[[LiveEvent], Any]


class StreamParser:
    """Feed a stdout stream in any chunks; read the answer at the end.

    ``feed`` and ``close`` return the :class:`LiveEvent` values of the lines
    they completed, in stream order. ``finish`` builds the :class:`Result`.
    """

    def __init__(
        self,
        provider: str | Provider = "auto",
        *,
        max_line: int = _limits.MAX_LINE,
        max_retained: int = _limits.MAX_RETAINED,
        loads: Loads | None = None,
    ) -> None:
        self.provider = make_provider(provider)
        self.scanner = LineScanner(
            self.provider.retain, max_line=max_line, max_retained=max_retained, loads=loads
        )
        self.dropped: list[dict[str, Any]] = []
        self.dropped_count = 0
        self._settled = not isinstance(self.provider, AutoProvider)
        self.closed = False

    @property
    def provider_name(self) -> str:
        p = self.provider
        if isinstance(p, AutoProvider):
            return p.provider_name
        return p.name

    def feed(self, buf: Buffer, start: int = 0, end: int | None = None) -> list[LiveEvent]:
        recs = self.scanner.feed(buf, start, end)
        return self._fold(recs) if recs else []

    def close(self) -> list[LiveEvent]:
        """End of stream (idempotent)."""
        if self.closed:
            return []
        self.closed = True
        live = self._fold(self.scanner.end())
        if isinstance(self.provider, AutoProvider):
            live.extend(self.provider.settle())
        return live

    def _fold(self, recs: list[Record]) -> list[LiveEvent]:
        live: list[LiveEvent] = []
        p = self.provider
        for rec in recs:
            if type(rec) is Event:
                live.extend(p.event(rec))
            elif type(rec) is Noted:
                live.extend(p.noted(rec))
            else:
                assert isinstance(rec, Dropped)
                self.dropped_count += 1
                if len(self.dropped) < _limits.MAX_DROPPED_RECORDS:
                    self.dropped.append(rec.as_dict())
                live.extend(p.dropped(rec))
        if not self._settled and isinstance(p, AutoProvider) and p.chosen is not None:
            self._settled = True
            self.scanner.retain = p.retain  # drops the decisions cached before detection
        return live

    def finish(self, **fields: Any) -> Result:
        """The :class:`Result` for this stream; ``fields`` fill the process facts."""
        self.close()
        ans = self.provider.answer()
        warnings = ans.warnings
        if self.dropped_count > len(self.dropped):
            warnings = [*warnings, f"{self.dropped_count - len(self.dropped)} more dropped lines not listed"]
        return Result(
            provider=self.provider_name,
            text=ans.text,
            usage=ans.usage,
            raw_usage=ans.raw_usage,
            model=ans.model,
            session_id=ans.session_id,
            error=ans.error,
            warnings=warnings,
            lines=self.scanner.lines,
            invalid_lines=self.scanner.invalid_lines,
            dropped=self.dropped,
            dropped_count=self.dropped_count,
            **fields,
        )


def parse(
    source: str | os.PathLike[str] | IO[bytes],
    *,
    provider: str | Provider = "auto",
    max_line: int = _limits.MAX_LINE,
    max_retained: int = _limits.MAX_RETAINED,
    on_event: OnEvent | None = None,
    loads: Loads | None = None,
) -> Result:
    """Parse a transcript already on disk (a path, or a binary file) with bounded memory.

    Returns a :class:`Result` with ``returncode`` ``None``. Reads the file once,
    in windows of ``READ_CHUNK`` bytes.

    .. seealso:: :func:`spoolparse.run`
    """
    start = time.monotonic()
    sp = StreamParser(provider, max_line=max_line, max_retained=max_retained, loads=loads)
    owns = isinstance(source, (str, os.PathLike))
    f: IO[bytes] = open(source, "rb") if isinstance(source, (str, os.PathLike)) else source  # noqa: SIM115
    total = 0
    try:
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
            live = sp.feed(chunk, 0, n)
            if on_event is not None:
                for ev in live:
                    on_event(ev)
        live = sp.close()
        if on_event is not None:
            for ev in live:
                on_event(ev)
    finally:
        if owns:
            f.close()
    return sp.finish(args=None, stdout_bytes=total, duration_s=time.monotonic() - start)
