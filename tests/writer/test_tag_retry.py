"""The tag feed's retry queue against a real HTTP TagDB on loopback that is down, then up:
bounded (a full queue is counted and logged), backed off up to TAG_RETRY_INTERVAL, and
drained at once by the first retry that succeeds."""

from __future__ import annotations

import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.writer.tagfeed import TagFeed, TagFeedConfig
from tests.support import free_port, wait_for


class TagDB:
    """A /tags/tagMultiSeries endpoint recording the paths posted, and when."""

    def __init__(self, port: int) -> None:
        self.posts: list[tuple[float, list[str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                owner.posts.append((time.monotonic(), [v for k, v in
                                                       urllib.parse.parse_qsl(body)
                                                       if k == "path"]))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def tagged(self) -> list[str]:
        return [path for _t, paths in self.posts for path in paths]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def feed_for(port: int, lines: list[str], **keys: object) -> tuple[TagFeed, Stats]:
    stats = Stats()
    settings = Settings(GRAPHITE_URL="http://127.0.0.1:%d" % port, **keys)
    feed = TagFeed(TagFeedConfig.from_settings(settings),
                   CarbonLog(sink=lambda _kind, line: lines.append(line)), stats)
    return feed, stats


def test_failed_series_are_retried_bounded_and_all_tagged_within_one_interval():
    port = free_port()
    lines: list[str] = []
    feed, stats = feed_for(port, lines, TAG_RETRY_QUEUE_SIZE=150, TAG_RETRY_INTERVAL=2,
                           TAG_BATCH_SIZE=50)
    names = ["cpu;host=h%03d" % i for i in range(200)]
    feed.start()
    db = None
    try:
        for name in names:
            feed.created(name)
        # nothing listens: every batch fails; 150 wait for a retry, 50 find the queue full
        wait_for(lambda: stats.get("tagRetryDropped") == 50, 20, what="a full retry queue")
        assert len(feed.retry) == 150 and list(feed.retry) == names[:150]
        feed.retry_full.flush()
        assert any("retry queue is full (TAG_RETRY_QUEUE_SIZE 150)" in line and "50" in line
                   for line in lines), lines
        # the back-off grows to TAG_RETRY_INTERVAL and stays there
        wait_for(lambda: feed.backoff == 2.0, 20, what="the back-off to reach its bound")
        db = TagDB(port)
        up = time.monotonic()
        wait_for(lambda: len(db.tagged()) == 150, 10, what="the retry queue to drain")
        assert db.posts[-1][0] - up <= 2.0 + 0.5   # within one TAG_RETRY_INTERVAL
        assert sorted(db.tagged()) == names[:150] and not feed.retry
        assert [len(paths) for _t, paths in db.posts] == [50, 50, 50]
        # afterwards a new series is posted at once, and a dropped one on its next create
        feed.created(names[199])
        wait_for(lambda: names[199] in db.tagged(), 5, what="a new series to be tagged")
    finally:
        feed.stop()
        if feed.thread is not None:
            feed.thread.join(5)
        if db is not None:
            db.close()


def test_a_retry_queue_of_zero_retries_nothing_as_carbon():
    port = free_port()
    feed, stats = feed_for(port, [], TAG_RETRY_QUEUE_SIZE=0)
    feed.start()
    try:
        feed.created("cpu;host=a")
        wait_for(lambda: stats.get("tagErrors") == 1, 10, what="the post to fail")
        assert not feed.retry and stats.get("tagRetryDropped") == 1
    finally:
        feed.stop()
        feed.thread.join(5)
