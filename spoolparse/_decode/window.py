"""Whole-window scanning: the lines of a read window that need a look, found by C-level calls over all of it.

When the keys a retain function does not skip are known (a provider's
grammar), most lines of a window can be passed over without a look of their
own: a line that starts ``{"type":"T"`` (and, for a Codex ``item.*`` type,
``,"item":{"id":"…","type":"S"``), compact and in its first
``FAST_PROBE_BYTES``, whose key is not among them, is skipped, as the
line-by-line path skips it, whatever follows. Every other line is a
*candidate*, read by the line-by-line path: a kept or noted type, and anything
the pattern cannot vouch for — an untyped object, blanks or a byte-order mark
before the brace, an escape or a byte past ASCII in the type, the type past
the first bytes, not JSON, a blank line. A false candidate (a line that only
looks like one) is classified there and skipped, never lost.

Per window: one ``rfind`` for its last newline, ``count`` for the line numbers,
one ``finditer`` of :func:`candidates`' pattern, and hops of ``max_line`` bytes
(``rfind`` again) for the lines too long to skip silently. A buffer without
``count`` (a memory map) is copied first. Which path is cheaper depends on how
long the lines are (:data:`LINE_BYTES`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

from .records import Buffer, Record
from .states import Scanner

__all__ = ["Candidates", "candidates", "scan", "LINE_BYTES", "MIN_WINDOW"]

#: Lines shorter than this on average (in the last window) are scanned a window at a time, longer ones line by
#: line: per line, ``find`` and an anchored match cost about what ``count`` and ``finditer`` spend on this many
#: bytes (their C loops take about a cycle a byte; ``find`` is ``memchr``). Measured on skipped lines of 220
#: bytes the window path took 12 % less time, of 470 bytes 15 % more, of 2 KiB (Codex tool items) twice as much.
LINE_BYTES: Final = 320
#: A shorter window is read line by line (a live child's latest lines, a small file): a window's own calls, and
#: compiling the pattern once (about 3 ms), are worth it over many lines only.
MIN_WINDOW: Final = 1 << 16
#: Longest type, item id or item type the pattern vouches for; a longer one makes the line a candidate. With
#: the pattern's own bytes (41) it keeps every match within FAST_PROBE_BYTES, where the line-by-line path looks.
_PART = 64
_PLAIN = rb'[^"\\\n\x80-\xff]{0,%d}' % _PART  # a type as the key has it: no escape, no byte past ASCII
_ID = rb'[^"\\\n]{0,%d}' % _PART


@dataclass(frozen=True)
class Candidates:
    """The compiled patterns of one set of keys: ``after`` matches the newline before each candidate, ``skipped``
    tells a line the window path may pass over from its first byte."""

    after: re.Pattern[bytes]
    skipped: re.Pattern[bytes]


def _alternatives(words: list[bytes]) -> bytes:
    """A regex matching exactly ``words``, as a trie (one test of a byte per level, not one per word)."""
    if not words:
        return rb"(?!)"
    groups: dict[bytes, list[bytes]] = {}
    end = False
    for w in sorted(set(words)):
        if not w:
            end = True
        else:
            groups.setdefault(w[:1], []).append(w[1:])
    alts = [re.escape(first) + (_alternatives(rest) if rest != [b""] else b"") for first, rest in groups.items()]
    body = b"|".join(alts)
    if end:
        return b"(?:" + body + b")?" if alts else b""
    return b"(?:" + body + b")" if len(alts) > 1 else body


@functools.lru_cache(maxsize=32)
def candidates(keys: frozenset[str]) -> Candidates:
    """The patterns for a retain function that skips every key but ``keys``."""
    tops: list[bytes] = []
    items: dict[bytes, list[bytes]] = {}
    for key in keys:
        raw = key.encode("utf-8", "surrogatepass")
        if not raw.startswith(b"item."):
            tops.append(raw)
        elif b"/" in raw:
            top, sub = raw.split(b"/", 1)
            items.setdefault(top, []).append(sub)
    # an item key's top is the text before its first "/": a top with a "/" of its own is always a candidate
    kept_items = b"|".join(
        re.escape(top) + rb'","item":\{"id":"' + _ID + rb'","(?:item_)?type":"' + _alternatives(subs) + b'"'
        for top, subs in items.items()
    ) or rb"(?!)"
    plain = rb'(?!item\.)(?!' + _alternatives(tops) + rb'")' + _PLAIN + b'"'
    item = (rb"(?!" + kept_items + rb")item\.[^\"\\\n\x80-\xff/]{0,%d}" % _PART
            + rb'","item":\{"id":"' + _ID + rb'","(?:item_)?type":"' + _PLAIN + b'"')
    skipped = rb'\{"type":"(?:' + plain + b"|" + item + b")"
    return Candidates(re.compile(rb"\n(?!" + skipped + b")"), re.compile(skipped))


def scan(sc: Scanner, buf: Buffer, pos: int, end: int, cands: Candidates, out: list[Record]) -> int:
    """Read the lines of ``buf[pos:end]`` that end in it; return where the rest (a line cut short) starts."""
    last = buf.rfind(b"\n", pos, end)
    if last < 0:
        return pos
    data: Buffer = buf
    p, q = pos, last + 1
    if not hasattr(buf, "count"):  # a memory map: its complete lines, copied
        data, p, q = buf[pos : last + 1], 0, last + 1 - pos
    count = data.count  # type: ignore[attr-defined]
    find = data.find
    probe = sc.probe_bytes
    base = sc.lines
    seen = 0  # newlines before ``prev``, from ``p``
    prev = p
    for s in _starts(data, p, q, sc.max_line, cands):
        seen += count(b"\n", prev, s)
        prev = s
        sc.lines = base + seen + 1
        nl = find(b"\n", s, q)
        sc.complete(bytes(data[s : min(nl, s + probe)]), data, s, nl, out)
    sc.lines = base + seen + count(b"\n", prev, q)
    return last + 1


def _starts(data: Buffer, p: int, q: int, max_line: int, cands: Candidates) -> list[int]:
    """Where the lines to read start, in order: candidates, and lines longer than ``max_line``."""
    starts = [] if cands.skipped.match(data, p, q) is not None else [p]  # type: ignore[call-overload]
    starts.extend(m.start() + 1 for m in cands.after.finditer(data, p, q))  # type: ignore[call-overload]
    if starts and starts[-1] >= q:
        starts.pop()  # the newline that ends the window: what follows is not in it
    over = _oversize(data, p, q, max_line)
    if over:
        starts = sorted(set(starts).union(over))
    return starts


def _oversize(data: Buffer, p: int, q: int, max_line: int) -> list[int]:
    """The starts of the lines in ``data[p:q]`` (which ends with a newline) longer than ``max_line``.

    From a line start ``s``, the last newline within ``max_line + 1`` bytes ends every line that starts up to it,
    each no longer than ``max_line``; with none there, the line at ``s`` is longer. One ``rfind`` per hop.
    """
    out: list[int] = []
    s = p
    while q - s > max_line + 1:
        r = data.rfind(b"\n", s, s + max_line + 1)
        if r < 0:
            out.append(s)
            r = data.find(b"\n", s + max_line + 1, q)
        s = r + 1
    return out

