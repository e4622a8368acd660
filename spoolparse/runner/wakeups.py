"""What wakes a batch's loop: a child's exit (its pidfd), another thread (the wake pipe), or the clock
(:class:`Schedule`).

The loop sleeps in one :func:`select.poll` on the pidfds of its running
children and the read end of its wake pipe. A child without a pidfd (an
older kernel) is looked at every :data:`UNPOLLED_LOOK` instead.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .slot import Slot

__all__ = ["Waker", "Wakeups", "Schedule", "UNPOLLED_LOOK"]

#: Seconds between looks at a child whose exit no pidfd tells.
UNPOLLED_LOOK = 0.01


class Waker:
    """The loop's wake-up pipe: any thread writes a byte, the loop polls the read end and drains it.

    Its own object, so that the spawner's and the driver's callbacks hold it and not the batch: nothing
    but its reader keeps a batch alive.
    """

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()
        # a byte is in the pipe, not yet drained: a wake meanwhile need not write another (each waker changes
        # what the loop looks at before it wakes it, and the loop looks after it drains)
        self._pending = False

    def wake(self, *_: object) -> None:
        if self._pending:
            return
        with self._lock, contextlib.suppress(OSError):
            if self.w >= 0:  # closed (and its number maybe reused) once the batch is finished
                self._pending = True
                os.write(self.w, b"x")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while len(os.read(self.r, 4096)) == 4096:
                pass
        # after the read (which may take the byte of a wake made during it): a wake skipped from here to the
        # reset changed what the loop looks at next, and one after it writes again
        self._pending = False

    def close(self) -> None:
        with self._lock:
            for fd in (self.r, self.w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.r = self.w = -1


class Wakeups:
    """The poll set of a batch's loop: its children's pidfds and the wake pipe; :attr:`ready` is what the last
    :meth:`wait` saw."""

    def __init__(self, waker: Waker) -> None:
        self.waker = waker
        self._poll = select.poll()
        self._poll.register(waker.r, select.POLLIN)
        #: The descriptors the last wait found ready: an exited child's pidfd (its slot's key), the pipe.
        self.ready: set[int] = set()
        #: Keys of running children without a pidfd: looked at every UNPOLLED_LOOK.
        self.unpolled: set[int] = set()

    def add(self, s: Slot) -> None:
        """Wake on the exit of the slot's child (its key is its pidfd; a negative one is a pid, looked at)."""
        if s.key >= 0:
            self._poll.register(s.key, select.POLLIN)
            s.polled = True
        else:
            self.unpolled.add(s.key)

    def remove(self, s: Slot) -> None:
        """Poll the slot's pidfd no more: once the child has exited it stays readable, and polled it would end
        every wait (the loop would spin through the sweep and the backlog's parse)."""
        if s.polled:
            s.polled = False
            with contextlib.suppress(KeyError):
                self._poll.unregister(s.key)

    def forget(self, s: Slot) -> None:
        """The slot has left the running set."""
        self.unpolled.discard(s.key)
        self.remove(s)

    def exited(self, s: Slot) -> bool | None:
        """What the last wait saw of the slot's exit: readable pidfd or not; ``None`` where it has none polled."""
        return (s.key in self.ready) if s.polled else None

    def wait(self, timeout: float) -> None:
        """Sleep until a child exits, another thread wakes the loop, or ``timeout`` seconds pass."""
        if self.unpolled:
            timeout = min(timeout, UNPOLLED_LOOK)
        self.ready.clear()
        self.ready.update(fd for fd, _ in self._poll.poll(math.ceil(max(0.0, timeout) * 1000)))
        if self.waker.r in self.ready:
            # drained whoever woke us: left full, it would end every wait at once. A wake after this read is
            # seen by the next poll.
            self.waker.drain()


@dataclass
class Schedule:
    """When a batch's loop next does what it does on a clock of its own (monotonic seconds)."""

    next_sample: float = 0.0  # spool looks and watchdog limits (every sample_interval)
    next_memory_sample: float = 0.0  # memory of every task (memory_sample_interval; near stop_at, every sample)
    next_read: float = 0.0  # the next sample that reads every growing spool (UNWATCHED_READ_INTERVAL)
    next_look_all: float = 0.0  # every child stepped, whatever woke the loop (LOOK_ALL_INTERVAL)
    parse_until: float = 0.0  # this turn's PARSE_BUDGET ends here
