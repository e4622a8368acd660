"""The job log: one NDJSON line per attempt, and what ``--resume`` reads back.

A line is written and flushed when its attempt ends. It names the task, the
attempt, the verdict and whether it was final; it holds neither environment
values nor input contents (the command line is kept: it is how operators
find a task again).
"""

from __future__ import annotations

import os
import time
from typing import IO, Any

import orjson

from .._json import dumps
from .tasks import Outcome

__all__ = ["JobLog", "finished_ok"]


class JobLog:
    """Appends attempt records to ``path`` (created if missing).

    .. seealso:: :func:`finished_ok`
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._f: IO[bytes] | None = open(self.path, "ab")  # noqa: SIM115 - closed by close()

    def write(self, outcome: Outcome, *, argv: list[str] | None, final: bool, started: float) -> None:
        if self._f is None:
            return
        rec: dict[str, Any] = {
            "id": outcome.id,
            "attempt": outcome.attempts,
            "final": final,
            "verdict": outcome.verdict,
            "start": round(started, 3),
            "end": round(time.time(), 3),
            "wall_s": round(outcome.wall_s, 3),
            "cpu_s": round(outcome.cpu_s, 3),
            "peak_memory": outcome.peak_memory,
            "returncode": outcome.returncode,
            "signal": outcome.signal,
            "enforcement": outcome.enforcement,
            "error": outcome.error,
            "cmd": argv,
        }
        self._f.write(dumps(rec) + b"\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def finished_ok(path: str | os.PathLike[str]) -> set[str]:
    """Ids whose last *final* record in the log is ``ok`` (a missing log gives none).

    Lines that do not parse, such as one cut short by a crash, are skipped.
    Memory is O(distinct ids in the log).
    """
    last: dict[str, bool] = {}
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return set()
    with f:
        for line in f:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and rec.get("final") and isinstance(rec.get("id"), str):
                last[rec["id"]] = rec.get("verdict") == "ok"
    return {k for k, ok in last.items() if ok}
