"""``run``: one child followed from this thread, until it ends, into its :class:`~spoolparse.Result`.

The child itself (its spools, its parser, its containment, how it ends) is
a :class:`~spoolparse.child.Child`; this driver only waits: it sleeps until
the child writes or exits, or until the time the child's lifecycle hands
back (inotify and a pidfd on Linux, bounded polling elsewhere). Live events
go to the listener from a thread of its own.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _limits
from ._os.wait import SpoolWaiter
from ._relay import EventRelay
from ._signals import Interrupted, deferred
from .child import LOOK, Argv, Budget, Child, group_alive, handed_back, signal_group
from .options import ChildKeywords, ChildOptions
from .parser import OnEvent
from .providers.base import LiveEvent
from .result import Result

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Child", "run", "group_alive", "signal_group"]


def _nobody(live: list[LiveEvent]) -> None:
    """Events nobody will hear (dropped a step at a time, never gathered)."""


def _summarize_interrupted(child: Child, exc: Interrupted, *, running: bool, timeout: float | None) -> None:
    """Hand the command line what an interrupted run had come to: its result, on ``exc.result``.

    A child still running when the signal came did not finish: the result says so (never ``ok``).
    One that had exited keeps the verdict it earned. A second signal meanwhile leaves ``exc.result`` unset.
    """
    with contextlib.suppress(Interrupted, OSError), deferred():
        res, _ = child.result(keep_output=False, timeout=timeout, emit=_nobody)  # its events: nobody listens now
        if running:
            res.error = str(exc) if res.error is None else f"{exc}; {res.error}"
            res.hold_back_text()
        exc.result = res


def _deliver_rest(
    child: Child,
    relay: EventRelay,
    deliver: Callable[[object, LiveEvent], None],
    bell: threading.Event,
    *,
    keep_output: bool,
    timeout: float | None,
) -> Result:
    """The rest of a reaped child's output to the relay (never more than its room at a time), its result once
    the listener has had every event. What the listener raised is raised here."""

    def room() -> int:
        while True:
            bell.clear()
            if relay.failed is not None:
                raise relay.failed
            if relay.room:
                return relay.room
            bell.wait(_limits.SIGNAL_SLICE)  # a signal another thread took is seen here within this

    while True:
        events = room()
        got, live, caught_up = child.pump_within(relay.byte_room, math.inf, max_events=events)
        relay.put(deliver, None, live, got)
        if caught_up:
            break
    res, _ = child.result(keep_output=keep_output, timeout=timeout, emit=lambda live: relay.put(deliver, None, live))
    try:
        delivered = threading.Event()
        relay.mark(delivered.set)
        while not delivered.wait(_limits.SIGNAL_SLICE):
            pass
        relay.close()
        if relay.failed is not None:
            raise relay.failed
    except BaseException as exc:
        res.close()  # nobody will get this result: its spools go with it
        if isinstance(exc, Interrupted) and exc.result is None:
            exc.result = res  # the verdict the run had earned (its spools are gone: never read them again)
        raise
    return res


def run(
    args: Argv,
    options: ChildOptions | None = None,
    *,
    check: bool = False,
    on_event: OnEvent | None = None,
    on_start: Callable[[Child], Any] | None = None,
    keep_output: bool = True,
    **changes: Unpack[ChildKeywords],
) -> Result:
    """Run a command whose stdout is JSON lines, and return its answer.

    The child's options are one :class:`~spoolparse.ChildOptions`
    (``options``; default: every default), with any of its fields given as
    keyword arguments on top, as :func:`subprocess.run` takes those of
    :class:`subprocess.Popen`: ``run(argv, timeout=600, input=prompt)``. A bad
    value is a :class:`~spoolparse.UsageError` before anything starts.

    stdout and stderr go to nameless spool files (never a pipe, never memory)
    in ``spool_dir``; the stdout spool is parsed while the child writes it
    (as ``provider``, within ``max_line`` and ``max_retained``). The child
    leads its own process group (and, with ``containment="auto"``, the
    default, its own cgroup where one can be made, which also holds what
    calls ``setsid``): on ``timeout`` the group gets SIGTERM, then SIGKILL
    after ``grace`` seconds, and ``timed_out`` is set (``soft_timeout``
    sends ``soft_signal`` once before). Processes the child leaves behind are
    ended the same way when it exits. On ``KeyboardInterrupt`` (or any
    exception, such as one raised by ``on_event``) the group is killed, the
    spools closed, and the exception re-raised. If this process dies, even by
    ``kill -9``, the child and its group die with it (the docs' page on how
    a child ends). ``containment=None``: the process group alone.

    ``input`` is ``bytes``, ``str`` (UTF-8), a path (``os.PathLike``) or a
    binary file; ``None`` gives the child ``/dev/null``; ``cwd``, ``env`` and
    ``shell`` mean what they mean to :func:`subprocess.run`. With
    ``check=True`` a result that is not ``ok`` raises
    :class:`~spoolparse.TimeoutExpired` or
    :class:`~spoolparse.CalledProcessError`. ``allow_empty_answer=True``: a run
    that finished without an answer is ``ok`` (by default it is not: "the agent
    finished without an answer").

    ``on_event`` gets each :class:`~spoolparse.LiveEvent` while the child
    runs, in stream order, from a thread of its own: a slow listener delays
    the events, never the timeout (no more is parsed while ``EVENT_BACKLOG``
    wait); ``run`` returns once it has had them all. ``on_start`` gets the started :class:`Child` once
    (its ``pid``, and counters such as ``offset`` for a progress display).
    The follower sleeps until the child writes or exits (inotify and a pidfd
    on Linux; bounded polling elsewhere).

    Raises :class:`~spoolparse.SpawnError` when the command cannot be started
    and :class:`~spoolparse.SpoolFullError` (with ``.result``) when the spool
    fills up.

    .. seealso:: :func:`subprocess.run`, :func:`spoolparse.arun`
    """
    opts = ChildOptions.of(options, changes, caller="run")  # checked before anything starts
    timeout = opts.timeout
    child = Child(args, opts, live=on_event is not None, launch=False)
    launched = False
    assert child.stderr is not None
    waiter: SpoolWaiter | None = None
    # the listener is called from a thread of its own: one that is slow, or blocks on a full pipe, holds up no
    # timeout; while EVENT_BACKLOG events wait for it, no more output is parsed (the spool holds it)
    relay: EventRelay | None = None
    bell = threading.Event()  # the relay has room again, or the listener failed
    if on_event is not None:
        relay = EventRelay(bell.set)
        listener = on_event

        def deliver(_: object, ev: LiveEvent) -> None:
            listener(ev)

    try:
        # a signal while the child starts is raised here, once it is ours: it is ended and its summary made as
        # for a signal at any later instant (raised inside launch, the child would go without a summary)
        with deferred():
            child.launch()
            launched = True
        waiter = SpoolWaiter((child.stdout.fileno(), child.stderr.fileno()), child.pidfd)
        if on_start is not None:
            on_start(child)
        interval = waiter.next_interval(None)
        while True:
            now = time.monotonic()
            if relay is None:
                budget = Budget(_limits.FOLLOW_STEP)
            else:
                bell.clear()  # before the look at the room: a wake after it is not lost
                if relay.failed is not None:
                    raise relay.failed
                # while EVENT_BACKLOG events wait for the listener, nothing is parsed (the spool holds the rest)
                budget = LOOK if not relay.room else Budget(
                    min(_limits.FOLLOW_STEP, relay.byte_room), now + _limits.PARSE_BUDGET, relay.room
                )
            # a step is never cut by a signal: one raised inside the parse (in a provider's first import, in a
            # record half folded) would leave the parser halfway, and the interrupted run's summary read from it
            with deferred():
                step = child.step(now, budget)
            if relay is not None:
                relay.put(deliver, None, step.events, step.read)
            if child.life.leader_exited:
                break
            if step.read:
                interval = waiter.next_interval(None)
                continue
            wait = interval if step.until is None else min(interval, max(0.0, step.until - now))
            if relay is not None and relay.full:
                # the spool's writes must not wake us (nothing is parsed until the listener catches up); the
                # exit is looked at every POLL_MAX meanwhile, the deadlines on time
                bell.wait(min(wait, _limits.POLL_MAX))
                continue
            waiter.wait(wait)
            interval = waiter.next_interval(interval)
        waiter.close()  # the watches pin the spools' inodes: gone before the spools may close
        child.settle()  # reaped, and what it left behind ended
        if relay is None:
            res, _ = child.result(keep_output=keep_output, timeout=timeout)
        else:
            res = _deliver_rest(child, relay, deliver, bell, keep_output=keep_output, timeout=timeout)
    except BaseException as exc:
        if not launched:
            raise  # the start failed (a SpawnError): launch has closed what it had made
        # the whole cleanup held: a signal meanwhile (a second Ctrl-C) takes effect after it, never halfway through
        # (the child's end, what it had come to, its spools closed). One that comes before its block holds them
        # (here, as the block begins) would cut it short before it began: then it begins again. Nothing that
        # runs Python (where a signal's handler may run) stands outside the ``try``.
        running: bool | None = None
        tries = 0
        while True:
            began = False
            try:
                tries += 1
                if running is None:
                    running = not child.life.leader_exited
                with deferred():
                    began = True
                    _end(child, exc, relay, waiter, running=running, timeout=timeout)
            except KeyboardInterrupt:
                if began or tries >= _limits.CLEANUP_TRIES:
                    raise  # held while the cleanup ran, and raised as it ended (or raised by it): as before
                continue
            break
        raise
    return handed_back(child, res, check=check)


def _end(child: Child, exc: BaseException, relay: EventRelay | None, waiter: SpoolWaiter | None, *,
         running: bool, timeout: float | None) -> None:
    """A run cut short (``exc``): the child ended, what it had come to summed up, what it held closed. Each step
    may be done again (a signal may cut the first try short)."""
    if relay is not None:
        relay.abandon()
    if waiter is not None:
        waiter.close()
    child.kill_now()
    if isinstance(exc, Interrupted) and exc.result is None:
        _summarize_interrupted(child, exc, running=running, timeout=timeout)
    child.close()
    if relay is not None:
        relay.close(wait=_limits.EVENT_JOIN)  # the listener done with the event it is in
