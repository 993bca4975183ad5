"""Per-interval counters and samples that become carbon.<kind>.<host>-<instance>.* metrics."""

from __future__ import annotations

from collections import defaultdict


class Sample:
    """The interval's values of one sample: how many and their total (the reporter needs
    only their count and mean, so the values themselves are not kept)."""

    __slots__ = ("count", "total")

    def __init__(self, count: int = 0, total: float = 0.0) -> None:
        self.count = count
        self.total = total

    def __len__(self) -> int:
        return self.count

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


class Stats:
    """Counters and samples for one reporting interval.

    ``increment`` and ``append`` are cheap enough to call once per batch on the
    data path; a sample keeps a count and a total, so its memory does not grow with the
    updates of an interval (carbon keeps a list of every update's time).
    ``snapshot_and_reset`` hands the interval's values to the reporter.
    """

    def __init__(self) -> None:
        self.counters: defaultdict[str, float] = defaultdict(float)
        self.samples: defaultdict[str, Sample] = defaultdict(Sample)

    def increment(self, name: str, amount: float = 1) -> None:
        self.counters[name] += amount

    def append(self, name: str, value: float) -> None:
        sample = self.samples[name]
        sample.count += 1
        sample.total += value

    def append_many(self, name: str, values: list[float]) -> None:
        """``append`` of each value, at once."""
        sample = self.samples[name]
        sample.count += len(values)
        sample.total += sum(values)

    def max(self, name: str, value: float) -> None:
        """Keep the interval's largest ``value`` (the reference's instrumentation.max)."""
        if value > self.counters.get(name, float("-inf")):
            self.counters[name] = value

    def get(self, name: str) -> float:
        return self.counters.get(name, 0)

    def snapshot_and_reset(self) -> tuple[dict[str, float], dict[str, Sample]]:
        counters, samples = dict(self.counters), dict(self.samples)
        self.counters = defaultdict(float)
        self.samples = defaultdict(Sample)
        return counters, samples
