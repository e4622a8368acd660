"""Starting a child that dies with us: ``PR_SET_PDEATHSIG`` from a thread that lives as long as we do.

The kernel sends the parent-death signal when the *thread* that forked the
child exits, not the process. A child started from a short-lived thread (a
``ThreadPoolExecutor`` worker, a thread per request) would be killed when that
thread ends. So a child is forked either from the main thread (which lives
until the process exits), from a thread that declared itself long-lived with
:func:`mark_long_lived`, or else by one shared daemon thread that never exits
(a hand-over costs some tens of microseconds).

The signal is SIGKILL: by the time it fires nobody is left to read the
answer. It reaches only the direct child; the guardian
(:mod:`spoolparse._guardian`) ends the rest of its group and cgroup.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["spawn", "mark_long_lived", "deathsig_preexec"]

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
_local = threading.local()


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = lib.prctl
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        fn.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return fn


_prctl = _load_prctl()


def deathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` part: SIGKILL the child when its parent thread dies (``None`` off Linux)."""
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()
    sigkill = int(signal.SIGKILL)

    def set_deathsig() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if os.getppid() != parent:  # we died between fork and prctl: nobody will end this child
            os.kill(os.getpid(), sigkill)

    return set_deathsig


def mark_long_lived() -> None:
    """Declare the calling thread to outlive every child it starts (the runner's spawner threads)."""
    _local.long_lived = True


def _here() -> bool:
    return threading.current_thread() is threading.main_thread() or getattr(_local, "long_lived", False)


_jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _serve() -> None:
    mark_long_lived()
    while True:
        fn, fut = _jobs.get()
        if not fut.set_running_or_notify_cancel():
            continue
        try:
            fut.set_result(fn())
        except BaseException as e:
            fut.set_exception(e)


def spawn(fn: Callable[[], T]) -> T:
    """Call ``fn`` (which forks) on a thread that outlives the child: this one, or the shared spawner."""
    global _thread
    if _here():
        return fn()
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            # a daemon thread waiting on a queue is never ended before the process is
            _thread = threading.Thread(target=_serve, name="spoolparse-spawn", daemon=True)
            _thread.start()
    fut: Future[T] = Future()
    _jobs.put((fn, fut))
    return fut.result()


def _after_fork() -> None:
    global _thread, _jobs, _thread_lock
    _thread = None
    _jobs = queue.SimpleQueue()
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
