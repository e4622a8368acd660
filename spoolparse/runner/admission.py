"""The memory readings admission works from, and how many children may run at once.

:class:`Admission` reads the host's (or the enclosing cgroup's) memory
through a :class:`~.memory.MemoryProbe`, no more often than it must; the
rules it answers with (a child starts only while its estimate fits under
``stop_at`` beside what running children reserved and do not use yet; one
is killed at ``kill_at``) are the batch policy's, :mod:`.policy`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .. import _limits
from ..errors import UsageError
from .memory import MemoryProbe
from .options import DEFAULT_MEMORY_PER_TASK, check_fractions
from .policy import admits, at_or_above

__all__ = [
    "Admission", "Sizing", "size", "auto_concurrency", "default_reserve", "cpu_cap", "check_fractions",
    "DEFAULT_MEMORY_PER_TASK",
]

def default_reserve(total: int) -> int:
    """Memory left to everything else: max(2 GiB, 10 % of the total), never more than half of it."""
    return min(total // 2, max(2 * _limits.GiB, total // 10))


def cpu_cap() -> int:
    """Agent CLIs mostly wait on the network: four per CPU, at least four."""
    return max(4, 4 * (os.cpu_count() or 1))


def auto_concurrency(total: int, per_task: int, *, reserve: int | None = None, cap: int | None = None) -> int:
    """floor((total − reserve) / per_task), at least 1, at most ``cap`` (default :func:`cpu_cap`)."""
    if per_task <= 0:
        raise UsageError(f"memory per task must be positive, not {per_task}")
    reserve = default_reserve(total) if reserve is None else reserve
    n = max(1, (total - reserve) // per_task)
    return int(min(n, cpu_cap() if cap is None else cap))


@dataclass(frozen=True)
class Sizing:
    """How many tasks a batch runs at once, and the memory figures that chose it."""

    max_concurrent: int
    #: What bounds ``max_concurrent``, for the progress line: ``-j``, the memory, or the CPUs.
    bound: str
    #: Memory kept for everything else (bytes).
    reserve: int
    #: The estimate of a task that names none and whose command has no recorded calibration (bytes).
    memory_per_task: int
    #: Recorded ``calibrate`` estimates by command identity (used when ``memory_per_task`` is not given).
    calibrated: Mapping[str, int] = field(default_factory=dict)


def size(
    total: int, *, max_concurrent: int | None, reserve: int | None, memory_per_task: int,
    calibrated: Mapping[str, int],
) -> Sizing:
    """A batch's concurrency: ``max_concurrent`` when given (``-j``), else from memory (what the smallest
    estimate lets fit beside the reserve), at most :func:`cpu_cap`."""
    kept = default_reserve(total) if reserve is None else reserve
    if max_concurrent is not None:
        return Sizing(max_concurrent, "-j", kept, memory_per_task, calibrated)
    per_task = min([memory_per_task, *calibrated.values()])
    by_memory = max(1, (total - kept) // per_task)
    n = auto_concurrency(total, per_task, reserve=kept)
    bound = (f"memory: ({_gib(total)} - {_gib(kept)} reserve) / {_gib(per_task)} per task" if n == by_memory
             else f"CPUs: {n} ({cpu_cap() // 4 or 1} x 4)")
    return Sizing(n, bound, kept, memory_per_task, calibrated)


def _gib(n: int) -> str:
    return f"{n / _limits.GiB:.1f} GiB"


class Admission:
    """The memory rules, over a :class:`MemoryProbe` (a real one, or a fake in tests).

    .. seealso:: :func:`spoolparse.run_many`
    """

    def __init__(
        self,
        probe: MemoryProbe,
        *,
        stop_at: float = _limits.STOP_AT,
        kill_at: float = _limits.KILL_AT,
        max_age: float = 0.0,
    ) -> None:
        check_fractions(stop_at, kill_at)
        self.probe = probe
        self.stop_at = stop_at
        self.kill_at = kill_at
        self.max_age = max_age
        self.last_used = 0
        self.last_total = 0
        self._taken = -1.0

    def sample(self, *, fresh: bool = False) -> tuple[int, int]:
        """(used, total), read again when older than ``max_age`` seconds (or ``fresh``).

        A reading a few ms old is safe for admission: a child started since
        counts with its whole estimate as reserved until it is sampled.
        """
        now = time.monotonic()
        if fresh or now - self._taken > self.max_age:
            self.last_used, self.last_total = self.probe.used(), self.probe.total()
            self._taken = now
        return self.last_used, self.last_total

    def may_start(self, estimate: int, untouched: Iterable[int], *, running: int) -> bool:
        """Whether a child with this ``estimate`` may start now.

        ``untouched`` is, per running child, its estimate minus what it uses
        now (negative values count as 0). With nothing running a child starts
        whenever used memory is below ``stop_at``, so an estimate larger than
        the budget cannot stall the batch.
        """
        used, total = self.sample()
        reserved = sum(max(0, u) for u in untouched)
        return admits(estimate, reserved=reserved, running=running, used=used, total=total, stop_at=self.stop_at)

    def near_limits(self, margin: float = 0.1) -> bool:
        """Whether the last reading is within ``margin`` (a share of the total) of ``stop_at``."""
        return self.last_total > 0 and self.last_used >= (self.stop_at - margin) * self.last_total

    def must_kill(self) -> bool:
        """Whether used memory is at or above ``kill_at``."""
        used, total = self.sample(fresh=True)
        return at_or_above(used, total, self.kill_at)
