"""Which process made a thing named after it, told apart across PID namespaces, and whether it is provably gone.

A task cgroup is named after the runner that made it, so that the next runner can remove it once that runner
is gone. A pid number alone proves nothing: a runner in another PID namespace (a container sharing the cgroup
parent, ``unshare --pid``) has a number that here means another process, or none, and a number is reused once
its process is reaped. So the identity is ``<pid>-<start>-<namespace>``: the pid, the process's start time
(clock ticks after boot, field 22 of ``/proc/PID/stat``, less the offset of the reader's time namespace: a
later holder of the number started later) and the inode of its PID namespace (``/proc/self/ns/pid``).

Its process is gone (:meth:`Survey.gone`) when the namespace is ours and no live process has the pid (a zombie
is dead), or the one that has it started at another time; or when the namespace is another one, we are in the
host's first PID namespace (we see every process there is) and no live process is left in it. Anything else is
not provably gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .._regex import regex

__all__ = ["Identity", "Survey", "identity", "parse"]

#: The inode of the host's first PID namespace (the kernel's ``PROC_PID_INIT_INO``): the one that sees all.
_INIT_PID_NS = 0xEFFFFFFC
_PATTERN = regex(r"(\d+)-(\d+)-(\d+)")


@dataclass(frozen=True)
class Identity:
    """A process as seen by the kernel's PID namespaces: its pid there, when it started, which namespace."""

    pid: int
    start: int
    namespace: int

    def __str__(self) -> str:
        return f"{self.pid}-{self.start}-{self.namespace}"


def _start_time(pid: int | str) -> int | None:
    """Field 22 of ``/proc/PID/stat`` (clock ticks after boot) on the host's clock; ``None`` when there is no
    such process, or only its zombie (dead, waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2 :].split()
        return None if fields[0] in (b"Z", b"X") else int(fields[19]) - _boot_offset()
    except (OSError, ValueError, IndexError):
        return None


_offset: tuple[int, int] = (0, 0)


def _boot_offset() -> int:
    """Our time namespace's boot time offset in clock ticks (0 without one): the kernel adds the reader's to the
    start times it shows, so two readers in different time namespaces compare them once each takes off its own."""
    global _offset
    pid = os.getpid()
    if _offset[0] != pid:
        ticks = 0
        try:
            with open("/proc/self/timens_offsets", "rb") as f:
                for line in f:
                    clock, secs, nsecs = line.split()
                    if clock in (b"boottime", b"7"):  # by name, or by clock id (CLOCK_BOOTTIME) on older kernels
                        ticks = (int(secs) * 10**9 + int(nsecs)) * os.sysconf("SC_CLK_TCK") // 10**9
        except (OSError, ValueError):
            pass
        _offset = (pid, ticks)
    return _offset[1]


def _namespace(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


_mine: tuple[int, Identity | None] = (0, None)


def identity() -> Identity | None:
    """This process's identity (``None`` where ``/proc`` cannot tell it); read once per process."""
    global _mine
    pid = os.getpid()
    if _mine[0] != pid:  # a forked child is someone else
        start, ns = _start_time("self"), _namespace("self")
        _mine = (pid, Identity(pid, start, ns) if start is not None and ns is not None else None)
    return _mine[1]


def parse(text: str) -> Identity | None:
    """The identity spelled out by ``str(Identity)`` (``None``: not one)."""
    m = _PATTERN.fullmatch(text)
    return Identity(int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


class Survey:
    """Answers whether processes are provably gone, reading ``/proc`` once for all the namespaces asked about."""

    def __init__(self) -> None:
        self._me = identity()
        # /proc is our namespace's: its numbers and start times are ours to compare (not a host /proc seen from
        # a container that did not mount its own)
        try:
            self._own_proc = os.readlink("/proc/self") == str(os.getpid())
        except OSError:
            self._own_proc = False
        self._scanned = False
        self._alive_namespaces: set[int] | None = None  # None: some process's namespace could not be read

    def gone(self, who: Identity) -> bool:
        """Whether ``who`` is provably gone (``False`` for ourselves, and when it cannot be told)."""
        me = self._me
        if me is None or not self._own_proc or who == me:
            return False
        if who.namespace == me.namespace:
            if not _pid_taken(who.pid):
                return True
            return _start_time(who.pid) != who.start
        if me.namespace != _INIT_PID_NS:
            return False  # another namespace, seen from one that does not see all: no evidence either way
        if not self._scanned:
            self._scanned, self._alive_namespaces = True, _namespaces_in_use()
        return self._alive_namespaces is not None and who.namespace not in self._alive_namespaces


def _pid_taken(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone's, alive
    return True


def _namespaces_in_use() -> set[int] | None:
    """The PID namespaces that hold a process now (a process gone while read is skipped); ``None`` when the
    namespace of a process could not be read (another user's, not being root): then no namespace is proven empty."""
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if name.isdigit() and _start_time(name) is not None:  # a zombie holds a namespace, not a live process
            try:
                found.add(os.stat(f"/proc/{name}/ns/pid").st_ino)
            except FileNotFoundError:
                continue
            except OSError:
                # not ours to look at (no CAP_SYS_PTRACE over it): its status still says how deep it is
                depth = _depth(name)
                if depth is None or depth > 1:
                    return None
                found.add(_INIT_PID_NS)  # in the first namespace, so in no other
    return found


def _depth(pid: str) -> int | None:
    """How many PID namespaces ``pid`` has a number in (``NSpid`` of ``/proc/PID/status``): 1 in the first
    namespace; ``None`` when unreadable (or gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        return None
    return None
