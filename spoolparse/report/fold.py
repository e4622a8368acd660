"""One pass over a batch's outcomes (and its job log) into the report, in bounded memory.

Everything kept is bounded by a constant below, whatever the number of
outcomes: counts, two :class:`~spoolparse.report.sketch.Quantiles`, at most
:data:`MAX_GROUPS` failure causes with :data:`EXAMPLES` ids each, at most
:data:`MAX_MODELS` CLI-and-model rows, the :data:`SLOWEST` slowest tasks and the
:data:`HIGHEST` largest peaks, the first :data:`KILLED_LISTED` tasks killed for
memory, and (for the HTML page) at most :data:`MAX_TABLE_ROWS` task rows.
Outcomes of any shape are taken: a field missing or of another type counts
as unknown, never as an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from .. import cost
from ..providers.base import clip
from ..runner.results import folder_name
from ..runner.tasks import VERDICTS, id_text
from ..runner.verdicts import REQUEUE_ERROR
from ..types import (
    ReportAttempts,
    ReportDict,
    ReportFailureGroup,
    ReportNote,
    ReportSpend,
    ReportTask,
)
from .causes import cause
from .sketch import Largest, Quantiles

__all__ = ["Fold", "Row", "BOUNDS", "MAX_TABLE_ROWS"]

#: Distinct failure causes kept; later new causes are counted in ``other_failures``.
MAX_GROUPS = 500
#: Example tasks kept per cause.
EXAMPLES = 3
#: Slowest tasks kept.
SLOWEST = 10
#: Tasks with the largest memory peaks kept.
HIGHEST = 10
#: Tasks killed for memory listed (all are counted).
KILLED_LISTED = 50
#: CLI-and-model rows kept; the runs of later new models go to one "(other models)" row of their CLI.
MAX_MODELS = 200
#: Distinct reasons for an unknown cost kept; later new ones are counted in one "(other reasons)" line.
MAX_NOTES = 50
#: Task rows the HTML page's table holds: every task not ok first, in input order, then ok ones.
MAX_TABLE_ROWS = 5000
#: Characters of an id or an error a listed task keeps.
MAX_ID = 256
MAX_ERROR = 300

#: Every bound, as the report states it (``bounds`` in its JSON).
BOUNDS: dict[str, int] = {
    "groups": MAX_GROUPS, "examples": EXAMPLES, "slowest": SLOWEST, "highest": HIGHEST,
    "killed_listed": KILLED_LISTED, "models": MAX_MODELS, "notes": MAX_NOTES, "table_rows": MAX_TABLE_ROWS,
}

#: Distinct verdicts counted by name (spoolparse writes seven).
MAX_VERDICTS = 32
OTHER_VERDICT = "(other)"
OTHER_MODELS = "(other models)"
OTHER_NOTES = "(other reasons)"
_TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
           "reasoning_output_tokens")
_PEAK_SOURCES = ("cgroup", "sampled")


def _int(value: Any) -> int | None:
    return value if type(value) is int else int(value) if isinstance(value, float) and value.is_integer() else None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(slots=True)
class Row:
    """One task of the HTML page's table."""

    id: str
    verdict: str
    provider: str | None
    model: str | None
    wall_s: float | None
    attempts: int | None
    peak_memory: int | None
    tokens: int | None
    cost_usd: float | None
    cost_source: str | None
    cause: str | None
    transcript: str | None


class _Spend:
    __slots__ = ("counts", "estimated", "estimated_runs", "reported", "reported_runs", "runs", "unpriced")

    def __init__(self) -> None:
        self.runs = self.reported_runs = self.estimated_runs = self.unpriced = 0
        self.reported = self.estimated = 0.0
        self.counts = dict.fromkeys(_TOKENS, 0)

    def add(self, usage: Mapping[str, Any], usd: float | None, source: Any) -> None:
        self.runs += 1
        for k in _TOKENS:
            n = _int(usage.get(k))
            if n is not None and n > 0:
                self.counts[k] += n
        if usd is None or source not in cost.COST_SOURCES:
            self.unpriced += 1
        elif source == "reported":
            self.reported += usd
            self.reported_runs += 1
        else:
            self.estimated += usd
            self.estimated_runs += 1

    def row(self, provider: str | None, model: str | None) -> ReportSpend:
        out: dict[str, Any] = {"provider": provider, "model": model, "runs": self.runs, **self.counts,
                               "reported_usd": self.reported, "reported_runs": self.reported_runs,
                               "estimated_usd": self.estimated, "estimated_runs": self.estimated_runs,
                               "unpriced_runs": self.unpriced}
        return cast(ReportSpend, out)


