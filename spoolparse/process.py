"""Starting a child on spools, following it, and ending it (timeouts, group kill).

:class:`Child` owns one started child, its spools and its :class:`StreamParser`,
and never waits; the drivers do the waiting: :func:`run` here with a poll
loop, the asyncio driver from the event loop, the runner for many at once.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, Union

from . import _limits
from ._proc import proc_stats
from ._wait import SpoolWaiter
from .errors import SpawnError, SpoolFullError, UsageError
from .lines import Loads
from .parser import OnEvent, StreamParser
from .providers import Provider
from .providers.base import LiveEvent
from .result import Result
from .spool import open_spool, resolve_spool_dir, spool_problem

__all__ = ["Child", "run", "Input", "group_alive", "signal_group"]

Input = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", IO[bytes], None]
Argv = Union[Sequence[Union[str, "os.PathLike[str]"]], str]  # noqa: UP007 - a runtime alias


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; ``False`` when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live_members(pgid: int) -> bool:
    """Whether a process other than a zombie is in group ``pgid`` (reads /proc)."""
    return any(
        len(fields) >= 3 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X")
        for _, fields in proc_stats()
    )


def group_alive(pgid: int) -> bool:
    """Whether group ``pgid`` still has a live (non-zombie) process.

    Orphans killed in the group become zombies of PID 1, which may take a
    while to reap them; they hold nothing, so they count as gone.
    """
    if not signal_group(pgid, 0):
        return False
    return _live_members(pgid) if os.path.isdir("/proc") else True


def _stdin_for(inp: Input, spool_dir: str) -> tuple[Any, IO[bytes] | None]:
    """What to give the child as stdin, and a file to close afterwards.

    Nothing is held whole in memory: a real file is passed straight through,
    bytes and other readables are copied into a nameless file in bounded chunks.
    """
    if inp is None:
        return subprocess.DEVNULL, None
    if isinstance(inp, str):
        inp = inp.encode()
    if isinstance(inp, (bytes, bytearray, memoryview)):
        f = open_spool(spool_dir)
        view = memoryview(inp)
        for i in range(0, len(view), _limits.INPUT_CHUNK):
            f.write(view[i : i + _limits.INPUT_CHUNK])
        f.seek(0)
        return f, f
    if isinstance(inp, os.PathLike):
        try:
            f = open(inp, "rb")  # noqa: SIM115
        except OSError as e:
            raise UsageError(f"cannot read input {os.fspath(inp)!r}: {e.strerror}") from e
        return f, f
    fileno = getattr(inp, "fileno", None)
    if fileno is not None:
        try:
            fileno()
            return inp, None
        except (OSError, ValueError):
            pass
    read = getattr(inp, "read", None)
    if read is None:
        raise UsageError(f"input must be bytes, str, a path or a binary file, not {type(inp).__name__}")
    f = open_spool(spool_dir)
    while chunk := read(_limits.INPUT_CHUNK):
        f.write(chunk)
    f.seek(0)
    return f, f


class Child:
    """One child process writing to two spools, and the parser following its stdout.

    Nothing here sleeps: :meth:`pump` reads what is new, :meth:`exited` polls.
    """

    def __init__(
        self,
        args: Argv,
        *,
        input: Input = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        shell: bool = False,
        provider: str | Provider = "auto",
        spool_dir: str | os.PathLike[str] | None = None,
        max_line: int = _limits.MAX_LINE,
        max_retained: int = _limits.MAX_RETAINED,
        max_spool_bytes: int | None = None,
        loads: Loads | None = None,
        preexec_fn: Any = None,
        read_buffer: bytearray | None = None,
        live: bool = True,
    ) -> None:
        # read_buffer: one buffer shared by children pumped from a single thread (the
        # parser never keeps it), so each start does not allocate and zero READ_CHUNK.
        if isinstance(args, str) and not shell:
            raise UsageError("args is a string: give an argv list, or shell=True to run it through the shell")
        if not isinstance(args, str) and not args:
            raise UsageError("args is empty: give the command to run")
        self.args: list[str] | str = args if isinstance(args, str) else [os.fspath(a) for a in args]
        # live=False: nobody listens, so no events are kept and tool lines go unread
        self.parser = StreamParser(provider, max_line=max_line, max_retained=max_retained, loads=loads, live=live)
        self.spool_dir = resolve_spool_dir(spool_dir)
        self.max_spool_bytes = max_spool_bytes
        self._read_limit: int | None = max_spool_bytes
        self.stdout = open_spool(self.spool_dir)
        self.stderr: IO[bytes] | None = None
        self._stdin_close: IO[bytes] | None = None
        self.offset = 0
        self._buf = read_buffer if read_buffer is not None else bytearray(_limits.READ_CHUNK)
        self.started = time.monotonic()
        self.timed_out = False
        self.spool_full: str | None = None
        self.returncode: int | None = None
        self._pidfd = -1
        try:
            self.stderr = open_spool(self.spool_dir)
            stdin, self._stdin_close = _stdin_for(input, self.spool_dir)
            try:
                self.proc = subprocess.Popen(  # an argv list; a shell only when asked
                    self.args,
                    stdin=stdin,
                    stdout=self.stdout,
                    stderr=self.stderr,
                    cwd=cwd,
                    env=env,
                    shell=shell,
                    start_new_session=True,
                    preexec_fn=preexec_fn,
                )
            except OSError as e:
                raise SpawnError(self.args if isinstance(self.args, list) else [self.args], e) from None
        except BaseException:
            self.close()
            raise
        finally:
            if self._stdin_close is not None:
                self._stdin_close.close()  # the child has its own copy
                self._stdin_close = None
        self.pid = self.proc.pid
        self.pgid = self.pid  # start_new_session: the child leads its own group
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = -1

    # -- reading -----------------------------------------------------------

    def pump(self, limit: int = _limits.FOLLOW_STEP) -> tuple[int, list[LiveEvent]]:
        """Feed what the child wrote since last time (at most ``limit`` bytes).

        Never reads past ``max_spool_bytes``, nor past the point where the
        spool was found full: what a child writes beyond that is not parsed.
        """
        fd = self.stdout.fileno()
        buf = self._buf
        got = 0
        live: list[LiveEvent] = []
        if self._read_limit is not None:
            limit = min(limit, self._read_limit - self.offset)
        while got < limit:
            # pread: the child shares this file's offset, so we must never move it.
            n = os.preadv(fd, [memoryview(buf)[: min(len(buf), limit - got)]], self.offset)
            if n <= 0:
                self.parser.spool_size(os.fstat(fd).st_size)  # caught up: a spool below it was truncated
                break
            self.offset += n
            got += n
            live.extend(self.parser.feed(buf, 0, n))
            if n < len(buf):
                break
        return got, live

    # -- the process -------------------------------------------------------

    @property
    def pidfd(self) -> int:
        """A pidfd for the child (readable once it exits), or ``-1`` where there is none."""
        return self._pidfd

    def exited(self) -> bool:
        """Whether the child has exited (not reaped: its group id stays ours)."""
        if self.returncode is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None and info.si_pid == self.pid

    def wait_exit(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the child's exit (pidfd where there is one)."""
        if self._pidfd >= 0:
            ready, _, _ = select.select([self._pidfd], [], [], max(0.0, timeout))
            return bool(ready) or self.exited()
        if self.exited():
            return True
        time.sleep(timeout)
        return self.exited()

    def check_spool(self) -> str | None:
        """Why the spool is full, once it is (then nothing past this point is parsed)."""
        if self.spool_full is None:
            assert self.stderr is not None
            self.spool_full = spool_problem((self.stdout.fileno(), self.stderr.fileno()), self.max_spool_bytes)
            if self.spool_full is not None and self.max_spool_bytes is None:
                # A full disk can hold a transcript of any size: parse what is here, no more.
                self._read_limit = os.fstat(self.stdout.fileno()).st_size
        return self.spool_full

    def signal(self, sig: int) -> bool:
        return signal_group(self.pgid, sig)

    def terminate(self, grace: float) -> list[LiveEvent]:
        """SIGTERM to the group, SIGKILL after ``grace`` seconds if the child is still there.

        Keeps reading meanwhile; returns the events of what the child wrote in its grace.
        """
        self.signal(signal.SIGTERM)
        live: list[LiveEvent] = []
        deadline = time.monotonic() + grace
        while not self.exited():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.wait_exit(min(left, 0.05))
            live.extend(self.pump()[1])
        if not self.exited():
            self.signal(signal.SIGKILL)
        return live

    def reap(self, grace: float) -> int:
        """Reap the child; then end whatever else is left in its group (TERM, grace, KILL)."""
        if self.returncode is None:
            self.returncode = self.proc.wait()
            self.sweep(grace)
        return self.returncode

    def sweep(self, grace: float) -> None:
        """No orphans: processes left in the child's group get TERM, then KILL."""
        if not group_alive(self.pgid):
            return
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while group_alive(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.signal(signal.SIGKILL):
            deadline = time.monotonic() + 1.0
            while group_alive(self.pgid) and time.monotonic() < deadline:
                time.sleep(0.01)

    def kill_now(self) -> None:
        """For interrupts and errors: TERM, a short grace, KILL, reap. Never raises."""
        try:
            if self.returncode is None:
                if not self.exited():
                    self.terminate(_limits.INTERRUPT_GRACE)
                self.reap(_limits.INTERRUPT_GRACE)
            else:
                self.sweep(_limits.INTERRUPT_GRACE)
        except OSError:
            pass

    # -- the end -----------------------------------------------------------

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        n = min(size, _limits.STDERR_TAIL)
        data = os.pread(fd, n, size - n) if n else b""
        return data.decode("utf-8", "replace")

    def result(
        self,
        *,
        keep_output: bool = True,
        timeout: float | None = None,
        emit: Callable[[list[LiveEvent]], Any] | None = None,
    ) -> tuple[Result, list[LiveEvent]]:
        """Read the rest of the spool and build the :class:`Result` (the child must be reaped).

        With ``emit``, the events of the rest are handed to it a step at a
        time (a backlog of any size costs no memory) and none are returned.
        """
        live: list[LiveEvent] = []
        while True:
            n, more = self.pump()
            if emit is not None:
                emit(more)
            else:
                live.extend(more)
            if not n:
                break
        more = self.parser.close()
        if emit is not None:
            emit(more)
        else:
            live.extend(more)
        assert self.stderr is not None
        stderr_bytes = os.fstat(self.stderr.fileno()).st_size
        # what the child wrote, which past a spool limit is more than what was parsed
        stdout_bytes = max(self.offset, os.fstat(self.stdout.fileno()).st_size)
        rc = self.returncode
        spool_full = self.spool_full
        if spool_full is None and rc == -getattr(signal, "SIGXFSZ", 25):
            spool_full = self.spool_full = "file size limit (RLIMIT_FSIZE) reached"
        elif spool_full is None and rc != 0:
            # a child that dies of ENOSPC can exit before a poll sees the disk full: look once more
            spool_full = self.check_spool()
        res = self.parser.finish(
            args=self.args,
            returncode=rc,
            timed_out=self.timed_out,
            spool_full=spool_full is not None,
            duration_s=time.monotonic() - self.started,
            stdout_bytes=stdout_bytes,
            stderr_bytes=stderr_bytes,
            stderr_tail=self.stderr_tail(),
            timeout=timeout,
            spool_size=os.fstat(self.stdout.fileno()).st_size,
            spool_cap=self.max_spool_bytes,
        )
        if spool_full is not None:
            msg = f"spool full in {self.spool_dir} after {stdout_bytes + stderr_bytes} bytes ({spool_full})"
            res.error = msg if res.error is None else f"{msg}; {res.error}"
        if keep_output:
            for f in (self.stdout, self.stderr):
                f.seek(0)
            res.stdout, res.stderr = self.stdout, self.stderr
            self._close_pidfd()  # the spools now belong to the result
        else:
            self.close()
        return res, live

    def close(self) -> None:
        """Close the spools and the pidfd (idempotent)."""
        for f in (self.stdout, self.stderr, self._stdin_close):
            if f is not None:
                f.close()
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


def check_times(timeout: float | None, grace: float) -> None:
    """The timeout and grace a run accepts (the sync and async drivers share them)."""
    if timeout is not None and timeout < 0:
        raise UsageError(f"timeout must not be negative, not {timeout}")
    if grace < 0:
        raise UsageError(f"grace must not be negative, not {grace}")


def _emit(on_event: OnEvent | None, live: list[LiveEvent]) -> None:
    if on_event is not None:
        for ev in live:
            on_event(ev)


def run(
    args: Argv,
    *,
    input: Input = None,
    timeout: float | None = None,
    grace: float = _limits.DEFAULT_GRACE,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
    check: bool = False,
    provider: str | Provider = "auto",
    spool_dir: str | os.PathLike[str] | None = None,
    max_line: int = _limits.MAX_LINE,
    max_retained: int = _limits.MAX_RETAINED,
    max_spool_bytes: int | None = None,
    on_event: OnEvent | None = None,
    on_start: Callable[[Child], Any] | None = None,
    keep_output: bool = True,
    loads: Loads | None = None,
) -> Result:
    """Run a command whose stdout is JSON lines, and return its answer.

    stdout and stderr go to nameless spool files (never a pipe, never memory);
    the stdout spool is parsed while the child writes it. The child leads its
    own process group: on ``timeout`` the group gets SIGTERM, then SIGKILL
    after ``grace`` seconds, and ``timed_out`` is set. Processes the child
    leaves behind in its group are ended the same way when it exits. On
    ``KeyboardInterrupt`` (or any exception, such as one raised by
    ``on_event``) the group is killed, the spools closed, and the exception
    re-raised.

    ``input`` is ``bytes``, ``str`` (UTF-8), a path (``os.PathLike``) or a
    binary file; ``None`` gives the child ``/dev/null``. With ``check=True`` a
    result that is not ``ok`` raises :class:`~spoolparse.TimeoutExpired` or
    :class:`~spoolparse.CalledProcessError`.

    ``on_event`` gets each :class:`~spoolparse.LiveEvent` while the child
    runs, in stream order; ``on_start`` gets the started :class:`Child` once
    (its ``pid``, and counters such as ``offset`` for a progress display).
    The follower sleeps until the child writes or exits (inotify and a pidfd
    on Linux; bounded polling elsewhere).

    Raises :class:`~spoolparse.SpawnError` when the command cannot be started
    and :class:`~spoolparse.SpoolFullError` (with ``.result``) when the spool
    fills up.

    .. seealso:: :func:`subprocess.run`, :func:`spoolparse.arun`
    """
    check_times(timeout, grace)
    child = Child(
        args,
        input=input,
        cwd=cwd,
        env=env,
        shell=shell,
        provider=provider,
        spool_dir=spool_dir,
        max_line=max_line,
        max_retained=max_retained,
        max_spool_bytes=max_spool_bytes,
        loads=loads,
        live=on_event is not None,
    )
    assert child.stderr is not None
    waiter = SpoolWaiter((child.stdout.fileno(), child.stderr.fileno()), child.pidfd)
    try:
        if on_start is not None:
            on_start(child)
        deadline = None if timeout is None else child.started + timeout
        interval = waiter.next_interval(None)
        while True:
            n, live = child.pump()
            _emit(on_event, live)
            if child.exited():
                break
            if child.check_spool() is not None:
                _emit(on_event, child.terminate(0))
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                child.timed_out = True
                _emit(on_event, child.terminate(grace))
                break
            if n:
                interval = waiter.next_interval(None)
                continue
            wait = interval if deadline is None else min(interval, max(0.0, deadline - now))
            waiter.wait(wait)
            interval = waiter.next_interval(interval)
        waiter.close()  # the watches pin the spools' inodes: gone before the spools may close
        child.reap(grace)
        res, _ = child.result(keep_output=keep_output, timeout=timeout, emit=lambda live: _emit(on_event, live))
    except BaseException:
        waiter.close()
        child.kill_now()
        child.close()
        raise
    if res.spool_full:
        raise SpoolFullError(child.spool_dir, res.stdout_bytes + res.stderr_bytes, child.spool_full or "", res)
    if check:
        try:
            res.check_returncode()
        except BaseException:
            res.close()
            raise
    return res
