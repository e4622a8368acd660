"""Waking when a spool grows: inotify where the kernel has it, bounded polling elsewhere.

A spool is a nameless file, but ``/proc/self/fd/N`` resolves to its inode, so
inotify can watch it for the child's writes (``IN_MODIFY``). Together with a
pidfd for the child's exit this lets a follower sleep while the child is
silent and wake within microseconds of a write. Where inotify is missing (not
Linux, ``ctypes`` unavailable, the per-user instance limit reached) callers
fall back to polling with a backoff capped at :data:`POLL_IDLE`. Synchronous
followers share one instance per process (:class:`SpoolWaiter`); an asyncio
event loop has one of its own (:mod:`spoolparse.aio`).

A watch holds a reference to its inode (a deleted spool keeps its blocks
while watched), so every watch is removed before its spool is closed.

.. seealso:: :manpage:`inotify(7)`, :func:`os.pidfd_open`
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import math
import os
import select
import struct
import sys
import threading
import time

from .. import _limits
from .._signals import helper_thread

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

    :meth:`drain` never blocks: wait on :meth:`fileno` first (``poll``, or
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
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            if len(data) % _EVENT.size == 0:
                # a file's watch names nothing, so its events are fixed-size: a batch of them is read in C
                # (a loop supervising hundreds of agents gets one per write of each)
                ints = memoryview(data).cast("i")
                if not any(ints[3::4]) and set(ints[1::4]) == {_IN_MODIFY}:
                    fired.update(ints[0::4])
                    continue
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
        # an instance dropped unclosed (an event loop's, at exit) frees its descriptor; quietly, even when
        # __init__ never finished (an interrupt or EMFILE before _fd was set)
        if getattr(self, "_fd", -1) >= 0:
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


class _Dispatcher:
    """The process's one inotify instance, shared by every synchronous follower of every thread.

    A thread of its own sleeps on the instance and, for each watch that saw a
    write, signals the eventfd of the follower that holds it: followers never
    read the instance themselves, so a write wakes exactly its own follower
    (no herd) and no wake-up is lost between two threads. One instance per
    process keeps far below the per-user limit (128 by default) however many
    threads run children; closing an instance that held watches costs a
    kernel grace period (about 8 ms), so it is kept for the process's life.
    """

    def __init__(self) -> None:
        self.ino = Inotify()
        self.lock = threading.Lock()
        self.owners: dict[int, set[int]] = {}  # watch descriptor -> eventfds of the followers holding it
        threading.Thread(target=self._loop, name="spoolparse-inotify", daemon=True).start()

    def watch(self, fds: tuple[int, ...], efd: int) -> list[int]:
        wds: list[int] = []
        with self.lock:
            try:
                for fd in fds:
                    wd = self.ino.watch(fd)
                    self.owners.setdefault(wd, set()).add(efd)
                    wds.append(wd)
            except OSError:
                self._drop(wds, efd)
                raise
        return wds

    def unwatch(self, wds: list[int], efd: int) -> None:
        # under the lock: once this returns, the eventfd is never written again and may be closed
        with self.lock:
            self._drop(wds, efd)

    def _drop(self, wds: list[int], efd: int) -> None:
        for wd in wds:
            holders = self.owners.get(wd)
            if holders is None:
                continue
            holders.discard(efd)
            if not holders:
                del self.owners[wd]
                self.ino.unwatch(wd)

    def _loop(self) -> None:
        helper_thread()
        p = select.poll()
        p.register(self.ino.fileno(), select.POLLIN)
        while True:
            p.poll()
            with self.lock:
                fired = self.ino.drain()
                if self.ino.overflowed:  # events were lost: wake everyone, each looks for itself
                    self.ino.overflowed = False
                    fired = set(self.owners)
                targets = {efd for wd in fired for efd in self.owners.get(wd, ())}
                for efd in targets:
                    with contextlib.suppress(OSError):
                        os.eventfd_write(efd, 1)
            # writes meanwhile merge into one event per spool (the kernel merges a repeated event): a
            # steady writer wakes its follower at most once per READ_GAP, not once per write
            time.sleep(_limits.READ_GAP)


_dispatcher: _Dispatcher | None = None
_dispatcher_failed = False
_dispatcher_lock = threading.Lock()


def _shared_dispatcher() -> _Dispatcher | None:
    """The process's dispatcher, started on first use; ``None`` where inotify cannot be had."""
    global _dispatcher, _dispatcher_failed
    if _dispatcher is not None or _dispatcher_failed:
        return _dispatcher
    with _dispatcher_lock:
        if _dispatcher is None and not _dispatcher_failed:
            try:
                if not hasattr(os, "eventfd"):
                    raise OSError(errno.ENOSYS, "no eventfd")
                _dispatcher = _Dispatcher()
            except OSError:
                # ENOSYS, or EMFILE at the per-user instance limit: followers poll (and we try no more)
                _dispatcher_failed = True
    return _dispatcher


def _forget_after_fork() -> None:
    # a forked child has no dispatcher thread: it makes its own if it ever follows a spool
    global _dispatcher, _dispatcher_failed, _dispatcher_lock
    _dispatcher, _dispatcher_failed, _dispatcher_lock = None, False, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class SpoolWaiter:
    """Blocks a synchronous follower until a spool grows, the child exits, or time passes.

    Watches go to the process's one inotify instance; this waiter is woken
    through an eventfd of its own. Sleeps in :func:`select.poll` (descriptor
    numbers past 1024 are fine). The pidfd is the caller's. ``wakeups``
    counts the returns from :meth:`wait`.
    """

    def __init__(self, spool_fds: tuple[int, ...], pidfd: int) -> None:
        self.pidfd = pidfd
        self.wakeups = 0
        self._wds: list[int] = []
        self._efd = -1
        self._dispatcher = _shared_dispatcher()
        if self._dispatcher is not None:
            try:
                self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
                self._wds = self._dispatcher.watch(spool_fds, self._efd)
            except OSError:
                self.close()
        self._poll = select.poll()
        for fd in (self._efd, pidfd):
            if fd >= 0:
                self._poll.register(fd, select.POLLIN)

    @property
    def event_driven(self) -> bool:
        """Whether writes and exit both wake the waiter (else it must poll)."""
        return self._efd >= 0 and self.pidfd >= 0

    def next_interval(self, previous: float | None) -> float:
        """How long to sleep next: ``previous`` is the last idle sleep, ``None`` after new output."""
        return next_interval(previous, event_driven=self.event_driven)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, less when the child writes or exits."""
        self._poll.poll(math.ceil(max(0.0, timeout) * 1000))
        self.wakeups += 1
        if self._efd >= 0:
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(self._efd)

    def close(self) -> None:
        """Remove this waiter's watches before its spools close (a watch pins the inode); idempotent."""
        if self._efd >= 0:
            if self._dispatcher is not None:
                self._dispatcher.unwatch(self._wds, self._efd)
            self._wds.clear()
            os.close(self._efd)
            self._efd = -1
