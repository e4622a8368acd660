"""How much memory there is and how much is used, and what a process tree holds.

Inside a memory-limited cgroup the total is the cgroup's limit, not the
host's: :mod:`psutil` reports the host's, and a runner trusting it gets the
container OOM-killed. Tree RSS comes from one pass over ``/proc`` per sample,
whatever the number of trees.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Protocol

import psutil

from .._os.cgroupfs import enclosing_limit, own_cgroup, read_int, stat_field
from .._os.proc import proc_stats

__all__ = ["MemoryProbe", "HostMemory", "sample_trees"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class MemoryProbe(Protocol):
    """What admission asks: the total it may use, and what is used now (bytes)."""

    def total(self) -> int: ...

    def used(self) -> int: ...


class HostMemory:
    """The real probe: the tightest memory limit over our cgroup and that cgroup's usage, else the host's.

    Usage of a cgroup excludes its inactive file cache (reclaimable), like
    the kernel's own OOM accounting does.

    .. seealso:: :class:`MemoryProbe`
    """

    def __init__(self) -> None:
        self.cgroup = own_cgroup()
        self._host_total = int(psutil.virtual_memory().total)
        self._limit: int | None = None
        self._where: str | None = None
        if self.cgroup is not None:
            found = enclosing_limit(*self.cgroup)
            if found is not None and found[0] < self._host_total:
                self._limit, self._where = found

    @property
    def source(self) -> str:
        """``cgroup2``, ``cgroup1`` or ``host``: where the total comes from."""
        if self._limit is not None and self.cgroup is not None:
            return "cgroup2" if self.cgroup[0] == "v2" else "cgroup1"
        return "host"

    @property
    def where(self) -> str | None:
        """The cgroup directory whose limit is the total (``None``: the host's RAM)."""
        return self._where

    def total(self) -> int:
        return self._limit if self._limit is not None else self._host_total

    def used(self) -> int:
        if self._where is not None and self.cgroup is not None:
            d = self._where
            if self.cgroup[0] == "v1":
                usage = read_int(os.path.join(d, "memory.usage_in_bytes")) or 0
                inactive = stat_field(os.path.join(d, "memory.stat"), b"total_inactive_file") or 0
            else:
                usage = read_int(os.path.join(d, "memory.current")) or 0
                inactive = stat_field(os.path.join(d, "memory.stat"), b"inactive_file") or 0
            return max(0, usage - inactive)
        vm = psutil.virtual_memory()
        return int(vm.total - vm.available)


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid → (ppid, session id, rss bytes) for every process we can read."""
    table: dict[int, tuple[int, int, int]] = {}
    for pid, fields in proc_stats():
        try:
            table[pid] = (int(fields[1]), int(fields[3]), int(fields[21]) * _PAGE)
        except (IndexError, ValueError):
            continue
    return table


def sample_trees(roots: Iterable[int]) -> dict[int, int]:
    """Summed RSS of each root's processes, from one pass over ``/proc``: its process tree (root included) and,
    where the root leads a session (every child spoolparse starts does), every process of that session and
    their trees.

    The session is what a double fork keeps: the grandchild a subshell leaves behind is reparented out of the
    tree (to init, or a subreaper), not out of its session. A root that is gone reads what its session still
    holds (a session's id is not reused while it has a member), else 0. Shared pages count once per process,
    so this over-estimates trees that share memory; that errs on the safe side.
    """
    roots = list(roots)
    if not roots:
        return {}
    table = _proc_table()
    children: dict[int, list[int]] = {}
    sessions: dict[int, list[int]] = {}
    for pid, (ppid, sid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
        sessions.setdefault(sid, []).append(pid)
    out: dict[int, int] = {}
    for root in roots:
        total = 0
        stack = [root, *sessions.get(root, ())]  # a session's id is its leader's pid
        seen: set[int] = set()
        while stack and len(seen) < 100_000:
            pid = stack.pop()
            entry = table.get(pid)
            if entry is None or pid in seen:
                continue
            seen.add(pid)
            total += entry[2]
            stack.extend(children.get(pid, ()))
        out[root] = total
    return out
