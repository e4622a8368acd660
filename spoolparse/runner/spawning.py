"""Starting a batch's children: from a few threads, each child in its cgroup before it runs.

fork+exec waits for the exec (and a gated start for the guardian to hold the
child's group, :mod:`spoolparse._spawn`): spawning from a few threads
overlaps those waits, so a burst of starts never stalls the supervisor loop.
A start that fails becomes its task's ``spawn_error`` outcome; one that
succeeds is handed to the loop, which wakes when any finishes.
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

__all__ = ["Pending", "Spawner", "child_for", "SPAWN_THREADS"]

#: Threads that fork+exec children (at most ``max_concurrent``).
SPAWN_THREADS = 8


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
    task: Task, options: BatchOptions, *, cgroup: ChildCgroup | None, read_buffer: bytearray, live: bool
) -> Child:
    """Start ``task``'s child as the batch's options say (its own timeouts over the batch's)."""
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
    )


class Spawner:
    """Pending starts, run in a small thread pool made on the first; ``on_done`` is called as each ends."""

    def __init__(self, threads: int, on_done: Callable[[Future[Child]], None]) -> None:
        self._threads = max(1, min(SPAWN_THREADS, threads))
        self._on_done = on_done
        self._pool: ThreadPoolExecutor | None = None
        #: Starts not yet taken by the loop (a finished one stays here until :meth:`forget`).
        self.starting: list[Pending] = []

    def start(self, p: Pending, make: Callable[[Pending], Child]) -> None:
        if self._pool is None:
            # its threads outlive every child they fork (shut down last): PR_SET_PDEATHSIG is safe there
            self._pool = ThreadPoolExecutor(self._threads, "spoolparse-spawn", initializer=mark_long_lived)
        p.future = self._pool.submit(make, p)
        p.future.add_done_callback(self._on_done)
        self.starting.append(p)

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
