"""Shared helpers for the runner tests: fixtures' paths, fake memory probes, leftover checks."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from spoolparse.runner import Outcome

ROOT = Path(__file__).resolve().parent.parent
HOG = [sys.executable, str(ROOT / "fixtures" / "mem_hog.py")]
FAKE_CODEX = [sys.executable, str(ROOT / "fixtures" / "fake_codex.py")]
MiB = 1 << 20


def one_each(outcomes: Iterable[Outcome], ids: Iterable[str]) -> dict[str, Outcome]:
    """Exactly one outcome per expected id, and no other; returns them by id."""
    outs = list(outcomes)
    counts = Counter(o.id for o in outs)
    dupes = {k: v for k, v in counts.items() if v != 1}
    assert not dupes, f"ids with more than one outcome: {dupes}"
    assert set(counts) == set(ids), f"missing {set(ids) - set(counts)}, extra {set(counts) - set(ids)}"
    return {o.id: o for o in outs}


class TreeProbe:
    """Used memory = summed RSS of this test process's descendants (plus ``extra``), over a fake total.

    Records the largest value it reported, to check what a batch allowed.
    """

    def __init__(self, total: int, extra: int = 0) -> None:
        self._total = total
        self.extra = extra
        self.max_seen = 0
        self.me = psutil.Process()
        self.own_cmdline = self.me.cmdline()

    def total(self) -> int:
        return self._total

    def used(self) -> int:
        n = self.extra
        for p in self.me.children(recursive=True):
            try:
                # a child between fork and exec is still a copy of this test process: not a hog yet
                if p.cmdline() == self.own_cmdline:
                    continue
                n += p.memory_info().rss
            except psutil.Error:
                continue
        self.max_seen = max(self.max_seen, n)
        return n


class FixedProbe:
    """A probe reporting what the test sets."""

    def __init__(self, total: int, used: int = 0) -> None:
        self._total = total
        self.value = used

    def total(self) -> int:
        return self._total

    def used(self) -> int:
        return self.value


def marker() -> tuple[str, dict[str, str]]:
    """A unique token and an env adding it: every descendant inherits it, even escaped ones."""
    token = uuid.uuid4().hex
    return token, {"SPOOLPARSE_TEST_MARK": token}


def _live(proc_file: str, matches: Callable[[bytes], bool]) -> list[int]:
    """Live (non-zombie) processes whose ``/proc/PID/<proc_file>`` ``matches``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/{proc_file}", "rb") as f:
                if not matches(f.read()):
                    continue
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def marked_pids(token: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``token``."""
    needle = f"SPOOLPARSE_TEST_MARK={token}".encode()
    return _live("environ", lambda env: needle in env.split(b"\0"))


def wait_for(cond: Callable[[], object], timeout: float = 30.0) -> bool:
    """Whether ``cond()`` came true within ``timeout`` seconds (looked at every 50 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def wait_gone(token: str, timeout: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = marked_pids(token)
        if not left:
            return []
        time.sleep(0.05)
    return marked_pids(token)


def our_cgroups() -> list[str]:
    """Child cgroup directories this process made that still exist."""
    from spoolparse._os.cgroup import Placement

    where = Placement.detect()
    found = []
    for parent in {where.memory_parent, where.pids_parent} - {None}:
        assert parent is not None
        for name in os.listdir(parent):
            if name.startswith(f"spoolparse-{os.getpid()}-"):
                found.append(os.path.join(parent, name))
    return found


def escapee_tag() -> str:
    """A unique argument for ``sleep``: the way to find a process that cleared its environment (no mark)."""
    return f"9{uuid.uuid4().int % 10**6:06d}.5"


def sleeping(tag: str) -> list[int]:
    """Live (non-zombie) ``sleep TAG`` processes."""
    want = b"sleep\0" + tag.encode() + b"\0"
    return _live("cmdline", want.__eq__)


def escaping(tag: str, then: str = "", started: str | os.PathLike[str] | None = None) -> list[str]:
    """A task's argv that starts ``sleep TAG`` out of its session with an empty environment (no mark of any
    kind on it: what ``sudo`` on a command that daemonizes does), then runs ``then``. With ``started``, that
    file gets the sleep's pid before it runs, and the task goes on only once it has."""
    answer = '{"type":"result","result":"done"}'
    if started is None:
        return ["sh", "-c", f"setsid -f env -i sleep {tag}; echo '{answer}'; {then}"]
    f = os.fspath(started)
    escape = f"echo $$ > {f}.part && mv {f}.part {f}; exec env -i sleep {tag}"
    return ["sh", "-c", f"setsid -f sh -c '{escape}'; while [ ! -e {f} ]; do sleep 0.05; done; echo '{answer}'; {then}"]
