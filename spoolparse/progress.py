"""What ``spoolparse run`` and ``batch`` show while children run: NDJSON events and live status lines.

:class:`Activity` folds one run's live events into what a person wants to
see (the tool running now and its title, tokens so far, retries); it does no
I/O. The status line of ``run`` (elapsed, current tool, tokens, bytes
spooled) is drawn by :mod:`rich` on stderr; ``batch`` draws one line per
running task (at most ``MAX_TASK_LINES``) above its totals. stdout stays
reserved for the JSON output. Events go to stderr or a file, one JSON object
a line, flushed as each happens.

.. seealso:: :func:`spoolparse.run` (``on_event``, ``on_start``)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, TYPE_CHECKING, Any, TextIO

from . import _limits
from ._decode.jsonout import dumps
from ._dirfd import open_named
from ._terminal import printable
from .providers.base import LiveEvent

if TYPE_CHECKING:
    # rich is optional (``spoolparse[cli]``) and slow to import: the drawing imports it when it draws
    from rich.console import Console
    from rich.text import Text

    from .child import Child

__all__ = ["Activity", "RunningTasks", "Spend", "StatusLine", "EventWriter", "follow", "format_bytes", "format_count"]

#: Redraws of the status line per second (rich redraws from its own thread).
REFRESH_PER_SECOND = 4
#: Running tasks ``batch --progress`` shows a line for (the rest are counted).
MAX_TASK_LINES = 8


def format_count(n: int) -> str:
    """``12345`` → ``"12.3k"``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def format_elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Activity:
    """What one run is doing, folded from its live events (no I/O, constant memory).

    ``tool``/``title``: the latest tool call still running (``None`` between
    calls); ``last_tool``: the latest call started; ``tools``: calls ended;
    ``input_tokens``/``output_tokens``: the latest totals; ``retries`` and
    ``note`` (the last retry or error message); ``state``: what the agent did
    last (``tool``, ``writing``, ``thinking``, ``retrying``, ``error``, ``done``).
    """

    __slots__ = (
        "_open",
        "events",
        "input_tokens",
        "last_tool",
        "note",
        "output_tokens",
        "retries",
        "state",
        "title",
        "tool",
        "tools",
    )

    def __init__(self) -> None:
        self.tool: str | None = None
        self.title: str | None = None
        self.last_tool: str | None = None
        self.tools = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.retries = 0
        self.note: str | None = None
        self.state = "starting"
        self.events = 0
        # open calls, newest last: call_id -> (name, title); bounded like the provider's own table
        self._open: dict[str, tuple[str | None, str | None]] = {}

    def on_event(self, ev: LiveEvent) -> None:
        self.events += 1
        kind, d = ev.kind, ev.data
        if kind == "tool_start":
            cid = str(d.get("call_id"))
            self._open.pop(cid, None)
            if len(self._open) >= _limits.MAX_OPEN_CALLS:
                del self._open[next(iter(self._open))]
            self._open[cid] = (d.get("name"), d.get("title"))
            self.tool, self.title = d.get("name"), d.get("title")
            self.last_tool = self.tool
            self.state = "tool"
        elif kind == "tool_end":
            self.tools += 1
            self._open.pop(str(d.get("call_id")), None)
            if self._open:
                self.tool, self.title = self._open[next(reversed(self._open))]
            else:
                self.tool = self.title = None
                self.state = "waiting"
        elif kind == "usage":
            usage = d.get("usage") or {}
            self.input_tokens = usage.get("input_tokens", self.input_tokens)
            self.output_tokens = usage.get("output_tokens", self.output_tokens)
        elif kind in ("text", "text_delta"):
            if not self._open:
                self.state = "writing"
        elif kind == "thinking":
            if not self._open:
                self.state = "thinking"
        elif kind == "retry":
            self.retries += 1
            self.note = d.get("message")
            self.state = "retrying"
        elif kind == "error":
            self.note = d.get("message")
            self.state = "error"
        elif kind == "result":
            self.state = "done"

    def doing(self) -> str:
        """One short phrase: ``Bash: npm test`` or ``writing`` …; what the agent named is made printable
        (:func:`~spoolparse._terminal.printable`): it goes to a terminal."""
        if self.tool is not None or self.title is not None:
            name = str(self.tool or "tool")
            return printable(f"{name}: {self.title}" if self.title else name)
        return self.state

    def tokens(self) -> str:
        return f"{format_count(self.input_tokens)} in / {format_count(self.output_tokens)} out"

    def summary(self) -> str:
        """``Bash: npm test · 12.3k in / 456 out · 3 tools · 1 retry``."""
        parts = [self.doing(), self.tokens(), f"{self.tools} tool{'s' if self.tools != 1 else ''}"]
        if self.retries:
            parts.append(f"{self.retries} retr{'ies' if self.retries != 1 else 'y'}")
        return " · ".join(parts)


