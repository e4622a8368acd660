"""Many children on one host: one supervisor loop, memory admission, caps, timeouts, one outcome per task.

One thread follows every running child: it sleeps in :func:`select.poll` on
the children's pidfds (waking at once when one exits, or after a short
tick), and on each tick pumps the spools, samples memory, enforces timeouts
and caps, and admits new tasks. A sample looks at every child once a second;
in between only at the spools that grew (an inotify watch on each spool whose
child has run a second), so a quiet agent costs nothing per tick. Tasks are
pulled from the input only when a slot is free, so memory and open files are
O(``max_concurrent``), never O(number of tasks).

This module is that loop and its admission; the rest is each in a module of
its own: the input (:mod:`.intake`), starting children (:mod:`.spawning`),
how each child ends (:mod:`spoolparse._os.lifecycle`, advanced from here), a
running task and its outcome (:mod:`.slot`, verdicts in :mod:`.verdicts`),
the order outcomes go out in and when they are final in the job log
(:mod:`.emission`), and the asyncio face (:mod:`.arun`).
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import logging
import math
import os
import select
import signal
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import _limits
from .._os.capabilities import Inotify, open_inotify, placement
from .._os.cgroup import (
    REMOVE_WITHIN,
    ChildCgroup,
    Placement,
    enforcement_of,
    tell_uncontained,
    wait_removed,
    wants_cgroup,
)
from .._os.lifecycle import Done
from .._os.proc import raise_open_files_limit
from .._relay import EventRelay
from .._signals import uninterruptible
from ..child import LOOK, Budget, Step
from ..cost import preload as preload_prices
from ..errors import UsageError
from ..providers.base import LiveEvent
from ..spool import DiskFacts, closing, resolve_spool_dir, wait_closed
from .admission import Admission, auto_concurrency, cpu_cap, default_reserve
from .calibrations import command_key, recorded
from .driver import Driver
from .emission import Emission, HandsOut
from .halt import Tally
from .intake import Intake, InvalidTask
from .joblog import DoneIds, JobLog
from .memory import HostMemory, MemoryProbe, sample_trees
from .options import ENFORCE_MODES, BatchOptions
from .policy import Again, Attempt, BatchPolicy
from .results import Keeper, ResultsDir
from .slot import Slot, outcome_of
from .spawning import Pending, Spawner, child_for, launched
from .tasks import Outcome, Task, TaskLike
from .verdicts import cancelled_error

__all__ = ["Batch", "BatchOptions", "InvalidTask", "ENFORCE_MODES"]

log = logging.getLogger("spoolparse.runner")


#: Longest sleep of the supervisor between looks at its children (seconds).
TICK = 0.05
#: Seconds between memory samples, spool pumps and watchdog checks.
SAMPLE_INTERVAL = _limits.SAMPLE_INTERVAL
#: Bytes read from one child's spool per tick (the rest waits for the next one).
PUMP_PER_TICK = 4 * _limits.MiB
#: Default pids.max of a child cgroup.
PIDS_MAX = _limits.PIDS_MAX
#: Seconds a child runs before its spool is watched (inotify) instead of looked at every sample: a short
#: task never costs a watch, a long quiet one costs nothing between the once-a-second looks at all.
WATCH_AFTER = 1.0


class _Stop(Exception):
    """Raised inside the loop when another thread asked the batch to stop."""


@dataclass(order=True)
class _Retry:
    ready_at: float
    seq: int
    task: Task = field(compare=False)
    attempts: int = field(compare=False)


def _now() -> float:
    return time.monotonic()


class _Waker:
    """The loop's wake-up pipe: any thread writes a byte, the loop polls the read end and drains it.

    Its own object, so that the spawner's and the driver's callbacks hold it and not the batch: nothing
    but its reader keeps a batch alive (see :func:`_supervise`).
    """

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()
        # a byte is in the pipe, not yet drained: a wake meanwhile need not write another (each waker changes
        # what the loop looks at before it wakes it, and the loop looks after it drains)
        self._pending = False

    def wake(self, *_: object) -> None:
        if self._pending:
            return
        with self._lock, contextlib.suppress(OSError):
            if self.w >= 0:  # closed (and its number maybe reused) once the batch is finished
                self._pending = True
                os.write(self.w, b"x")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while len(os.read(self.r, 4096)) == 4096:
                pass
        # after the read (which may take the byte of a wake made during it): a wake skipped from here to the
        # reset changed what the loop looks at next, and one after it writes again
        self._pending = False

    def close(self) -> None:
        with self._lock:
            for fd in (self.r, self.w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.r = self.w = -1


def _supervise(ref: weakref.ref[Batch]) -> Generator[list[Outcome], None, None]:
    """The batch's loop, for its driver thread: a turn at a time, holding the batch only during a turn.

    A batch its reader dropped unfinished (``for o in run_many(...): break``) is then collected like any
    object, and its finalizer cancels what runs (:meth:`Batch.close`); a loop that held it all along
    would keep it, its children and its thread until the process exits.
    """
    while True:
        batch = ref()
        if batch is None:
            return
        try:
            out, more = batch._turn()
        finally:
            del batch
        yield out
        if not more:
            return


class Batch(HandsOut):
    """A running batch: iterate it for outcomes; :meth:`close` cancels what is still running.

    Made by :func:`~spoolparse.run_many`. After an interrupt (or :meth:`close`),
    :attr:`cancelled` holds every final outcome not yet handed out: the
    ``cancelled`` outcomes of the tasks that had started, after any that had
    just ended.

    .. seealso:: :func:`~spoolparse.run_many`
    """

    def __init__(
        self,
        tasks: Iterable[TaskLike | InvalidTask] | Callable[[], Any],
        options: BatchOptions | None = None,
        **changes: Any,
    ) -> None:
        o = BatchOptions.of(options, changes, caller="Batch")  # every option checked there, once
        self.options = o
        self.halt = o.halt_condition
        if o.spool_dir is not None:
            resolve_spool_dir(o.spool_dir)  # a directory that cannot hold spools stops the batch before it starts
        # so is a results folder that cannot be made (or is a symlink): held by a descriptor from here on
        self._results = ResultsDir(o.results) if o.results is not None else None
        raise_open_files_limit()  # many children hold many descriptors
        preload_prices()  # here, not in the loop at the first summary to price (a third of a second)
        self.probe: MemoryProbe = o.memory_probe if o.memory_probe is not None else HostMemory()
        self.admission = Admission(
            self.probe, stop_at=o.stop_at, kill_at=o.kill_at, max_age=min(0.05, o.sample_interval)
        )
        total = self.probe.total()
        self.reserve = default_reserve(total) if o.reserve is None else o.reserve
        self.memory_per_task = o.default_estimate
        #: Recorded ``calibrate`` estimates by command identity, used when ``memory_per_task`` is not given.
        self.calibrated: dict[str, int] = recorded() if o.memory_per_task is None else {}
        max_concurrent = o.max_concurrent
        if max_concurrent is None:
            per_task = min([self.memory_per_task, *self.calibrated.values()])
            by_memory = max(1, (total - self.reserve) // per_task)
            max_concurrent = auto_concurrency(total, per_task, reserve=self.reserve)
            self.concurrency_bound = (
                f"memory: ({_gib(total)} - {_gib(self.reserve)} reserve) / {_gib(per_task)} per task"
                if max_concurrent == by_memory else f"CPUs: {max_concurrent} ({cpu_cap() // 4 or 1} x 4)"
            )
        else:
            self.concurrency_bound = "-j"
        log.info("max_concurrent %d, bounded by %s", max_concurrent, self.concurrency_bound)
        self.max_concurrent = max_concurrent
        self.window = o.window if o.window is not None else 2 * max_concurrent
        if self.window < max_concurrent:
            if self._results is not None:
                self._results.close()
            raise UsageError(f"window ({self.window}) must be at least max_concurrent ({max_concurrent})")
        #: What the batch decides (admission, memory kills, retries and requeues, halting), fed by this loop.
        self.policy = BatchPolicy(
            retries=o.retries, requeues=o.requeues, retry_backoff=o.retry_backoff, halt=self.halt, stop_at=o.stop_at,
            kill_at=o.kill_at, window=self.window,
        )
        # every task in a cgroup of its own where one can be made (wants_cgroup); where none can, it is said once
        self.placement = placement(fresh=True) if wants_cgroup(o.enforce) else Placement(None, why="enforce=watchdog")
        if self.placement.kind is None and wants_cgroup(o.enforce):
            tell_uncontained(self.placement)
        self._cgroup_failed = False  # a cgroup that could not be made is said once
        self._waker = _Waker()
        # read ahead by at most -j tasks, in a thread of its own where the input may wait (see intake)
        spill_dir = None if o.spool_dir is None else os.fspath(o.spool_dir)
        # the ids a resumed job log has done, and those read, in spill files: memory flat in their number
        self._done = DoneIds(o.joblog, o.resume, spill_dir) if o.resume and o.joblog is not None else None
        self.intake = Intake(
            tasks, self._done if self._done is not None else set(), depth=max_concurrent, wake=self._waker.wake,
            spill_dir=spill_dir,
        )
        self.joblog = JobLog(o.joblog) if o.joblog is not None else None
        self._emission = Emission(ordered=self.options.ordered)
        self._out = self._emission.ready  # ended outcomes for the loop to hand over
        self._running: dict[int, Slot] = {}  # by pidfd, or by -pid when there is none
        self._retry: list[_Retry] = []
        self._poll = select.poll()
        self._spawner = Spawner(self.max_concurrent, self._waker.wake)
        # transcripts kept (``results``) off the loop's thread; an outcome waits for its own (see _drain)
        self._keeper = Keeper(self._waker.wake)
        # live events go to on_event from a thread of their own (a slow listener holds up no timeout)
        self._relay = EventRelay(self._waker.wake)
        # outcomes that wait for their transcript to be kept or their last events to be delivered, by id()
        # (held here, so no other object takes that id): [outcome, what it still waits for]
        self._held: dict[int, list[Any]] = {}
        self._held_lock = threading.Lock()
        self._ready: set[int] = set()
        self._poll.register(self._waker.r, select.POLLIN)
        self._next_sample = 0.0
        self._next_memory_sample = 0.0
        self._next_look_all = 0.0
        self._next_read = 0.0  # the next round that reads every growing spool (see _sample)
        # the lifecycle deadlines of running children, soonest first: (at, n, slot); an entry whose slot
        # has left or been re-armed for another time is stale and dropped when it comes up
        self._timers: list[tuple[float, int, Slot]] = []
        self._timer_n = itertools.count()
        self._stale = 0  # entries of the heap that no longer count (the heap is rebuilt when they dominate)
        self._due_now: list[Slot] = []  # ended by the loop (_end): advanced in this same tick
        self._unpolled: set[int] = set()  # keys of children without a pidfd: looked at every 10 ms
        # spools are watched with inotify once their child has run WATCH_AFTER: a sample then looks only at
        # those written since the last one (and at every spool once a second); made at the first watch
        self._ino: Inotify | None = None
        self._no_inotify = False
        self._watched: dict[int, Slot] = {}  # by watch descriptor
        self._looked: dict[int, Slot] = {}  # running slots whose spools are not watched: looked at every sample
        self._behind: dict[int, Slot] = {}  # slots whose spool holds bytes not parsed yet (read on read_all)
        # done (exited, reaped, swept) with a backlog still to parse: a PARSE_BUDGET of it each turn, then finalized
        self._draining: dict[int, Slot] = {}
        self._parse_until = 0.0  # this turn's PARSE_BUDGET ends here
        self._far: dict[int, Slot] = {}  # of those, the ones found UNWATCHED_BACKLOG behind (read every sample)
        self._watchdogs: dict[int, Slot] = {}  # slots whose memory limit is checked every sample (by key)
        self._stop = threading.Event()
        self._closed = False
        self.cancelled: list[Outcome] = []
        self._cancel_cause: str | None = None  # what a cancelled task's error says (see interrupted_by)
        self.on_tick: Callable[[Batch], None] | None = None
        #: Called with each task's live events while it runs (from the batch loop: it must be quick).
        #: Set before iterating; without it tool lines go unread.
        self.on_event: Callable[[Task, LiveEvent], None] | None = None
        self._buf = bytearray(_limits.READ_CHUNK)  # one read buffer: only this loop pumps
        # The loop runs in a thread of its own (started by the first ``next``), so the children stay
        # supervised however long the reader takes over each outcome; while ``max_concurrent`` ended
        # outcomes wait for the reader, no new task starts (the running ones go on).
        self._driver: Driver[Outcome] = Driver(
            _supervise(weakref.ref(self)), name="spoolparse-batch", room_at=max_concurrent - 1,
            on_room=self._waker.wake,
        )
        self._supervised = False  # the children and spawner threads are finished with

    # -- the public face ---------------------------------------------------

    @property
    def running(self) -> int:
        return len(self._running) + len(self._spawner.starting)

    @property
    def tally(self) -> Tally:
        """Counters for progress displays (the final outcomes so far)."""
        return self.policy.tally

    @property
    def queued(self) -> int:
        """Tasks waiting to be retried, plus one pulled but not yet admitted."""
        return len(self._retry) + (self.intake.held is not None)

    def _all_out(self) -> None:
        self._finish_cleanup()

    def _take(self) -> Outcome:
        """The next outcome from the loop's thread (started here the first time)."""
        if self._closed and not self._driver.started:
            raise StopIteration
        try:
            return self._driver.take()
        except StopIteration:
            raise
        except BaseException as e:  # Ctrl-C (or a signal made an exception) while waiting: cancel, as the loop did
            self.interrupted_by(e)
            self._stop_driver()
            raise

    def _stop_driver(self) -> None:
        """Stop the loop (it cancels what runs) and wait for it; undelivered outcomes become :attr:`cancelled`'s
        first."""
        self._stop.set()
        if self._driver.in_its_thread:
            # our finalizer, run by the loop's own thread between two turns: no turn will come to cancel
            if not self._supervised:
                self._cancel_all()
                self._finish_supervision()
        else:
            self._waker.wake()
        self.cancelled[:0] = self._driver.join()

    def estimate_for(self, task: Task) -> int:
        """The memory admission reserves for ``task``: its own ``memory``, else what ``calibrate`` recorded
        for its command's identity (:func:`~.calibrations.command_key`; when ``memory_per_task`` was not
        given), else ``memory_per_task``."""
        if task.memory:
            return task.memory
        if self.calibrated:
            return self.calibrated.get(command_key(task.argv), self.memory_per_task)
        return self.memory_per_task

    def interrupted_by(self, cause: BaseException) -> None:
        """Say why the batch is about to be cancelled (a signal to spoolparse, say), before :meth:`close`: the
        error of every task it cancels names it (:func:`~.verdicts.cancelled_error`). The first cause stays."""
        if self._cancel_cause is None:
            self._cancel_cause = cancelled_error(cause)

    def request_stop(self) -> None:
        """Thread-safe: cancel the batch at the loop's next tick (iteration then ends)."""
        self._stop.set()
        self._waker.wake()

    def close(self) -> list[Outcome]:
        """Cancel what is running (TERM, short grace, KILL), delete spools and cgroups; idempotent.

        Returns the ``cancelled`` outcomes (also in :attr:`cancelled`).
        """
        self._stop_driver()
        self._finish_cleanup()
        return self.cancelled

    def __del__(self) -> None:
        # a batch dropped unfinished still kills its children and frees its fds
        with contextlib.suppress(Exception):
            if not getattr(self, "_closed", True):
                self.close()

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the input ---------------------------------------------------------

    def _next_candidate(self, now: float) -> tuple[int, Task | InvalidTask, int] | None:
        """(seq, task, attempts so far) of what to start next, without consuming it yet."""
        if self._retry and self._retry[0].ready_at <= now:
            r = self._retry[0]
            return r.seq, r.task, r.attempts
        intake = self.intake
        # a halt starts nothing new (the held task is skipped); in order, at most `window` ahead
        if not self.policy.takes_new(ahead=0 if intake.held is not None else self._emission.ahead(intake.seq)):
            return None
        task = intake.hold_next()
        return None if task is None else (intake.held_seq, task, 0)

    # -- the loop ----------------------------------------------------------

    def _turn(self) -> tuple[list[Outcome], bool]:
        """One turn of the loop (:func:`_supervise` drives them): the outcomes that ended, handed over before
        the next turn admits more, and whether to go on."""
        try:
            if self._stop.is_set():
                raise _Stop
            if self._relay.failed is not None:
                raise self._relay.failed  # the listener's: as when the loop called it (the batch is cancelled)
            self._admit()
            halted = self.policy.halted
            if not self.running and not self._retry and not self._held and (self.intake.exhausted or halted):
                if halted:
                    self._skip_rest()
                self._finish_supervision()
                return self._drain(), False
            self._wait()
            self._tick()
            if self.on_tick is not None:
                self.on_tick(self)
            return self._drain(), True
        except BaseException as e:  # a stop asked from another thread, or a failure: cancel what runs
            if not isinstance(e, _Stop):
                self.interrupted_by(e)
            self._cancel_all()
            self._finish_supervision()
            if isinstance(e, _Stop):
                return [], False
            raise

    def _drain(self) -> list[Outcome]:
        """The outcomes ready for the reader; one whose transcript is still being kept waits (and in order,
        those after it), so that an outcome seen means its transcript is in place."""
        ready = self._out
        if not self._held:
            every = list(ready)
            ready.clear()
            return every
        keeping = self._held
        out: list[Outcome] = []
        held: list[Outcome] = []
        for o in ready:
            if id(o) in keeping or (held and self.options.ordered):
                held.append(o)
            else:
                out.append(o)
        ready.clear()
        ready.extend(held)
        return out

    def _admit(self) -> None:
        if closing() >= _limits.CLOSING_MAX:
            return  # the background close is behind: no new spools until it catches up (the next turns look again)
        reserved: int | None = None  # what running and starting children reserved and do not use yet
        # transcripts still being kept hold their spools open: as many as -j at most
        while (
            self.running < self.max_concurrent
            and self._driver.waiting < self.max_concurrent
            and self._keeper.pending < self.max_concurrent
        ):
            now = _now()
            cand = self._next_candidate(now)
            if cand is None:
                return
            seq, task, attempts = cand
            if isinstance(task, InvalidTask):
                self.intake.release()
                out = Outcome(id=task.id, verdict="spawn_error", attempts=0, error=task.error)
                self._log(out, None, final=True, started=time.time(), hold=True)
                self._final(out, seq)
                continue
            estimate = self.estimate_for(task)
            if reserved is None:  # once per call, not per start: a burst of starts stays O(running)
                reserved = sum(max(0, s.estimate - s.usage) for s in self._running.values())
                reserved += sum(p.estimate for p in self._spawner.starting)
            used, total = self.admission.sample()
            if not self.policy.admits(estimate, reserved=reserved, running=self.running, used=used, total=total):
                return
            if self._retry and self._retry[0].seq == seq and self._retry[0].task is task:
                self._retry.pop(0)
            else:
                self.intake.release()
            self._start(seq, task, attempts + 1, estimate)
            reserved += estimate

    def _start(self, seq: int, task: Task, attempt: int, estimate: int) -> None:
        limit = task.memory_limit or self.options.memory_limit
        cg: ChildCgroup | None = None
        if self.placement.kind is not None:  # made for every task where it can be (see __init__)
            try:
                cg = self.placement.create(memory_limit=limit, pids_max=self.options.pids_max)
            except OSError as e:
                if not self._cgroup_failed:
                    self._cgroup_failed = True
                    log.warning("cannot make a cgroup for task %s (%s): a task that gets none is contained by its "
                                "process group alone, its memory limit kept by RSS sampling (said once)", task.id, e)
        enforcement = enforcement_of(cg, limit)
        p = Pending(seq, task, attempt, estimate, limit, cg, enforcement, time.time())
        make = functools.partial(child_for, task, self.options, cgroup=cg, read_buffer=self._buf,
                                 live=self.on_event is not None)
        if task.input is not None or cg is not None:
            # reading its input (a FIFO's open waits for a writer; bytes are copied into a spool) or checking the
            # program for a gated start may wait: all of it in the spawner thread, never on the loop's
            self._spawner.start(p, make)
            return
        # the common start is made ready here (spools, environment, parser): the spawner thread then only
        # forks, waits for the exec and holds the group
        try:
            child = make(launch=False)
        except Exception as e:  # whatever keeps one task from starting is that task's outcome, not the batch's end
            self._spawner.failed(p, e)
            return
        try:
            self._spawner.start(p, functools.partial(launched, child))
        except BaseException:
            child.close()  # never launched: its spools go
            raise

    def _collect_started(self, *, block: bool = False) -> None:
        """Move children whose spawn finished into the running set (or give them a ``spawn_error``)."""
        finished = self._spawner.finished(block=block)
        for p in finished:
            try:
                child = p.result()
            except Exception as e:  # a start that failed, however: that task's spawn_error (see _start)
                self._spawner.forget(p)
                if p.cg is not None:
                    p.cg.remove(REMOVE_WITHIN)
                out = Outcome(
                    id=str(p.task.id), verdict="spawn_error", attempts=p.attempt, enforcement=p.enforcement,
                    error=str(e),
                )
                self._log(out, p.task, final=True, started=p.started_wall)
                self._final(out, p.seq)
                continue
            task = p.task
            slot = Slot(
                seq=p.seq,
                task=task,
                attempt=p.attempt,
                child=child,
                cg=p.cg,
                enforcement=p.enforcement,
                estimate=p.estimate,
                limit=p.limit,
                started=child.started,
                started_wall=p.started_wall,
            )
            key = slot.key = child.pidfd if child.pidfd >= 0 else -child.pid
            # registered before it leaves the spawner: an interrupt in between cannot lose the child
            self._running.setdefault(key, slot)
            self._looked[key] = slot
            if slot.cg is None and slot.limit is not None:
                self._watchdogs[key] = slot
            if key >= 0:
                self._poll.register(key, select.POLLIN)
                slot.polled = True
            else:
                self._unpolled.add(key)
            self._arm(slot)
            self._spawner.forget(p)
            if self.policy.cancels_new:
                self._end(slot, "cancelled")

    def _arm(self, s: Slot) -> None:
        """Put the slot's next lifecycle deadline in the timer heap (once per distinct time)."""
        at = s.child.life.deadline
        if at != s.armed_at:
            self._disarm(s)
            s.armed_at = at
            if at is not None:
                heapq.heappush(self._timers, (at, next(self._timer_n), s))

    def _disarm(self, s: Slot) -> None:
        """The slot's entry in the heap (if any) no longer counts. Stale entries deep in the heap (a task
        that ended long before its timeout) are dropped by a rebuild once they outnumber the live ones, so
        the heap stays O(running) however many tasks come and go."""
        if s.armed_at is None:
            return
        s.armed_at = None
        self._stale += 1
        if self._stale > len(self._running) + 64:
            running = self._running
            self._timers = [e for e in self._timers if e[2].armed_at == e[0] and running.get(e[2].key) is e[2]]
            heapq.heapify(self._timers)
            self._stale = 0

    def _next_due(self) -> float | None:
        """The soonest live deadline (stale entries on top are dropped)."""
        timers = self._timers
        while timers:
            at, _, s = timers[0]
            if s.armed_at == at and self._running.get(s.key) is s:
                return at
            heapq.heappop(timers)
            self._stale = max(0, self._stale - 1)
        return None

    def _due(self, now: float) -> list[Slot]:
        """The slots whose deadline has come, taken off the heap."""
        out: list[Slot] = []
        while (at := self._next_due()) is not None and at <= now:
            s = heapq.heappop(self._timers)[2]
            s.armed_at = None  # popped, not stale: re-armed after its advance
            out.append(s)
        return out

    def _wait(self) -> None:
        now = _now()
        timeout = TICK
        if self._due_now or ((self._draining or self._far) and not self._listener_behind):
            timeout = 0.0  # a backlog to parse: the next budget of it right after this poll (a full relay wakes us)
        due = self._next_due()
        if due is not None:
            timeout = min(timeout, due - now)
        if self._retry:
            timeout = min(timeout, self._retry[0].ready_at - now)
        timeout = max(0.0, timeout)
        if self._unpolled:
            timeout = min(timeout, 0.01)
        self._ready.clear()
        # a poll even with nothing running: its wake pipe is how the reader taking an outcome (room for the
        # next start), a start ending or a stop reach the loop (a sleep would make each of them wait a tick)
        self._ready.update(fd for fd, _ in self._poll.poll(math.ceil(timeout * 1000)))
        if self._waker.r in self._ready:
            # drained whoever woke us: left full, it would end every wait at once. A wake after this read is
            # seen by the next poll.
            self._waker.drain()

    def _tick(self) -> None:
        if self._spawner.starting:
            self._collect_started()
        now = _now()
        self._parse_until = now + _limits.PARSE_BUDGET
        for s in list(self._draining.values()):
            if self._drained(s):
                del self._draining[s.key]
                self._finalize(s)
        everyone = now >= self._next_sample
        if everyone:
            self._next_sample = now + self.options.sample_interval
            self._sample(now)
        elif self._far:
            # far behind: read on every turn (the loop does not sleep meanwhile), a budget at a time
            for s in list(self._far.values()):
                with contextlib.suppress(OSError):
                    self._look_at_spools(s, now=now, every=False, read_all=False, facts=None)
        # The child's lifecycle (spoolparse._os.lifecycle, the one written for run and arun too) decides when
        # to signal, reap and sweep. A child is stepped when its pidfd turned readable (an exit), when one of its
        # deadlines is due (the timer heap), when the loop ended it, when its spool is looked at, and once a
        # second in any case; a tick so costs in proportion to the children that changed, not to all of them.
        slots: list[Slot]
        look_all = now >= self._next_look_all
        if look_all:
            self._next_look_all = now + _limits.LOOK_ALL_INTERVAL
            slots = list(self._running.values())
        else:
            running = self._running
            slots = [running[k] for k in self._ready if k in running]
            slots += [running[k] for k in self._unpolled if k in running]
            slots += self._due(now)
            slots += self._due_now
        self._due_now = []
        seen: set[int] = set()
        for s in slots:
            if id(s) in seen or self._running.get(s.key) is not s:
                continue  # twice in the list, or finalized meanwhile (a halt ends the others from a finalize)
            seen.add(id(s))
            if s.key not in self._draining:
                self._stepped(s, self._step(s, now, ask=look_all))

    def _step(
        self, s: Slot, now: float, budget: Budget | None = None, *, facts: DiskFacts | None = None, ask: bool = False
    ) -> Step:
        """One :meth:`~spoolparse.child.Child.step` of the slot's child (``budget``: what its spool may be read
        for now; ``facts``: the once-a-second look at every spool's disk), its events to the listener. Its exit
        is what the poll saw of its pidfd (the kernel is asked where it has none, or ``ask``)."""
        exited = (s.key in self._ready) if s.polled and not ask else None
        step = s.child.step(now, budget, thorough=facts is not None, facts=facts, exited=exited)
        if step.events and self.on_event is not None:
            self._relay.put(self.on_event, s.task, step.events, step.read)
        return step

    def _stepped(self, s: Slot, step: Step) -> None:
        """What follows a step here: once the child is done, its outcome (its last output parsed a budget at a
        time first, see :meth:`_drained`); once its leader exited, no more sampling; else its next deadline."""
        if isinstance(step.action, Done):
            if self._drained(s, first=True):
                self._finalize(s)
            else:
                self._draining[s.key] = s
                self._unsample(s)
                self._unpoll(s)
            return
        if s.child.life.leader_exited:
            self._unsample(s)  # sampling skips it from now on: its spools are read once, at the end
            self._unpoll(s)
        self._arm(s)

    def _sample(self, now: float) -> None:
        # Memory of a task with no limit of its own only feeds admission and its peak: read once a
        # second (every interval near stop_at); a watchdog's limit is checked every interval.
        every = now >= self._next_memory_sample or self.admission.near_limits()
        if every:
            self._next_memory_sample = now + self.options.memory_sample_interval
        read_all = self.on_event is not None or now >= self._next_read
        if read_all:
            self._next_read = now + _limits.UNWATCHED_READ_INTERVAL
        # once a second every child is looked at; in between only those whose spools were written (inotify),
        # whose spools are not watched (young, or refused a watch), and whose memory limit is checked
        if every:
            slots = [s for s in self._running.values() if not s.child.life.leader_exited]
            if self._ino is not None:  # what the watches saw is looked at now anyway
                self._ino.drain()
                self._ino.overflowed = False
            self._watch(slots, now)
        else:
            slots = self._changed(read_all)
        # children younger than half an interval still count with their whole estimate as
        # reserved; skipping them spares a /proc scan when tasks are short
        young = now - self.options.sample_interval / 2
        sampled = [s for s in slots if s.cg is None and (s.limit is not None or (every and s.started <= young))]
        sizes = sample_trees(s.child.pid for s in sampled) if sampled else {}
        # the once-a-second spool checks of every child share what they ask the kernel beyond the sizes
        facts = DiskFacts() if every else None
        for s in slots:
            if s.cg is not None:
                if every:
                    s.usage = s.cg.usage()
            elif s.child.pid in sizes:
                s.usage = sizes[s.child.pid]
                if s.usage:
                    s.sampled = True
            s.peak = max(s.peak, s.usage)
            with contextlib.suppress(OSError):
                self._look_at_spools(s, now=now, every=every, read_all=read_all, facts=facts)
        if self._running:  # over a watchdog limit, or the host over kill_at: the policy names whom to end
            used, total = self.admission.sample(fresh=True)
            for kill in self.policy.memory_kills(self._running.values(), used=used, total=total):
                self._end(kill.ident, kill.why)

    def _look_at_spools(self, s: Slot, *, now: float, every: bool, read_all: bool, facts: DiskFacts | None) -> None:
        """Step the slot's child with a look at its spools when it is due: a read of what they hold, a check.

        What a growing spool holds is read every sample for a listener; with none, only to keep the parse
        current: every ``UNWATCHED_READ_INTERVAL``, or at once when far behind (``UNWATCHED_BACKLOG``).
        Between those reads a watched spool written to is only noted (no ``fstat``: its watch said it grew).
        """
        child = s.child
        # (what is known unread is as of its last look: one found far behind is read at every sample)
        far_behind = child.unread >= _limits.UNWATCHED_BACKLOG
        if not (every or read_all or far_behind) and s.wds and child.max_spool_bytes is None:
            return  # watched, and not due for a read (a watchdog's): if it grew, _changed noted it
        # a quiet unwatched child costs one fstat call; once a second every spool is looked at all the same
        # (a full disk fails a child's writes without growing its spool)
        if not child.has_news() and not every:
            self._behind.pop(s.key, None)  # nothing unread
            self._far.pop(s.key, None)
            return
        read = every or read_all or child.unread >= _limits.UNWATCHED_BACKLOG
        # the disk and the file size limit once a second, in the pass that looks at every child (``facts``)
        step = self._step(s, now, self._budget(PUMP_PER_TICK) if read else LOOK, facts=facts)
        # what is left to read is read at the next read_all sample, or at the next sample when far behind
        if child.unread:
            self._behind[s.key] = s
        else:
            self._behind.pop(s.key, None)
        if child.unread >= _limits.UNWATCHED_BACKLOG:
            self._far[s.key] = s
        else:
            self._far.pop(s.key, None)
        self._stepped(s, step)

    @property
    def _listener_behind(self) -> bool:
        """A slow listener has ``EVENT_BACKLOG`` events waiting: parse no more until it takes some."""
        return self.on_event is not None and self._relay.full

    def _budget(self, limit: int) -> Budget:
        """What a spool may be parsed for now: up to ``limit`` bytes within this turn's ``PARSE_BUDGET``; with a
        listener, no more than it has room for (nothing while it is behind: the spool keeps the rest)."""
        if self.on_event is None:
            return Budget(limit, self._parse_until)
        if self._relay.full:
            return LOOK
        return Budget(min(limit, self._relay.byte_room), self._parse_until, self._relay.room)

    def _drained(self, s: Slot, *, first: bool = False) -> bool:
        """Whether what is left of a done child's output is small enough to parse with its outcome; else
        some more of it is parsed, within this turn's budget (``first``: one ``fstat`` tells, no read)."""
        try:
            if first:
                s.child.has_news()  # the sizes now: the child is gone, they no longer change
                if s.child.unread <= _limits.PARSE_SLICE:
                    return True
            budget = self._budget(1 << 62)
            if not budget.size:
                return False  # the listener is behind: the rest waits for it
            got, live, caught_up = s.child.pump_within(budget.size, budget.until, budget.events)
            if live and self.on_event is not None:
                self._relay.put(self.on_event, s.task, live, got)
            return caught_up
        except OSError:
            return True  # result() meets the same error and says so in the outcome

    def _changed(self, read_all: bool) -> list[Slot]:
        """The slots a sample between two looks at all looks at (see :meth:`_sample`): those whose spools
        were written since the last sample, are not watched, hold bytes not parsed yet, or whose memory
        limit is checked. The tables hold only slots whose leader runs (:meth:`_unsample` keeps them so).

        Between two reads (not ``read_all``) a written spool is only noted as holding unread bytes, here, for
        the next read: the sample then visits only the slots that need it now (unwatched, far behind, under a
        watchdog, a cap on their spools to compare with), not every agent that wrote a line."""
        picked: dict[int, Slot] = {}
        if self._ino is not None:
            fired = self._ino.drain()
            if self._ino.overflowed:  # events were lost: any spool may have grown
                self._ino.overflowed = False
                picked = {k: s for k, s in self._running.items() if not s.child.life.leader_exited}
            else:
                watched = self._watched
                picked = {s.key: s for s in map(watched.get, fired) if s is not None}
        if read_all:
            picked.update(self._behind)
        else:
            self._behind.update(picked)
            # a cap on a spool is checked at every look: the written ones with a cap are looked at all the same
            picked = {**self._far, **{k: s for k, s in picked.items() if s.child.max_spool_bytes is not None}}
        picked.update(self._looked)
        picked.update(self._watchdogs)
        return list(picked.values())

    def _watch(self, slots: list[Slot], now: float) -> None:
        """Watch the spools of the slots that have run :data:`WATCH_AFTER` (from then on a sample looks at
        them only when they were written); where inotify is missing or refuses, they stay looked at."""
        if self._no_inotify:
            return
        for s in slots:
            if s.wds or s.watch_failed or now - s.started < WATCH_AFTER or self._looked.get(s.key) is not s:
                continue
            if self._ino is None:
                self._ino = open_inotify()
                if self._ino is None:
                    self._no_inotify = True
                    return
            child = s.child
            assert child.stderr is not None
            # a cap on the spools counts stderr too: its writes must wake a look as well
            fds = [child.stdout.fileno()]
            if child.max_spool_bytes is not None:
                fds.append(child.stderr.fileno())
            wds: list[int] = []
            try:
                for fd in fds:
                    wds.append(self._ino.watch(fd))
            except OSError:  # the watch limit (max_user_watches): looked at every sample, as before
                for wd in wds:
                    self._ino.unwatch(wd)
                s.watch_failed = True
                continue
            s.wds = tuple(wds)
            for wd in wds:
                self._watched[wd] = s
            del self._looked[s.key]
            # written between its last look and the watch: it is looked at in this sample all the same

    def _unwatch(self, s: Slot) -> None:
        if s.wds and self._ino is not None:
            for wd in s.wds:
                self._ino.unwatch(wd)
                if self._watched.get(wd) is s:
                    del self._watched[wd]
        s.wds = ()

    def _end(self, s: Slot, why: str) -> None:
        """End the slot's child at once with SIGKILL: ``why`` becomes its verdict's cause.

        The signal goes out when the tick advances the child's lifecycle, later in this same tick.
        """
        if s.forced is None:
            s.forced = why
        s.child.life.stop(_now(), why, kill=True)
        self._due_now.append(s)

    def _unsample(self, s: Slot) -> None:
        """``s`` leaves the tables :meth:`_changed` reads (its leader exited, or it is done)."""
        self._unwatch(s)
        for table in (self._looked, self._watchdogs, self._behind, self._far):
            if table.get(s.key) is s:
                del table[s.key]

    def _unregister(self, s: Slot) -> None:
        self._unsample(s)
        if self._running.get(s.key) is s:
            del self._running[s.key]
            self._unpolled.discard(s.key)
            self._disarm(s)
            self._unpoll(s)

    def _unpoll(self, s: Slot) -> None:
        """Poll the slot's pidfd no more: once the child has exited it stays readable, and polled it would end
        every wait (the loop would spin through the sweep and the backlog's parse)."""
        if s.polled:
            s.polled = False
            with contextlib.suppress(KeyError):
                self._poll.unregister(s.key)

    def _emit_events(self, task: Task, events: list[LiveEvent]) -> None:
        if self.on_event is not None:
            self._relay.put(self.on_event, task, events)

    def _hold(self, out: Outcome) -> None:
        """``out`` waits for one more thing before it goes to the reader (see :meth:`_drain`)."""
        with self._held_lock:
            self._held.setdefault(id(out), [out, 0])[1] += 1

    def _release_fn(self, out: Outcome) -> Callable[[], None]:
        """What a keeper or the event relay calls, in its own thread, once it is done with ``out``'s task
        (holds the table, never the batch)."""
        return functools.partial(_release, self._held, self._held_lock, id(out))

    def _finalize(self, s: Slot, *, cancelled: bool = False) -> Outcome:
        """The slot's outcome; it leaves the running set only at the end, so an interrupt cannot lose it."""
        self._unwatch(s)  # before its spools close: a watch pins a spool's inode, and a spool may be reused
        # the rest of the backlog's events reach the listener too (the last text, the usage), a step at a time
        emit = functools.partial(self._emit_events, s.task) if self.on_event is not None else None
        out, later = outcome_of(
            s, cancelled=cancelled, soft_signal=self.options.soft_signal, results=self._results,
            keep_transcript=self.options.keep_transcript, emit=emit,
        )
        if out.verdict == "cancelled":  # why spoolparse cancelled it, not the signal that ended it
            out.error = self.policy.cancelled_error(self._cancel_cause)
        if later is not None:
            self._hold(out)
            self._keeper.submit(functools.partial(_kept, later, self._release_fn(out)))
        if emit is not None:
            self._hold(out)
            self._relay.mark(self._release_fn(out))
        then = self.policy.ended(Attempt(s.seq, s.attempt, out.verdict, s.forced, cancelled), _now())
        if isinstance(then, Again):
            self._log(out, s.task, final=False, started=s.started_wall)
            self._retry.append(_Retry(then.at, s.seq, s.task, s.attempt))
            self._retry.sort()
        else:
            self._log(out, s.task, final=True, started=s.started_wall, hold=not cancelled)
            if not cancelled:
                self._final(out, s.seq)
        self._unregister(s)
        return out

    def _log(self, out: Outcome, task: Task | None, *, final: bool, started: float, hold: bool = False) -> None:
        if self.joblog is not None:
            argv = list(task.argv) if task is not None else None
            self.joblog.write(out, argv=argv, final=final, started=started, hold=hold)

    def _skip_rest(self) -> None:
        """After a halt: a ``skipped`` outcome for the task held back and for every one still to read.

        Each input line so gets exactly one outcome. Not written to the job log: ``resume`` runs them.
        """
        for seq, out in self.intake.skip_rest():
            self._final(out, seq)

    def _final(self, out: Outcome, seq: int) -> None:
        # a halt: what was read and not started gets a skipped outcome (_skip_rest); "now" cancels what runs
        if self.policy.final(out.verdict) == "now":
            for s in self._running.values():
                self._end(s, "cancelled")
        self._emission.add(seq, out)
        # halting or resuming leaves holes in the order: past them once nothing can fill them
        over = (self.intake.exhausted or self.policy.halted) and self.intake.held is None
        if over and not self.running and not self._retry:
            self._emission.past_holes()

    # -- cancelling --------------------------------------------------------

    def _cancel_all(self) -> None:
        """TERM every group, a short grace, KILL, reap; a ``cancelled`` outcome for every started task.

        A second Ctrl-C (or SIGTERM) during this cleanup is ignored, so it cannot leave children behind.
        """
        with uninterruptible():
            self._cancel_running()

    def _cancel_running(self) -> None:
        self._relay.abandon()  # a cancelled batch's listener hears no more (its events would follow the cancel)
        self._collect_started(block=True)
        draining, self._draining = self._draining, {}
        done = list(draining.values())
        slots = [s for s in self._running.values() if draining.get(s.key) is not s]
        now = _now()
        for s in slots:
            if s.forced is None:
                s.forced = "cancelled"
            s.child.life.stop(now, "cancelled", grace=_limits.INTERRUPT_GRACE)
            s.child.step(now)  # every TERM out first: the graces run side by side
        for s in done:  # ended before the cancel: their own outcome, their backlog parsed whole (after the TERMs)
            self._finalize(s)
        for s in slots:
            with contextlib.suppress(OSError):
                s.child.settle()  # KILL at the end of the grace, reap, sweep what is left
            if s.child.returncode is None:
                s.child.returncode = s.child.proc.returncode = -signal.SIGKILL
            self.cancelled.append(self._finalize(s, cancelled=True))
        self._keeper.wait()  # their transcripts, and those of the outcomes below, are in place first
        self._held.clear()
        # finished but not yet handed out (or held back for order): never lost, reported with them
        undelivered = self._emission.take_undelivered()
        self.cancelled[:0] = undelivered
        for r in self._retry:
            why = self._cancel_cause or cancelled_error(None)
            out = Outcome(id=str(r.task.id), verdict="cancelled", attempts=r.attempts, error=f"{why}, before a retry")
            self._log(out, r.task, final=True, started=time.time())
            self.cancelled.append(out)
        self._retry.clear()

    def _finish_cleanup(self) -> None:
        """The batch is over for its reader: the children (if the loop did not), the job log, the wake pipe."""
        if self._closed:
            return
        self._closed = True
        self._finish_supervision()
        self._waker.close()
        wait_closed()  # the spools closing in the background: none of the batch's descriptors outlive it
        wait_removed()  # cgroups whose processes were still dying: gone (or given up on) when the batch is over
        if self.joblog is not None:
            self.joblog.close()  # after the last outcome was handed out: its final line is in

    def _finish_supervision(self) -> None:
        """The loop is over: anything still running is killed, the spawner threads end (idempotent)."""
        if self._supervised:
            return
        self._supervised = True
        if self._ino is not None:
            self._ino.close()  # its watches go with it: none pins a spool once the children are closed
            self._ino = None
            self._watched.clear()
        for s in list(self._running.values()):  # only after an error inside the cleanup itself
            s.child.kill_now()
            s.child.close()
            if s.cg is not None:
                s.cg.remove(self.options.grace)
        self._running.clear()
        self._spawner.shutdown()
        self.intake.close()
        if self._done is not None:
            self._done.close()
        self._keeper.wait()
        self._keeper.close()
        if self._results is not None:
            self._results.close()  # after the last transcript was kept
        self._relay.close(wait=_limits.EVENT_JOIN)


def _kept(keep: Callable[[], None], release: Callable[[], None]) -> None:
    """A keeper's job: keep the transcript, then let its outcome go."""
    try:
        keep()
    finally:
        release()


def _release(held: dict[int, list[Any]], lock: threading.Lock, key: int) -> None:
    with lock:
        entry = held.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del held[key]


def _gib(n: int) -> str:
    return f"{n / _limits.GiB:.1f} GiB"
