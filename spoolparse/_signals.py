"""Signals that end spoolparse: turned into an exception, and held back while a stretch must not be cut.

:func:`deferred` holds SIGINT, SIGTERM, SIGHUP and SIGQUIT back (in the main
thread, where Python runs signal handlers) across a stretch that must not be
cut: between ``fork`` and the moment the child is registered for cleanup, the
cleanup itself (TERM, grace, KILL of the children), and the write of one
output line. A signal that came meanwhile is raised again at the end, with the
handlers as they were, so its usual effect follows. Ctrl-C at any instant so
never leaves a child nobody will end, nor half a line.

:func:`interrupts` is for the command line: the four signals raise
:class:`Interrupted` (a :class:`KeyboardInterrupt`), so every ``except
BaseException`` cleanup runs (TERM, grace, KILL of the children) and the
command exits with ``128 + signum``. The first signal decides: once it was
raised, the ending signals that follow are taken and change nothing, so the
cleanup, the outcomes and the summary all come out whatever else arrives.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import IO, Any

__all__ = [
    "ENDING", "Interrupted", "deferred", "interrupts", "interrupt_was_handled", "helper_thread", "handlers_kept",
    "as_interrupted", "command_process", "WholeWrites",
]

#: The signals that end spoolparse in an orderly way.
ENDING: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name)
)


class Interrupted(KeyboardInterrupt):
    """A signal asked spoolparse to stop; ``signum`` says which (exit status ``128 + signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        #: What the interrupted run had come to (a :class:`~spoolparse.Result`), where there was one.
        self.result: Any = None

    def __str__(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}"


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold the ending signals back for the block (a no-op outside the main thread); the first that came is
    raised again at its end. Blocks nest: an inner one's signal is held by the outer one.

    The one policy for a stretch that must not be cut (a child being tied to us, a cleanup that ends children, an
    output line being written): every ending signal, not only Ctrl-C, is held, and none is lost."""
    if not _in_main_thread():
        yield
        return
    got: list[int] = []
    holding = [True]
    saved: dict[int, Any] = {}

    def note(signum: int, frame: FrameType | None) -> None:
        if holding[0]:
            got.append(signum)
            return
        # The block is over, and a signal (whose handler was already back) cut short the putting back of the
        # others before this one's: it goes back now, and takes this signal, as if it had been back all along.
        signal.signal(signum, _put_back(signum, saved[signum]))
        signal.raise_signal(signum)

    note.left_by = (holding, saved)  # type: ignore[attr-defined]  # for _put_back

    try:
        for sig in map(int, ENDING):
            old = _put_back(sig, signal.getsignal(sig))
            # an ignored signal stays ignored (children inherit that); a handler not set from Python is left
            if old is signal.SIG_IGN or old is None:
                continue
            saved[sig] = old  # first: a handler that runs as ours is set finds what it stands for
            signal.signal(sig, note)
        yield
    finally:
        raised: list[BaseException] = []
        try:
            # still holding: a signal whose handler is not back yet is noted, and raised below
            _put_back_all(list(saved.items()), raised)
        finally:
            holding[0] = False
            if got:
                signal.raise_signal(got[0])  # the first signal first
            if raised:
                raise raised[0]  # one that came as its handler was back: its effect, after the others are back


def _put_back_all(handlers: list[tuple[int, Any]], raised: list[BaseException], i: int = 0) -> None:
    """Put each handler back, whatever a handler raises on the way: a signal whose handler is already back runs
    it at any instant (its exception goes to ``raised``, or out at the end), and the rest are put back all the
    same, each in the ``finally`` of the one before (a loop would leave them at its first exception)."""
    if i >= len(handlers):
        return
    try:
        _set_again(*handlers[i], raised)
    finally:
        _put_back_all(handlers, raised, i + 1)


def _set_again(sig: int, handler: Any, raised: list[BaseException]) -> None:
    # Python runs the handlers of pending signals before it sets a new one: when one of them raises, this one
    # is not set yet, and is set again
    for _ in range(len(ENDING) + 1):
        try:
            signal.signal(sig, handler)
            return
        except BaseException as e:
            raised.append(e)


def _put_back(sig: int, handler: Any) -> Any:
    """``sig``'s handler, or the one it stands for where it is the handler of a block that is over and was left in
    place (a signal cut the block's putting back short): a block saves, and puts back, the handler it stands for."""
    while True:
        left = getattr(handler, "left_by", None)
        if left is None or left[0][0] or sig not in left[1]:
            return handler
        handler = left[1][sig]


#: The signal our handler raised last (see :func:`as_interrupted`).
_raised: list[int] = []


#: Set by :func:`command_process`: the ending signals are ignored once one ended the command.
_ends_the_process: list[bool] = []


def _raise(signum: int, frame: FrameType | None) -> None:
    if _raised:
        return  # the command is already ending on the first signal: its status and its cleanup stand
    _raised[:] = [signum]
    raise Interrupted(signum)


def command_process() -> None:
    """Say that this process is the ``spoolparse`` command, which exits when its command returns: once an ending
    signal ended the command, the ending signals are ignored to the exit (:func:`interrupts` does not put the
    old handlers back), so a late one cannot change the status the first one set."""
    _ends_the_process[:] = [True]


def as_interrupted(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """``exc``, or the :class:`Interrupted` it stands for: a library that runs signal handlers inside its own
    waits may turn the exception one raised into a bare ``KeyboardInterrupt`` (Ray's ``ray.wait`` and
    ``ray.get`` do, whatever the signal was), which would pass a SIGTERM off as a Ctrl-C (130, not 143)."""
    if isinstance(exc, Interrupted) or not _raised:
        return exc
    found = Interrupted(_raised[0])
    found.__cause__ = exc
    return found


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """For the command line: the first ending signal raises :class:`Interrupted` inside the block; those after
    it are taken and change nothing (see the module's docstring)."""
    if not _in_main_thread():
        yield
        return
    saved: dict[int, Any] = {}
    _raised.clear()
    try:
        for sig in map(int, ENDING):
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # under nohup, or in the background of a script: what we were told to ignore stays so
            saved[sig] = signal.signal(sig, _raise)
        yield
    finally:
        # the process exits with the status the first signal set: a signal now must not end it with its own
        keep = signal.SIG_IGN if _raised and _ends_the_process else None
        for sig, old in saved.items():
            signal.signal(sig, keep if keep is not None else old)
        # the block's signal is the block's: a bare KeyboardInterrupt in a later one (a program's own Ctrl-C,
        # with Python's handler back) must not be taken for it by as_interrupted
        _raised.clear()


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """The ending signals' handlers as they were before the block, whatever it set (in the main thread;
    elsewhere a no-op). For a library call that installs its own: ``ray.init()`` sets SIGTERM to
    ``sys.exit``, and a SIGTERM to ``batch --ray`` then ended it without a word on the tasks in flight."""
    if not _in_main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in map(int, ENDING)}
    try:
        yield
    finally:
        for sig, old in saved.items():
            if old is not None and signal.getsignal(sig) is not old:  # None: set outside Python, left as it is
                with contextlib.suppress(OSError, ValueError, TypeError):
                    signal.signal(sig, old)


def interrupt_was_handled() -> None:
    """Tell CPython that every KeyboardInterrupt so far was handled (it became our exit status).

    CPython remembers a KeyboardInterrupt raised inside ``exec()`` of a string
    (dataclasses build their methods that way, so a Ctrl-C while a module loads
    lands there) as unhandled even when it was caught further up, and at exit
    ends the process with SIGINT after our message instead of with our status
    (130, 128+N). Each ``exec()`` of a string starts by clearing that mark.
    """
    exec("None")


class WholeWrites:
    """A binary stream's ``write`` that writes every byte it is given.

    A signal handled during a write to a pipe (its reader slow) makes CPython's
    buffered ``write`` return a short count, the rest silently not written: a
    line torn in two, with no exception. This writes the rest.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def write(self, data: bytes | memoryview) -> int:
        view = memoryview(data)
        while view:
            n = self.stream.write(view)
            if not n:  # a stream that would block (O_NONBLOCK): no spinning on it
                raise BlockingIOError(errno.EAGAIN, "the output would block", 0)
            view = view[n:]
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


def helper_thread() -> None:
    """Call first in a thread of ours that never forks: the ending signals are blocked in it.

    The kernel then delivers them to the main thread, whose sleep (``poll``)
    they interrupt at once; delivered to a helper instead, the main thread
    would only notice at its next wake-up, or, with some Pythons, not at all. (Not in a thread that
    starts children: a blocked mask is inherited across ``exec``, and an agent must be able to get TERM.)
    """
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)
