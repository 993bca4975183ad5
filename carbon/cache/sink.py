"""The cache daemon's sink: stores batches in the MetricCache with flow control."""

from __future__ import annotations

from typing import Any

from carbon.cache.store import MetricCache
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog
from carbon.pipeline import Batch
from carbon.receivers.flow import FlowControl
from carbon.tags import normalize_batch


class CacheSink:
    """Puts batches into the cache; pauses receivers at MAX_CACHE_SIZE.

    With USE_FLOW_CONTROL (default) reaching MAX_CACHE_SIZE pauses every
    receiver and CACHE_SIZE_LOW_WATERMARK resumes them; the batch in hand is
    still stored, so nothing is dropped. Without flow control, points beyond
    MAX_CACHE_SIZE are dropped and counted in ``cache.overflow`` with one
    summary log line per interval.
    """

    def __init__(self, cache: MetricCache, settings: Any, stats: Stats, flow: FlowControl,
                 log: CarbonLog) -> None:
        self.cache = cache
        self.settings = settings
        self.stats = stats
        self.flow = flow
        self.log = log
        self.max_size = float(settings.MAX_CACHE_SIZE)
        self.low_watermark = float(settings.get("CACHE_SIZE_LOW_WATERMARK",
                                                self.max_size * 0.95))
        self.flow_control = bool(settings.USE_FLOW_CONTROL)
        self.overflow_log = IntervalLog(log.msg, "datapoints dropped: MetricCache is full")
        self.bad_names = IntervalLog(log.listener, "invalid metric names")
        self.full = False

    def invalid_name(self, metric: str, error: ValueError) -> None:
        """A name carbon's tag parser rejects: counted and skipped (carbon 1.1.10 stores it
        under the raw name and then fails to tag it)."""
        self.stats.increment("invalidLines")
        self.bad_names.record("invalid tagged metric %r: %s" % (metric, error))

    def put_many(self, batch: Batch) -> None:
        # every name as carbon's cache stores it (TaggedSeries.parse(name).path)
        batch = normalize_batch(batch, self.invalid_name)
        if self.flow_control:
            self.cache.add_batch(batch)
        else:
            accepted = self.cache.add_batch(batch, self.max_size)
            if accepted < len(batch):
                dropped = len(batch) - accepted
                self.stats.increment("cache.overflow", dropped)
                self.overflow_log.record("size=%d" % self.cache.size, dropped)
        if self.cache.size >= self.max_size and not self.full:
            self.full = True
            self.log.msg("MetricCache is full: self.size=%d" % self.cache.size)
            if self.flow_control:
                self.flow.pause("cache")

    def store_internal(self, batch: Batch) -> None:
        """Self-metrics bypass limits: they are few and must not be lost."""
        self.cache.add_batch(batch)

    def check_space(self) -> None:
        """Called by the writer side after draining: resume receivers below the watermark."""
        if self.full and self.cache.size < self.low_watermark:
            self.full = False
            self.log.msg("MetricCache below watermark: self.size=%d" % self.cache.size)
            self.flow.resume("cache")
