"""A batch's task file: its lines read within bounds, each a :class:`~.tasks.Task` or the reason it is not one.

One line, one task: a JSON object (``{"id", "cmd", ...}``, the keys of
:data:`~.tasks.TASK_KEYS`) or a bare argv list. A line that is not a task
becomes an :class:`~.intake.InvalidTask` naming its line number and why, so it
gets a ``spawn_error`` outcome of its own in a batch, and a line of
``batch --check``'s report. Blank lines are no task and no error: they are
counted apart (:attr:`TaskLines.blank`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from typing import IO, Any

from .. import _limits
from .._cli_common import parse_duration, parse_size
from .._decode.jsonout import loads
from ..errors import Error, UsageError
from .intake import InvalidTask
from .tasks import SIZE_KEYS, Task, id_text

__all__ = ["TaskLines", "bounded_lines", "read_line"]


def bounded_lines(stream: IO[bytes], limit: int) -> Iterator[bytes | int]:
    """The stream's lines, each at most ``limit`` bytes; a longer one is drained and given as its length.

    Memory stays within ``limit`` whatever the input (``/dev/zero`` included: it is one endless line).
    """
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        size = len(line)
        while not line.endswith(b"\n"):
            line = stream.readline(limit)
            if not line:
                break
            size += len(line)
        yield size


def read_line(line: bytes) -> Any:
    """One task line's JSON value; a :class:`ValueError` when it is not JSON.

    A lone surrogate escape (``"\\udcff"``), which is how Python's ``json.dumps`` writes a file name's
    undecodable bytes, is read as Python reads it (:func:`~spoolparse._decode.jsonout.loads`): its command
    reaches the child byte for byte. A number as the ``id`` is its text in the line (``1e2``, ``-0``): read
    as a number and written again, it would be another's id (``100.0``, ``0``).
    """
    obj = loads(line)
    if isinstance(obj, dict) and type(obj.get("id")) in (int, float):
        with contextlib.suppress(ValueError, RecursionError):  # (read once already: only a deep line can fail)
            obj["id"] = json.loads(line.decode("utf-8"), parse_int=str, parse_float=str)["id"]
    return obj


def _size_field(obj: dict[str, Any], key: str) -> None:
    v = obj.get(key)
    if isinstance(v, str):
        try:
            obj[key] = parse_size(v)
        except argparse.ArgumentTypeError as e:
            raise UsageError(str(e)) from None


def _duration_field(obj: dict[str, Any], key: str) -> None:
    v = obj.get(key)
    if isinstance(v, str):  # "10m", "1.5s": the units the options take
        try:
            obj[key] = parse_duration(v)
        except argparse.ArgumentTypeError as e:
            raise UsageError(f"{key}: {e}") from None


class TaskLines:
    """The tasks of NDJSON lines (an :class:`~.intake.InvalidTask` for each bad one, its id the line number
    unless the line names one); iterate it once. ``lines`` counts the lines read, ``blank`` the blank ones
    among them (no task, no error). Memory: one line, at most ``max_line`` bytes.
    """

    def __init__(self, stream: IO[bytes], max_line: int = _limits.MAX_TASK_LINE) -> None:
        self.stream = stream
        self.max_line = max_line
        self.lines = 0
        self.blank = 0

    def __iter__(self) -> Iterator[Task | InvalidTask]:
        max_line = self.max_line
        for lineno, line in enumerate(bounded_lines(self.stream, max_line), 1):
            self.lines = lineno
            default_id = str(lineno)
            if isinstance(line, int):
                yield InvalidTask(default_id, f"line {lineno}: {line} bytes, longer than --max-task-line "
                                  f"({max_line})", line=lineno)
                continue
            if lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]  # a byte order mark (editors and PowerShell on Windows write one): no part of the task
            if not line.strip():
                self.blank += 1
                continue
            try:
                obj = read_line(line)
            except ValueError as e:
                yield InvalidTask(default_id, f"line {lineno}: not JSON ({e})", line=lineno)
                continue
            try:
                if isinstance(obj, dict):
                    for key in SIZE_KEYS:
                        _size_field(obj, key)
                    _duration_field(obj, "timeout")
                    _duration_field(obj, "soft_timeout")
                yield Task.from_json(obj, default_id=default_id)
            except Error as e:
                tid = obj.get("id") if isinstance(obj, dict) else None
                yield InvalidTask(default_id if tid is None else id_text(tid), f"line {lineno}: {e}", line=lineno)
