"""Where spool files live, how they are made, and when a spool is full.

A spool is a :func:`tempfile.TemporaryFile`: on Linux an ``O_TMPFILE`` file
that never has a name, else one unlinked at creation; mode 0600 either way.
Closing one deletes it; a large one is closed by a background thread
(:func:`close_spool`), so that freeing its blocks never holds up the thread
that supervises children.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import resource
import stat
import tempfile
import threading
import warnings
from typing import IO

from . import _limits
from .errors import SpoolDirError, SpoolDirWarning, SpoolFullError

__all__ = ["ENV_VAR", "resolve_spool_dir", "open_spool", "spool_problem", "close_spool", "wait_closed"]

#: The environment variable naming the spool directory.
ENV_VAR = "PDD_AGENT_SPOOL_DIR"

_warned: set[tuple[str, str]] = set()


def _warn_once(path: str, why: str) -> None:
    key = (path, why)
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(
        f"{ENV_VAR}={path!r} {why}; spooling to {tempfile.gettempdir()!r} instead", SpoolDirWarning, stacklevel=4
    )


def _unusable(path: str) -> tuple[int, str] | None:
    """``(errno, why)`` when ``path`` cannot hold spools."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return errno.ENOENT, "does not exist"
    except OSError as e:
        return e.errno or errno.EIO, f"cannot be read ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return errno.ENOTDIR, "is not a directory"
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
    """The directory spools go to: ``spool_dir``, else ``$PDD_AGENT_SPOOL_DIR``, else the temp dir.

    An unusable ``spool_dir`` argument raises :class:`SpoolDirError` (an ``OSError``); an unusable
    environment variable warns once per process (:class:`SpoolDirWarning`)
    and falls back to the system temp dir.
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
        _warn_once(env, problem[1])
    return tempfile.gettempdir()


def open_spool(directory: str) -> IO[bytes]:
    """A new nameless spool file in ``directory``, opened for reading and writing.

    On Linux an ``O_TMPFILE`` file opened without ``O_EXCL``, so that a kept
    transcript (``batch --results``) can be given a name with ``linkat``
    instead of copied; only its owner can reach it (mode 0600, through our
    own ``/proc/self/fd``). Elsewhere, or where the filesystem has no
    ``O_TMPFILE``, :func:`tempfile.TemporaryFile`.
    """
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            fd = os.open(directory, tmpfile | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):  # the run's own failure (exit 125), not a usage error
                raise SpoolFullError(directory, 0, f"cannot create a spool: {e.strerror}") from e
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise SpoolDirError(
                    directory, e.errno or errno.EIO, f"cannot hold a spool file ({e.strerror})"
                ) from e
        else:
            return os.fdopen(fd, "w+b")
    try:
        return tempfile.TemporaryFile(dir=directory)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise SpoolFullError(directory, 0, f"cannot create a spool: {e.strerror}") from e
        raise SpoolDirError(directory, e.errno or errno.EIO, f"cannot hold a spool file ({e.strerror})") from e


def spool_problem(fds: tuple[int, ...], max_bytes: int | None, *, thorough: bool = True) -> str | None:
    """Why the spool is full, or ``None``: over ``max_bytes`` together, or (``thorough``) a spool at the
    file size limit (``RLIMIT_FSIZE``, which the child inherits) or no room left on its filesystem."""
    total = 0
    largest = 0
    for fd in fds:
        size = os.fstat(fd).st_size
        total += size
        largest = max(largest, size)
    if max_bytes is not None and total > max_bytes:
        return f"max_spool_bytes {max_bytes} exceeded"
    if not thorough:
        return None
    # a child that ignores SIGXFSZ (Python does) just fails its writes with EFBIG: only the size tells
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and largest >= limit:
        return f"file size limit (RLIMIT_FSIZE) of {limit} bytes reached"
    vfs = os.fstatvfs(fds[0])
    # root may write into the reserved blocks, so only the truly free ones count for it
    free = vfs.f_bfree if os.geteuid() == 0 else vfs.f_bavail
    if free == 0 and vfs.f_blocks > 0:
        return "no space left on the spool filesystem"
    return None


# -- closing -------------------------------------------------------------------

# Unbounded, so that handing a spool over never waits (it may be the supervising loop): a batch bounds the
# backlog instead, by starting no task while it is past CLOSING_MAX (see closing()).
_closing: queue.Queue[IO[bytes]] = queue.Queue()
_closer: threading.Thread | None = None
_closer_lock = threading.Lock()


def _close_queued() -> None:
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
    global _closing, _closer, _closer_lock
    _closing = queue.Queue()  # the parent's thread, and its queue, are not ours
    _closer = None
    _closer_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
