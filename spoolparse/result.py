"""The result of a run or a parse, and its JSON summary (the CLI contract)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

from ._closing import Closing
from .errors import CalledProcessError, TimeoutExpired
from .types import SUMMARY_FIELDS as _SUMMARY_FIELDS
from .types import CostSource, Summary
from .verdict import exit_reason

__all__ = ["Result", "SUMMARY_FIELDS"]

#: Keys of :meth:`Result.summary`, in order: those of :class:`~spoolparse.types.Summary`.
SUMMARY_FIELDS = _SUMMARY_FIELDS


@dataclass(eq=False)
class Result(Closing):
    """What a run (or a parse) produced.

    Like :class:`subprocess.CompletedProcess`, it has ``args`` and
    ``returncode`` (negative ``-N`` when signal ``N`` ended the child; ``None``
    for a parse). ``ok`` means the agent finished and its answer is in hand:
    its provider's terminal event was seen, it reported no error, no part of
    the answer was dropped or cut, the spool holds the whole output, and the
    child exited 0 in time. Otherwise ``error`` says why, always
    (:func:`spoolparse.verdict.judge` writes it). ``text`` is the answer, only
    when ``ok``: what a run that is not ok said last is ``partial_text``.
    ``detected_by`` says what chose the provider (the line and event that
    decided, or ``"--provider"``). ``stdout``/``stderr`` are the spool files
    (binary, positioned at 0) while the result is open; closing the result (or
    leaving its ``with`` block) deletes them.

    .. seealso:: :class:`subprocess.CompletedProcess`
    """

    args: Sequence[str] | str | None
    provider: str
    text: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    usage_by_model: dict[str, dict[str, Any]] | None = None
    raw_usage: Any = None
    model: str | None = None
    session_id: str | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False
    spool_full: bool = False
    duration_s: float = 0.0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    lines: int = 0
    invalid_lines: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    dropped_count: int = 0
    stderr_tail: str = ""
    stdout: IO[bytes] | None = field(default=None, repr=False)
    stderr: IO[bytes] | None = field(default=None, repr=False)
    timeout: float | None = field(default=None, repr=False)
    # (after the fields above, so a Result built by position still is)
    #: The run's cost in US dollars, where it is known (:mod:`spoolparse.cost`): ``cost_source`` says whether
    #: the CLI reported it or it was estimated from the token counts; ``cost_note`` why it is not known.
    cost_usd: float | None = None
    cost_source: CostSource | None = None
    cost_note: str | None = None
    detected_by: str | None = None
    partial_text: str | None = None

    def __post_init__(self) -> None:
        self.hold_back_text()

    def hold_back_text(self) -> None:
        """``text`` only when ``ok``: a result that is not (or no longer) ok keeps what was said as ``partial_text``."""
        if not self.ok and self.text is not None:
            self.partial_text, self.text = self.text, None

    @property
    def ok(self) -> bool:
        # a finished result names every reason in ``error``; the process facts are checked
        # too for a Result built by hand
        return (
            self.returncode in (0, None)
            and not self.timed_out
            and not self.spool_full
            and self.error is None
        )

    @property
    def signal(self) -> int | None:
        """The signal that ended the child, if one did."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    @property
    def command(self) -> str:
        """The command as a shell-quoted string, for logs."""
        if self.args is None:
            return ""
        if isinstance(self.args, str):
            return self.args
        return shlex.join(self.args)

    def summary(self) -> Summary:
        """The JSON-ready summary: exactly the keys of :class:`~spoolparse.types.Summary`, in order."""
        out: dict[str, Any] = {}
        for key in SUMMARY_FIELDS:
            out[key] = getattr(self, key)
        out["duration_s"] = round(self.duration_s, 3)
        return cast(Summary, out)

    def check_returncode(self) -> None:
        """Raise :class:`TimeoutExpired` or :class:`CalledProcessError` unless ``ok``."""
        if self.timed_out:
            raise TimeoutExpired(self, self.timeout)
        if not self.ok:
            rc = self.returncode
            # the error where it says more than the bare exit status (the verdict's own words for that)
            bare = rc is not None and self.error == exit_reason(rc)
            raise CalledProcessError(self, None if bare else self.error)

    def close(self) -> None:
        """Close and so delete the spool files (idempotent)."""
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        self.stdout = self.stderr = None
