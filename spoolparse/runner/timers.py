"""The lifecycle deadlines of a batch's running children, soonest first.

A child's lifecycle says when it next has something to do by the clock
alone (its timeout, a grace running out, a sweep's next look:
:attr:`~spoolparse._os.lifecycle.Lifecycle.deadline`); the loop sleeps until
the soonest one, and steps only the children whose time has come.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .slot import Slot

__all__ = ["Timers"]

#: Stale entries the heap may hold beyond the running children before it is rebuilt.
_SLACK = 64


class Timers:
    """A heap of ``(at, n, slot)``; an entry whose slot has left (not in ``running``) or was re-armed for
    another time is stale, dropped when it comes up, or by a rebuild once stale entries outnumber the live
    ones: the heap stays O(running) however many tasks come and go."""

    def __init__(self, running: Mapping[int, Slot]) -> None:
        self._running = running  # the loop's running set, by key
        self._heap: list[tuple[float, int, Slot]] = []
        self._n = itertools.count()
        self._stale = 0

    def __len__(self) -> int:
        return len(self._heap)

    def arm(self, s: Slot) -> None:
        """Put the slot's next lifecycle deadline in the heap (once per distinct time)."""
        at = s.child.life.deadline
        if at != s.armed_at:
            self.disarm(s)
            s.armed_at = at
            if at is not None:
                heapq.heappush(self._heap, (at, next(self._n), s))

    def disarm(self, s: Slot) -> None:
        """The slot's entry (if any) no longer counts."""
        if s.armed_at is None:
            return
        s.armed_at = None
        self._stale += 1
        if self._stale > len(self._running) + _SLACK:
            running = self._running
            self._heap = [e for e in self._heap if e[2].armed_at == e[0] and running.get(e[2].key) is e[2]]
            heapq.heapify(self._heap)
            self._stale = 0

    def next_due(self) -> float | None:
        """The soonest live deadline (stale entries on top are dropped)."""
        heap = self._heap
        while heap:
            at, _, s = heap[0]
            if s.armed_at == at and self._running.get(s.key) is s:
                return at
            heapq.heappop(heap)
            self._stale = max(0, self._stale - 1)
        return None

    def due(self, now: float) -> list[Slot]:
        """The slots whose deadline has come, taken off the heap."""
        out: list[Slot] = []
        while (at := self.next_due()) is not None and at <= now:
            s = heapq.heappop(self._heap)[2]
            s.armed_at = None  # popped, not stale: re-armed after its step
            out.append(s)
        return out
