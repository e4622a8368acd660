"""A batch's input: tasks pulled one at a time when there is room, numbered, checked, resumed ones skipped.

Both runners (the local :class:`~spoolparse.runner.scheduler.Batch` and the
Ray driver) read their input through one :class:`Intake`, so a rule about
tasks — ids are unique, a bad item becomes its own ``spawn_error``, a task
done in the job log is skipped on ``--resume``, every task read after a halt
gets a ``skipped`` outcome — holds for both alike.

The input is an iterable (pulled with ``next``, never read ahead) or a
non-blocking pull function that returns :data:`LATER` when nothing is there
yet and :data:`END` when nothing will be (:func:`async_source` makes one
from an async iterable). Memory is O(1) per task in flight plus the set of
ids read so far (a few dozen bytes each): it is what catches a duplicate.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import Error
from .tasks import Outcome, Task, TaskLike, as_task

__all__ = ["InvalidTask", "Intake", "END", "LATER", "async_source"]

#: What a pull returns when the input is over.
END = object()
#: What a pull returns when nothing is there yet (an async source that has not produced).
LATER = object()


@dataclass
class InvalidTask:
    """An input item that is not a task (a bad batch line): it gets a ``spawn_error`` outcome."""

    id: str
    error: str


def _puller(tasks: Iterable[TaskLike | InvalidTask] | Callable[[], Any]) -> Callable[[], Any]:
    if callable(tasks) and not isinstance(tasks, Iterable):
        return tasks
    it = iter(tasks)

    def pull() -> Any:
        return next(it, END)

    return pull


class Intake:
    """The input of one batch.

    :meth:`hold_next` reads until one task is held (``held``, numbered
    ``held_seq`` in the order of the tasks that run); the runner takes it with
    :meth:`release` once it started (or failed) it. ``skip`` holds the ids a
    resumed job log has done: those are counted in ``skipped`` and take no
    place in the order.
    """

    def __init__(self, tasks: Iterable[TaskLike | InvalidTask] | Callable[[], Any], skip: set[str]) -> None:
        self._pull = _puller(tasks)
        self.skip = skip
        self.skipped = 0
        self.held: Task | InvalidTask | None = None
        self.held_seq = 0
        self.exhausted = False  # the input said END
        self.seq = 0  # the next task's place in the order
        self._pulled = 0  # items read: the id of a bare argv list is its input position, stable across resumes
        self._ids: set[str] = set()

    def _read(self) -> Task | InvalidTask | None:
        """The next item as a task (or an invalid one); ``None`` when nothing is there now."""
        item = self._pull()
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
            return InvalidTask(str(index), str(e))

    def hold_next(self) -> Task | InvalidTask | None:
        """Hold the next task to run (the one held already, if any); ``None`` when there is none yet."""
        while self.held is None and not self.exhausted:
            task = self._read()
            if task is None:
                return None
            if str(task.id) in self._ids:  # never merged with the first, nor skipped for it on --resume
                task = InvalidTask(str(task.id), f"duplicate task id {task.id!r}: ids must be unique")
            else:
                self._ids.add(str(task.id))
                if task.id in self.skip:
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

        Stops at :data:`LATER` too (an async source that is slow to produce is not waited for).
        """
        why = "not started: the batch halted (--halt)"
        if self.held is not None:
            held, self.held = self.held, None
            yield self.held_seq, Outcome(id=str(held.id), verdict="skipped", attempts=0, error=why)
        while (task := self._read()) is not None:
            yield self.seq, Outcome(id=str(task.id), verdict="skipped", attempts=0, error=why)
            self.seq += 1


def async_source(
    tasks: AsyncIterable[TaskLike | InvalidTask], depth: int
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """A non-blocking pull over an async iterable (fed by a task on the event loop), and that feeder."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    finished = threading.Event()
    failed: list[BaseException] = []

    async def feed() -> None:
        import asyncio  # here: only an async source needs it, and it is 10 ms of a batch's start

        try:
            async for item in tasks:
                while True:
                    try:
                        q.put_nowait(item)
                        break
                    except queue.Full:
                        await asyncio.sleep(0.005)
        except Exception as e:
            failed.append(e)  # raised from the batch, as a failing sync iterator's would be
        finally:
            finished.set()

    def pull() -> Any:
        try:
            return q.get_nowait()
        except queue.Empty:
            pass
        if finished.is_set():
            try:
                return q.get_nowait()
            except queue.Empty:
                if failed:
                    raise failed[0] from None
                return END
        return LATER

    return pull, feed
