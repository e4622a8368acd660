"""What ``spoolparse calibrate`` recorded: a per-task memory estimate for each program it measured.

``calibrate`` writes its recommendation here (one JSON object, program name →
``memory_per_task`` and how it was measured); a batch given no
``memory_per_task`` reserves that much for a task whose program was
calibrated (:meth:`spoolparse.runner.Batch.estimate_for`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["calibrations_path", "record", "recorded", "program_of"]


def calibrations_path() -> str:
    """Where ``calibrate`` records its recommendations: ``$SPOOLPARSE_CALIBRATIONS``, else
    ``$XDG_CACHE_HOME/spoolparse/calibrations.json`` (``~/.cache/...``)."""
    explicit = os.environ.get("SPOOLPARSE_CALIBRATIONS")
    if explicit:
        return explicit
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "spoolparse", "calibrations.json")


def program_of(argv: Sequence[str]) -> str:
    """What a recommendation is recorded under: the program's name (``codex`` for ``/usr/bin/codex exec``)."""
    return os.path.basename(argv[0]) if argv else ""


def recorded(path: str | None = None) -> dict[str, int]:
    """The recorded ``memory_per_task`` of each calibrated program (empty when there is no record)."""
    try:
        with open(path or calibrations_path(), "rb") as f:
            data = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, int] = {}
    for program, entry in data.items():
        value = entry.get("memory_per_task") if isinstance(entry, dict) else None
        if isinstance(program, str) and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[program] = value
    return out


def record(report: dict[str, Any], path: str | None = None) -> str | None:
    """Record a report's ``memory_per_task`` under its program (replacing an older one); the file's path, or
    ``None`` when there is nothing to record. The file is replaced whole (a reader never sees half of it)."""
    if not report.get("memory_per_task") or report.get("failures"):
        return None
    path = path or calibrations_path()
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(1 << 20))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[program_of(report["command"])] = {
        "memory_per_task": report["memory_per_task"],
        "per_task_peak": report["per_task_peak"],
        "peak_source": report["peak_source"],
        "command": report["command"],
        "recorded": round(time.time()),
    }
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".calibrations-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
