"""The job log: one NDJSON line per attempt, and what ``--resume`` reads back.

A line is written and flushed when its attempt ends; a task's *final* line
can be held back until its outcome has been handed to the reader (written to
stdout by ``spoolparse batch``): a log that says a task is done then always
means its outcome reached the reader, so ``--resume`` after a crash (``kill
-9``, the OOM killer) runs again what was not printed, and skips only what
was. A line names the task, the attempt, the verdict and whether it was
final; it holds neither environment values nor input contents (the command
line is kept: it is how operators find a task again).

A crash in the middle of a long line's write (a prompt of megabytes in the
command line) leaves the log ending mid-line. A log opened to append to is
therefore ended first when its last line has no newline, so the next line
stands on its own; the readers count such a fragment (or any line that is not
a JSON object) as torn, say so once, and ignore it: its task runs again unless
another line says it is done.

The log is opened by :func:`~spoolparse._dirfd.open_named`: a symbolic link on
the way is followed only when it is ours or root's.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Iterator
from typing import IO, Any, Literal, TypeAlias, cast

from .._decode.jsonout import dumps, loads
from .._dirfd import open_named
from .._signals import WholeWrites
from ..types import JobLogRecord, Verdict
from .ids import SeenIds
from .tasks import Outcome

#: ``True``: skip every task with a final outcome in the log (GNU parallel's ``--resume``);
#: ``"failed"``: skip only those whose final outcome was ``ok``, run the others again (``--resume-failed``).
Resume: TypeAlias = bool | Literal["failed"]

__all__ = ["JobLog", "Resume", "DoneIds", "attempts", "done_ids", "finished_ok"]

log = logging.getLogger("spoolparse.runner")


class JobLog:
    """Appends attempt records to ``path`` (created if missing).

    .. seealso:: :func:`finished_ok`
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        fd = open_named(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, what="job log")
        try:
            _end_torn_line(fd)
        except BaseException:
            os.close(fd)
            raise
        self._f: IO[bytes] | None = os.fdopen(fd, "ab")  # closed by close()
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
            WholeWrites(self._f).write(data)  # whole, whatever signal comes
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None


def _end_torn_line(fd: int) -> None:
    """End the log's last line when it has no newline (a crash cut it short), before anything is appended: the
    next line is then a line of its own, not the end of the fragment. A log whose end cannot be read (a file we
    may only write) gets the newline all the same: an empty line is nothing to a reader."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return
    try:
        tail = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)  # the same file, opened to read
    except OSError:
        last = b""
    else:
        try:
            last = os.pread(tail, 1, st.st_size - 1)
        finally:
            os.close(tail)
    if last != b"\n":
        os.write(fd, b"\n")


def finished_ok(path: str | os.PathLike[str]) -> set[str]:
    """Ids whose last *final* record in the log is ``ok`` (a missing log gives none)."""
    return done_ids(path, "failed")


def attempts(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every record of the job log at ``path``, in order; none for a missing log. The one reader of a job log
    (``--resume``, the Ray driver, ``report --joblog``): opened as :func:`~spoolparse._dirfd.open_named` opens
    it (a link on the way followed only when it is ours or root's), each line read back exactly
    (:func:`~spoolparse._decode.jsonout.loads`: an id with a lone surrogate too). A line that is not a JSON
    object (one cut short by a crash, ended by the next run's :class:`JobLog`) is torn: ignored, and said once
    (a warning naming the first and how many) when the whole log was read."""
    try:
        f = open(open_named(os.fspath(path), os.O_RDONLY, what="job log"), "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    torn, first = 0, 0
    with f:
        for number, line in enumerate(f, 1):
            if line.isspace():
                continue  # the newline that ended a torn line is one of these (no copy of a long line made)
            try:
                rec = loads(line)
            except ValueError:
                rec = None
            if not isinstance(rec, dict):
                torn += 1
                first = first or number
                continue
            yield rec
    if torn == 1:
        log.warning("job log %r: line %d is cut short or not JSON, ignored (its task runs again unless another "
                    "line says it is done)", os.fspath(path), first)
    elif torn:
        log.warning("job log %r: %d lines are cut short or not JSON (the first: line %d), ignored (their tasks run "
                    "again unless other lines say they are done)", os.fspath(path), torn, first)


def _final_verdicts(path: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """(id, verdict) of each final record of the log, in order (see :func:`attempts`)."""
    for rec in attempts(path):
        if rec.get("final") and isinstance(rec.get("id"), str):
            yield rec["id"], str(rec.get("verdict"))


def _skipped(verdict: str, resume: Resume) -> bool:
    """Whether a task whose last final verdict is ``verdict`` is skipped on ``resume`` (a ``cancelled`` one
    never is: the batch was interrupted)."""
    return verdict == "ok" or (resume != "failed" and verdict != "cancelled")


def done_ids(path: str | os.PathLike[str], resume: Resume) -> set[str]:
    """The ids a resumed batch skips: see :data:`Resume`. A missing log gives none.

    A ``cancelled`` outcome (the batch was interrupted) is never final for a
    resume: that task runs again either way. A torn line, such as one cut short
    by a crash, is ignored with a warning. Memory is O(distinct ids in the log): :class:`DoneIds` is the same
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
