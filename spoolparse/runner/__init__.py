"""Many agent processes on one host: bounded concurrency, memory admission, per-child caps, timeouts, job log.

.. seealso:: :func:`run_many`, :func:`arun_many`, the docs' "Running many agents" guide
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time each name loads on first use: importing the package (a task's types, say)
    # must not pay for the scheduler (and asyncio)
    from .admission import DEFAULT_MEMORY_PER_TASK, Admission, auto_concurrency, default_reserve
    from .backend import arun_many, run_many
    from .intake import InvalidTask
    from .memory import HostMemory, MemoryProbe
    from .options import BatchOptions
    from .scheduler import Batch
    from .tasks import VERDICTS, Outcome, Task

_LAZY = {
    "DEFAULT_MEMORY_PER_TASK": ".admission", "Admission": ".admission", "auto_concurrency": ".admission",
    "default_reserve": ".admission", "HostMemory": ".memory", "MemoryProbe": ".memory", "BatchOptions": ".options",
    "Batch": ".scheduler", "InvalidTask": ".intake", "arun_many": ".backend", "run_many": ".backend",
    "VERDICTS": ".tasks", "Outcome": ".tasks", "Task": ".tasks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "run_many",
    "arun_many",
    "Batch",
    "BatchOptions",
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
