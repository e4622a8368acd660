"""A running task of a local batch, and the outcome its slot becomes once the child is done.

The outcome gathers what the child's lifecycle saw (status, CPU, a timeout,
the soft signal), what the result says (the answer, ``ok``, its error), what
memory it reached (the cgroup's peak where it had one, else the sampled one)
and why the runner ended it, if it did; the verdict comes from
:func:`~spoolparse.runner.verdicts.runner_verdict`, the one rule for it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .._os.cgroup import ChildCgroup
from ..child import Child
from ..providers.base import LiveEvent
from ..result import Result
from ..types import Summary
from .memory import sample_trees
from .results import ResultsDir
from .tasks import Outcome, Task
from .verdicts import memory_kill_error, runner_verdict

__all__ = ["Slot", "outcome_of", "measure"]

log = logging.getLogger("spoolparse.runner")


@dataclass(eq=False)
class Slot:
    """A task whose child runs (or ran, until its outcome is made)."""

    seq: int
    task: Task
    attempt: int
    child: Child
    cg: ChildCgroup | None
    enforcement: str
    estimate: int
    limit: int | None
    started: float
    started_wall: float
    forced: str | None = None  # timeout / killed_memory / requeue / cancelled
    soft_sent: bool = False
    usage: int = 0
    peak: int = 0
    sampled: bool = False
    rc: int | None = None
    cpu: float = 0.0
    key: int = 0  # in the loop's running set: the pidfd, or -pid where there is none
    armed_at: float | None = None  # the lifecycle deadline the loop's timer heap holds for it
    polled: bool = False  # its pidfd is in the loop's poll set (until the leader's exit is seen)
    wds: tuple[int, ...] = ()  # inotify watches on its spools, once it has run a while (Batch._changed)
    watch_failed: bool = False  # inotify refused a watch (limits): its spool is looked at every sample

    @property
    def watchdog_limit(self) -> int | None:
        """The memory limit sampling keeps (none where its cgroup keeps it)."""
        return self.limit if self.cg is None else None

    @property
    def ending(self) -> bool:
        """The batch is ending it already, or its leader exited (what a memory sample spares)."""
        return self.forced is not None or self.child.life.leader_exited


def measure(slots: list[Slot], *, every: bool, young: float) -> None:
    """What memory each of ``slots`` uses now (its ``usage``, and its ``peak``): its cgroup's at the
    once-a-second sample (``every``), else its process tree's, in one pass over ``/proc`` for all of them
    (:func:`~.memory.sample_trees`): of those whose memory limit sampling keeps, and at the once-a-second
    sample of those started before ``young``. A younger one still counts with its whole estimate as reserved:
    skipping it spares a ``/proc`` scan when tasks are short."""
    sampled = [s for s in slots if s.cg is None and (s.limit is not None or (every and s.started <= young))]
    sizes = sample_trees(s.child.pid for s in sampled) if sampled else {}
    for s in slots:
        if s.cg is not None:
            if every:
                s.usage = s.cg.usage()
        elif s.child.pid in sizes:
            s.usage = sizes[s.child.pid]
            if s.usage:
                s.sampled = True
        s.peak = max(s.peak, s.usage)


def outcome_of(
    s: Slot,
    *,
    cancelled: bool,
    soft_signal: int,
    results: ResultsDir | None,
    keep_transcript: str,
    emit: Callable[[list[LiveEvent]], None] | None,
) -> tuple[Outcome, Callable[[], None] | None]:
    """Read the slot's result (its backlog's events go to ``emit``), close its child and cgroup: its outcome,
    and what is left to do for it.

    ``results`` keeps the transcript (all of them with ``keep_transcript="all"``, else those not ``ok``): that
    is left to do (then the child's spools are closed after it), for the caller to run where a copy of any
    size may take its time; so is removing the transcript an earlier attempt left, once one is ``ok`` and not
    kept.
    """
    child = s.child
    life = child.life
    s.rc, s.cpu, s.soft_sent = child.returncode, child.cpu, life.soft_sent
    if life.timed_out and s.forced is None:
        s.forced = "timeout"
    if child.max_rss:
        # the largest resident set of the leader and the descendants it waited for: a peak that
        # sampling (once a second) can miss for a short task
        s.peak = max(s.peak, child.max_rss)
        s.sampled = True
    summary: Summary | None = None
    error: str | None = None
    res_ok = False
    later: Callable[[], None] | None = None
    try:
        res, _ = child.result(keep_output=results is not None, timeout=child.options.timeout, emit=emit)
        summary = res.summary()
        res_ok = res.ok
        error = res.error
        if results is not None and (keep_transcript == "all" or not res_ok or s.forced is not None):
            later = functools.partial(_keep_and_close, results, s.task, res, child)
        elif results is not None:
            child.close()
            later = functools.partial(_forget, results, s.task)
    except Exception as e:
        error = f"cannot read the result: {type(e).__name__}: {e}"
    finally:
        if later is None:
            child.close()
    peak: int | None = s.peak if s.sampled else None
    source = "sampled" if s.sampled else None
    oom = False
    cg_notes: tuple[str, str | None] | None = None
    if s.cg is not None:
        cg_peak = s.cg.peak()
        if cg_peak is not None:
            peak, source = cg_peak, "cgroup"
        oom = s.cg.oom_killed()
        cg_notes = s.cg.memory_note(), s.cg.pids_note()
        s.cg.remove(life.deadlines.grace)  # what still dies in it is tried again off this thread
    verdict = runner_verdict(
        forced=s.forced, ok=res_ok, oom=oom, soft_ended=s.soft_sent and s.rc == -soft_signal, cancelled=cancelled,
    )
    if verdict == "killed_memory":
        error = memory_kill_error(
            requeue=s.forced == "requeue", limit=s.limit, set_by_task=s.task.memory_limit is not None,
            enforcement=s.enforcement, cgroup_note=cg_notes[0] if cg_notes is not None else None, said=error,
        )
    if cg_notes is not None and cg_notes[1] is not None and verdict != "ok":
        error = f"{error}; {cg_notes[1]}" if error else cg_notes[1]
    rc = s.rc
    outcome = Outcome(
        id=str(s.task.id),
        verdict=verdict,
        attempts=s.attempt,
        wall_s=time.monotonic() - s.started,
        cpu_s=s.cpu,
        peak_memory=peak,
        peak_source=source,
        returncode=rc,
        signal=-rc if rc is not None and rc < 0 else None,
        enforcement=s.enforcement,
        error=error,
        summary=summary,
    )
    return outcome, later


def _keep_and_close(results: ResultsDir, task: Task, res: Result, child: Child) -> None:
    """The task's transcript into ``results`` (a link where the kernel allows one, else a copy), then its
    spools closed; run in the keeper's thread, where a problem is logged, never raised."""
    assert res.stdout is not None and res.stderr is not None
    try:
        results.keep(str(task.id), {"stdout": res.stdout, "stderr": res.stderr})
    except Exception as e:
        log.warning("cannot keep the transcript of %s in %s: %s", task.id, results.path, e)
    finally:
        child.close()


def _forget(results: ResultsDir, task: Task) -> None:
    """The transcript an earlier attempt of ``task`` left in ``results`` goes (this one was ``ok``); run in the
    keeper's thread, where a problem is logged, never raised."""
    try:
        results.forget(str(task.id))
    except Exception as e:
        log.warning("cannot remove the transcript an earlier attempt of %s left in %s: %s", task.id, results.path, e)
