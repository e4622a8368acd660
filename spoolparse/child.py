"""One child on spools: started, followed, ended.

:class:`Child` owns one started child, its spools, its :class:`StreamParser`,
its containment (its own process group, and a cgroup where one can be made)
and its :class:`~spoolparse._os.lifecycle.Lifecycle`, and never waits. The
drivers do the waiting, each with its own clock and way to sleep:
:func:`~spoolparse.run` from a thread, :func:`~spoolparse.arun` from the
event loop, the batch for many at once. Each of them calls :meth:`Child.step`
(read within a budget, check the spool, stop the child if it is full,
advance its lifecycle) and sleeps until the child writes or exits, or the
time the step hands back; nothing else follows a child. The policy of how a
child ends is the lifecycle's alone.

Nothing outlives us: the child and what it starts carry our owner mark, its
group and cgroup are held by the guardian (:mod:`spoolparse._os.guardian`) until
they are empty, and a child started through a ``preexec_fn`` also gets
``PR_SET_PDEATHSIG`` (the four ways to start, :mod:`spoolparse._os.spawn`).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Union

from . import _limits
from ._os.capabilities import exit_seen, open_pidfd, own_cgroup, wait_exit
from ._os.cgroup import Cgroup
from ._os.group import group_alive, signal_group
from ._os.guardian import guardian
from ._os.launch import Launch
from ._os.lifecycle import Check, Done, Lifecycle, Reap, Send, Wait
from ._os.proc import own_peak
from ._signals import deferred
from .errors import SpoolFullError, UsageError
from .options import ChildKeywords, ChildOptions, Input

if TYPE_CHECKING:
    from typing_extensions import Unpack
from .parser import StreamParser
from .providers.base import LiveEvent
from .result import Result
from .spool import close_spool, open_spool, recycle_spool, resolve_spool_dir, writer_end
from .spool_full import DiskFacts, spool_problem

__all__ = ["Child", "Budget", "Step", "LOOK", "Argv", "group_alive", "signal_group"]

Argv = Union[Sequence[Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]], str, bytes]  # noqa: UP007 - runtime


def _argv(args: Any, shell: bool) -> list[str] | str:
    """``args`` as the strings a start takes, as :mod:`subprocess` reads them: each item a ``str``, ``bytes``
    or a path (bytes decoded as file names are, so they reach the child as they were). A string or bytes
    alone is one command for the shell, so it needs ``shell=True``."""
    if isinstance(args, (bytes, bytearray)):
        args = os.fsdecode(bytes(args))
    elif isinstance(args, os.PathLike):
        args = [args]  # one program, no arguments (subprocess's reading)
    if isinstance(args, str):
        if not shell:
            raise UsageError("args is a string: give an argv list, or shell=True to run it through the shell")
        return args
    try:
        argv = [os.fsdecode(a) for a in args]
    except TypeError:
        odd = next(a for a in args if not isinstance(a, (str, bytes, os.PathLike)))
        raise UsageError(f"an argument is a string, bytes or a path, not {type(odd).__name__}") from None
    if not argv:
        raise UsageError("args is empty: give the command to run")
    return argv


def _workdir(cwd: Any) -> str | None:
    """``cwd`` as a path string (bytes decoded as file names are, as :mod:`subprocess` takes them). One that is
    missing is the start's :class:`~spoolparse.SpawnError`, naming it, as :mod:`subprocess` raises it."""
    if cwd is None:
        return None
    try:
        return os.fsdecode(cwd)
    except TypeError:
        raise UsageError(f"cwd is a path, not {type(cwd).__name__}") from None


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


@dataclass(frozen=True, slots=True)
class Budget:
    """How much one :meth:`Child.step` may parse: ``size`` bytes at most, until the clock (``time.monotonic``)
    passes ``until``, and ``events`` live events at most (``None``: any number; the step ends within a
    ``PARSE_SLICE`` of each bound). ``size`` 0: the spool is looked at (its cap, the disk when due), nothing
    is parsed."""

    size: int
    until: float = math.inf
    events: int | None = None


#: A step that looks at the spool and parses nothing.
LOOK = Budget(0)


@dataclass(frozen=True, slots=True)
class Step:
    """What one :meth:`Child.step` did: ``read`` bytes parsed, their live ``events``; and the lifecycle's
    ``action``: :class:`~spoolparse._os.lifecycle.Wait` (until a time, or ``None``: until the child writes or
    exits) or :class:`~spoolparse._os.lifecycle.Done` (reaped, and nothing of it left)."""

    read: int
    events: list[LiveEvent]
    action: Wait | Done

    @property
    def until(self) -> float | None:
        """The time the lifecycle has something to do by the clock alone (``None``: none, or done)."""
        return self.action.until if isinstance(self.action, Wait) else None


