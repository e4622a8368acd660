"""Outcomes on their way to the reader: as tasks end, or in input order.

In order, an outcome waits until every task read before it has one; the
runner starts at most ``window`` tasks ahead of the oldest without one
(:meth:`Emission.ahead`), so what waits is bounded. A halt or a resume leaves
holes in the order (tasks that never run): :meth:`past_holes` lets what
waits go once nothing can fill them.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import deque
from collections.abc import Callable, Container, Iterator
from typing import Any

from .._closing import Closing
from .._signals import deferred
from .intake import Intake
from .joblog import JobLog
from .tasks import Outcome
from .verdicts import cancelled_error

__all__ = ["Emission", "HandsOut", "Holds"]


class HandsOut(Closing, Iterator[Outcome]):
    """A batch (local or on Ray) as its reader sees it: outcomes, each final in the job log before it is seen.

    An outcome's final job-log line is written (to the kernel: no fsync) as
    the outcome is handed out, before the reader can print it; so are those
    :meth:`close` returns, before it returns them. An outcome a reader of ``spoolparse batch`` has seen is so
    always in the job log, and ``--resume`` never runs it again, even after a
    ``kill -9``. What is left: a crash after the job-log line and before
    the outcome line is whole on stdout (a reader not reading holds that
    write up) leaves a task logged whose outcome nobody read.

    The outcome handed out last stays *in hand* until the reader says it
    printed it (:meth:`printed`) or asks for the next: a reader cut short by
    a signal between the two gets it back from :meth:`unprinted`, so every
    task still gets its one outcome line.
    """

    joblog: JobLog | None
    intake: Intake
    #: Outcomes of the tasks :meth:`close` cancelled.
    cancelled: list[Outcome]
    _closed = True  # until the batch is whole: one whose making failed has nothing to close
    _handed: Outcome | None = None  # handed to the reader, not yet known to be printed
    _cut: Outcome | None = None  # handed out, then the iteration cut short before the reader had it
    _cancel_cause: str | None = None  # what a cancelled task's error says (see interrupted_by)

    def interrupted_by(self, cause: BaseException) -> None:
        """Say why the batch is about to be cancelled (a signal to spoolparse, say), before :meth:`close`: the
        error of every task it cancels names it (:func:`~.verdicts.cancelled_error`). The first cause stays."""
        if self._cancel_cause is None:
            self._cancel_cause = cancelled_error(cause)

    @property
    def skipped(self) -> int:
        """Tasks skipped because the job log has them done (``resume``)."""
        return self.intake.skipped

    @property
    def skip(self) -> Container[str]:
        """The ids ``resume`` skips."""
        return self.intake.skip

    def close(self) -> list[Outcome]:
        """Cancel what is running (TERM, a short grace, KILL), delete its spools and cgroups; idempotent.

        Returns the ``cancelled`` outcomes (also in :attr:`cancelled`).
        """
        if not self._closed:
            self._stop_running()
            # handed out by this return: final in the job log before the caller can print them (and before the
            # log closes), as the iteration's outcomes are
            for outcome in self.cancelled:
                self.emitted(outcome)
        if self._cut is not None:  # handed out as a signal cut the iteration short: the caller never had it
            self.cancelled.insert(0, self._cut)
            self._cut = None
        self._finish_cleanup()
        return self.cancelled

    def __del__(self) -> None:
        # a batch dropped unfinished still kills its children and frees its fds
        with contextlib.suppress(Exception):
            if not self._closed:
                self.close()

    def _stop_running(self) -> None:
        """Stop what runs: what is cancelled goes to :attr:`cancelled`."""
        raise NotImplementedError

    def _finish_cleanup(self) -> None:
        """The batch is over for its reader: free what it holds (idempotent)."""
        raise NotImplementedError

    def _take(self) -> Outcome:
        """The next outcome, or :class:`StopIteration`."""
        raise NotImplementedError

    def _all_out(self) -> None:
        """Every outcome is out."""

    def __iter__(self) -> HandsOut:
        return self

    def __next__(self) -> Outcome:
        self._handed = None  # the reader asks again: it has the one before
        try:
            out = self._take()
            if self._handed is not out:  # a backend that does not hand it out itself as it takes it
                self._hand(out)
        except StopIteration:
            with deferred():  # the batch's cleanup whole (its job log closed last)
                self._all_out()
            raise
        except BaseException:
            # a signal (or a failed job-log write) after the outcome was handed out, before the reader had it:
            # kept for unprinted(), or else for close() to return
            self._cut = self._handed
            raise
        return out

    def _hand(self, out: Outcome) -> None:
        """``out`` goes to the reader: in hand until printed, its final job-log line written now. Each backend's
        :meth:`_take` calls it as it takes ``out`` from where it waited, under held signals, so that no signal
        comes between the two."""
        self._handed = out
        self.emitted(out)

    def emitted(self, outcome: Outcome) -> None:
        """Say that ``outcome`` is about to reach its reader: its final job-log line is written now, whole."""
        if self.joblog is not None:
            with deferred():
                self.joblog.emitted(outcome)

    def printed(self, outcome: Outcome) -> None:
        """The reader has ``outcome`` whole (the ``batch`` command printed it): no longer in hand."""
        if self._handed is outcome:
            self._handed = None

    def unprinted(self) -> list[Outcome]:
        """The outcome handed out last if the reader never said it printed it (a signal came between), once."""
        handed, self._handed = self._handed, None
        if handed is not None and handed is self._cut:
            self._cut = None  # the caller has it now: close() does not return it again
        return [] if handed is None else [handed]


class Emission:
    def __init__(self, *, ordered: bool) -> None:
        self.ordered = ordered
        #: Outcomes ready for the reader, oldest first.
        self.ready: deque[Outcome] = deque()
        self._waiting: dict[int, Outcome] = {}  # by input order, for an earlier one
        self._next = 0  # the input order of the next outcome due (in order)

    def add(self, seq: int, out: Outcome) -> None:
        """The final outcome of the task ``seq`` (its place among the tasks that run)."""
        if not self.ordered:
            self.ready.append(out)
            return
        self._waiting[seq] = out
        while self._next in self._waiting:
            self.ready.append(self._waiting.pop(self._next))
            self._next += 1

    def ahead(self, seq: int) -> int:
        """How far the task ``seq`` would be ahead of the oldest task without an outcome (in order)."""
        return seq - self._next if self.ordered else 0

    def past_holes(self) -> None:
        """Nothing can fill the holes in the order any more: what waits is ready, in order."""
        for k in sorted(self._waiting):
            self.ready.append(self._waiting.pop(k))

    def take(self, holds: Holds) -> list[Outcome]:
        """The outcomes ready for the reader; one still held (its transcript being kept, its last events being
        delivered) waits, and in order those after it too: an outcome seen means its transcript is in place."""
        ready = self.ready
        if not holds:
            every = list(ready)
            ready.clear()
            return every
        out: list[Outcome] = []
        held: list[Outcome] = []
        for o in ready:
            if o in holds or (held and self.ordered):
                held.append(o)
            else:
                out.append(o)
        ready.clear()
        ready.extend(held)
        return out

    def take_undelivered(self) -> list[Outcome]:
        """Every outcome not yet handed out, ready ones first, then those that waited (for cancelling)."""
        self.past_holes()
        out = list(self.ready)
        self.ready.clear()
        return out


class Holds:
    """Outcomes that wait for one more thing before they go to the reader: their transcript kept, their last
    events delivered, each done in a thread of its own. An outcome is held by ``id()`` (held here, so no other
    object takes that id), with the count of what it still waits for."""

    def __init__(self) -> None:
        self._held: dict[int, list[Any]] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._held)

    def __contains__(self, out: Outcome) -> bool:
        return id(out) in self._held

    def hold(self, out: Outcome) -> Callable[[], None]:
        """``out`` waits for one more thing; what to call (from any thread) once that is done. The callable holds
        this table, never the batch."""
        with self._lock:
            self._held.setdefault(id(out), [out, 0])[1] += 1
        return functools.partial(_release, self._held, self._lock, id(out))

    def clear(self) -> None:
        with self._lock:
            self._held.clear()


def _release(held: dict[int, list[Any]], lock: threading.Lock, key: int) -> None:
    with lock:
        entry = held.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del held[key]
