"""NDJSON records (outcomes, job-log lines) read one at a time, with memory bounded whatever a line's size.

A line of up to :data:`MAX_LINE` bytes is decoded whole. A longer one (an
outcome whose summary carries an answer of many MiB) is read in pieces and
only its ends are kept: its first :data:`HEAD` bytes give the fields that come
before the long value (an outcome's ``id``, ``verdict``, ``wall_s``, ``error``,
and its summary's ``provider``), its last :data:`TAIL` bytes those after it
(the summary's ``usage``, ``model``, cost …), found at the first of the
summary's later keys — a ``,"usage":`` that no JSON string can hold unescaped.
"""

from __future__ import annotations

import decimal
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from .._decode import ijson_lazy as _ijson
from .._decode.jsonout import loads
from ..types import SUMMARY_FIELDS

__all__ = ["Line", "records", "MAX_LINE", "HEAD", "TAIL"]

#: Longest line decoded whole.
MAX_LINE = 1 << 20
#: Bytes kept of a longer line's beginning and end.
HEAD = 64 << 10
TAIL = 1 << 20
_PIECE = 1 << 16

#: Summary keys after its (possibly long) text, in order: where a long line's tail is read from.
_LATER = [f',"{k}":'.encode() for k in SUMMARY_FIELDS[SUMMARY_FIELDS.index("text") + 1:]]


@dataclass(slots=True)
class Line:
    """One input line: its record (``None`` when it is none), and whether it was read from its ends only."""

    record: dict[str, Any] | None
    long: bool = False


def records(stream: IO[bytes]) -> Iterator[Line]:
    """Every non-blank line of ``stream`` as a :class:`Line`."""
    first = True
    while True:
        line = stream.readline(MAX_LINE + 1)
        if not line:
            return
        if first and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        first = False
        if len(line) <= MAX_LINE or line.endswith(b"\n"):
            if line.strip():
                yield Line(_decode(line))
            continue
        head = line[:HEAD]
        tail: deque[bytes] = deque()
        kept = 0
        piece = line
        while True:
            tail.append(piece)
            kept += len(piece)
            while kept - len(tail[0]) >= TAIL:
                kept -= len(tail.popleft())
            if piece.endswith(b"\n"):
                break
            piece = stream.readline(_PIECE)
            if not piece:
                break
        end = b"".join(tail)[-TAIL:]
        yield Line(_from_ends(head, end), long=True)


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        obj = loads(line)  # as written: an id or a command with a lone surrogate (a file name's byte) too
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, decimal.Decimal) else value


def _from_ends(head: bytes, tail: bytes) -> dict[str, Any] | None:
    """What a long line's ends tell: the scalars of its head, and its summary's fields from the tail on."""
    out: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    events = _ijson.module().parse(head)
    try:
        for prefix, event, value in events:
            if event in ("string", "number", "boolean", "null"):
                if "." not in prefix and prefix:
                    out[prefix] = _plain(value)
                elif prefix.startswith("summary.") and prefix.count(".") == 1:
                    summary[prefix[8:]] = _plain(value)
    except Exception:  # the head ends inside the long value: what came before it is all it has
        pass
    if not out:
        return None
    found = [i for i in (tail.find(k) for k in _LATER) if i >= 0]
    if found:
        rest = b"{" + tail[min(found) + 1 :].rstrip()
        for candidate in (rest[:-1], rest):  # the summary's fields and the outcome's closing brace
            later = _decode(candidate)
            if later is not None:
                summary.update(later)
                break
    if summary or "summary" in out:
        out["summary"] = summary or None
    return out
