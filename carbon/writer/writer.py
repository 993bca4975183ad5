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
from carbon.writer.creator import DEFERRED, EXISTED, Creator
from carbon.writer.ratelimit import make_limiter

INF = float("inf")
KNOWN_FILES = 100_000


class Writer:
    """Writes one metric at a time, chosen by the write strategy.

    MAX_UPDATES_PER_SECOND and MAX_CREATES_PER_MINUTE are rate-limiter plugins.
    Unlike carbon 1.1.10, a create that has to wait for a token keeps its points
    in the cache instead of dropping them. Files are created by a ``Creator`` thread
    in batches while the writer goes on with other metrics.
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
        # Files are looked for and made on the creator's thread, a batch at a time, so a
        # write never waits for a create; ``known`` metrics have files (no stat needed:
        # a file deleted since shows as FileNotFoundError on write).
        self.creator = Creator(database, schemas, settings, log, self._may_create)
        self.known: set[str] = set()

    # -- one step -------------------------------------------------------
    def _take(self) -> tuple[str | None, list, bool]:
        """(metric, points, False) for the next write, or (None, [], busy) where busy says
        whether something other than a write was done.

        A metric back from the creator comes first; others come from the strategy,
        skipping metrics other threads hold or the creator has. A metric whose file is
        not known to exist goes to the creator, and the choice goes on.
        """
        creator = self.creator
        cache = self.cache
        with self.choose_lock:
            handled = creator.take_ready()
            if handled is not None:
                metric, outcome = handled
                if outcome is DEFERRED:
                    self.stats.increment("deferredCreates")
                    self.throttled_streak += 1
                    return None, [], True
                if outcome is not None and outcome is not EXISTED:
                    self._create_failed(metric, outcome)
                    return None, [], True
                if outcome is None:
                    self._created(metric)
                self._known(metric)
                self.in_flight.add(metric)
                return metric, cache.pop_for_write(metric), False
            did = False
            skipped = 0
            known, busy, in_flight, data = self.known, creator.busy, self.in_flight, cache.data
            while skipped <= len(in_flight) + len(busy):
                if len(data) <= len(busy):
                    break  # every metric left is with the creator
                metric = self.strategy.choose()
                if metric is None:
                    break
                if metric in in_flight or metric in busy:
                    skipped += 1
                    continue
                if metric not in known:
                    creator.submit(metric)
                    did = True
                    continue
                self.throttled_streak = 0
                in_flight.add(metric)
                return metric, cache.pop_for_write(metric), False
            return None, [], did

    def _known(self, metric: str) -> None:
        """Remember that ``metric``'s file exists (bounded: forgotten all at once)."""
        if len(self.known) >= KNOWN_FILES:
            self.known.clear()
        self.known.add(metric)

    def _may_create(self) -> bool:
        return self.create_limiter.take(blocking=False)

    def _created(self, metric: str) -> None:
        self.throttled_streak = 0
        self.stats.increment("creates")
        if self.tag_feed is not None:
            self.tag_feed.created(metric)

    def _create_failed(self, metric: str, error: Exception) -> None:
        """As carbon: the points of a metric whose file cannot be created are dropped."""
        self.cache.pop(metric)
        self.stats.increment("errors")
        self.errors.record("Error creating %s: %s" % (metric, error))

    def write_one(self) -> bool:
        """Write the next metric. Returns False when there was nothing to do."""
        creator = self.creator
        if not creator.ready:
            if not self.cache:
                return False
            if len(self.cache) <= len(creator.busy):
                creator.wait(0.05)  # only creates in progress: wait for one
                return True
        # Wait for the update token before taking a metric, so points waiting on the rate
        # limit stay in the cache (and visible to carbonlink) rather than in a thread.
        waited = 0.0
        if not getattr(self.update_limiter, "unlimited", False):
            started = time.time()
            self.update_limiter.take()
            waited = time.time() - started
        metric, points, busy = self._take()
        if metric is None:
            if self.throttled_streak >= max(len(self.cache), 1):
                # every metric waits for a create token (they keep their points)
                time.sleep(0.05)
                self.throttled_streak = 0
            return busy
        try:
            return self._write(metric, points, waited)
        finally:
            self.cache.written(metric)
            self.in_flight.discard(metric)

    def _write(self, metric: str, points: list, waited: float) -> bool:
        if not points:
            return True
        try:
            started = time.time()
            self.database.write(metric, points)
            took = time.time() - started
        except FileNotFoundError:
            # deleted since we knew it: keep the points, the creator makes it again
            self.known.discard(metric)
            self.cache.restore(metric, points)
            return True
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
        self.creator.start()
        for number in range(self.thread_count):
            thread = threading.Thread(target=self.run, name="carbon-writer-%d" % number,
                                      daemon=True)
            self.threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the writer threads and the creator (pending creates stay pending)."""
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout)
        self.creator.stop(timeout)

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
        self.creator.start()
        try:
            while (self.cache or self.creator.ready) and time.monotonic() < deadline:
                if not self.alive():
                    self.write_one()
                else:
                    time.sleep(0.02)
        finally:
            self.creator.stop(5.0)
        return not self.cache
