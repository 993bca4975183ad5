"""Feed tagged series to graphite's TagDB (``GRAPHITE_URL/tags/tagMultiSeries``), like carbon.

New series are queued when created and known ones every TAG_UPDATE_INTERVAL-th
update; a background thread posts them in batches of TAG_BATCH_SIZE. The queue
is bounded (TAG_QUEUE_SIZE): past it, tag updates (not datapoints) are skipped
and counted.
"""

from __future__ import annotations

import queue
import threading
import urllib.parse
import urllib.request
from typing import Any

from carbon.logs import CarbonLog, IntervalLog


class TagFeed:
    """Queues series names and posts them to the TagDB from its own thread."""

    def __init__(self, settings: Any, log: CarbonLog, stats: Any) -> None:
        self.url = settings.GRAPHITE_URL.rstrip("/") + "/tags/tagMultiSeries"
        self.skip_untagged = bool(settings.SKIP_TAGS_FOR_NONTAGGED)
        self.interval = max(int(settings.TAG_UPDATE_INTERVAL), 1)
        self.batch_size = max(int(settings.TAG_BATCH_SIZE), 1)
        self.queue: queue.Queue[str] = queue.Queue(int(settings.TAG_QUEUE_SIZE))
        self.stats = stats
        self.errors = IntervalLog(log.msg, "errors tagging series")
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
            batch = self.next_batch()
            if not batch:
                continue
            try:
                self.post(batch)
                self.stats.increment("taggedSeries", len(batch))
            except Exception as exc:  # the TagDB being down must not stop the cache
                self.stats.increment("tagErrors")
                self.errors.record("%s: %s" % (", ".join(batch[:3]), exc))

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="carbon-tagfeed", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
