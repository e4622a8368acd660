"""A local batch from asyncio: driven in a thread of its own, its outcomes relayed to the event loop.

The supervisor loop never runs on the event loop (a slow callback there must
not delay a timeout or a memory kill, nor the loop wait on a child): it runs
in one thread, which hands each outcome over through a queue of at most
``window`` outcomes (:func:`~.driver.relay`); leaving early, or cancellation,
stops the batch. :func:`~spoolparse.arun_many` runs this for the local
backend, and the Ray node runner for its node's share.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from typing import Any

from .driver import relay
from .intake import AsyncSource, InvalidTask
from .options import BatchOptions
from .scheduler import Batch
from .tasks import Outcome, TaskLike

__all__ = ["arun_batch"]


async def arun_batch(
    tasks: Iterable[TaskLike | InvalidTask] | AsyncIterable[TaskLike | InvalidTask], options: BatchOptions
) -> AsyncGenerator[Outcome, None]:
    """The outcomes of a local :class:`~.scheduler.Batch` of ``tasks`` (an iterable, or an async one)."""
    loop = asyncio.get_running_loop()
    feeder: asyncio.Task[Any] | None = None
    source: Any = tasks
    if isinstance(tasks, AsyncIterable):
        source = AsyncSource(tasks, max(1, options.max_concurrent or 16))
    batch = Batch(source, options)
    if isinstance(source, AsyncSource):
        feeder = loop.create_task(source.feed())
    try:
        # closed as we leave, not whenever it is collected: leaving early stops the batch at once
        async with contextlib.aclosing(relay(batch, batch.window, "spoolparse-runner")) as outcomes:
            async for out in outcomes:
                yield out
    finally:
        if feeder is not None:
            feeder.cancel()
