"""Facts from a noted line's bounded head and tail, without decoding its output.

A noted line (a tool call, a tool result, a stream delta) reaches a provider
as its type, its size and at most ``NOTE_HEAD`` + ``NOTE_TAIL`` bytes of it.
A short line is whole in its head and is decoded (a bounded cost); a long
one is read by key: in compact JSON a ``"`` inside a string is always
escaped, so ``{"key":`` or ``,"key":`` not preceded by a backslash is a key,
never text inside the output.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import orjson

from .. import _limits
from .._decode.records import Noted
from .._regex import regex

__all__ = ["whole", "string", "scalar", "short", "title_of", "TITLE_KEYS"]

#: Argument keys that make a tool call's title, best first: a command line,
#: a path, a search.
TITLE_KEYS = (
    "command",
    "cmd",
    "file_path",
    "filePath",
    "path",
    "absolute_path",
    "notebook_path",
    "pattern",
    "query",
    "url",
    "description",
    "prompt",
)


def whole(rec: Noted) -> dict[str, Any] | None:
    """The line decoded when its head holds all of it (a short line), else ``None``."""
    if len(rec.head) < rec.size:
        return None
    try:
        obj = orjson.loads(rec.head)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


_STRING = regex(rb'[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)')
_SCALAR = regex(rb"[ \t]*(-?\d+|true|false|null)[ \t]*[,}]")
_BLANK = b" \t"


def _value_at(data: bytes, key: str, *, last: bool = False) -> int:
    """Where the value of the first (or last) ``"key":`` that is a key (after ``{`` or ``,``) starts, or -1.

    ``bytes.find`` first, the checks around a hit after: several times
    cheaper than a regex search over the head.
    """
    needle = b'"' + key.encode() + b'"'
    find = data.rfind if last else data.find
    i = find(needle)
    end = len(data)
    while i >= 0:
        j = i - 1
        while j >= 0 and data[j] in _BLANK:
            j -= 1
        if j >= 0 and data[j] in b"{,":
            k = i + len(needle)
            while k < end and data[k] in _BLANK:
                k += 1
            if k < end and data[k] == 58:  # ":"
                return k + 1
        i = data.rfind(needle, 0, i) if last else data.find(needle, i + 1)
    return -1


def _decode(raw: bytes) -> str:
    # a value cut by the head's end may end inside an escape or a UTF-8 sequence
    for cut in range(min(7, len(raw) + 1)):
        try:
            text: str = orjson.loads(b'"' + raw[: len(raw) - cut] + b'"')
            return text
        except orjson.JSONDecodeError:
            continue
    return raw.decode("utf-8", "replace")


def string(data: bytes, key: str, *, last: bool = False) -> str | None:
    """The first (or last) string value of ``key`` in ``data``; cut short where ``data`` ends."""
    at = _value_at(data, key, last=last)
    m = _STRING.match(data, at) if at >= 0 else None
    return _decode(m.group(1)) if m is not None else None


def scalar(data: bytes, key: str) -> int | bool | None:
    """The last integer or boolean value of ``key`` in ``data`` (``None``: absent, null or not whole)."""
    at = _value_at(data, key, last=True)
    m = _SCALAR.match(data, at) if at >= 0 else None
    if m is None:
        return None
    v = m.group(1)
    return True if v == b"true" else False if v == b"false" else None if v == b"null" else int(v)


def short(text: Any, limit: int = _limits.MAX_TITLE_CHARS) -> str | None:
    """A title: one line, at most ``limit`` characters."""
    if not isinstance(text, str):
        return None
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def title_of(args: Any) -> str | None:
    """A tool call's title from its decoded arguments: the command, path or query."""
    if isinstance(args, str):
        return short(args)
    if not isinstance(args, Mapping):
        return None
    for key in TITLE_KEYS:
        value = args.get(key)
        if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
            return short(shlex.join(value))
        if isinstance(value, str) and value:
            return short(value)
    changes = args.get("changes")
    if isinstance(changes, list) and changes:
        first = changes[0]
        path = first.get("path") if isinstance(first, Mapping) else None
        if isinstance(path, str):
            more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
            return short(path + more)
    return None


def title_in(data: bytes, keys: tuple[str, ...] = TITLE_KEYS) -> str | None:
    """A title from a head that could not be decoded: the first of ``keys`` found."""
    for key in keys:
        value = string(data, key)
        if value:
            return short(value)
    return None
