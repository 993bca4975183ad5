"""The writer: drains the cache into the storage backend on its own thread."""

from __future__ import annotations

import threading
import time
from typing import Any

from carbon.cache.store import MetricCache
from carbon.cache.strategies import Strategy
from carbon.config.schemas import SchemaFiles
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog
from carbon.writer.ratelimit import make_limiter

INF = float("inf")


class Writer:
    """Writes one metric at a time, chosen by the write strategy.

    MAX_UPDATES_PER_SECOND and MAX_CREATES_PER_MINUTE are rate-limiter plugins.
    Unlike carbon 1.1.10, a create that has to wait for a token keeps its points
    in the cache instead of dropping them.
    """

    def __init__(self, cache: MetricCache, strategy: Strategy, database: Any,
                 schemas: SchemaFiles, settings: Any, stats: Stats, log: CarbonLog) -> None:
        self.cache = cache
        self.strategy = strategy
        self.database = database
        self.schemas = schemas
        self.settings = settings
        self.stats = stats
        self.log = log
        limiter = settings.get("RATE_LIMITER", "token_bucket")
        self.update_limiter = make_limiter(limiter, float(settings.MAX_UPDATES_PER_SECOND))
        per_minute = float(settings.MAX_CREATES_PER_MINUTE)
        self.create_limiter = make_limiter(limiter, per_minute / 60.0 if per_minute != INF
                                           else INF, capacity=per_minute)
        self.errors = IntervalLog(log.msg, "write errors")
        self.stop_event = threading.Event()
        self.idle_event = threading.Event()
        self.throttled_streak = 0
        self.tag_feed: Any = None
        # Several threads overlap file-system calls (creates above all); one metric is
        # never written by two threads at once.
        self.thread_count = max(1, int(settings.get("WRITER_THREADS", 1)))
        self.choose_lock = threading.Lock()
        self.in_flight: set[str] = set()
        self.threads: list[threading.Thread] = []

    # -- one step -------------------------------------------------------
    def _take(self) -> tuple[str | None, list]:
        """Choose a metric no other writer thread holds, and pop its points."""
        with self.choose_lock:
            for _attempt in range(max(len(self.in_flight) + 1, 1)):
                metric = self.strategy.choose()
                if metric is None:
                    return None, []
                if metric not in self.in_flight:
                    self.in_flight.add(metric)
                    return metric, self.cache.pop_for_write(metric)
            return None, []

    def write_one(self) -> bool:
        """Write the next metric. Returns False when there was nothing to write."""
        if not self.cache:
            return False
        # Wait for the update token before taking a metric, so points waiting on the rate
        # limit stay in the cache (and visible to carbonlink) rather than in a thread.
        started = time.time()
        self.update_limiter.take()
        waited = time.time() - started
        metric, points = self._take()
        if metric is None:
            return False
        try:
            return self._write(metric, points, waited)
        finally:
            self.cache.written(metric)
            self.in_flight.discard(metric)

    def _write(self, metric: str, points: list, waited: float) -> bool:
        if not points:
            return True
        if not self.database.exists(metric):
            if not self.create_limiter.take(blocking=False):
                self.cache.restore(metric, points)
                self.stats.increment("deferredCreates")
                self.throttled_streak += 1
                if self.throttled_streak >= max(len(self.cache), 1):
                    time.sleep(0.05)
                    self.throttled_streak = 0
                return True
            if not self._create(metric):
                return True
        self.throttled_streak = 0
        try:
            started = time.time()
            self.database.write(metric, points)
            took = time.time() - started
        except Exception as exc:  # a broken file must not stop the writer
            self.stats.increment("errors")
            self.errors.record("Error writing to %s: %s" % (metric, exc))
            return True
        if self.tag_feed is not None:
            self.tag_feed.updated(metric)
        self.stats.increment("committedPoints", len(points))
        self.stats.append("updateTimes", took)
        if self.settings.LOG_UPDATES:
            if waited > 0.001:
                self.log.updates("wrote %d datapoints for %s in %.5f seconds after waiting "
                                 "%.5f seconds" % (len(points), metric, took, waited))
            else:
                self.log.updates("wrote %d datapoints for %s in %.5f seconds"
                                 % (len(points), metric, took))
        return True

    def _create(self, metric: str) -> bool:
        storage, aggregation = self.schemas.for_metric(metric)
        xff, method = aggregation.value
        if self.settings.LOG_CREATES:
            self.log.creates("new metric %s matched schema %s" % (metric, storage.name))
            self.log.creates("new metric %s matched aggregation schema %s"
                             % (metric, aggregation.name))
            self.log.creates("creating database metric %s (archive=%s xff=%s agg=%s)"
                             % (metric, storage.value, xff, method))
        try:
            self.database.create(metric, storage.value, xff, method)
        except Exception as exc:
            self.stats.increment("errors")
            self.errors.record("Error creating %s: %s" % (metric, exc))
            return False
        self.stats.increment("creates")
        if self.tag_feed is not None:
            self.tag_feed.created(metric)
        return True

    # -- thread ---------------------------------------------------------
    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                busy = self.write_one()
            except Exception as exc:
                self.errors.record("writer: %s" % exc)
                busy = False
            if not busy:
                self.idle_event.set()
                self.stop_event.wait(0.05)
            else:
                self.idle_event.clear()

    def start(self) -> None:
        for number in range(self.thread_count):
            thread = threading.Thread(target=self.run, name="carbon-writer-%d" % number,
                                      daemon=True)
            self.threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout)

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def drain(self, timeout: float = INF) -> bool:
        """Speed up to the shutdown rate and block until the cache is empty."""
        rate = float(self.settings.get("MAX_UPDATES_PER_SECOND_ON_SHUTDOWN")
                     or self.settings.MAX_UPDATES_PER_SECOND)
        self.update_limiter.set_rate(rate, rate)
        self.create_limiter.set_rate(rate, rate)
        self.log.msg("Carbon shutting down.  Changed the update rate to: %s" % rate)
        deadline = time.monotonic() + timeout
        while self.cache and time.monotonic() < deadline:
            if not self.alive():
                self.write_one()
            else:
                time.sleep(0.02)
        return not self.cache
