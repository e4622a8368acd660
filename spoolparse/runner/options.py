"""A batch's options, in one typed place: :class:`BatchOptions`.

:func:`~spoolparse.run_many`, :func:`~spoolparse.arun_many`, :class:`Batch`,
the Ray backend and ``spoolparse batch`` all take one of these (the keyword
arguments of ``run_many`` and ``arun_many`` build one), and every option is
checked here, once, before anything starts. A batch's options hold every
field of :class:`~spoolparse.ChildOptions` (what each task's child gets,
unless its task says otherwise: :attr:`BatchOptions.child`) and the batch's
own. Defaults are named in :mod:`spoolparse._limits`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _limits
from ..errors import UsageError
from ..options import ChildOptions
from .halt import Halt, parse_halt
from .joblog import Resume
from .results import KEEP_MODES, KeepTranscript

if TYPE_CHECKING:
    from .memory import MemoryProbe

__all__ = ["BatchOptions", "ENFORCE_MODES", "DEFAULT_MEMORY_PER_TASK", "check_fractions"]

#: The estimate for a task that gives none (``--memory-per-task``).
DEFAULT_MEMORY_PER_TASK = 1 * _limits.GiB


def check_fractions(stop_at: float, kill_at: float) -> None:
    """The one rule for the memory thresholds: each in (0, 1], ``kill_at`` not below ``stop_at``."""
    for name, value in (("stop_at", stop_at), ("kill_at", kill_at)):
        if not 0 < value <= 1:  # NaN fails this too
            raise UsageError(f"{name} must be a fraction in (0, 1], not {value}")
    if kill_at < stop_at:
        raise UsageError(f"kill_at ({kill_at}) must not be below stop_at ({stop_at})")

#: ``auto``: a cgroup for every task, with or without a memory limit, where
#: one can be made (exact peaks, the kernel's memory cap, every process the
#: task starts ended with it), RSS sampling for a limit where none can;
#: ``cgroup``: the same (the name of when only ``auto`` tasks with a limit
#: got one); ``watchdog``: never a cgroup, limits by RSS sampling.
ENFORCE_MODES = ("auto", "cgroup", "watchdog")


@dataclass(frozen=True, kw_only=True)
class BatchOptions(ChildOptions):
    """How a batch runs: concurrency, memory, retries, halt, job log, transcripts; and each task's child.

    Every field has a default; :meth:`replace` (or the keyword arguments of
    :func:`~spoolparse.run_many`) changes some. A bad value is a
    :class:`~spoolparse.UsageError` when the options are made, so a batch
    never starts with one. See :func:`~spoolparse.run_many` for what each means.
    The fields of :class:`~spoolparse.ChildOptions` (``provider``,
    ``max_line``, ``max_retained``, ``timeout``, ``grace``, ``spool_dir``...)
    are each task's (:attr:`child`); a :class:`~spoolparse.Task` overrides them
    (:meth:`~spoolparse.Task.child_options`). ``containment`` is not: a batch
    contains its tasks as ``enforce`` says.
    """

    #: Most tasks at once; ``None``: from memory (floor((total − reserve) / memory_per_task), CPU-capped).
    max_concurrent: int | None = None
    #: Memory reserved for a task that names none (bytes). ``None``: what ``spoolparse calibrate`` recorded
    #: for the task's program, else :data:`DEFAULT_MEMORY_PER_TASK` (1 GiB).
    memory_per_task: int | None = None
    #: Cap on each task's process tree (bytes): a cgroup where one can be made, else an RSS watchdog.
    memory_limit: int | None = None
    #: Memory kept for everything else when choosing ``max_concurrent`` (``None``: max(2 GiB, 10 %)).
    reserve: int | None = None
    #: Start nothing while used memory is above this share of the total.
    stop_at: float = _limits.STOP_AT
    #: Above this share, kill the youngest task and requeue it.
    kill_at: float = _limits.KILL_AT
    #: Starts again after a host memory-pressure kill.
    requeues: int = _limits.REQUEUES
    #: Runs again of a task whose verdict is retryable (``RETRY_VERDICTS``).
    retries: int = 0
    #: Seconds before a requeue or retry, doubling each time.
    retry_backoff: float = _limits.RETRY_BACKOFF
    #: Outcomes in input order.
    ordered: bool = False
    #: With ``ordered``: most tasks started ahead of the oldest unfinished one (``None``: twice max_concurrent).
    window: int | None = None
    #: When to stop starting tasks (``"soon"``, ``"now,fail=3"``, ``"soon,fail=10%"``, ...); parsed to a Halt.
    halt: Halt | str | None = None
    #: Job log path: one NDJSON line per attempt.
    joblog: str | os.PathLike[str] | None = None
    #: ``True``: skip tasks with a final outcome in the job log; ``"failed"``: skip only the ok ones.
    resume: Resume = False
    #: How tasks are contained and ``memory_limit`` enforced: one of :data:`ENFORCE_MODES`.
    enforce: str = "auto"
    #: Processes one task's cgroup may hold (``None``: no bound).
    pids_max: int | None = _limits.PIDS_MAX
    #: Replaces the host's memory readings (tests, or a custom budget).
    memory_probe: MemoryProbe | None = None
    #: Seconds between memory samples, spool pumps and watchdog checks.
    sample_interval: float = _limits.SAMPLE_INTERVAL
    #: Seconds between memory readings of a task with no memory limit of its own (its peak and admission;
    #: every ``sample_interval`` near ``stop_at``). Shorter: the peaks of short tasks are seen, at the cost of
    #: reading ``/proc`` more often.
    memory_sample_interval: float = _limits.MEMORY_SAMPLE_INTERVAL
    #: Folder for kept transcripts (``DIR/<id>/stdout``, ``stderr``).
    results: str | os.PathLike[str] | None = None
    #: ``"failed"``: keep the transcripts of tasks not ok; ``"all"``: of every task.
    keep_transcript: KeepTranscript = "failed"

    def __post_init__(self) -> None:
        super().__post_init__()  # each task's child options: their own checks
        object.__setattr__(self, "halt", parse_halt(self.halt))
        if self.enforce not in ENFORCE_MODES:
            raise UsageError(f"enforce must be one of {', '.join(ENFORCE_MODES)}, not {self.enforce!r}")
        if self.keep_transcript not in KEEP_MODES:
            raise UsageError(
                f"keep_transcript must be one of {', '.join(KEEP_MODES)}, not {self.keep_transcript!r}"
            )
        for name in ("requeues", "retries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"{name} must be a whole number, not negative, not {value!r}")
        if self.reserve is not None and self.reserve < 0:  # less than nothing kept free: more admitted than there is
            raise UsageError(f"reserve must not be negative, not {self.reserve}")
        for name in ("memory_per_task", "memory_limit", "pids_max"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"{name} must be positive, not {value}")
        for name in ("max_concurrent", "window"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"{name} must be at least 1, not {value}")
        check_fractions(self.stop_at, self.kill_at)
        for name in ("retry_backoff", "sample_interval", "memory_sample_interval"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0 or (value == 0 and name != "retry_backoff"):
                raise UsageError(f"{name} must be a finite number of seconds above 0, not {value}")
        if self.resume and self.joblog is None:
            raise UsageError("resume needs a joblog to read")
        if self.resume not in (True, False, "failed"):
            raise UsageError(f"resume must be True, False or 'failed', not {self.resume!r}")

    @functools.cached_property
    def child(self) -> ChildOptions:
        """Each task's child options unless its task says otherwise: this batch's fields of
        :class:`~spoolparse.ChildOptions`."""
        return ChildOptions(**{name: getattr(self, name) for name in _CHILD_NAMES})

    @property
    def default_estimate(self) -> int:
        """The estimate of a task that names none and whose program has no recorded calibration."""
        return self.memory_per_task if self.memory_per_task is not None else DEFAULT_MEMORY_PER_TASK

    @property
    def halt_condition(self) -> Halt | None:
        """:attr:`halt`, parsed (it always is once the options are made)."""
        return parse_halt(self.halt)


_CHILD_NAMES = tuple(f.name for f in dataclasses.fields(ChildOptions))
