"""A child's process group: signalled, and whether anything of it is still alive.

Every child leads its own group (``start_new_session``); what it starts stays
in that group unless it leaves it (then its cgroup, or the guardian's mark,
still holds it).
"""

from __future__ import annotations

import os

from .proc import proc_stats

__all__ = ["signal_group", "group_alive"]


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; ``False`` when the group is gone.

    Never our own group, nor 0 (``killpg(0)`` is the caller's group): a child
    not yet started has no group to signal.
    """
    if pgid <= 1 or pgid == os.getpgrp():
        return False
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live_members(pgid: int) -> bool:
    """Whether a process other than a zombie is in group ``pgid`` (reads /proc)."""
    return any(
        len(fields) >= 3 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X")
        for _, fields in proc_stats()
    )


def group_alive(pgid: int) -> bool:
    """Whether group ``pgid`` still has a live (non-zombie) process.

    Orphans killed in the group become zombies of PID 1, which may take a
    while to reap them; they hold nothing, so they count as gone.
    """
    if not signal_group(pgid, 0):
        return False
    return _live_members(pgid) if os.path.isdir("/proc") else True