class _Group:
    __slots__ = ("count", "examples", "verdicts")

    def __init__(self) -> None:
        self.count = 0
        self.verdicts: dict[str, int] = {}
        self.examples: list[ReportTask] = []


class Fold:
    """Outcomes in, one :class:`~spoolparse.types.ReportDict` out (:meth:`add`, :meth:`add_attempt`, :meth:`report`).

    ``results``: the ``batch --results`` folder, where tasks named in the
    report get the path of their kept transcript. ``rows``: keep the task rows
    of the HTML page's table.
    """

    def __init__(self, *, results: str | None = None, rows: bool = False, joblog: str | None = None) -> None:
        self.results = results
        self.joblog = joblog
        self.outcomes = 0
        self.invalid = 0
        self.long = 0
        self.verdicts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
        self.groups: dict[str, _Group] = {}
        self.other_failures = 0
        self.spend: dict[tuple[str | None, str | None], _Spend] = {}
        self.runs = _Spend()  # every run with a summary: counted by its whole cost (the money is the rows')
        self.notes: dict[str, int] = {}
        self.durations = Quantiles()
        self.slowest: Largest[ReportTask] = Largest(SLOWEST, key=lambda t: t["wall_s"] or 0.0)
        self.peaks = Quantiles()
        self.peak_sources: dict[str, int] = {}
        self.highest: Largest[ReportTask] = Largest(HIGHEST, key=lambda t: float(t["peak_memory"] or 0))
        self.killed = 0
        self.killed_tasks: list[ReportTask] = []
        self.attempts_total = self.tasks_retried = self.extra = 0
        self.retries = self.requeues = 0
        self.attempt_lines = 0
        self.keep_rows = rows
        self.failed_rows: list[Row] = []
        self.ok_rows: list[Row] = []

    # -- input ---------------------------------------------------------------------------------------

    def add(self, rec: Mapping[str, Any] | None, *, long: bool = False) -> bool:
        """One outcome line's record; ``False`` (and counted invalid) when it is no outcome."""
        self.long += long
        verdict = _str(rec.get("verdict")) if isinstance(rec, Mapping) else None
        if rec is None or verdict is None or rec.get("id") is None:
            self.invalid += 1
            return False
        self.outcomes += 1
        if verdict not in self.verdicts and len(self.verdicts) >= MAX_VERDICTS:
            verdict = OTHER_VERDICT  # a verdict spoolparse never writes: counted, not kept by name past a few
        self.verdicts[verdict] = self.verdicts.get(verdict, 0) + 1
        tid = id_text(rec.get("id"))
        raw = rec.get("summary")
        s: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        wall = _num(rec.get("wall_s"))
        attempts = _int(rec.get("attempts"))
        peak = _int(rec.get("peak_memory"))
        error = _str(rec.get("error")) or _str(s.get("error"))
        task = _Task(self, tid, verdict, rec, s, wall, attempts, peak, error)

        if verdict != "ok":
            self._failure(task)
        ran = verdict != "skipped" and (attempts is None or attempts > 0)
        if ran and wall is not None:
            self.durations.add(wall)
            if self.slowest.would_keep(wall):
                self.slowest.add(task.listed())
        if attempts is not None and attempts > 0:
            self.attempts_total += attempts
            if attempts > 1:
                self.tasks_retried += 1
                self.extra += attempts - 1
        if peak is not None and peak >= 0:
            self.peaks.add(float(peak))
            src = _str(rec.get("peak_source")) or "unknown"
            src = src if src in _PEAK_SOURCES else "other"
            self.peak_sources[src] = self.peak_sources.get(src, 0) + 1
            if self.highest.would_keep(float(peak)):
                self.highest.add(task.listed())
        if verdict == "killed_memory":
            self.killed += 1
            if len(self.killed_tasks) < KILLED_LISTED:
                self.killed_tasks.append(task.listed())
        run_usd, run_source = self._spend(s) if s else (None, None)
        if self.keep_rows:
            self._row(task, run_usd, run_source)
        return True

    def add_attempt(self, rec: Mapping[str, Any] | None) -> None:
        """One job-log line: an attempt that was not final was retried, or requeued after host memory pressure."""
        if not isinstance(rec, Mapping) or "final" not in rec:
            return
        self.attempt_lines += 1
        if rec.get("final") is not False:
            return
        if rec.get("verdict") == "killed_memory" and _str(rec.get("error")) == REQUEUE_ERROR:
            self.requeues += 1
        else:
            self.retries += 1

    def _failure(self, task: _Task) -> None:
        key = cause(task.error) if task.error else f"{task.verdict} (no error given)"
        group = self.groups.get(key)
        if group is None:
            if len(self.groups) >= MAX_GROUPS:
                self.other_failures += 1
                return
            group = self.groups[key] = _Group()
        group.count += 1
        group.verdicts[task.verdict] = group.verdicts.get(task.verdict, 0) + 1
        if len(group.examples) < EXAMPLES:
            group.examples.append(task.listed())

    def _spend(self, s: Mapping[str, Any]) -> tuple[float | None, str | None]:
        """Add a summary's tokens and cost to its rows; its whole run's cost and source."""
        provider = _str(s.get("provider"))
        model = _str(s.get("model"))
        raw_usage = s.get("usage")
        usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
        raw_by_model = s.get("usage_by_model")
        by_model = raw_by_model if isinstance(raw_by_model, Mapping) and raw_by_model else None
        if "cost_source" in s:
            run_usd, run_source, note = _num(s.get("cost_usd")), _str(s.get("cost_source")), _str(s.get("cost_note"))
            if run_source not in cost.COST_SOURCES:
                run_usd = run_source = None
        else:  # written before summaries carried a cost: priced here, by the same rule
            by_model = {str(k): v for k, v in by_model.items() if isinstance(v, Mapping)} if by_model else None
            priced, by_model = cost.price(provider, model, usage, by_model)
            run_usd, run_source, note = priced.usd, priced.source, priced.note
        self.runs.add({}, run_usd, run_source)
        if run_usd is None:
            text = note or "cost unknown"
            if text not in self.notes and len(self.notes) >= MAX_NOTES:
                text = OTHER_NOTES
            self.notes[text] = self.notes.get(text, 0) + 1
        if by_model:
            for name, per in by_model.items():
                if isinstance(per, Mapping):
                    self._row_of(provider, str(name)).add(per, _num(per.get("cost_usd")), per.get("cost_source"))
        else:
            self._row_of(provider, model).add(usage, run_usd, run_source)
        return run_usd, run_source

    def _row_of(self, provider: str | None, model: str | None) -> _Spend:
        key = (provider, model)
        row = self.spend.get(key)
        if row is None:
            if len(self.spend) >= MAX_MODELS:
                key = (provider, OTHER_MODELS)
                row = self.spend.get(key)
            if row is None:
                row = self.spend[key] = _Spend()
        return row

    def _row(self, task: _Task, usd: float | None, source: str | None) -> None:
        rows = self.ok_rows if task.verdict == "ok" else self.failed_rows
        if len(rows) >= MAX_TABLE_ROWS:
            return
        usage = task.summary.get("usage")
        tokens = None
        if isinstance(usage, Mapping):
            counts = [n for n in (_int(usage.get("input_tokens")), _int(usage.get("output_tokens"))) if n is not None]
            tokens = sum(counts) if counts else None
        rows.append(Row(
            id=clip(task.id, MAX_ID), verdict=task.verdict, provider=_str(task.summary.get("provider")),
            model=_str(task.summary.get("model")), wall_s=task.wall, attempts=task.attempts, peak_memory=task.peak,
            tokens=tokens, cost_usd=usd, cost_source=source,
            cause=clip(task.error, MAX_ERROR) if task.error else None, transcript=task.transcript(),
        ))

    # -- output --------------------------------------------------------------------------------------

    def rows(self) -> list[Row]:
        """The HTML table's rows: every task not ok first, then ok ones, at most :data:`MAX_TABLE_ROWS`."""
        return (self.failed_rows + self.ok_rows)[:MAX_TABLE_ROWS]

    def report(self) -> ReportDict:
        groups = sorted(self.groups.items(), key=lambda kv: -kv[1].count)
        failures: list[ReportFailureGroup] = [
            {"cause": k, "count": g.count, "verdicts": g.verdicts, "examples": g.examples} for k, g in groups
        ]
        spend = [row.row(p, m) for (p, m), row in self.spend.items()]
        spend.sort(key=lambda r: (-(r["reported_usd"] + r["estimated_usd"]), -r["runs"]))
        total = self.runs.row(None, None)  # runs counted by their whole cost; tokens and dollars the rows'
        for k in (*_TOKENS, "reported_usd", "estimated_usd"):
            total[k] = sum(r[k] for r in spend)  # type: ignore[literal-required]
        unpriced: list[ReportNote] = [
            {"text": t, "count": n} for t, n in sorted(self.notes.items(), key=lambda kv: -kv[1])
        ]
        attempts: ReportAttempts = {
            "source": "joblog" if self.joblog is not None else "outcomes",
            "total": self.attempts_total, "tasks_retried": self.tasks_retried, "extra": self.extra,
            "retries": self.retries if self.joblog is not None else None,
            "requeues": self.requeues if self.joblog is not None else None,
        }
        ok = self.verdicts.get("ok", 0)
        return {
            "outcomes": self.outcomes,
            "verdicts": {k: n for k, n in self.verdicts.items() if n or k in VERDICTS},
            "ok": ok,
            "not_ok": self.outcomes - ok,
            "failures": failures,
            "other_failures": self.other_failures,
            "spend": spend,
            "total": total,
            "unpriced": unpriced,
            "durations": self.durations.summary(),
            "slowest": self.slowest.items(),
            "attempts": attempts,
            "memory": {
                "peaks": self.peaks.summary(), "peak_sources": self.peak_sources,
                "highest": self.highest.items(), "killed": self.killed, "killed_tasks": self.killed_tasks,
            },
            "invalid_lines": self.invalid,
            "long_lines": self.long,
            "joblog": self.joblog,
            "results": self.results,
            "price_data": cost.price_data_version(),
            "bounds": dict(BOUNDS),
        }


class _Task:
    """One outcome as the fold sees it; its :class:`~spoolparse.types.ReportTask` is built only when kept."""

    __slots__ = ("attempts", "error", "fold", "id", "peak", "rec", "summary", "verdict", "wall")

    def __init__(self, fold: Fold, tid: str, verdict: str, rec: Mapping[str, Any], summary: Mapping[str, Any],
                 wall: float | None, attempts: int | None, peak: int | None, error: str | None) -> None:
        self.fold, self.id, self.verdict, self.rec, self.summary = fold, tid, verdict, rec, summary
        self.wall, self.attempts, self.peak, self.error = wall, attempts, peak, error

    def transcript(self) -> str | None:
        results = self.fold.results
        if results is None:
            return None
        folder = os.path.join(results, folder_name(self.id))
        return folder if os.path.isdir(folder) else None

    def listed(self) -> ReportTask:
        return {
            "id": clip(self.id, MAX_ID),
            "verdict": self.verdict,
            "provider": _str(self.summary.get("provider")),
            "model": _str(self.summary.get("model")),
            "wall_s": self.wall,
            "peak_memory": self.peak,
            "attempts": self.attempts,
            "error": clip(self.error, MAX_ERROR) if self.error else None,
            "transcript": self.transcript(),
        }
