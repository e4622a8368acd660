"""The runner's verdict of one attempt, written once: what the supervisor did to a task, then what the run said.

The run's own rule (:func:`spoolparse.verdict.judge`: the answer in hand,
exit 0) decides ``ok`` versus ``failed``; on top of it the supervisor knows
why it ended a task, and that comes first: cancelled, then a memory kill
(its own limit, host pressure, or the kernel's OOM kill in its cgroup), then a
timeout (the hard one, or the soft signal that ended it), then a full spool.
"""

from __future__ import annotations

import signal

from .._signals import Interrupted, as_interrupted
from ..providers.base import size_text

__all__ = ["RETRY_VERDICTS", "REQUEUE_ERROR", "runner_verdict", "memory_kill_error", "cancelled_error", "HALTED_NOW"]

#: The error of a task a ``--halt now`` cancelled.
HALTED_NOW = "cancelled: the batch halted (--halt now)"

#: Verdicts ``retries`` runs again: the agent failed, timed out or outgrew its own memory limit. Not
#: ``spawn_error`` (a missing command stays missing), ``cancelled`` or ``skipped``; a requeue after host
#: memory pressure counts apart (``requeues``).
RETRY_VERDICTS = ("failed", "timeout", "killed_memory")

#: The ``error`` of an attempt killed for host memory pressure (and so requeued, up to ``requeues`` times).
REQUEUE_ERROR = "killed: host memory above kill_at"


def runner_verdict(*, forced: str | None, ok: bool, oom: bool, soft_ended: bool, cancelled: bool = False) -> str:
    """The attempt's verdict.

    ``forced``: why the supervisor ended it (``cancelled``, ``requeue``,
    ``killed_memory``, ``timeout``, ``failed``), or ``None``; ``ok``: the
    run's own verdict; ``oom``: the kernel killed in its cgroup for memory;
    ``soft_ended``: the soft signal ended it.
    """
    if cancelled or forced == "cancelled":
        return "cancelled"
    if forced in ("requeue", "killed_memory") or oom:
        return "killed_memory"
    if forced == "timeout" or soft_ended:
        return "timeout"
    if forced == "failed":
        return "failed"
    return "ok" if ok else "failed"


def memory_kill_error(
    *, requeue: bool, limit: int | None, set_by_task: bool, enforcement: str, cgroup_note: str | None,
    said: str | None = None,
) -> str:
    """The ``error`` of a memory kill: which limit was passed (its bytes, and whether the task or the batch set it),
    what kept it and what the kernel saw, then ``said``, the run's own error (which names only what the kill did
    to it: a stream cut short, a signal)."""
    if requeue:
        return REQUEUE_ERROR
    if limit is None:  # the kernel's OOM kill in the task's cgroup, with no limit of ours on it
        error = f"killed: out of memory ({enforcement})"
    else:
        source = "the task's memory_limit" if set_by_task else "the batch's memory_limit (--memory-limit)"
        why = f"{size_text(limit)}, {source}; {enforcement}"
        error = f"killed: process tree over its memory limit {limit} bytes ({why})"
    if cgroup_note is not None:
        error = f"{error}; {cgroup_note}"
    if said and not said.startswith("the process was killed"):
        error = f"{error}; the run said: {said}"
    return error


def cancelled_error(cause: BaseException | None) -> str:
    """The error of a task cancelled because of ``cause``: the signal spoolparse received (``cancelled (SIGINT
    to spoolparse)``; a ``KeyboardInterrupt`` is a SIGINT), not the one sent to the task to end it; ``None``:
    the batch was closed by its caller; another exception: the batch's own failure. A bare
    ``KeyboardInterrupt`` that stands for another signal (Ray's waits make one of ours) names that signal."""
    if isinstance(cause, KeyboardInterrupt):
        cause = as_interrupted(cause)
    if isinstance(cause, Interrupted):
        try:
            name = signal.Signals(cause.signum).name
        except ValueError:
            name = f"signal {cause.signum}"
        return f"cancelled ({name} to spoolparse)"
    if isinstance(cause, KeyboardInterrupt):
        return "cancelled (SIGINT to spoolparse)"
    if cause is None:
        return "cancelled (the batch was closed)"
    return f"cancelled ({type(cause).__name__} in the batch)"
