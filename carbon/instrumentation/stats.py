"""Per-interval counters and samples that become carbon.<kind>.<host>-<instance>.* metrics."""

from __future__ import annotations

from collections import defaultdict


class Stats:
    """Counters and sample lists for one reporting interval.

    ``increment`` and ``append`` are cheap enough to call once per batch on the
    data path. ``snapshot_and_reset`` hands the interval's values to the reporter.
    Counters named in ``keep`` survive a reset (the reference keeps some totals).
    """

    def __init__(self) -> None:
        self.counters: defaultdict[str, float] = defaultdict(float)
        self.samples: defaultdict[str, list[float]] = defaultdict(list)

    def increment(self, name: str, amount: float = 1) -> None:
        self.counters[name] += amount

    def append(self, name: str, value: float) -> None:
        self.samples[name].append(value)

    def max(self, name: str, value: float) -> None:
        """Keep the interval's largest ``value`` (the reference's instrumentation.max)."""
        if value > self.counters.get(name, float("-inf")):
            self.counters[name] = value

    def get(self, name: str) -> float:
        return self.counters.get(name, 0)

    def snapshot_and_reset(self) -> tuple[dict[str, float], dict[str, list[float]]]:
        counters, samples = dict(self.counters), dict(self.samples)
        self.counters = defaultdict(float)
        self.samples = defaultdict(list)
        return counters, samples