class RunningTasks:
    """Per-task :class:`Activity` for ``batch --progress``: one line per running task, bounded.

    ``on_event(task_id, ev)`` is called from the batch loop, so it only
    updates a small table; ``finished(task_id)`` drops a task's line.
    """

    def __init__(self, limit: int = MAX_TASK_LINES) -> None:
        self.limit = limit
        self.tasks: dict[str, tuple[float, Activity]] = {}

    def on_event(self, task_id: str, ev: LiveEvent) -> None:
        entry = self.tasks.get(task_id)
        if entry is None:
            entry = self.tasks[task_id] = (time.monotonic(), Activity())
        entry[1].on_event(ev)

    def finished(self, task_id: str) -> None:
        self.tasks.pop(task_id, None)

    def lines(self, width: int = 100) -> list[str]:
        """The oldest running tasks first, at most ``limit`` lines, then ``… and N more``."""
        now = time.monotonic()
        out: list[str] = []
        for tid, (started, act) in list(self.tasks.items())[: self.limit]:
            line = f"  {printable(tid)}  {format_elapsed(now - started)}  {act.summary()}"
            out.append(line if len(line) <= width else line[: width - 1] + "…")
        extra = len(self.tasks) - self.limit
        if extra > 0:
            out.append(f"  … and {extra} more running")
        return out


def format_bytes(n: int) -> str:
    """``1536`` → ``"1.5 KiB"``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class StatusLine:
    """One live line on a terminal: elapsed, the current tool and its title, tokens, spooled bytes.

    A renderable for :class:`rich.live.Live`: it reads the child's counters
    each time rich redraws, so it costs nothing between redraws.
    """

    def __init__(self, console: Console) -> None:
        from rich.live import Live

        self.console = console
        self.child: Child | None = None
        self.started = time.monotonic()
        self.activity = Activity()
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
        self.activity.on_event(ev)

    def __rich__(self) -> Text:
        from rich.text import Text

        child = self.child
        spooled = dropped = 0
        if child is not None:
            spooled = child.offset
            dropped = child.parser.dropped_count
        act = self.activity
        text = Text()
        text.append(format_elapsed(time.monotonic() - self.started), style="bold")
        text.append("  ")
        state = act.state
        text.append(act.doing(), style="red" if state == "error" else "yellow" if state == "retrying" else "cyan")
        text.append(f"  {act.tokens()} tokens  {act.tools} tools")
        if act.retries:
            text.append(f"  {act.retries} retries", style="yellow")
        text.append(f"  {format_bytes(spooled)} spooled")
        if dropped:
            text.append(f"  {dropped:,} dropped", style="yellow")
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


def open_events_file(path: str) -> IO[bytes]:
    """``--events-file PATH``, made or truncated: a symbolic link on the way is followed only when it is ours or
    root's (:func:`~spoolparse._dirfd.open_named`; another user's is a :class:`~spoolparse.UsageError`)."""
    return os.fdopen(open_named(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, what="events file"), "wb")


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
            from rich.console import Console

            status = StatusLine(Console(file=err))
        writer: EventWriter | None = None
        if events_file is not None:
            writer = EventWriter(stack.enter_context(open_events_file(events_file)))
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


class Spend:
    """Tokens and cost of the tasks ended so far, for ``batch --progress`` (no I/O, constant memory).

    :meth:`add` takes each outcome's summary; :meth:`text` is `` | 1.2M tokens | $3.41`` with the estimated
    part and the runs whose cost is unknown said apart.
    """

    __slots__ = ("estimated", "reported", "tokens", "unpriced")

    def __init__(self) -> None:
        self.tokens = 0
        self.reported = 0.0
        self.estimated = 0.0
        self.unpriced = 0

    def add(self, summary: Any) -> None:
        if not isinstance(summary, dict):
            return
        usage = summary.get("usage")
        if isinstance(usage, dict):
            for key in ("input_tokens", "output_tokens"):
                n = usage.get(key)
                if type(n) is int and n > 0:
                    self.tokens += n
        usd, source = summary.get("cost_usd"), summary.get("cost_source")
        if not isinstance(usd, (int, float)) or isinstance(usd, bool):
            self.unpriced += 1
        elif source == "reported":
            self.reported += usd
        else:
            self.estimated += usd

    def text(self) -> str:
        if not self.tokens and not self.reported and not self.estimated and not self.unpriced:
            return ""
        spent = self.reported + self.estimated
        out = f" | {format_count(self.tokens)} tokens | ${spent:,.2f}"
        if self.estimated:
            out += f" ({'all' if not self.reported else f'${self.estimated:,.2f}'} est.)"
        if self.unpriced:
            out += f" +{self.unpriced} unpriced"
        return out
