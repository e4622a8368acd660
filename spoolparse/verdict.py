"""What ``ok`` means, written once: :func:`judge` gives the reason a run (or a parse) is not ok.

``ok`` is true only when the run's terminal event was seen (its grammar's,
:mod:`spoolparse.providers.grammar`), the agent reported no terminal error,
the answer is in hand, complete and not empty (unless the caller allows a run
without one), a whole-document output is not cut off, the spool holds
everything the child wrote, and — for a run —
the process exited 0 within its timeout. Otherwise ``error`` is a sentence
naming every reason found, most telling first. ``parse``, ``run``,
``arun`` and the batch runner all build their results through
:meth:`spoolparse.StreamParser.finish`, which calls this function; nothing
else decides ``ok``.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from .providers.base import Answer, size_text

__all__ = ["StreamFacts", "judge", "spool_integrity", "exit_reason", "NO_ANSWER", "EMPTY"]


@dataclass(frozen=True, slots=True)
class StreamFacts:
    """What the stream and the process showed, besides the provider's answer."""

    lines: int = 0
    invalid_lines: int = 0
    blank_lines: int = 0
    returncode: int | None = None
    timed_out: bool = False
    timeout: float | None = None
    #: Why the spool is not the child's whole output (cut at a cap, truncated by the child), or ``None``.
    spool: str | None = None
    #: Why a whole-document output (``-o json``) is not whole: it ends before its brackets close, or ``None``.
    cut_off: str | None = None


def spool_integrity(
    *, read: int, size: int | None, smallest: int | None, cap: int | None, shrunk: str = ""
) -> str | None:
    """Whether the spool still holds what was parsed and everything the child wrote.

    ``read``: bytes parsed; ``size``: the spool's size at the end; ``smallest``:
    the smallest size seen below ``read`` while following (a child that reopened
    its stdout with ``O_TRUNC``, e.g. ``> /dev/stdout``); ``cap``: ``max_spool_bytes``;
    ``shrunk``: how a shrink is named (default: the child truncated its spool).
    """
    low = min((s for s in (smallest, size) if s is not None), default=None)
    if low is not None and low < read:
        return f"{shrunk or 'spool truncated by the child'} (size went from {read} to {low} bytes)"
    if cap is not None and size is not None and size > read and read >= cap:
        return f"output cut at --max-spool-bytes ({size_text(cap)}): {size - read} bytes written past it were not read"
    return None


def exit_reason(rc: int) -> str:
    """The reason given for a bare non-zero exit (or a signal)."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the process was killed by {name}"
    return f"the process exited with status {rc}"


#: The reason given for a run that finished without an answer.
NO_ANSWER = "the agent finished without an answer"
#: The reason given for a transcript that is empty (a parse of an empty file, a run whose child printed nothing).
EMPTY = "no JSON event: the transcript is empty"


def judge(ans: Answer, facts: StreamFacts, *, allow_empty_answer: bool = False) -> str | None:
    """The reason the run is not ok (one sentence, reasons joined by "; "), or ``None`` when it is.

    ``allow_empty_answer``: a run that finished without an answer (none, or an empty one) is ok all the same.
    """
    reasons: list[str] = []
    if facts.spool is not None:
        reasons.append(facts.spool)
    if facts.timed_out:
        reasons.append(f"timed out after {facts.timeout:g} s" if facts.timeout is not None else "timed out")
    if facts.cut_off is not None:
        reasons.append(facts.cut_off)
    if ans.error is not None:
        reasons.append(ans.error)
    if ans.lost is not None:
        reasons.append(ans.lost)
    if ans.events == 0 and facts.cut_off is not None:
        pass  # no event came before the cut: that is the reason, said above
    elif ans.events == 0 and facts.lines > facts.blank_lines:
        blank = f", {facts.blank_lines} blank" if facts.blank_lines else ""
        reasons.append(
            f"no JSON event: not a recognised format ({facts.lines} lines, {facts.invalid_lines} not JSON objects"
            f"{blank})"
        )
    elif ans.events == 0 and facts.lines > 0:
        reasons.append(f"no JSON event: the transcript holds only blank lines ({facts.blank_lines})")
    elif ans.events == 0 and not (allow_empty_answer and ans.finished):
        # nothing printed is no answer, whatever the exit status (a run and a parse of its spool agree); a
        # failed or killed child is told by its exit, said below: that it printed nothing is no news then
        if not (facts.spool or facts.timed_out or (facts.returncode or 0) != 0):
            reasons.append(EMPTY)
    elif ans.unknown is not None:
        reasons.append(ans.unknown)  # the stream is another CLI's: what it did not end is no news
    elif not ans.finished:
        reasons.append(f"stream ended before {ans.awaited}")
    elif not ans.text and ans.error is None and ans.lost is None and not allow_empty_answer:
        reasons.append(NO_ANSWER + (f" ({ans.no_answer})" if ans.no_answer else ""))
    rc = facts.returncode
    # a lost answer or a stream cut short is what the exit left: say the exit too, unless a cause was named
    if rc is not None and rc != 0 and not (facts.spool or facts.timed_out or ans.error):
        reasons.append(exit_reason(rc))
    return "; ".join(r for r in reasons if r) or None
