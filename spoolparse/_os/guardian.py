"""A small process that ends our children's groups and cgroups when we die, even by ``kill -9``.

``PR_SET_PDEATHSIG`` (see :mod:`spoolparse._os.spawn`) reaches only the direct
child; what it started, and what left its process group (``setsid``), needs
someone who outlives us. One guardian per spoolparse process, started on the
first spawn: ``python -I -S`` running this file, so it imports nothing of
spoolparse (about 15 ms once). It reads lines from a pipe whose only
writer is us::

    +g <pgid>      a process group was made        -g <pgid>   it is gone
    +c <path>      a cgroup directory is made      -c <path>   it is gone
                   (told before it exists)
    +o <token>     our owner mark (the first line)
    +m <token>     every process whose environment has SPOOLPARSE_RUNNER_MARK=<token>
    +f <path>      a file to delete once all is gone

Every child we start carries our owner mark in its environment
(:data:`OWNER_VAR`, a token made for each guardian): what the agent starts
inherits it, in whatever group or session it ends up, unless it clears its
environment. The token goes to the guardian over the pipe, never on its
command line, which every user of the host can read (``ps``): with it,
another user could find our agents, or give a process of hers our mark.

When the pipe closes (we exited, crashed, or were killed) it sends SIGKILL to
every group and cgroup still listed and to every process carrying our owner
mark (and its group, when it leads one), repeats that for up to
:data:`GIVE_UP` seconds while any is left, removes the cgroup directories,
and exits.

The owner mark is what makes a start without a gate safe
(:mod:`spoolparse.child`): a child is known to the guardian only after
the fork returns, and we may be killed before. A child caught between its
fork and the end of its ``execve`` when we die still shows our environment,
not its marked one, and has already closed its copy of the pipe; so the
owner sweep goes on for :data:`OWNER_SWEEP_MIN` seconds even when it finds
nothing, by which time such a child has its mark.

A mark is for a process that starts agents on someone else's behalf and can
be killed by it: a Ray node runner (an actor process), which ``ray.kill``,
Ray's memory monitor or a lost node end with SIGKILL, and whose agents' own
children may have left every group and have no cgroup. The runner marks its
environment (every agent inherits the mark) and starts its guardian
``detach``-ed: the process started here forks it and exits, so the guardian
is nobody's child by the time an agent runs (Ray kills a dying worker's
children, which must not include the one who cleans up after it). The mark
sweep reads ``/proc/*/environ`` until no marked process is left (at most
:data:`SWEEP_FOR` seconds).

A normal exit lists nothing: every run removes its entries once its child and
leftovers are gone. :meth:`Guardian.finish` closes the pipe on purpose and
waits until the guardian's work is over (it closes its stdout as it exits).
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
from collections.abc import Mapping

__all__ = [
    "Guardian", "Registration", "guardian", "GIVE_UP", "MARK_VAR", "OWNER_SWEEP_MIN", "OWNER_VAR", "SWEEP_FOR",
    "marked",
]

#: Seconds the guardian keeps killing what is left before it gives up (D-state processes).
GIVE_UP = 1.0
#: The environment variable carrying a runner's mark.
MARK_VAR = "SPOOLPARSE_RUNNER_MARK"
#: The environment variable carrying the owner mark of every child we start.
OWNER_VAR = "SPOOLPARSE_OWNER"
#: Seconds the guardian keeps sweeping marked processes (a process may be mid-fork).
SWEEP_FOR = 2.0
#: Seconds the owner sweep goes on after we are gone even when it finds nothing (a child may be mid-exec).
OWNER_SWEEP_MIN = 0.5
#: Seconds a detached guardian may take to start.
READY_WITHIN = 30.0


# -- the parent's side ---------------------------------------------------------


_FORK_HOOK = hasattr(os, "register_at_fork")


class Guardian:
    """Our end of the pipe to the guardian process (thread-safe; never raises)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._out = -1  # the read end of its stdout: end of file once its work is over
        self._guardian_pid: int | None = None
        self._failed = False
        self._pid = os.getpid()
        self._owner = ""  # the owner mark of the guardian running now
        # our environment as last marked: (owner, a copy of os.environ's data, the marked mapping)
        self._marked: tuple[str, dict[bytes, bytes], dict[str, str]] | None = None

    @property
    def pid(self) -> int | None:
        """The guardian's pid, once started."""
        return self._guardian_pid if self._fd >= 0 else None

    def _start(self, detach: bool = False) -> bool:
        # a forked copy finds the pipe closed (_after_fork): no getpid() system call on every send
        if self._fd >= 0 and (_FORK_HOOK or self._pid == os.getpid()):
            return True
        if self._failed:
            return False
        owner = os.urandom(8).hex()
        argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid())]
        try:
            self._proc = subprocess.Popen(
                [*argv, "--detach"] if detach else argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
                # never swept by a mark: ours, a runner's, or the owner mark of the one who started us
                env={k: v for k, v in os.environ.items() if k not in (MARK_VAR, OWNER_VAR)},
            )
        except (OSError, ValueError):
            self._failed = True  # a bare interpreter (no sys.executable): PDEATHSIG alone
            return False
        assert self._proc.stdin is not None and self._proc.stdout is not None
        # ours alone: raw descriptors, so no buffered file object ever tries to flush one at exit
        self._fd = os.dup(self._proc.stdin.fileno())
        self._out = os.dup(self._proc.stdout.fileno())
        for fd in (self._fd, self._out):
            os.set_inheritable(fd, False)
        self._proc.stdin.close()
        self._proc.stdout.close()
        with contextlib.suppress(OSError):  # gone already: the next send finds out
            os.write(self._fd, f"+o {owner}\n".encode())  # the first line: far below the pipe's buffer
        self._pid = os.getpid()
        self._guardian_pid = self._proc.pid
        self._owner = owner
        if detach:
            ready = _read_within(self._out, READY_WITHIN, 16)  # "r<pid>\n", written at once
            if ready is None or not ready.startswith(b"r") or not ready.endswith(b"\n"):
                self._proc.kill()  # never ready: whatever it is doing, it is not watching
                self._proc.wait()
                self._close()
                self._failed = True
                return False
            self._proc.wait()  # the process that forked it, gone already
            self._guardian_pid = int(ready[1:])
        return True

    def _close(self) -> subprocess.Popen[bytes] | None:
        """Forget the guardian (its pipes closed): the next start makes a new one."""
        for fd in (self._fd, self._out):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._out = -1
        proc, self._proc = self._proc, None
        return proc

    def _send(self, line: str) -> bool:
        with self._lock:
            if not self._start():
                return False
            try:
                os.write(self._fd, line.encode("utf-8", "surrogateescape"))
            except OSError:
                self._failed = True  # the guardian is gone: PDEATHSIG and our own cleanup remain
                return False
            return True

    def marked_env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        """``env`` (``None``: ours) with our owner mark added; ``None`` when no guardian can run."""
        with self._lock:
            if not self._start():
                return None
            owner = self._owner
        if env is not None:
            return {**env, OWNER_VAR: owner}
        # decoding all of os.environ is most of the cost of a start's environment: reused while it is unchanged
        data: dict[bytes, bytes] | None = getattr(os.environ, "_data", None)
        last = self._marked
        if last is not None and last[0] == owner and last[1] == data:
            return last[2]
        marked = {**os.environ, OWNER_VAR: owner}
        if isinstance(data, dict):
            self._marked = (owner, dict(data), marked)
        return marked

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

    def hold_cgroups(self, cgroups: list[str]) -> bool:
        """Tell the guardian about cgroup directories before anything joins them (a start with no gate);
        ``False`` when it was not told (no guardian runs)."""
        return self._send("".join(f"+c {d}\n" for d in cgroups))

    def hold_cgroup(self, path: str) -> bool:
        """Tell the guardian about a cgroup directory before it is made: if we die at any instant after, it kills
        what is in it and removes it (one never made is nothing to do), so no instant leaves one behind."""
        return self.hold_cgroups([path])

    def release(self, pgid: int | None, cgroups: list[str]) -> None:
        """The group (``None``: none) is empty and the cgroup directories are gone: the guardian forgets them.

        A cgroup is released once its directory is gone, not when its processes are: until then the
        guardian would kill what is in it and remove it if we died."""
        lines = [] if pgid is None else [f"-g {pgid}\n"]
        self._send("".join(lines + [f"-c {d}\n" for d in cgroups]))

    def start(self, *, detach: bool = False) -> bool:
        """Start the guardian now (else it starts with the first child); ``False`` when it cannot run.

        ``detach``: it is made nobody's child, and this returns once it is on its own (about 20 ms; see
        the module docstring). It applies when this call starts the guardian: call it before any spawn.
        """
        with self._lock:
            return self._start(detach)

    def mark(self, token: str) -> None:
        """Every process carrying ``token`` in :data:`MARK_VAR` is killed when we are gone."""
        self._send(f"+m {token}\n")

    def leave(self, path: str) -> None:
        """``path`` is deleted once all is killed (we may not live to)."""
        self._send(f"+f {path}\n")

    def finish(self, timeout: float) -> bool:
        """Set the guardian off now and wait (at most ``timeout`` seconds) until its work is over.

        It kills what it holds and sweeps the marks as if we had died; a later spawn starts a new guardian.
        """
        with self._lock:
            if self._fd < 0 or self._pid != os.getpid():
                return True
            os.close(self._fd)
            self._fd = -1
            done = _read_within(self._out, timeout, -1) is not None
            proc = self._close()
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.1 if done else 0)  # ours when not detached: reaped, not left a zombie
        return done

    def _after_fork(self) -> None:
        if getattr(_forking, "registration", None) is not None:
            return  # a child of ours about to exec: its Registration writes first, and exec closes the pipe
        # a forked copy of us must not hold the pipe open (the guardian would outwait our death)
        for fd in (self._fd, self._out):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._out = -1
        self._proc = None
        self._failed = False
        self._lock = threading.Lock()


