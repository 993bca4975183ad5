"""Our wire outputs read by carbon 1.1.10 and graphite-web 1.1.10, and theirs by us.

One carbon 1.1.10 carbon-cache per module, its writer stalled (MAX_UPDATES_PER_SECOND
tiny: after one sacrificial metric it waits for a token for hours), so whatever it
received is answered over its carbonlink:

- its pickle receiver takes our carbon-relay's and our carbon-aggregator's pickle output;
- our render app reads its cache over carbonlink;
- graphite-web 1.1.10, with our render app as its CLUSTER_SERVERS, answers the same.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import whisper

from tests.interop.reference import GraphiteWeb, ReferenceCarbon
from tests.support import CarbonInstance, carbonlink, send_tcp, wait_for
from tests.webapp.helpers import LiveServer
from webapp.app import make_app
from webapp.settings import make_settings

NOW = int(time.time()) // 60 * 60


@pytest.fixture(scope="module")
def reference_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceCarbon]:
    root = tmp_path_factory.mktemp("ref-cache")
    cache = ReferenceCarbon(root, "carbon-cache.py", "cache", MAX_UPDATES_PER_SECOND=0.0001,
                            MAX_CREATES_PER_MINUTE="inf", MAX_CACHE_SIZE="inf")
    try:
        # carbon 1.1.10 pops a metric, then waits for its token: this one, for hours
        send_tcp(cache.ports["LINE_RECEIVER_PORT"], b"interop.sacrifice 1 %d\n" % NOW)
        wait_for(lambda: (root / "whisper" / "interop" / "sacrifice.wsp").exists(),
                 what="the reference writer to take its first metric")
        yield cache
    finally:
        cache.stop()


def cached(cache: ReferenceCarbon, metrics: list[str]) -> dict[str, list]:
    answer = carbonlink(cache.ports["CACHE_QUERY_PORT"], {"type": "cache-query-bulk",
                                                           "metrics": metrics})
    return {m: sorted(points) for m, points in answer["datapointsByMetric"].items()}


def lines(metrics: list[str], per: int, scale: float = 1.0) -> tuple[bytes, dict]:
    sent = {m: [(float(NOW - 60 * k), scale * i + k / 4) for k in range(per, 0, -1)]
            for i, m in enumerate(metrics)}
    data = b"".join(b"%s %r %d\n" % (m.encode(), v, t) for m in metrics for t, v in sent[m])
    return data, sent


def test_reference_pickle_receiver_takes_our_relay_output(tmp_path: Path,
                                                          reference_cache: ReferenceCarbon):
    relay = CarbonInstance(tmp_path / "relay", program="carbon-relay", section="relay",
                           RELAY_METHOD="consistent-hashing", DESTINATION_PROTOCOL="pickle",
                           DESTINATIONS="127.0.0.1:%d" %
                           reference_cache.ports["PICKLE_RECEIVER_PORT"])
    metrics = ["relayed.m%03d" % i for i in range(200)]
    data, sent = lines(metrics, 5)
    relay.start_foreground()
    try:
        send_tcp(relay.line_port, data)
        wait_for(lambda: cached(reference_cache, metrics) == sent, timeout=30,
                 what="carbon 1.1.10 to hold every relayed point")
    finally:
        relay.kill()


def test_reference_pickle_receiver_takes_our_aggregator_output(
        tmp_path: Path, reference_cache: ReferenceCarbon) -> None:
    agg = CarbonInstance(tmp_path / "agg", program="carbon-aggregator", section="aggregator",
                         DESTINATIONS="127.0.0.1:%d" %
                         reference_cache.ports["PICKLE_RECEIVER_PORT"])
    (agg.conf / "aggregation-rules.conf").write_text(
        "aggd.<app>.total (60) = sum aggd.<app>.*.hits\n")
    (agg.conf / "rewrite-rules.conf").write_text("")
    inputs = {"aggd.web.h%d.hits" % i: float(i + 1) for i in range(4)}
    agg.start_foreground()
    try:
        send_tcp(agg.line_port, b"".join(b"%s %r %d\n" % (m.encode(), v, NOW - 120)
                                         for m, v in inputs.items()))
        expected = {m: [(float(NOW - 120), v)] for m, v in inputs.items()}
        expected["aggd.web.total"] = [(float(NOW - 120), sum(inputs.values()))]
        wait_for(lambda: cached(reference_cache, list(expected)) == expected, timeout=30,
                 what="carbon 1.1.10 to hold the aggregate and the forwarded inputs")
    finally:
        agg.kill()


@pytest.fixture
def render_over_reference(tmp_path: Path, reference_cache: ReferenceCarbon) -> Iterator[dict]:
    """Points sent to carbon 1.1.10's cache, and our render app over it whose whisper tree
    has empty files of the same names: whatever it shows came over carbonlink."""
    metrics = ["refread.m%d" % i for i in range(6)]
    data, sent = lines(metrics, 20, scale=10.0)
    send_tcp(reference_cache.ports["LINE_RECEIVER_PORT"], data)
    wait_for(lambda: cached(reference_cache, metrics) == sent, what="points in carbon 1.1.10")
    storage = tmp_path / "ours"
    for metric in metrics:
        path = storage / "whisper" / (metric.replace(".", "/") + ".wsp")
        path.parent.mkdir(parents=True, exist_ok=True)
        whisper.create(str(path), [(60, 1440)])
    host = "127.0.0.1:%d:a" % reference_cache.ports["CACHE_QUERY_PORT"]
    app = make_app(make_settings(STORAGE_DIR=str(storage), WHISPER_DIR=str(storage / "whisper"),
                                 CARBONLINK_HOSTS=[host], CARBONLINK_TIMEOUT=5.0))
    server = LiveServer(app)
    try:
        yield {"server": server, "sent": sent}
    finally:
        server.stop()
        app.close()


def shown(url: str) -> dict[str, dict]:
    query = urllib.parse.urlencode({"target": "refread.*", "format": "json",
                                    "from": NOW - 3600, "until": NOW})
    with urllib.request.urlopen(url + "/render?" + query, timeout=20) as resp:
        series = json.loads(resp.read())
    return {s["target"]: {float(t): v for v, t in s["datapoints"] if v is not None}
            for s in series}


def test_our_render_app_and_graphite_web_over_it_read_a_reference_cache(
        tmp_path: Path, render_over_reference: dict[str, Any]) -> None:
    server, sent = render_over_reference["server"], render_over_reference["sent"]
    expected = {m: dict(points) for m, points in sent.items()}
    assert shown(server.url("")) == expected
    web = GraphiteWeb(tmp_path / "graphite-web", CLUSTER_SERVERS=[server.address])
    try:
        assert shown(web.url("")) == expected
        with urllib.request.urlopen(web.url("/metrics/find?query=refread.*"), timeout=20) as r:
            found = sorted(node["id"] for node in json.loads(r.read()))
        assert found == sorted(sent)
    finally:
        web.stop()
