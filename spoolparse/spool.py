"""Where spool files live, and how they are made, kept for reuse and closed (when one is full:
:mod:`spoolparse.spool_full`).

A spool is a :func:`tempfile.TemporaryFile`: on Linux an ``O_TMPFILE`` file
that never has a name, else one unlinked at creation; mode 0600 either way.
Closing one deletes it; a large one is closed by a background thread
(:func:`close_spool`), so that freeing its blocks never holds up the thread
that supervises children.

Making a spool costs a new inode, which on some filesystems is most of a
short task's cost (ext4: 50-85 us of kernel time each, more with many
nameless files open). So a small spool whose child had a descriptor of its
own (:func:`writer_end`) is emptied and kept for the next one
(:func:`recycle_spool`) once nobody else holds it, as the kernel tells by
granting a write lease: a process that escaped its group with the spool as
its stdout keeps that spool from reuse, and its writes from the next task's
transcript.

On an ext4 filesystem *without a journal* a new inode also skips every inode
of its block group freed in the last seconds to minutes (the kernel's
``recently_deleted``), so that right after a fleet freed a thousand spools
each new one costs 0.5 ms or more of kernel time. There spools are made in a
directory of this process's own (:func:`placement`), which the filesystem
places in a block group of its choosing, away from the last run's.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import queue
import stat
import struct
import sys
import tempfile
import threading
import time
import warnings
from typing import IO

from . import _limits
from ._dirfd import NotOurs, make_unique_dir, open_path, own_dir, refusal
from ._os.identity import Survey, identity, parse
from ._signals import helper_thread
from .errors import SpoolDirError, SpoolDirWarning, SpoolFullError

__all__ = [
    "ENV_VAR", "resolve_spool_dir", "open_spool", "writer_end", "recycle_spool", "empty_pool", "temp_dir",
    "close_spool", "wait_closed",
]

#: The environment variable naming the spool directory.
ENV_VAR = "PDD_AGENT_SPOOL_DIR"

#: The variables naming the temp dir, in :func:`tempfile.gettempdir`'s order.
TEMP_VARS = ("TMPDIR", "TEMP", "TMP")

#: The temp dirs tried after those the variables name, in :func:`tempfile.gettempdir`'s order (its last resort,
#: the working directory, is not one: a run is not to leave its spools' placements in a project).
TEMP_DIRS = ("/tmp", "/var/tmp", "/usr/tmp")

_warned: set[tuple[str, ...]] = set()


def _warn_once(var: str, path: str, why: str, instead: str) -> None:
    key = (var, path, why)
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(f"{var}={path!r} {why}; spooling to {instead!r} instead", SpoolDirWarning, stacklevel=4)


def _unusable(path: str) -> tuple[int, str] | None:
    """``(errno, why)`` when ``path`` cannot hold spools: it does not lead to a directory, or does through a
    link or a directory of another user's, or one others may write to on the way
    (:func:`~spoolparse._dirfd.open_path`: its owner could swap what follows for a link to anywhere), or is
    not ours or root's."""
    try:
        os.close(open_path(path, shared=True))  # a spool directory open to others is the warning's (_check_safety)
    except NotOurs as e:
        return e.errno or errno.EPERM, refusal(path, e)
    except FileNotFoundError:
        return errno.ENOENT, "does not exist"
    except OSError as e:
        return e.errno or errno.EIO, f"cannot be read ({e.strerror})"
    if not os.access(path, os.W_OK | os.X_OK):
        return errno.EACCES, "is not writable"
    if path not in _proven:
        # writable by its mode bits is not enough (/proc, a read-only mount, a full disk): try once per process
        try:
            open_spool(path).close()
        except SpoolDirError as e:
            return e.errno or errno.EIO, str(e.strerror)
        except SpoolFullError as e:
            return errno.ENOSPC, e.reason
        _proven.add(path)
    return None


#: Directories that have held a spool in this process (each is tried once).
_proven: set[str] = set()


