"""Aggregation methods: the reference's AGGREGATION_METHODS as streaming accumulators.

carbon 1.1.10 offers sum, avg, min, max, count and the percentiles p50, p75,
p80, p90, p95, p99 and p999. It keeps every value of an interval in a list and
applies a function to the list. Here sum/avg/min/max/count keep O(1) running
state instead; the results are bit-for-bit those of the reference on the same CPython:

* sum is what builtin ``sum`` gives: sequential float addition from 0.0 before
  Python 3.12, Neumaier-compensated addition from 3.12 (streamed: the running
  correction is kept); avg is that sum divided by the count;
* min/max replace the running value only when a new value compares strictly
  smaller/larger, exactly like builtin ``min``/``max`` (so NaN handling matches);
* percentile(f) sorts the values, takes rank = f * (n - 1) and interpolates
  linearly between the two closest ranks with the reference's formula
  ``v[lo] * (hi - rank) + v[hi] * (rank - lo)``.

Every accumulator counts its values in ``n`` (the bufferedDatapoints gauge) and
carries a ``dirty`` flag: set by ``add``, cleared by the buffer once emitted.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable

# Before 3.12 builtin ``sum`` of floats is plain sequential addition (3.12 compensates).
_SEQUENTIAL_SUM = sys.version_info < (3, 12)


class SumAccumulator:
    """Running count and the float sum builtin ``sum`` gives for the same values in order.

    Before Python 3.12 that is sequential addition. From 3.12 ``sum`` compensates
    (Neumaier): a running total and a running correction, added once at the end when it
    is finite. Both are kept here, so a streamed sum equals the reference's
    ``sum(values)`` on the Python it would run on.
    """

    __slots__ = ("n", "total", "comp", "dirty")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0
        self.comp = 0.0
        self.dirty = False

    def add(self, value: float) -> None:
        self.n += 1
        self.dirty = True
        if _SEQUENTIAL_SUM:
            self.total += value
            return
        total = self.total
        t = total + value
        if abs(total) >= abs(value):
            self.comp += (total - t) + value
        else:
            self.comp += (value - t) + total
        self.total = t

    def add_many(self, values: list[float]) -> None:
        """``add`` each value in order (the same float result)."""
        if not values:
            return
        self.n += len(values)
        self.dirty = True
        if _SEQUENTIAL_SUM:
            self.total = sum(values, self.total)
            return
        total, comp = self.total, self.comp
        for value in values:
            t = total + value
            if abs(total) >= abs(value):
                comp += (total - t) + value
            else:
                comp += (value - t) + total
            total = t
        self.total, self.comp = total, comp

    def value(self) -> float:
        comp = self.comp
        if comp and math.isfinite(comp):
            return self.total + comp
        return self.total


class AvgAccumulator(SumAccumulator):
    """Sum divided by count."""

    __slots__ = ()

    def value(self) -> float:
        return SumAccumulator.value(self) / self.n


class CountAccumulator(SumAccumulator):
    """Number of values received (the sum is kept but unused)."""

    __slots__ = ()

    def add(self, value: float) -> None:
        self.n += 1
        self.dirty = True

    def add_many(self, values: list[float]) -> None:
        if values:
            self.n += len(values)
            self.dirty = True

    def value(self) -> float:
        return float(self.n)


class MinAccumulator:
    """Smallest value, first-wins on ties and NaN like builtin ``min``."""

    __slots__ = ("n", "best", "dirty")
    pick = min  # what add_many keeps of the running value and the new ones

    def __init__(self) -> None:
        self.n = 0
        self.best = 0.0
        self.dirty = False

    def add(self, value: float) -> None:
        if self.n == 0 or value < self.best:
            self.best = value
        self.n += 1
        self.dirty = True

    def add_many(self, values: list[float]) -> None:
        """``add`` each value in order (builtin ``min`` and ``max`` replace only on strictly
        smaller or larger too)."""
        if not values:
            return
        pick = self.pick
        self.best = pick(values) if self.n == 0 else pick([self.best, *values])
        self.n += len(values)
        self.dirty = True

    def value(self) -> float:
        return self.best


class MaxAccumulator(MinAccumulator):
    """Largest value, first-wins on ties and NaN like builtin ``max``."""

    __slots__ = ()
    pick = max

    def add(self, value: float) -> None:
        if self.n == 0 or value > self.best:
            self.best = value
        self.n += 1
        self.dirty = True


def percentile_of(values: Iterable[float], factor: float) -> float:
    """The reference's percentile: linear interpolation between closest ranks."""
    ordered = sorted(values)
    rank = factor * (len(ordered) - 1)
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return ordered[lo]
    return ordered[lo] * (hi - rank) + ordered[hi] * (rank - lo)


class PercentileAccumulator:
    """Keeps every value; the percentile is computed on demand."""

    __slots__ = ("values", "factor", "dirty")

    def __init__(self, factor: float) -> None:
        self.values: list[float] = []
        self.factor = factor
        self.dirty = False

    @property
    def n(self) -> int:
        return len(self.values)

    def add(self, value: float) -> None:
        self.values.append(value)
        self.dirty = True

    def add_many(self, values: list[float]) -> None:
        if values:
            self.values.extend(values)
            self.dirty = True

    def value(self) -> float:
        return percentile_of(self.values, self.factor)


Accumulator = (SumAccumulator | MinAccumulator | PercentileAccumulator)


class AggregationMethod:
    """A named method: ``new()`` makes an empty accumulator for one interval."""

    __slots__ = ("name", "new")

    def __init__(self, name: str, new: Callable[[], Accumulator]) -> None:
        self.name = name
        self.new = new

    def compute(self, values: Iterable[float]) -> float | None:
        """Aggregate a whole sequence at once (None when it is empty)."""
        acc = self.new()
        for value in values:
            acc.add(value)
        return acc.value() if acc.n else None

    def __repr__(self) -> str:
        return "AggregationMethod(%r)" % self.name


def _percentile(factor: float) -> Callable[[], PercentileAccumulator]:
    return lambda: PercentileAccumulator(factor)


PERCENTILES: dict[str, float] = {
    "p50": 0.50, "p75": 0.75, "p80": 0.80, "p90": 0.90,
    "p95": 0.95, "p99": 0.99, "p999": 0.999,
}

AGGREGATION_METHODS: dict[str, AggregationMethod] = {
    "sum": AggregationMethod("sum", SumAccumulator),
    "avg": AggregationMethod("avg", AvgAccumulator),
    "min": AggregationMethod("min", MinAccumulator),
    "max": AggregationMethod("max", MaxAccumulator),
    **{name: AggregationMethod(name, _percentile(f)) for name, f in PERCENTILES.items()},
    "count": AggregationMethod("count", CountAccumulator),
}
