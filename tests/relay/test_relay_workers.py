"""RELAY_WORKERS = 2 as real processes: connections dealt out to both, every line
delivered once and in each sender's order, per-worker spools kept across a restart,
workers stopped with the master (SIGTERM) and gone when the master dies (SIGKILL), a
SIGHUP that reaches a starting worker kept pending until it can reload."""

from __future__ import annotations

import io
import os
import pickle
import signal
import socket
import struct
import subprocess
from pathlib import Path

from twisted.internet import defer

from tests.relay.countsink import CountingSink
from tests.relay.harness import alive, children, run_reactor, run_relays, unread, wait_for
from tests.relay.relayutil import free_port, relay_settings
from tests.relay.test_relay_daemon import _accepting, _send_lines, _start

from carbon.logs import CarbonLog
from carbon.daemon.relay_workers import READY, WorkerPool


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
        workers = children(relay.pid)
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
            sender.join(10)
            assert not sender.is_alive()
        # What the senders wrote is in the relay's hands only once it has read it (a
        # loaded machine can keep it in the socket buffers for longer than a fixed wait).
        yield wait_for(reactor, lambda: unread(line_port) == 0, timeout=20,
                       what="the relay to read every byte sent")
        os.kill(relay.pid, signal.SIGTERM)
        yield wait_for(reactor, lambda: relay.poll() is not None, timeout=30,
                       what="master shutdown")
        assert relay.returncode == 0
        yield wait_for(reactor, lambda: not any(map(alive, workers)), timeout=10,
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
        orphans = children(again.pid)
        assert len(orphans) == 1
        again.kill()
        again.wait(10)
        yield wait_for(reactor, lambda: not any(map(alive, orphans)), timeout=15,
                       what="the orphaned worker to stop")
        yield back.stop()

    run_relays(body, procs, timeout=120)


def test_sighup_while_a_worker_starts_is_one_reload(tmp_path):
    """A SIGHUP passed on to a worker that is still importing (right after the master
    started or replaced it) waits until its handler is in place: the worker lives,
    reloads once and relays what it is handed afterwards."""
    dest_port = free_port()
    settings = relay_settings(tmp_path / "storage", [dest_port], instance="a",
                              LOG_DIR=str(tmp_path / "log"), DESTINATION_PROTOCOL="line")
    pool = WorkerPool(settings, 2, CarbonLog(None, stream=io.StringIO()), None,
                      foreground=False)
    lines = ["hup.m%d %d %d\n" % (i, i, 1_700_000_000 + i) for i in range(500)]

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor, "line", port=dest_port)
        sink.listen()
        pool.reactor = reactor
        pool._spawn(1)  # as the master starts (and restarts) a worker
        proc, channel = pool.workers[1]
        os.kill(proc.pid, signal.SIGHUP)  # long before it can have installed a handler
        assert signal.SIGHUP not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        channel.settimeout(20)
        try:
            ready = channel.recv(16)
        except OSError:
            ready = b""
        if ready != READY:
            proc.wait(10)
        assert ready == READY and proc.poll() is None, "worker ended: %s" % proc.returncode
        console = tmp_path / "log" / "w1" / "console.log"
        said = "relay worker 1: SIGHUP, re-reading rules and lists"
        yield wait_for(reactor, lambda: console.exists() and said in console.read_text(),
                       timeout=10, what="the pending SIGHUP's reload")
        with socket.socket() as listener:  # a connection handed over as the master does
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            client = socket.create_connection(listener.getsockname())
            conn, _ = listener.accept()
            with conn:
                pool.dispatch(conn, "line", None)
        with client:
            client.sendall("".join(lines).encode())
        yield wait_for(reactor, lambda: len(sink.points) == len(lines), timeout=20,
                       what="lines relayed by the worker")
        assert console.read_text().count(said) == 1
        assert proc.poll() is None
        yield pool.stop()
        assert proc.returncode == 0
        yield sink.stop()

    try:
        run_reactor(body, timeout=60)
    finally:
        for proc, channel in pool.workers.values():
            channel.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
