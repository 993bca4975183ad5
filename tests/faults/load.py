"""Shared pieces of the fault tests: a 1-second schema, a paced line sender, counting."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from tests.support import CarbonInstance, read_whisper

SECOND_SCHEMA = """[fault]
pattern = ^fault\\.
retentions = 1s:1d

[default]
pattern = .*
retentions = 60s:1d
"""


def one_second_schema(instance: CarbonInstance) -> None:
    """Store ``fault.*`` metrics at 1 s resolution (one slot per point sent)."""
    (instance.conf / "storage-schemas.conf").write_text(SECOND_SCHEMA)


def fault_lines(count: int, names: int, start: int) -> list[bytes]:
    """``count`` unique points: metric i % names at timestamp start + i // names, value i."""
    return [b"fault.m%d %d %d\n" % (i % names, i, start + i // names) for i in range(count)]


class PacedSender(threading.Thread):
    """Sends lines to a TCP port in chunks at about ``rate`` lines a second, reconnecting
    when refused; ``sent`` counts lines handed to the kernel."""

    def __init__(self, port: int, lines: list[bytes], rate: float, chunk: int = 2000,
                 limit: float = 120.0) -> None:
        super().__init__(daemon=True)
        self.port, self.lines, self.rate, self.chunk = port, lines, rate, chunk
        self.limit = limit
        self.sent = 0
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            began = time.monotonic()
            with sock:
                while self.sent < len(self.lines):
                    if time.monotonic() - began > self.limit:
                        raise TimeoutError("sender ran past %.0f s" % self.limit)
                    part = self.lines[self.sent:self.sent + self.chunk]
                    sock.sendall(b"".join(part))
                    self.sent += len(part)
                    ahead = self.sent / self.rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        except Exception as exc:  # reported by the test
            self.error = exc


def count_stored(storage: Path, names: int, start: int, end: int,
                 expected: dict[tuple[int, int], float]) -> tuple[int, int]:
    """(points stored with the value sent, points stored with another value)."""
    good = wrong = 0
    for n in range(names):
        path = storage / "whisper" / "fault" / ("m%d.wsp" % n)
        for stamp, value in read_whisper(path, start - 1, end + 1).items():
            want = expected.get((n, stamp))
            if want is None:
                continue
            if value == want:
                good += 1
            else:
                wrong += 1
    return good, wrong


def expected_points(count: int, names: int, start: int) -> dict[tuple[int, int], float]:
    return {(i % names, start + i // names): float(i) for i in range(count)}
