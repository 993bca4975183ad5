"""A whole add-host (2 -> 3 hosts) under senders that never retry: the relays take the
new ring in place (SIGHUP, carbon.relay.ring_swap), so no connection is refused and no
point is lost.

Two senders, both fire and forget: one long-lived connection to host a's relay that
writes a batch every 50 ms and never reconnects (a failed write loses the batch and
ends the sender), and one that opens a new connection to host b's relay for every
batch, writes it and closes, without retrying a failed connect or write. Every point
is counted sent when its write was attempted; afterwards every point must be in the
whisper file of its owner on the new ring. The relays run with RELAY_WORKERS = 2, so
the swap reaches the worker processes too.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import whisper

from carbon.cluster.rebalance import owners, ring
from carbon.cluster.spec import load_cluster
from tests.cluster.clusterutil import cli, cluster_file, free_ports_option

HOSTS = {"a": "127.0.0.22", "b": "127.0.0.23"}
NEW = ("c", "127.0.0.24")
METRICS = 60
STEP = 60
ROUNDS = 1300  # at most: each round is a new minute inside the 1-day schema


def names(prefix: str) -> list[str]:
    return ["%s.host%02d.m%03d" % (prefix, n % 5, n) for n in range(METRICS)]


class Sender:
    """Writes one point of each of its metrics a round, never retrying."""

    def __init__(self, address: tuple[str, int], prefix: str, base: int,
                 reconnect: bool) -> None:
        self.address, self.metrics, self.base = address, names(prefix), base
        self.reconnect = reconnect
        self.sent: dict[str, dict[int, float]] = {n: {} for n in self.metrics}
        self.points = self.refused = self.failed_writes = 0
        self.rounds = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def batch(self) -> bytes:
        k = self.rounds
        ts = self.base + k * STEP
        lines = []
        for i, name in enumerate(self.metrics):
            value = float(k * 1000 + i)
            self.sent[name][ts] = value
            lines.append("%s %r %d\n" % (name, value, ts))
        self.points += len(lines)
        self.rounds += 1
        return "".join(lines).encode()

    def run(self) -> None:
        sock = None
        if not self.reconnect:
            try:
                sock = socket.create_connection(self.address, timeout=5)
            except OSError:
                self.refused += 1
                return
        try:
            while not self.stop.is_set() and self.rounds < ROUNDS:
                data = self.batch()
                if self.reconnect:
                    try:
                        sock = socket.create_connection(self.address, timeout=5)
                    except OSError:
                        self.refused += 1  # not retried: this batch is lost
                        time.sleep(0.05)
                        continue
                try:
                    assert sock is not None
                    sock.sendall(data)
                except OSError:
                    self.failed_writes += 1
                    if not self.reconnect:
                        return  # the one connection is gone: fire and forget ends here
                if self.reconnect:
                    sock.close()
                time.sleep(0.05)
        finally:
            if sock is not None:
                sock.close()


def file_points(spec, host: str, name: str) -> dict[int, float]:
    path = Path(spec.host_dir(spec.host(host))) / "storage" / "whisper" / (
        name.replace(".", "/") + ".wsp")
    if not path.exists():
        return {}
    (start, _end, step), values = whisper.fetch(str(path), 0)
    return {start + k * step: v for k, v in enumerate(values) if v is not None}


@pytest.fixture
def cluster(tmp_path: Path):
    path = cluster_file(tmp_path, HOSTS, extra="RELAY_WORKERS = 2")
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield path
    finally:
        for spec in (tmp_path / "cluster3.toml", path):
            if spec.exists():
                cli("stop", spec)


def test_add_host_refuses_no_sender_and_loses_no_point(cluster: Path) -> None:
    began = time.monotonic()
    old = load_cluster(str(cluster))
    base = int(time.time()) // STEP * STEP - (ROUNDS + 20) * STEP
    a, b = old.host("a"), old.host("b")
    senders = [Sender((a.address, a.relay_line_port), "kept", base, reconnect=False),
               Sender((b.address, b.relay_line_port), "fresh", base, reconnect=True)]
    new_path = cluster.parent / "cluster3.toml"
    for sender in senders:
        sender.thread.start()
    try:
        time.sleep(2.0)  # history to move
        grown = cli("add-host", cluster, NEW[0], NEW[1], "--out", new_path, "--delete",
                    "--rate-files", "0", *free_ports_option())
        assert grown.returncode == 0, grown.stdout + grown.stderr
        time.sleep(1.0)  # the new ring under load
    finally:
        for sender in senders:
            sender.stop.set()
            sender.thread.join(30)
    new = load_cluster(str(new_path))
    stopped = cli("stop", new_path)  # relays flush, caches drain
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    router = ring(new)
    sent = lost = 0
    moved = 0
    for sender in senders:
        for name, points in sender.sent.items():
            holders = owners(router, new, name)
            moved += holders == ["c"]
            stored = file_points(new, holders[0], name)
            sent += len(points)
            lost += sum(1 for ts, v in points.items() if stored.get(ts) != v)
            for host in "abc":  # the old copy is gone once moved
                if host not in holders:
                    assert not file_points(new, host, name), (host, name)
    refused = sum(s.refused for s in senders)
    failed = sum(s.failed_writes for s in senders)
    print("\nno-refusal add-host: sent %d, stored %d, lost %d, refused %d, failed writes %d, "
          "metrics moved to c %d, rounds %s, %.1f s" % (
              sent, sent - lost, lost, refused, failed, moved,
              [s.rounds for s in senders], time.monotonic() - began))
    print(grown.stdout.strip())
    assert moved > 0
    assert all(s.rounds > 40 for s in senders)
    assert (refused, failed, lost) == (0, 0, 0)
