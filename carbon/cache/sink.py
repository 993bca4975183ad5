"""The cache daemon's sink: stores batches in the MetricCache with flow control."""

from __future__ import annotations

import time
from dataclasses import dataclass

from carbon.cache.journal import Journal, encode_lines, native_encode_lines
from carbon.cache.store import MetricCache
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog
from carbon.flow import FlowControl
from carbon.pipeline import Batch, Sink
from carbon.tags import normalize_batch


@dataclass(frozen=True)
class CacheSinkConfig:
    """What the CacheSink reads of carbon.conf, built once (``from_settings``); the
    defaults are carbon.config.defaults'. (A SIGHUP's MAX_CACHE_SIZE goes to the running
    sink's ``max_size`` and ``low_watermark``.)"""

    max_size: float  # MAX_CACHE_SIZE
    low_watermark: float  # CACHE_SIZE_LOW_WATERMARK (the loader's 95% of MAX_CACHE_SIZE)
    flow_control: bool  # USE_FLOW_CONTROL

    @classmethod
    def from_settings(cls, settings: Settings) -> CacheSinkConfig:
        max_size = float(settings["MAX_CACHE_SIZE"])
        # derived by the loader (carbon.config.loader), not a carbon.conf default
        low = settings.get("CACHE_SIZE_LOW_WATERMARK")
        return cls(max_size=max_size,
                   low_watermark=float(max_size * 0.95 if low is None else low),
                   flow_control=bool(settings["USE_FLOW_CONTROL"]))


class CacheSink(Sink):
    """Puts batches into the cache; pauses receivers at MAX_CACHE_SIZE.

    With USE_FLOW_CONTROL (default) reaching MAX_CACHE_SIZE pauses every
    receiver and CACHE_SIZE_LOW_WATERMARK resumes them; the batch in hand is
    still stored, so nothing is dropped. Without flow control, points beyond
    MAX_CACHE_SIZE are dropped and counted in ``cache.overflow`` with one
    summary log line per interval.

    With a ``journal`` every batch is appended to it before it enters the cache; a
    journal over CACHE_JOURNAL_MAX_BYTES, or one the disk refuses, pauses the
    receivers (the batch in hand is still cached and kept in the journal's backlog).

    With the C accelerator built it also takes whole plaintext reads (``put_chunk``,
    ``accepts_chunks``): when carbon-cache has no processor before it, a read goes from
    the socket to the journal and the cache in one pass, with no object made a point.
    """

    def __init__(self, cache: MetricCache, config: CacheSinkConfig, stats: Stats,
                 flow: FlowControl, log: CarbonLog, journal: Journal | None = None) -> None:
        self.cache = cache
        self.journal = journal
        self.journal_log = IntervalLog(log.msg, "journal writes failed", samples=1)
        self.journal_paused = False
        self.config = config
        self.stats = stats
        self.flow = flow
        self.log = log
        self.max_size = config.max_size  # both changed by a SIGHUP
        self.low_watermark = config.low_watermark
        self.flow_control = config.flow_control
        self.overflow_log = IntervalLog(log.msg, "datapoints dropped: MetricCache is full")
        self.bad_names = IntervalLog(log.listener, "invalid metric names")
        self.full = False
        self.accepts_chunks = native_encode_lines()

    def invalid_name(self, metric: str, error: ValueError) -> None:
        """A name carbon's tag parser rejects: counted and skipped (carbon 1.1.10 stores it
        under the raw name and then fails to tag it)."""
        self.stats.increment("invalidLines")
        self.bad_names.record("invalid tagged metric %r: %s" % (metric, error))

    def put_many(self, batch: Batch) -> None:
        # every name as carbon's cache stores it (TaggedSeries.parse(name).path)
        batch = normalize_batch(batch, self.invalid_name)
        if not self.flow_control:
            room = self.max_size - self.cache.size
            if room < len(batch):
                dropped = len(batch) - max(int(room), 0)
                batch = batch[:max(int(room), 0)]
                self.stats.increment("cache.overflow", dropped)
                self.overflow_log.record("size=%d" % self.cache.size, dropped)
        if self.journal is not None:
            self._journal(batch)
        self.cache.add_batch(batch)
        self._check_full()

    def _check_full(self) -> None:
        if self.cache.size >= self.max_size and not self.full:
            self.full = True
            self.log.msg("MetricCache is full: self.size=%d" % self.cache.size)
            if self.flow_control:
                self.flow.pause("cache")

    def put_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        """A whole read of complete plaintext lines: journaled and cached as ``put_many``
        would its parsed batch, and its datapoints returned; None (nothing done) when
        the read must be parsed the general way (a bad, overlong or tagged line, or
        points the cache could not hold without flow control)."""
        encoded = encode_lines(chunk, max_length, time.time())
        if encoded is None:
            return None
        payload, count = encoded
        if not count:
            return 0
        if not self.flow_control and self.max_size - self.cache.size < count:
            return None  # put_many drops the overflow and counts it
        if self.journal is not None:
            self._journaled(self.journal.append_encoded(payload, count))
        self.cache.add_encoded(payload, count)
        self._check_full()
        return count

    def _journal(self, batch: Batch) -> None:
        self._journaled(self.journal.append(batch))

    def _journaled(self, written: bool) -> None:
        journal = self.journal
        if not written:
            self.stats.increment("errors")
            self.journal_log.record("%s: %s (receivers paused until it can write)"
                                    % (journal.directory, journal.write_error))
            self._pause_for_journal()
        elif journal.over_limit():
            self._pause_for_journal()

    def _pause_for_journal(self) -> None:
        if not self.journal_paused:
            self.journal_paused = True
            self.log.msg("Journal paused the receivers: %d bytes (CACHE_JOURNAL_MAX_BYTES "
                         "%.0f)%s" % (self.journal.size, self.journal.max_bytes,
                                    ", disk full" if self.journal.backlog else ""))
            self.flow.pause("journal")

    def store_internal(self, batch: Batch) -> None:
        """Self-metrics bypass limits: they are few and must not be lost."""
        if self.journal is not None:
            self._journal(batch)
        self.cache.add_batch(batch)

    def check_journal(self) -> None:
        """Periodic: the journal's tick, then resume receivers it paused once it is
        below 90% of its bound and writing again."""
        journal = self.journal
        journal.tick()
        if self.journal_paused and journal.below_resume_mark():
            self.journal_paused = False
            self.log.msg("Journal resumed the receivers: %d bytes" % journal.size)
            self.flow.resume("journal")

    def check_space(self) -> None:
        """Called by the writer side after draining: resume receivers below the watermark."""
        if self.full and self.cache.size < self.low_watermark:
            self.full = False
            self.log.msg("MetricCache below watermark: self.size=%d" % self.cache.size)
            self.flow.resume("cache")
