"""This process's standing with the kernel: the one walker of every ``/proc/*/stat``, and the open-files limit."""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["proc_stats", "pid_gone", "raise_open_files_limit"]


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

