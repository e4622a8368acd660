"""Measuring one command's memory at rising concurrency, to choose ``-j`` and ``--memory-per-task``.

Each level runs ``concurrency`` copies of the command at once, each in its own
cgroup where one can be made (exact peak) or else under RSS sampling. Before
a level starts, its worst case (the largest peak seen so far, times the new
concurrency, on top of what is used now) must fit under ``stop_at``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import IO, Any

from .. import _limits
from .admission import auto_concurrency, cpu_cap, default_reserve
from .memory import HostMemory, MemoryProbe
from .scheduler import Batch

__all__ = ["calibrate", "HEADROOM"]

#: The recommended estimate is the measured peak times this, rounded up to a MiB.
HEADROOM = 1.25


def calibrate(
    argv: Sequence[str],
    *,
    max_concurrency: int = 8,
    timeout: float | None = None,
    stop_at: float = _limits.STOP_AT,
    memory_probe: MemoryProbe | None = None,
    log: IO[str] | None = None,
) -> dict[str, Any]:
    """Run ``argv`` at concurrency 1, 2, 4, … up to ``max_concurrency``; return the measurements.

    The result has ``levels`` (per level: wall time, tasks/s, largest peak,
    verdicts), ``per_task_peak`` (bytes, the largest seen), and the
    recommendation: ``memory_per_task`` (peak × :data:`HEADROOM`), ``jobs``
    (floor((total − reserve) / memory_per_task), capped by CPUs) and both as
    ``batch_args`` for ``spoolparse batch``.

    .. seealso:: :func:`spoolparse.run_many`
    """
    probe = memory_probe if memory_probe is not None else HostMemory()
    total = probe.total()
    levels: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    worst = 0
    sources: set[str] = set()
    stopped = f"reached --max-concurrency {max_concurrency}"
    c = 1
    while c <= max_concurrency:
        used = probe.used()
        if worst and used + worst * c > stop_at * total:
            stopped = f"concurrency {c} could pass stop_at ({used + worst * c} of {total} bytes)"
            break
        t0 = time.monotonic()
        peaks: list[int] = []
        verdicts: dict[str, int] = {}
        walls: list[float] = []
        # admission off (memory_per_task 1 byte, kill_at 100 %): calibrate guards memory itself
        for out in Batch(
            [list(argv)] * c, max_concurrent=c, memory_per_task=1, stop_at=1.0, kill_at=1.0, retries=0,
            timeout=timeout, grace=2.0, enforce="cgroup", memory_probe=probe, sample_interval=0.02,
            memory_sample_interval=0.02,  # a measurement: a short task's peak is seen where no cgroup counts it
        ):
            verdicts[out.verdict] = verdicts.get(out.verdict, 0) + 1
            walls.append(out.wall_s)
            if out.peak_memory is not None:
                peaks.append(out.peak_memory)
                sources.add(out.peak_source or "")
            if not out.ok:
                failures.append({"concurrency": c, "verdict": out.verdict, "error": out.error})
        wall = time.monotonic() - t0
        peak = max(peaks, default=0)
        worst = max(worst, peak)
        levels.append({
            "concurrency": c,
            "wall_s": round(wall, 3),
            "task_wall_s_max": round(max(walls, default=0.0), 3),
            "tasks_per_s": round(c / wall, 3) if wall > 0 else None,
            "peak_memory_max": peak or None,
            "verdicts": verdicts,
        })
        if log is not None:
            log.write(f"spoolparse: calibrate: concurrency {c}: {wall:.2f}s, peak {peak / _limits.MiB:.1f} MiB\n")
            log.flush()
        if failures:
            stopped = f"a run failed at concurrency {c}"
            break
        c *= 2
    per_task = worst or None
    memory_per_task = (
        math.ceil(per_task * HEADROOM / _limits.MiB) * _limits.MiB if per_task is not None else None
    )
    reserve = default_reserve(total)
    jobs = auto_concurrency(total, memory_per_task, reserve=reserve) if memory_per_task else None
    return {
        "command": list(argv),
        "levels": levels,
        "stopped": stopped,
        "failures": failures,
        "per_task_peak": per_task,
        "peak_source": "cgroup" if sources == {"cgroup"} else ("sampled" if sources else None),
        "total_memory": total,
        "reserve": reserve,
        "cpu_cap": cpu_cap(),
        "memory_per_task": memory_per_task,
        "jobs": jobs,
        "batch_args": f"-j {jobs} --memory-per-task {memory_per_task // _limits.MiB}M" if memory_per_task else None,
    }
