"""Running many agents from asyncio: a batch driven in a thread of its own, its outcomes relayed to the event loop.

The supervisor loop never runs on the event loop (a slow callback there must
not delay a timeout or a memory kill, nor the loop wait on a child): it runs
in one thread, which hands each outcome over through a queue of at most
``window`` outcomes; leaving early, or cancellation, stops the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from typing import Any

from .intake import AsyncSource, InvalidTask
from .options import BatchOptions
from .scheduler import TICK, Batch
from .tasks import Outcome, TaskLike

__all__ = ["arun_many", "relay"]


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


async def relay(batch: Any, window: int, name: str) -> AsyncGenerator[Outcome, None]:
    """Iterate ``batch`` (a :class:`Batch`, or the Ray driver) in a thread of its own; yield its outcomes here.

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
                while not credits.acquire(timeout=TICK):
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
    early, or cancellation, cancels the batch as :meth:`Batch.close` does.

    .. seealso:: :func:`run_many`
    """
    loop = asyncio.get_running_loop()
    feeder: asyncio.Task[Any] | None = None
    opts = BatchOptions.of(options, changes, caller="arun_many")
    if backend != "local" or address is not None:
        from .ray_backend import arun_many_ray  # Ray is an optional extra: imported only when asked for

        async for out in arun_many_ray(tasks, backend=backend, address=address, options=opts):
            yield out
        return
    source: Any = tasks
    if isinstance(tasks, AsyncIterable):
        source = AsyncSource(tasks, max(1, opts.max_concurrent or 16))
    batch = Batch(source, opts)
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
