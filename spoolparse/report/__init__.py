"""``spoolparse report``: a batch's outcomes summed up, as a terminal table, JSON or one HTML page.

:func:`build` reads the outcomes (``spoolparse batch``'s stdout) once, and
the job log if given, into a :class:`~spoolparse.types.ReportDict`; memory
stays bounded whatever their number (:mod:`spoolparse.report.fold` states
each bound).
"""

from __future__ import annotations

import os
from typing import IO

from ..types import ReportDict
from .fold import Fold
from .reader import records

__all__ = ["build", "Fold"]


def build(
    outcomes: IO[bytes],
    *,
    joblog: str | os.PathLike[str] | None = None,
    results: str | os.PathLike[str] | None = None,
    rows: bool = False,
) -> tuple[ReportDict, Fold]:
    """The report of the outcomes read from ``outcomes`` (a binary stream), and the fold that made it (its
    :meth:`~Fold.rows` are the HTML table's, with ``rows=True``)."""
    fold = Fold(
        results=None if results is None else os.fspath(results),
        joblog=None if joblog is None else os.fspath(joblog),
        rows=rows,
    )
    for line in records(outcomes):
        fold.add(line.record, long=line.long)
    if joblog is not None:
        from ..runner.joblog import attempts  # the one reader: its link checks, torn lines said once

        for rec in attempts(joblog):
            fold.add_attempt(rec)
    return fold.report(), fold
