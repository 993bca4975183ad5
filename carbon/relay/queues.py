"""A destination's memory queue, in the form its wire protocol sends.

* ``PointQueue`` (pickle): message items ``(metric, (timestamp, value))``, framed into
  pickle messages of MAX_DATAPOINTS_PER_MESSAGE points when taken.
* ``LineQueue`` (line): payloads already encoded as ``name value timestamp\\r\\n``
  lines.

Tuple batches are converted when queued (``add``); the relay's lean path queues what
it made in bulk from received lines (``add_prepared``: message items, or the lines'
bytes as they came). Both answer ``queued`` (points), ``take(limit) -> (payload,
messages, points)`` and ``take_points(limit)`` (tuples again, for DYNAMIC_ROUTER).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from carbon.pipeline import Batch
from carbon.formats.pickled import WireItems, encode_pickle_items, wire_items
from carbon.formats.plaintext import decode_line_stream, encode_line


class PointQueue:
    """Pickle message items, framed when taken."""

    def __init__(self, per_message: int) -> None:
        self.per_message = per_message
        self.chunks: deque[WireItems] = deque()
        self.queued = 0

    def __len__(self) -> int:
        return len(self.chunks)

    def add(self, points: Batch) -> int:
        """Queue ``points``; returns how many were queued."""
        self.add_prepared(wire_items(points), len(points))
        return len(points)

    def add_prepared(self, items: Any, count: int) -> None:
        """Queue a list of ``count`` message items (the list becomes the queue's)."""
        self.chunks.append(items)
        self.queued += count

    def _take(self, limit: int) -> WireItems:
        taken: WireItems = []
        chunks = self.chunks
        while chunks and len(taken) < limit:
            chunk = chunks.popleft()
            room = limit - len(taken)
            if len(chunk) > room:
                chunks.appendleft(chunk[room:])
                chunk = chunk[:room]
            if taken:
                taken.extend(chunk)
            else:
                taken = chunk  # popped from the queue (or a fresh slice): ours to extend
        self.queued -= len(taken)
        return taken

    def take(self, limit: int) -> tuple[bytes, int, int]:
        return encode_pickle_items(self._take(limit), self.per_message)

    def take_points(self, limit: int) -> Batch:
        return [(m, t, v) for m, (t, v) in self._take(limit)]


class LineQueue:
    """Encoded line payloads with their point counts."""

    def __init__(self, per_message: int = 1) -> None:
        self.chunks: deque[tuple[bytes, int]] = deque()
        self.queued = 0

    def __len__(self) -> int:
        return len(self.chunks)

    def add(self, points: Batch) -> int:
        """Encode and queue ``points`` (points that cannot be written are skipped);
        returns how many were queued."""
        payload, _, count = encode_line(points)
        if count:
            self.add_prepared(payload, count)
        return count

    def add_prepared(self, payload: Any, count: int) -> None:
        """Queue ``count`` lines already encoded, each ending in ``\\r\\n``."""
        self.chunks.append((payload, count))
        self.queued += count

    def take(self, limit: int) -> tuple[bytes, int, int]:
        """Whole payloads totalling at least one and about ``limit`` points."""
        chunks = self.chunks
        payload, count = chunks.popleft()
        if chunks and count < limit:
            parts = [payload]
            while chunks and count < limit:
                more, number = chunks.popleft()
                parts.append(more)
                count += number
            payload = b"".join(parts)
        self.queued -= count
        return payload, count, count

    def take_points(self, limit: int) -> Batch:
        if not self.chunks:
            return []
        payload, _, _ = self.take(limit)
        return decode_line_stream(payload)[0]
