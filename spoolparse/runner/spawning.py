"""Starting a batch's children: from a few threads, each child in its cgroup before it runs.

fork+exec waits for the exec (and a gated start for the guardian to hold the
child's group, :mod:`spoolparse._spawn`): spawning from a few threads
overlaps those waits, so a burst of starts never stalls the supervisor loop.
The loop makes a common child ready first (``Child(..., launch=False)``:
spools, environment, parser), so a spawner thread does only the fork, the
exec and what must follow them at once (:meth:`~spoolparse.process.Child.launch`):
the less Python runs there, the less the threads take turns at the
interpreter lock with the loop. A task with input (a FIFO to open, bytes to
copy) or a cgroup (a gated start checks its program first) is made whole in
the spawner thread, since that may wait. A start that fails becomes its task's
``spawn_error`` outcome; one that succeeds is handed to the loop, which
wakes when any finishes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

from .._lifecycle import Deadlines
from .._spawn import mark_long_lived
from ..process import Child
from .cgroup import ChildCgroup
from .options import BatchOptions
from .tasks import Task

__all__ = ["Pending", "Spawner", "child_for", "launched", "SPAWN_THREADS"]

#: Threads that fork+exec children (at most ``max_concurrent``): one per CPU, from 2 to 8. A start is the
#: kernel's work on a CPU and the interpreter lock's between; threads beyond the CPUs only take turns at the
#: lock (trivial tasks on 2 CPUs: 2 or 4 threads 0.56x the bare ThreadPool+Popen loop's rate, 8 threads 0.52x).
SPAWN_THREADS = min(8, max(2, os.cpu_count() or 2))


@dataclass(eq=False)
class Pending:
    """A task being spawned in a spawner thread."""

    seq: int
    task: Task
    attempt: int
    estimate: int
    limit: int | None
    cg: ChildCgroup | None
    enforcement: str
    started_wall: float
    future: Future[Child] | None = None


def child_for(
    task: Task, options: BatchOptions, *, cgroup: ChildCgroup | None, read_buffer: bytearray, live: bool,
    launch: bool = True,
) -> Child:
    """Start ``task``'s child as the batch's options say (its own timeouts over the batch's); with ``launch=False``
    it is only made ready, and :meth:`~spoolparse.process.Child.launch` starts it."""
    env = None if task.env is None else {**os.environ, **task.env}
    deadlines = Deadlines(
        timeout=task.timeout if task.timeout is not None else options.timeout,
        grace=options.grace,
        soft_timeout=task.soft_timeout if task.soft_timeout is not None else options.soft_timeout,
        soft_signal=options.soft_signal,
    )
    return Child(
        list(task.argv),
        input=task.input,
        cwd=task.cwd,
        env=env,
        provider=task.provider,
        spool_dir=options.spool_dir,
        max_spool_bytes=options.max_spool_bytes,
        cgroup=cgroup,  # joined before exec; the guardian holds its directories: killed and removed if we die
        read_buffer=read_buffer,
        deadlines=deadlines,
        # outcomes carry the summary only: without a listener tool lines go unread
        live=live,
        close_in_background=True,  # the loop thread closes it, and supervises every other child meanwhile
        launch=launch,
    )


def launched(child: Child) -> Child:
    """``child`` (made with ``launch=False``) launched: what a spawner thread runs for a child made ready."""
    child.launch()
    return child


class Spawner:
    """Pending starts, run in a small thread pool made on the first; ``on_done`` is called as each ends."""

    def __init__(self, threads: int, on_done: Callable[[Future[Child]], None]) -> None:
        self._threads = max(1, min(SPAWN_THREADS, threads))
        self._on_done = on_done
        self._pool: ThreadPoolExecutor | None = None
        #: Starts not yet taken by the loop (a finished one stays here until :meth:`forget`).
        self.starting: list[Pending] = []

    def start(self, p: Pending, start: Callable[[], Child]) -> None:
        """Call ``start`` in a spawner thread: it starts the child (or launches one made ready) and returns it."""
        if self._pool is None:
            # its threads outlive every child they fork (shut down last): PR_SET_PDEATHSIG is safe there
            self._pool = ThreadPoolExecutor(self._threads, "spoolparse-spawn", initializer=mark_long_lived)
        p.future = self._pool.submit(start)
        p.future.add_done_callback(self._on_done)
        self.starting.append(p)

    def failed(self, p: Pending, error: BaseException) -> None:
        """``p`` could not even be made ready: it ends as a start that failed."""
        p.future = Future()
        p.future.set_exception(error)
        self.starting.append(p)
        self._on_done(p.future)

    def finished(self, *, block: bool = False) -> list[Pending]:
        """The starts that are over (all of them, waiting for each, with ``block``)."""
        if block and self.starting:
            wait_futures([p.future for p in self.starting if p.future is not None])
        return [p for p in self.starting if p.future is not None and p.future.done()]

    def forget(self, p: Pending) -> None:
        """``p`` was taken: its child is registered as running (or its failure reported)."""
        self.starting.remove(p)

    def shutdown(self) -> None:
        """Wait for the threads to end (idempotent)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
