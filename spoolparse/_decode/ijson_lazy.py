"""ijson, loaded on first use: only a whole-document transcript or an odd line needs it.

Loading it (and its C backend) costs about 9 ms of every start-up, which
``spoolparse parse`` on a JSON-lines file never needs. It loads with the
ending signals held back, as the command loads orjson: a Ctrl-C is raised
right after, never inside an extension's initialisation.
"""

from __future__ import annotations

import functools
from typing import Any

from .._signals import deferred

__all__ = ["module", "python_parse"]


@functools.cache
def module() -> Any:
    """The ijson module."""
    with deferred():
        import ijson  # type: ignore[import-untyped]
    return ijson


@functools.cache
def python_parse() -> Any:
    """ijson's pure-Python ``parse`` (it decodes a lone surrogate escape, which yajl refuses)."""
    return module().get_backend("python").parse
