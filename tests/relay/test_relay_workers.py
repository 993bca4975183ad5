"""RELAY_WORKERS = 2 as real processes: connections dealt out to both, every line
delivered once and in each sender's order, per-worker spools kept across a restart,
workers stopped with the master (SIGTERM) and gone when the master dies (SIGKILL)."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import subprocess
from pathlib import Path

from twisted.internet import defer

from countsink import CountingSink
from harness import run_reactor, sleep, wait_for
from relayutil import free_port
from test_relay_daemon import _accepting, _send_lines, _start


def _write_conf(base: Path, line_port: int, dest_port: int, pickle_port: int) -> None:
    conf = base / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    (conf / "carbon.conf").write_text("\n".join([
        "[relay]", "STORAGE_DIR = %s" % (base / "storage"), "USER = ",
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % line_port,
        "PICKLE_RECEIVER_INTERFACE = 127.0.0.1", "PICKLE_RECEIVER_PORT = %d" % pickle_port,
        "RELAY_METHOD = consistent-hashing", "DESTINATIONS = 127.0.0.1:%d" % dest_port,
        "DESTINATION_PROTOCOL = line", "RELAY_WORKERS = 2",
        "CARBON_METRIC_INTERVAL = 0", "SHUTDOWN_FLUSH_TIMEOUT = 2", ""]))


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _batches(prefix: str, senders: int, lines: int) -> list[list[str]]:
    return [["%s.c%d.m%d %d %d\n" % (prefix, c, i % 50, i, 1_700_000_000 + i)
             for i in range(lines)] for c in range(senders)]


def test_workers_share_connections_and_lose_nothing(tmp_path):
    line_port, dest_port, pickle_port = free_port(), free_port(), free_port()
    _write_conf(tmp_path, line_port, dest_port, pickle_port)
    procs: list[subprocess.Popen] = []

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor, "line", port=dest_port)
        sink.listen()
        relay = _start(tmp_path)
        procs.append(relay)
        yield wait_for(reactor, lambda: _accepting(line_port), timeout=20, what="line port")
        workers = _children(relay.pid)
        assert len(workers) == 1
        batches = _batches("w", 4, 3000)
        senders = [_send_lines(line_port, batch) for batch in batches]
        pickled = [[("p.c%d.m%d" % (c, i), 1_700_000_000.0 + i, float(i)) for i in range(100)]
                   for c in range(2)]
        for points in pickled:  # pickle connections are dealt out too
            body_bytes = pickle.dumps([(m, (t, v)) for m, t, v in points], protocol=2)
            with socket.create_connection(("127.0.0.1", pickle_port)) as sock:
                sock.sendall(struct.pack("!L", len(body_bytes)) + body_bytes)
        yield wait_for(reactor, lambda: len(sink.points) == 4 * 3000 + 200, timeout=20,
                       what="every line")
        for sender in senders:
            sender.join(5)
        for points in pickled:
            assert [p for p in sink.points if p[0].startswith(points[0][0][:4])] == points
        assert sink.accepted == 2  # the master and the worker each connect once
        for c, batch in enumerate(batches):  # each sender's lines, once and in order
            got = [p for p in sink.points if p[0].startswith("w.c%d." % c)]
            assert got == [(line.split()[0], float(line.split()[2]), float(line.split()[1]))
                           for line in batch]

        # The destination goes away: both processes spool what they get ...
        yield sink.stop()
        later = _batches("later", 4, 2000)
        senders = [_send_lines(line_port, batch) for batch in later]
        for sender in senders:
            sender.join(5)
        yield sleep(reactor, 1.0)
        os.kill(relay.pid, signal.SIGTERM)
        yield wait_for(reactor, lambda: relay.poll() is not None, timeout=30,
                       what="master shutdown")
        assert relay.returncode == 0
        yield wait_for(reactor, lambda: not any(map(_alive, workers)), timeout=10,
                       what="worker shutdown")
        spools = tmp_path / "storage" / "relay-spool"
        assert list((spools / "carbon-relay-a").rglob("*.spool"))
        assert list((spools / "carbon-relay-a-w1").rglob("*.spool"))

        # ... and each replays its own spool at the next start.
        back = CountingSink(reactor, "line", port=dest_port)
        back.listen()
        again = _start(tmp_path)
        procs.append(again)
        expected = sorted((line.split()[0], float(line.split()[2]), float(line.split()[1]))
                          for batch in later for line in batch)

        def later_points() -> list:
            return sorted(p for p in back.points if p[0].startswith("later."))

        yield wait_for(reactor, lambda: later_points() == expected, timeout=20,
                       what="replay after restart")
        # Besides them, only what the first connections may have lost when the sink
        # stopped: resent copies of points it already had (at least once).
        before = set(sink.points)
        assert all(p in before for p in back.points if not p[0].startswith("later."))

        # A master that dies without warning takes its worker with it.
        orphans = _children(again.pid)
        assert len(orphans) == 1
        again.kill()
        again.wait(10)
        yield wait_for(reactor, lambda: not any(map(_alive, orphans)), timeout=15,
                       what="the orphaned worker to stop")
        yield back.stop()

    try:
        run_reactor(body, timeout=120)
    finally:
        for proc in procs:
            for child in _children(proc.pid):
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