def _read_within(fd: int, timeout: float, n: int) -> bytes | None:
    """One read of at most ``n`` bytes from ``fd`` (``n=-1``: read until end of file, then ``b""``);
    ``None`` after ``timeout``."""
    poller = select.poll()  # poll, not select: a busy parent's descriptor numbers may pass 1,024
    poller.register(fd, select.POLLIN)
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            return None
        try:
            data = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            return b""
        if not data or n > 0:
            return data[:n] if n > 0 else b""


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
                # the child registered itself, then its exec failed: its number is free for reuse (its cgroups
                # are released by whoever removes them, once they are gone)
                child = int.from_bytes(self._pid[:8], "little")
                if child > 0:
                    self._owner.release(child, [])
        finally:
            self._pid.close()


guardian = Guardian()
if _FORK_HOOK:
    os.register_at_fork(after_in_child=guardian._after_fork)


# -- the guardian process --------------------------------------------------------


def _kill_cgroup(path: str, exclude: frozenset[int] = frozenset()) -> bool:
    """SIGKILL what is in the cgroup and in the cgroups nested in it (a task that runs a runner of its own), and
    remove them, deepest first; ``True`` once all are gone (or were never made), ``False`` while any is left:
    tried again until :data:`GIVE_UP`, then left to the next runner's sweep."""
    gone = True
    for d in _subtree(path):
        with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.kill"), "w") as f:
            f.write("1")
        try:
            with open(os.path.join(d, "cgroup.procs"), "rb") as f:
                pids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            if pid in exclude:  # never ours: a thread of our parent's may be in a task's cgroup, starting it
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(d)
        except FileNotFoundError:
            pass
        except OSError:
            gone = False  # processes still dying, or busy: not gone until it is
    return gone