def _check_safety(path: str) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        key = (path, "unsafe")
        if key not in _warned:
            _warned.add(key)
            warnings.warn(
                f"spool directory {path!r} is world-writable without the sticky bit", SpoolDirWarning, stacklevel=4
            )


def resolve_spool_dir(spool_dir: str | os.PathLike[str] | None = None) -> str:
    """The directory spools go to: ``spool_dir``, else ``$PDD_AGENT_SPOOL_DIR``, else the temp dir
    (:func:`temp_dir`).

    An unusable ``spool_dir`` argument raises :class:`SpoolDirError` (an ``OSError``); an unusable
    environment variable warns once per process (:class:`SpoolDirWarning`)
    and falls back to the temp dir.
    """
    if spool_dir is not None:
        path = os.fspath(spool_dir)
        problem = _unusable(path)
        if problem is not None and problem[0] != errno.ENOSPC:  # full: the run fails on its own (exit 125)
            raise SpoolDirError(path, *problem)
        _check_safety(path)
        return path
    env = os.environ.get(ENV_VAR)
    if env:
        problem = _unusable(env)
        if problem is None:
            _check_safety(env)
            return env
        instead = temp_dir()
        _warn_once(ENV_VAR, env, problem[1], instead)
        return instead
    return temp_dir()


def temp_dir() -> str:
    """The temp dir spools go to when none is named: the first of :data:`tempfile.tempdir` (a program's own
    choice), ``$TMPDIR``, ``$TEMP``, ``$TMP`` and :data:`TEMP_DIRS` that can hold them, each checked as a named
    spool directory is. One named by the program or a variable and refused is a warning once
    (:class:`SpoolDirWarning`); none usable is :class:`SpoolDirError`, saying why for each."""
    refused: list[tuple[str | None, str, tuple[int, str]]] = []
    named = [(var, path) for var in TEMP_VARS if (path := os.environ.get(var, ""))]
    chosen = os.fsdecode(tempfile.tempdir or "")  # also where tempfile keeps what it took from a variable
    if chosen and all(chosen != path for _, path in named):
        named.insert(0, ("tempfile.tempdir", chosen))
    for var, path in [*named, *((None, path) for path in TEMP_DIRS)]:
        problem = _unusable(path)
        if problem is None:
            for was, bad, (_, why) in refused:
                if was is not None:
                    _warn_once(was, bad, why, path)
            _check_safety(path)
            return path
        refused.append((var, path, problem))
    said = "; ".join(f"{var}={path!r} {why}" if var else f"{path!r} {why}" for var, path, (_, why) in refused)
    raise SpoolDirError(
        None, refused[0][2][0], f"no directory can hold spools: {said}: name one with --spool-dir or {ENV_VAR}"
    )


