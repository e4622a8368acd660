"""What the host offers a follower is answered in one place (spoolparse._os.capabilities), with its fallback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spoolparse._os import capabilities
from spoolparse._os.cgroup import Placement


def _child(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def test_a_child_s_exit_is_seen_through_its_pidfd_or_waitid_without_reaping_it() -> None:
    p = _child(0.3)
    fd = capabilities.open_pidfd(p.pid)
    try:
        assert not capabilities.exit_seen(p.pid)
        assert capabilities.wait_exit(p.pid, fd, 30.0)  # wakes at the exit (the pidfd), not after 30 s
        assert capabilities.exit_seen(p.pid)
        assert os.path.exists(f"/proc/{p.pid}")  # seen, not reaped: a zombie, its group id still ours
        assert p.wait(timeout=5) == 0
    finally:
        if fd >= 0:
            os.close(fd)


def test_without_a_pidfd_the_wait_sleeps_its_time_and_asks_again() -> None:
    p = _child(0.05)
    try:
        assert capabilities.wait_exit(p.pid, -1, 0.5)  # no pidfd: a sleep, then waitid tells
    finally:
        p.wait(timeout=5)


def test_a_pid_we_cannot_open_gets_no_pidfd() -> None:
    p = _child(0)
    p.wait(timeout=5)
    assert capabilities.open_pidfd(p.pid) == -1  # reaped: nothing to open


@pytest.mark.parametrize(("seconds", "ms"), [(0.0, 0), (0.0001, 1), (0.25, 250), (-1.0, 0), (1.0005, 1001)])
def test_poll_timeouts_are_rounded_up_never_cut_short(seconds: float, ms: int) -> None:
    assert capabilities.poll_ms(seconds) == ms


def test_the_placement_is_probed_once_unless_asked_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[int] = []

    def detect(cls: type[Placement]) -> Placement:
        probes.append(1)
        return cls(None, why="none here")

    monkeypatch.setattr(Placement, "detect", classmethod(detect))
    monkeypatch.setattr(capabilities, "_placement", None)
    assert capabilities.placement().kind is None
    assert capabilities.placement().why == "none here" and len(probes) == 1
    capabilities.placement(fresh=True)
    assert len(probes) == 2
    assert capabilities.own_cgroup() is None  # nowhere to make one: the process group alone


def test_a_probe_that_fails_means_no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    def detect(cls: type[Placement]) -> Placement:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Placement, "detect", classmethod(detect))
    monkeypatch.setattr(capabilities, "_placement", None)
    where = capabilities.placement()
    assert where.kind is None and "Permission denied" in where.why
    assert capabilities.own_cgroup() is None
