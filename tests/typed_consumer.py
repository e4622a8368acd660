"""A user program of the typed data model: ``tests/test_events.py`` runs it and checks it with ``mypy --strict``.

It touches every public shape (events, the summary, outcomes, job-log lines)
through the names exported by ``spoolparse`` alone; a renamed or retyped
field fails the type check, a missing one fails the run.
"""

from __future__ import annotations

import json
import sys

import spoolparse


def describe(ev: spoolparse.EventDict) -> str:
    """One line per event; each branch sees only the fields of its kind."""
    if ev["kind"] == "tool_start":
        return f"start {ev['call_id']} {ev['name'] or '?'} {ev['title'] or ''}"
    if ev["kind"] == "tool_end":
        size: int = ev["bytes"]
        return f"end {ev['call_id']} ok={ev['ok']} exit={ev['exit_code']} bytes={size}"
    if ev["kind"] == "text" or ev["kind"] == "text_delta":  # pyright narrows on ==, not on in
        return f"{ev['kind']} {len(ev['text'])}"
    if ev["kind"] == "usage":
        usage: spoolparse.Usage = ev["usage"]
        return f"usage {usage.get('input_tokens', 0)}/{usage.get('output_tokens', 0)}"
    if ev["kind"] == "retry":
        return f"retry {ev['attempt']}/{ev['max_attempts']}"
    return ev["kind"]


def total_tokens(summary: spoolparse.Summary) -> int:
    return summary["usage"].get("input_tokens", 0) + summary["usage"].get("output_tokens", 0)


def outcome_line(outcome: spoolparse.OutcomeDict) -> str:
    verdict: spoolparse.Verdict = outcome["verdict"]
    summary = outcome["summary"]
    text = summary["text"] if summary is not None else None
    return f"{outcome['id']} {verdict} {text!r}"


def joblog_line(rec: spoolparse.JobLogRecord) -> str:
    return f"{rec['id']}#{rec['attempt']} {rec['verdict']} final={rec['final']} cmd={rec['cmd']}"


def main(transcript: str, joblog: str) -> int:
    lines: list[str] = []
    result = spoolparse.parse(transcript, on_event=lambda ev: lines.append(describe(ev.as_dict())))
    summary = result.summary()
    lines.append(f"tokens {total_tokens(summary)}")
    argv = [sys.executable, "-c", 'print(\'{"type":"result","result":"hi"}\')']
    for outcome in spoolparse.run_many([argv], joblog=joblog):
        lines.append(outcome_line(outcome.to_dict()))
    with open(joblog, "rb") as f:
        for raw in f:
            rec: spoolparse.JobLogRecord = json.loads(raw)
            lines.append(joblog_line(rec))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
