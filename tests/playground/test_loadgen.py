"""The load generator against a real counting socket: exact counts, unique timestamps."""

from __future__ import annotations

import pickle
import socket
import struct
import threading
import time

import pytest

from carbon.playground.loadgen import LoadProfile, profile_from, run_load


class Collector:
    """A loopback TCP server keeping every byte each connection sends."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytearray] = []
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            buffer = bytearray()
            self.received.append(buffer)
            thread = threading.Thread(target=self._read, args=(conn, buffer), daemon=True)
            thread.start()
            self.threads.append(thread)

    @staticmethod
    def _read(conn: socket.socket, buffer: bytearray) -> None:
        with conn:
            while chunk := conn.recv(1 << 16):
                buffer.extend(chunk)

    def close(self, connections: int = 1) -> None:
        """Wait for ``connections`` connections to be accepted and read to their end."""
        deadline = time.monotonic() + 10
        while len(self.threads) < connections and time.monotonic() < deadline:
            time.sleep(0.01)
        for thread in list(self.threads):
            thread.join(10)
        self.sock.close()


def plaintext_points(data: bytes) -> list[tuple[str, float, int]]:
    out = []
    for line in data.decode().splitlines():
        name, value, stamp = line.split(" ")
        out.append((name, float(value), int(stamp)))
    return out


def pickle_points(data: bytes) -> list[tuple[str, float, int]]:
    out, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("!L", data, offset)
        for name, (stamp, value) in pickle.loads(data[offset + 4:offset + 4 + length]):
            out.append((name, value, int(stamp)))
        offset += 4 + length
    return out


@pytest.mark.parametrize("protocol", ["plaintext", "pickle"])
def test_point_count_exact_and_each_metric_timestamp_sent_once(protocol: str) -> None:
    sink = Collector()
    profile = LoadProfile(port=sink.port, protocol=protocol, metrics=300, points=2000,
                          duration=0, connections=3, step=10, start=1_700_000_000,
                          pattern="load.metric{i};dc=d{g}", groups=7)
    result = run_load(profile)
    sink.close(3)
    parse = plaintext_points if protocol == "plaintext" else pickle_points
    points = [point for data in sink.received for point in parse(bytes(data))]
    assert result.sent == 2000 == len(points) == sum(result.per_second)
    assert len({(name, stamp) for name, _, stamp in points}) == 2000
    names = {name for name, _, _ in points}
    assert len(names) == result.names == 300
    assert "load.metric5;dc=d5" in names
    stamps = {stamp for _, _, stamp in points}
    assert min(stamps) == result.first_timestamp == 1_700_000_000
    assert max(stamps) == result.last_timestamp
    assert all((stamp - 1_700_000_000) % 10 == 0 for stamp in stamps)


def test_rate_and_new_metrics_per_minute() -> None:
    sink = Collector()
    profile = LoadProfile(port=sink.port, metrics=100, rate=4000, duration=1.5,
                          new_per_minute=1200, new_pattern="fresh.m{i}")
    result = run_load(profile)
    sink.close()
    assert 4000 <= result.sent <= 7000  # 1.5 s at 4000/s, loosely (loaded machine)
    points = plaintext_points(b"".join(sink.received))
    fresh = {name for name, _, _ in points if name.startswith("fresh.")}
    assert 20 <= len(fresh) <= 31  # 1200 a minute for 1.5 s


def test_bad_profile_names_the_setting() -> None:
    with pytest.raises(ValueError, match="protocol"):
        profile_from({"protocol": "udp"})
    with pytest.raises(ValueError, match="colour: unknown load setting"):
        profile_from({"colour": 1})
    with pytest.raises(ValueError, match="pattern"):
        profile_from({"pattern": "a.{host}"})
