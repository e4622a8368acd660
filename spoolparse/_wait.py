"""Waking when a spool grows: inotify where the kernel has it, bounded polling elsewhere.

A spool is a nameless file, but ``/proc/self/fd/N`` resolves to its inode, so
inotify can watch it for the child's writes (``IN_MODIFY``). Together with a
pidfd for the child's exit this lets a follower sleep while the child is
silent and wake within microseconds of a write. Where inotify is missing (not
Linux, ``ctypes`` unavailable, the per-user instance limit reached) callers
fall back to polling with a backoff capped at :data:`POLL_IDLE`.

A watch holds a reference to its inode (a deleted spool keeps its blocks
while watched), so every watch is removed before its spool is closed.

.. seealso:: :manpage:`inotify(7)`, :func:`os.pidfd_open`
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading

from . import _limits

__all__ = ["Inotify", "open_inotify", "SpoolWaiter", "next_interval", "IDLE_WAKE", "POLL_IDLE"]

# The idle sleep is a safety net for writes that raise no inotify event (``mmap``);
# the polling cap keeps a follower without inotify to 4 idle wake-ups a second.
IDLE_WAKE = _limits.IDLE_WAKE
POLL_IDLE = _limits.POLL_IDLE

_IN_MODIFY = 0x00000002
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)

_libc: ctypes.CDLL | None = None
_libc_tried = False


def _load_libc() -> ctypes.CDLL | None:
    global _libc, _libc_tried
    if _libc_tried:
        return _libc
    _libc_tried = True
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    _libc = lib
    return lib


class Inotify:
    """One inotify instance watching files, by descriptor, for writes.

    :meth:`drain` never blocks: wait on :meth:`fileno` first (``select``, or
    an event loop's ``add_reader``).
    """

    def __init__(self) -> None:
        lib = _load_libc()
        if lib is None:
            raise OSError(errno.ENOSYS, "inotify is not available")
        fd = int(lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self._lib = lib
        self._fd: int = fd
        self.overflowed = False

    def fileno(self) -> int:
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def watch(self, fd: int) -> int:
        """Watch the file open as ``fd`` for writes; returns the watch descriptor."""
        wd = int(self._lib.inotify_add_watch(self._fd, f"/proc/self/fd/{fd}".encode(), _IN_MODIFY))
        if wd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return wd

    def unwatch(self, wd: int) -> None:
        """Stop watching (a watch the kernel already dropped is fine)."""
        if self._fd >= 0:
            self._lib.inotify_rm_watch(self._fd, wd)

    def drain(self) -> set[int]:
        """The watch descriptors that saw writes since last time (reads every queued event).

        After a queue overflow :attr:`overflowed` is set: any watch may have
        seen writes.
        """
        fired: set[int] = set()
        while self._fd >= 0:
            try:
                data = os.read(self._fd, 4096)
            except BlockingIOError:
                break
            if not data:
                break
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
                pos += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW:
                    self.overflowed = True
                elif not mask & _IN_IGNORED:
                    fired.add(wd)
        return fired

    def close(self) -> None:
        """Close the instance; the kernel removes its watches (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        # a thread's kept instance goes with the thread's locals
        self.close()


def open_inotify() -> Inotify | None:
    """A new :class:`Inotify`, or ``None`` where inotify cannot be used."""
    try:
        return Inotify()
    except OSError:
        return None


def next_interval(previous: float | None, *, event_driven: bool) -> float:
    """The next idle sleep of a follower: long when events wake it, else a capped backoff."""
    if event_driven:
        return IDLE_WAKE
    if previous is None:
        return _limits.POLL_MIN
    return min(previous * 2, POLL_IDLE)


_per_thread = threading.local()


def _thread_inotify() -> Inotify | None:
    """This thread's inotify instance, made on first use and kept.

    Closing an instance that has held a watch makes the kernel wait for a
    grace period (about 8 ms here), which would cap ``run`` near 100 calls a
    second; adding and removing watches on a kept instance costs 0.1 ms. The
    instance closes with its thread.
    """
    ino: Inotify | None = getattr(_per_thread, "ino", None)
    if ino is None or ino.closed:
        ino = open_inotify()
        _per_thread.ino = ino
    return ino


class SpoolWaiter:
    """Blocks a synchronous follower until a spool grows, the child exits, or time passes.

    Uses the calling thread's inotify instance (one descriptor per thread,
    kept between runs); the pidfd is the caller's. ``wakeups`` counts the
    returns from :meth:`wait`.
    """

    def __init__(self, spool_fds: tuple[int, ...], pidfd: int) -> None:
        self.pidfd = pidfd
        self.wakeups = 0
        self._wds: list[int] = []
        self._ino = _thread_inotify()
        if self._ino is not None:
            try:
                for fd in spool_fds:
                    self._wds.append(self._ino.watch(fd))
            except OSError:
                self.close()

    @property
    def event_driven(self) -> bool:
        """Whether writes and exit both wake the waiter (else it must poll)."""
        return self._ino is not None and self.pidfd >= 0

    def next_interval(self, previous: float | None) -> float:
        """How long to sleep next: ``previous`` is the last idle sleep, ``None`` after new output."""
        return next_interval(previous, event_driven=self.event_driven)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, less when the child writes or exits."""
        fds = [fd for fd in (self._ino.fileno() if self._ino is not None else -1, self.pidfd) if fd >= 0]
        select.select(fds, [], [], max(0.0, timeout))
        self.wakeups += 1
        if self._ino is not None:
            self._ino.drain()

    def close(self) -> None:
        """Remove this waiter's watches (the instance stays for the thread's next run)."""
        if self._ino is not None:
            for wd in self._wds:
                self._ino.unwatch(wd)
            self._ino.drain()
            self._wds.clear()
            self._ino = None
