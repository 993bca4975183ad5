"""Write strategies: which metric the writer drains next.

Each strategy works from a snapshot of the cache taken once per pass, so a pick
costs amortised O(1) (naive, bucketmax) or O(log n) (sorted, timesorted, max)
instead of carbon's O(n) scan per pick for ``max``. Metrics that arrive during
a pass are picked up by the next pass; every metric is visited once per pass.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from operator import neg
from typing import Container

from carbon.cache.store import MetricCache
from carbon.config.settings import Settings
from carbon.logs import CarbonLog
from carbon.plugins import WRITE_STRATEGIES


@dataclass(frozen=True)
class StrategyConfig:
    """What a write strategy reads of carbon.conf, built once (``from_settings``); the
    defaults are carbon.config.defaults'."""

    log_sorts: bool  # LOG_CACHE_QUEUE_SORTS (the strategies with ``logs_sorts``)
    min_timestamp_lag: float  # MIN_TIMESTAMP_LAG (timesorted)

    @classmethod
    def from_settings(cls, settings: Settings) -> StrategyConfig:
        return cls(log_sorts=bool(settings["LOG_CACHE_QUEUE_SORTS"]),
                   min_timestamp_lag=float(settings["MIN_TIMESTAMP_LAG"]))


class Strategy:
    """Base: ``choose()`` returns the next metric to write, or None if the cache is empty.

    Strategies with ``logs_sorts`` (sorted, timesorted: the ones carbon 1.1.10 logs for)
    write carbon's two LOG_CACHE_QUEUE_SORTS lines: "Sorted N cache queues in S seconds"
    when a pass of N metrics starts, and "Queue consumed in S seconds" (since that pass
    started) right before the next pass that has metrics is sorted.
    """

    logs_sorts = False

    def __init__(self, cache: MetricCache, config: StrategyConfig,
                 log: CarbonLog | None = None) -> None:
        self.cache = cache
        self.config = config
        self.log = log
        self.queue: list[str] = []
        self.passes = 0
        self.pass_started = 0.0
        self.pass_size = 0
        self.pass_began = 0.0  # time.monotonic() of the last refill (empty or not)
        # A new pass begins at least this long after the last one began (the writer
        # sets it from WRITER_MIN_PASS_SECONDS); until then ``choose`` returns None.
        self.min_pass = 0.0
        # Metrics the writer cannot take now (with the creator, or being written by
        # another writer thread): left out of a pass, so a pass holds what it will write.
        self.skip: Container[str] = ()

    def snapshot(self) -> list[str]:
        """Metric names in the order this pass will write them (last is next)."""
        raise NotImplementedError

    def too_soon(self) -> bool:
        """Whether a new pass has to wait (``min_pass``)."""
        return bool(self.min_pass) and time.monotonic() - self.pass_began < self.min_pass

    def _refill(self) -> None:
        self.pass_began = time.monotonic()
        started = time.time()
        queue = self.snapshot()
        skip = self.skip
        self.queue = [metric for metric in queue if metric not in skip] if skip else queue
        self.passes += 1
        if not self.queue:
            return
        log = self.log if self.logs_sorts and self.config.log_sorts else None
        if log is not None and self.pass_size:
            log.msg("Queue consumed in %.6f seconds" % (started - self.pass_started))
        self.pass_started, self.pass_size = started, len(self.queue)
        if log is not None:
            log.msg("Sorted %d cache queues in %.6f seconds"
                    % (len(self.queue), time.time() - started))

    def choose(self) -> str | None:
        data, skip = self.cache.data, self.skip  # dict lookups, no method call a pick
        for _attempt in range(2):
            queue = self.queue
            while queue:
                metric = queue.pop()
                if metric in data and metric not in skip:
                    return metric
            if not data or self.too_soon():
                return None
            self._refill()
        return None

    def choose_many(self, limit: int) -> list[str]:
        """Up to ``limit`` metrics, in the order ``choose`` gives them, none twice: a
        new pass is begun only when nothing is left of this one. The writer takes a
        batch at a time this way. Strategies that override ``choose`` (no ``queue``)
        get it from their ``choose``, one pick at a time."""
        if type(self).choose is not Strategy.choose:
            return self._choose_each(limit)
        data, skip = self.cache.data, self.skip
        picked: list[str] = []
        for _attempt in range(2):
            queue = self.queue
            while queue and len(picked) < limit:
                cut = max(0, len(queue) - (limit - len(picked)))
                batch = queue[cut:]
                del queue[cut:]
                batch.reverse()  # the queue's last is next
                picked.extend([metric for metric in batch
                               if metric in data and metric not in skip] if skip else
                              [metric for metric in batch if metric in data])
            if picked or not data or self.too_soon():
                return picked
            self._refill()
        return picked

    def _choose_each(self, limit: int) -> list[str]:
        """``choose_many`` by ``choose``. A metric given again (a new pass began) ends
        the answer: it is in it already, and its points are taken when it is written."""
        picked: list[str] = []
        seen: set[str] = set()
        while len(picked) < limit:
            metric = self.choose()
            if metric is None or metric in seen:
                break
            picked.append(metric)
            seen.add(metric)
        return picked


