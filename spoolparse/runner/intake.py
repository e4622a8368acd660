"""A batch's input: tasks pulled when there is room, numbered, checked, resumed ones skipped.

Both runners (the local :class:`~spoolparse.runner.scheduler.Batch` and the
Ray driver) read their input through one :class:`Intake`, so a rule about
tasks — ids are unique, a bad item becomes its own ``spawn_error``, a task
done in the job log is skipped on ``--resume``, every task read after a halt
gets a ``skipped`` outcome — holds for both alike.

The input is a list or tuple (read where it lies), any other iterable, or
a non-blocking pull function that returns :data:`LATER` when nothing is there
yet and :data:`END` when nothing will be (:class:`AsyncSource` makes one from
an async iterable). Any other iterable is pulled in a thread of its own, at
most ``depth`` items ahead: whatever it does to produce an item (a read of
stdin, a queue, a slow generator) happens off the supervising thread, whose
timeouts and kills never wait for it. Memory is O(``depth``) items: the ids
read so far, which catch a duplicate, are kept in a spill file beside the
spools (:class:`~spoolparse.runner.ids.SeenIds`), not in memory.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections import deque
from collections.abc import AsyncIterable, Callable, Container, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import _limits
from ..errors import Error
from .ids import SeenIds, duplicate_error
from .tasks import Outcome, Task, TaskLike, as_task

__all__ = ["InvalidTask", "Intake", "END", "LATER", "AsyncSource"]

#: What a pull returns when the input is over.
END = object()
#: What a pull returns when nothing is there yet (the input's thread or an async source has not produced).
LATER = object()


@dataclass
class InvalidTask:
    """An input item that is not a task (a bad batch line): it gets a ``spawn_error`` outcome. ``line``: its
    line in a task file."""

    id: str
    error: str
    line: int | None = None


class _Failed:
    """What the input's iterator raised, in its place among the items: raised where it is pulled."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class _Pull:
    """A pull over the input: an item, :data:`LATER` or :data:`END`; ``wait``: seconds to wait for an item
    when none is there (0: none, ``math.inf``: until one comes or the input ends).

    A source that may be empty for a while wakes the loop (``wake``) when the next item arrives after a pull
    found it empty: the puller sets ``starving`` and then looks again, a producer adds its item and then looks
    at the flag. In either order one of them sees the other, so no arrival is missed and none wakes the loop
    for nothing.
    """

    def __init__(self) -> None:
        self.wake: Callable[[], Any] | None = None
        self.starving = False
        self.arrived = threading.Event()  # for a pull that waits

    def __call__(self, wait: float = 0.0) -> Any:
        raise NotImplementedError

    def _arrival(self) -> None:
        if self.starving:
            self.starving = False
            self.arrived.set()
            if self.wake is not None:
                self.wake()

    @staticmethod
    def _until(wait: float) -> float:
        """The time (``time.monotonic``) a pull that may wait ``wait`` seconds gives up; 0 for one that never waits."""
        return time.monotonic() + wait if wait else 0.0

    def _await(self, until: float) -> bool:
        """Wait for an arrival until ``until`` (``time.monotonic``); whether to look again."""
        left = until - time.monotonic()
        if left <= 0:
            return False
        self.arrived.wait(None if math.isinf(left) else left)
        self.arrived.clear()  # then look again: an item that came meanwhile is there
        return True

    def close(self) -> None:
        """Nothing more will be pulled."""


class _Listed(_Pull):
    """A list or tuple: its items are there already, pulled where they lie."""

    def __init__(self, items: list[Any] | tuple[Any, ...]) -> None:
        super().__init__()
        self._it = iter(items)

    def __call__(self, wait: float = 0.0) -> Any:
        return next(self._it, END)


class _Called(_Pull):
    """A pull function of the caller's own (non-blocking by its contract: :data:`LATER` when it has nothing)."""

    def __init__(self, pull: Callable[[], Any]) -> None:
        super().__init__()
        self._pull = pull

    def __call__(self, wait: float = 0.0) -> Any:
        return self._pull()


class _Reader(_Pull):
    """Any other iterable, pulled by a thread of its own (started by the first pull) at most ``depth`` items
    ahead, topped up once half are taken: whatever ``next`` waits for, the loop does not."""

    def __init__(self, tasks: Iterable[Any], depth: int) -> None:
        super().__init__()
        self._it = iter(tasks)
        self._depth = max(1, depth)
        self._items: deque[Any] = deque()
        self._refill = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def __call__(self, wait: float = 0.0) -> Any:
        if self._thread is None:
            self._refill.set()
            self._thread = threading.Thread(target=self._read, name="spoolparse-input", daemon=True)
            self._thread.start()
        items = self._items
        until = self._until(wait)
        while True:
            if items:
                item = items.popleft()
                if len(items) <= self._depth // 2 and not self._refill.is_set():
                    self._refill.set()
                if isinstance(item, _Failed):
                    raise item.exc
                return item
            self.starving = True
            self._refill.set()
            if items:
                continue
            if not self._await(until):
                return LATER

    def _read(self) -> None:
        items = self._items
        while not self._closed:
            self._refill.wait()
            self._refill.clear()  # before the top-up: a pull after this asks again, and is answered by it
            while len(items) < self._depth and not self._closed:
                try:
                    item = next(self._it)
                except StopIteration:
                    item = END
                except BaseException as e:  # raised to the batch's reader, as a failing iterator's would be
                    item = _Failed(e)
                items.append(item)
                self._arrival()
                if item is END or isinstance(item, _Failed):
                    return

    def close(self) -> None:
        """Read no more (a ``next`` under way still ends first: the thread is a daemon, nothing waits for it)."""
        self._closed = True
        self._refill.set()


