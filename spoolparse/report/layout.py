"""The report as titled tables of text cells: what the terminal and the HTML page both show, in one place.

:func:`tables` lays a :class:`~spoolparse.types.ReportDict` out as
:class:`Table` values; :mod:`spoolparse.report.text` draws them with rich or
as plain text, :mod:`spoolparse.report.html` as HTML (with its charts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..providers.base import size_text
from ..types import ReportDict, ReportSpend, ReportTask
from .reader import MAX_LINE
from .sketch import ACCURACY

__all__ = ["Table", "tables", "usd", "seconds", "count", "memory", "share", "headline"]


@dataclass
class Table:
    """A titled table: ``columns`` names, ``rows`` of text cells; ``numeric`` columns align right.

    ``key`` names it for the HTML page (its element id); ``links`` holds, per row, the kept transcript of the
    task the row names (or ``None``); ``note`` is a line under it.
    """

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)
    note: str | None = None
    links: list[str | None] = field(default_factory=list)


def usd(x: float | None) -> str:
    """``$12.34``; below a dollar four decimals (``$0.0042``); ``-`` when unknown."""
    if x is None:
        return "-"
    return f"${x:,.2f}" if x >= 1 or x == 0 else f"${x:.4f}"


def seconds(x: float | None) -> str:
    """``0.42 s``, ``12.3 s``, ``3m20s``, ``1h02m``; ``-`` when unknown."""
    if x is None:
        return "-"
    if x < 10:
        return f"{x:.2f} s"
    if x < 60:
        return f"{x:.1f} s"
    m, s = divmod(round(x), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def count(n: int | float | None) -> str:
    return "-" if n is None else f"{int(n):,}"


def memory(n: float | None) -> str:
    return "-" if n is None else size_text(int(n))


def share(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%" if total else "-"


def headline(r: ReportDict) -> list[tuple[str, str]]:
    """The summary's figures, first on every output: (label, value)."""
    t = r["total"]
    d = r["durations"]
    m = r["memory"]["peaks"]
    spent = t["reported_usd"] + t["estimated_usd"]
    priced = t["reported_runs"] + t["estimated_runs"]
    cost_text = f"{usd(spent)} ({usd(t['reported_usd'])} reported, {usd(t['estimated_usd'])} estimated)"
    if t["unpriced_runs"]:
        cost_text += f"; {count(t['unpriced_runs'])} of {count(t['runs'])} runs not priced"
    elif priced == 0:
        cost_text = "-"
    a = r["attempts"]
    split = (f" ({count(a['retries'])} retries, {count(a['requeues'])} memory requeues)"
             if a["retries"] is not None else "")
    return [
        ("tasks", count(r["outcomes"])),
        ("ok", f"{count(r['ok'])} ({share(r['ok'], r['outcomes'])})"),
        ("not ok", f"{count(r['not_ok'])} ({share(r['not_ok'], r['outcomes'])})"),
        ("cost", cost_text),
        ("tokens", f"{count(t['input_tokens'])} in ({count(t['cached_input_tokens'])} cached), "
                   f"{count(t['output_tokens'])} out"),
        ("duration", f"p50 {seconds(d['p50'])}, p90 {seconds(d['p90'])}, p99 {seconds(d['p99'])}, "
                     f"max {seconds(d['max'])}"),
        ("attempts", f"{count(a['total'])}: {count(a['extra'])} beyond the first{split}"),
        ("memory peak", f"p50 {memory(m['p50'])}, p99 {memory(m['p99'])}, max {memory(m['max'])}; "
                        f"{count(r['memory']['killed'])} killed for memory"),
    ]


def _task_rows(tasks: Sequence[ReportTask], *, peak: bool = False) -> tuple[list[list[str]], list[str | None]]:
    rows = [[t["id"], t["verdict"], memory(t["peak_memory"]) if peak else seconds(t["wall_s"]),
             t["provider"] or "-", t["model"] or "-", t["error"] or ""] for t in tasks]
    return rows, [t["transcript"] for t in tasks]


def _spend_row(s: ReportSpend) -> list[str]:
    return [s["provider"] or "-", s["model"] or "-", count(s["runs"]), count(s["input_tokens"]),
            count(s["cached_input_tokens"]), count(s["output_tokens"]), usd(s["reported_usd"]),
            usd(s["estimated_usd"]), count(s["unpriced_runs"])]


