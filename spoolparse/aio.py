"""Running a child from asyncio: :func:`arun`, and :func:`open_run` to follow its events.

No thread follows a child: a thread of the loop's default executor only makes
it (its spools, its cgroup, its input, the ``exec``), so that the loop runs on
meanwhile. The child's exit wakes the loop through its pidfd
(``loop.add_reader``); its writes through one inotify instance shared by every
run on the loop (see :mod:`spoolparse._os.wait`). A running child so holds its two
spool files and its pidfd, nothing more. Where pidfds or inotify are missing
a run polls instead, with a backoff capped at :data:`~spoolparse._os.wait.POLL_IDLE`.

The reading itself is the same one pass as :func:`spoolparse.run`:
:meth:`Child.pump` feeds the :class:`~spoolparse.StreamParser` from the spool
as it grows, and the :class:`~spoolparse.Result` is built from that pass.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import _limits
from ._os.capabilities import Inotify, open_inotify
from ._os.lifecycle import Done, Wait
from ._os.wait import next_interval
from .child import Argv, Budget, Child, handed_back
from .cost import loaded as prices_loaded
from .cost import preload as preload_prices
from .errors import UsageError
from .options import ChildKeywords, ChildOptions
from .providers.base import LiveEvent
from .result import Result

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["arun", "open_run", "AsyncRun", "AsyncOnEvent"]

#: A callback for each event: a plain function, or one returning an awaitable.
AsyncOnEvent = Callable[[LiveEvent], Awaitable[Any] | Any]

# Bytes read per step: between steps the loop runs other tasks, so one busy
# child cannot starve the rest.
_STEP = _limits.READ_CHUNK


class _LoopWatch:
    """One inotify instance per event loop, waking the run whose spool was written."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ino: Inotify) -> None:
        self.loop = loop
        self.ino = ino
        self.wakers: dict[int, Callable[[], None]] = {}
        loop.add_reader(ino.fileno(), self._readable)

    def _readable(self) -> None:
        fired = self.ino.drain()
        if self.ino.overflowed:
            self.ino.overflowed = False
            fired = set(self.wakers)
        for wd in fired:
            wake = self.wakers.get(wd)
            if wake is not None:
                wake()
        # writes meanwhile merge into one event per spool: a steady writer wakes its run at most once per
        # READ_GAP, not once per write (the runs' exits come through their pidfds, never delayed)
        self.loop.remove_reader(self.ino.fileno())
        self.loop.call_later(_limits.READ_GAP, self._resume)

    def _resume(self) -> None:
        if not self.ino.closed and not self.loop.is_closed():
            self.loop.add_reader(self.ino.fileno(), self._readable)

    def add(self, fd: int, wake: Callable[[], None]) -> int:
        wd = self.ino.watch(fd)
        self.wakers[wd] = wake
        return wd

    def remove(self, wd: int) -> None:
        self.wakers.pop(wd, None)
        self.ino.unwatch(wd)
        if not self.wakers:
            self.close()

    def close(self) -> None:
        if _watches.get(self.loop) is self:
            del _watches[self.loop]
        if not self.ino.closed:
            if not self.loop.is_closed():
                self.loop.remove_reader(self.ino.fileno())
            self.ino.close()


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWatch] = weakref.WeakKeyDictionary()
# One read buffer per event loop, shared by every run on it: a run reads its spool (pump, and the rest at the
# end) synchronously on the loop's thread, one at a time, and the parser never keeps the buffer. A buffer per
# run would cost READ_CHUNK of parent memory per live agent.
_buffers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, bytearray] = weakref.WeakKeyDictionary()


def _loop_buffer(loop: asyncio.AbstractEventLoop) -> bytearray:
    buf = _buffers.get(loop)
    if buf is None:
        buf = _buffers[loop] = bytearray(_limits.READ_CHUNK)
    return buf