def _subtree(path: str) -> list[str]:
    """``path`` and the directories below it, deepest first (``[path]`` when it cannot be listed)."""
    out: list[str] = []
    with contextlib.suppress(OSError), os.scandir(path) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                out += _subtree(entry.path)
    out.append(path)
    return out


def _kill_group(pgid: int) -> bool:
    """SIGKILL the group; ``True`` when no process is in it any more."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    except OSError:
        return True
    return False


def marked(token: str, *, exclude: frozenset[int] = frozenset(), var: str = MARK_VAR) -> list[int]:
    """Live processes whose environment carries ``token`` in ``var`` (zombies excluded)."""
    needle = f"{var}={token}".encode()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            if needle not in env.split(b"\0"):
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _kill_marked(token: str, exclude: frozenset[int], var: str = MARK_VAR) -> int:
    """SIGKILL every process carrying ``token`` in ``var`` (and the group of one that leads it); how many
    were seen."""
    pids = marked(token, exclude=exclude, var=var)
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:  # an agent leads its own group: take the group with it
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def serve(fd: int, parent: int = 0) -> None:
    """Read the parent's lines from ``fd``; when it closes, kill what is listed and what carries the
    owner mark it gave (never ``parent`` nor us)."""
    groups: set[int] = set()
    cgroups: set[str] = set()
    marks: set[str] = set()
    files: list[str] = []
    owner = ""
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
                elif op == b"+m":
                    marks.add(arg.decode("utf-8", "surrogateescape"))
                elif op == b"+f":
                    files.append(arg.decode("utf-8", "surrogateescape"))
                elif op == b"+o":
                    owner = arg.decode("utf-8", "surrogateescape")
            except ValueError:
                continue
    exclude = frozenset({os.getpid(), parent})
    start = time.monotonic()
    end = start + (SWEEP_FOR if marks else GIVE_UP)
    owned = bool(owner)
    while groups or cgroups or marks or owned:
        groups = {g for g in groups if not _kill_group(g)}
        cgroups = {c for c in cgroups if not _kill_cgroup(c, exclude)}
        marks = {m for m in marks if _kill_marked(m, exclude)}
        if owned:
            found = _kill_marked(owner, exclude, OWNER_VAR)
            owned = found > 0 or time.monotonic() < start + OWNER_SWEEP_MIN
        if time.monotonic() >= end:
            break
        # killed members turn into zombies for their new parent to reap: looked at again soon; a mark sweep
        # reads all of /proc, so once only marks are left, every 50 ms
        time.sleep(0.01 if groups or cgroups else 0.05)
    for path in files:
        with contextlib.suppress(OSError):
            os.unlink(path)


def main(argv: list[str]) -> None:
    """``guardian.py PARENT_PID [--detach]``: serve the pipe on stdin (its first line gives the owner mark);
    stdout closes when the work is over."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    if "--detach" in argv:
        if os.fork():
            os._exit(0)  # it lives on as the grandchild, no longer the parent's child
        os.write(1, b"r%d\n" % os.getpid())
    args = [a for a in argv if a != "--detach"]
    serve(0, int(args[0]) if args and args[0].isdigit() else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
