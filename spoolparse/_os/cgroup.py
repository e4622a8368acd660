"""A cgroup per child: memory cap, pids cap, exact peak, and a kill that reaches escaped processes.

The child joins its cgroup in ``preexec_fn`` (after fork, before exec), so
even what it forks first is covered. Order of preference: a cgroup v2 child
of our own cgroup (``memory.max``, ``memory.high`` at 75 %,
``memory.swap.max`` 0, ``memory.oom.group`` 1, ``pids.max``), then cgroup v1
children of our own ``memory`` and ``pids`` cgroups. Directories are named
``spoolparse-<pid>-<start>-<pid namespace>-<n>`` (our :mod:`.identity`) and removed when the child's
processes are gone:
a cgroup whose processes take their time to die (a fork bomb's hundreds) is
retried in the background until it is empty, for up to the task's grace,
and the guardian holds its path until it is gone (:meth:`ChildCgroup.remove`).
Ones left by a runner that is provably gone are removed by the next one
(:func:`sweep_stale`), or by anyone holding their paths (:func:`destroy`, for a
guardian process).

v2 forbids a cgroup to both hold processes and hand controllers to children
("no internal processes"): a runner in a delegated, non-root cgroup (a
systemd user slice or service with ``Delegate=yes``) first moves the
processes of its cgroup into a leaf child, :data:`LEAF`, then enables the
``memory`` and ``pids`` controllers for its children and makes the task
cgroups next to that leaf. It does so only when every process there is
itself or its descendant: a cgroup shared with other programs is left as it
is (the tasks then get the watchdog). A later runner that starts in the leaf
uses the leaf's parent the same way.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Protocol

from .._regex import regex
from .cgroupfs import read_int, v2_dir
from .guardian import guardian
from .identity import Survey, identity, parse

__all__ = [
    "Cgroup", "Placement", "ChildCgroup", "destroy", "sweep_stale", "enforcement_of", "wait_removed", "REMOVE_WITHIN",
    "wants_cgroup", "uncontained_note", "tell_uncontained",
    "CGROUP2", "CGROUP1", "WATCHDOG", "NONE", "ENFORCEMENTS", "LEAF",
]

_ROOT = "/sys/fs/cgroup"
#: A task cgroup's name: ``spoolparse-<identity of its runner>-<n>``.
_NAME = regex(r"^spoolparse-(\d+-\d+-\d+)-\d+$")
_seq = itertools.count(1)

#: What capped a task's memory, as outcomes, job logs and summaries name it:
#: a v2 cgroup, a v1 cgroup, RSS sampling (no cgroup could be made), nothing
#: (no limit was asked for). The one definition of these names.
CGROUP2 = "cgroup2"
CGROUP1 = "cgroup1"
WATCHDOG = "watchdog"
NONE = "none"
ENFORCEMENTS = (CGROUP2, CGROUP1, WATCHDOG, NONE)

#: The leaf a runner moves its own cgroup's processes into (v2, delegated cgroup).
LEAF = "spoolparse-leaf"
#: Controllers a task cgroup needs (``pids`` where the kernel offers it).
_CONTROLLERS = ("memory", "pids")
#: Why no cgroup can be made here, as a batch's warning says it (``{}``: the cgroup that is not ours).
WHY_V1 = "cgroup v1: the memory cgroup {} is not ours to write (root is needed)"
WHY_V2 = "cgroup v2: {} is not ours to write (neither root nor a delegated cgroup)"
#: Seconds a cgroup's removal is retried at the least (its task's grace when longer): the processes of a fork
#: bomb took 0.62 s to go once.
REMOVE_WITHIN = 1.0

log = logging.getLogger("spoolparse.runner")


class Cgroup(Protocol):
    """What a child's cgroup offers (:class:`ChildCgroup` is one).

    The guardian holds each of its ``dirs`` from before it is made: :meth:`remove` tells it to forget each once
    it is gone (``guardian.release(None, dirs)``); one never removed is removed by the guardian when we exit."""

    dirs: list[str]

    def preexec(self) -> Callable[[], None]: ...

    def attached(self) -> None: ...

    def kill(self, sig: int = ...) -> None: ...

    def procs(self) -> list[int]: ...

    def remove(self, within: float = ...) -> bool: ...


def wants_cgroup(enforce: str) -> bool:
    """Whether a batch's task gets a cgroup of its own where one can be made: every task, with or without a
    memory limit, unless ``enforce`` is ``"watchdog"``. The one place this is decided (``run``'s
    ``containment="auto"`` makes one for its child the same way)."""
    return enforce != "watchdog"


def uncontained_note(where: Placement) -> str:
    """What a batch says, once, where no cgroup can be made for its tasks: why, and what then escapes."""
    return (
        f"no cgroup can be made for the tasks ({where.why}): each is ended through its process group and the mark "
        "in its environment only, so a process it starts that leaves its session and clears its environment "
        "(setsid, then env -i or sudo) outlives it; see the containment guide"
    )


_told: set[str] = set()  # the reasons said already by this process


def tell_uncontained(where: Placement) -> None:
    """Say :func:`uncontained_note` as a warning, once per process for each reason (``calibrate`` runs a
    batch per level; a service may run many)."""
    if where.why not in _told:
        _told.add(where.why)
        log.warning("%s", uncontained_note(where))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_told.clear)


def enforcement_of(cg: ChildCgroup | None, limit: int | None) -> str:
    """The enforcement name for a task with this cgroup (or none) and memory limit (or none)."""
    if cg is not None:
        return cg.enforcement
    return WATCHDOG if limit is not None else NONE


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


def _words(path: str) -> set[str]:
    try:
        with open(path) as f:
            return set(f.read().split())
    except OSError:
        return set()


def _counters(path: str) -> dict[str, int]:
    """A flat-keyed file (``memory.events``, ``pids.events``, ``memory.oom_control``) as a dict."""
    out: dict[str, int] = {}
    try:
        with open(path, "rb") as f:
            for line in f:
                key, _, value = line.strip().partition(b" ")
                with contextlib.suppress(ValueError):
                    out[key.decode()] = int(value)
    except OSError:
        pass
    return out


def _procs(d: str) -> list[int]:
    try:
        with open(os.path.join(d, "cgroup.procs"), "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def _subtree(d: str) -> list[str]:
    """``d`` and the cgroups below it (a task that runs its own runner nests some), deepest first."""
    out: list[str] = []

    def walk(x: str) -> None:
        try:
            with os.scandir(x) as it:
                subs = [e.path for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            subs = []
        for sub in subs:
            walk(sub)
        out.append(x)

    walk(d)
    return out


def destroy(d: str, *, wait: float = 2.0) -> bool:
    """Kill every process in cgroup ``d`` and below (``cgroup.kill`` on v2) and remove them all.

    ``True`` when ``d`` is gone. Needs nothing but the path, so a process
    other than the runner (a guardian that outlives it) can clean up after it.
    """
    deadline = time.monotonic() + wait
    gone = True
    for sub in _subtree(d):
        gone = _destroy_one(sub, deadline) and gone
    return gone


def _destroy_one(d: str, deadline: float) -> bool:
    killed = False
    delay = 0.005
    while True:
        try:
            os.rmdir(d)
            return True
        except FileNotFoundError:
            return True
        except OSError as e:
            if e.errno != errno.EBUSY:
                return False
        if not killed or delay >= 0.05:
            killed = True
            try:
                _write(os.path.join(d, "cgroup.kill"), "1")
            except OSError:
                for pid in _procs(d):
                    if pid != os.getpid():  # never ourselves: a thread of ours may be starting a child there
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(0.1, delay * 2)


def sweep_stale(parent: str) -> list[str]:
    """Remove the task cgroups under ``parent`` whose runner is provably gone (killing what is left in them):
    by the identity in their names, which holds across PID namespaces (:mod:`.identity`), never by a pid alone
    (a name without the rest of an identity is left as it is)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    survey = Survey()
    gone = []
    for name in names:
        m = _NAME.match(name)
        who = parse(m.group(1)) if m is not None else None
        if who is None or not survey.gone(who):
            continue
        d = os.path.join(parent, name)
        if destroy(d, wait=0.5):
            gone.append(d)
    return gone


