"""Many agent processes on one host: bounded concurrency, memory admission, per-child caps, timeouts, job log.

.. seealso:: :func:`run_many`, :func:`arun_many`, the README's "Running many agents" section
"""

from __future__ import annotations

from .admission import DEFAULT_MEMORY_PER_TASK, Admission, auto_concurrency, default_reserve
from .memory import HostMemory, MemoryProbe
from .scheduler import Batch, InvalidTask, arun_many, run_many
from .tasks import VERDICTS, Outcome, Task

__all__ = [
    "run_many",
    "arun_many",
    "Batch",
    "Task",
    "Outcome",
    "InvalidTask",
    "VERDICTS",
    "MemoryProbe",
    "HostMemory",
    "Admission",
    "auto_concurrency",
    "default_reserve",
    "DEFAULT_MEMORY_PER_TASK",
]
