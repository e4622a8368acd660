"""The public data model: live events, the summary, outcomes and job-log records as typed shapes.

Every JSON object spoolparse prints is built from these definitions: the
keys of a :class:`~typing.TypedDict` here are the keys written, in order, so
there is no second list of field names to drift. A program that consumes
them can be checked with ``mypy --strict``::

    def on_event(ev: spoolparse.LiveEvent) -> None:
        d = ev.as_dict()
        if d["kind"] == "tool_start":
            print(d["name"], d["title"])  # both ``str | None``
"""

from typing import Any, Literal, TypedDict, Union, get_args

__all__ = [
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
    "CostSource",
    "DroppedLine",
    "Summary",
    "SUMMARY_FIELDS",
    "OutcomeDict",
    "OUTCOME_FIELDS",
    "JobLogRecord",
    "JOBLOG_FIELDS",
    "ReportDict",
    "REPORT_FIELDS",
    "ReportBin",
    "ReportDistribution",
    "ReportTask",
    "ReportFailureGroup",
    "ReportSpend",
    "ReportNote",
    "ReportAttempts",
    "ReportMemory",
    "Verdict",
    "fields_of",
]

#: Every kind of live event, in the order of the docs' table.
EventKind = Literal[
    "session",
    "turn_start",
    "turn_end",
    "text",
    "text_delta",
    "thinking",
    "tool_start",
    "tool_end",
    "usage",
    "retry",
    "warning",
    "error",
    "dropped",
    "result",
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)

#: Where a cost comes from: the CLI printed it, or spoolparse priced the token counts (:mod:`spoolparse.cost`).
CostSource = Literal["reported", "estimated"]


class Usage(TypedDict, total=False):
    """Token counts under normalized names (a provider fills the ones it reports)."""

    input_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    total_tokens: int
    #: The CLI's own figure in ``usage``; in ``usage_by_model`` the model's cost, from ``cost_source``.
    cost_usd: float | None
    cost_source: CostSource | None  # only in ``usage_by_model``


class _Event(TypedDict):
    seq: int  # 1, 2, … in stream order, per parser
    time: float  # Unix time when spoolparse read the line
    line: int  # the stdout line it came from (1-based)
    type: str  # that line's type key


class SessionEvent(_Event):
    kind: Literal["session"]
    session_id: str | None
    model: str | None


class TurnStartEvent(_Event):
    kind: Literal["turn_start"]


class TurnEndEvent(_Event):
    kind: Literal["turn_end"]
    ok: bool | None


class TextEvent(_Event):
    kind: Literal["text"]
    text: str


class TextDeltaEvent(_Event):
    kind: Literal["text_delta"]
    text: str


class ThinkingEvent(_Event):
    kind: Literal["thinking"]
    text: str
    delta: bool


class ToolStartEvent(_Event):
    kind: Literal["tool_start"]
    call_id: str | None
    name: str | None
    title: str | None


class ToolEndEvent(_Event):
    kind: Literal["tool_end"]
    call_id: str | None
    name: str | None
    title: str | None
    ok: bool | None
    exit_code: int | None
    bytes: int
    output: str | None


class UsageEvent(_Event):
    kind: Literal["usage"]
    usage: Usage


class RetryEvent(_Event):
    kind: Literal["retry"]
    message: str
    attempt: int | None
    max_attempts: int | None


class WarningEvent(_Event):
    kind: Literal["warning"]
    message: str


class ErrorEvent(_Event):
    kind: Literal["error"]
    message: str


class DroppedEvent(_Event):
    kind: Literal["dropped"]
    bytes: int
    reason: str


class ResultEvent(_Event):
    kind: Literal["result"]
    ok: bool
    status: str | None


EventDict = Union[  # noqa: UP007 - a runtime alias on 3.10
    SessionEvent,
    TurnStartEvent,
    TurnEndEvent,
    TextEvent,
    TextDeltaEvent,
    ThinkingEvent,
    ToolStartEvent,
    ToolEndEvent,
    UsageEvent,
    RetryEvent,
    WarningEvent,
    ErrorEvent,
    DroppedEvent,
    ResultEvent,
]

_BASE = ("seq", "time", "kind", "line", "type")


def fields_of(shape: type) -> tuple[str, ...]:
    """The keys of a TypedDict, in declaration order (inherited ones first)."""
    return tuple(shape.__annotations__)


def _event_fields() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for shape in get_args(EventDict):
        (kind,) = get_args(shape.__annotations__["kind"])
        out[kind] = _BASE + tuple(k for k in fields_of(shape) if k not in _BASE)
    return out


#: For each event kind, the keys of its JSON object, in order: the common
#: ``seq, time, kind, line, type``, then the kind's own fields.
EVENT_FIELDS: dict[str, tuple[str, ...]] = _event_fields()


# -- the summary ------------------------------------------------------------


class DroppedLine(TypedDict):
    """A line left out for its size (see ``dropped`` in the summary)."""

    line: int
    bytes: int
    type: str
    reason: str