def _name(n: int) -> str:
    """The name of our ``n``-th task cgroup (``0``: the placement's probe)."""
    who = identity()
    if who is None:  # no /proc to tell who we are: a name no sweep can prove abandoned
        return f"spoolparse-{os.getpid()}-{n}"
    return f"spoolparse-{who}-{n}"


def _delegate(d: str) -> bool:
    """Make v2 cgroup ``d`` hand ``memory`` (and ``pids``) to its children; ``False`` when it cannot."""
    offered = _words(os.path.join(d, "cgroup.controllers"))
    if "memory" not in offered:
        return False
    want = [c for c in _CONTROLLERS if c in offered]
    control = os.path.join(d, "cgroup.subtree_control")
    if set(want) <= _words(control):
        return True
    line = " ".join(f"+{c}" for c in want)
    try:
        _write(control, line)
        return True
    except OSError as e:
        if e.errno != errno.EBUSY:
            return False
    # "no internal processes": d holds processes (us, at least), so they move to a leaf first, but
    # only ours: a cgroup shared with others (a terminal's scope holding the shell) is not ours to rearrange
    if not all(_ours(pid) for pid in _procs(d)):
        return False
    leaf = os.path.join(d, LEAF)
    try:
        os.makedirs(leaf, exist_ok=True)
        fd = os.open(os.path.join(leaf, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        try:
            for _ in range(20):  # processes forked meanwhile land in d: go again until it is empty
                procs = _procs(d)
                if not procs:
                    break
                for pid in procs:
                    with contextlib.suppress(ProcessLookupError):  # one write per pid: gone ones fail alone
                        os.write(fd, str(pid).encode())
        finally:
            os.close(fd)
        _write(control, line)
    except OSError:
        return False
    return True


def _ours(pid: int) -> bool:
    """Whether ``pid`` is this process or a descendant of it (by the parent chain in ``/proc``)."""
    me = os.getpid()
    for _ in range(64):
        if pid == me:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _v2_parent() -> tuple[str | None, str]:
    """Where this process may make v2 task cgroups with a memory controller (or ``None``), and why not."""
    own = v2_dir()
    if own is None:
        return None, "no cgroup v2 hierarchy holds this process"
    up = os.path.dirname(own)
    if os.path.basename(own) == LEAF and os.access(up, os.W_OK) and "memory" in _words(
        os.path.join(up, "cgroup.subtree_control")
    ):
        return up, ""  # started inside a runner's leaf: its parent already hands out controllers
    if not os.access(own, os.W_OK):
        return None, WHY_V2.format(own)
    if not _delegate(own):
        return None, (f"cgroup v2: {own} cannot hand the memory controller to cgroups of ours (not offered to it, "
                      "or other programs share it)")
    return own, ""


class Placement:
    """Where child cgroups can be made on this host (``kind`` is ``v2``, ``v1`` or ``None``).

    .. seealso:: :class:`ChildCgroup`
    """

    def __init__(
        self, kind: str | None, memory_parent: str | None = None, pids_parent: str | None = None, why: str = ""
    ) -> None:
        self.kind = kind
        self.memory_parent = memory_parent
        self.pids_parent = pids_parent
        #: Why no cgroup can be made here (``kind`` ``None``), in a few words.
        self.why = why

    @property
    def enforcement(self) -> str | None:
        """``cgroup2``, ``cgroup1`` or ``None``: what a task cgroup made here enforces with."""
        return {"v2": CGROUP2, "v1": CGROUP1}.get(self.kind or "")

    @classmethod
    def detect(cls) -> Placement:
        """Probe by making (and removing) a test cgroup; ``kind`` is ``None`` when neither works.

        On v2 this may move the processes of our cgroup into :data:`LEAF`
        (see the module's docstring).
        """
        v2, why = _v2_parent()
        if v2 is not None and cls._try(v2, "memory.max"):
            return cls("v2", v2, v2)
        mem = _own_v1("memory")
        if mem is not None and cls._try(mem, "memory.limit_in_bytes"):
            pids = _own_v1("pids")
            if pids is not None and not cls._try(pids, "pids.max"):
                pids = None
            return cls("v1", mem, pids)
        if mem is not None:
            why = WHY_V1.format(mem)
        elif v2 is not None:
            why = f"cgroup v2: no cgroup can be made in {v2}"
        return cls(None, why=why or "no cgroup hierarchy with a memory controller is mounted")

    @staticmethod
    def _try(parent: str, knob: str) -> bool:
        if not os.access(parent, os.W_OK):
            return False
        sweep_stale(parent)
        d = os.path.join(parent, _name(0))
        guardian.hold_cgroup(d)  # as a task's is: held before it exists, released once gone
        try:
            os.mkdir(d)
        except FileExistsError:
            pass
        except OSError:
            guardian.release(None, [d])
            return False
        try:
            return os.path.isfile(os.path.join(d, knob))
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(d)
                guardian.release(None, [d])

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
        self.memory_limit = memory_limit
        self.pids_max = pids_max
        name = _name(next(_seq))
        self.dirs: list[str] = []
        self.pids_dir: str | None = None
        self.oom_group = False  # the kernel's OOM kill ends every process of it (v2 memory.oom.group)
        self._fds: list[int] = []
        self._removing = threading.Lock()  # the caller's first try and the background's later ones
        try:
            self.mem = os.path.join(where.memory_parent, name)
            self._make(self.mem)
            if self.kind == "v2":
                if memory_limit is not None:
                    _write(os.path.join(self.mem, "memory.max"), str(memory_limit))
                    _write(os.path.join(self.mem, "memory.high"), str(memory_limit * 3 // 4))
                    with contextlib.suppress(OSError):  # absent without swap accounting
                        _write(os.path.join(self.mem, "memory.swap.max"), "0")
                    # the kernel's kill at the line ends the whole task, not one of its processes
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.mem, "memory.oom.group"), "1")
                        self.oom_group = True
                if pids_max is not None and os.path.isfile(os.path.join(self.mem, "pids.max")):
                    _write(os.path.join(self.mem, "pids.max"), str(pids_max))
                    self.pids_dir = self.mem
            else:
                if memory_limit is not None:
                    _write(os.path.join(self.mem, "memory.limit_in_bytes"), str(memory_limit))
                    # no swap either, where swap accounting exists
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.mem, "memory.memsw.limit_in_bytes"), str(memory_limit))
                if pids_max is not None and where.pids_parent is not None:
                    pids = os.path.join(where.pids_parent, name)
                    self._make(pids)
                    _write(os.path.join(pids, "pids.max"), str(pids_max))
                    self.pids_dir = pids
        except OSError:
            self.remove()
            raise

    def _make(self, d: str) -> None:
        """Make directory ``d``, held by the guardian before it exists (see :meth:`Guardian.hold_cgroup`): a
        ``kill -9`` of us between the ``mkdir`` and the child's start leaves nothing behind."""
        self.dirs.append(d)  # released by remove() once gone, made or not
        guardian.hold_cgroup(d)
        os.mkdir(d)

    @property
    def enforcement(self) -> str:
        """``cgroup2`` or ``cgroup1``."""
        return CGROUP2 if self.kind == "v2" else CGROUP1

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

    def memory_events(self) -> dict[str, int]:
        """v2 ``memory.events`` (``high``, ``max``, ``oom``, ``oom_kill``...); v1: ``oom_kill`` only."""
        if self.kind == "v1":
            return {k: v for k, v in _counters(os.path.join(self.mem, "memory.oom_control")).items() if k == "oom_kill"}
        return _counters(os.path.join(self.mem, "memory.events"))

    def oom_killed(self) -> bool:
        """Whether the kernel killed something here for exceeding the cap."""
        return self.memory_events().get("oom_kill", 0) > 0

    def pids_refused(self) -> int:
        """Forks refused because the task was at ``pids.max``."""
        if self.pids_dir is None:
            return 0
        return _counters(os.path.join(self.pids_dir, "pids.events")).get("max", 0)

    def memory_note(self) -> str:
        """What the kernel did about memory: the peak, throttling at ``memory.high`` and OOM kills."""
        peak_name = "memory.max_usage_in_bytes" if self.kind == "v1" else "memory.peak"
        events = self.memory_events()
        parts = [f"{peak_name} {self.peak()}"]
        if self.kind == "v2" and self.memory_limit is not None:
            parts.append(f"memory.high {self.memory_limit * 3 // 4} reached {events.get('high', 0)} times")
        killed = _oom_killed_processes(events, group=self.oom_group)
        if killed is not None:
            parts.append(f"the kernel's OOM killer ended {killed} process{'es' if killed != 1 else ''}")
        elif events.get("oom_kill", 0):
            parts.append("the kernel's OOM killer ended the task (memory.oom.group)")
        return ", ".join(parts)

    def pids_note(self) -> str | None:
        """A sentence when forks were refused at ``pids.max``, else ``None``."""
        refused = self.pids_refused()
        if not refused:
            return None
        return f"pids.max {self.pids_max} reached: {refused} forks refused ({self.enforcement})"

    def procs(self) -> list[int]:
        """The processes in this cgroup and in any cgroup below it."""
        return [pid for d in _subtree(self.mem) for pid in _procs(d)]

    # -- ending ------------------------------------------------------------

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process in the cgroup, also those that left the process group.

        v2's ``cgroup.kill`` (SIGKILL only) reaches processes forked while it
        runs, which walking ``cgroup.procs`` can miss.
        """
        if self.kind == "v2" and sig == signal.SIGKILL:
            try:
                _write(os.path.join(self.mem, "cgroup.kill"), "1")
                return
            except OSError:
                pass
        me = os.getpid()
        for pid in self.procs():
            if pid != me:  # never ourselves, whatever a cgroup holds
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)

    def remove(self, within: float = REMOVE_WITHIN) -> bool:
        """Kill what is left and remove the directories; ``True`` when all are gone now.

        Never waits: what is not gone at once (processes still dying) is tried again in the background until
        it is, for at least ``within`` seconds (:data:`REMOVE_WITHIN`), and the guardian holds each path until
        it is gone (:func:`wait_removed` waits for that). A directory the guardian was told about is released
        here, once gone, never before: if we die meanwhile, it kills what is there and removes it.
        """
        if self._fds:
            self.attached()
        if self._remove_now():
            return True
        _undertaker.bury(self, time.monotonic() + max(within, REMOVE_WITHIN))
        return False

    def _remove_now(self) -> bool:
        """One round of killing and removing, never waiting (the directories gone are released); ``True`` when
        none is left."""
        with self._removing:
            left = [d for d in reversed(self.dirs) if not destroy(d, wait=0.0)]
            gone = [d for d in self.dirs if d not in left]
            self.dirs = [d for d in self.dirs if d in left]
        if gone:
            guardian.release(None, gone)
        return not left


class _Undertaker:
    """The cgroups whose removal failed at once, tried again in a thread of their own until each is gone or
    its time is up (then it is left to the guardian, and to the next runner's :func:`sweep_stale`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graves: list[tuple[ChildCgroup, float]] = []
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def bury(self, cg: ChildCgroup, until: float) -> None:
        with self._lock:
            self._graves.append((cg, until))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="spoolparse-cgroups", daemon=True)
                self._thread.start()
            self._wake.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Until every removal is over (gone, or given up on); ``False`` after ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._graves:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._wake.wait(left)
        return True

    def _run(self) -> None:
        from .._signals import helper_thread

        helper_thread()
        delay = 0.01
        while True:
            with self._lock:
                while not self._graves:
                    delay = 0.01
                    self._wake.wait()
                graves = list(self._graves)
            done = []
            now = time.monotonic()
            for cg, until in graves:
                if cg._remove_now():
                    done.append(cg)
                elif now >= until:
                    done.append(cg)
                    log.warning(
                        "cannot remove the cgroup %s: %d processes are still in it; it is removed when spoolparse "
                        "exits, or by the next runner", ", ".join(cg.dirs), len(cg.procs()),
                    )
            with self._lock:
                self._graves = [g for g in self._graves if g[0] not in done]
                self._wake.notify_all()
            time.sleep(delay)
            delay = min(0.1, delay * 2)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._graves = []
        self._thread = None


_undertaker = _Undertaker()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_undertaker._after_fork)


def wait_removed(timeout: float | None = None) -> bool:
    """Block until every cgroup removal tried again in the background is over (:meth:`ChildCgroup.remove`)."""
    return _undertaker.wait(timeout)


def _oom_killed_processes(events: dict[str, int], *, group: bool) -> int | None:
    """How many processes the kernel's OOM killer ended, from a cgroup's counters (``None``: none were, or it
    cannot be told). ``oom_kill`` counts kill events: with ``memory.oom.group`` the kernel counts the victim
    it picked once, then once more with every process of the group (``oom_group_kill`` counts those group
    kills), so each group kill adds one event too many; a kernel without that counter cannot be read right."""
    kills = events.get("oom_kill", 0)
    if not kills:
        return None
    if not group:
        return kills
    groups = events.get("oom_group_kill")
    return kills - groups if groups is not None else None
