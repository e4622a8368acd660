"""The job log: one NDJSON line per attempt, and what ``--resume`` reads back.

A line is written and flushed when its attempt ends; a task's *final* line
can be held back until its outcome has been handed to the reader (written to
stdout by ``spoolparse batch``): a log that says a task is done then always
means its outcome reached the reader, so ``--resume`` after a crash (``kill
-9``, the OOM killer) runs again what was not printed, and skips only what
was. A line names the task, the attempt, the verdict and whether it was
final; it holds neither environment values nor input contents (the command
line is kept: it is how operators find a task again).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import IO, Literal, TypeAlias, cast

import orjson

from .._decode.jsonout import dumps
from ..types import JobLogRecord, Verdict
from .ids import SeenIds
from .tasks import Outcome

#: ``True``: skip every task with a final outcome in the log (GNU parallel's ``--resume``);
#: ``"failed"``: skip only those whose final outcome was ``ok``, run the others again (``--resume-failed``).
Resume: TypeAlias = bool | Literal["failed"]

__all__ = ["JobLog", "Resume", "DoneIds", "done_ids", "finished_ok"]


class JobLog:
    """Appends attempt records to ``path`` (created if missing).

    .. seealso:: :func:`finished_ok`
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._f: IO[bytes] | None = open(self.path, "ab")  # noqa: SIM115 - closed by close()
        # final lines held until their outcomes are handed out: at most the outcomes not yet handed out
        self._held: dict[str, list[bytes]] = {}
        # the batch's loop writes attempts, its reader marks outcomes handed out: two threads
        self._lock = threading.Lock()

    def write(
        self, outcome: Outcome, *, argv: list[str] | None, final: bool, started: float, hold: bool = False
    ) -> None:
        """Append the attempt's line; with ``hold``, keep it until :meth:`emitted` is called for the outcome."""
        if self._f is None:
            return
        # typed: the keys are those of JobLogRecord, checked by mypy
        rec: JobLogRecord = {
            "id": outcome.id,
            "attempt": outcome.attempts,
            "final": final,
            "verdict": cast(Verdict, outcome.verdict),
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
        line = dumps(rec) + b"\n"
        with self._lock:
            if hold:
                self._held.setdefault(outcome.id, []).append(line)
                return
            self._append(line)

    def emitted(self, outcome: Outcome) -> None:
        """The outcome reached its reader: its held final line goes into the log now."""
        with self._lock:
            lines = self._held.get(outcome.id)
            if lines:
                data = lines.pop(0)
                if not lines:
                    del self._held[outcome.id]
                self._append(data)

    def _append(self, data: bytes) -> None:
        if self._f is not None:
            self._f.write(data)
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None


def finished_ok(path: str | os.PathLike[str]) -> set[str]:
    """Ids whose last *final* record in the log is ``ok`` (a missing log gives none)."""
    return done_ids(path, "failed")


def _final_verdicts(path: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """(id, verdict) of each final record of the log, in order; none for a missing log. Lines that do not
    parse, such as one cut short by a crash, are skipped."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    with f:
        for line in f:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and rec.get("final") and isinstance(rec.get("id"), str):
                yield rec["id"], str(rec.get("verdict"))


def _skipped(verdict: str, resume: Resume) -> bool:
    """Whether a task whose last final verdict is ``verdict`` is skipped on ``resume`` (a ``cancelled`` one
    never is: the batch was interrupted)."""
    return verdict == "ok" or (resume != "failed" and verdict != "cancelled")


def done_ids(path: str | os.PathLike[str], resume: Resume) -> set[str]:
    """The ids a resumed batch skips: see :data:`Resume`. A missing log gives none.

    A ``cancelled`` outcome (the batch was interrupted) is never final for a
    resume: that task runs again either way. Lines that do not parse, such as
    one cut short by a crash, are skipped. Memory is O(distinct ids in the log): :class:`DoneIds` is the same
    in bounded memory.
    """
    if not resume:
        return set()
    last = dict(_final_verdicts(path))
    return {k for k, v in last.items() if _skipped(v, resume)}


class DoneIds:
    """:func:`done_ids` in memory that does not grow with the log (a :class:`~.ids.SeenIds` holds each id
    and whether its last final verdict skips it); ``tid in done`` asks. Close it to free its spill file."""

    def __init__(self, path: str | os.PathLike[str], resume: Resume, spill_dir: str | None = None) -> None:
        self._ids = SeenIds(spill_dir)
        if resume:
            for tid, verdict in _final_verdicts(path):
                self._ids.put(tid, _SKIP if _skipped(verdict, resume) else _RUN)

    def __contains__(self, tid: object) -> bool:
        return isinstance(tid, str) and self._ids.get(tid) == _SKIP

    def close(self) -> None:
        self._ids.close()


_RUN, _SKIP = 1, 2  # a DoneIds value: the task runs again, or is skipped
