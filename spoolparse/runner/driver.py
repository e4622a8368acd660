"""A batch's loop, run in a thread of its own, its outcomes handed to the reader through a queue (or to an
event loop: :func:`relay`).

The children stay supervised however long the reader takes over each
outcome: the loop never waits for the reader. Outcomes it made wait in the
hand-off; the loop looks at :attr:`Driver.waiting` to stop starting tasks
while many wait (the running ones go on), and the reader's taking one wakes
it again through ``on_room``.

The loop yields its items a batch at a time (a turn's outcomes): one hand-off,
and one wake of the reader, for all of them.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from .. import _limits
from .._signals import deferred

__all__ = ["Driver", "relay", "turns"]

#: Seconds a batch's thread waits for room in :func:`relay` before it looks whether it was asked to stop.
RELAY_TICK = 0.05

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Turning(Protocol[T_co]):
    """A loop that goes one turn at a time: the items that turn made, and whether to go on."""

    def _turn(self) -> tuple[Sequence[T_co], bool]: ...


def turns(ref: weakref.ref[Turning[T]]) -> Generator[list[T], None, None]:
    """The turns of the loop ``ref`` holds, for its driver thread, holding it only during a turn.

    A batch its reader dropped unfinished (``for o in run_many(...): break``) is then collected like any
    object, and its finalizer cancels what runs; a loop that held it all along would keep it, its children
    and its thread until the process exits.
    """
    while True:
        loop = ref()
        if loop is None:
            return
        try:
            out, more = loop._turn()
        finally:
            del loop
        yield list(out)
        if not more:
            return


class Driver(Generic[T]):
    """``loop`` driven in a daemon thread (started by the first :meth:`take`); it yields lists of items."""

    def __init__(self, loop: Generator[list[T], None, None], *, name: str, room_at: int,
                 on_room: Callable[[], None]) -> None:
        self._loop = loop
        self._name = name
        self._room_at = room_at  # a take that leaves this many waiting makes room: on_room is called
        self._on_room = on_room
        self._thread: threading.Thread | None = None
        self._handoff: deque[T] = deque()
        self._cv = threading.Condition()
        self._ended = False  # the loop has ended
        self._error: BaseException | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def in_its_thread(self) -> bool:
        """Whether the caller is the loop's own thread (a finalizer it ran between two items)."""
        return self._thread is not None and self._thread is threading.current_thread()

    @property
    def waiting(self) -> int:
        """Outcomes made and not yet taken."""
        return len(self._handoff)

    def take(self, hand: Callable[[T], None] | None = None) -> T:
        """The next item, waiting for the loop; :class:`StopIteration` once it ended (its exception, if any).

        ``hand`` is called with the item before the take returns, with the ending signals held from the item's
        leaving the queue to its being handed: a signal there cannot lose it."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._drive, name=self._name, daemon=True)
            self._thread.start()
        with self._cv:
            while not self._handoff and not self._ended:
                self._cv.wait(_limits.SIGNAL_SLICE)  # a signal another thread took is seen here within this
        # Only this thread takes: what the wait saw is still there. A signal the instant the item is taken would
        # lose it (taken, never handed out): held over the take, and when it comes there, raised with the item
        # handed (``hand``), or put back for the next take. The loop's lock is not held while it is handed.
        item = None
        handed = False
        try:
            with deferred():
                with self._cv:
                    item = self._handoff.popleft() if self._handoff else None
                    if item is not None and len(self._handoff) == self._room_at:
                        self._on_room()  # the reader caught up: the loop may start tasks again
                if item is not None and hand is not None:
                    handed = True  # out of the queue whatever hand does: in hand, never put back
                    hand(item)
        except BaseException:
            if item is not None and not handed:
                with self._cv:
                    self._handoff.appendleft(item)
            raise
        if item is not None:
            return item
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        raise StopIteration

    def _drive(self) -> None:
        try:
            for items in self._loop:
                if items:
                    with self._cv:
                        self._handoff.extend(items)
                        self._cv.notify()
        except BaseException as e:
            self._error = e
        finally:
            with self._cv:
                self._ended = True
                self._cv.notify_all()

    def join(self) -> list[T]:
        """Wait for the loop's thread (asked to stop by the caller); the items it made that were not taken."""
        if self._thread is not None:
            if self._thread is not threading.current_thread():  # else it ends once we return
                with deferred():  # no signal cuts the wait short and leaves children behind
                    self._thread.join()
        else:
            self._loop.close()
        left = list(self._handoff)
        self._handoff.clear()
        return left


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


async def relay(batch: Any, window: int, name: str) -> AsyncGenerator[Any, None]:
    """Iterate ``batch`` (a :class:`~.scheduler.Batch`, or the Ray driver) in a thread of its own; yield its
    outcomes here, on the event loop.

    The thread keeps supervising while the consumer awaits; at most ``window``
    outcomes wait for it. Leaving early (or cancellation) asks the batch to
    stop and waits for its thread.
    """
    loop = asyncio.get_running_loop()
    outq: asyncio.Queue[Any] = asyncio.Queue()
    credits = threading.Semaphore(window)

    def drive() -> None:
        try:
            for out in batch:
                while not credits.acquire(timeout=RELAY_TICK):
                    if batch._stop.is_set():
                        break
                loop.call_soon_threadsafe(outq.put_nowait, out)
        except BaseException as e:
            loop.call_soon_threadsafe(outq.put_nowait, _Failed(e))
        else:
            loop.call_soon_threadsafe(outq.put_nowait, _DONE)

    thread = threading.Thread(target=drive, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = await outq.get()
            if item is _DONE:
                break
            if isinstance(item, _Failed):
                raise item.exc
            credits.release()
            yield item
    finally:
        batch.request_stop()
        credits.release()
        await asyncio.shield(asyncio.to_thread(thread.join))
