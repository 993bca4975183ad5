"""The online resize against a real carbon-cache on 127.0.0.29 taking points meanwhile:
every file rewritten (or its header edited) several times while a sender streams points
for those very metrics and a reader reads them as the render app does (carbonlink, then
the file); no point lost, no read wrong, and no metric left paused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import whisper

from carbon.carbonlink.client import Session, cache_query_bulk
from carbon.cluster.resize import LocalResize, Rates, sweep_temps
from carbon.storage.whisper_resize import TEMP_SUFFIX, read_header
from tests.support import ROOT, CarbonInstance, wait_for
from webapp.storage.whisper_read import fetch

ADDRESS = "127.0.0.29"
METRICS = ["rs.a.m%02d" % i for i in range(16)] + ["rs.b.m%02d" % i for i in range(16)]
# (storage-schemas, storage-aggregation) of each pass: rs.a is rewritten each time,
# rs.b gets header-only changes (method, xFilesFactor)
PASSES = [
    ("[rs]\npattern = ^rs\\.a\\.\nretentions = 1s:20m,10s:1h\n"
     "[rsb]\npattern = ^rs\\.b\\.\nretentions = 1s:20m\n",
     "[b]\npattern = ^rs\\.b\\.\nxFilesFactor = 0.1\naggregationMethod = max\n"),
    ("[rs]\npattern = ^rs\\.a\\.\nretentions = 1s:25m,10s:2h\n"
     "[rsb]\npattern = ^rs\\.b\\.\nretentions = 1s:20m\n",
     "[b]\npattern = ^rs\\.b\\.\nxFilesFactor = 0.9\naggregationMethod = sum\n"),
    ("[rs]\npattern = ^rs\\.a\\.\nretentions = 1s:20m,60s:1d\n"
     "[rsb]\npattern = ^rs\\.b\\.\nretentions = 1s:20m\n",
     "[b]\npattern = ^rs\\.b\\.\nxFilesFactor = 0.5\naggregationMethod = last\n"),
]
FIRST = ("[rs]\npattern = ^rs\\.\nretentions = 1s:20m\n", "")


def value(metric: str, t: int) -> float:
    return float(METRICS.index(metric) * 100000 + t % 100000)


def listening(port: int) -> bool:
    try:
        with socket.create_connection((ADDRESS, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture()
def cache(tmp_path):
    instance = CarbonInstance(
        tmp_path, LINE_RECEIVER_INTERFACE=ADDRESS, PICKLE_RECEIVER_INTERFACE=ADDRESS,
        CACHE_QUERY_INTERFACE=ADDRESS, UDP_RECEIVER_INTERFACE=ADDRESS,
        ENABLE_UDP_LISTENER=False, MAX_CREATES_PER_MINUTE="inf")
    (instance.conf / "storage-schemas.conf").write_text(FIRST[0])
    (instance.conf / "storage-aggregation.conf").write_text(FIRST[1])
    env = dict(os.environ, GRAPHITE_ROOT=str(instance.root), PYTHONPATH=str(ROOT))
    log = open(instance.root / "stdout.log", "w")
    instance.proc = subprocess.Popen(instance.script + ["--nodaemon", "start"], env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: instance.proc.poll() is not None or listening(instance.line_port),
                 what="carbon-cache to listen")
        assert instance.proc.poll() is None, instance.output()
        yield instance
    finally:
        instance.kill()
        log.close()


class Sender(threading.Thread):
    """Points for every metric, one timestamp a round, over one connection."""

    def __init__(self, port: int, start: int, rounds: int) -> None:
        super().__init__(daemon=True)
        self.port, self.start_t, self.rounds = port, start, rounds
        self.sent = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with socket.create_connection((ADDRESS, self.port), timeout=10) as sock:
            for k in range(self.rounds):
                if self.stop.is_set():
                    break
                t = self.start_t + k
                sock.sendall("".join("%s %r %d\n" % (m, value(m, t), t)
                                     for m in METRICS).encode())
                self.sent += len(METRICS)
                time.sleep(0.01)


class Reader(threading.Thread):
    """Reads as the render app does: the cache's points over carbonlink, then the file.
    A read is wrong when it fails, returns a value that was never sent, or lacks a
    point an earlier read of the metric returned."""

    def __init__(self, instance: CarbonInstance, start: int) -> None:
        super().__init__(daemon=True)
        self.instance, self.start_t = instance, start
        self.reads = 0
        self.wrong: list[str] = []
        self.seen: dict[str, set[int]] = {m: set() for m in METRICS}
        self.stop = threading.Event()

    def run(self) -> None:
        address = (ADDRESS, self.instance.query_port)
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            for metric in METRICS:
                try:
                    cached = cache_query_bulk(address, [metric]).get(metric, [])
                    path = str(self.instance.whisper_path(metric))
                    if not os.path.exists(path):
                        continue
                    now = int(time.time())
                    result, _ = fetch(path, self.start_t - 1, now, now)
                except Exception as exc:  # noqa: BLE001 - any failure is a wrong read
                    self.wrong.append("%s: %s" % (metric, exc))
                    continue
                got = dict(cached)
                if result is not None:
                    (first, _, step), values = result
                    if step == 1:
                        for i, v in enumerate(values):
                            if v is not None:
                                got[first + i] = v
                for t, v in got.items():
                    if v != value(metric, t):
                        self.wrong.append("%s at %d: %r" % (metric, t, v))
                missing = self.seen[metric] - set(got)
                if missing:
                    self.wrong.append("%s lost %d points on a read" % (metric, len(missing)))
                self.seen[metric] = set(got)
                self.reads += 1


def test_resize_while_points_flow(cache: CarbonInstance) -> None:
    whisper_dir = str(cache.storage / "whisper")
    start = int(time.time()) - 600
    sender = Sender(cache.line_port, start, rounds=590)
    sender.start()
    wait_for(lambda: all(cache.whisper_path(m).exists() for m in METRICS), timeout=60,
             what="files created")
    reader = Reader(cache, start)
    reader.start()
    changed = 0
    try:
        for schemas, aggregation in PASSES:
            (cache.conf / "storage-schemas.conf").write_text(schemas)
            (cache.conf / "storage-aggregation.conf").write_text(aggregation)
            resize = LocalResize(whisper_dir, str(cache.conf),
                                 [(ADDRESS, cache.query_port)], Rates(fsync=False))
            dry = resize.dry_run()
            assert dry.rewrite == 16 and dry.header_only == 16 and dry.unchanged == 0, dry
            report = resize.run()
            assert not report.errors, report.errors
            assert report.done == 32, report
            changed += report.done
            again = LocalResize(whisper_dir, str(cache.conf)).dry_run()
            assert (again.unchanged, again.rewrite, again.header_only) == (32, 0, 0)
        assert sender.is_alive(), "the sender finished before the resizes: no overlap"
    finally:
        sender.join(60)
        reader.stop.set()
        reader.join(60)
    address = (ADDRESS, cache.query_port)
    wait_for(lambda: not any(cache_query_bulk(address, METRICS).values()), timeout=60,
             what="cache drained")
    assert cache.terminate() == 0, cache.output()
    stored = 0
    lost = []
    for metric in METRICS:
        path = str(cache.whisper_path(metric))
        (first, _, step), values = whisper.fetch(path, start - 1, start + 600)
        assert step == 1
        got = {first + i: v for i, v in enumerate(values) if v is not None}
        for k in range(590):
            t = start + k
            if got.get(t) == value(metric, t):
                stored += 1
            else:
                lost.append((metric, t, got.get(t)))
    header = read_header(str(cache.whisper_path("rs.a.m00")))
    assert [(a.step, a.points) for a in header.archives] == [(1, 1200), (60, 1440)]
    header = read_header(str(cache.whisper_path("rs.b.m00")))
    assert (header.aggregation_method, header.xff) == ("last", 0.5)
    assert sweep_temps(whisper_dir) == 0
    assert not [n for n in os.listdir(cache.whisper_path("rs.a.m00").parent)
                if n.endswith(TEMP_SUFFIX)]
    print("sent %d stored %d lost %d reads %d wrong %d files changed %d"
          % (sender.sent, stored, len(lost), reader.reads, len(reader.wrong), changed),
          file=sys.stderr)
    assert sender.sent == 590 * len(METRICS)
    assert not lost, lost[:5]
    assert stored == sender.sent
    assert reader.reads > 100
    assert not reader.wrong, reader.wrong[:5]


def test_a_closed_connection_releases_its_holds(cache: CarbonInstance) -> None:
    """Held metrics wait in the cache; when the holder's connection closes they are
    written (a resize that dies leaves nothing paused)."""
    now = int(time.time())
    session = Session((ADDRESS, cache.query_port))
    answer = session.request({"type": "resize-hold", "metrics": ["rs.held"]})
    assert answer == {"pending": []}
    with socket.create_connection((ADDRESS, cache.line_port)) as sock:
        sock.sendall(("rs.held 1 %d\nrs.free 2 %d\n" % (now, now)).encode())
    path = cache.whisper_path("rs.free")
    wait_for(lambda: path.exists() and whisper.fetch(str(path), now - 5, now + 1)[1].count(2.0),
             what="the free metric written")
    time.sleep(0.5)
    held = cache.whisper_path("rs.held")
    # created or not, no point of the held metric reached its file
    if held.exists():
        assert not [v for v in whisper.fetch(str(held), now - 5, now + 1)[1] if v is not None]
    assert cache_query_bulk((ADDRESS, cache.query_port), ["rs.held"])["rs.held"] == \
        [(now, 1.0)]
    bad = session.request({"type": "resize-hold", "metrics": "rs.held"})
    assert "error" in bad
    session.close()
    wait_for(lambda: held.exists() and whisper.fetch(str(held), now - 5, now + 1)[1].count(1.0),
             what="the held point written once the holder is gone")


def test_the_cache_warns_once_about_files_that_no_longer_follow_the_rules(tmp_path) -> None:
    instance = CarbonInstance(
        tmp_path, LINE_RECEIVER_INTERFACE=ADDRESS, PICKLE_RECEIVER_INTERFACE=ADDRESS,
        CACHE_QUERY_INTERFACE=ADDRESS, UDP_RECEIVER_INTERFACE=ADDRESS,
        ENABLE_UDP_LISTENER=False, BAD_LINE_LOG_INTERVAL=1)
    (instance.conf / "storage-schemas.conf").write_text(
        "[rs]\npattern = ^rs\\.\nretentions = 60s:1d\n")
    (instance.conf / "storage-aggregation.conf").write_text(
        "[max]\npattern = \\.max$\naggregationMethod = max\n")
    old = ["rs.old%d" % i for i in range(5)] + ["rs.agg.max"]
    for metric in old + ["rs.fine"]:
        path = instance.whisper_path(metric)
        path.parent.mkdir(parents=True, exist_ok=True)
        archives = [(60, 1440)] if metric in ("rs.fine", "rs.agg.max") else [(60, 100)]
        whisper.create(str(path), archives)
    env = dict(os.environ, GRAPHITE_ROOT=str(instance.root), PYTHONPATH=str(ROOT))
    log = open(instance.root / "stdout.log", "w")
    instance.proc = subprocess.Popen(instance.script + ["--nodaemon", "start"], env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: instance.proc.poll() is not None or listening(instance.line_port),
                 what="carbon-cache to listen")
        now = int(time.time())
        for round_ in range(3):  # the same metrics written again: no second warning
            with socket.create_connection((ADDRESS, instance.line_port)) as sock:
                sock.sendall("".join("%s %d %d\n" % (m, round_, now - 60 * round_)
                                     for m in old + ["rs.fine"]).encode())
            wait_for(lambda: not any(cache_query_bulk((ADDRESS, instance.query_port),
                                                      old).values()), what="written")
            time.sleep(1.5)  # a log interval
        text = instance.output()
    finally:
        instance.kill()
        log.close()
    lines = [line for line in text.splitlines() if "no longer match" in line]
    assert len(lines) == 1, text
    assert "6 files' headers no longer match storage-schemas.conf" in lines[0]
    assert "carbon-resize" in lines[0]
    assert "rs.old" in lines[0] or "rs.agg.max" in lines[0]
    assert "60:100 (average, xff 0.5) vs 60:1440 (average, xff 0.5)" in lines[0] or \
        "60:1440 (average, xff 0.5) vs 60:1440 (max, xff 0.5)" in lines[0]
    assert "rs.fine" not in lines[0]
