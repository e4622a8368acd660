"""What ``spoolparse run`` shows while the child runs: NDJSON events and a live status line.

The status line (elapsed, bytes spooled, lines, dropped lines, last event
kind) is drawn by :mod:`rich` on stderr; stdout stays reserved for the one
JSON summary. Events go to stderr or a file, one JSON object a line, flushed
as each happens.

.. seealso:: :func:`spoolparse.run` (``on_event``, ``on_start``)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from ._json import dumps
from .process import Child
from .providers.base import LiveEvent

__all__ = ["StatusLine", "EventWriter", "follow", "format_bytes"]

#: Redraws of the status line per second (rich redraws from its own thread).
REFRESH_PER_SECOND = 4


def format_bytes(n: int) -> str:
    """``1536`` → ``"1.5 KiB"``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class StatusLine:
    """One live line on a terminal: elapsed, spooled bytes, lines, dropped lines, last event.

    A renderable for :class:`rich.live.Live`: it reads the child's counters
    each time rich redraws, so it costs nothing between redraws.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.child: Child | None = None
        self.started = time.monotonic()
        self.events = 0
        self.last_kind = "—"
        self._live = Live(
            self,
            console=console,
            refresh_per_second=REFRESH_PER_SECOND,
            transient=True,  # the line goes when the run ends; the summary is the record
            redirect_stdout=False,  # stdout is the summary's alone
            redirect_stderr=False,
        )

    def attach(self, child: Child) -> None:
        self.child = child
        self.started = child.started

    def on_event(self, ev: LiveEvent) -> None:
        self.events += 1
        self.last_kind = ev.kind

    def __rich__(self) -> Text:
        child = self.child
        spooled = lines = dropped = 0
        if child is not None:
            spooled = child.offset
            lines = child.parser.scanner.lines
            dropped = child.parser.dropped_count
        elapsed = int(time.monotonic() - self.started)
        text = Text()
        text.append(f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}", style="bold")
        text.append(f"  {format_bytes(spooled)} spooled  {lines:,} lines  ")
        text.append(f"{dropped:,} dropped", style="yellow" if dropped else "")
        text.append(f"  {self.events:,} events  last: ")
        text.append(self.last_kind, style="red" if self.last_kind == "error" else "cyan")
        return text

    def __enter__(self) -> StatusLine:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()


class EventWriter:
    """Writes each event as one NDJSON line, flushed, to a binary stream.

    With a :class:`StatusLine` on the same terminal the line is written
    through its console, so it lands above the status line instead of
    through it.
    """

    def __init__(self, out: IO[bytes], *, console: Console | None = None, text: TextIO | None = None) -> None:
        self.out = out
        self.console = console
        self.text = text  # the text layer over ``out``: flushed first, so lines never interleave

    def __call__(self, ev: LiveEvent) -> None:
        data = dumps(ev.as_dict())  # usage numbers of any size, exactly
        if self.console is not None:
            self.console.out(data.decode(), highlight=False)
            return
        if self.text is not None:
            self.text.flush()
        self.out.write(data + b"\n")
        self.out.flush()


class _Each:
    """Calls each callback in turn."""

    def __init__(self, callbacks: list[Callable[[LiveEvent], Any]]) -> None:
        self.callbacks = callbacks

    def __call__(self, ev: LiveEvent) -> None:
        for cb in self.callbacks:
            cb(ev)


@contextmanager
def follow(
    *,
    events: bool = False,
    events_file: str | None = None,
    progress: bool | None = None,
    stderr: TextIO | None = None,
) -> Iterator[tuple[Callable[[LiveEvent], Any] | None, Callable[[Child], Any] | None]]:
    """``(on_event, on_start)`` for :func:`spoolparse.run` from the CLI's options.

    ``events_file`` implies ``events``; ``progress=None`` shows the status line
    only when ``stderr`` is a terminal. The events file is opened (and
    truncated) before the child starts, so a bad path fails first.
    """
    err = stderr if stderr is not None else sys.stderr
    if progress is None:
        progress = err.isatty()
    with ExitStack() as stack:
        status: StatusLine | None = None
        if progress:
            status = StatusLine(Console(file=err))
        writer: EventWriter | None = None
        if events_file is not None:
            writer = EventWriter(stack.enter_context(open(events_file, "wb")))
        elif events:
            writer = EventWriter(err.buffer, console=status.console if status is not None else None, text=err)
        if status is not None:
            stack.enter_context(status)
        callbacks: list[Callable[[LiveEvent], Any]] = []
        if writer is not None:
            callbacks.append(writer)
        if status is not None:
            callbacks.append(status.on_event)
        on_event: Callable[[LiveEvent], Any] | None = None
        if len(callbacks) == 1:
            on_event = callbacks[0]
        elif callbacks:
            on_event = _Each(callbacks)
        yield on_event, (status.attach if status is not None else None)
