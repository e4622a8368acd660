"""Text an agent or a task file controls, made safe to show on a terminal.

A tool's name, a command's title, a task id or an error message can hold
anything: ``ESC ]0;…BEL`` retitles the operator's window, ``ESC [2J`` clears
the screen, U+009B (the 8-bit CSI) starts a sequence of its own on some
terminals, and a newline breaks a redrawn status block. :func:`printable`
spells every such character out (``\\x1b``, ``\\n``, ``\\u009b``), so what the
agent wrote stays visible and nothing of it is obeyed. It is the one filter:
the status lines of ``run`` and ``batch``, the messages on stderr and any
terminal table go through it. JSON output is not shown this way: it is
escaped by the JSON writer instead (:mod:`spoolparse._decode.jsonout`).
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable", "UNSAFE_CATEGORIES"]

#: Unicode categories spelled out: controls (C0, DEL and C1), format characters (bidi overrides, zero-width
#: ones), lone surrogates (a file name's undecodable bytes: no terminal encoding can carry them) and the line
#: and paragraph separators (line breaks to some readers).
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _spelled(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text: str) -> str:
    """``text`` with every control, format, surrogate and separator character spelled out as an escape
    (``"a\\x1b[2Jb"`` → ``"a\\\\x1b[2Jb"``): safe to write to a terminal."""
    if text.isprintable():  # one scan in C: nearly every string (str.isprintable is false for each of them)
        return text
    return "".join(
        _spelled(c) if not c.isprintable() and unicodedata.category(c) in UNSAFE_CATEGORIES else c for c in text
    )
