"""Feed tagged series to graphite's TagDB (``GRAPHITE_URL/tags/tagMultiSeries``), like carbon.

New series are queued when created and known ones every TAG_UPDATE_INTERVAL-th
update; a background thread posts them in batches of TAG_BATCH_SIZE. The queue
is bounded (TAG_QUEUE_SIZE): past it, tag updates (not datapoints) are skipped
and counted.

A batch the TagDB did not take (render app down, an error answer) goes to a retry set
of at most TAG_RETRY_QUEUE_SIZE series, posted again after a back-off that starts at
one second and doubles up to TAG_RETRY_INTERVAL; while series wait there, new batches
join them instead of failing one by one. Once a retry succeeds the whole set is sent
at once, so every series whose tagging failed while the render app was down is tagged
within TAG_RETRY_INTERVAL of its coming up. A series that finds the set full is not
retried (counted in ``tagRetryDropped``, one log line an interval); it is tagged again
on its next create or TAG_UPDATE_INTERVAL-th update, as carbon does with every failed
series.
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog


@dataclass(frozen=True)
class TagFeedConfig:
    """What the TagFeed reads of carbon.conf, built once (``from_settings``); the
    defaults are carbon.config.defaults'."""

    url: str  # GRAPHITE_URL + /tags/tagMultiSeries
    skip_untagged: bool  # SKIP_TAGS_FOR_NONTAGGED
    update_interval: int  # TAG_UPDATE_INTERVAL
    batch_size: int  # TAG_BATCH_SIZE
    queue_size: int  # TAG_QUEUE_SIZE
    retry_size: int  # TAG_RETRY_QUEUE_SIZE
    retry_interval: float  # TAG_RETRY_INTERVAL

    @classmethod
    def from_settings(cls, settings: Settings) -> TagFeedConfig:
        return cls(
            url=str(settings["GRAPHITE_URL"]).rstrip("/") + "/tags/tagMultiSeries",
            skip_untagged=bool(settings["SKIP_TAGS_FOR_NONTAGGED"]),
            update_interval=max(int(settings["TAG_UPDATE_INTERVAL"]), 1),
            batch_size=max(int(settings["TAG_BATCH_SIZE"]), 1),
            queue_size=int(settings["TAG_QUEUE_SIZE"]),
            retry_size=max(int(settings["TAG_RETRY_QUEUE_SIZE"]), 0),
            retry_interval=max(float(settings["TAG_RETRY_INTERVAL"]), 0.1))


class TagFeed:
    """Queues series names and posts them to the TagDB from its own thread."""

    def __init__(self, config: TagFeedConfig, log: CarbonLog, stats: Stats) -> None:
        self.config = config
        self.url = config.url
        self.skip_untagged = config.skip_untagged
        self.interval = config.update_interval
        self.batch_size = config.batch_size
        self.queue: queue.Queue[str] = queue.Queue(config.queue_size)
        self.stats = stats
        self.errors = IntervalLog(log.msg, "errors tagging series")
        self.retry_size = config.retry_size
        self.retry_interval = config.retry_interval
        self.retry: dict[str, None] = {}  # insertion-ordered set, the feed thread's only
        self.backoff = 0.0
        self.retry_at = 0.0
        self.retry_full = IntervalLog(
            log.msg, "series not retried for tags: the retry queue is full "
            "(TAG_RETRY_QUEUE_SIZE %d); each is tagged on its next create or "
            "TAG_UPDATE_INTERVAL-th update" % self.retry_size, samples=1)
        self.counter = 0
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    def wanted(self, metric: str) -> bool:
        return not self.skip_untagged or ";" in metric

    def _put(self, metric: str) -> None:
        try:
            self.queue.put_nowait(metric)
        except queue.Full:
            self.stats.increment("tagQueueFull")

    def created(self, metric: str) -> None:
        if self.wanted(metric):
            self._put(metric)

    def updated(self, metric: str) -> None:
        if self.wanted(metric):
            self.counter = self.counter % self.interval + 1
            if self.counter == 1:
                self._put(metric)

    def next_batch(self, timeout: float = 0.2) -> list[str]:
        try:
            batch = [self.queue.get(timeout=timeout)]
        except queue.Empty:
            return []
        while len(batch) < self.batch_size:
            try:
                batch.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def post(self, metrics: list[str]) -> None:
        body = urllib.parse.urlencode([("path", m) for m in metrics]).encode()
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def run(self) -> None:
        while not self.stop_event.is_set():
            now = time.monotonic()
            if self.retry and now >= self.retry_at:
                self._retry(now)
                continue
            batch = self.next_batch(min(0.2, max(self.retry_at - now, 0.01))
                                    if self.retry else 0.2)
            if not batch:
                continue
            if self.retry:   # the TagDB failed and the back-off is running: wait with them
                self._keep(batch)
                continue
            try:
                self.post(batch)
                self.stats.increment("taggedSeries", len(batch))
            except Exception as exc:  # the TagDB being down must not stop the cache
                self._failed(batch, exc)

    def _failed(self, batch: list[str], exc: Exception) -> None:
        self.stats.increment("tagErrors")
        self.errors.record("%s: %s" % (", ".join(batch[:3]), exc))
        first = not self.retry
        self._keep(batch)
        if first and self.retry:
            self.backoff = min(1.0, self.retry_interval)
            self.retry_at = time.monotonic() + self.backoff

    def _keep(self, batch: list[str]) -> None:
        """Series whose tagging failed, kept for a retry while there is room."""
        retry = self.retry
        dropped = 0
        for metric in batch:
            if metric in retry:
                continue
            if len(retry) >= self.retry_size:
                dropped += 1
                continue
            retry[metric] = None
        if dropped:
            self.stats.increment("tagRetryDropped", dropped)
            self.retry_full.record("%d series" % dropped, dropped)

    def _retry(self, now: float) -> None:
        """Post the oldest retry batch; on success the next one follows at once, on failure
        the back-off doubles (at most TAG_RETRY_INTERVAL)."""
        batch = []
        for metric in self.retry:
            batch.append(metric)
            if len(batch) >= self.batch_size:
                break
        try:
            self.post(batch)
        except Exception as exc:
            self.stats.increment("tagErrors")
            self.errors.record("%s (%d series waiting for a retry): %s" % (
                ", ".join(batch[:3]), len(self.retry), exc))
            self.backoff = min(max(self.backoff * 2, 1.0), self.retry_interval)
            self.retry_at = now + self.backoff
            return
        for metric in batch:
            self.retry.pop(metric, None)
        self.stats.increment("taggedSeries", len(batch))
        self.backoff = 0.0
        self.retry_at = now

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="carbon-tagfeed", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
