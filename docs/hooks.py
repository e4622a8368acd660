"""MkDocs hooks: the API reference reads Sphinx-style docstrings; this renders their cross-reference roles.

mkdocstrings shows ``:class:`~spoolparse.Result``` as the role's name followed by the code span. The hook
keeps the code span (the last part of the name, as Sphinx's ``~`` asks) and drops the role, and turns
``.. seealso::`` into words.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):<code>(~?)([\w.]+)(\(\))?</code>")
_SEEALSO = re.compile(r"\.\. seealso::")


def _name(m: re.Match[str]) -> str:
    name = m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)
    return f"<code>{name}{m.group(3) or ''}</code>"


def on_page_content(html: str, **_: Any) -> str:
    return _SEEALSO.sub("See also:", _ROLE.sub(_name, html))
