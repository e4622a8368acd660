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

Three ways to start a child (:class:`spoolparse.process.Child` picks one),
each leaving nothing behind if we die at any instant:

- **direct**, when there is no cgroup to join and no ``preexec_fn``: one
  ``exec`` through ``vfork``, no parent-death signal. The child carries our
  owner mark in its environment, which covers the instant between the fork
  and the guardian's hold (:mod:`spoolparse._guardian` sweeps it a while
  after we are gone, for a child still in its ``exec``). The cheapest
  start: one program run instead of three.
- **gated** (:func:`gated_argv`, :class:`Gate`), when the child must join
  cgroups before it runs and its stdin is ``/dev/null``: no Python runs
  between fork and exec, so :mod:`subprocess` still uses ``vfork`` (a
  ``fork``'s page-table copy and the parent's write faults that follow grow
  with our memory: 5 ms against 0.5 ms of parent CPU here). The child runs a
  few lines of ``/bin/sh`` that join its cgroups and wait on the gate, a
  pipe as stdin, until the parent has told the guardian about the group;
  then ``setpriv --pdeathsig KILL`` execs the agent with stdin
  ``/dev/null``. If we die before opening the gate, the child reads end of
  file and exits without running anything.
- **preexec** (:func:`deathsig_preexec` and the guardian's ``Registration``)
  otherwise: the same steps in a ``preexec_fn``, which makes
  :mod:`subprocess` ``fork``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import queue
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["spawn", "mark_long_lived", "deathsig_preexec", "gated_argv", "Gate", "check_program"]

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


# -- the gated start -----------------------------------------------------------

#: ``sh -c SHIM spoolparse-start N PROCS... CMD...``: write our pid into N ``cgroup.procs`` files, wait for
#: the gate's line on stdin (end of file: the parent died first, run nothing), exec CMD with stdin /dev/null.
_SHIM = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ >"$1" || exit 126; n=$((n - 1)); shift; done; '
    'IFS= read -r go || exit 126; exec "$@" </dev/null'
)
_SH = "/bin/sh"
_deathsig_exec: list[str] | None = None
_deathsig_checked = False
_deathsig_lock = threading.Lock()


def _find_deathsig_exec() -> list[str] | None:
    """``setpriv --pdeathsig KILL --`` where util-linux has it (checked once by running it)."""
    global _deathsig_exec, _deathsig_checked
    with _deathsig_lock:
        if not _deathsig_checked:
            _deathsig_checked = True
            setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
            if setpriv is not None and _prctl is not None and os.access(_SH, os.X_OK):
                cmd = [setpriv, "--pdeathsig", "KILL", "--"]
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    probe = subprocess.run(
                        [*cmd, _SH, "-c", ":"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, timeout=10,
                    )
                    if probe.returncode == 0:
                        _deathsig_exec = cmd
        return _deathsig_exec


def gated_argv(argv: list[str], cgroup_procs: list[str]) -> list[str] | None:
    """The argv that starts ``argv`` behind a :class:`Gate`, or ``None`` where that cannot be done here."""
    if not sys.platform.startswith("linux"):
        return None
    deathsig = _deathsig_exec if _deathsig_checked else _find_deathsig_exec()
    if deathsig is None:
        return None
    return [_SH, "-c", _SHIM, "spoolparse-start", str(len(cgroup_procs)), *cgroup_procs, *deathsig, *argv]


class Gate:
    """The gated child's stdin: nothing of the agent runs before :meth:`open` (see the module's docstring)."""

    def __init__(self) -> None:
        # close-on-exec: no other child started meanwhile may hold an end (subprocess dups ``r`` to stdin)
        self.r, self.w = os.pipe2(os.O_CLOEXEC)

    def started(self) -> None:
        """The child has its copy: ours goes."""
        if self.r >= 0:
            os.close(self.r)
            self.r = -1

    def open(self) -> None:
        """Let the child run the agent (it then reads stdin from ``/dev/null``)."""
        if self.w >= 0:
            with contextlib.suppress(OSError):  # a child that could not join its cgroup is gone already
                os.write(self.w, b"\n")
        self.close()

    def close(self) -> None:
        """Without :meth:`open`: the child reads end of file and exits without running anything."""
        self.started()
        if self.w >= 0:
            os.close(self.w)
            self.w = -1


def check_program(argv0: str, *, env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> bool:
    """Raise what :class:`subprocess.Popen` raises when ``argv0`` cannot be found or executed (the gated
    child finds out only after the fork, as an exit status); ``False`` when only ``execve`` itself can tell
    (not an ELF file nor a ``#!`` script: ``setpriv`` would run it with ``/bin/sh`` where Popen fails)."""
    if os.sep in argv0:
        candidates = [argv0 if cwd is None else os.path.join(cwd, argv0)]
    else:
        candidates = [os.path.join(d, argv0) for d in os.get_exec_path(env)]
    err = errno.ENOENT
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK):
            try:
                with open(path, "rb") as f:
                    magic = f.read(4)
            except OSError:
                return False
            return magic == b"\x7fELF" or magic.startswith(b"#!")
        err = errno.EACCES
    raise OSError(err, os.strerror(err), argv0)


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
