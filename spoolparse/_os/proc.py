"""This process's standing with the kernel: the one walker of every ``/proc/*/stat``, the open-files limit, and
whose a reaped child's peak memory is."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator

__all__ = ["proc_stats", "pid_gone", "raise_open_files_limit", "own_peak"]


def proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """``(pid, fields)`` for every process we can read; ``fields`` start at the state.

    So ``fields[0]`` is the state, ``[1]`` the parent pid, ``[2]`` the process
    group, ``[21]`` the RSS in pages (``man 5 proc`` numbering less 3).
    Processes that vanish while we read are skipped.
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        # os.open and one read: a file object would add an fstat, an ioctl and two lseeks per process,
        # and a batch walks every process once a second
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            data = os.read(fd, 4096)  # one line, well under a page
        except OSError:
            continue
        finally:
            os.close(fd)
        # the command name may hold spaces and parentheses: split after the last ')'
        yield int(name), data[data.rfind(b")") + 2 :].split()


def pid_gone(pid: int) -> bool:
    """Whether no process has ``pid`` (one we may not signal is someone's, alive). What leaves a directory
    named after its process (a task cgroup, a spool placement) to whoever finds it once that process is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def raise_open_files_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one; returns the soft limit now in force.

    Each running child holds two spools, a pidfd and an eventfd here: a
    thousand agents need several thousand descriptors, and the soft limit is
    often 1,024 while the hard one is far higher. Children inherit the
    raised limit (descriptor numbers only matter to programs that use
    ``select``, and theirs start low).
    """
    try:
        import resource
    except ImportError:  # not a POSIX system
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def own_peak(maxrss: int) -> int:
    """A reaped child's ``ru_maxrss`` (bytes) when it is the child's own, else 0 (unknown).

    The kernel starts a process's figure at the high-water mark of the memory its ``exec`` replaced: for a
    child started by ``vfork`` or ``fork``, ours. A figure no larger than our own peak may so be ours (from a
    parent of 300 MiB a ``true`` reported 311 MiB), never the child's alone; above it, it is the child's (or a
    descendant's it waited for). Our own ``ru_maxrss`` began the same way, at our parent's mark: when it is
    above our memory's own (``VmHWM``), that one is the figure to pass."""
    global _peak_known_own
    ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if maxrss > ours:
        return maxrss
    if _peak_known_own != ours:  # not known to be ours alone: our own mark (read only while they differ)
        hwm = _high_water_mark()
        if hwm is None or hwm >= ours:
            _peak_known_own = ours  # the same figure: ours alone from now on (it only grows)
        elif maxrss > hwm:
            return maxrss
    return 0


#: Our ``ru_maxrss`` (bytes) when it was last found to be our own memory's, not our parent's.
_peak_known_own = -1


def _high_water_mark() -> int | None:
    """This process's own resident high-water mark (``VmHWM``, bytes), ``None`` where there is none to read."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
