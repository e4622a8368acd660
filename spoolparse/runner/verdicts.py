"""The runner's verdict of one attempt, written once: what the supervisor did to a task, then what the run said.

The run's own rule (:func:`spoolparse.verdict.judge`: the answer in hand,
exit 0) decides ``ok`` versus ``failed``; on top of it the supervisor knows
why it ended a task, and that comes first: cancelled, then a memory kill
(its own limit, host pressure, or the kernel's OOM kill in its cgroup), then a
timeout (the hard one, or the soft signal that ended it), then a full spool.
"""

from __future__ import annotations

__all__ = ["RETRY_VERDICTS", "REQUEUE_ERROR", "runner_verdict", "memory_kill_error"]

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


def memory_kill_error(*, requeue: bool, limit: int | None, enforcement: str, cgroup_note: str | None) -> str:
    """The ``error`` of a memory kill: the run's own names only the signal; the runner knows why it sent it."""
    if requeue:
        return REQUEUE_ERROR
    error = f"killed: process tree over its memory limit {limit} ({enforcement})"
    return f"{error}; {cgroup_note}" if cgroup_note is not None else error
