"""JSON out: every value a parse can produce, written without fail.

orjson writes the summaries, events and job-log lines, fast; it refuses two
things a transcript can legally hold once decoded: integers beyond 64 bits
(kept exactly when read, so they must be written exactly) and nesting deeper
than 254 levels; and one a caller can hand us: text with lone surrogates (an
argument or a task id naming a file whose name is not UTF-8). For those (rare)
values the object is copied once with big integers and lone surrogates as
markers, over-deep parts cut, written by orjson, and the markers replaced by
the digits and by ``\\udcff`` escapes, as Python's ``json.dumps`` writes them:
:func:`loads` (and ``json.loads``) reads the very same text back, never the
escape spelled out with a backslash, which is other text. NaN and the
infinities are written as ``null`` (JSON has no spelling for them).

Every text written is escaped a little beyond what JSON requires: U+2028 and U+2029 (line breaks to
JavaScript and to Python's ``str.splitlines``), DEL and the C1 controls (U+0080 to U+009F: U+0085 is a line
break to ``splitlines``, U+009B a CSI to some terminals) are written as ``\\uXXXX``. The value read back is
the same; a reader that splits the output into lines, or a terminal that shows it, meets none of them raw.
"""

from __future__ import annotations

import decimal
import json
import os
import re
from typing import IO, Any

import orjson

from .._regex import regex
from .reading import SURROGATE_ESCAPE, exact_ints

__all__ = ["dumps", "loads", "write", "encodable", "escape_breaks", "MAX_DEPTH"]

#: Deepest nesting written; deeper values become a short note (orjson's own limit is 254).
MAX_DEPTH = 250
_I64 = (-(1 << 63), (1 << 64) - 1)  # what orjson writes itself (i64 and u64)

#: UTF-8 of the characters escaped beyond JSON's rule (see above). In valid UTF-8 each of these byte sequences
#: can only be that character, and in JSON text a character other than ASCII can only be inside a string.
_BREAKS = regex(rb"\xe2\x80[\xa8\xa9]|\xc2[\x80-\x9f]|\x7f")


def _escaped(m: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(m.group().decode())


def escape_breaks(data: bytes) -> bytes:
    """JSON text ``data`` with U+2028, U+2029, DEL and the C1 controls written as ``\\uXXXX`` (the same value)."""
    return _BREAKS.sub(_escaped, data)


def dumps(obj: Any, *, pretty: bool = False, non_str_keys: bool = True) -> bytes:
    """``obj`` as JSON bytes (no trailing newline); never raises for decoded JSON values."""
    opts = (orjson.OPT_NON_STR_KEYS if non_str_keys else 0) | (orjson.OPT_INDENT_2 if pretty else 0)
    try:
        return escape_breaks(orjson.dumps(obj, option=opts, default=str))
    except (orjson.JSONEncodeError, TypeError, RecursionError):
        pass
    tag = "\x00int" + os.urandom(4).hex() + ":"
    safe = _safe(obj, tag, 0)
    out = orjson.dumps(safe, option=opts | orjson.OPT_NON_STR_KEYS, default=str)
    marker = re.compile(rb'"\\u0000int' + tag[4:].encode() + rb'(-?[0-9]+)"')
    out = marker.sub(lambda m: m.group(1), out)
    if b"\\u0000sur" + tag[4:].encode() in out:
        out = re.sub(rb"\\u0000sur" + tag[4:].encode() + rb"([0-9a-f]{4})", rb"\\u\1", out)
    return escape_breaks(out)


def loads(data: bytes) -> Any:
    """JSON ``data`` (a line :func:`dumps` wrote: a job log's, an outcome's) read back exactly: by orjson, and by
    the standard library when it holds a lone surrogate escape, which orjson refuses. A :class:`ValueError`
    (orjson's own words) when it is not JSON."""
    try:
        return exact_ints(orjson.loads(data), data)  # an integer past 64 bits exact: orjson makes a float
    except orjson.JSONDecodeError as e:
        if SURROGATE_ESCAPE.search(data) is None:
            raise
        refused = e
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise refused from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: A top-level string longer than this (characters) is written in pieces of this size.
_PIECE = 1 << 20


def write(stream: IO[bytes], obj: Any, *, pretty: bool = False) -> None:
    """``obj`` as JSON on ``stream``, a long top-level string (a large answer) in pieces.

    ``dumps`` would hold the whole encoded text besides the text itself; in
    pieces the output costs a piece more than the object.
    """
    long = [k for k, v in obj.items() if isinstance(v, str) and len(v) > _PIECE] if isinstance(obj, dict) else []
    if not long:
        stream.write(dumps(obj, pretty=pretty))
        return
    tag = "\x00long" + os.urandom(4).hex() + ":"
    skeleton = dumps({k: tag + str(i) if k in long else v for i, (k, v) in enumerate(obj.items())}, pretty=pretty)
    parts = re.split(rb'"\\u0000long' + tag[5:].encode() + rb'([0-9]+)"', skeleton)
    values = list(obj.values())
    for i, part in enumerate(parts):
        if i % 2 == 0:
            stream.write(part)
            continue
        text: str = values[int(part)]
        stream.write(b'"')
        for at in range(0, len(text), _PIECE):
            # escaping is per character: pieces join
            stream.write(dumps(text[at : at + _PIECE])[1:-1])  # a lone surrogate in it too
        stream.write(b'"')


def encodable(s: str) -> bool:
    """Whether UTF-8 (and so JSON) can carry ``s``: not when it holds a lone surrogate, which is how Python hands
    the undecodable bytes of a file name (``'\\udcff'``)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_SURROGATE = regex("[\ud800-\udfff]")


def _marked(s: str, tag: str) -> str:
    """``s`` with each lone surrogate as a marker (``tag`` and its code in hex) that :func:`dumps` writes as the
    escape itself: spelled out here (``\\udcff``, six characters), it would read back as other text."""
    if encodable(s):
        return s
    mark = "\x00sur" + tag[4:]
    return _SURROGATE.sub(lambda m: f"{mark}{ord(m.group()):04x}", s)


def _key(k: Any, tag: str) -> str:
    return _marked(k, tag) if isinstance(k, str) else _int_text(k) if isinstance(k, int) else str(k)


def _int_text(n: int) -> str:
    # str(n) refuses more than sys.get_int_max_str_digits() digits; Decimal has no such limit
    try:
        return str(n)
    except ValueError:
        return str(decimal.Decimal(n))


def _safe(value: Any, tag: str, depth: int) -> Any:
    if isinstance(value, str):
        return _marked(value, tag)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if _I64[0] <= value <= _I64[1] else tag + _int_text(value)
    if depth >= MAX_DEPTH:
        return f"[nested deeper than {MAX_DEPTH} levels, not written]"
    if isinstance(value, dict):
        return {_key(k, tag): _safe(v, tag, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v, tag, depth + 1) for v in value]
    return str(value)
