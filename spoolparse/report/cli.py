"""The ``report`` subcommand: a batch's outcomes as a terminal table, ``--json``, or an ``--html`` page."""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, Any

from .._cli_common import add_command, emit_json, log_messages, warn
from ..errors import UsageError

__all__ = ["register"]

REPORT_EXAMPLES = """\
examples:
  spoolparse batch tasks.jsonl --joblog jobs.ndjson --results kept/ > outcomes.ndjson
  spoolparse report outcomes.ndjson --joblog jobs.ndjson --results kept/ --html report.html
  spoolparse batch tasks.jsonl | spoolparse report -
  spoolparse report outcomes.ndjson --json | jq '.failures[0]'
"""


def register(sub: Any) -> None:
    """Add ``report`` to the ``spoolparse`` command."""
    r = add_command(
        sub,
        "report",
        "Read the NDJSON outcomes of 'spoolparse batch' (a file, or - for stdin) once and print "
        "counts by verdict, failures grouped by cause, tokens and cost by CLI and model, durations, attempts "
        "and peak memory; as tables on stdout, as JSON (--json), and as one HTML page (--html FILE).",
        REPORT_EXAMPLES,
    )
    r.add_argument("outcomes", metavar="OUTCOMES|-", help="the outcomes batch printed, or - for stdin")
    r.add_argument("--joblog", metavar="FILE", help="the batch's job log: tells retries from memory requeues")
    r.add_argument("--results", metavar="DIR", help="the batch's --results folder: link tasks to their transcripts")
    r.add_argument("--json", action="store_true", help="print the report as one JSON object instead of tables")
    r.add_argument("--pretty", action="store_true", help="with --json: indent it")
    r.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML page")
    r.set_defaults(func=_cmd_report)


def _check_file(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise UsageError(f"no such file: {path} ({what})")
    if os.path.isdir(path):
        raise UsageError(f"is a directory, not a file: {path} ({what})")


def _cmd_report(args: argparse.Namespace) -> int:
    from . import build
    from .html import page
    from .text import write

    if args.outcomes != "-":
        _check_file(args.outcomes, "the outcomes")
    if args.joblog is not None:
        _check_file(args.joblog, "--joblog")
    if args.results is not None and not os.path.isdir(args.results):
        raise UsageError(f"no such folder: {args.results} (--results)")
    html_out: IO[str] | None = None
    if args.html is not None:
        try:  # before reading: a page that cannot be written fails first
            html_out = open(args.html, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            raise UsageError(f"cannot write {args.html}: {e.strerror}") from None
    try:
        with log_messages():  # the job log's reader warns of torn lines as batch --resume's does
            if args.outcomes == "-":
                report, fold = build(sys.stdin.buffer, joblog=args.joblog, results=args.results,
                                     rows=html_out is not None)
            else:
                with open(args.outcomes, "rb") as f:
                    report, fold = build(f, joblog=args.joblog, results=args.results, rows=html_out is not None)
        if html_out is not None:
            source = "stdin" if args.outcomes == "-" else os.path.basename(args.outcomes)
            html_out.write(page(report, fold.rows(), source=source, path=args.html))
    finally:
        if html_out is not None:
            html_out.close()
    _hint(report)
    if args.json:
        emit_json(report, pretty=args.pretty)
    else:
        write(report, sys.stdout)
    return 0


def _hint(report: Any) -> None:
    from ..cost import INSTALL_HINT

    missing = next((n["count"] for n in report["unpriced"] if n["text"] == INSTALL_HINT), 0)
    if missing:
        warn(f"{missing:,} runs have no cost estimate: the price data is not installed (pip install "
             "'spoolparse[cost]')")
