"""A destination's memory queue, in the form its wire protocol sends.

* ``PointQueue`` (pickle): the point lists ``route_batch`` made, framed into pickle
  messages of MAX_DATAPOINTS_PER_MESSAGE points when taken.
* ``LineQueue`` (line): payloads already encoded as ``name value timestamp\\r\\n``
  lines: tuple batches are encoded when queued, and the relay's lean path queues the
  received lines' bytes as they are. Taking joins whole payloads.

Both answer ``queued`` (points), ``take(limit) -> (payload, messages, points)`` and
``take_points(limit)`` (the points as tuples, for DYNAMIC_ROUTER re-routing).
"""

from __future__ import annotations

from collections import deque

from carbon.pipeline import Batch
from carbon.relay.wire import decode_line_stream, encode_line, encode_pickle


class PointQueue:
    """Point lists, encoded as pickle messages when taken."""

    def __init__(self, per_message: int) -> None:
        self.per_message = per_message
        self.chunks: deque[Batch] = deque()
        self.queued = 0

    def __len__(self) -> int:
        return len(self.chunks)

    def add(self, points: Batch) -> int:
        """Queue ``points``; returns how many were queued."""
        self.chunks.append(points)
        self.queued += len(points)
        return len(points)

    def take_points(self, limit: int) -> Batch:
        taken: Batch = []
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
        return encode_pickle(self.take_points(limit), self.per_message)


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
            self.add_encoded(payload, count)
        return count

    def add_encoded(self, payload: bytes, count: int) -> None:
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
