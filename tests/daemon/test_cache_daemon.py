"""carbon-cache as a real process: every protocol, bad input, carbonlink, shutdown."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import time

import pytest
import whisper

from tests.support import (CarbonInstance, carbonlink, pickle_frame, read_whisper, send_tcp,
                           wait_for)

NOW = int(time.time()) // 60 * 60


def stored(instance: CarbonInstance, metric: str) -> dict:
    # Up to the current time, not the import time: a point stored "now" (-1) by a test that
    # runs minutes after collection must still be in the window.
    return read_whisper(instance.whisper_path(metric), NOW - 3600, int(time.time()) + 60)


@pytest.fixture
def cache(tmp_path):
    instance = CarbonInstance(tmp_path, ENABLE_UDP_LISTENER=True)
    instance.start_foreground()
    yield instance
    instance.kill()


def test_plaintext_udp_and_pickle_are_stored(cache):
    send_tcp(cache.line_port, b"test.line 1.5 %d\ntest.line 2.5 %d\n" % (NOW - 120, NOW - 60))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.sendto(b"test.udp 7 %d\n" % (NOW - 60), ("127.0.0.1", cache.udp_port))
    send_tcp(cache.pickle_port, pickle_frame([("test.pickle", (NOW - 60, 3.0)),
                                               ("test.pickle", (NOW - 120, 4.0))]))
    wait_for(lambda: len(stored(cache, "test.line")) == 2, what="line points")
    assert stored(cache, "test.line") == {NOW - 120: 1.5, NOW - 60: 2.5}
    wait_for(lambda: stored(cache, "test.udp") == {NOW - 60: 7.0}, what="udp point")
    wait_for(lambda: stored(cache, "test.pickle") == {NOW - 120: 4.0, NOW - 60: 3.0},
             what="pickle points")


def test_bad_lines_are_skipped_and_good_ones_kept(cache):
    data = (b"good.one 1 %d\n" % (NOW - 60) + b"garbage\n" + b"x nan 1\n" + b"\xff\xfe 1 2\n"
            + b"y" * 20000 + b" 1 2\n" + b"good.two 2 %d\n" % (NOW - 60) + b"good.three 3 -1")
    send_tcp(cache.line_port, data)
    for name, value in (("good.one", 1.0), ("good.two", 2.0)):
        wait_for(lambda n=name, v=value: v in stored(cache, n).values(), what=name)
    # the unterminated last line counts too (carbon 1.1.10 drops it)
    wait_for(lambda: 3.0 in stored(cache, "good.three").values(), what="good.three")
    listener = cache.output()
    assert "invalid lines received" in listener


def test_malicious_pickle_closes_only_its_connection(cache):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch %s" % (cache.root / "pwned"),))

    evil = pickle.dumps([Evil()], protocol=2)
    good = socket.create_connection(("127.0.0.1", cache.pickle_port))
    with socket.create_connection(("127.0.0.1", cache.pickle_port)) as bad:
        bad.sendall(struct.pack("!I", len(evil)) + evil)
        bad.settimeout(10)
        assert bad.recv(10) == b""  # closed by the daemon
    good.sendall(pickle_frame([("after.evil", (NOW - 60, 5.0))]))
    good.close()
    wait_for(lambda: stored(cache, "after.evil") == {NOW - 60: 5.0}, what="good pickle")
    assert not (cache.root / "pwned").exists()


def test_carbonlink_shapes(tmp_path):
    # Writes paused (1 update a minute) so points stay in the cache.
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=0.0001)
    instance.start_foreground()
    try:
        send_tcp(instance.line_port, b"q.a 1 100\nq.a 2 160\nq.a 3 100\nq.b 4 100\n")
        wait_for(lambda: carbonlink(instance.query_port,
                                    {"type": "cache-query", "metric": "q.b"})["datapoints"],
                 what="cache query")
        one = carbonlink(instance.query_port, {"type": "cache-query", "metric": "q.a"})
        assert one == {"datapoints": [(100.0, 3.0), (160.0, 2.0)]}
        bulk = carbonlink(instance.query_port, {"type": "cache-query-bulk",
                                                "metrics": ["q.a", "q.b", "q.none"]})
        assert bulk == {"datapointsByMetric": {"q.a": [(100.0, 3.0), (160.0, 2.0)],
                                               "q.b": [(100.0, 4.0)], "q.none": []}}
        bad = carbonlink(instance.query_port, {"type": "nope"})
        assert bad == {"error": 'Invalid request type "nope"'}
        meta = carbonlink(instance.query_port, {"type": "get-metadata", "metric": "q.none",
                                                "key": "aggregationMethod"})
        assert set(meta) == {"error"}
    finally:
        instance.kill()


def test_metadata_on_existing_file(cache):
    send_tcp(cache.line_port, b"meta.x 1 %d\n" % (NOW - 60))
    wait_for(lambda: stored(cache, "meta.x"), what="meta.x")
    got = carbonlink(cache.query_port, {"type": "get-metadata", "metric": "meta.x",
                                        "key": "aggregationMethod"})
    assert got == {"value": "average"}
    changed = carbonlink(cache.query_port, {"type": "set-metadata", "metric": "meta.x",
                                            "key": "aggregationMethod", "value": "max"})
    assert changed == {"old_value": "average", "new_value": "max"}
    assert whisper.info(str(cache.whisper_path("meta.x")))["aggregationMethod"] == "max"


def test_sigterm_drains_every_point(tmp_path):
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=2,
                              MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=100000)
    instance.start_foreground()
    metrics = 300
    lines = b"".join(b"drain.m%d %d %d\n" % (i, i, NOW - 60 * k)
                     for i in range(metrics) for k in range(1, 4))
    send_tcp(instance.line_port, lines)
    wait_for(lambda: sum(len(v) for v in carbonlink(
        instance.query_port, {"type": "cache-query-bulk",
                              "metrics": ["drain.m%d" % i for i in range(metrics)]}
    )["datapointsByMetric"].values()) >= metrics * 3 - 30, what="points in cache")
    assert instance.terminate() == 0
    total = sum(len(stored(instance, "drain.m%d" % i)) for i in range(metrics))
    assert total == metrics * 3


def test_flow_control_loses_nothing(tmp_path):
    instance = CarbonInstance(tmp_path, MAX_CACHE_SIZE=500, MAX_UPDATES_PER_SECOND=400)
    instance.start_foreground()
    try:
        n = 40
        lines = b"".join(b"flow.m%d %d %d\n" % (i, k, NOW - 60 * k)
                         for k in range(1, 51) for i in range(n))
        send_tcp(instance.line_port, lines)
        wait_for(lambda: sum(len(stored(instance, "flow.m%d" % i)) for i in range(n)) == n * 50,
                 timeout=60, what="all points")
        assert "MetricCache is full" in instance.output()
    finally:
        instance.kill()


def test_overflow_without_flow_control_is_counted(tmp_path):
    instance = CarbonInstance(tmp_path, MAX_CACHE_SIZE=100, USE_FLOW_CONTROL=False,
                              MAX_UPDATES_PER_SECOND=0.0001, CARBON_METRIC_INTERVAL=1,
                              BAD_LINE_LOG_INTERVAL=1)
    instance.start_foreground()
    try:
        for _batch in range(10):  # more drops than the samples an interval logs
            send_tcp(instance.line_port,
                     b"".join(b"of.m%d 1 %d\n" % (i, NOW) for i in range(500)))
        wait_for(lambda: "datapoints dropped" in instance.output(), timeout=30,
                 what="overflow log")
        wait_for(lambda: "datapoints dropped: MetricCache is full in the last interval"
                 in instance.output(), timeout=30, what="overflow summary line")
        bulk = carbonlink(instance.query_port, {"type": "cache-query-bulk", "metrics": [
            "of.m%d" % i for i in range(500)]})["datapointsByMetric"]
        assert sum(len(v) for v in bulk.values()) <= 100
    finally:
        instance.kill()


def test_self_metrics_are_stored(tmp_path):
    instance = CarbonInstance(tmp_path, CARBON_METRIC_INTERVAL=1)
    instance.start_foreground()
    try:
        send_tcp(instance.line_port, b"self.x 1 %d\n" % (NOW - 60))
        host = socket.gethostname().replace(".", "_")
        base = "carbon.agents.%s-a." % host
        for name in ("metricsReceived", "committedPoints", "cache.size", "cpuUsage",
                     "memUsage", "updateOperations", "creates", "activeConnections"):
            wait_for(lambda n=name: instance.whisper_path(base + n).exists(), timeout=30,
                     what=base + name)
    finally:
        instance.kill()


def test_tagged_series_stored_at_tagged_path(cache):
    from carbon.tags import filesystem_path
    send_tcp(cache.line_port, b"disk.used;rack=a1;dc=x 9 %d\n" % (NOW - 60))
    path = filesystem_path(str(cache.storage / "whisper"), "disk.used;dc=x;rack=a1", True)
    assert "_tagged" in path
    wait_for(lambda: os.path.exists(path), what="tagged file")


def test_sigterm_exit_and_pidfile(tmp_path):
    instance = CarbonInstance(tmp_path)
    proc = instance.start_foreground()
    pidfile = instance.storage / "carbon-cache-a.pid"
    wait_for(pidfile.exists, what="pidfile")
    assert pidfile.read_text().strip() == str(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not pidfile.exists()


def test_tagged_series_are_posted_to_the_tagdb(tmp_path):
    import threading
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received: list[list[str]] = []

    class TagDB(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            assert self.path == "/tags/tagMultiSeries"
            received.append(urllib.parse.parse_qs(body)["path"])
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"[]")

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), TagDB)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    instance = CarbonInstance(tmp_path, GRAPHITE_URL="http://127.0.0.1:%d" % server.server_port)
    instance.start_foreground()
    try:
        send_tcp(instance.line_port, b"cpu;host=a 1 %d\nplain.metric 2 %d\n" % (NOW, NOW))
        wait_for(lambda: received, what="tag post")
        assert set(received[0]) == {"cpu;host=a"}  # untagged series are skipped
    finally:
        instance.kill()
        server.shutdown()


def test_throttled_creates_keep_their_points(tmp_path):
    # 60 creates a minute: a burst of 60, then one a second. carbon 1.1.10 drops the
    # points of the creates over the limit; ours keeps them until a token is free.
    instance = CarbonInstance(tmp_path, MAX_CREATES_PER_MINUTE=60, LOG_CREATES=False)
    instance.start_foreground()
    try:
        metrics = ["throttle.m%02d" % i for i in range(64)]
        send_tcp(instance.line_port, b"".join(b"%s %d %d\n" % (m.encode(), i, NOW - 60)
                                              for i, m in enumerate(metrics)))
        for i, metric in enumerate(metrics):
            wait_for(lambda m=metric, v=i: stored(instance, m) == {NOW - 60: float(v)},
                     timeout=30, what=metric)
    finally:
        instance.kill()
