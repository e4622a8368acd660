"""A small process that ends our children's groups and cgroups when we die, even by ``kill -9``.

``PR_SET_PDEATHSIG`` (see :mod:`spoolparse._spawn`) reaches only the direct
child; what it started, and what left its process group (``setsid``), needs
someone who outlives us. One guardian per spoolparse process, started on the
first spawn: ``python -I -S`` running this file, so it imports nothing of
spoolparse (about 15 ms once). It reads lines from a pipe whose only
writer is us::

    +g <pgid>      a process group was made        -g <pgid>   it is gone
    +c <path>      a cgroup directory was made     -c <path>   it is gone

When the pipe closes (we exited, crashed, or were killed) it sends SIGKILL to
every group and cgroup still listed, repeats that for up to
:data:`GIVE_UP` seconds while any is left, removes the cgroup directories,
and exits. Nobody is left to read an answer by then, so there is no grace.
It sits in its own session, ignoring the terminal's signals, so a Ctrl-C
meant for us does not take it down first.

A normal exit lists nothing: every run removes its entries once its child and
leftovers are gone.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import select
import signal
import subprocess
import sys
import threading
import time

__all__ = ["Guardian", "Registration", "guardian", "GIVE_UP"]

#: Seconds the guardian keeps killing what is left before it gives up (D-state processes).
GIVE_UP = 1.0


# -- the parent's side ---------------------------------------------------------


class Guardian:
    """Our end of the pipe to the guardian process (thread-safe; never raises)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._failed = False
        self._pid = os.getpid()

    @property
    def pid(self) -> int | None:
        """The guardian's pid, once started."""
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> bool:
        if self._fd >= 0 and self._pid == os.getpid():
            return True
        if self._failed:
            return False
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
            )
        except (OSError, ValueError):
            self._failed = True  # a bare interpreter (no sys.executable): PDEATHSIG alone
            return False
        assert self._proc.stdin is not None
        # ours alone: a raw descriptor, so no buffered file object ever tries to flush it at exit
        self._fd = os.dup(self._proc.stdin.fileno())
        os.set_inheritable(self._fd, False)
        self._proc.stdin.close()
        self._pid = os.getpid()
        return True

    def _send(self, line: str) -> None:
        with self._lock:
            if not self._start():
                return
            try:
                os.write(self._fd, line.encode("utf-8", "surrogateescape"))
            except OSError:
                self._failed = True  # the guardian is gone: PDEATHSIG and our own cleanup remain

    def registration(self, cgroups: list[str]) -> Registration | None:
        """Made before a fork: the child tells the guardian about its group and cgroups itself (``None``
        when no guardian can run).

        The child writes from its ``preexec_fn``, after ``setsid`` and before ``exec``, so the group is
        known before the agent runs anything: a ``kill -9`` of us at any instant after the fork (we may
        not be scheduled again for a while on a busy host) still ends all that the agent starts.
        """
        with self._lock:
            if not self._start():
                return None
            return Registration(self, self._fd, cgroups)

    def hold(self, pgid: int, cgroups: list[str]) -> None:
        """Tell the guardian about a process group and its cgroup directories (from our side)."""
        self._send("".join([f"+g {pgid}\n"] + [f"+c {d}\n" for d in cgroups]))

    def release(self, pgid: int, cgroups: list[str]) -> None:
        """The group and cgroups are empty: the guardian forgets them."""
        self._send("".join([f"-g {pgid}\n"] + [f"-c {d}\n" for d in cgroups]))

    def start(self) -> bool:
        """Start the guardian now (else it starts with the first child); ``False`` when it cannot run."""
        with self._lock:
            return self._start()

    def _after_fork(self) -> None:
        if getattr(_forking, "registration", None) is not None:
            return  # a child of ours about to exec: its Registration writes first, and exec closes the pipe
        # a forked copy of us must not hold the pipe open (the guardian would outwait our death)
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1
        self._proc = None
        self._failed = False
        self._lock = threading.Lock()


#: Which Registration the thread is forking for (the at-fork handler of the child must keep the pipe open).
_forking = threading.local()


class Registration:
    """A ``preexec_fn`` part that registers the child with the guardian (see :meth:`Guardian.registration`).

    Fork inside ``with registration:`` (that thread's at-fork handler then leaves the pipe to the child).
    """

    def __init__(self, owner: Guardian, fd: int, cgroups: list[str]) -> None:
        self._owner = owner
        self._fd = fd
        self._cgroups = list(cgroups)
        self._tail = "".join(f"+c {d}\n" for d in cgroups).encode("utf-8", "surrogateescape")
        # where the child leaves its pid, for the undo of a failed exec (shared across the fork)
        self._pid = mmap.mmap(-1, 8)

    def __enter__(self) -> Registration:
        _forking.registration = self
        return self

    def __exit__(self, *exc: object) -> None:
        _forking.registration = None

    def __call__(self) -> None:  # in the child
        pid = os.getpid()
        self._pid[:8] = pid.to_bytes(8, "little")
        message = b"+g %d\n" % pid + self._tail
        if len(message) > select.PIPE_BUF:  # not one atomic write: from our side after the fork instead
            return
        # Popen has put SIGPIPE back to its default by now: a guardian that is gone must not kill the child
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        try:
            os.write(self._fd, message)
        except BrokenPipeError:
            signal.sigtimedwait({signal.SIGPIPE}, 0)  # take back the one the write raised
        except OSError:
            pass
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def done(self, pid: int | None) -> None:
        """After the fork, in the parent: ``pid`` of the started child, or ``None`` when the spawn failed."""
        try:
            if pid is not None and len(b"+g %d\n" % pid + self._tail) > select.PIPE_BUF:
                self._owner.hold(pid, self._cgroups)
            elif pid is None:
                # the child registered itself, then its exec failed: its number is free for reuse
                child = int.from_bytes(self._pid[:8], "little")
                if child > 0:
                    self._owner.release(child, self._cgroups)
        finally:
            self._pid.close()


guardian = Guardian()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=guardian._after_fork)


# -- the guardian process --------------------------------------------------------


def _kill_cgroup(path: str) -> bool:
    """SIGKILL what is in the cgroup; ``True`` when it is empty (then it is removed)."""
    with contextlib.suppress(OSError), open(os.path.join(path, "cgroup.kill"), "w") as f:
        f.write("1")
    try:
        with open(os.path.join(path, "cgroup.procs"), "rb") as f:
            pids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return True
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if pids:
        return False
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return True


def _kill_group(pgid: int) -> bool:
    """SIGKILL the group; ``True`` when no process is in it any more."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    except OSError:
        return True
    return False


def serve(fd: int) -> None:
    """Read the parent's lines from ``fd``; when it closes, kill what is listed."""
    groups: set[int] = set()
    cgroups: set[str] = set()
    pending = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            op, _, arg = line.partition(b" ")
            try:
                if op == b"+g":
                    groups.add(int(arg))
                elif op == b"-g":
                    groups.discard(int(arg))
                elif op == b"+c":
                    cgroups.add(arg.decode("utf-8", "surrogateescape"))
                elif op == b"-c":
                    cgroups.discard(arg.decode("utf-8", "surrogateescape"))
            except ValueError:
                continue
    end = time.monotonic() + GIVE_UP
    while groups or cgroups:
        groups = {g for g in groups if not _kill_group(g)}
        cgroups = {c for c in cgroups if not _kill_cgroup(c)}
        if time.monotonic() >= end:
            break
        time.sleep(0.01)  # killed members turn into zombies for their new parent to reap


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    serve(0)


if __name__ == "__main__":
    main()
