"""spoolparse: run JSON-lines agent CLIs and get their answer with bounded memory.

.. code-block:: python

    import spoolparse

    with spoolparse.run(["codex", "exec", "--json", "fix the bug"], timeout=600) as r:
        print(r.ok, r.text, r.usage)
"""

# First, before any other import (both are built in: nothing to load): see _quit_while_loading.
import _signal  # type: ignore[import-not-found]  # (no stub: the module signal.py wraps)
import sys as _sys

#: What a Ctrl-C while the command loads prints (on its stderr) before it ends with 130.
_LOADING_INTERRUPTED = b"spoolparse: error: interrupted by SIGINT\n"


def _quit_while_loading(signum: int, frame: object) -> None:
    """SIGINT while the ``spoolparse`` command loads (this package, then its entry point): nothing is started
    yet, so it ends here with one line and 130, never with Python's traceback of an import cut short.
    :func:`spoolparse.__main__.entry` puts Python's handler back as it takes over."""
    import os

    try:
        os.write(2, _LOADING_INTERRUPTED)
    finally:
        os._exit(130)


# Only in the command's own process (the console script, or python -m spoolparse): a program that imports
# spoolparse keeps its handlers.
if ((_sys.argv or [""])[0].rsplit("/", 1)[-1] == "spoolparse" or _sys.orig_argv[1:3] == ["-m", "spoolparse"]) and (
    _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler  # not when it was to be ignored
):
    _signal.signal(_signal.SIGINT, _quit_while_loading)


TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the command loads this module on every call
if TYPE_CHECKING:  # the real imports, for type checkers; at run time each name loads on first use
    from typing import Any

    from . import _limits as limits
    from .aio import AsyncRun, arun, open_run
    from .errors import (
        CalledProcessError,
        Error,
        SpawnError,
        SpoolDirError,
        SpoolDirWarning,
        SpoolFullError,
        SpoolWarning,
        TimeoutExpired,
        UsageError,
    )
    from .lines import Dropped, Event, LineReader, LineScanner, Noted, iter_lines, probe_type
    from .options import ChildOptions
    from .parser import StreamParser, parse
    from .process import run
    from .providers import PROVIDERS, AutoProvider, make_provider
    from .providers.base import Answer, LiveEvent, Provider
    from .result import SUMMARY_FIELDS, Result
    from .runner import BatchOptions, Outcome, Task, arun_many, run_many
    from .types import (
        EVENT_FIELDS,
        EVENT_KINDS,
        CostSource,
        DroppedEvent,
        DroppedLine,
        ErrorEvent,
        EventDict,
        EventKind,
        JobLogRecord,
        OutcomeDict,
        ReportDict,
        ResultEvent,
        RetryEvent,
        SessionEvent,
        Summary,
        TextDeltaEvent,
        TextEvent,
        ThinkingEvent,
        ToolEndEvent,
        ToolStartEvent,
        TurnEndEvent,
        TurnStartEvent,
        Usage,
        UsageEvent,
        Verdict,
        WarningEvent,
    )

#: Where each public name lives; it loads on first use. ``import spoolparse`` stays cheap (not even typing,
#: subprocess or the errors): the command line starts on every call, and a library user who only parses should not
#: pay for the scheduler.
_ERRORS = ("CalledProcessError", "Error", "SpawnError", "SpoolDirError", "SpoolDirWarning", "SpoolFullError",
           "SpoolWarning", "TimeoutExpired", "UsageError")
_TYPES = ("EVENT_FIELDS", "EVENT_KINDS", "CostSource", "DroppedEvent", "DroppedLine", "ErrorEvent", "EventDict",
          "EventKind", "JobLogRecord", "OutcomeDict", "ReportDict", "ResultEvent", "RetryEvent", "SessionEvent",
          "Summary", "TextDeltaEvent", "TextEvent", "ThinkingEvent", "ToolEndEvent", "ToolStartEvent",
          "TurnEndEvent", "TurnStartEvent", "Usage", "UsageEvent", "Verdict", "WarningEvent")
_LAZY = {
    **dict.fromkeys(_ERRORS, ".errors"), **dict.fromkeys(_TYPES, ".types"),
    "AsyncRun": ".aio", "arun": ".aio", "open_run": ".aio",
    "Dropped": ".lines", "Event": ".lines", "LineReader": ".lines", "LineScanner": ".lines", "Noted": ".lines",
    "iter_lines": ".lines", "probe_type": ".lines",
    "StreamParser": ".parser", "parse": ".parser", "ChildOptions": ".options",
    "run": ".process",
    "PROVIDERS": ".providers", "AutoProvider": ".providers", "make_provider": ".providers",
    "Answer": ".providers.base", "LiveEvent": ".providers.base", "Provider": ".providers.base",
    "SUMMARY_FIELDS": ".result", "Result": ".result",
    "Outcome": ".runner", "Task": ".runner", "arun_many": ".runner", "run_many": ".runner",
    "BatchOptions": ".runner",
}


def _load(module: str) -> "Any":
    """One of the package's modules by its relative name (``.errors``); ``__import__`` itself, so the
    importlib package (and the warnings it loads) is not loaded for it."""
    return __import__(module[1:], globals(), None, ["__name__"], 1)


def __getattr__(name: str) -> "Any":
    if name == "limits":  # the bounds module itself, under its public name
        value: Any = _load("._limits")
    else:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_load(module), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"limits"})


__version__ = "0.1.0"

__all__ = [
    "__version__",
    "limits",
    "run",
    "ChildOptions",
    "run_many",
    "arun_many",
    "BatchOptions",
    "Task",
    "Outcome",
    "arun",
    "open_run",
    "AsyncRun",
    "parse",
    "iter_lines",
    "Result",
    "SUMMARY_FIELDS",
    "LiveEvent",
    "Answer",
    "Provider",
    "PROVIDERS",
    "AutoProvider",
    "make_provider",
    "StreamParser",
    "LineScanner",
    "LineReader",
    "Event",
    "Noted",
    "Dropped",
    "probe_type",
    "Error",
    "UsageError",
    "SpawnError",
    "SpoolDirError",
    "SpoolFullError",
    "TimeoutExpired",
    "CalledProcessError",
    "SpoolWarning",
    "SpoolDirWarning",
    # the typed data model (spoolparse.types)
    "EventKind",
    "EVENT_KINDS",
    "EVENT_FIELDS",
    "EventDict",
    "SessionEvent",
    "TurnStartEvent",
    "TurnEndEvent",
    "TextEvent",
    "TextDeltaEvent",
    "ThinkingEvent",
    "ToolStartEvent",
    "ToolEndEvent",
    "UsageEvent",
    "RetryEvent",
    "WarningEvent",
    "ErrorEvent",
    "DroppedEvent",
    "ResultEvent",
    "Usage",
    "Summary",
    "DroppedLine",
    "OutcomeDict",
    "JobLogRecord",
    "Verdict",
    "CostSource",
    "ReportDict",
]
