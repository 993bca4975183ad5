"""The resend window of one destination: the last payloads written to its connection.

Carbon's protocols carry no acknowledgements: bytes written to a socket may sit in
our send buffer, on the wire or in the peer's receive buffer when the connection
ends, and are then lost without a trace. A ``ResendWindow`` keeps references to the
payloads written last (no copy: they are the bytes handed to the transport), bounded
by ``max_bytes`` (the newest payload is always kept) and by age (``max_seconds``).
When the connection ends without proof of delivery, ``take`` hands them back, oldest
first, to be sent again.
"""

from __future__ import annotations

from collections import deque


class ResendWindow:
    """Payloads written in the last ``max_seconds``, at most about ``max_bytes``."""

    def __init__(self, max_bytes: int, max_seconds: float) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.max_seconds = max(0.0, float(max_seconds))
        self.enabled = self.max_bytes > 0 and self.max_seconds > 0
        self.entries: deque[tuple[float, bytes, int]] = deque()  # (written at, payload, points)
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def points(self) -> int:
        return sum(entry[2] for entry in self.entries)

    def add(self, payload: bytes, count: int, now: float) -> None:
        """Remember a payload just written; forget the oldest beyond the bounds."""
        if not self.enabled or not count:
            return
        self.entries.append((now, payload, count))
        self.bytes += len(payload)
        entries = self.entries
        while len(entries) > 1 and self.bytes > self.max_bytes:
            self.bytes -= len(entries.popleft()[1])
        self.expire(now)

    def expire(self, now: float) -> None:
        """Forget payloads written more than ``max_seconds`` ago."""
        entries, oldest = self.entries, now - self.max_seconds
        while entries and entries[0][0] < oldest:
            self.bytes -= len(entries.popleft()[1])

    def take(self, now: float) -> tuple[list[tuple[bytes, int]], float]:
        """Empty the window: ([(payload, points)] oldest first, seconds it spans)."""
        self.expire(now)
        entries = self.entries
        span = now - entries[0][0] if entries else 0.0
        records = [(payload, count) for _, payload, count in entries]
        entries.clear()
        self.bytes = 0
        return records, span
