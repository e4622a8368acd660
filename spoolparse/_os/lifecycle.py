"""How a child ends: one sans-I/O state machine for ``run``, ``arun`` and the runner.

The machine holds the policy (deadlines, soft signal, TERM, grace, KILL,
sweep of leftovers, reaped) and nothing else: no clock, no sleep, no
syscall. Its driver supplies the time and the observations and carries out
the actions, like h11 does for HTTP::

    life = Lifecycle(Deadlines(timeout=60, grace=5), started=clock())
    while True:
        if not life.leader_exited and child_has_exited():   # waitid(WNOWAIT), a pidfd...
            life.exited(clock())
        action = life.next_action(clock())
        if isinstance(action, Send):
            signal_group_and_cgroup(action.sig)
        elif isinstance(action, Reap):
            life.reaped(clock(), reap_leader())             # never blocks: it has exited
        elif isinstance(action, Check):
            life.checked(clock(), leftovers=anything_left())  # /proc group scan, cgroup.procs
        elif isinstance(action, Wait):
            sleep_until(action.until)   # or less: until the child writes or exits (None: no deadline)
        else:                           # Done
            break

Interrupts, errors and full spools come in as :meth:`Lifecycle.stop`; after it
the driver keeps calling :meth:`~Lifecycle.next_action` until :class:`Done`.
``next_action`` may be called at any time: it returns :class:`Wait` until
something is due, so one loop can drive many machines (the runner takes the
earliest ``Wait.until`` of all its children as its poll timeout).

The order is fixed here and nowhere else:

1. running: at ``soft_timeout`` the soft signal (once); at ``timeout`` TERM;
2. terminating: at TERM + ``grace`` KILL; then wait for the leader's exit;
3. the leader exited: reap it; then check for leftovers (the group, the cgroup);
4. leftovers: TERM (unless already sent), then KILL when the grace is over,
   then up to :data:`KILL_WAIT` for them to go; what survives that (a process
   in uninterruptible sleep) is given up on: :attr:`Lifecycle.abandoned`;
5. done.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from enum import Enum

from ..errors import UsageError

__all__ = [
    "Deadlines",
    "Lifecycle",
    "Phase",
    "Send",
    "Reap",
    "Check",
    "Wait",
    "Done",
    "Action",
    "KILL_WAIT",
    "CHECK_INTERVAL",
    "check_times",
]

#: Seconds leftovers get to disappear after SIGKILL before they are given up on.
KILL_WAIT = 1.0
#: Seconds between checks for leftovers while they are being ended.
CHECK_INTERVAL = 0.02


def check_times(timeout: float | None, grace: float, soft_timeout: float | None = None) -> None:
    """Reject times a lifecycle cannot use: negative, NaN, and an infinite grace.

    Raises :class:`~spoolparse.UsageError` (a :class:`ValueError`). An
    infinite ``timeout`` is the same as none.
    """
    for name, value in (("timeout", timeout), ("soft_timeout", soft_timeout)):
        if value is not None and (math.isnan(value) or value < 0):
            raise UsageError(f"{name} must be a number of seconds >= 0, not {value}")
    if math.isnan(grace) or grace < 0 or math.isinf(grace):
        raise UsageError(f"grace must be a finite number of seconds >= 0, not {grace}")


@dataclass(frozen=True)
class Deadlines:
    """The time policy of one child, in seconds from its start (``None``: never).

    ``soft_signal`` goes to the group once at ``soft_timeout``; TERM at
    ``timeout``; KILL ``grace`` seconds after TERM.
    """

    timeout: float | None = None
    grace: float = 5.0
    soft_timeout: float | None = None
    soft_signal: int = signal.SIGTERM

    def __post_init__(self) -> None:
        check_times(self.timeout, self.grace, self.soft_timeout)


class Phase(Enum):
    RUNNING = "running"
    TERMINATING = "terminating"  #: TERM sent, KILL at the end of the grace
    KILLED = "killed"  #: KILL sent, waiting for the leader's exit
    REAPING = "reaping"  #: the leader exited, not yet reaped
    CHECKING = "checking"  #: reaped: are there leftovers?
    SWEEPING = "sweeping"  #: leftovers got TERM, KILL at the end of the grace
    SWEEP_KILLED = "sweep_killed"  #: leftovers got KILL, up to KILL_WAIT to go
    DONE = "done"


@dataclass(frozen=True)
class Send:
    """Send ``sig`` to the child's process group and its cgroup."""

    sig: int