@WRITE_STRATEGIES.register("naive")
class NaiveStrategy(Strategy):
    """Metrics in arrival order, no sorting: amortised O(1) a pick."""

    def snapshot(self) -> list[str]:
        names = self.cache.names()
        names.reverse()
        return names


@WRITE_STRATEGIES.register("sorted")
class SortedStrategy(Strategy):
    """The metrics with most pending points first (carbon's default)."""

    logs_sorts = True

    def snapshot(self) -> list[str]:
        cache = self.cache
        with cache.lock:
            names = list(cache.data)
            sizes = list(map(len, cache.data.values()))
        # a stable sort by pending points (ties keep arrival order), keyed at C level
        order = sorted(range(len(names)), key=sizes.__getitem__)
        return list(map(names.__getitem__, order))


@WRITE_STRATEGIES.register("timesorted")
class TimeSortedStrategy(Strategy):
    """Metrics whose oldest pending point is oldest first; honours MIN_TIMESTAMP_LAG."""

    logs_sorts = True

    def snapshot(self) -> list[str]:
        oldest = self.cache.oldest()
        lag = self.config.min_timestamp_lag
        if lag:
            now = time.time()
            oldest = [item for item in oldest if now - item[1] > lag]
        oldest.sort(key=lambda item: item[1], reverse=True)
        return [metric for metric, _ in oldest]


@WRITE_STRATEGIES.register("max")
class MaxStrategy(Strategy):
    """The metric with the most pending points, from a heap: O(log n) a pick.

    The heap is rebuilt once it has been consumed, so a pick reflects counts at
    the start of the pass (carbon rescans every metric on every pick instead). Ties go
    to the metric that arrived first, as carbon's ``max`` over the cache gives them.
    """

    def __init__(self, cache: MetricCache, config: StrategyConfig,
                 log: CarbonLog | None = None) -> None:
        super().__init__(cache, config, log)
        self.heap: list[tuple[int, int]] = []  # (-pending points, index in ``names``)
        self.names: list[str] = []

    def snapshot(self) -> list[str]:
        return []

    def choose(self) -> str | None:
        cache = self.cache
        data, heappop, skip = cache.data, heapq.heappop, self.skip
        for _attempt in range(2):
            heap, names = self.heap, self.names
            while heap:
                metric = names[heappop(heap)[1]]
                if metric in data and metric not in skip:
                    return metric
            if not data or self.too_soon():
                return None
            with cache.lock:
                if skip:  # a pass holds only what it can write (as Strategy._refill)
                    self.names = [metric for metric in cache.data if metric not in skip]
                    sizes = [len(data[metric]) for metric in self.names]
                else:
                    self.names = list(cache.data)
                    sizes = list(map(len, cache.data.values()))
            # integer pairs compare at C speed; the points count is len >> 4 but the
            # byte length orders metrics the same way
            self.heap = list(zip(map(neg, sizes), range(len(sizes)), strict=True))
            heapq.heapify(self.heap)
            self.passes += 1
            self.pass_began = time.monotonic()
        return None


@WRITE_STRATEGIES.register("bucketmax")
class BucketMaxStrategy(Strategy):
    """Like max, by power-of-two buckets of pending points: amortised O(1) a pick."""

    def snapshot(self) -> list[str]:
        buckets: dict[int, list[str]] = {}
        for metric, count in self.cache.counts():
            buckets.setdefault(count.bit_length(), []).append(metric)
        order: list[str] = []
        for size in sorted(buckets):
            order.extend(buckets[size])
        return order


def make_strategy(name: str, cache: MetricCache, config: StrategyConfig,
                  log: CarbonLog | None = None) -> Strategy:
    """The strategy registered as ``name`` (built-ins or entry points), called as
    ``(cache, config, log)``."""
    strategy: Strategy = WRITE_STRATEGIES.get(name)(cache, config, log)
    return strategy
