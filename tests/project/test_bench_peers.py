"""The bench helpers that measure against VictoriaMetrics: the rate search's paced sender
(bench/ingest_bench.py RateSender) over real sockets, and the render bench's check that
two stores answered the same series (bench/render_bench.py same_series)."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_script(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / (name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


class Collector:
    """A plaintext listener on 127.0.0.1 that keeps every byte of every connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.chunks: list[bytes] = []
        self.threads: list[threading.Thread] = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._read, args=(conn,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _read(self, conn: socket.socket) -> None:
        parts = []
        with conn:
            while data := conn.recv(65536):
                parts.append(data)
        self.chunks.append(b"".join(parts))

    def lines(self) -> list[bytes]:
        self.server.close()
        for thread in self.threads:
            thread.join(10)
        return [line for chunk in self.chunks for line in chunk.split(b"\n") if line]


def test_rate_sender_paces_and_counts_every_metrics_points() -> None:
    ingest = load_script("ingest_bench")
    ingest.LOAD["connections"] = 2
    names = ["bench.host%03d.metric%05d" % (i % 100, i) for i in range(7)]
    collector = Collector()
    sender = ingest.RateSender(collector.port, names, 1_700_000_000)
    sender.run(200.0, 0.5)        # 100 points, 2 connections: shares of 4 and 3 metrics
    first = sum(sender.lines)
    sender.run(400.0, 0.25)       # 100 more: the stamps go on where the first run ended
    total = sum(sender.lines)
    expected = {name: sender.metric_points(c, p) for c, share in enumerate(sender.shares)
                for p, name in enumerate(share)}
    last = sender.last_stamp()
    sender.close()
    lines = collector.lines()
    assert first == 100 and total == 200 == len(lines)
    stamps = defaultdict(list)
    for line in lines:
        name, value, stamp = line.decode().split(" ")
        assert 0.0 <= float(value) < 100.0
        stamps[name].append(int(stamp))
    assert {name: len(seen) for name, seen in stamps.items()} == expected
    for seen in stamps.values():   # each metric's k-th point at stamp + 10 k, none twice
        assert seen == [1_700_000_000 + 10 * k for k in range(len(seen))]
    assert last == max(max(seen) for seen in stamps.values())


def series(target: str, values: list) -> dict:
    return {"target": target, "datapoints": [[v, 1000 + 10 * i] for i, v in enumerate(values)]}


def test_same_series_allows_a_shifted_step_but_not_holes_or_other_names() -> None:
    render = load_script("render_bench")
    ours = json.dumps([series("a", [1.0, 2.0, 3.0]), series("b", [4.0, 5.0, 6.0])]).encode()
    shifted = json.dumps([series("b", [None, 4.0, 5.0]),
                          series("a", [None, 1.0, 2.0])]).encode()
    why, note = render.same_series(ours, shifted)
    assert why is None and "[6, 6] vs [6, 4]" in note
    holes = json.dumps([series("a", [None, 1.0, None]), series("b", [4.0, 5.0, 6.0])]).encode()
    assert "1 series have holes" in render.same_series(ours, holes)[0]
    other = json.dumps([series("a", [1.0, 2.0, 3.0])]).encode()
    assert "2 series vs 1" in render.same_series(ours, other)[0]


def test_rate_sender_stops_at_the_end_of_the_step_when_the_server_reads_slowly() -> None:
    ingest = load_script("ingest_bench")
    ingest.LOAD["connections"] = 2
    server = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    done = threading.Event()

    def slow() -> None:       # accepts both, then reads 4 KiB every 50 ms (~160 KB/s)
        for _ in range(2):
            conns.append(server.accept()[0])
        while not done.is_set():
            for conn in conns:
                conn.setblocking(False)
                try:
                    conn.recv(4096)
                except BlockingIOError:
                    pass
            done.wait(0.05)

    reader = threading.Thread(target=slow, daemon=True)
    reader.start()
    names = ["bench.host%03d.metric%05d" % (i % 100, i) for i in range(2000)]
    sender = ingest.RateSender(server.getsockname()[1], names, 1_700_000_000)
    try:
        started = time.monotonic()
        sender.run(1_000_000.0, 0.5)       # ~25 MB due, far more than the socket buffers
        took = time.monotonic() - started
        assert took < 1.5                  # it stopped at the step's end, not when all was sent
        assert sum(sender.lines) < 0.99 * 500_000
    finally:
        done.set()
        for conn in conns:
            conn.close()
        sender.close()
        server.close()