class Child:
    """One child process writing to two spools, and the parser following its stdout.

    Nothing here sleeps: :meth:`step` reads what is new within a budget, checks the spool, and does what the
    lifecycle asks, and says until when to sleep (:meth:`pump`, :meth:`check_spool` and :meth:`advance` are
    its parts).
    ``options`` (a :class:`~spoolparse.ChildOptions`, with any of its fields
    as keyword arguments on top) say everything about the child: how its
    output is read, its spools, its deadlines, its containment (the child
    joins its cgroup before it execs), its input, directory and environment.
    How it starts is :mod:`spoolparse._os.launch`'s: directly (``vfork``, one
    ``exec``) without a cgroup to join nor a ``preexec_fn``; gated with a
    cgroup and stdin ``/dev/null``; else through a ``preexec_fn``.

    ``live=False``: nobody listens, so no events are kept and tool lines go
    unread. ``read_buffer``: one buffer shared by children pumped from a
    single thread (the parser never keeps it), so each start does not allocate
    and zero ``READ_CHUNK``. ``close_in_background``: for a driver that
    supervises other children too (the batch, an event loop), a large spool is
    closed in the background (freeing its blocks would hold up everyone else).
    ``launch=False`` makes the child ready (spools, environment, parser) and
    leaves the start to :meth:`launch`, which a driver may call from another
    thread: it is the part that waits for the ``exec``.
    """

    def __init__(
        self,
        args: Argv,
        options: ChildOptions | None = None,
        *,
        preexec_fn: Callable[[], None] | None = None,
        read_buffer: bytearray | None = None,
        live: bool = True,
        close_in_background: bool = False,
        launch: bool = True,
        **changes: Unpack[ChildKeywords],
    ) -> None:
        o = self.options = ChildOptions.of(options, changes, caller="Child")  # every option checked there
        self.args: list[str] | str = _argv(args, o.shell)
        cwd = _workdir(o.cwd)
        self.parser = StreamParser.of(o, live=live)
        self._close = close_spool if close_in_background else _close_now
        self.spool_dir = resolve_spool_dir(o.spool_dir)
        self.parser.scanner.spill_dir = self.spool_dir  # a long line held past SPILL_BYTES goes beside its spool
        self._read_limit: int | None = o.max_spool_bytes
        self.stdout = open_spool(self.spool_dir)
        self.stderr: IO[bytes] | None = None
        self._stdin_close: IO[bytes] | None = None
        # the child's own write descriptors on the spools, closed once it has them; with them (and
        # the spools not handed to a result) the spools may be recycled after the child is gone
        self._ends: list[int] = []
        self._recycle = False
        self._spools_closed = False
        self.offset = 0
        self._buf = read_buffer if read_buffer is not None else bytearray(_limits.READ_CHUNK)
        self.started = time.monotonic()
        self.spool_full: str | None = None
        self._seen_sizes = (-1, -1)  # spool sizes at the last has_news()
        self._next_thorough_check = 0.0  # see check_spool()
        self.returncode: int | None = None
        #: CPU seconds of the child (user + system), once reaped.
        self.cpu = 0.0
        #: Largest resident set (bytes) of the child and the descendants it waited for, once reaped.
        self.max_rss = 0
        self._timed_out = False
        self._pidfd = -1
        self._held = False
        self.pid = self.pgid = 0
        self.cgroup: Cgroup | None = None
        self._own_cgroup = o.containment == "auto"
        self.life = Lifecycle(o.deadlines, started=self.started)
        self._launch: Launch | None = None
        try:
            self.stderr = open_spool(self.spool_dir)
            self._ends = [writer_end(self.stdout), writer_end(self.stderr)]
            if -1 in self._ends:
                out_end: Any = self.stdout
                err_end: Any = self.stderr
            else:
                out_end, err_end = self._ends
                self._recycle = True
            stdin, self._stdin_close = _stdin_for(o.input, self.spool_dir)
            self.cgroup = own_cgroup() if o.containment == "auto" else o.containment
            program = ["/bin/sh", "-c", self.args] if isinstance(self.args, str) else self.args
            self._launch = Launch.prepare(
                self.args if isinstance(self.args, list) else [self.args], program, stdin=stdin, stdout=out_end,
                stderr=err_end, cwd=cwd, env=o.env, cgroup=self.cgroup, preexec_fn=preexec_fn,
            )
        except BaseException:
            self._launched()
            self.close()
            raise
        if launch:
            self.launch()

    def launch(self) -> None:
        """Start the child prepared by ``Child(..., launch=False)`` (a driver may do it in another thread:
        this part waits for the ``exec``). Raises :class:`~spoolparse.SpawnError` as the constructor would."""
        plan, self._launch = self._launch, None
        if plan is None:  # an assert would vanish under python -O and leave an AttributeError
            raise UsageError("launch() is for a child made with launch=False, once")
        try:
            # From fork to the child being ours to end, a signal must not cut in (the child would be
            # nobody's); one that comes is raised again at the end of the block, and the cleanup below runs.
            with deferred():
                self.started = time.monotonic()
                self.life.started = self.started
                self.proc = plan.start()
                self.pid = self.pgid = self.proc.pid  # start_new_session: the child leads its own group
                self._held = True
                plan.started(self.pid)
        except BaseException:
            plan.abandon()
            if self._held:
                self.kill_now()
            self.close()
            raise
        finally:
            self._launched()
        self._pidfd = open_pidfd(self.pid)

    def _launched(self) -> None:
        """The child has its copies of our descriptors (or will never run): ours go."""
        for fd in self._ends:
            if fd >= 0:
                os.close(fd)
        self._ends.clear()
        if self._stdin_close is not None:
            self._stdin_close.close()
            self._stdin_close = None
        if self.cgroup is not None:
            self.cgroup.attached()

    @property
    def max_spool_bytes(self) -> int | None:
        """The cap on the spools (``options.max_spool_bytes``)."""
        return self.options.max_spool_bytes

    # -- reading -----------------------------------------------------------

    def has_news(self) -> bool:
        """Whether a spool changed size since the last call, or stdout holds bytes not yet parsed.

        One ``fstat`` call (two with ``max_spool_bytes``, which counts stderr too): a supervisor with
        many quiet children reads and checks only the others. Without a cap stderr matters only to
        the once-a-second checks, which look at it anyway.
        """
        assert self.stderr is not None
        out = os.fstat(self.stdout.fileno()).st_size
        sizes = (out, os.fstat(self.stderr.fileno()).st_size if self.max_spool_bytes is not None else -1)
        unread = self.offset < out and (self._read_limit is None or self.offset < self._read_limit)
        if sizes == self._seen_sizes and not unread:
            return False
        self._seen_sizes = sizes
        return True

    @property
    def unread(self) -> int:
        """Bytes of stdout written and not yet parsed, as of the last :meth:`has_news` (no system call)."""
        end = self._seen_sizes[0] if self._read_limit is None else min(self._seen_sizes[0], self._read_limit)
        return max(0, end - self.offset)

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

    def pump_within(
        self, limit: int, until: float, max_events: int | None = None
    ) -> tuple[int, list[LiveEvent], bool]:
        """:meth:`pump` a ``PARSE_SLICE`` at a time until ``limit`` bytes, caught up, the clock
        (``time.monotonic``) passed ``until``, or ``max_events`` events are in hand: (bytes, events, caught
        up). However small the events, the caller gets the hand back within a slice's parse of ``until``, with
        at most a slice's events past ``max_events``."""
        got = 0
        live: list[LiveEvent] = []
        while True:
            n, more = self.pump(min(_limits.PARSE_SLICE, limit - got))
            live.extend(more)
            got += n
            if n == 0:
                return got, live, True
            if got >= limit or time.monotonic() >= until or (max_events is not None and len(live) >= max_events):
                return got, live, False

    # -- the process -------------------------------------------------------

    @property
    def pidfd(self) -> int:
        """A pidfd for the child (readable once it exits), or ``-1`` where there is none."""
        return self._pidfd

    @property
    def timed_out(self) -> bool:
        """Whether the hard timeout fired."""
        return self.life.timed_out or self._timed_out

    @timed_out.setter
    def timed_out(self, value: bool) -> None:
        self._timed_out = value

    def exited(self) -> bool:
        """Whether the child has exited (not reaped: its group id stays ours)."""
        return self.returncode is not None or exit_seen(self.pid)

    def wait_exit(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the child's exit (pidfd where there is one)."""
        return self.returncode is not None or wait_exit(self.pid, self._pidfd, timeout)

    def check_spool(
        self, *, thorough: bool | None = None, sizes: tuple[int, int] | None = None, facts: DiskFacts | None = None
    ) -> str | None:
        """Why the spool is full, once it is (then nothing past this point is parsed).

        ``max_spool_bytes`` is checked on every call; the disk and the file size limit once per
        :data:`~spoolparse._limits.SPOOL_CHECK_INTERVAL` (``thorough=None``), now (``True``), or not now
        (``False``: a driver that looks at many children on a schedule of its own). ``facts``: what such a
        driver's pass took once for all of them (:class:`~spoolparse.spool_full.DiskFacts`).
        """
        if self.spool_full is None:
            assert self.stderr is not None
            now = time.monotonic()
            if thorough is None:
                thorough = now >= self._next_thorough_check
            if thorough:
                self._next_thorough_check = now + _limits.SPOOL_CHECK_INTERVAL
            elif self.max_spool_bytes is None:
                return None  # no cap to compare with, and the disk is not due: nothing to look at
            self.spool_full = spool_problem(
                (self.stdout.fileno(), self.stderr.fileno()), self.max_spool_bytes, thorough=thorough, sizes=sizes,
                facts=facts, where=self.spool_dir,
            )
            if self.spool_full is not None and self.max_spool_bytes is None:
                # A full disk can hold a transcript of any size: parse what is here, no more.
                self._read_limit = os.fstat(self.stdout.fileno()).st_size
        return self.spool_full

    def signal(self, sig: int) -> bool:
        """Send ``sig`` to the child's group and cgroup; ``False`` when the group is gone."""
        alive = signal_group(self.pgid, sig)
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.kill(sig)
        return alive

    def leftovers(self) -> bool:
        """Whether a process of the child's group or cgroup is still alive (not a zombie)."""
        if self.cgroup is not None and self.cgroup.procs():
            return True
        return group_alive(self.pgid)

    # -- the lifecycle -------------------------------------------------------

    def step(
        self, now: float, budget: Budget | None = None, *, thorough: bool | None = None,
        facts: DiskFacts | None = None, exited: bool | None = None,
    ) -> Step:
        """One step of following the child, the same for every driver: read within ``budget``, check the spool,
        stop the child if the spool is full, advance the lifecycle. Never blocks: the parse is bounded by the
        budget, and nothing is closed, synced or waited for. What the step did, and what to wait for next, is
        the :class:`Step` it returns; the drivers differ only in how they wait for that.

        ``budget`` ``None``: the spool is not looked at (a step for an exit or a deadline only). ``thorough``
        and ``facts``: how the spool is checked (:meth:`check_spool`). ``exited``: what the driver saw of the
        child's exit: ``True``, it exited (its pidfd turned readable); ``False``, not as of the driver's last
        look; ``None``, unknown: the step asks the kernel (:meth:`advance`).
        """
        read = 0
        events: list[LiveEvent] = []
        if budget is not None:
            if budget.size:
                if budget.until == math.inf and budget.events is None:
                    read, events = self.pump(budget.size)
                else:
                    read, events, _ = self.pump_within(budget.size, budget.until, budget.events)
                if read:
                    now = max(now, time.monotonic())  # the parse took its time: the deadlines are met by the clock
            if self.check_spool(thorough=thorough, facts=facts) is not None:
                self.life.stop(now, "spool full", grace=0)
        return Step(read, events, self.advance(now, exited=exited))

    def advance(self, now: float, *, exited: bool | None = None) -> Wait | Done:
        """Do what the lifecycle asks that needs no waiting; return the :class:`Wait` or :class:`Done` that ends it.

        Notices the child's exit on the way (a cheap ``waitid``, unless ``exited`` says what the driver saw:
        see :meth:`step`); reaping and the leftover checks happen here, never blocking.
        """
        life = self.life
        if not life.leader_exited and (self.exited() if exited is None else exited):
            life.exited(now)
        while True:
            action = life.next_action(now)
            if isinstance(action, Send):
                self.signal(action.sig)
            elif isinstance(action, Reap):
                life.reaped(now, self._reap())
            elif isinstance(action, Check):
                life.checked(now, leftovers=self.leftovers())
            else:
                if isinstance(action, Done):
                    self._release()
                return action

    def _reap(self) -> int:
        if self.returncode is None:
            try:
                pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): the status is lost
                pid, status, ru = self.pid, 0, None
            if pid == 0:  # not exited after all: wait for it (only a KILLed child gets here)
                pid, status, ru = os.wait4(self.pid, 0)
            self.returncode = self.proc.returncode = os.waitstatus_to_exitcode(status)
            if ru is not None:
                self.cpu = ru.ru_utime + ru.ru_stime
                self.max_rss = own_peak(ru.ru_maxrss * 1024)
        return self.returncode

    def _release(self) -> None:
        """The child and its leftovers are gone: the guardian forgets its group; our own cgroup goes (and is
        forgotten once gone: :meth:`Cgroup.remove`)."""
        if self._held:
            self._held = False
            guardian.release(self.pgid, [])
            if self._own_cgroup and self.cgroup is not None:
                self.cgroup.remove(self.life.deadlines.grace)

    def settle(self) -> None:
        """Block until the lifecycle is done (the synchronous driver's end: reap and sweep)."""
        while True:
            now = time.monotonic()
            action = self.advance(now)
            if isinstance(action, Done):
                return
            left = _limits.POLL_MAX if action.until is None else action.until - now
            left = min(max(0.0, left), _limits.POLL_MAX)
            if self.life.leader_exited:
                time.sleep(left)  # a pidfd stays readable after the exit: it cannot wake us
            else:
                self.wait_exit(left)

    def kill_now(self) -> None:
        """For interrupts and errors: TERM, a short grace, KILL, reap, sweep. Never raises.

        The ending signals are held back meanwhile, so a second Ctrl-C cannot cut it short.
        """
        with deferred():
            try:
                if self._held or self.returncode is None:
                    self.life.stop(time.monotonic(), "cancelled", grace=_limits.INTERRUPT_GRACE)
                    self.settle()
            except OSError:
                pass

    # -- the end -----------------------------------------------------------

    def stderr_tail(self, size: int | None = None) -> str:
        """The last ``STDERR_TAIL`` bytes of stderr (``size``: the spool's, when the caller has it)."""
        if self.stderr is None:
            return ""
        fd = self.stderr.fileno()
        if size is None:
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
        # each spool's size once (the child is gone: they no longer change), for every use below
        stderr_bytes = os.fstat(self.stderr.fileno()).st_size
        spool_size = os.fstat(self.stdout.fileno()).st_size
        # what the child wrote, which past a spool limit is more than what was parsed
        stdout_bytes = max(self.offset, spool_size)
        rc = self.returncode
        spool_full = self.spool_full
        if spool_full is None and rc == -getattr(signal, "SIGXFSZ", 25):
            spool_full = self.spool_full = "file size limit (RLIMIT_FSIZE) reached"
        elif spool_full is None:
            # a child that dies of ENOSPC can exit before a poll sees the disk full: look once more
            spool_full = self.check_spool(thorough=True, sizes=(spool_size, stderr_bytes))
        res = self.parser.finish(
            args=self.args,
            returncode=rc,
            timed_out=self.timed_out,
            spool_full=spool_full is not None,
            duration_s=time.monotonic() - self.started,
            stdout_bytes=stdout_bytes,
            stderr_bytes=stderr_bytes,
            stderr_tail=self.stderr_tail(stderr_bytes),
            timeout=timeout,
            spool_size=spool_size,
            spool_cap=self.max_spool_bytes,
        )
        if spool_full is not None:
            msg = f"spool full in {self.spool_dir} after {stdout_bytes + stderr_bytes} bytes ({spool_full})"
            res.error = msg if res.error is None else f"{msg}; {res.error}"
        if keep_output:
            for f in (self.stdout, self.stderr):
                f.seek(0)
            res.stdout, res.stderr = self.stdout, self.stderr
            self._recycle = False  # the spools now belong to the result
            self._close_pidfd()
        else:
            self.close()
        return res, live

    def close(self) -> None:
        """Close the spools (a large one in the background with ``close_in_background``) and the pidfd
        (idempotent); a cgroup of our own goes once its child has."""
        plan, self._launch = self._launch, None
        if plan is not None:  # never launched
            plan.abandon()
            self._launched()
        recycle, self._recycle = self._recycle and not self._held, False
        if not self._spools_closed:
            self._spools_closed = True  # a recycled spool may be another child's by the next call
            for f in (self.stdout, self.stderr):
                if f is not None and not (recycle and recycle_spool(f, self.spool_dir)):
                    self._close(f)
        if self._stdin_close is not None:
            self._close(self._stdin_close)
        self._close_pidfd()
        if self._own_cgroup and self.cgroup is not None and not self._held:
            self.cgroup.remove(self.life.deadlines.grace)

    def _close_pidfd(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


def handed_back(child: Child, res: Result, *, check: bool) -> Result:
    """What a driver hands back for a run that ended: ``res``; :class:`~spoolparse.SpoolFullError` (with it) when
    the spool filled up; with ``check``, what :meth:`~spoolparse.Result.check_returncode` raises (its spools
    closed then: nobody will read them)."""
    if res.spool_full:
        raise SpoolFullError(child.spool_dir, res.stdout_bytes + res.stderr_bytes, child.spool_full or "", res)
    if check:
        try:
            res.check_returncode()
        except BaseException:
            res.close()
            raise
    return res


def _close_now(f: IO[bytes]) -> None:
    f.close()
