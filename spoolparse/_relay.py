"""Live events handed to a listener by a thread of their own.

The listener (``on_event`` of :func:`spoolparse.run` or a batch: the CLI's
``--events`` writer, a progress display, the caller's own function) may be
slow, or block on a full pipe; called from the supervising loop it would hold
up every timeout and kill. The loop (:func:`spoolparse.run`'s, a batch's)
puts the events here instead. While :data:`EVENT_BACKLOG` of them wait, the
loop parses no more output (the spools hold it) until the listener catches
up: memory stays bounded and supervision goes on. Events are counted, and so
are the bytes of output they came from (:data:`EVENT_BACKLOG_BYTES`): large
ones (an agent's long messages) stay bounded too. A mark put after a task's
last events is reached once the listener has had them all, so that task's
outcome can wait for it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from . import _limits

__all__ = ["EventRelay"]


class _Mark:
    __slots__ = ("done",)

    def __init__(self, done: Callable[[], None]) -> None:
        self.done = done


class EventRelay:
    """A queue of ``(listener, task, event, bytes)`` and the thread that calls each listener in turn.

    ``wake`` is called (in that thread) after a mark is reached and when the queue falls below its bound.
    What a listener raises stops the deliveries and is kept in :attr:`failed` for the loop to raise.
    """

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._q: deque[Any] = deque()
        self._bytes = 0  # of output the waiting events came from
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._abandoned = False
        self.failed: BaseException | None = None

    @property
    def room(self) -> int:
        """Events that may still be put before the bound (parse no more than that until the listener takes
        some; at 0, nothing)."""
        return 0 if self._bytes >= _limits.EVENT_BACKLOG_BYTES else max(0, _limits.EVENT_BACKLOG - len(self._q))

    @property
    def byte_room(self) -> int:
        """Bytes of output that may still be parsed into events before the bound."""
        return max(0, _limits.EVENT_BACKLOG_BYTES - self._bytes)

    @property
    def full(self) -> bool:
        return self.room == 0

    def put(self, listener: Callable[[Any, Any], None], task: Any, events: list[Any], nbytes: int = 0) -> None:
        """Queue ``events`` for ``listener(task, event)``; ``nbytes``: the bytes of output they came from."""
        if events and not self._abandoned:
            items: list[Any] = [(listener, task, ev, 0) for ev in events]
            items[-1] = (listener, task, events[-1], nbytes)  # the bytes go when the last of them is delivered
            self._add(items, nbytes)

    def mark(self, done: Callable[[], None]) -> None:
        """Call ``done`` once every event put before this is delivered (at once when none waits)."""
        if self._abandoned or (not self._q and self._thread is None):
            done()
            self._wake()
            return
        self._add([_Mark(done)])

    def _add(self, items: list[Any], nbytes: int = 0) -> None:
        with self._cv:
            self._q.extend(items)
            self._bytes += nbytes
            if self._thread is None:
                self._thread = threading.Thread(target=self._deliver, name="spoolparse-events", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _deliver(self) -> None:
        q = self._q
        while True:
            with self._cv:
                while not q and not self._closed:
                    self._cv.wait()
                if not q:
                    return
                was_full = self.full
                item = q.popleft()
                if not isinstance(item, _Mark):
                    self._bytes -= item[3]
                below = was_full and not self.full
            if isinstance(item, _Mark):
                item.done()
                self._wake()
                continue
            if self.failed is None and not self._abandoned:
                listener, task, ev, _ = item
                try:
                    listener(task, ev)
                except BaseException as e:  # raised by the loop, as it was when the loop called it
                    self.failed = e
                    self._wake()
            if below:
                self._wake()

    def abandon(self) -> None:
        """Deliver nothing more (a cancelled batch, an interrupted run: the listener hears no more once the
        call has raised); what waits is dropped, its marks reached, and a later mark is reached at once."""
        with self._cv:
            marks = [item for item in self._q if isinstance(item, _Mark)]
            self._q.clear()
            self._q.extend(marks)
            self._bytes = 0
            self._abandoned = True
            self._closed = True
            self._cv.notify()

    def close(self, wait: float = 0.0) -> None:
        """Deliver what waits, then end the thread (a listener that never returns keeps it: it is a daemon).

        ``wait``: seconds to wait for that, so that a caller about to exit does not leave the listener in the
        middle of a write (its stream would end in a cut line). Never from the listener's own thread."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        thread = self._thread
        if wait > 0 and thread is not None and thread is not threading.current_thread():
            thread.join(wait)
