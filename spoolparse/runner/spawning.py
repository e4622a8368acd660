"""Starting a batch's children: from a few threads, each child in its cgroup before it runs.

Everything a start does that waits on the kernel is done in a spawner thread,
never on the supervising loop's: the task's cgroup directories are made
(``mkdir`` of a cgroup v1 ``memory`` cgroup takes a millisecond or more),
its spools are made (a new inode each), its program is checked, its input
opened (a FIFO's open waits for a writer), and then the fork and the
``exec`` (the joined start: one ``exec``, :mod:`spoolparse._os.joined`).
A start is a queue put on the loop's side; spawning from a few threads
overlaps the waits, so a burst of starts never stalls the supervisor loop.
A start that fails becomes its task's ``spawn_error`` outcome; one that
succeeds is handed to the loop, which wakes when any finishes.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .._os.capabilities import placement
from .._os.cgroup import REMOVE_WITHIN, ChildCgroup, Placement, enforcement_of, tell_uncontained, wants_cgroup
from .._os.spawn import mark_long_lived
from ..child import Child
from .options import BatchOptions
from .slot import Slot
from .tasks import Outcome, Task

__all__ = ["Pending", "Spawner", "child_for", "SPAWN_THREADS"]

log = logging.getLogger("spoolparse.runner")

#: Threads that fork+exec children (at most ``max_concurrent``): one per CPU, from 2 to 8. A start is the
#: kernel's work on a CPU and the interpreter lock's between; threads beyond the CPUs only take turns at the
#: lock (trivial tasks on 2 CPUs: 2 or 4 threads 0.56x the bare ThreadPool+Popen loop's rate, 8 threads 0.52x).
SPAWN_THREADS = min(8, max(2, os.cpu_count() or 2))


@dataclass(eq=False)
class Pending:
    """A task being spawned in a spawner thread: once ``done``, it holds its ``child`` or its ``error``."""

    seq: int
    task: Task
    attempt: int
    estimate: int
    limit: int | None
    cg: ChildCgroup | None
    enforcement: str
    started_wall: float
    done: bool = False
    child: Child | None = None
    error: BaseException | None = None

    def slot(self) -> Slot:
        """The running task of the child started (in the loop's running set by its pidfd, or -pid where it has
        none), or the start's exception raised."""
        if self.error is not None:
            raise self.error
        child = self.child
        assert child is not None
        return Slot(
            seq=self.seq, task=self.task, attempt=self.attempt, child=child, cg=self.cg, enforcement=self.enforcement,
            estimate=self.estimate, limit=self.limit, started=child.started, started_wall=self.started_wall,
            key=child.pidfd if child.pidfd >= 0 else -child.pid,
        )

    def failed_outcome(self, e: BaseException) -> Outcome:
        """The task's outcome when its start failed: a ``spawn_error`` naming why; its cgroup goes."""
        if self.cg is not None:
            self.cg.remove(REMOVE_WITHIN)
        return Outcome(id=str(self.task.id), verdict="spawn_error", attempts=self.attempt,
                       enforcement=self.enforcement, error=str(e))


def child_for(
    task: Task, options: BatchOptions, *, cgroup: ChildCgroup | None, read_buffer: bytearray, live: bool,
) -> Child:
    """Start ``task``'s child: the batch's options for each task's child, with what the task sets over them, in
    the batch's cgroup for it (joined before exec; the guardian holds its directories: killed and removed if we
    die)."""
    return Child(
        list(task.argv),
        task.child_options(options.child).replace(containment=cgroup),
        read_buffer=read_buffer,
        live=live,  # outcomes carry the summary only: without a listener tool lines go unread
        close_in_background=True,  # the loop thread closes it, and supervises every other child meanwhile
    )