class Summary(TypedDict):
    """:meth:`spoolparse.Result.summary`, the JSON that ``spoolparse run``/``parse`` print."""

    provider: str
    detected_by: str | None  # what chose the provider: the line and event that decided, or "--provider"
    ok: bool
    text: str | None  # the answer, only when ok
    partial_text: str | None  # what a run that is not ok said last, if anything
    usage: Usage
    usage_by_model: dict[str, Usage] | None
    cost_usd: float | None
    cost_source: CostSource | None
    cost_note: str | None  # why ``cost_usd`` is null
    raw_usage: Any
    model: str | None
    session_id: str | None
    error: str | None
    warnings: list[str]
    returncode: int | None
    timed_out: bool
    spool_full: bool
    duration_s: float
    stdout_bytes: int
    stderr_bytes: int
    lines: int
    invalid_lines: int
    dropped: list[DroppedLine]
    dropped_count: int
    stderr_tail: str


#: Keys of :class:`Summary`, in order.
SUMMARY_FIELDS: tuple[str, ...] = fields_of(Summary)


# -- the runner -------------------------------------------------------------

#: What happened to one task of the runner.
Verdict = Literal["ok", "failed", "timeout", "killed_memory", "spawn_error", "cancelled", "skipped"]


class OutcomeDict(TypedDict):
    """:meth:`spoolparse.Outcome.to_dict`: one line of ``spoolparse batch`` output."""

    id: str
    verdict: Verdict
    attempts: int
    wall_s: float
    cpu_s: float
    peak_memory: int | None
    peak_source: str | None
    returncode: int | None
    signal: int | None
    enforcement: str
    error: str | None
    summary: Summary | None


#: Keys of :class:`OutcomeDict`, in order.
OUTCOME_FIELDS: tuple[str, ...] = fields_of(OutcomeDict)


class JobLogRecord(TypedDict):
    """One line of the runner's job log (one per attempt)."""

    id: str
    attempt: int
    final: bool
    verdict: Verdict
    start: float
    end: float
    wall_s: float
    cpu_s: float
    peak_memory: int | None
    returncode: int | None
    signal: int | None
    enforcement: str
    error: str | None
    cmd: list[str] | None


#: Keys of :class:`JobLogRecord`, in order.
JOBLOG_FIELDS: tuple[str, ...] = fields_of(JobLogRecord)


# -- the report ---------------------------------------------------------------


class ReportBin(TypedDict):
    """One bar of a histogram: ``count`` values in ``[lo, hi)`` (the last bin includes ``hi``)."""

    lo: float
    hi: float
    count: int


class ReportDistribution(TypedDict):
    """Quantiles of many values, each within 1% of the exact nearest-rank value; ``min`` and ``max`` exact."""

    count: int
    min: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    mean: float | None
    histogram: list[ReportBin]


class ReportTask(TypedDict):
    """One task named in the report (an example, a slow one, one killed for memory)."""

    id: str
    verdict: str
    provider: str | None
    model: str | None
    wall_s: float | None
    peak_memory: int | None
    attempts: int | None
    error: str | None
    #: The folder ``batch --results`` kept the task's stdout and stderr in, where it did.
    transcript: str | None


class ReportFailureGroup(TypedDict):
    """Tasks not ok for the same cause: the error with ids, paths and numbers put as ``<id>``, ``<path>``, ``N``."""

    cause: str
    count: int
    verdicts: dict[str, int]
    examples: list[ReportTask]


class ReportSpend(TypedDict):
    """Tokens and cost of the runs of one CLI and model (or of all runs: both ``null``)."""

    provider: str | None
    model: str | None
    runs: int
    input_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    reported_usd: float
    reported_runs: int
    estimated_usd: float
    estimated_runs: int
    #: Runs whose cost is unknown (their ``cost_note`` says why; :attr:`ReportDict.unpriced` counts the notes).
    unpriced_runs: int


class ReportNote(TypedDict):
    text: str
    count: int


class ReportAttempts(TypedDict):
    """Attempts beyond the first: retries (the task failed) and requeues (host memory pressure killed it).

    ``source`` is ``"joblog"`` when the job log told them apart; from the outcomes alone only ``extra`` is known
    and ``retries``/``requeues`` are ``null``.
    """

    source: str
    total: int
    tasks_retried: int
    extra: int
    retries: int | None
    requeues: int | None


class ReportMemory(TypedDict):
    peaks: ReportDistribution
    peak_sources: dict[str, int]
    highest: list[ReportTask]
    killed: int
    killed_tasks: list[ReportTask]


class ReportDict(TypedDict):
    """``spoolparse report --json``: one batch's outcomes summed up (:func:`spoolparse.report.build`)."""

    outcomes: int
    verdicts: dict[str, int]
    ok: int
    not_ok: int
    failures: list[ReportFailureGroup]
    #: Not-ok outcomes counted in no group of ``failures`` (past ``bounds.groups`` distinct causes).
    other_failures: int
    spend: list[ReportSpend]
    total: ReportSpend
    unpriced: list[ReportNote]
    durations: ReportDistribution
    slowest: list[ReportTask]
    attempts: ReportAttempts
    memory: ReportMemory
    #: Input lines that were no outcome (not JSON, or no ``id``/``verdict``) and lines read from their ends only.
    invalid_lines: int
    long_lines: int
    joblog: str | None
    results: str | None
    price_data: str | None
    bounds: dict[str, int]


#: Keys of :class:`ReportDict`, in order.
REPORT_FIELDS: tuple[str, ...] = fields_of(ReportDict)