def _loop_watch(loop: asyncio.AbstractEventLoop) -> _LoopWatch | None:
    watch = _watches.get(loop)
    if watch is None:
        ino = open_inotify()
        if ino is None:
            return None
        try:
            watch = _LoopWatch(loop, ino)
        except (NotImplementedError, OSError):  # a loop without add_reader
            ino.close()
            return None
        _watches[loop] = watch
    return watch


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class AsyncRun:
    """A child started by :func:`open_run` and followed from the event loop.

    Use it as an async context manager: leaving the block before the run has
    ended (an exception, a ``break`` out of :meth:`events`, a cancelled task)
    kills the child's process group and closes the spools. ``pid`` and
    ``pgid`` are the child's; ``child`` is the :class:`~spoolparse.child.Child`
    (its ``offset`` and ``parser`` counters suit a progress display).

    .. seealso:: :func:`arun`, :class:`asyncio.subprocess.Process`
    """

    def __init__(
        self, args: Argv, options: ChildOptions, *, check: bool, on_event: AsyncOnEvent | None, keep_output: bool
    ) -> None:
        self.args = args
        self.options = options
        self.check = check
        self.on_event = on_event
        self.keep_output = keep_output
        self._child: Child | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watch: _LoopWatch | None = None
        self._wds: list[int] = []
        self._exit_reader = False
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False
        self._interval: float | None = None
        self._result: Result | None = None
        self._closed = False
        self._busy = False
        self._deadline: asyncio.TimerHandle | None = None  # the lifecycle's next deadline, a timer of the loop
        self._deadline_at: float | None = None
        self._unwatched = False  # followed by wait() with nobody listening: read on an interval
        self._watching = False  # the spools' watches were asked for (at the first step)
        #: Times the run woke from an idle sleep (for measuring idle cost).
        self.wakeups = 0

    # -- starting and stopping ----------------------------------------------

    async def __aenter__(self) -> AsyncRun:
        await self._start_off_loop()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def start(self) -> None:
        """Start the child now, on the loop's thread. ``async with`` starts it in a worker thread instead: the
        loop goes on while the spools, the cgroup and the input are made and the child is exec'd."""
        loop = self._starting()
        try:
            child = self._make(loop)
        except BaseException:
            self._loop = None  # nothing was started
            raise
        self._adopt(child, loop)

    def _make(self, loop: asyncio.AbstractEventLoop) -> Child:
        return Child(self.args, self.options, read_buffer=_loop_buffer(loop), close_in_background=True)

    def _starting(self) -> asyncio.AbstractEventLoop:
        if self._child is not None or self._loop is not None:
            raise UsageError("this run was already started")
        self._loop = asyncio.get_running_loop()
        return self._loop

    async def _start_off_loop(self) -> None:
        loop = self._starting()
        abandoned = threading.Event()

        def make() -> Child | None:
            child = self._make(loop)
            if abandoned.is_set():  # the start was cancelled while the child was made: nobody will follow it
                _end_unfollowed(child)
                return None
            return child

        made = loop.run_in_executor(None, make)
        try:
            child = await asyncio.shield(made)
        except asyncio.CancelledError:
            # the child may be made yet: ended by the thread, or by this callback once it is handed over
            abandoned.set()
            made.add_done_callback(_end_made)
            raise
        except BaseException:
            self._loop = None  # nothing was started (a SpawnError: what the start made is closed)
            raise
        assert child is not None
        self._adopt(child, loop)

    def _adopt(self, child: Child, loop: asyncio.AbstractEventLoop) -> None:
        self._child = child
        try:
            if child.pidfd >= 0:
                loop.add_reader(child.pidfd, self._on_exit)
                self._exit_reader = True
            self._supervise()
        except BaseException:
            self._teardown()
            raise

    async def aclose(self) -> None:
        """Kill the child's group if it is still running, and close what the run holds."""
        if self._child is None or self._closed:
            return
        if self._result is None:
            await self._abort()
        else:
            self._teardown()

    @property
    def child(self) -> Child:
        if self._child is None:
            raise UsageError("the run has not been started: use 'async with open_run(...)'")
        return self._child

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def pgid(self) -> int:
        return self.child.pgid

    @property
    def returncode(self) -> int | None:
        return self.child.returncode

    @property
    def result(self) -> Result | None:
        """The :class:`~spoolparse.Result` once the run has ended, else ``None``."""
        return self._result

    # -- following -------------------------------------------------------------

    async def events(self) -> AsyncIterator[LiveEvent]:
        """Each :class:`~spoolparse.LiveEvent` as the child writes it, in stream order.

        Ends when the child has exited and its spool is read; then
        :meth:`wait` returns the result at once. A consumer slower than the
        child holds nothing up but the reading: the spool grows on disk.
        """
        while True:
            batch = await self._step()
            if batch is None:
                return
            for ev in batch:
                yield ev

    async def wait(self) -> Result:
        """Follow the child to its end and return the :class:`~spoolparse.Result` (as :func:`spoolparse.run`).

        Without ``on_event`` nobody sees the events as they come: the spool is then read every
        ``UNWATCHED_READ_INTERVAL`` seconds (only to keep the parse current, so that little is left when
        the child exits) instead of on every write; the exit and the deadlines still wake the run at once.
        """
        child = self.child
        if self.on_event is None and child.max_spool_bytes is None and self._exit_reader and not self._watching:
            self._unwatched = True  # no inotify watch then (adding and removing one costs the kernel too)
        while await self._step() is not None:
            pass
        res = self._result
        if res is None:
            raise UsageError("the run was closed before it ended")
        return handed_back(self.child, res, check=self.check)

    async def _step(self) -> list[LiveEvent] | None:
        """The next events (maybe none), or ``None`` once the run has ended."""
        if self._result is not None or self._closed:
            return None
        if self._busy:
            raise UsageError("this run is already being followed by another task")
        child = self.child
        self._busy = True
        if not self._unwatched and not self._watching:
            self._watch_spools()
        try:
            while True:
                self._woken = False  # this step covers every wake so far
                now = time.monotonic()
                # the checks run after every read, so a child that never pauses still meets them
                step = child.step(now, Budget(_STEP, now + _limits.PARSE_BUDGET))
                self._arm(step.action)
                await self._emit(step.events)
                if not step.read and child.life.leader_exited:
                    return step.events + await self._finish()
                if step.read:
                    self._interval = None
                    # let the event loop's other work go on (other runs' reads and deadlines): a step's parse is
                    # bounded in time, and one that returns events must not loop back here without a pause
                    await asyncio.sleep(0)
                    if step.events:
                        return step.events
                    continue
                if step.events:
                    self._interval = None
                    return step.events
                if self._unwatched and self._exit_reader:
                    self._interval = _limits.UNWATCHED_READ_INTERVAL  # the pidfd still wakes us on the exit
                else:
                    self._interval = next_interval(self._interval, event_driven=self._event_driven)
                now = time.monotonic()
                wait = self._interval if step.until is None else min(self._interval, max(0.0, step.until - now))
                await self._sleep(wait)
        except BaseException:
            await self._abort()
            raise
        finally:
            self._busy = False

    async def _emit(self, live: list[LiveEvent]) -> None:
        cb = self.on_event
        if cb is None or not live:
            return
        for ev in live:
            out = cb(ev)
            if inspect.isawaitable(out):
                await out

    async def _finish(self) -> list[LiveEvent]:
        """Reap, end the leftovers, read the rest of the spool and build the result."""
        child = self.child
        await self._settle()
        self._unwatch()  # watches and the pidfd reader go before the spools can
        # the rest of the output a budget at a time, the event loop's other work between: a backlog of small
        # events can take seconds to parse
        while True:
            _, live, caught_up = child.pump_within(1 << 62, time.monotonic() + _limits.PARSE_BUDGET)
            await self._emit(live)
            if caught_up:
                break
            await asyncio.sleep(0)
        if not prices_loaded():  # the price data loads off the event loop (a third of a second, once)
            await asyncio.get_running_loop().run_in_executor(None, preload_prices)
        res, more = child.result(keep_output=self.keep_output, timeout=self.options.timeout)
        try:
            await self._emit(more)
        except BaseException:
            res.close()  # nobody will get this result: its spools go with it
            raise
        self._result = res
        self._teardown()
        return more

    async def _settle(self) -> None:
        """Drive the child's lifecycle to its end from the loop (the async twin of :meth:`Child.settle`)."""
        child = self.child
        while True:
            now = time.monotonic()
            action = child.step(now).action
            self._arm(action)
            if isinstance(action, Done):
                return
            left = _limits.POLL_MAX if action.until is None else action.until - now
            left = min(max(0.0, left), _limits.POLL_MAX)
            if child.life.leader_exited:
                await asyncio.sleep(left)  # leftovers: nothing wakes us but the clock
            else:
                await self._sleep(left)  # the pidfd reader wakes us on the exit

    async def _abort(self) -> None:
        """For errors, cancellation and early exits: end the group, close everything. Never raises."""
        if self._closed or self._child is None:
            return
        try:
            self._child.life.stop(time.monotonic(), "cancelled", grace=_limits.INTERRUPT_GRACE)
            await self._settle()
        except OSError:
            pass
        finally:
            self._teardown()  # also when cancelled again meanwhile: then it is the blocking kill

    def _teardown(self) -> None:
        """The synchronous last resort: kill, reap, unwatch, close (idempotent)."""
        if self._closed or self._child is None:
            return
        self._closed = True
        self._arm(None)
        child = self._child
        if self._result is None:
            child.kill_now()
        self._unwatch()
        if self._result is None:
            child.close()
        self._resolve_waiter()

    # -- the deadlines -----------------------------------------------------------

    def _supervise(self) -> None:
        """Do what the lifecycle asks now (signals, the reap, the leftovers' checks), and again at its next
        deadline: the deadlines are the loop's timers, so a consumer slow to take the events (or a listener
        that awaits) holds up no timeout. The steps do the same on their way."""
        self._deadline = None
        self._deadline_at = None
        if self._closed or self._child is None or self._loop is None:
            return
        try:
            action = self._child.step(time.monotonic()).action
        except OSError:  # a signal or a look at the group that failed: looked at again soon, whoever follows
            self._deadline = self._loop.call_later(_limits.POLL_MAX, self._supervise)
            return
        self._arm(action)

    def _arm(self, action: Wait | Done | None) -> None:
        """Have :meth:`_supervise` called at ``action``'s deadline (none for ``Done`` or ``None``)."""
        until = action.until if isinstance(action, Wait) and not self._closed else None
        if until == self._deadline_at:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._deadline_at = until
        if until is not None and self._loop is not None:
            self._deadline = self._loop.call_later(max(0.0, until - time.monotonic()), self._supervise)

    # -- waking ----------------------------------------------------------------

    @property
    def _event_driven(self) -> bool:
        return bool(self._wds) and self._exit_reader

    def _unwatch(self) -> None:
        if self._exit_reader:
            self._exit_reader = False
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self.child.pidfd)
        self._unwatch_spools()

    def _watch_spools(self) -> None:
        """Wake on every write to the spools (inotify), from the first step of a run someone listens to."""
        self._watching = True
        watch = _loop_watch(self._loop) if self._loop is not None else None
        if watch is None:
            return
        child = self.child
        assert child.stderr is not None
        self._watch = watch
        try:
            for fd in (child.stdout.fileno(), child.stderr.fileno()):
                self._wds.append(watch.add(fd, self._wake))
        except OSError:
            self._unwatch_spools()  # inotify refused a watch (limits): poll instead

    def _unwatch_spools(self) -> None:
        watch, self._watch = self._watch, None
        wds, self._wds = self._wds, []
        if watch is not None:
            for wd in wds:
                watch.remove(wd)

    def _on_exit(self) -> None:
        # a pidfd stays readable once the child has exited: read it once
        if self._exit_reader:
            self._exit_reader = False
            assert self._loop is not None
            self._loop.remove_reader(self.child.pidfd)
        self._supervise()  # reaped, and what it left behind ended, whoever is (or is not) following the run
        self._wake()

    def _wake(self) -> None:
        fut = self._waiter
        if fut is not None and not fut.done():
            fut.set_result(None)
        else:
            self._woken = True

    def _resolve_waiter(self) -> None:
        if self._waiter is not None:
            _resolve(self._waiter)

    async def _sleep(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, less when the child writes or exits."""
        if self._woken:
            self._woken = False
            return
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        self._waiter = fut
        handle = self._loop.call_later(max(0.0, timeout), _resolve, fut)
        try:
            await fut
        finally:
            handle.cancel()
            self._waiter = None
            self._woken = False
            self.wakeups += 1


def _end_unfollowed(child: Child) -> None:
    """A child made for a start that was cancelled meanwhile: ended, reaped and closed (never raises)."""
    child.kill_now()
    child.close()


def _end_made(made: asyncio.Future[Child | None]) -> None:
    if not made.cancelled() and made.exception() is None:
        child = made.result()
        if child is not None:
            _end_unfollowed(child)


def open_run(
    args: Argv,
    options: ChildOptions | None = None,
    *,
    check: bool = False,
    on_event: AsyncOnEvent | None = None,
    keep_output: bool = True,
    **changes: Unpack[ChildKeywords],
) -> AsyncRun:
    """A run to follow from asyncio; the child starts on ``async with``.

    .. code-block:: python

        async with spoolparse.open_run(["codex", "exec", "--json", "…"], timeout=600) as run:
            async for event in run.events():
                print(event.kind, event.data)
            result = await run.wait()

    Options are those of :func:`spoolparse.run` (a :class:`~spoolparse.ChildOptions`, its fields as keyword
    arguments on top); ``on_event`` may also be a coroutine function. Leaving the block before the run has
    ended kills the child's process group.

    .. seealso:: :func:`arun`, :func:`spoolparse.run`
    """
    opts = ChildOptions.of(options, changes, caller="open_run")  # checked before anything starts
    return AsyncRun(args, opts, check=check, on_event=on_event, keep_output=keep_output)


async def arun(
    args: Argv,
    options: ChildOptions | None = None,
    *,
    check: bool = False,
    on_event: AsyncOnEvent | None = None,
    keep_output: bool = True,
    **changes: Unpack[ChildKeywords],
) -> Result:
    """:func:`spoolparse.run` for asyncio: same options, same :class:`~spoolparse.Result`.

    No thread follows the child (one of the loop's default executor makes it).
    Cancelling the awaiting task kills the child's
    process group (SIGTERM, a short grace, SIGKILL), closes the spools and
    re-raises :class:`asyncio.CancelledError`; an exception from
    ``on_event`` does the same and is re-raised.

    .. seealso:: :func:`open_run`, :func:`spoolparse.run`
    """
    opts = ChildOptions.of(options, changes, caller="arun")
    async with AsyncRun(args, opts, check=check, on_event=on_event, keep_output=keep_output) as run:
        return await run.wait()
