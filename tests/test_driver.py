"""The batch loop's thread and its hand-off to the reader (spoolparse.runner.driver)."""

from __future__ import annotations

import array
import fcntl
import os
import termios
import threading
from collections.abc import Generator

import pytest

from spoolparse.runner.driver import Driver


def test_items_come_in_order_and_the_loop_runs_ahead_of_a_slow_reader() -> None:
    made = threading.Event()
    rooms: list[int] = []

    def loop() -> Generator[list[int], None, None]:
        yield [0, 1]
        yield []
        yield [2, 3, 4]
        made.set()  # all made before the reader took the second: the loop never waits for it

    d = Driver(loop(), name="t", room_at=1, on_room=lambda: rooms.append(d.waiting))
    assert not d.started and d.take() == 0 and d.started
    assert made.wait(5)
    assert d.waiting == 4
    assert [d.take() for _ in range(4)] == [1, 2, 3, 4]
    assert rooms == [1]  # the take that left one waiting made room, once
    with pytest.raises(StopIteration):
        d.take()


def test_the_loops_exception_reaches_the_reader_after_what_it_made() -> None:
    def loop() -> Generator[list[str], None, None]:
        yield ["a"]
        raise ValueError("the loop failed")

    d = Driver(loop(), name="t", room_at=0, on_room=lambda: None)
    assert d.take() == "a"
    with pytest.raises(ValueError, match="the loop failed"):
        d.take()


def test_join_returns_what_was_not_taken_and_closes_a_loop_never_started() -> None:
    closed: list[bool] = []

    def loop() -> Generator[list[int], None, None]:
        try:
            yield [1]
        finally:
            closed.append(True)

    d = Driver(loop(), name="t", room_at=0, on_room=lambda: None)
    assert d.join() == [] and closed == []  # never started: closing it runs no finally
    go = threading.Event()

    def waits() -> Generator[list[int], None, None]:
        yield [1]
        yield [2]
        go.wait(5)

    d = Driver(waits(), name="t", room_at=0, on_room=lambda: None)
    assert d.take() == 1
    go.set()
    assert d.join() == [2]


def _queued(fd: int) -> int:
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return buf[0]


def test_the_loops_waker_writes_once_until_drained_and_loses_no_wake_made_during_a_drain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from spoolparse.runner import wakeups

    w = wakeups.Waker()
    try:
        for _ in range(100):  # a burst of starts ending: one byte wakes the loop for all of them
            w.wake()
        assert _queued(w.r) == 1
        w.drain()
        assert _queued(w.r) == 0
        w.wake()
        assert _queued(w.r) == 1

        real_read = os.read

        def read_with_a_wake_in_between(fd: int, n: int) -> bytes:
            w.wake()  # another thread's wake while the loop drains: what it changed is looked at after
            return real_read(fd, n)

        monkeypatch.setattr(wakeups.os, "read", read_with_a_wake_in_between)
        w.drain()
        monkeypatch.undo()
        w.wake()  # the next wake must reach the loop however the one during the drain went
        assert _queued(w.r) >= 1
    finally:
        w.close()
