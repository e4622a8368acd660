"""Reading the cgroup hierarchy: where a process's cgroup is, the limit over it, what a file of it holds.

Read by the cgroups made for children (:mod:`.cgroup`) and by the runner's
host memory probe (:mod:`spoolparse.runner.memory`); nothing here writes.
"""

from __future__ import annotations

import os

__all__ = ["read_int", "stat_field", "v2_dir", "own_cgroup", "enclosing_limit"]

#: cgroup v1 reports "no limit" as a huge number near 2**63.
_UNLIMITED = 1 << 60


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


def stat_field(path: str, key: bytes) -> int | None:
    """The value of ``key`` in a flat-keyed file (``memory.stat``); ``None`` when unreadable or absent."""
    try:
        with open(path, "rb") as f:
            for line in f:
                name, _, value = line.partition(b" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def _cgroup_lines(pid: int | str) -> list[str]:
    """The lines of ``/proc/PID/cgroup`` (``hierarchy:controllers:path``); none when unreadable."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return f.read().splitlines()
    except OSError:
        return []


def v2_dir(pid: int | str = "self", root: str = "/sys/fs/cgroup") -> str | None:
    """Directory of ``pid``'s cgroup in the v2 (unified) hierarchy, or ``None`` when none is mounted."""
    for line in _cgroup_lines(pid):
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
    for line in _cgroup_lines(pid):
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
            stat_field(os.path.join(d, "memory.stat"), b"hierarchical_memory_limit"),
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