def tables(r: ReportDict) -> list[Table]:
    """Every table of the report, in the order shown: summary, verdicts, failures, cost, time, memory."""
    out = [Table("summary", "Summary", ["", ""], [[k, v] for k, v in headline(r)])]
    total = r["outcomes"]
    out.append(Table("verdicts", "Verdicts", ["verdict", "tasks", "share"],
                     [[v, count(n), share(n, total)] for v, n in r["verdicts"].items() if n or v == "ok"],
                     numeric={1, 2}))
    failures = Table("failures", "Failures by cause", ["tasks", "verdicts", "cause", "examples"], [], numeric={0})
    for g in r["failures"]:
        verdicts = ", ".join(f"{v} {n}" for v, n in g["verdicts"].items())
        failures.rows.append([count(g["count"]), verdicts, g["cause"], " ".join(t["id"] for t in g["examples"])])
        failures.links.append(next((t["transcript"] for t in g["examples"] if t["transcript"]), None))
    if r["other_failures"]:
        failures.note = (f"{count(r['other_failures'])} more not ok, past {r['bounds']['groups']} distinct causes, "
                         "are counted in no row")
    if not r["failures"]:
        failures.note = "every task was ok"
    out.append(failures)
    spend = Table("spend", "Tokens and cost by CLI and model",
                  ["CLI", "model", "runs", "input", "cached", "output", "reported", "estimated", "unpriced"],
                  [_spend_row(s) for s in r["spend"]], numeric=set(range(2, 9)))
    total_row = _spend_row(r["total"])
    spend.rows.append(["total", "", *total_row[2:]])
    spend.note = ("estimated: token counts at list price (genai-prices " + r["price_data"] + ")"
                  if r["price_data"] else "estimates need the price data: pip install 'spoolparse[cost]'")
    out.append(spend)
    if r["unpriced"]:
        out.append(Table("unpriced", "Runs without a cost", ["runs", "why"],
                         [[count(n["count"]), n["text"]] for n in r["unpriced"]], numeric={0}))
    d = r["durations"]
    out.append(Table("durations", "Durations", ["tasks", "p50", "p90", "p99", "max", "mean"],
                     [[count(d["count"]), *(seconds(d[k]) for k in ("p50", "p90", "p99", "max", "mean"))]],
                     numeric=set(range(6)), note=f"quantiles within {ACCURACY:.0%} of the exact value"))
    rows, links = _task_rows(r["slowest"])
    out.append(Table("slowest", "Slowest tasks", ["id", "verdict", "wall", "CLI", "model", "error"], rows,
                     numeric={2}, links=links))
    a = r["attempts"]
    att = [["attempts", count(a["total"])], ["tasks run more than once", count(a["tasks_retried"])],
           ["attempts beyond the first", count(a["extra"])]]
    if a["retries"] is not None:
        att += [["retries (failed, timed out, over own limit)", count(a["retries"])],
                ["requeues (host memory pressure)", count(a["requeues"])]]
    out.append(Table("attempts", "Attempts", ["", ""], att, numeric={1},
                     note=None if a["retries"] is not None else "give --joblog to tell retries from requeues"))
    mem = r["memory"]
    p = mem["peaks"]
    sources = ", ".join(f"{k} {count(n)}" for k, n in mem["peak_sources"].items()) or "-"
    out.append(Table("memory", "Peak memory per task", ["tasks", "p50", "p90", "p99", "max", "measured by"],
                     [[count(p["count"]), *(memory(p[k]) for k in ("p50", "p90", "p99", "max")), sources]],
                     numeric=set(range(5))))
    rows, links = _task_rows(mem["highest"], peak=True)
    out.append(Table("highest", "Largest peaks", ["id", "verdict", "peak", "CLI", "model", "error"], rows,
                     numeric={2}, links=links))
    rows, links = _task_rows(mem["killed_tasks"], peak=True)
    killed = Table("killed", f"Killed for memory ({count(mem['killed'])})",
                   ["id", "verdict", "peak", "CLI", "model", "error"], rows, numeric={2}, links=links)
    if mem["killed"] > len(mem["killed_tasks"]):
        killed.note = f"the first {len(mem['killed_tasks'])} listed"
    out.append(killed)
    notes = []
    if r["invalid_lines"]:
        notes.append(f"{count(r['invalid_lines'])} input lines were no outcome (not JSON, or no id or verdict)")
    if r["long_lines"]:
        notes.append(f"{count(r['long_lines'])} outcome lines longer than {size_text(MAX_LINE)} were read from "
                     "their ends")
    if notes:
        out.append(Table("input", "Input", [""], [[n] for n in notes]))
    return out
