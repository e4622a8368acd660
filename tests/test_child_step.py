"""Child.step: the one way every driver follows a child (read within a budget, check the spool, stop it if full,
advance its lifecycle). Real processes; the drivers' own behaviour is tested with each of them."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from spoolparse._os.lifecycle import Done, Wait
from spoolparse.child import LOOK, Budget, Child

LINE = b'{"type":"item.completed","item":{"type":"agent_message","text":"hello"}}\n'


def _writer(count: int, then_sleep: float = 0.0) -> list[str]:
    code = (f"import sys, time; sys.stdout.buffer.write({LINE!r} * {count}); sys.stdout.flush(); "
            f"time.sleep({then_sleep})")
    return [sys.executable, "-c", code]


def _wait_written(child: Child, size: int) -> None:
    deadline = time.monotonic() + 30
    while child.stdout.seek(0, 2) < size:
        assert time.monotonic() < deadline, "the child never wrote"
        time.sleep(0.01)


def _finish(child: Child) -> None:
    child.kill_now()
    child.close()


def test_a_step_reads_no_more_than_its_budget_and_says_what_to_wait_for() -> None:
    child = Child(_writer(1000, then_sleep=30), timeout=20.0, containment=None)
    try:
        _wait_written(child, 1000 * len(LINE))
        first = child.step(time.monotonic(), Budget(10 * len(LINE)))
        assert first.read == 10 * len(LINE) and len(first.events) == 10
        assert isinstance(first.action, Wait) and first.until is not None  # the timeout, by the clock
        assert first.until == pytest.approx(child.started + 20.0)
        by_events = child.step(time.monotonic(), Budget(1 << 20, time.monotonic() + 5, events=3))
        assert 3 <= len(by_events.events) < 1000  # a slice's events past the bound at most
        rest = child.step(time.monotonic(), Budget(1 << 20))
        assert child.offset == 1000 * len(LINE) and rest.read == child.offset - first.read - by_events.read
        assert child.step(time.monotonic(), Budget(1 << 20)).read == 0  # caught up
    finally:
        _finish(child)


def test_a_look_checks_the_cap_and_stops_the_child_a_step_without_one_does_not() -> None:
    child = Child(_writer(2000, then_sleep=30), max_spool_bytes=4096, containment=None, grace=5.0)
    try:
        _wait_written(child, 2000 * len(LINE))
        child.step(time.monotonic())  # no look at the spool: a step for an exit or a deadline only
        assert child.spool_full is None and child.life.reason is None
        looked = child.step(time.monotonic(), LOOK)
        assert looked.read == 0 and child.spool_full is not None and "4096" in child.spool_full
        assert child.life.reason == "spool full"  # TERM, then KILL at once (no grace for a full spool)
        while not isinstance(child.step(time.monotonic()).action, Done):
            time.sleep(0.01)
        assert child.returncode in (-signal.SIGTERM, -signal.SIGKILL)
    finally:
        _finish(child)


def test_a_step_takes_what_the_driver_saw_of_the_exit() -> None:
    child = Child(_writer(1), containment=None)
    try:
        child.wait_exit(30)
        assert child.exited()
        child.step(time.monotonic(), exited=False)  # its poll saw no exit yet: the kernel is not asked
        assert not child.life.leader_exited
        child.step(time.monotonic(), exited=True)  # it saw one: reaped in this step, and swept
        assert child.life.leader_exited and child.returncode == 0
    finally:
        _finish(child)
    asked = Child(_writer(1), containment=None)
    try:
        asked.wait_exit(30)
        asked.step(time.monotonic())  # nothing said: the step asks (waitid)
        assert asked.life.leader_exited
    finally:
        _finish(asked)
