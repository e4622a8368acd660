"""The child lifecycle state machine, driven by a fake clock and a simulated child (no sleeps)."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field

import pytest

from spoolparse._os.lifecycle import (
    CHECK_INTERVAL,
    KILL_WAIT,
    Check,
    Deadlines,
    Done,
    Lifecycle,
    Phase,
    Reap,
    Send,
    Wait,
    check_times,
)

TERM, KILL, USR1 = signal.SIGTERM, signal.SIGKILL, signal.SIGUSR1


@dataclass
class Sim:
    """A child and its leftovers as the driver sees them, and a log of what the machine did.

    ``exit_at``: when the leader exits by itself; ``dies_on``: the signals that end
    the leader; ``leftover_dies_on``: those that end what it left behind (empty: unkillable).
    """

    exit_at: float = math.inf
    dies_on: frozenset[int] = frozenset({TERM, KILL})
    leftovers: bool = False
    leftover_dies_on: frozenset[int] = frozenset({TERM, KILL})
    now: float = 0.0
    log: list[tuple[float, str]] = field(default_factory=list)

    def run(
        self, life: Lifecycle, *, until: float = 1e6, stop_at: float | None = None, grace: float | None = None
    ) -> None:
        while True:
            if stop_at is not None and self.now >= stop_at:
                life.stop(self.now, "cancelled", grace=grace)
                self.log.append((self.now, "stop"))
                stop_at = None
            if not life.leader_exited and self.now >= self.exit_at:
                life.exited(self.now)
            action = life.next_action(self.now)
            if isinstance(action, Send):
                self.log.append((self.now, signal.Signals(action.sig).name))
                if action.sig in self.dies_on:
                    self.exit_at = min(self.exit_at, self.now)
                if action.sig in self.leftover_dies_on:
                    self.leftovers = False
            elif isinstance(action, Reap):
                self.log.append((self.now, "reap"))
                life.reaped(self.now, 0)
            elif isinstance(action, Check):
                life.checked(self.now, leftovers=self.leftovers)
            elif isinstance(action, Wait):
                nxt = [t for t in (action.until, self.exit_at, stop_at) if t is not None and t > self.now]
                assert action.until is None or action.until >= self.now
                assert nxt, "waits forever"
                self.now = min(nxt)
                assert self.now <= until
            else:
                assert isinstance(action, Done)
                self.log.append((self.now, "done"))
                return


def test_exits_alone_no_timeout() -> None:
    sim = Sim(exit_at=3.0)
    life = Lifecycle(Deadlines(timeout=None), started=0.0)
    assert life.next_action(0.0) == Wait(None)
    sim.run(life)
    assert sim.log == [(3.0, "reap"), (3.0, "done")]
    assert not life.timed_out and life.reason is None and life.returncode == 0 and life.done


def test_timeout_term_then_exit_within_grace() -> None:
    sim = Sim()
    life = Lifecycle(Deadlines(timeout=10, grace=5), started=100.0)
    assert life.deadline == 110.0
    sim.now = 100.0
    sim.run(life)
    assert sim.log == [(110.0, "SIGTERM"), (110.0, "reap"), (110.0, "done")]
    assert life.timed_out and life.reason == "timeout"


def test_timeout_kill_after_grace_when_term_is_ignored() -> None:
    sim = Sim(dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(timeout=10, grace=5), started=0.0)
    sim.run(life)
    assert sim.log == [(10.0, "SIGTERM"), (15.0, "SIGKILL"), (15.0, "reap"), (15.0, "done")]


def test_zero_grace_kills_right_after_term() -> None:
    sim = Sim(dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(timeout=1, grace=0), started=0.0)
    sim.run(life)
    assert sim.log[:2] == [(1.0, "SIGTERM"), (1.0, "SIGKILL")]


def test_soft_signal_once_then_hard_timeout() -> None:
    sim = Sim(dies_on=frozenset({TERM}))
    life = Lifecycle(Deadlines(timeout=10, grace=5, soft_timeout=4, soft_signal=USR1), started=0.0)
    assert life.deadline == 4.0
    sim.run(life)
    assert sim.log[:2] == [(4.0, "SIGUSR1"), (10.0, "SIGTERM")]
    assert life.soft_sent and life.timed_out


def test_soft_signal_may_end_the_child() -> None:
    sim = Sim(dies_on=frozenset({USR1}))
    life = Lifecycle(Deadlines(timeout=10, soft_timeout=4, soft_signal=USR1), started=0.0)
    sim.run(life)
    assert sim.log == [(4.0, "SIGUSR1"), (4.0, "reap"), (4.0, "done")]
    assert life.soft_sent and not life.timed_out


def test_leftovers_after_a_normal_exit_get_term_then_kill() -> None:
    sim = Sim(exit_at=2.0, leftovers=True, leftover_dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(grace=3), started=0.0)
    sim.run(life)
    assert sim.log == [(2.0, "reap"), (2.0, "SIGTERM"), (5.0, "SIGKILL"), (5.0 + CHECK_INTERVAL, "done")]
    assert not life.abandoned


def test_leftovers_that_go_on_term_end_the_sweep_at_the_next_check() -> None:
    sim = Sim(exit_at=2.0, leftovers=True)
    life = Lifecycle(Deadlines(grace=3), started=0.0)
    sim.run(life)
    assert sim.log == [(2.0, "reap"), (2.0, "SIGTERM"), (2.0 + CHECK_INTERVAL, "done")]


def test_leftovers_are_checked_at_intervals_during_the_sweep() -> None:
    life = Lifecycle(Deadlines(grace=3), started=0.0)
    life.exited(1.0)
    assert life.next_action(1.0) == Reap()
    life.reaped(1.0, -9)
    assert life.next_action(1.0) == Check()
    life.checked(1.0, leftovers=True)
    assert life.next_action(1.0) == Send(TERM)
    assert life.next_action(1.0) == Wait(1.0 + CHECK_INTERVAL)
    assert life.next_action(1.0 + CHECK_INTERVAL) == Check()
    life.checked(1.0 + CHECK_INTERVAL, leftovers=False)
    assert life.next_action(1.5) == Done() and life.returncode == -9


def test_unkillable_leftovers_are_given_up_after_kill_wait() -> None:
    sim = Sim(exit_at=0.0, leftovers=True, leftover_dies_on=frozenset())
    life = Lifecycle(Deadlines(grace=1), started=0.0)
    sim.run(life)
    assert sim.log == [(0.0, "reap"), (0.0, "SIGTERM"), (1.0, "SIGKILL"), (1.0 + KILL_WAIT, "done")]
    assert life.abandoned


def test_leftovers_after_a_timeout_keep_the_timeouts_grace() -> None:
    # the leader goes on TERM, its leftovers ignore TERM: KILL at TERM + grace, no second grace
    sim = Sim(leftovers=True, leftover_dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(timeout=10, grace=5), started=0.0)
    sim.run(life)
    assert sim.log == [(10.0, "SIGTERM"), (10.0, "reap"), (15.0, "SIGKILL"), (15.0 + CHECK_INTERVAL, "done")]


def test_leftovers_after_kill_get_kill_again_and_no_grace() -> None:
    sim = Sim(dies_on=frozenset({KILL}), leftovers=True, leftover_dies_on=frozenset())
    life = Lifecycle(Deadlines(timeout=1, grace=1), started=0.0)
    sim.run(life)
    assert sim.log == [(1.0, "SIGTERM"), (2.0, "SIGKILL"), (2.0, "reap"), (2.0, "SIGKILL"), (2.0 + KILL_WAIT, "done")]


def test_stop_uses_its_own_shorter_grace() -> None:
    sim = Sim(dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(timeout=100, grace=5), started=0.0)
    sim.run(life, stop_at=7.0, grace=0.5)
    assert sim.log == [(7.0, "stop"), (7.0, "SIGTERM"), (7.5, "SIGKILL"), (7.5, "reap"), (7.5, "done")]
    assert life.reason == "cancelled" and not life.timed_out


def test_stop_with_zero_grace_kills_right_after_term() -> None:
    sim = Sim(dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(grace=5), started=0.0)
    sim.run(life, stop_at=1.0, grace=0)
    assert sim.log[:3] == [(1.0, "stop"), (1.0, "SIGTERM"), (1.0, "SIGKILL")]


def test_stop_during_a_timeouts_grace_shortens_it() -> None:
    sim = Sim(dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(timeout=1, grace=10), started=0.0)
    sim.run(life, stop_at=2.0, grace=0.5)
    assert sim.log == [(1.0, "SIGTERM"), (2.0, "stop"), (2.5, "SIGKILL"), (2.5, "reap"), (2.5, "done")]
    assert life.reason == "timeout"  # the first reason stays


def test_stop_during_a_sweep_shortens_it() -> None:
    sim = Sim(exit_at=0.0, leftovers=True, leftover_dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(grace=10), started=0.0)
    sim.run(life, stop_at=1.0, grace=0.5)
    assert (1.5, "SIGKILL") in sim.log


def test_stop_longer_than_the_running_grace_does_not_extend_it() -> None:
    sim = Sim(dies_on=frozenset({KILL}))
    life = Lifecycle(Deadlines(timeout=1, grace=1), started=0.0)
    sim.run(life, stop_at=1.5, grace=10)
    assert (2.0, "SIGKILL") in sim.log


def test_stop_after_done_does_nothing() -> None:
    sim = Sim(exit_at=1.0)
    life = Lifecycle(Deadlines(), started=0.0)
    sim.run(life)
    life.stop(2.0, "cancelled")
    assert life.next_action(2.0) == Done()


def test_exit_seen_while_killed_is_reaped() -> None:
    life = Lifecycle(Deadlines(), started=0.0)
    life.stop(0.0, "cancelled", grace=0)
    assert life.next_action(0.0) == Send(TERM)
    assert life.next_action(0.0) == Send(KILL)
    assert life.next_action(0.0) == Wait(None) and life.deadline is None
    life.exited(0.1)
    assert life.deadline == -math.inf
    assert life.next_action(0.1) == Reap()


def test_deadline_tracks_what_is_due() -> None:
    life = Lifecycle(Deadlines(timeout=10, grace=2), started=0.0)
    assert life.deadline == 10.0
    assert isinstance(life.next_action(10.0), Send)
    assert life.deadline == 12.0 and life.phase is Phase.TERMINATING
    assert life.next_action(12.0) == Send(KILL)
    assert life.deadline is None and life.phase is Phase.KILLED


def test_infinite_timeout_is_none() -> None:
    life = Lifecycle(Deadlines(timeout=math.inf), started=0.0)
    assert life.next_action(1e300) == Wait(None)


@pytest.mark.parametrize(
    ("timeout", "grace", "soft"),
    [(-1.0, 1.0, None), (math.nan, 1.0, None), (1.0, math.nan, None), (1.0, math.inf, None), (1.0, -0.1, None),
     (1.0, 1.0, math.nan)],
)
def test_bad_times_are_refused(timeout: float, grace: float, soft: float | None) -> None:
    with pytest.raises(ValueError):
        check_times(timeout, grace, soft)
    with pytest.raises(ValueError):
        Deadlines(timeout=timeout, grace=grace, soft_timeout=soft)


def test_a_memory_kill_is_kill_at_once_with_no_term() -> None:
    for timeout in (None, 1.0):  # running, or already in a timeout's grace
        life = Lifecycle(Deadlines(timeout=timeout, grace=10), started=0.0)
        first = life.next_action(2.0)
        if timeout is not None:
            assert first == Send(signal.SIGTERM)
        life.stop(2.0, "killed_memory", kill=True)
        assert life.next_action(2.0) == Send(signal.SIGKILL)
        assert life.next_action(2.0) == Wait(None)  # then the leader's exit
        assert life.reason == ("timeout" if timeout is not None else "killed_memory")