def _raise_if_full(directory: str, e: OSError) -> None:
    """No room to create a spool (ENOSPC, EDQUOT) is the run's own failure (exit 125), not a usage error."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        raise SpoolFullError(directory, 0, f"cannot create a spool: {e.strerror}") from e


def open_spool(directory: str) -> IO[bytes]:
    """A nameless spool file in ``directory``, opened for reading and writing: new, or an empty recycled one.

    On Linux an ``O_TMPFILE`` file opened without ``O_EXCL``, so that a kept
    transcript (``batch --results``) can be given a name with ``linkat``
    instead of copied; only its owner can reach it (mode 0600, through our
    own ``/proc/self/fd``). Elsewhere, or where the filesystem has no
    ``O_TMPFILE``, :func:`tempfile.TemporaryFile`.
    """
    global _pooled
    with _pool_lock:
        kept = _pool.get(directory)
        if kept:
            _pooled -= 1
            return kept.pop()
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        made = _open_placed(directory, tmpfile | os.O_RDWR | os.O_CLOEXEC)
        if made is not None:
            return made
        try:
            fd = os.open(directory, tmpfile | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as e:
            _raise_if_full(directory, e)
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise SpoolDirError(
                    directory, e.errno or errno.EIO, f"cannot hold a spool file ({e.strerror})"
                ) from e
        else:
            return os.fdopen(fd, "w+b")
    try:
        return tempfile.TemporaryFile(dir=directory)
    except OSError as e:
        _raise_if_full(directory, e)
        raise SpoolDirError(directory, e.errno or errno.EIO, f"cannot hold a spool file ({e.strerror})") from e


# -- where a new spool's inode is made --------------------------------------------

#: A process moves on to a new placement after this many spools, or when it makes one after a pause this long
#: (seconds): the inodes its spools freed are recent in the old one's block group (a fleet after a fleet).
PLACEMENT_SPOOLS = 512
PLACEMENT_PAUSE = 1.0

#: ``<spool dir>/PLACEMENTS<uid>/<identity>-<random>`` (``<pid>-<start>-<pid namespace>``): where spools are made
#: on an ext4 without a journal.
PLACEMENTS = "spoolparse-"

_LONG = struct.calcsize("l")
_FS_IOC_GETFLAGS = (2 << 30) | (_LONG << 16) | (ord("f") << 8) | 1  # _IOR('f', 1, long)
_FS_IOC_SETFLAGS = (1 << 30) | (_LONG << 16) | (ord("f") << 8) | 2  # _IOW('f', 2, long)
_FS_TOPDIR_FL = 0x00020000  # chattr +T


def _ext4_without_journal(path: str) -> bool:
    """Whether ``path`` is on an ext4 filesystem without a journal (``/proc/fs/jbd2`` names the journaled)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}".encode()
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == dev and b"-" in fields:
                if fields[fields.index(b"-") + 1] != b"ext4":
                    return False
                break
        else:
            return False
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{dev.decode()}"))
    try:
        journals = os.listdir("/proc/fs/jbd2")
    except OSError:
        journals = []
    return not any(j.startswith(name + "-") for j in journals)


def _spread_subdirectories(fd: int) -> None:
    """Mark directory ``fd`` a top of directory hierarchies (``chattr +T``): ext4 places each new subdirectory
    in a block group of its own choosing (the Orlov allocator's spread), not beside it."""
    buf = bytearray(_LONG)
    fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
    flags = int.from_bytes(buf[:4], sys.byteorder)
    if not flags & _FS_TOPDIR_FL:
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, (flags | _FS_TOPDIR_FL).to_bytes(4, sys.byteorder) + bytes(_LONG - 4))


