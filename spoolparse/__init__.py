"""spoolparse: run JSON-lines agent CLIs and get their answer with bounded memory.

.. code-block:: python

    import spoolparse

    with spoolparse.run(["codex", "exec", "--json", "fix the bug"], timeout=600) as r:
        print(r.ok, r.text, r.usage)
"""

from __future__ import annotations

from . import _limits as limits
from .aio import AsyncRun, arun, open_run
from .errors import (
    CalledProcessError,
    Error,
    SpawnError,
    SpoolDirWarning,
    SpoolFullError,
    SpoolWarning,
    TimeoutExpired,
    UsageError,
)
from .lines import Dropped, Event, LineReader, LineScanner, Noted, iter_lines, probe_type
from .parser import StreamParser, parse
from .process import run
from .providers import PROVIDERS, AutoProvider, make_provider
from .providers.base import Answer, LiveEvent, Provider
from .result import SUMMARY_FIELDS, Result
from .runner import Outcome, Task, arun_many, run_many
from .types import (
    EVENT_FIELDS,
    EVENT_KINDS,
    DroppedEvent,
    DroppedLine,
    ErrorEvent,
    EventDict,
    EventKind,
    JobLogRecord,
    OutcomeDict,
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

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "limits",
    "run",
    "run_many",
    "arun_many",
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
]
