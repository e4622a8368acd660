"""Many children on one host: one supervisor loop, memory admission, caps, timeouts, one outcome per task.

One thread follows every running child: it sleeps in :func:`select.poll` on
the children's pidfds (waking at once when one exits, or after a short
tick), and on each tick steps the children that need it
(:meth:`~spoolparse.child.Child.step`: their spools read, checked, their
lifecycles advanced), samples memory, and admits new tasks. A sample looks
at every child once a second; in between only at the spools that grew, so a
quiet agent costs nothing per tick. Tasks are pulled from the input only
when a slot is free, so memory and open files are O(``max_concurrent``),
never O(number of tasks).

This module is that loop: the polling and the threads. What it decides is
the batch policy's (:mod:`.policy`: admission, memory kills, retries and
requeues, halting); the rest is each in a module of its own: the input
(:mod:`.intake`), starting children (:mod:`.spawning`), what wakes the loop
(:mod:`.wakeups`) and the deadlines it sleeps until (:mod:`.timers`), which
spools a sample looks at (:mod:`.looks`), a running task and its outcome
(:mod:`.slot`, verdicts in :mod:`.verdicts`), the order outcomes go out in
and when they are final in the job log (:mod:`.emission`), and the asyncio
face (:mod:`.arun`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import _limits
from .._os.cgroup import wait_removed
from .._os.lifecycle import Done
from .._os.proc import raise_open_files_limit
from .._relay import EventRelay
from .._signals import deferred
from ..child import LOOK, Budget, Step
from ..cost import preload as preload_prices
from ..errors import UsageError
from ..providers.base import LiveEvent
from ..spool import closing, resolve_spool_dir, wait_closed
from ..spool_full import DiskFacts
from .admission import Admission, size
from .calibrations import command_key, recorded
from .driver import Driver, turns
from .emission import Emission, HandsOut, Holds
from .intake import Intake, InvalidTask
from .joblog import DoneIds, JobLog
from .looks import SpoolLooks
from .memory import HostMemory, MemoryProbe
from .options import ENFORCE_MODES, BatchOptions
from .policy import Again, Attempt, BatchPolicy
from .results import Keeper, ResultsDir
from .slot import Slot, measure, outcome_of
from .spawning import Spawner
from .tasks import Outcome, Task, TaskLike
from .timers import Timers
from .verdicts import cancelled_error
from .wakeups import Schedule, Waker, Wakeups

__all__ = ["Batch", "BatchOptions", "InvalidTask", "ENFORCE_MODES"]

log = logging.getLogger("spoolparse.runner")


#: Longest sleep of the supervisor between looks at its children (seconds).
TICK = 0.05
#: Bytes read from one child's spool per tick (the rest waits for the next one).
PUMP_PER_TICK = 4 * _limits.MiB


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
        #: How many tasks run at once, and the memory figures that chose it.
        self.sizing = size(
            self.probe.total(), max_concurrent=o.max_concurrent, reserve=o.reserve, memory_per_task=o.default_estimate,
            calibrated=recorded() if o.memory_per_task is None else {},
        )
        #: Most tasks at once (``-j``, or from memory: :attr:`sizing`).
        self.max_concurrent = max_concurrent = self.sizing.max_concurrent
        log.info("max_concurrent %d, bounded by %s", max_concurrent, self.sizing.bound)
        self.window = o.window if o.window is not None else 2 * max_concurrent
        if self.window < max_concurrent:
            if self._results is not None:
                self._results.close()
            raise UsageError(f"window ({self.window}) must be at least max_concurrent ({max_concurrent})")
        #: What the batch decides (admission, memory kills, retries and requeues, halting), fed by this loop.
        self.policy = BatchPolicy.of(o, window=self.window)
        #: Counters for progress displays (the final outcomes so far): the policy's.
        self.tally = self.policy.tally
        self._waker = Waker()
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
        self._running: dict[int, Slot] = {}  # by pidfd, or by -pid when there is none
        self._retry: list[_Retry] = []
        # what the loop sleeps on: the children's pidfds and the wake pipe
        self._wakeups = Wakeups(self._waker)
        # one read buffer for every child (only this loop pumps), each child in its cgroup before it runs
        self._spawner = Spawner(max_concurrent, self._waker.wake, options=o, read_buffer=bytearray(_limits.READ_CHUNK))
        #: Where the tasks' cgroups are made (``kind`` ``None``: nowhere; each has its process group alone).
        self.placement = self._spawner.placement
        # transcripts kept (``results``) off the loop's thread; an outcome waits for its own (see _drain)
        self._keeper = Keeper(self._waker.wake)
        # live events go to on_event from a thread of their own (a slow listener holds up no timeout)
        self._relay = EventRelay(self._waker.wake)
        # outcomes that wait for their transcript to be kept or their last events to be delivered
        self._holds = Holds()
        self._clock = Schedule()
        self._timers = Timers(self._running)  # the lifecycle deadlines of running children, soonest first
        self._due_now: list[Slot] = []  # ended by the loop (_end): stepped in this same tick
        # which spools a sample looks at, and which of them inotify watches
        self._looks = SpoolLooks(self._running)
        # done (exited, reaped, swept) with a backlog still to parse: a PARSE_BUDGET of it each turn, then finalized
        self._draining: dict[int, Slot] = {}
        self._stop = threading.Event()
        self._closed = False
        self.cancelled: list[Outcome] = []
        self.on_tick: Callable[[Batch], None] | None = None
        #: Called with each task's live events while it runs (from the batch loop: it must be quick).
        #: Set before iterating; without it tool lines go unread.
        self.on_event: Callable[[Task, LiveEvent], None] | None = None
        # The loop runs in a thread of its own (started by the first ``next``), so the children stay
        # supervised however long the reader takes over each outcome; while ``max_concurrent`` ended
        # outcomes wait for the reader, no new task starts (the running ones go on).
        self._driver: Driver[Outcome] = Driver(
            turns(weakref.ref(self)), name="spoolparse-batch", room_at=max_concurrent - 1,
            on_room=self._waker.wake,
        )
        self._supervised = False  # the children and spawner threads are finished with

    # -- the public face ---------------------------------------------------

    @property
    def running(self) -> int:
        return len(self._running) + len(self._spawner.starting)

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
            return self._driver.take(self._hand)
        except StopIteration:
            raise
        except BaseException as e:  # Ctrl-C (or a signal made an exception) while waiting: cancel, as the loop did
            self.interrupted_by(e)
            self._stop_running()
            raise

    def _stop_running(self) -> None:
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
        sizing = self.sizing
        if sizing.calibrated:
            return sizing.calibrated.get(command_key(task.argv), sizing.memory_per_task)
        return sizing.memory_per_task

    def request_stop(self) -> None:
        """Thread-safe: cancel the batch at the loop's next tick (iteration then ends)."""
        self._stop.set()
        self._waker.wake()

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
        """One turn of the loop (:func:`~.driver.turns` drives them): the outcomes that ended, handed over before
        the next turn admits more, and whether to go on."""
        try:
            if self._stop.is_set():
                raise _Stop
            if self._relay.failed is not None:
                raise self._relay.failed  # the listener's: as when the loop called it (the batch is cancelled)
            self._admit()
            halted = self.policy.halted
            if not self.running and not self._retry and not self._holds and (self.intake.exhausted or halted):
                if halted:
                    self._skip_rest()
                self._finish_supervision()
                return self._emission.take(self._holds), False
            self._wait()
            self._tick()
            if self.on_tick is not None:
                self.on_tick(self)
            return self._emission.take(self._holds), True
        except BaseException as e:  # a stop asked from another thread, or a failure: cancel what runs
            if not isinstance(e, _Stop):
                self.interrupted_by(e)
            self._cancel_all()
            self._finish_supervision()
            if isinstance(e, _Stop):
                return [], False
            raise

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
            self._spawner.start_task(seq, task, attempts + 1, estimate, live=self.on_event is not None)
            reserved += estimate

    def _collect_started(self, *, block: bool = False) -> None:
        """Move children whose spawn finished into the running set (or give them a ``spawn_error``)."""
        finished = self._spawner.finished(block=block)
        for p in finished:
            try:
                slot = p.slot()
            except Exception as e:  # a start that failed, however: that task's spawn_error (see Spawner.start_task)
                self._spawner.forget(p)
                out = p.failed_outcome(e)
                self._log(out, p.task, final=True, started=p.started_wall)
                self._final(out, p.seq)
                continue
            key = slot.key
            # registered before it leaves the spawner: an interrupt in between cannot lose the child
            self._running.setdefault(key, slot)
            self._looks.add(slot)
            self._wakeups.add(slot)
            self._timers.arm(slot)
            self._spawner.forget(p)
            if self.policy.cancels_new:
                self._end(slot, "cancelled")

    def _wait(self) -> None:
        now = _now()
        timeout = TICK
        if self._due_now or ((self._draining or self._looks.far) and not self._listener_behind):
            timeout = 0.0  # a backlog to parse: the next budget of it right after this poll (a full relay wakes us)
        due = self._timers.next_due()
        if due is not None:
            timeout = min(timeout, due - now)
        if self._retry:
            timeout = min(timeout, self._retry[0].ready_at - now)
        # a poll even with nothing running: its wake pipe is how the reader taking an outcome (room for the
        # next start), a start ending or a stop reach the loop (a sleep would make each of them wait a tick)
        self._wakeups.wait(timeout)

    def _tick(self) -> None:
        if self._spawner.starting:
            self._collect_started()
        now = _now()
        clock = self._clock
        clock.parse_until = now + _limits.PARSE_BUDGET
        for s in list(self._draining.values()):
            if self._drained(s):
                del self._draining[s.key]
                self._finalize(s)
        if now >= clock.next_sample:
            clock.next_sample = now + self.options.sample_interval
            self._sample(now)
        elif self._looks.far:
            # far behind: read on every turn (the loop does not sleep meanwhile), a budget at a time
            for s in list(self._looks.far.values()):
                with contextlib.suppress(OSError):
                    self._look_at_spools(s, now=now, every=False, read_all=False, facts=None)
        # The child's lifecycle (spoolparse._os.lifecycle, the one written for run and arun too) decides when
        # to signal, reap and sweep. A child is stepped when its pidfd turned readable (an exit), when one of its
        # deadlines is due (the timer heap), when the loop ended it, when its spool is looked at, and once a
        # second in any case; a tick so costs in proportion to the children that changed, not to all of them.
        slots: list[Slot]
        look_all = now >= clock.next_look_all
        if look_all:
            clock.next_look_all = now + _limits.LOOK_ALL_INTERVAL
            slots = list(self._running.values())
        else:
            running = self._running
            slots = [running[k] for k in self._wakeups.ready if k in running]
            slots += [running[k] for k in self._wakeups.unpolled if k in running]
            slots += self._timers.due(now)
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
        exited = None if ask else self._wakeups.exited(s)
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
                self._looks.remove(s)
                self._wakeups.remove(s)
            return
        if s.child.life.leader_exited:
            self._looks.remove(s)  # sampling skips it from now on: its spools are read once, at the end
            self._wakeups.remove(s)
        self._timers.arm(s)

    def _sample(self, now: float) -> None:
        # Memory of a task with no limit of its own only feeds admission and its peak: read once a
        # second (every interval near stop_at); a watchdog's limit is checked every interval.
        clock = self._clock
        every = now >= clock.next_memory_sample or self.admission.near_limits()
        if every:
            clock.next_memory_sample = now + self.options.memory_sample_interval
        read_all = self.on_event is not None or now >= clock.next_read
        if read_all:
            clock.next_read = now + _limits.UNWATCHED_READ_INTERVAL
        # once a second every child is looked at; in between only those whose spools were written (inotify),
        # whose spools are not watched (young, or refused a watch), and whose memory limit is checked
        slots = self._looks.everyone(now) if every else self._looks.changed(read_all, now)
        measure(slots, every=every, young=now - self.options.sample_interval / 2)
        # the once-a-second spool checks of every child share what they ask the kernel beyond the sizes
        facts = DiskFacts() if every else None
        for s in slots:
            with contextlib.suppress(OSError):
                self._look_at_spools(s, now=now, every=every, read_all=read_all, facts=facts)
        if self._running:  # over a watchdog limit, or the host over kill_at: the policy names whom to end
            used, total = self.admission.sample(fresh=True)
            for kill in self.policy.memory_kills(self._running.values(), used=used, total=total):
                self._end(kill.ident, kill.why)

    def _look_at_spools(self, s: Slot, *, now: float, every: bool, read_all: bool, facts: DiskFacts | None) -> None:
        """Step the slot's child with a look at its spools when the sample is due one (:meth:`SpoolLooks.due`):
        a read of what they hold, or a look at their sizes, its cap and (``facts``, once a second) the disk."""
        read = self._looks.due(s, every=every, read_all=read_all)
        if read is None:
            return
        step = self._step(s, now, self._budget(PUMP_PER_TICK) if read else LOOK, facts=facts)
        self._looks.looked_at(s)
        self._stepped(s, step)

    @property
    def _listener_behind(self) -> bool:
        """A slow listener has ``EVENT_BACKLOG`` events waiting: parse no more until it takes some."""
        return self.on_event is not None and self._relay.full

    def _budget(self, limit: int) -> Budget:
        """What a spool may be parsed for now: up to ``limit`` bytes within this turn's ``PARSE_BUDGET``; with a
        listener, no more than it has room for (nothing while it is behind: the spool keeps the rest)."""
        if self.on_event is None:
            return Budget(limit, self._clock.parse_until)
        if self._relay.full:
            return LOOK
        return Budget(min(limit, self._relay.byte_room), self._clock.parse_until, self._relay.room)

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

    def _end(self, s: Slot, why: str) -> None:
        """End the slot's child at once with SIGKILL: ``why`` becomes its verdict's cause.

        The signal goes out when the tick advances the child's lifecycle, later in this same tick.
        """
        if s.forced is None:
            s.forced = why
        s.child.life.stop(_now(), why, kill=True)
        self._due_now.append(s)

    def _unregister(self, s: Slot) -> None:
        self._looks.remove(s)
        if self._running.get(s.key) is s:
            del self._running[s.key]
            self._timers.disarm(s)
            self._wakeups.forget(s)

    def _emit_events(self, task: Task, events: list[LiveEvent]) -> None:
        if self.on_event is not None:
            self._relay.put(self.on_event, task, events)

    def _finalize(self, s: Slot, *, cancelled: bool = False) -> Outcome:
        """The slot's outcome; it leaves the running set only at the end, so an interrupt cannot lose it."""
        self._looks.unwatch(s)  # before its spools close: a watch pins a spool's inode, and a spool may be reused
        # the rest of the backlog's events reach the listener too (the last text, the usage), a step at a time
        emit = functools.partial(self._emit_events, s.task) if self.on_event is not None else None
        out, later = outcome_of(
            s, cancelled=cancelled, soft_signal=self.options.soft_signal, results=self._results,
            keep_transcript=self.options.keep_transcript, emit=emit,
        )
        if out.verdict == "cancelled":  # why spoolparse cancelled it, not the signal that ended it
            out.error = self.policy.cancelled_error(self._cancel_cause)
        if later is not None:
            self._keeper.submit(later, then=self._holds.hold(out))
        if emit is not None:
            self._relay.mark(self._holds.hold(out))
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

        An ending signal during this cleanup is held back to its end (:func:`~spoolparse._signals.deferred`), so it
        cannot leave children behind.
        """
        with deferred():
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
        self._holds.clear()
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
        self._looks.close()
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