class _Top:
    """``<spool dir>/spoolparse-<uid>``, held by a descriptor checked to be ours, for the life of the process."""

    __slots__ = ("directory", "fd", "name", "path")

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.name = f"{PLACEMENTS}{os.geteuid()}"
        self.path = os.path.join(directory, self.name)
        dir_fd = open_path(directory, shared=True)  # reached as the spool directory was checked (NotOurs)
        try:
            # a symlink, a file, someone else's or one open to others there: not ours to use (NotOurs)
            self.fd = own_dir(self.name, dir_fd, private=True)
        finally:
            os.close(dir_fd)
        with contextlib.suppress(OSError):
            _spread_subdirectories(self.fd)

    def sweep(self) -> None:
        """Remove the placements of processes provably gone without removing theirs (killed): empty
        directories, since a spool never has a name. A placement is named ``<identity>-<random>``
        (:mod:`~spoolparse._os.identity`): a pid number alone would take the placement of a live process in
        another PID namespace sharing the directory for a dead one's, and its next spools would fail."""
        survey = Survey()
        for name in os.listdir(self.fd):
            who = parse(name.rpartition("-")[0])
            if who is not None and survey.gone(who):
                with contextlib.suppress(OSError):
                    os.rmdir(name, dir_fd=self.fd)

    def close(self, *, remove: bool) -> None:
        """Let go of it; with ``remove``, remove it too when it is empty (no other process uses it) and its name
        still names the directory opened."""
        if remove:
            with contextlib.suppress(OSError):
                dir_fd = open_path(self.directory, shared=True)
                try:
                    st = os.stat(self.name, dir_fd=dir_fd, follow_symlinks=False)
                    mine = os.fstat(self.fd)
                    if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
                        os.rmdir(self.name, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
        with contextlib.suppress(OSError):
            os.close(self.fd)


class _Place:
    """A directory of this process's own under a :class:`_Top`, where its new spools are made (``openat`` of
    ``O_TMPFILE`` on ``fd``). ``users``: threads making a spool in it now; a placement moved on from
    (``retired``) is removed once the last of them is done."""

    __slots__ = ("fd", "last", "name", "path", "retired", "spools", "top", "users")

    def __init__(self, top: _Top) -> None:
        self.top = top
        # a mkdtemp through the descriptor, named after us (without an identity, never swept: nothing proves
        # its maker gone)
        self.name, self.fd = make_unique_dir(top.fd, f"{identity() or os.getpid()}-")
        self.path = os.path.join(top.path, self.name)
        self.spools = 0
        self.last = time.monotonic()
        self.users = 0
        self.retired = False

    def remove(self) -> None:
        """Its spools have no name in it: it is empty, and goes (under ``_made_lock``)."""
        with contextlib.suppress(OSError):
            os.rmdir(self.name, dir_fd=self.top.fd)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        _places.discard(self)


#: Per spool directory, the placement its new spools are made in (``None``: the directory itself).
_made_in: dict[str, _Place | None] = {}
_made_lock = threading.Lock()
#: Per spool directory, its ``spoolparse-<uid>`` as this process opened it (each open until exit: the
#: placements under it remove themselves through it).
_tops: dict[str, _Top] = {}
#: Those found removed meanwhile (by another process's exit), and opened afresh.
_gone_tops: list[_Top] = []
#: The placements this process made and has not removed.
_places: set[_Place] = set()
_exited = False


def placement(directory: str) -> str:
    """The directory this process makes new spools of ``directory`` in: ``directory`` itself, except on an
    ext4 without a journal, where it is ``directory/spoolparse-<uid>/<pid>-<start>-<pidns>-<random>`` (made
    here, removed at exit; one left by a killed process is removed by the next that makes one, once its maker
    is provably gone).

    Why: there a new inode skips, one by one, every inode of its block group freed in the last seconds (the
    last minutes while the inode table is not written back) — the kernel's ``recently_deleted`` in
    ``fs/ext4/ialloc.c`` — and the files of a directory go to the directory's group. So right after a fleet
    freed a thousand spools in the temp directory, each new one there took 0.5 ms of kernel time, its
    thousands of neighbours the longer. ``spoolparse-<uid>`` is marked a top of directory hierarchies
    (``chattr +T``), so each process's directory under it lands in a block group the filesystem picks
    among the emptiest — its new spools take 7-30 us. The process moves on to a new one of these every
    :data:`PLACEMENT_SPOOLS` spools and after a pause (:data:`PLACEMENT_PAUSE`), removing the old one: the
    spools freed there would slow a later fleet of the same process the same way. Anything that does not
    work out (another filesystem, a ``spoolparse-<uid>`` not ours, no room) leaves the spools in ``directory``.

    The spool directory may be writable by others (a shared temp dir): ``spoolparse-<uid>`` is opened once
    with ``O_NOFOLLOW`` and checked (ours, closed to others), and the sweep, the new directories and the
    spools go through that descriptor (:mod:`spoolparse._dirfd`), so swapping the name for a symlink to
    elsewhere never makes this process remove or make anything there.
    """
    place = _placement(directory)
    return directory if place is None else place.path


def _placement(directory: str) -> _Place | None:
    with _made_lock:
        if directory in _made_in:
            return _made_in[directory]
        place = None
        try:
            if not _exited and sys.platform.startswith("linux") and _ext4_without_journal(directory):
                place = _make_placement(directory)
        except OSError:
            place = None
        _made_in[directory] = place
        return place


def _make_placement(directory: str) -> _Place | None:
    """A new placement for ``directory`` (under ``_made_lock``), or ``None`` where there can be none."""
    for _ in range(2):  # another process's exit may remove an empty top between our open and our mkdir
        top = _tops.get(directory)
        if top is None:
            try:
                top = _tops[directory] = _Top(directory)
            except NotOurs:
                return None  # not ours to use (a shared temp dir: someone else made that name)
        try:
            top.sweep()
            place = _Place(top)
        except FileNotFoundError:
            # removed: opened afresh next time; this one is kept open for the placements that name it
            _gone_tops.append(_tops.pop(directory))
            continue
        _places.add(place)
        return place
    return None


def _take(directory: str) -> _Place | None:
    """The placement the next spool of ``directory`` is made in (a new one when it is due, see
    :data:`PLACEMENT_SPOOLS`), counted as in use until :func:`_give_back`; ``None``: the directory itself."""
    place = _placement(directory)
    if place is None:
        return None
    now = time.monotonic()
    with _made_lock:
        place = _made_in.get(directory)
        if place is None:
            return None
        if (place.spools >= PLACEMENT_SPOOLS or now - place.last > PLACEMENT_PAUSE) and not _exited:
            try:
                new = _Place(place.top)
            except OSError:
                place.spools = 0  # the old one goes on (counted afresh: not tried again at every spool)
            else:
                _places.add(new)
                _made_in[directory] = new
                place.retired = True
                if not place.users:
                    place.remove()
                place = new
        place.spools += 1
        place.last = now
        place.users += 1
        return place


def _give_back(place: _Place) -> None:
    with _made_lock:
        place.users -= 1
        if place.retired and not place.users:
            place.remove()


def _open_placed(directory: str, flags: int) -> IO[bytes] | None:
    """A new spool in the process's placement for ``directory``, or ``None`` when there is none (or none any
    more: then spools go in ``directory`` itself from now on). No room is the filesystem's failure,
    :class:`SpoolFullError`, not the placement's."""
    place = _take(directory)
    if place is None:
        return None
    try:
        return os.fdopen(os.open(".", flags, 0o600, dir_fd=place.fd), "w+b")
    except OSError as e:
        _raise_if_full(directory, e)
    finally:
        _give_back(place)
    # ours is gone (removed by hand, or another process's sweep): spools go in the directory from now on
    with _made_lock:
        if _made_in.get(directory) is place:
            _made_in[directory] = None
            place.retired = True
            if not place.users:
                place.remove()
    return None


def _remove_placements() -> None:
    """At exit: this process's placements go, and their ``spoolparse-<uid>`` when no other process uses it."""
    global _exited
    with _made_lock:
        _exited = True  # a spool made after this (a daemon thread's) goes in its directory: nothing left behind
        for directory in _made_in:
            _made_in[directory] = None
        for place in list(_places):
            if not place.users:  # one in use now is left to the kernel: its descriptor may be used this instant
                place.remove()
        tops = list(_tops.values())
        gone = list(_gone_tops)
        _tops.clear()
        _gone_tops.clear()
    for top in tops:
        top.close(remove=True)
    for top in gone:
        top.close(remove=False)


atexit.register(_remove_placements)


#: Emptied spools kept for reuse, by directory (at most :data:`~spoolparse._limits.SPOOL_POOL` in all).
_pool: dict[str, list[IO[bytes]]] = {}
_pooled = 0
_pool_lock = threading.Lock()


def writer_end(f: IO[bytes]) -> int:
    """A write descriptor of its own on spool ``f`` for a child (close ours once it has its copy), or ``-1``
    where none can be opened (then give it ``f`` itself, and ``f`` is never recycled).

    What holds this one, and nothing else, keeps ``f`` from :func:`recycle_spool`.
    """
    try:
        return os.open(f"/proc/self/fd/{f.fileno()}", os.O_WRONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return -1


def _alone(fd: int) -> bool:
    """Whether no other open file (ours or any process's) refers to ``fd``'s file: a write lease is granted."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError:  # EAGAIN: held elsewhere; EINVAL: leases off, or not on this filesystem
        return False
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    return True


def recycle_spool(f: IO[bytes], directory: str) -> bool:
    """Empty ``f`` and keep it for the next :func:`open_spool` in ``directory``; ``False`` (``f`` untouched)
    when it has a name, is large (freeing its blocks is the background close's), is still open anywhere
    else, or the pool is full.

    Only for a spool whose child wrote through a :func:`writer_end` of its own: a child that shared our
    descriptor would leave nothing to tell it is gone.
    """
    global _pooled
    try:
        fd = f.fileno()
        st = os.fstat(fd)
    except (OSError, ValueError):
        return False
    if st.st_nlink or st.st_size > _limits.CLOSE_INLINE_BYTES or _pooled >= _limits.SPOOL_POOL or not _alone(fd):
        return False
    try:
        if st.st_size:
            os.ftruncate(fd, 0)
        f.seek(0)
    except (OSError, ValueError):
        return False
    with _pool_lock:
        if _pooled >= _limits.SPOOL_POOL:
            return False
        _pool.setdefault(directory, []).append(f)
        _pooled += 1
    return True


def empty_pool() -> int:
    """Close every spool kept for reuse (each holds a descriptor until then); how many were closed."""
    global _pool, _pooled
    with _pool_lock:
        kept, _pool, _pooled = _pool, {}, 0
    n = 0
    for files in kept.values():
        for f in files:
            with contextlib.suppress(OSError):
                f.close()
            n += 1
    return n


# closed on purpose at exit (the kernel would close them anyway, but a file object left to the collector warns)
atexit.register(empty_pool)


# -- closing -------------------------------------------------------------------

# Unbounded, so that handing a spool over never waits (it may be the supervising loop): a batch bounds the
# backlog instead, by starting no task while it is past CLOSING_MAX (see closing()).
_closing: queue.Queue[IO[bytes]] = queue.Queue()
_closer: threading.Thread | None = None
_closer_lock = threading.Lock()


def _close_queued() -> None:
    helper_thread()
    while True:
        f = _closing.get()
        try:
            with contextlib.suppress(OSError):
                f.close()
        finally:
            _closing.task_done()


def close_spool(f: IO[bytes]) -> None:
    """Close (and so delete) a spool: at once when it is small, else from a background thread.

    The thread is a daemon: a spool still queued when the process exits is closed by the kernel. The caller
    never waits; :func:`closing` says how many wait.
    """
    global _closer
    try:
        size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError):  # closed already, or not a real file
        size = 0
    if size <= _limits.CLOSE_INLINE_BYTES:
        f.close()
        return
    with _closer_lock:
        if _closer is None or not _closer.is_alive():
            _closer = threading.Thread(target=_close_queued, name="spoolparse-close", daemon=True)
            _closer.start()
    _closing.put(f)


def closing() -> int:
    """Spools handed to the background close and not closed yet."""
    return _closing.unfinished_tasks


def wait_closed() -> None:
    """Return once every spool handed to the background close is closed."""
    _closing.join()


def _after_fork() -> None:
    global _closing, _closer, _closer_lock, _pool_lock, _made_lock
    # the parent's placements are the parent's to remove: a forked copy makes its own when it needs one (the
    # descriptors it inherited on them are its own copies, closed here)
    _made_lock = threading.Lock()
    for place in _places:
        with contextlib.suppress(OSError):
            os.close(place.fd)
    for top in [*_tops.values(), *_gone_tops]:
        top.close(remove=False)
    _places.clear()
    _tops.clear()
    _gone_tops.clear()
    _made_in.clear()
    # the parent goes on using its pooled spools: a forked copy must not make them its own (a new lock first:
    # another thread of the parent may have held the old one at the fork)
    _pool_lock = threading.Lock()
    empty_pool()
    _closing = queue.Queue()  # the parent's thread, and its queue, are not ours
    _closer = None
    _closer_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
