"""Series names through every daemon that normalises them, as carbon 1.1.10 does:
OpenMetrics ``name{k="v"}`` becomes ``name;k=v`` in the cache, the aggregator-cache, and
on the way out of a relay or aggregator with TAG_RELAY_NORMALIZED. And the two
deliberate differences (README "Where we differ"): invalid tagged names are counted and
stored nowhere; a UDP datagram with invalid UTF-8 in one line keeps its other lines."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from carbon import tags
from tests.support import ROOT, CarbonInstance, carbonlink, read_whisper, send_tcp, wait_for

NOW = int(time.time()) // 60 * 60
OPENMETRICS = [('disk.free{host="om1",dc="east"}', "disk.free;dc=east;host=om1"),
               ('req{code="200",path="/a/é"}', "req;code=200;path=/a/é"),
               ("load;zone=b;host=x", "load;host=x;zone=b"),
               ("~plain.name", "plain.name")]
INVALID = ["cpu;host=", "cpu;ho!st=x", "cpu;host=~x", "cpu;host=a;"]


def lines(names: list[str], value: float = 75.0) -> bytes:
    return b"".join(b"%s %r %d\n" % (n.encode(), value, NOW - 60) for n in names)


def cached(instance: CarbonInstance, name: str) -> list:
    return carbonlink(instance.query_port, {"type": "cache-query", "metric": name})["datapoints"]


def stored_files(instance: CarbonInstance) -> set[str]:
    root = instance.storage / "whisper"
    return {str(p.relative_to(root)) for p in root.rglob("*.wsp")}


def test_cache_stores_openmetrics_names_tagged_and_skips_invalid_ones(tmp_path: Path) -> None:
    cache = CarbonInstance(tmp_path, ENABLE_TAGS=False)
    cache.start_foreground()
    try:
        send_tcp(cache.line_port, lines(INVALID + [n for n, _ in OPENMETRICS] + ["good.one"]))
        for _name, normal in OPENMETRICS + [("good.one", "good.one")]:
            path = Path(tags.filesystem_path(str(cache.storage / "whisper"), normal, True))
            wait_for(lambda p=path: read_whisper(p, NOW - 120, NOW) == {NOW - 60: 75.0},
                     what="%s stored as %s" % (_name, normal))
        # nothing at all for the invalid names (carbon 1.1.10 makes files under their hash)
        expected = {tags.encode(normal, os.sep, hash_only=True) + ".wsp"
                    for _n, normal in OPENMETRICS}
        assert stored_files(cache) == expected | {"good/one.wsp"}
        assert cache.terminate() == 0
        console = cache.output()
        assert "invalid metric names" in console and "cpu;ho!st=x" in console
    finally:
        cache.kill()


def test_udp_datagram_with_invalid_utf8_keeps_its_good_lines(tmp_path: Path) -> None:
    cache = CarbonInstance(tmp_path, ENABLE_UDP_LISTENER=True, ENABLE_TAGS=False,
                           MAX_UPDATES_PER_SECOND=0.0001)
    cache.start_foreground()
    try:
        datagram = b"udp.good.a 1 %d\nudp.\xff\xfebad 2 %d\nudp.good.b 3 %d\n" % (
            NOW - 60, NOW - 60, NOW - 60)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(datagram, ("127.0.0.1", cache.udp_port))
        wait_for(lambda: cached(cache, "udp.good.b"), what="the datagram's last good line")
        assert cached(cache, "udp.good.a") == [(float(NOW - 60), 1.0)]
        assert cached(cache, "udp.good.b") == [(float(NOW - 60), 3.0)]
    finally:
        cache.kill()


def test_aggregator_cache_stores_openmetrics_names_tagged(tmp_path: Path) -> None:
    inst = CarbonInstance(tmp_path, program="carbon-aggregator-cache",
                          section="aggregator-cache", MAX_UPDATES_PER_SECOND=0.0001,
                          ENABLE_TAGS=False)
    (inst.conf / "aggregation-rules.conf").write_text(
        "agg.<app>.total (60) = sum agg.<app>.*.hits\n")
    inst.start_foreground()
    try:
        send_tcp(inst.line_port, lines([n for n, _ in OPENMETRICS]))
        for name, normal in OPENMETRICS:
            wait_for(lambda n=normal: cached(inst, n) == [(float(NOW - 60), 75.0)],
                     what="%s cached as %s" % (name, normal))
            if name != normal:
                assert cached(inst, name) == []
    finally:
        inst.kill()


class NameSink:
    """tests/relay/countsink.py in its own process: every point a relay sends it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "relay" / "countsink.py"), "--protocol",
             "pickle", "--port", "0", "--out", str(out)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def names(self) -> list[str]:
        """Stop (SIGTERM: it drains first) and return the names received."""
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(30)
        self.proc.stdout.close()
        return [point[0] for point in json.loads(self.out.read_text())]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc.stdout.close()


def test_relay_and_aggregator_send_normalised_names(tmp_path: Path) -> None:
    sink = NameSink(tmp_path / "points.json")
    destinations = "127.0.0.1:%d" % sink.port
    relay = CarbonInstance(tmp_path / "relay", program="carbon-relay", section="relay",
                           RELAY_METHOD="consistent-hashing", DESTINATIONS=destinations,
                           TAG_RELAY_NORMALIZED=True)
    agg = CarbonInstance(tmp_path / "agg", program="carbon-aggregator", section="aggregator",
                         DESTINATIONS=destinations, TAG_RELAY_NORMALIZED=True)
    (agg.conf / "aggregation-rules.conf").write_text(
        "agg.<app>.total (60) = sum agg.<app>.*.hits\n")
    (agg.conf / "rewrite-rules.conf").write_text("")
    sent = [n for n, _ in OPENMETRICS] + ["cpu;ho!st=x"]
    try:
        relay.start_foreground()
        agg.start_foreground()
        send_tcp(relay.line_port, lines(sent))
        send_tcp(agg.line_port, lines(sent, 5.0))
        for daemon in (relay, agg):  # read to the end, then SIGTERM: it flushes and exits
            # (the first connection closed is start_foreground's port probe)
            wait_for(lambda d=daemon: d.output().count("closed cleanly") >= 2,
                     what="lines read")
            assert daemon.terminate() == 0
        received = sink.names()
    finally:
        relay.kill()
        agg.kill()
        sink.kill()
    # each name twice (relay, aggregator's FORWARD_ALL), normalised; an invalid one as sent
    expected = [normal for _n, normal in OPENMETRICS] + ["cpu;ho!st=x"]
    assert sorted(received) == sorted(expected * 2)
