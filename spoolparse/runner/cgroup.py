"""A cgroup per child: memory cap, pids cap, exact peak, and a kill that reaches escaped processes.

The child joins its cgroup in ``preexec_fn`` (after fork, before exec), so
even what it forks first is covered. Order of preference: a cgroup v2 child
of our own cgroup (``memory.max``, ``memory.high`` at 75 %,
``memory.swap.max`` 0, ``pids.max``), then cgroup v1 children of our own
``memory`` and ``pids`` cgroups. Directories are named
``spoolparse-<our pid>-<n>`` and removed when the child's processes are gone;
ones left by a runner that died are removed by the next one.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import time
from collections.abc import Callable

from .memory import own_cgroup, read_int

__all__ = ["Placement", "ChildCgroup"]

_ROOT = "/sys/fs/cgroup"
_NAME = re.compile(r"^spoolparse-(\d+)-\d+$")
_seq = itertools.count(1)


def _own_v1(controller: str) -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controller in controllers.split(","):
                    d = os.path.join(_ROOT, controller, path.lstrip("/"))
                    return d if os.path.isdir(d) else None
    except OSError:
        return None
    return None


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _rmdir_stale(parent: str) -> None:
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        m = _NAME.match(name)
        if m is None or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        d = os.path.join(parent, name)
        for pid in _procs(d):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.rmdir(d)


def _procs(d: str) -> list[int]:
    try:
        with open(os.path.join(d, "cgroup.procs"), "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


class Placement:
    """Where child cgroups can be made on this host (``kind`` is ``v2``, ``v1`` or ``None``).

    .. seealso:: :class:`ChildCgroup`
    """

    def __init__(self, kind: str | None, memory_parent: str | None = None, pids_parent: str | None = None) -> None:
        self.kind = kind
        self.memory_parent = memory_parent
        self.pids_parent = pids_parent

    @classmethod
    def detect(cls) -> Placement:
        """Probe by making (and removing) a test cgroup; ``kind`` is ``None`` when neither works."""
        own = own_cgroup()
        if own is not None and own[0] == "v2" and cls._try(own[1], "memory.max"):
            return cls("v2", own[1], own[1])
        mem = _own_v1("memory")
        if mem is not None and cls._try(mem, "memory.limit_in_bytes"):
            pids = _own_v1("pids")
            if pids is not None and not cls._try(pids, "pids.max"):
                pids = None
            return cls("v1", mem, pids)
        return cls(None)

    @staticmethod
    def _try(parent: str, knob: str) -> bool:
        if not os.access(parent, os.W_OK):
            return False
        _rmdir_stale(parent)
        d = os.path.join(parent, f"spoolparse-{os.getpid()}-0")
        try:
            os.mkdir(d)
        except FileExistsError:
            pass
        except OSError:
            return False
        try:
            return os.path.isfile(os.path.join(d, knob))
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(d)

    def create(self, *, memory_limit: int | None, pids_max: int | None) -> ChildCgroup:
        """A new child cgroup with these caps (raises :class:`OSError` when it cannot be made)."""
        if self.kind is None or self.memory_parent is None:
            raise OSError(errno.ENOTSUP, "no usable cgroup")
        return ChildCgroup(self, memory_limit=memory_limit, pids_max=pids_max)


class ChildCgroup:
    """One child's cgroup (v2: one directory; v1: one in ``memory`` and one in ``pids``)."""

    def __init__(self, where: Placement, *, memory_limit: int | None, pids_max: int | None) -> None:
        assert where.memory_parent is not None
        self.kind = where.kind or "v1"
        name = f"spoolparse-{os.getpid()}-{next(_seq)}"
        self.dirs: list[str] = []
        try:
            self.mem = os.path.join(where.memory_parent, name)
            os.mkdir(self.mem)
            self.dirs.append(self.mem)
            if self.kind == "v2":
                if memory_limit is not None:
                    _write(os.path.join(self.mem, "memory.max"), str(memory_limit))
                    _write(os.path.join(self.mem, "memory.high"), str(memory_limit * 3 // 4))
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.mem, "memory.swap.max"), "0")
                if pids_max is not None:
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.mem, "pids.max"), str(pids_max))
            else:
                if memory_limit is not None:
                    _write(os.path.join(self.mem, "memory.limit_in_bytes"), str(memory_limit))
                    # no swap either, where swap accounting exists
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.mem, "memory.memsw.limit_in_bytes"), str(memory_limit))
                if pids_max is not None and where.pids_parent is not None:
                    pids = os.path.join(where.pids_parent, name)
                    os.mkdir(pids)
                    self.dirs.append(pids)
                    _write(os.path.join(pids, "pids.max"), str(pids_max))
        except OSError:
            self.remove()
            raise
        self._fds: list[int] = []

    # -- joining -----------------------------------------------------------

    def preexec(self) -> Callable[[], None]:
        """A ``preexec_fn`` putting the child into this cgroup (files opened now, in the parent).

        Call :meth:`attached` after the spawn to close them.
        """
        self._fds = [os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]
        fds = tuple(self._fds)

        def join() -> None:
            for fd in fds:
                os.write(fd, b"0")  # 0: the writing process itself

        return join

    def attached(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    # -- reading -----------------------------------------------------------

    def usage(self) -> int:
        name = "memory.usage_in_bytes" if self.kind == "v1" else "memory.current"
        return read_int(os.path.join(self.mem, name)) or 0

    def peak(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.kind == "v1" else "memory.peak"
        return read_int(os.path.join(self.mem, name))

    def oom_killed(self) -> bool:
        """Whether the kernel killed something here for exceeding the cap."""
        name = "memory.oom_control" if self.kind == "v1" else "memory.events"
        try:
            with open(os.path.join(self.mem, name), "rb") as f:
                for line in f:
                    key, _, value = line.partition(b" ")
                    if key == b"oom_kill" and int(value) > 0:
                        return True
        except (OSError, ValueError):
            return False
        return False

    def procs(self) -> list[int]:
        return _procs(self.mem)

    # -- ending ------------------------------------------------------------

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process in the cgroup, also those that left the process group."""
        if self.kind == "v2" and sig == signal.SIGKILL:
            try:
                _write(os.path.join(self.mem, "cgroup.kill"), "1")
                return
            except OSError:
                pass
        for pid in self.procs():
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

    def remove(self) -> bool:
        """Remove the directories (kill what is left first); ``True`` when all are gone."""
        if getattr(self, "_fds", None):
            self.attached()
        gone = True
        for d in reversed(self.dirs):
            for attempt in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY or attempt == 49:
                        gone = False
                        break
                    for pid in _procs(d):
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                    time.sleep(0.01)
        self.dirs = [] if gone else self.dirs
        return gone
