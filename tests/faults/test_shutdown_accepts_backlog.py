"""Fault: SIGTERM with connections the kernel has completed but the daemon has not
accepted yet (its listen backlog), each already holding a sender's lines. Closing the
listening port would reset them and lose those lines (carbon 1.1.10 does); the daemons
accept them first and read them like their other connections.

Deterministic: the daemon is stopped (SIGSTOP) while the senders connect and write, then
gets SIGTERM and SIGCONT. On waking, the SIGTERM handler runs first, the reactor's next
poll accepts one batch of connections (Twisted's port: as many as last time plus 20; a
RELAY_WORKERS hand-off port: 100), then shutdown begins with the rest still waiting.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.relay.harness import children
from tests.faults.load import count_stored, expected_points, one_second_schema
from tests.support import ROOT, CarbonInstance, wait_for

CONNECTIONS = 150  # more than either port accepts in one poll
PER_CONNECTION = 2
NAMES = 10
POINTS = CONNECTIONS * PER_CONNECTION


def _stopped(pid: int) -> bool:
    with open("/proc/%d/stat" % pid) as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def _points(start: int) -> list[tuple[str, int, float]]:
    """Point i: metric fault.m<i % NAMES>, timestamp start + i // NAMES, value i."""
    return [("fault.m%d" % (i % NAMES), start + i // NAMES, float(i)) for i in range(POINTS)]


def _payload(kind: str, points: list[tuple[str, int, float]]) -> bytes:
    if kind == "line":
        return b"".join(b"%s %r %d\n" % (m.encode(), v, t) for m, t, v in points)
    body = pickle.dumps([(m, (t, v)) for m, t, v in points], protocol=2)
    return struct.pack("!L", len(body)) + body


def _backlog_then_sigterm(pid: int, port: int, kind: str, start: int) -> list[socket.socket]:
    """Stop ``pid``, open CONNECTIONS connections to ``port`` each writing PER_CONNECTION
    points (and closing its write side), then SIGTERM and SIGCONT it."""
    points = _points(start)
    senders: list[socket.socket] = []
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _stopped(pid), timeout=10, interval=0.01, what="SIGSTOP")
        for c in range(CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            senders.append(sock)
            sock.sendall(_payload(kind, points[c * PER_CONNECTION:(c + 1) * PER_CONNECTION]))
            sock.shutdown(socket.SHUT_WR)
        os.kill(pid, signal.SIGTERM)
    finally:
        os.kill(pid, signal.SIGCONT)
    return senders


def _stop(relay: CarbonInstance, sink: subprocess.Popen) -> None:
    """Stop the relay and the destination process this test started (if still up)."""
    relay.kill()
    if sink.poll() is None:
        sink.kill()
        sink.wait(10)


def _arrived(out: Path) -> list[tuple[str, int, float]]:
    """The points the destination process wrote, sorted: (metric, timestamp, value)."""
    return sorted((m, int(t), v) for m, t, v in json.loads(out.read_text()))


def _resets(senders: list[socket.socket]) -> int:
    """Connections the daemon reset (rather than closed after reading them)."""
    count = 0
    for sock in senders:
        try:
            sock.settimeout(5)
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            count += 1
        finally:
            sock.close()
    return count


@pytest.mark.parametrize("kind", ["line", "pickle"])
def test_cache_stores_lines_of_connections_in_the_backlog(tmp_path, kind):
    start = int(time.time()) - 3600
    cache = CarbonInstance(tmp_path)
    one_second_schema(cache)
    cache.start_foreground()
    senders: list[socket.socket] = []
    try:
        port = cache.line_port if kind == "line" else cache.pickle_port
        senders = _backlog_then_sigterm(cache.proc.pid, port, kind, start)
        assert cache.proc.wait(60) == 0, cache.output()
    finally:
        cache.kill()
    resets = _resets(senders)
    good, wrong = count_stored(cache.storage, NAMES, start, start + POINTS // NAMES,
                               expected_points(POINTS, NAMES, start))
    assert (good, wrong, resets) == (POINTS, 0, 0), cache.output()[-3000:]
    assert "waiting in the listen backlog at shutdown" in cache.output()


def _count_sink(tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    out = tmp_path / "sink.json"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "relay" / "countsink.py"),
                             "--protocol", "line", "--port", "0", "--out", str(out)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    return proc, int(line.split()[1]), out


@pytest.mark.parametrize("workers", [1, 2])
def test_relay_forwards_lines_of_connections_in_the_backlog(tmp_path, workers):
    start = int(time.time()) - 3600
    sink, sink_port, out = _count_sink(tmp_path)
    relay = CarbonInstance(tmp_path, program="carbon-relay", section="relay",
                           DESTINATIONS="127.0.0.1:%d" % sink_port, DESTINATION_PROTOCOL="line",
                           RELAY_METHOD="consistent-hashing", RELAY_WORKERS=workers,
                           SHUTDOWN_FLUSH_TIMEOUT=5)
    senders: list[socket.socket] = []
    try:
        relay.start_foreground()
        senders = _backlog_then_sigterm(relay.proc.pid, relay.line_port, "line", start)
        assert relay.proc.wait(60) == 0, relay.output()
        sink.send_signal(signal.SIGTERM)
        assert sink.wait(30) == 0
    finally:
        _stop(relay, sink)
    resets = _resets(senders)
    got = _arrived(out)
    assert (len(got), resets) == (POINTS, 0), relay.output()[-3000:]
    assert got == sorted(_points(start))
    assert "waiting in the listen backlog at shutdown" in relay.output()


class _Trickle(threading.Thread):
    """One connection writing a point every 50 ms until ``stop``; ``sent`` lists them."""

    def __init__(self, port: int, name: str, start: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.name_, self.start_ = name, start
        self.sent: list[tuple[str, int, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        for i in range(400):  # bounded: 20 s
            if self.halt.is_set():
                break
            point = (self.name_, self.start_ + i, float(i))
            self.sock.sendall(b"%s %r %d\n" % (point[0].encode(), point[2], point[1]))
            self.sent.append(point)
            time.sleep(0.05)
        self.sock.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self.halt.set()
        self.join(10)


def test_connections_dealt_to_a_stopping_relay_worker_are_not_lost(tmp_path):
    """SIGTERM reaches a RELAY_WORKERS worker before its master (as systemd's stop sends
    it to every process of the unit): while the worker drains, the master keeps dealing
    connections to it. The worker stops taking them once its shutdown begins (the master
    keeps them) instead of adopting them unread."""
    start = int(time.time()) - 3600
    sink, sink_port, out = _count_sink(tmp_path)
    relay = CarbonInstance(tmp_path, program="carbon-relay", section="relay",
                           DESTINATIONS="127.0.0.1:%d" % sink_port, DESTINATION_PROTOCOL="line",
                           RELAY_METHOD="consistent-hashing", RELAY_WORKERS=2,
                           SHUTDOWN_FLUSH_TIMEOUT=5,
                           # the worker's drain outlasts the burst on a loaded machine
                           RECEIVER_SHUTDOWN_DRAIN_SECONDS=20)
    trickles: list[_Trickle] = []
    senders: list[socket.socket] = []
    try:
        relay.start_foreground()
        workers = children(relay.proc.pid)
        assert len(workers) == 1
        # one connection in each process (they are dealt out in turn), kept busy so the
        # worker's shutdown drain lasts while the burst below arrives
        trickles = [_Trickle(relay.line_port, "fault.t%d" % n, start) for n in range(2)]
        for trickle in trickles:
            trickle.start()
        time.sleep(0.3)
        os.kill(workers[0], signal.SIGTERM)
        time.sleep(0.5)
        points = _points(start)
        burst = 40
        for c in range(burst):
            sock = socket.create_connection(("127.0.0.1", relay.line_port), timeout=10)
            senders.append(sock)
            sock.sendall(_payload("line", points[c * PER_CONNECTION:(c + 1) * PER_CONNECTION]))
            sock.shutdown(socket.SHUT_WR)
        time.sleep(0.5)
        for trickle in trickles:
            trickle.stop()
        relay.proc.send_signal(signal.SIGTERM)
        assert relay.proc.wait(60) == 0, relay.output()
        sink.send_signal(signal.SIGTERM)
        assert sink.wait(30) == 0
    finally:
        for trickle in trickles:
            trickle.halt.set()
        _stop(relay, sink)
    resets = _resets(senders)
    got = _arrived(out)
    sent = sorted(points[:burst * PER_CONNECTION] + [p for t in trickles for p in t.sent])
    assert (len(got), resets) == (len(sent), 0), relay.output()[-3000:]
    assert got == sent
