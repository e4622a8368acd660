"""What this host lets spoolparse use to follow and contain a child: each choice made once, here.

Three questions, each answered by the functions below and nowhere else (as
trio's ``_subprocess_platform`` declares its per-platform pieces once); every
caller asks, and follows the answer with the fallback that goes with it:

===================  ===========================================  ==============================================
question             where the host has it                        elsewhere
===================  ===========================================  ==============================================
a child's exit       a pidfd, readable once it exits              ``waitid(WNOWAIT)`` asked on a schedule
                     (:func:`open_pidfd`; a poll or an event      (:func:`exit_seen`), sleeping between
                     loop sleeps on it)                           (:func:`wait_exit`)
a spool's growth     inotify (:func:`open_inotify`: a watch per   a look on a schedule, with a back-off capped
                     spool, or the process's shared instance in   at :data:`~spoolparse._limits.POLL_IDLE`
                     :class:`~.wait.SpoolWaiter`)
containment          a cgroup of our own per child, v2 else v1    the process group, and the guardian's mark
                     (:func:`placement`, :func:`own_cgroup`)      in the child's environment
===================  ===========================================  ==============================================

Nothing here is policy: which child gets a cgroup, and how long a follower
sleeps, is its driver's.
"""

from __future__ import annotations

import math
import os
import select
import time

from .cgroup import Cgroup, Placement
from .wait import Inotify, open_inotify

__all__ = ["open_pidfd", "exit_seen", "wait_exit", "poll_ms", "open_inotify", "Inotify", "placement", "own_cgroup"]


# -- a child's exit ---------------------------------------------------------------


def open_pidfd(pid: int) -> int:
    """A pidfd of child ``pid`` (readable once it exits), or ``-1`` where the kernel or Python has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1


def exit_seen(pid: int) -> bool:
    """Whether child ``pid`` has exited, without reaping it (its group id stays ours); one reaped elsewhere
    counts as exited."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def wait_exit(pid: int, pidfd: int, timeout: float) -> bool:
    """Block up to ``timeout`` seconds for child ``pid``'s exit (on its pidfd where there is one, else the
    whole time); whether it has exited."""
    if exit_seen(pid):
        return True
    if pidfd >= 0:
        p = select.poll()
        p.register(pidfd, select.POLLIN)
        p.poll(poll_ms(timeout))
    else:
        time.sleep(max(0.0, timeout))
    return exit_seen(pid)


def poll_ms(seconds: float) -> int:
    """A :meth:`select.poll.poll` timeout: milliseconds, rounded up so a wait never ends early."""
    return max(0, math.ceil(seconds * 1000))


# -- containment ------------------------------------------------------------------

_placement: Placement | None = None


def placement(*, fresh: bool = False) -> Placement:
    """Where cgroups of ours can be made here (``kind`` ``None``: nowhere, then a child has its process group
    alone). Probed once per process (making and removing a test cgroup), or again with ``fresh`` (a batch,
    which also removes what a runner that died left behind)."""
    global _placement
    if _placement is None or fresh:
        try:
            _placement = Placement.detect()
        except OSError as e:
            _placement = Placement(None, why=f"cannot probe the cgroup hierarchy: {e.strerror or e}")
    return _placement


def own_cgroup() -> Cgroup | None:
    """A cgroup of our own for one child (no caps), or ``None`` where none can be made (``containment="auto"``)."""
    where = placement()
    if where.kind is None:
        return None
    try:
        return where.create(memory_limit=None, pids_max=None)
    except OSError:
        return None

