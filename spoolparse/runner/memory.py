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

from .._os.proc import proc_stats

__all__ = ["MemoryProbe", "HostMemory", "own_cgroup", "v2_dir", "enclosing_limit", "sample_trees", "read_int"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: cgroup v1 reports "no limit" as a huge number near 2**63.
_UNLIMITED = 1 << 60


class MemoryProbe(Protocol):
    """What admission asks: the total it may use, and what is used now (bytes)."""

    def total(self) -> int: ...

    def used(self) -> int: ...


def read_int(path: str) -> int | None:
    """An integer file (``max`` reads as ``None``); ``None`` when unreadable."""
    try:
        with open(path, "rb") as f:
            text = f.read().strip()
    except OSError:
        return None
    if text == b"max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat_field(path: str, key: bytes) -> int | None:
    try:
        with open(path, "rb") as f:
            for line in f:
                name, _, value = line.partition(b" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def v2_dir(pid: int | str = "self", root: str = "/sys/fs/cgroup") -> str | None:
    """Directory of ``pid``'s cgroup in the v2 (unified) hierarchy, or ``None`` when none is mounted."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            for base in (root, os.path.join(root, "unified")):
                if os.path.isfile(os.path.join(base, "cgroup.controllers")):
                    d = os.path.normpath(os.path.join(base, path.lstrip("/")))
                    return d if os.path.isdir(d) else None
    return None


def own_cgroup(pid: int | str = "self", root: str = "/sys/fs/cgroup") -> tuple[str, str] | None:
    """``("v2"|"v1", directory)`` of the memory cgroup ``pid`` is in, or ``None`` if there is none.

    The v2 root cgroup counts (it has no ``memory.current`` of its own): a
    process there still makes its task cgroups under it.
    """
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = os.path.join(root, "memory", path.lstrip("/"))
            if os.path.isfile(os.path.join(d, "memory.usage_in_bytes")):
                return "v1", d
    d2 = v2_dir(pid, root)
    if d2 is not None and (
        os.path.isfile(os.path.join(d2, "memory.current")) or _has_memory_controller(d2)
    ):
        return "v2", d2
    return None


def _has_memory_controller(d: str) -> bool:
    try:
        with open(os.path.join(d, "cgroup.controllers")) as f:
            return "memory" in f.read().split()
    except OSError:
        return False


def enclosing_limit(kind: str, d: str) -> tuple[int, str] | None:
    """(limit, directory) of the tightest memory limit over cgroup ``d``: its own or an ancestor's.

    v2 walks up to the root reading each ``memory.max`` (a runner moved into a
    leaf, or started in a child of a limited slice, is still bound by it); v1
    reads ``hierarchical_memory_limit``, which already is that minimum.
    """
    best: tuple[int, str] | None = None
    if kind == "v1":
        for value in (
            read_int(os.path.join(d, "memory.limit_in_bytes")),
            _stat_field(os.path.join(d, "memory.stat"), b"hierarchical_memory_limit"),
        ):
            if value is not None and value < _UNLIMITED and (best is None or value < best[0]):
                best = (value, d)
        return best
    cur = d
    while os.path.isfile(os.path.join(cur, "cgroup.controllers")):
        value = read_int(os.path.join(cur, "memory.max"))
        if value is not None and value < _UNLIMITED and (best is None or value < best[0]):
            best = (value, cur)
        up = os.path.dirname(cur)
        if up == cur:
            break
        cur = up
    return best


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
                inactive = _stat_field(os.path.join(d, "memory.stat"), b"total_inactive_file") or 0
            else:
                usage = read_int(os.path.join(d, "memory.current")) or 0
                inactive = _stat_field(os.path.join(d, "memory.stat"), b"inactive_file") or 0
            return max(0, usage - inactive)
        vm = psutil.virtual_memory()
        return int(vm.total - vm.available)


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid → (ppid, rss bytes) for every process we can read."""
    table: dict[int, tuple[int, int]] = {}
    for pid, fields in proc_stats():
        try:
            table[pid] = (int(fields[1]), int(fields[21]) * _PAGE)
        except (IndexError, ValueError):
            continue
    return table


def sample_trees(roots: Iterable[int]) -> dict[int, int]:
    """Summed RSS of each root's process tree (root included), from one pass over ``/proc``.

    A root that is gone reads 0. Shared pages count once per process, so this
    over-estimates trees that share memory; that errs on the safe side.
    """
    roots = list(roots)
    if not roots:
        return {}
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, int] = {}
    for root in roots:
        total = 0
        stack = [root]
        seen = 0
        while stack and seen < 100_000:
            pid = stack.pop()
            seen += 1
            entry = table.get(pid)
            if entry is None:
                continue
            total += entry[1]
            stack.extend(children.get(pid, ()))
        out[root] = total
    return out
