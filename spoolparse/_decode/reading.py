"""One line's bytes to its JSON value, as every kept line is read.

orjson reads the line where it lies: a ``bytes`` object, or a ``memoryview``
of the read buffer (no copy of a line that lies whole in it). What orjson
refuses or reads inexactly — bad UTF-8, a lone surrogate escape, ``NaN``, an
integer past 64 bits — is read again by the lenient path below.
"""

from __future__ import annotations

import decimal
import json
from typing import Any, Final

import orjson

from .._regex import regex
from .records import Loads

__all__ = ["TOO_DEEP", "default_loads", "read", "read_json", "exact_ints", "lenient_loads", "no_surrogates",
           "SURROGATE_ESCAPE"]

Bytes = bytes | bytearray | memoryview

#: What :func:`lenient_loads` returns for a value nested deeper than the decoders allow.
TOO_DEEP: Final = object()
SURROGATE_ESCAPE = regex(rb"\\[uU][dD][89abcdefABCDEF]")
#: Deepest nesting read: orjson's own limit. The standard library reads deeper on Python 3.12+
#: (and raises RecursionError on 3.10/3.11), so the lenient path checks it too: one answer everywhere.
_READ_DEPTH = 1024
#: A run of digits that may be an integer orjson would read as a float (beyond 64 bits), in a line translated
#: by _DIGITS (a digit is "1", any other byte "0"); a regex for it costs ten times as much.
_LONG_DIGITS = b"1" * 19
_DIGITS = bytes(0x31 if 0x30 <= i <= 0x39 else 0x30 for i in range(256))
#: Lines up to this long are searched for such a run before their object is walked for a float; a longer one
#: is searched this much at a time (a translated copy of the whole line would cost its size again).
_SEARCH_FIRST = 4096
_SEARCH_PIECE = 1 << 16


def default_loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def read(data: Bytes, loads: Loads) -> Any:
    """``data`` decoded (``None``: by nothing; ``TOO_DEEP``): ``loads``, then ``loads`` on the text with bad
    UTF-8 replaced, then (the default ``loads``) the lenient reader; integers past 64 bits kept exact.
    Only the default ``loads`` is handed a ``memoryview``."""
    try:
        if loads is default_loads:
            obj = orjson.loads(data)
            if len(data) <= _SEARCH_FIRST and _LONG_DIGITS not in bytes(data).translate(_DIGITS):
                return obj  # exact_ints' first test, without a call: most kept lines are short
            return exact_ints(obj, data)
        return loads(data if isinstance(data, bytes) else bytes(data))
    except Exception:
        pass
    try:
        return loads(str(data, "utf-8", "replace"))
    except Exception:
        return lenient_loads(data) if loads is default_loads else None


def read_json(data: bytes) -> Any:
    """One JSON text decoded as the parser decodes a line (``None`` when it is none; ``TOO_DEEP``)."""
    return read(data, default_loads)


def exact_ints(obj: Any, data: Bytes) -> Any:
    """``obj``, which orjson decoded from ``data``, with any integer past 64 bits (a float there) read exactly."""
    # orjson reads an integer past 64 bits as a float: one is there only if the object holds a float and the
    # line a run of 19 digits. The cheaper test goes first: on a short line the run (one translate and one
    # search, in C) costs a tenth of a walk of its object; a long line is mostly text, few values to walk
    if len(data) <= _SEARCH_FIRST:
        if _LONG_DIGITS not in bytes(data).translate(_DIGITS):
            return obj
        return _exact_ints(obj, data) if _has_float(obj, 0) else obj
    if _has_float(obj, 0) and _long_digits(memoryview(data)):
        return _exact_ints(obj, data)
    return obj


def _long_digits(view: memoryview) -> bool:
    """Whether a long line has a run of 19 digits, looked for a piece at a time (pieces overlap by 18 bytes)."""
    step = _SEARCH_PIECE
    for at in range(0, len(view), step):
        if _LONG_DIGITS in bytes(view[at : at + step + len(_LONG_DIGITS) - 1]).translate(_DIGITS):
            return True
    return False


def _exact_ints(obj: Any, data: Bytes) -> Any:
    """``obj`` (with a float orjson read, and a run of 19 digits in ``data``) read again exactly."""
    exact = lenient_loads(data)
    return obj if exact is None or exact is TOO_DEEP else exact


def _has_float(value: Any, depth: int) -> bool:
    if isinstance(value, float):
        return True
    if depth > 64:
        return True  # rare and deep: let the exact reader decide
    if isinstance(value, dict):
        return any(_has_float(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v, depth + 1) for v in value)
    return False


def lenient_loads(data: Bytes) -> Any:
    """JSON that orjson refuses or reads inexactly, or ``None`` (``TOO_DEEP`` when nested too deep).

    JavaScript's ``JSON.stringify`` writes a lone surrogate (half an emoji cut
    by a text split) as a ``\\udXXX`` escape, which orjson rejects; one such
    character must not cost a kept event, so the standard library reads it and
    the lone surrogate becomes U+FFFD (the summary must still print as UTF-8).
    Python's ``json.dumps`` writes ``NaN`` and ``Infinity``: they are read as
    floats. Integers beyond 64 bits (orjson reads them as floats) are kept exact.
    """
    try:
        obj = json.loads(str(data, "utf-8", "replace"), parse_int=_any_int)
        if isinstance(obj, (dict, list)) and _deeper_than(obj, _READ_DEPTH):
            return TOO_DEEP
        # only a \\udXXX escape can leave a lone surrogate: walk the object only then
        return no_surrogates(obj) if SURROGATE_ESCAPE.search(data) is not None else obj
    except RecursionError:
        return TOO_DEEP
    except ValueError:
        return None


def _deeper_than(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _any_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits(): Decimal converts without that limit
        return int(decimal.Decimal(text))


def no_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate read as U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {no_surrogates(k): no_surrogates(v) for k, v in value.items()}
    return value
