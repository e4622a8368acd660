"""Bounded summaries of a stream of values: quantiles within 1%, and the N largest.

:class:`Quantiles` keeps a count per logarithmic bucket (DDSketch's layout):
a value ``x`` falls in bucket ``ceil(log(x) / log(gamma))`` with ``gamma =
(1 + a) / (1 - a)``, and a bucket is reported as the value that is within
``a`` (1%) of everything in it. Values are clamped to ``[LOWEST, HIGHEST]``,
so there are at most a few thousand buckets whatever the stream; ``min``,
``max`` and the mean are exact.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Generic, TypeVar

from ..types import ReportBin, ReportDistribution

__all__ = ["Quantiles", "Largest", "ACCURACY"]

#: Relative accuracy of every quantile :class:`Quantiles` gives.
ACCURACY = 0.01
_GAMMA = (1 + ACCURACY) / (1 - ACCURACY)
_LOG_GAMMA = math.log(_GAMMA)
#: Values below ``LOWEST`` count as ``LOWEST`` (and are reported as the exact ``min`` where it is one of them).
LOWEST = 1e-6
#: Values above ``HIGHEST`` count as ``HIGHEST``: 2**50 (a PiB of memory, 35 years of seconds).
HIGHEST = float(1 << 50)
#: Most buckets: from LOWEST to HIGHEST at 2% apart.
MAX_BUCKETS = math.ceil(math.log(HIGHEST / LOWEST) / _LOG_GAMMA) + 2


def _index(x: float) -> int:
    return math.ceil(math.log(min(max(x, LOWEST), HIGHEST)) / _LOG_GAMMA)


def _value(k: int) -> float:
    """The value within ``ACCURACY`` of every value in bucket ``k`` (``(gamma**(k-1), gamma**k]``)."""
    return 2 * _GAMMA**k / (_GAMMA + 1)


class Quantiles:
    """Counts of non-negative values in logarithmic buckets: quantiles within 1%, in bounded memory."""

    __slots__ = ("buckets", "count", "high", "low", "total", "zeros")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.zeros = 0  # values of 0 (a task that never ran long enough to be timed)
        self.count = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, x: float) -> None:
        if not math.isfinite(x) or x < 0:
            return
        self.count += 1
        self.total += x
        self.low = min(self.low, x)
        self.high = max(self.high, x)
        if x == 0:
            self.zeros += 1
            return
        k = _index(x)
        self.buckets[k] = self.buckets.get(k, 0) + 1

    def quantile(self, q: float) -> float | None:
        """The nearest-rank ``q`` quantile (the value at rank ``ceil(q * count)``), within 1%."""
        if self.count == 0:
            return None
        rank = max(1, math.ceil(q * self.count))
        if rank <= self.zeros:
            return 0.0
        seen = self.zeros
        for k in sorted(self.buckets):
            seen += self.buckets[k]
            if seen >= rank:
                return min(max(_value(k), self.low), self.high)
        return self.high

    def histogram(self, bins: int = 20) -> list[ReportBin]:
        """About ``bins`` bars from ``min`` to ``max``: even widths, or even ratios when the values span
        more than a factor of 20. Each bucket's count goes to the bar its value falls in."""
        if self.count == 0:
            return []
        lo, hi = self.low, self.high
        if hi <= lo:
            return [{"lo": lo, "hi": hi, "count": self.count}]
        # even ratios (in logarithms, so no ratio overflows) when the values span more than a factor of 20
        ratio = lo >= LOWEST and hi / lo > 20
        a, b = (math.log(lo), math.log(hi)) if ratio else (lo, hi)
        edges = [math.exp(a + (b - a) * i / bins) if ratio else a + (b - a) * i / bins for i in range(bins)] + [hi]
        edges[0] = lo
        counts = [0] * bins
        counts[0] += self.zeros
        for k, n in self.buckets.items():
            v = min(max(_value(k), lo), hi)
            x = math.log(v) if ratio else v
            counts[min(max(int((x - a) / (b - a) * bins), 0), bins - 1)] += n
        return [{"lo": edges[i], "hi": edges[i + 1], "count": counts[i]} for i in range(bins)]

    def summary(self, bins: int = 20) -> ReportDistribution:
        empty = self.count == 0
        return {
            "count": self.count,
            "min": None if empty else self.low,
            "p50": self.quantile(0.5),
            "p90": self.quantile(0.9),
            "p99": self.quantile(0.99),
            "max": None if empty else self.high,
            "mean": None if empty else self.total / self.count,
            "histogram": self.histogram(bins),
        }


T = TypeVar("T")


class Largest(Generic[T]):
    """The ``n`` items with the largest keys seen so far (ties: the first seen stays)."""

    __slots__ = ("_heap", "_key", "_seq", "n")

    def __init__(self, n: int, key: Callable[[T], float]) -> None:
        self.n = n
        self._key = key
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()

    def would_keep(self, k: float) -> bool:
        """Whether an item of key ``k`` would be kept (so a caller builds it only then)."""
        return len(self._heap) < self.n or k > self._heap[0][0]

    def add(self, item: T) -> None:
        k = self._key(item)
        entry = (k, -next(self._seq), item)
        if len(self._heap) < self.n:
            heapq.heappush(self._heap, entry)
        elif k > self._heap[0][0]:
            heapq.heapreplace(self._heap, entry)

    def items(self) -> list[T]:
        """Largest first."""
        return [item for _, _, item in sorted(self._heap, key=lambda e: (e[0], e[1]), reverse=True)]