@dataclass(frozen=True)
class Reap:
    """The leader has exited: reap it (this does not block) and call :meth:`Lifecycle.reaped`."""


@dataclass(frozen=True)
class Check:
    """Look whether anything of the child is left and call :meth:`Lifecycle.checked`."""


@dataclass(frozen=True)
class Wait:
    """Nothing to do before ``until`` (``None``: not before the leader exits) or an observation."""

    until: float | None


@dataclass(frozen=True)
class Done:
    """The child is reaped and nothing of it is left (or what is left is :attr:`~Lifecycle.abandoned`)."""


Action = Send | Reap | Check | Wait | Done


class Lifecycle:
    """The end of one child. See the module docstring for how to drive it.

    Read-only state for the verdict: :attr:`timed_out` (the hard timeout
    fired), :attr:`soft_sent`, :attr:`reason` (the first :meth:`stop` reason,
    or ``"timeout"``), :attr:`returncode`, :attr:`abandoned`, :attr:`phase`.
    """

    def __init__(self, deadlines: Deadlines, *, started: float) -> None:
        self.deadlines = deadlines
        self.started = started
        self.phase = Phase.RUNNING
        self.timed_out = False
        self.soft_sent = False
        self.reason: str | None = None
        self.returncode: int | None = None
        self.abandoned = False
        self.leader_exited = False
        self._grace = deadlines.grace
        self._term_sent = False
        self._kill_sent = False
        self._kill_at: float | None = None  # while terminating or sweeping
        self._give_up_at: float | None = None  # after the sweep's KILL
        self._next_check: float | None = None
        self._pending: list[Send] = []

    # -- observations ----------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    def exited(self, now: float) -> None:
        """The leader has exited (seen through a pidfd, ``waitid`` with ``WNOWAIT``...); not yet reaped."""
        if self.leader_exited:
            return
        self.leader_exited = True
        self.phase = Phase.REAPING

    def reaped(self, now: float, returncode: int) -> None:
        """The driver reaped the leader (after :class:`Reap`)."""
        self.leader_exited = True
        self.returncode = returncode
        if self.phase in (Phase.DONE, Phase.CHECKING, Phase.SWEEPING, Phase.SWEEP_KILLED):
            return
        self.phase = Phase.CHECKING

    def checked(self, now: float, *, leftovers: bool) -> None:
        """The answer to :class:`Check`: whether a process of the child's group or cgroup is left."""
        if self.phase not in (Phase.CHECKING, Phase.SWEEPING, Phase.SWEEP_KILLED):
            return
        self._next_check = now + CHECK_INTERVAL
        if not leftovers:
            self.phase = Phase.DONE
            return
        if self.phase is Phase.CHECKING:
            if self._kill_sent:
                # they were sent KILL with the leader: again (they may be new), and wait
                self._sweep_kill(now)
            else:
                self._term(now)  # unless TERM went out already: then its grace still runs
                if self._kill_at is None:
                    self._kill_at = now + self._grace
                self.phase = Phase.SWEEPING

    def stop(self, now: float, reason: str, *, grace: float | None = None, kill: bool = False) -> None:
        """End the child now: TERM, and KILL after ``grace`` (default: the policy's; 0: KILL right after TERM).

        For interrupts, errors, full spools. Only the first ``reason`` is
        kept. A shorter grace than the one running takes over. ``kill``: KILL
        at once, no TERM (memory kills: a process over its memory must not get
        to run a handler that may allocate more).
        """
        if self.reason is None:
            self.reason = reason
        if kill and self.phase in (Phase.RUNNING, Phase.TERMINATING):
            self._kill(now)
            self.phase = Phase.KILLED
            return
        if kill:
            grace = 0.0
        g = self._grace if grace is None else grace
        if math.isnan(g) or g < 0:
            g = 0.0
        self._grace = min(self._grace, g)
        if self.phase is Phase.RUNNING:
            self._term(now)  # with no grace, KILL follows at once: TERM still says why first
            self._kill_at = now + g
            self.phase = Phase.TERMINATING
        elif self.phase in (Phase.TERMINATING, Phase.SWEEPING):
            assert self._kill_at is not None
            self._kill_at = min(self._kill_at, now + g)
        elif self.phase is Phase.CHECKING and not self._kill_sent:
            self._kill_at = now + g if self._kill_at is None else min(self._kill_at, now + g)
        # REAPING / KILLED / SWEEP_KILLED / DONE: already on the way out

    # -- actions ---------------------------------------------------------------

    def next_action(self, now: float) -> Action:
        """What the driver must do now; call again after doing it."""
        if self._pending:
            return self._pending.pop(0)
        phase = self.phase
        d = self.deadlines
        if phase is Phase.RUNNING:
            soft_at = None if d.soft_timeout is None or self.soft_sent else self.started + d.soft_timeout
            hard_at = None if d.timeout is None or math.isinf(d.timeout) else self.started + d.timeout
            if hard_at is not None and now >= hard_at:
                self.timed_out = True
                if self.reason is None:
                    self.reason = "timeout"
                self._term(now)
                self._kill_at = now + self._grace
                self.phase = Phase.TERMINATING
                return self._pending.pop(0)
            if soft_at is not None and now >= soft_at:
                self.soft_sent = True
                return Send(d.soft_signal)
            return Wait(_earliest(soft_at, hard_at))
        if phase is Phase.TERMINATING:
            assert self._kill_at is not None
            if now >= self._kill_at:
                self._kill(now)
                self.phase = Phase.KILLED
                return self._pending.pop(0)
            return Wait(self._kill_at)
        if phase is Phase.KILLED:
            return Wait(None)
        if phase is Phase.REAPING:
            return Reap()
        if phase is Phase.CHECKING:
            return Check()
        if phase is Phase.SWEEPING:
            assert self._kill_at is not None
            if now >= self._kill_at:
                self._sweep_kill(now)
                return self._pending.pop(0)
            return self._check_or_wait(now, self._kill_at)
        if phase is Phase.SWEEP_KILLED:
            assert self._give_up_at is not None
            if now >= self._give_up_at:
                self.abandoned = True
                self.phase = Phase.DONE
                return Done()
            return self._check_or_wait(now, self._give_up_at)
        return Done()

    @property
    def deadline(self) -> float | None:
        """The next time :meth:`next_action` has something to do by the clock alone (``None``: none)."""
        if self._pending:
            return -math.inf
        d = self.deadlines
        if self.phase is Phase.RUNNING:
            if d.timeout is None and d.soft_timeout is None:
                return None  # the common case, asked of every running child: no list, no min
            soft_at = None if d.soft_timeout is None or self.soft_sent else self.started + d.soft_timeout
            hard_at = None if d.timeout is None or math.isinf(d.timeout) else self.started + d.timeout
            return _earliest(soft_at, hard_at)
        if self.phase is Phase.TERMINATING:
            return self._kill_at
        if self.phase in (Phase.REAPING, Phase.CHECKING):
            return -math.inf
        if self.phase in (Phase.SWEEPING, Phase.SWEEP_KILLED):
            end = self._kill_at if self.phase is Phase.SWEEPING else self._give_up_at
            return _earliest(end, self._next_check)
        return None

    # -- internals -------------------------------------------------------------

    def _check_or_wait(self, now: float, end: float) -> Action:
        if self._next_check is None or now >= self._next_check:
            self._next_check = None
            return Check()
        return Wait(min(end, self._next_check))

    def _term(self, now: float) -> None:
        if not self._term_sent:
            self._term_sent = True
            self._pending.append(Send(signal.SIGTERM))

    def _kill(self, now: float) -> None:
        self._kill_sent = True
        self._pending.append(Send(signal.SIGKILL))

    def _sweep_kill(self, now: float) -> None:
        self._kill(now)
        self._give_up_at = now + KILL_WAIT
        self._next_check = now + CHECK_INTERVAL
        self.phase = Phase.SWEEP_KILLED


def _earliest(*times: float | None) -> float | None:
    real = [t for t in times if t is not None]
    return min(real) if real else None
