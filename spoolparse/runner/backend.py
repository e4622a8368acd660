"""Which backend runs a batch, chosen in one place: :func:`run_many` and :func:`arun_many`.

``local`` runs the batch on this host (:class:`~.scheduler.Batch`, or its
asyncio face :func:`~.arun.arun_batch`); ``ray`` on every node of a Ray
cluster (:mod:`.ray_backend`, imported only when asked for: Ray is an
optional extra). The backends know nothing of each other; the Ray node
runner runs the local asyncio face for its node's share.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .arun import arun_batch
from .intake import InvalidTask
from .options import BatchOptions
from .scheduler import Batch
from .tasks import Outcome, TaskLike

if TYPE_CHECKING:
    from .ray_backend import RayBatch

__all__ = ["run_many", "arun_many", "BACKENDS"]

#: ``local``: this host only; ``ray``: every node of a Ray cluster.
BACKENDS = ("local", "ray")


def _on_ray(backend: str, address: str | None) -> bool:
    """Whether the batch runs on Ray; a backend that is not one of :data:`BACKENDS` is a usage error."""
    if backend not in BACKENDS:
        raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "local" and address is not None:
        raise UsageError("address is for backend='ray'")
    return backend == "ray"


def run_many(
    tasks: Iterable[TaskLike | InvalidTask],
    options: BatchOptions | None = None,
    *,
    backend: str = "local",
    address: str | None = None,
    **changes: Any,
) -> Batch | RayBatch:
    """Run many commands, at most ``max_concurrent`` at once, and yield one :class:`Outcome` per task.

    The options are one :class:`BatchOptions` (``options``; default: every
    default), with any of its fields given as keyword arguments on top
    (``run_many(tasks, max_concurrent=8, joblog="jobs.ndjson")``); a bad value
    is a :class:`~spoolparse.UsageError` before anything starts.

    ``tasks`` is any iterable of argv lists or :class:`Task` objects, pulled
    only when a slot is free. Outcomes come as tasks finish, or in input order
    with ``ordered=True`` (at most ``window`` tasks, default twice
    ``max_concurrent``, are started ahead of the oldest unfinished one).

    Memory: a task starts only while used memory is below ``stop_at`` of the
    total and its estimate (``Task.memory``, else ``memory_per_task``, else
    what ``spoolparse calibrate`` recorded for the task's command, else 1 GiB:
    :meth:`~spoolparse.runner.Batch.estimate_for`) fits next to what running tasks have reserved
    but not yet used.
    Above ``kill_at`` the youngest task is killed and requeued after
    ``retry_backoff`` seconds (doubling), up to ``requeues`` times; then its
    verdict is ``killed_memory``. A task whose verdict is in
    :data:`RETRY_VERDICTS` (``failed``, ``timeout``, ``killed_memory`` by its
    own limit) runs again up to ``retries`` times (default 0), after the same
    backoff; each attempt is a job-log line, the last one is its outcome. With no ``max_concurrent`` it is
    floor((total − reserve) / memory_per_task), at least 1, at most four per
    CPU. Every task runs in a cgroup of its own where one can be made here
    (root, or a delegated cgroup v2), which ends whatever it started when it
    ends; where none can, a warning says so once. ``memory_limit`` (or
    ``Task.memory_limit``) caps each task's process tree there, else with an
    RSS watchdog (``enforce="watchdog"``: never a cgroup). See the containment
    guide for what each kind of host guarantees.

    Time: ``soft_timeout`` sends ``soft_signal`` to the task's process group
    once; ``timeout`` sends SIGTERM, then SIGKILL after ``grace`` seconds.

    ``joblog`` appends one NDJSON line per attempt; ``resume=True`` skips
    task ids with a final outcome there (not ``cancelled``), and
    ``resume="failed"`` skips only those whose final outcome was ``ok``, as
    GNU parallel's ``--resume`` and ``--resume-failed``. ``halt`` stops
    starting tasks on a condition: ``"soon"`` / ``"now"`` after the first task
    that is not ``ok``, ``"now,fail=3"``, ``"soon,fail=10%"``,
    ``"now,success=1"`` (:mod:`spoolparse.runner.halt`); the tasks it never
    starts get ``skipped`` outcomes. The supervisor runs in a thread of its own from the first
    ``next``: timeouts and memory kills fire on time however long the loop body takes; while
    ``max_concurrent`` ended outcomes wait for it, no new task starts. Leave early with
    :meth:`~spoolparse.runner.Batch.close` (or ``with run_many(...) as batch``): it cancels what runs.

    On ``KeyboardInterrupt`` (or when the returned :class:`~spoolparse.runner.Batch` is closed)
    every running group is killed, spools and cgroups are removed, every
    started task gets a ``cancelled`` outcome (in ``Batch.cancelled`` and the
    job log) and the exception propagates. ``memory_probe`` replaces the
    host's memory readings (tests, or a custom budget).

    ``results`` keeps each task's stdout and stderr as ``results/<id>/stdout``
    and ``stderr`` (a hard link to the spool, no copy): of the tasks that are
    not ``ok`` with ``keep_transcript="failed"`` (the default), of all with
    ``"all"`` (:mod:`spoolparse.runner.results`).

    ``backend="ray"`` runs the batch on a Ray cluster (``address``: ``None``
    starts or finds a local one as ``ray.init`` does, ``"auto"``,
    ``"ray://host:10001"``): every option then applies per node, the job log
    stays on this host, and a :class:`~spoolparse.runner.ray_backend.RayBatch`
    is returned (see the docs' Ray guide).

    .. seealso:: :func:`spoolparse.run`, :func:`arun_many`, GNU parallel's ``--memfree`` and ``--halt``
    """
    opts = BatchOptions.of(options, changes, caller="run_many")
    if _on_ray(backend, address):
        from .ray_backend import RayBatch  # Ray is an optional extra: imported only when asked for

        return RayBatch(tasks, address=address, options=opts)
    return Batch(tasks, opts)


async def arun_many(
    tasks: Iterable[TaskLike | InvalidTask] | AsyncIterable[TaskLike | InvalidTask],
    options: BatchOptions | None = None,
    *,
    backend: str = "local",
    address: str | None = None,
    **changes: Any,
) -> AsyncIterator[Outcome]:
    """:func:`run_many` for asyncio: ``async for outcome in arun_many(tasks, ...)``.

    ``tasks`` may be an async iterable. The supervisor loop runs in one
    thread and hands outcomes to the event loop (at most ``window`` waiting),
    so children stay supervised while the consumer awaits. Leaving the loop
    early, or cancellation, cancels the batch as :meth:`~spoolparse.runner.Batch.close` does.

    .. seealso:: :func:`run_many`
    """
    opts = BatchOptions.of(options, changes, caller="arun_many")
    if _on_ray(backend, address):
        from .ray_backend import arun_ray  # Ray is an optional extra: imported only when asked for

        outcomes: AsyncGenerator[Outcome, None] = arun_ray(tasks, address=address, options=opts)
    else:
        outcomes = arun_batch(tasks, opts)
    # closed as we leave, not whenever it is collected: leaving early stops the batch at once
    async with contextlib.aclosing(outcomes):
        async for out in outcomes:
            yield out
