"""How a batch decides, written once: admission, memory kills, retries and requeues, halting.

Like :mod:`spoolparse._os.lifecycle`, a sans-I/O policy: no clock, no
process, no file. The batch's loop (:class:`~.scheduler.Batch`, which keeps
the polling and the threads) feeds it what it observes and carries out what
it returns::

    policy = BatchPolicy(retries=2, requeues=2, retry_backoff=1.0, halt=parse_halt("soon"),
                         stop_at=0.85, kill_at=0.95, window=16)
    # may the next task be taken from the input, and may it start now?
    if policy.takes_new(ahead=seq - oldest_without_outcome) and policy.admits(
            estimate, reserved=untouched_by_running, running=n, used=used, total=total):
        start(task)
    # after a memory sample: watchdog limits, and the host's kill_at (one victim at a time)
    for kill in policy.memory_kills(running_children, used=used, total=total):
        end(kill.ident, kill.why)                          # "killed_memory" or "requeue"
    # an attempt ended
    action = policy.ended(Attempt(seq, attempt, verdict, forced, cancelled), now)
    if isinstance(action, Again):                          # log it (not final), start it again at action.at
        ...
    else:                                                  # Final: log it, hand it out, and then
        if policy.final(verdict) == "now":                 # the halt is reached: cancel what runs
            ...

The Ray driver, which runs the local policy on each node, asks
:meth:`BatchPolicy.final` for the halt too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

from .halt import Halt, Tally
from .verdicts import HALTED_NOW, RETRY_VERDICTS, cancelled_error

if TYPE_CHECKING:
    from .options import BatchOptions

__all__ = ["BatchPolicy", "Observed", "Kill", "Attempt", "Again", "Final", "FINAL", "admits", "at_or_above"]


def admits(estimate: int, *, reserved: int, running: int, used: int, total: int, stop_at: float) -> bool:
    """Whether a task with this ``estimate`` (bytes) may start now.

    ``reserved``: what the running (and starting) tasks reserved and do not use yet. A task starts only while
    used memory is below ``stop_at`` of the total and its estimate fits under it beside what is reserved
    (looking only at free memory, as GNU parallel's ``--memfree`` does, starts a burst of tasks that all
    look cheap in their first milliseconds). With nothing running a task starts whenever used memory is
    below ``stop_at``, so an estimate larger than the budget cannot stall the batch.
    """
    budget = stop_at * total
    if used >= budget:
        return False
    return running == 0 or used + reserved + estimate <= budget


def at_or_above(used: int, total: int, fraction: float) -> bool:
    """Whether ``used`` is at or above ``fraction`` of ``total``."""
    return used >= fraction * total


class Observed(Protocol):
    """What the policy reads of a running task at a memory sample."""

    @property
    def started(self) -> float: ...

    @property
    def usage(self) -> int: ...

    @property
    def watchdog_limit(self) -> int | None:
        """Its memory limit where sampling keeps it (no cgroup holds it); ``None``: none to keep."""

    @property
    def ending(self) -> bool:
        """The batch is ending it already (a kill, a timeout, a cancel), or its leader exited."""


_T = TypeVar("_T", bound=Observed)


@dataclass(frozen=True, slots=True)
class Kill(Generic[_T]):
    """End ``ident`` (the observed task itself) with SIGKILL: over its own limit, or the youngest under host
    memory pressure (requeued)."""

    ident: _T
    why: Literal["killed_memory", "requeue"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """An attempt that ended: its task's place in the input, its number (from 1), its verdict, why the batch
    ended it (``cancelled``, ``requeue``, ``killed_memory``, ``timeout``, or ``None``), whether it was cancelled."""

    seq: int
    attempt: int
    verdict: str
    forced: str | None
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class Again:
    """Start the task again at ``at`` (the end's time plus the backoff, doubled each attempt); ``retry``: it is
    counted against ``retries`` (else a requeue after host memory pressure, against ``requeues``)."""

    at: float
    retry: bool


@dataclass(frozen=True, slots=True)
class Final:
    """The attempt's outcome is the task's."""


FINAL = Final()


class BatchPolicy:
    """A batch's decisions (see the module docstring for how to drive it).

    Read-only state: :attr:`halted`, :attr:`tally` (the counts of final outcomes).
    """

    def __init__(
        self, *, retries: int, requeues: int, retry_backoff: float, halt: Halt | None, stop_at: float,
        kill_at: float, window: int | None = None,
    ) -> None:
        self.retries = retries
        self.requeues = requeues
        self.retry_backoff = retry_backoff
        self.halt = halt
        self.stop_at = stop_at
        self.kill_at = kill_at
        self.window = window
        #: Set once the halt condition is reached: nothing new is taken.
        self.halted = False
        self.tally = Tally()
        self._failures: dict[int, int] = {}  # failed attempts per task retried so far (by input order)
        self._victim: Observed | None = None  # the last pressure kill, until it has gone

    @classmethod
    def of(cls, options: BatchOptions, *, window: int | None = None) -> BatchPolicy:
        """The policy a batch with these options follows (``window``: in order, how far ahead it may start)."""
        return cls(
            retries=options.retries, requeues=options.requeues, retry_backoff=options.retry_backoff,
            halt=options.halt_condition, stop_at=options.stop_at, kill_at=options.kill_at, window=window,
        )

    # -- admission ---------------------------------------------------------------

    def takes_new(self, *, ahead: int) -> bool:
        """Whether a task not started yet may be taken from the input: not once halted, nor (in order) when it
        would be ``window`` or more ahead of the oldest task without an outcome (``window`` ``None``: no bound)."""
        return not self.halted and (self.window is None or ahead < self.window)

    def admits(self, estimate: int, *, reserved: int, running: int, used: int, total: int) -> bool:
        """Whether a task with this estimate may start now (:func:`admits`, at ``stop_at``)."""
        return admits(estimate, reserved=reserved, running=running, used=used, total=total, stop_at=self.stop_at)

    # -- memory ------------------------------------------------------------------

    def memory_kills(self, running: Iterable[_T], *, used: int, total: int) -> list[Kill[_T]]:
        """What a memory sample ends: every task over its own watchdog limit, and, when used memory is at or
        above ``kill_at``, the youngest task left (requeued): one at a time, the next once that one has gone."""
        kills: list[Kill[_T]] = []
        victim_running = False
        youngest: _T | None = None
        for c in running:
            if c is self._victim:
                victim_running = True
            if c.ending:
                continue
            limit = c.watchdog_limit
            if limit is not None and c.usage > limit:
                kills.append(Kill(c, "killed_memory"))
            elif youngest is None or c.started > youngest.started:
                youngest = c
        if victim_running:
            return kills  # its memory is not back yet
        self._victim = None
        if youngest is not None and at_or_above(used, total, self.kill_at):
            self._victim = youngest
            kills.append(Kill(youngest, "requeue"))
        return kills

    # -- an attempt's end -----------------------------------------------------------

    def ended(self, a: Attempt, now: float) -> Again | Final:
        """Whether the task runs again (a requeue after host memory pressure, up to ``requeues``; a retry of a
        verdict in :data:`~.verdicts.RETRY_VERDICTS`, up to ``retries``) or this outcome is final. Never after
        a cancel or a halt."""
        failures = self._failures.get(a.seq, 0)
        requeue = a.forced == "requeue" and a.attempt - failures <= self.requeues
        retry = a.verdict in RETRY_VERDICTS and a.forced != "requeue" and failures < self.retries
        if (requeue or retry) and not a.cancelled and not self.halted:
            if retry:
                self._failures[a.seq] = failures + 1
            return Again(now + self.retry_backoff * 2 ** (a.attempt - 1), retry)
        self._failures.pop(a.seq, None)
        return FINAL

    # -- halting ---------------------------------------------------------------------

    def final(self, verdict: str) -> Literal["soon", "now"] | None:
        """Count a final outcome; when it reaches the halt condition (once), how the batch halts: ``"soon"``,
        start nothing new; ``"now"``, cancel what runs too."""
        if self.tally.add(verdict, self.halt) and not self.halted:
            self.halted = True
            assert self.halt is not None  # reached: there is one
            return self.halt.when
        return None

    @property
    def cancels_new(self) -> bool:
        """Whether a task that starts now is cancelled at once (``halt now`` was reached while it started)."""
        return self.halted and self.halt is not None and self.halt.when == "now"

    def cancelled_error(self, cause: str | None) -> str:
        """The error of a task the batch cancelled: ``cause`` (what stopped the batch, as
        :func:`~.verdicts.cancelled_error` says it), else the halt, else the batch's close."""
        return cause or (HALTED_NOW if self.halted else cancelled_error(None))