class AsyncSource(_Pull):
    """An async iterable as a batch's input: :meth:`feed` (a task on the event loop) puts its items in a
    queue of ``depth``; the batch pulls them without waiting (:data:`LATER` when none is there yet)."""

    def __init__(self, tasks: AsyncIterable[TaskLike | InvalidTask], depth: int) -> None:
        super().__init__()
        self._tasks = tasks
        self._q: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._finished = threading.Event()
        self._failed: list[BaseException] = []

    async def feed(self) -> None:
        import asyncio  # here: only an async source needs it, and it is 10 ms of a batch's start

        try:
            async for item in self._tasks:
                while True:
                    try:
                        self._q.put_nowait(item)
                        break
                    except queue.Full:
                        await asyncio.sleep(0.005)
                self._arrival()
        except Exception as e:
            self._failed.append(e)  # raised from the batch, as a failing sync iterator's would be
        finally:
            self._finished.set()
            self._arrival()

    def __call__(self, wait: float = 0.0) -> Any:
        until = self._until(wait)
        while True:
            try:
                return self._q.get_nowait()
            except queue.Empty:
                pass
            if self._finished.is_set():
                try:
                    return self._q.get_nowait()
                except queue.Empty:
                    if self._failed:
                        raise self._failed[0] from None
                    return END
            if self.starving:
                if not self._await(until):
                    return LATER
                continue
            self.starving = True  # then look again (see _Pull)


def _puller(tasks: Iterable[TaskLike | InvalidTask] | Callable[[], Any], depth: int) -> _Pull:
    if isinstance(tasks, _Pull):
        return tasks
    if callable(tasks) and not isinstance(tasks, Iterable):
        return _Called(tasks)
    if isinstance(tasks, (list, tuple)):
        return _Listed(tasks)
    return _Reader(tasks, depth)


class Intake:
    """The input of one batch.

    :meth:`hold_next` reads until one task is held (``held``, numbered
    ``held_seq`` in the order of the tasks that run); the runner takes it with
    :meth:`release` once it started (or failed) it. ``skip`` holds the ids a
    resumed job log has done: those are counted in ``skipped`` and take no
    place in the order. ``spill_dir``: where the ids read go (default: where spools go).
    """

    def __init__(
        self,
        tasks: Iterable[TaskLike | InvalidTask] | Callable[[], Any],
        skip: Container[str],
        *,
        depth: int = 1,
        wake: Callable[[], Any] | None = None,
        spill_dir: str | None = None,
    ) -> None:
        self._pull = _puller(tasks, depth)
        # an item that comes after a pull found none wakes the runner's loop
        self._pull.wake = wake
        self.skip = skip
        self.skipped = 0
        self.held: Task | InvalidTask | None = None
        self.held_seq = 0
        self.exhausted = False  # the input said END
        self.seq = 0  # the next task's place in the order
        self._pulled = 0  # items read: the id of a bare argv list is its input position, stable across resumes
        self._ids = SeenIds(spill_dir)

    def _read(self, *, wait: float = 0.0) -> Task | InvalidTask | None:
        """The next item as a task (or an invalid one); ``None`` when nothing is there now (``wait``: nor
        came within that many seconds) or the input ended."""
        if self.exhausted:
            return None
        item = self._pull(wait)
        if item is END or item is LATER:
            self.exhausted = self.exhausted or item is END
            return None
        index = self._pulled
        self._pulled += 1
        if isinstance(item, InvalidTask):
            return item
        try:
            return as_task(item, index)
        except Error as e:
            tid = item.id if isinstance(item, Task) and item.id is not None else index
            return InvalidTask(str(tid), str(e))

    def hold_next(self) -> Task | InvalidTask | None:
        """Hold the next task to run (the one held already, if any); ``None`` when there is none yet."""
        while self.held is None and not self.exhausted:
            task = self._read()
            if task is None:
                return None
            tid = str(task.id)
            if not self._ids.add(tid):  # never merged with the first, nor skipped for it on --resume
                task = InvalidTask(tid, duplicate_error(tid))
            elif tid in self.skip:
                self.skipped += 1
                continue
            self.held, self.held_seq = task, self.seq
            self.seq += 1
        return self.held

    def release(self) -> None:
        """The held task was taken (started, or given its outcome)."""
        self.held = None

    def skip_rest(self) -> Iterator[tuple[int, Outcome]]:
        """After a halt: a ``skipped`` outcome for the held task, then for every one still to read, each with
        its place in the order (so every task read gets exactly one outcome; ``resume`` runs them later).

        Reads the input on while it gives a task within :data:`~spoolparse._limits.HALT_INPUT_WAIT` of the
        last (nothing runs any more: the loop has nothing else to do); an input that pauses longer — an endless
        producer, a pipe whose writer has nothing more for now — is read no further, and what it gives later
        gets no outcome (it was never read; ``resume`` runs it).
        """
        why = "not started: the batch halted (--halt)"
        if self.held is not None:
            held, self.held = self.held, None
            yield self.held_seq, Outcome(id=str(held.id), verdict="skipped", attempts=0, error=why)
        while (task := self._read(wait=_limits.HALT_INPUT_WAIT)) is not None:
            yield self.seq, Outcome(id=str(task.id), verdict="skipped", attempts=0, error=why)
            self.seq += 1

    def close(self) -> None:
        """The runner is done with its input: a thread reading it reads no more, and the ids read are let go."""
        self._pull.close()
        self._ids.close()
