"""A running relay (RELAY_WORKERS = 2, real processes) takes a new ring on SIGHUP without
a restart: senders that never retry see no refused connection and no failed write,
points routed before the swap keep their destination (the old one is down until after
the swap: it gets them all once it is up, then its connections are closed), points
after the swap go to the new destination only, and the master and its worker each
confirm in routing.json.

The relay routes a line when it reads it, not when it was sent: a line sent just before
the SIGHUP can still be in a socket's receive buffer when the relay handles the signal
(its reactor takes the signal and the readable sockets of one poll in any order; a
loaded machine lets it fall hundreds of milliseconds behind), and then the new ring
routes it. So the senders pause, the test waits until the relay has read every byte
sent (no unread byte and no unaccepted connection on the line port, from
/proc/net/tcp), and only then sends the SIGHUP: what was sent before it is exactly what
was routed before the swap."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

from twisted.internet import defer

from tests.relay.countsink import CountingSink
from tests.relay.harness import children, run_relays, sleep, unread, wait_for
from tests.relay.relayutil import free_port
from tests.relay.test_relay_daemon import _accepting, _start


def _write_conf(base: Path, line_port: int, pickle_port: int, dest_ports: list[int]) -> None:
    conf = base / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    (conf / "carbon.conf").write_text("\n".join([
        "[relay]", "STORAGE_DIR = %s" % (base / "storage"), "USER = ",
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % line_port,
        "PICKLE_RECEIVER_INTERFACE = 127.0.0.1", "PICKLE_RECEIVER_PORT = %d" % pickle_port,
        "RELAY_METHOD = consistent-hashing",
        "DESTINATIONS = %s" % ", ".join("127.0.0.1:%d" % p for p in dest_ports),
        "DESTINATION_PROTOCOL = line", "RELAY_WORKERS = 2",
        "CARBON_METRIC_INTERVAL = 0", "SHUTDOWN_FLUSH_TIMEOUT = 2", ""]))


class Senders:
    """A long-lived connection and a connection-per-batch sender, neither retrying;
    each batch's lines carry a sequence number as their timestamp. A batch is recorded
    with the time its sending began; ``paused`` holds both between two batches."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent: list[tuple[float, str]] = []  # (monotonic time sent, line)
        self.refused = self.failed = 0
        self.seq = 0
        self.lock = threading.Lock()
        self.gate = threading.Lock()  # held by a sender for a whole batch
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.kept), threading.Thread(target=self.fresh)]

    def batch(self, who: str) -> bytes:
        with self.lock:
            lines = []
            for i in range(20):
                self.seq += 1
                lines.append("swap.%s.m%02d 1 %d\n" % (who, i, 1_700_000_000 + self.seq))
            return "".join(lines).encode()

    def record(self, data: bytes, began: float) -> None:
        with self.lock:
            self.sent += [(began, line) for line in data.decode().splitlines()]

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No sender is in the middle of a batch until the block ends."""
        assert self.gate.acquire(timeout=10)
        try:
            yield
        finally:
            self.gate.release()

    def kept(self) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            self.refused += 1
            return
        with sock:
            while not self.stop.is_set():
                with self.gate:
                    data = self.batch("kept")
                    began = time.monotonic()
                    try:
                        sock.sendall(data)
                    except OSError:
                        self.failed += 1
                        return
                    self.record(data, began)
                time.sleep(0.02)

    def fresh(self) -> None:
        while not self.stop.is_set():
            with self.gate:
                data = self.batch("fresh")
                began = time.monotonic()
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                        sock.sendall(data)
                except ConnectionRefusedError:
                    self.refused += 1
                except OSError:
                    self.failed += 1
                else:
                    self.record(data, began)
            time.sleep(0.02)


def _names(sink: CountingSink) -> set[tuple[str, float]]:
    return {(name, ts) for name, ts, _ in sink.points}


def _key(line: str) -> tuple[str, float]:
    name, _, ts = line.split()
    return name, float(ts)


def test_sighup_swaps_the_ring_in_every_process(tmp_path: Path) -> None:
    line_port, pickle_port = free_port(), free_port()
    old_port, new_port = free_port(), free_port()
    _write_conf(tmp_path, line_port, pickle_port, [old_port])
    spools = tmp_path / "storage" / "relay-spool"
    procs = []

    def acks() -> list[dict]:
        out = []
        for folder in ("carbon-relay-a", "carbon-relay-a-w1"):
            try:
                out.append(json.loads((spools / folder / "routing.json").read_text()))
            except (OSError, ValueError):
                return []
        return out

    @defer.inlineCallbacks
    def body(reactor):
        new = CountingSink(reactor, "line", port=new_port)
        new.listen()
        relay = _start(tmp_path)
        procs.append(relay)
        yield wait_for(reactor, lambda: _accepting(line_port), timeout=20, what="line port")
        worker = children(relay.pid)
        assert len(worker) == 1
        senders = Senders(line_port)
        for thread in senders.threads:
            thread.start()
        try:
            yield sleep(reactor, 1.0)  # the old destination is down: the relay holds its points
            with senders.paused():  # the SIGHUP once the relay has routed all that was sent
                yield wait_for(reactor, lambda: unread(line_port) == 0, timeout=20,
                               what="the relay to read every byte sent")
                _write_conf(tmp_path, line_port, pickle_port, [new_port])
                hup = time.monotonic()
                os.kill(relay.pid, signal.SIGHUP)
            wanted = ["127.0.0.1:%d" % new_port]
            yield wait_for(reactor, lambda: [a.get("destinations") for a in acks()]
                           == [wanted, wanted], timeout=20, what="both processes' acks")
            switched = time.monotonic()
            assert sorted(a["pid"] for a in acks()) == sorted([relay.pid, *worker])
            assert sorted(acks()[0]["workers"]) == worker
            yield sleep(reactor, 1.0)
        finally:
            senders.stop.set()
            for thread in senders.threads:
                thread.join(10)
        back = CountingSink(reactor, "line", port=old_port)  # the old one comes back
        back.listen()
        before = {_key(line) for at, line in senders.sent if at < hup}
        after = {_key(line) for at, line in senders.sent if at > switched}
        everything = {_key(line) for _, line in senders.sent}
        yield wait_for(reactor, lambda: before <= _names(back), timeout=30,
                       what="points routed before the swap, at the old destination")
        yield wait_for(reactor, lambda: everything <= _names(back) | _names(new),
                       timeout=30, what="every point somewhere")
        yield wait_for(reactor, lambda: back.accepted > 0 and not back.connections,
                       timeout=30, what="the dropped destination's connections closed")
        assert after and after <= _names(new)
        assert not after & _names(back)
        assert not before & _names(new)
        assert relay.poll() is None and children(relay.pid) == worker  # no restart
        assert (senders.refused, senders.failed) == (0, 0)
        log = (tmp_path / "storage" / "log" / "carbon-relay-a" / "console.log")
        if log.exists():
            assert "unknown key" not in log.read_text()
        os.kill(relay.pid, signal.SIGTERM)
        yield wait_for(reactor, lambda: relay.poll() is not None, timeout=30, what="stop")
        yield new.stop()
        yield back.stop()

    run_relays(body, procs, timeout=120)
