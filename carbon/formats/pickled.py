"""The pickle protocol: length-prefixed frames of pickled ``[(metric, (timestamp, value))]``.

A frame is a 4-byte big-endian length, then the payload, as carbon 1.1.10's pickle
receiver, its relays' pickle client and carbonlink (both ends) use it. Payloads are
unpickled with :mod:`carbon.formats.unpickler`; ``native_points`` (C, ``_pickled.c``)
reads the common message straight into a batch, exactly as ``points_from_pickle`` of the
safely unpickled list would.
"""

from __future__ import annotations

import pickle
import socket
import struct
import time
from typing import Any

from carbon.batch import Batch
from carbon.formats.plaintext import LineBatch
from carbon.formats.unpickler import PICKLE_ERRORS, safe_loads

try:  # optional C accelerator (setup.py builds it): reads the common message directly
    from carbon.formats._pickled import points as native_points
except ImportError:  # pragma: no cover - built without a compiler
    native_points = None

__all__ = ["LENGTH", "frame", "frame_length", "recv_exactly", "split_frames", "WireItems",
           "wire_items", "items_from_lines", "encode_pickle_items", "encode_pickle",
           "decode_pickle_stream", "points_from_pickle", "native_points"]

LENGTH = struct.Struct("!L")

# A pickle message's items: ``(metric, (timestamp, value))``.
WireItems = list[tuple[str, tuple[float, float]]]


def frame(payload: bytes) -> bytes:
    """``payload`` with its length prefix."""
    return LENGTH.pack(len(payload)) + payload


def frame_length(prefix: bytes) -> int:
    """The payload length announced by a frame's 4 prefix bytes."""
    return LENGTH.unpack(prefix)[0]


def recv_exactly(sock: socket.socket, size: int, deadline: float | None = None) -> bytes:
    """Exactly ``size`` bytes from ``sock``: EOFError if the peer closes first,
    TimeoutError once ``deadline`` (a ``time.monotonic()`` value) has passed."""
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("answer not complete in time (%d of %d bytes)" % (got, size))
            sock.settimeout(left)
        chunk = sock.recv(min(size - got, 1 << 20))
        if not chunk:
            raise EOFError("connection closed after %d of %d bytes" % (got, size))
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def split_frames(buffer: bytes, max_length: int) -> tuple[list[bytes], bytes, int | None]:
    """The complete payloads at the start of ``buffer``, the unfinished rest, and the
    announced length of a frame over ``max_length`` (None if there is none).

    Splitting stops at an oversized frame: the payloads before it are returned and
    the rest is empty, since the stream cannot be resynchronised.
    """
    frames: list[bytes] = []
    offset = 0
    size = len(buffer)
    while size - offset >= 4:
        (length,) = LENGTH.unpack_from(buffer, offset)
        if length > max_length:
            return frames, b"", length
        end = offset + 4 + length
        if end > size:
            break
        frames.append(buffer[offset + 4:end])
        offset = end
    return frames, buffer[offset:], None


def wire_items(points: Batch) -> WireItems:
    """Points reshaped into pickle message items."""
    return [(m, (t, v)) for m, t, v in points]


def items_from_lines(batch: LineBatch) -> WireItems:
    """A LineBatch as pickle message items, made with C-level maps and zips."""
    if batch.values is None or batch.stamps is None:
        return wire_items(batch.points())
    return list(zip(map(bytes.decode, batch.names),
                    zip(map(float, batch.stamps), map(float, batch.values), strict=True),
                    strict=True))


def encode_pickle_items(items: WireItems, max_per_message: int = 500
                        ) -> tuple[bytes, int, int]:
    """Frame message items as pickle messages; returns (bytes, messages, points)."""
    step = max(1, int(max_per_message))
    frames: list[bytes] = []
    pack = LENGTH.pack
    dumps = pickle.dumps  # byte for byte what the reference sends (memo and all)
    for start in range(0, len(items), step):
        body = dumps(items[start:start + step], 2)
        frames.append(pack(len(body)))
        frames.append(body)
    return b"".join(frames), len(frames) // 2, len(items)


def encode_pickle(points: Batch, max_per_message: int = 500) -> tuple[bytes, int, int]:
    """Frame ``points`` as pickle messages; returns (bytes, messages, points)."""
    return encode_pickle_items(wire_items(points), max_per_message)


def decode_pickle_stream(buffer: bytes) -> tuple[Batch, bytes, int]:
    """Decode complete pickle frames; returns (points, unconsumed tail, bad datapoints or
    frames). A frame that does not unpickle counts as one bad; its neighbours are kept."""
    points: Batch = []
    bad = 0
    frames, tail, _ = split_frames(buffer, 1 << 32)
    for body in frames:
        try:
            read, wrong = points_from_pickle(safe_loads(body))
        except PICKLE_ERRORS:
            bad += 1
            continue
        points.extend(read)
        bad += wrong
    return points, tail, bad


def points_from_pickle(items: Any) -> tuple[Batch, int]:
    """Convert an unpickled ``[(metric, (timestamp, value)), ...]`` list to a batch."""
    batch: Batch = []
    bad = 0
    if not isinstance(items, (list, tuple)):
        return batch, 1
    for item in items:
        try:
            metric, (stamp, value) = item
            stamp = float(stamp)
            value = float(value)
            if isinstance(metric, bytes):
                metric = metric.decode("utf-8")
            elif not isinstance(metric, str):
                raise TypeError("metric name is not a string")
        except (TypeError, ValueError, UnicodeDecodeError):
            bad += 1
            continue
        if value - value != 0.0 or stamp - stamp != 0.0 or not metric:
            bad += 1
            continue
        batch.append((metric, stamp, value))
    return batch, bad
