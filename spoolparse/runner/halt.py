"""When a batch stops starting tasks: GNU parallel's ``--halt`` conditions, written once.

``WHEN,WHY=N`` or ``WHEN,WHY=X%``: ``WHEN`` is ``soon`` (start nothing new,
let running tasks finish) or ``now`` (also cancel the running ones); ``WHY``
is ``fail`` (tasks not ``ok``) or ``success`` (tasks ``ok``). ``soon`` and
``now`` alone mean ``fail=1``. A percentage is of the tasks that have ended,
and is looked at only once enough have ended that one task is at most that
share (``fail=10%``: from the tenth ended task on), so the first failure of a
long batch does not count as 100 %. Tasks a halt never started get
``skipped`` outcomes; neither they nor ``cancelled`` ones count.

Both the local runner and the Ray driver ask :meth:`Halt.reached`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, cast

from .._regex import regex
from ..errors import UsageError

__all__ = ["Halt", "Tally", "parse_halt"]

_SPEC = regex(r"^(soon|now)(?:,(fail|success)=(\d+(?:\.\d+)?)(%)?)?$")


@dataclass(frozen=True)
class Halt:
    """A parsed ``--halt`` condition (see the module docstring)."""

    when: Literal["soon", "now"]
    why: Literal["fail", "success"] = "fail"
    count: int | None = 1
    percent: float | None = None

    def reached(self, *, ended: int, failed: int, succeeded: int) -> bool:
        """Whether the batch should halt now, given the counts of ended, failed and succeeded tasks."""
        hits = failed if self.why == "fail" else succeeded
        if self.percent is not None:
            return hits > 0 and ended >= math.ceil(100 / self.percent) and hits * 100 >= self.percent * ended
        return self.count is not None and hits >= self.count

    def __str__(self) -> str:
        amount = f"{self.percent:g}%" if self.percent is not None else str(self.count)
        return f"{self.when},{self.why}={amount}"


@dataclass
class Tally:
    """A batch's counts of outcomes, for progress lines and for :meth:`Halt.reached`."""

    done: int = 0  #: every final outcome
    ended: int = 0  #: less the ``skipped`` and ``cancelled`` ones: what halt percentages are of
    succeeded: int = 0
    failed: int = 0

    def add(self, verdict: str, halt: Halt | None) -> bool:
        """Count a final outcome; whether ``halt`` is reached with it."""
        self.done += 1
        if verdict in ("skipped", "cancelled"):
            return False
        self.ended += 1
        if verdict == "ok":
            self.succeeded += 1
        else:
            self.failed += 1
        return halt is not None and halt.reached(ended=self.ended, failed=self.failed, succeeded=self.succeeded)


def parse_halt(spec: str | Halt | None) -> Halt | None:
    """``None``, ``"soon"``, ``"now,fail=1"``, ``"soon,fail=10%"``, ``"now,success=1"`` → a :class:`Halt`.

    Anything else is a :class:`~spoolparse.UsageError` naming the accepted forms.
    """
    if spec is None or isinstance(spec, Halt):
        return spec
    m = _SPEC.match(spec.strip().lower()) if isinstance(spec, str) else None
    if m is None:
        raise UsageError(
            f"halt must be soon or now, optionally with ,fail=N / ,fail=X% / ,success=N (as in GNU parallel), "
            f"not {spec!r}"
        )
    when = cast(Literal["soon", "now"], m.group(1))
    why = cast(Literal["fail", "success"], m.group(2) or "fail")
    amount, pct = m.group(3), m.group(4)
    if amount is None:
        return Halt(when)
    value = float(amount)
    if pct:
        if not 0 < value <= 100:
            raise UsageError(f"halt percentage must be above 0 and at most 100, not {amount}%")
        return Halt(when, why, None, value)
    if value < 1 or value != int(value):
        raise UsageError(f"halt count must be a whole number of at least 1, not {amount}")
    return Halt(when, why, int(value))
