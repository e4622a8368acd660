"""A failure's cause: its error sentence with what differs from task to task put as placeholders.

Two hundred tasks that failed with "API Error: 429 … request req_01HX…" differ
only in their request ids, so :func:`cause` writes each as ``<id>``: ids
(UUIDs, long hex strings, ``req_…``-style tokens), paths (``<path>``), and
numbers (``N``) go; what tells causes apart stays — the words, quoted names,
signal names, and the number after ``HTTP``, ``status``, ``code``, ``exit`` or
``signal`` (exit status 1 and 137 are different failures).
"""

from __future__ import annotations

import re

from .._regex import regex

__all__ = ["cause", "MAX_CAUSE"]

#: Longest cause kept (characters); longer sentences are cut, so two that differ only past it are one cause.
MAX_CAUSE = 300

_UUID = regex(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# a long run of hex digits with a digit in it (hashes, request ids), or a word_ or word- prefixed token with digits
_HEX = regex(r"\b(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{12,}\b")
_TOKEN = regex(r"\b[A-Za-z]{1,12}[_-](?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{8,}\b")
# an absolute, home or relative path with at least two parts (a URL's path included)
_PATH = regex(r"(?:(?<=[\s'\"(=:])|^)(?:~|\.{1,2})?/[^\s'\"()<>,;]*[^\s'\"()<>,;.:]")
_URL = regex(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+")
# a number, and the word before it when that word makes the number part of the cause (HTTP 429, status 137)
_NUMBER = regex(r"(\b(?:HTTP|status|code|exit|signal|error)[ :]+)?(?<![\w.])\d+(?:[.,]\d+)*(?!\w)", re.I)
_SPACE = regex(r"\s+")



def _number(m: re.Match[str], text: str) -> str:
    """``N`` for a number, but not for one a keyword names, nor a short one that ends a name (``gpt-5.1``)."""
    if m.group(1):
        return m.group(0)
    at = m.start()
    if at > 1 and text[at - 1] == "-" and text[at - 2].isalnum() and len(m.group(0)) <= 4:
        return m.group(0)
    return "N"


def cause(error: str) -> str:
    """``error`` with ids, paths and numbers put as ``<id>``, ``<path>`` and ``N``; one line, at most
    :data:`MAX_CAUSE` characters."""
    text = _SPACE.sub(" ", error[: 4 * MAX_CAUSE]).strip()
    text = _URL.sub("<url>", text)
    text = _UUID.sub("<id>", text)
    text = _TOKEN.sub("<id>", text)
    text = _HEX.sub("<id>", text)
    text = _PATH.sub("<path>", text)
    text = _NUMBER.sub(lambda m: _number(m, text), text)
    return text[:MAX_CAUSE] if len(text) > MAX_CAUSE else text
