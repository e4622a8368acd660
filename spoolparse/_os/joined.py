"""The joined start: the forking thread steps into the child's cgroups, forks, and steps back.

cgroup v1 places each *thread* (its ``tasks`` file takes a thread id), and a
child is born in the cgroups of the thread that forked it. So a thread that
writes its own id into the ``tasks`` file of each of a child's cgroup
directories, forks and execs the program (``vfork``: no Python runs in the
child, one ``exec``), then writes its id back where it came from, has
started a child that was in its cgroups before it ran anything: what the
gated start's shell does (:mod:`.spawn`), without the shell.

While the thread is in a child's cgroup its process is listed in that
cgroup's ``cgroup.procs`` (v1 lists a process with any thread there): no
kill of a cgroup by us signals ourselves (:meth:`.cgroup.ChildCgroup.kill`,
:func:`.cgroup.destroy`). The memory the thread touches meanwhile stays
charged to our own cgroup (v1 charges an address space's owner, the main
thread: which is why the main thread never makes a joined start, the
spawner thread does it for it), and the fork counts in the child's
``pids.max``, as the child's own would.

cgroup v2 places whole processes (a thread only in a ``threaded`` subtree,
which has no memory controller): there the gated start remains.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

__all__ = ["homes", "joined", "JoinError"]

log = logging.getLogger("spoolparse")

#: Where cgroup v1 hierarchies are mounted (as :mod:`.cgroup` makes its directories).
_ROOT = "/sys/fs/cgroup"


def homes(cgroups: list[str]) -> list[str] | None:
    """For each of ``cgroups`` (v1 directories), the ``tasks`` file of the cgroup the calling thread is in
    within the same hierarchy: where it comes back to. ``None`` when the joined start cannot be used: a
    directory that is not v1 (no ``tasks`` file), a hierarchy not found, or one the thread could not come
    back to (not writable)."""
    if not cgroups:
        return None
    try:
        with open("/proc/thread-self/cgroup") as f:
            mine: dict[str, str] = {}
            for line in f:
                _, controllers, where = line.rstrip("\n").split(":", 2)
                if controllers:
                    mine[controllers] = where
    except (OSError, ValueError):
        return None
    out = []
    for d in cgroups:
        rel = os.path.relpath(d, _ROOT)
        hierarchy = rel.split(os.sep, 1)[0]
        path = mine.get(hierarchy)
        if rel.startswith("..") or path is None or not os.path.isfile(os.path.join(d, "tasks")):
            return None
        home = os.path.join(_ROOT, hierarchy, path.lstrip("/"), "tasks")
        if not os.access(home, os.W_OK):
            return None
        out.append(home)
    return out


class JoinError(OSError):
    """The thread could not join a task's cgroup (its ``filename``: the ``tasks`` file): the start failed before
    any program was run, so nothing about the program is to blame."""


def _move(tasks: str, tid: bytes) -> None:
    fd = os.open(tasks, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, tid)
    finally:
        os.close(fd)


@contextlib.contextmanager
def joined(cgroups: list[str], back: list[str]) -> Iterator[None]:
    """Within the block the calling thread is in ``cgroups`` (what it forks is born there); after it, back in
    ``back`` (from :func:`homes`). Joining raises :class:`OSError` (the thread is back first)."""
    tid = str(threading.get_native_id()).encode()
    moved = 0
    try:
        for d in cgroups:
            tasks = os.path.join(d, "tasks")
            try:
                _move(tasks, tid)
            except OSError as e:
                raise JoinError(e.errno, e.strerror, tasks) from None
            moved += 1
        yield
    finally:
        for tasks in back[:moved]:
            try:
                _move(tasks, tid)
            except OSError as e:  # checked writable beforehand: only a cgroup removed under us gets here
                log.error("cannot move a spawner thread back to %s (%s): it stays in a task's cgroup", tasks, e)