class Spawner:
    """Pending starts, run by a few threads made on the first; ``on_done`` is called as each ends.

    Not a :class:`~concurrent.futures.ThreadPoolExecutor`: its futures, idle semaphore and callbacks are a
    handful of Python-level condition variables per start, taken under the interpreter lock the loop needs
    (trivial tasks: 0.03 ms of user CPU a start). A start here is a queue put, and its end a flag and a wake.
    """

    def __init__(
        self, threads: int, on_done: Callable[[], None], *, options: BatchOptions, read_buffer: bytearray
    ) -> None:
        self._options = options
        #: Where the tasks' cgroups are made (``kind`` ``None``: nowhere): every task gets one where it can be
        #: made (``wants_cgroup``); where none can, it is said once.
        wanted = wants_cgroup(options.enforce)
        self.placement = placement(fresh=True) if wanted else Placement(None, why="enforce=watchdog")
        if self.placement.kind is None and wanted:
            tell_uncontained(self.placement)
        self._cgroup_failed = False  # a cgroup that could not be made is said once
        self._said = threading.Lock()
        self._buf = read_buffer  # one for every child: only the batch's loop pumps
        self._threads = max(1, min(SPAWN_THREADS, threads))
        self._on_done = on_done
        self._jobs: queue.SimpleQueue[tuple[Pending, Callable[[], Child]] | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._blocking = False  # a finished(block=True) waits for _any_done
        self._any_done = threading.Event()
        #: Starts not yet taken by the loop (a finished one stays here until :meth:`forget`).
        self.starting: list[Pending] = []

    def start_task(self, seq: int, task: Task, attempt: int, estimate: int, *, live: bool) -> None:
        """Start ``task``'s child, in a cgroup of its own where the placement makes one (its memory limit there),
        from a spawner thread; a start that fails ends as the task's ``spawn_error`` (see :meth:`finished`)."""
        limit = task.memory_limit or self._options.memory_limit
        p = Pending(seq, task, attempt, estimate, limit, None, enforcement_of(None, limit), time.time())
        self.start(p, functools.partial(self._make, p, live))

    def _make(self, p: Pending, live: bool) -> Child:
        """In a spawner thread: ``p``'s cgroup (where one can be made), then its child, made and started."""
        if self.placement.kind is not None:  # made for every task where it can be
            try:
                p.cg = self.placement.create(memory_limit=p.limit, pids_max=self._options.pids_max)
            except OSError as e:
                with self._said:
                    said, self._cgroup_failed = self._cgroup_failed, True
                if not said:
                    log.warning("cannot make a cgroup for task %s (%s): a task that gets none is contained by its "
                                "process group alone, its memory limit kept by RSS sampling (said once)", p.task.id, e)
            p.enforcement = enforcement_of(p.cg, p.limit)
        return child_for(p.task, self._options, cgroup=p.cg, read_buffer=self._buf, live=live)

    def start(self, p: Pending, start: Callable[[], Child]) -> None:
        """Call ``start`` in a spawner thread: it starts the child (or launches one made ready) and returns it."""
        if not self._workers:
            for i in range(self._threads):
                # they outlive every child they fork (shut down last): PR_SET_PDEATHSIG is safe there
                t = threading.Thread(target=self._serve, name=f"spoolparse-spawn_{i}", daemon=True)
                t.start()
                self._workers.append(t)
        self.starting.append(p)
        self._jobs.put((p, start))

    def _serve(self) -> None:
        mark_long_lived()
        while (job := self._jobs.get()) is not None:
            p, start = job
            try:
                p.child = start()
            except BaseException as e:  # the loop raises it where it takes the start, as a future would
                p.error = e
            self._finish(p)
            del p, start, job  # not held while this thread waits for the next

    def _finish(self, p: Pending) -> None:
        p.done = True  # after its child or error: the loop reads them once it sees this
        if self._blocking:  # read after done is set: a waiter that missed this done is woken
            self._any_done.set()
        self._on_done()

    def finished(self, *, block: bool = False) -> list[Pending]:
        """The starts that are over (all of them, waiting for each, with ``block``)."""
        if block:
            self._blocking = True
            try:
                while True:
                    self._any_done.clear()
                    if all(p.done for p in self.starting):  # after the clear: a later done sets it again
                        break
                    self._any_done.wait()
            finally:
                self._blocking = False
        return [p for p in self.starting if p.done]

    def forget(self, p: Pending) -> None:
        """``p`` was taken: its child is registered as running (or its failure reported)."""
        self.starting.remove(p)

    def shutdown(self) -> None:
        """Wait for the threads to end (idempotent)."""
        workers, self._workers = self._workers, []
        for _ in workers:
            self._jobs.put(None)
        for t in workers:
            t.join()
