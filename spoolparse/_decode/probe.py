"""A line's type key from its first bytes, before anything is decoded.

The key is:

* ``"T"`` for a top-level ``"type": "T"``;
* ``"T/S"`` when ``T`` starts with ``item.`` and the nested ``item.type``
  (or ``item.item_type``) is ``S`` (Codex items);
* ``"msg/S"`` for the legacy Codex envelope ``{"id": …, "msg": {"type": "S"}}``;
* ``""`` for an object with no type.

Key order does not matter: when the anchored matches below find no type in a
line's first bytes, the incremental parser reads them, and a type past a bad
escape is found by a scan of the top-level keys.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import IO, Any

from .._regex import regex
from . import ijson_lazy
from .reading import no_surrogates
from .topkeys import TopKeys

__all__ = ["FAST", "COMPACT", "probe_type", "compose", "unsure", "strip", "key_of"]

# Anchored on a line's first bytes. Every real agent CLI writes compact JSON
# with "type" first, so nearly every line is classified by this one match.
FAST = regex(
    rb'[ \t\x1e]*(?:\xef\xbb\xbf)?[ \t]*\{[ \t]*"type"[ \t]*:[ \t]*"([^"\\]*)"'
    rb'(?:[ \t]*,[ \t]*"item"[ \t]*:[ \t]*\{[ \t]*"id"[ \t]*:[ \t]*"[^"\\]*"'
    rb'[ \t]*,[ \t]*"(?:item_)?type"[ \t]*:[ \t]*"([^"\\]*)")?'
)
# FAST without the optional blanks, for the feed loop: on compact lines it
# yields the same groups, and since no class admits "\n" it cannot run past
# the line's end, so the loop needs no per-line bound on the match window.
COMPACT = regex(rb'\{"type":"([^"\\\n]*)"(?:,"item":\{"id":"[^"\\\n]*","(?:item_)?type":"([^"\\\n]*)")?')
# The pre-2025-10 Codex envelope: {"id":"0","msg":{"type":"agent_message",...}}
_ENVELOPE = regex(
    rb'[ \t\x1e]*(?:\xef\xbb\xbf)?[ \t]*\{[ \t]*"id"[ \t]*:[ \t]*"[^"\\]*"[ \t]*,'
    rb'[ \t]*"msg"[ \t]*:[ \t]*\{[ \t]*"type"[ \t]*:[ \t]*"([^"\\]*)"'
)
_LEAD = b" \t\r\n\x1e"
_BOM = b"\xef\xbb\xbf"


def unsure(key: str) -> bool:
    """Whether a probe's key may be incomplete: no type seen, or an item type without its nested type."""
    return key == "" or (key.startswith("item.") and "/" not in key)


def strip(data: bytes) -> bytes:
    """A line without the blanks, record separators and byte-order mark JSON printers put around it."""
    data = data.strip(_LEAD)
    if data.startswith(_BOM):
        data = data[3:].strip(_LEAD)
    return data


def compose(top: str | None, sub: str | None, msg: str | None) -> str:
    if top is not None:
        if sub is not None and top.startswith("item."):
            return f"{top}/{sub}"
        return top
    if msg is not None:
        return f"msg/{msg}"
    return ""


def key_of(obj: dict[str, Any]) -> str:
    """The type key of a decoded line."""
    t = obj.get("type")
    top = t if isinstance(t, str) else None
    sub = msg = None
    item = obj.get("item")
    if isinstance(item, dict):
        s = item.get("type", item.get("item_type"))
        sub = s if isinstance(s, str) else None
    m = obj.get("msg")
    if isinstance(m, dict) and isinstance(m.get("type"), str):
        msg = m["type"]
    return compose(top, sub, msg)


def probe_type(prefix: bytes) -> str | None:
    """The type key of a line from its first bytes, or ``None`` if it is not a JSON object.

    Decodes nothing but the few keys it looks for; a prefix cut anywhere is fine.
    """
    m = FAST.match(prefix)
    if m is not None:
        top, sub = m.group(1, 2)
        if sub is not None or not top.startswith(b"item."):
            return compose(top.decode("utf-8", "replace"), sub.decode("utf-8", "replace") if sub else None, None)
    m = _ENVELOPE.match(prefix)
    if m is not None:
        return "msg/" + m.group(1).decode("utf-8", "replace")
    data = strip(prefix)
    if not data.startswith(b"{"):
        return None
    if b'type"' not in data and b"\\" not in data:
        # no "type" or "item_type" key can be here (an escaped key name would show its backslash):
        # an untyped object, told without the incremental parser's ~10 µs
        return ""
    # bad UTF-8 reads as U+FFFD here as in a kept line's decode, so it cannot hide the type
    return _probe_json(ijson_lazy.module().parse, data.decode("utf-8", "replace").encode())


def _probe_json(parse: Callable[[IO[bytes]], Iterator[tuple[str, str, Any]]], data: bytes) -> str:
    top = sub = msg = None
    depth = 0  # ijson joins keys with dots: a top-level key "msg.type" has the path of msg's "type"
    try:
        for path, event, value in parse(io.BytesIO(data)):
            if event != "string":
                if event == "start_map" or event == "start_array":
                    depth += 1
                elif event == "end_map" or event == "end_array":
                    depth -= 1
                continue
            if path == "type":
                top = value
                if not top.startswith("item.") or sub is not None:
                    break
            elif depth != 2:
                continue
            elif path in ("item.type", "item.item_type"):
                sub = value
                if top is not None:
                    break
            elif path == "msg.type":
                msg = value
    except UnicodeDecodeError:
        if parse is not ijson_lazy.python_parse():
            # yajl cannot decode a lone surrogate escape; the pure-Python parser can, and it reads as
            # U+FFFD, as in a kept line's decode
            key: str = no_surrogates(_probe_json(ijson_lazy.python_parse(), data))
            return key
    except Exception:
        key = compose(top, sub, msg)
        if unsure(key):
            # not JSON past some point (a bad escape or a raw control character before the type, or the window's
            # end): the key scan reads on through it, so a type after the bad bytes is still the line's type
            keys = TopKeys()
            keys.feed(data)
            return compose(keys.top, keys.sub, keys.msg)
        return key
    return compose(top, sub, msg)

