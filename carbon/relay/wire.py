"""Wire formats a relay sends, encoded a whole buffer at a time.

* ``pickle`` (DESTINATION_PROTOCOL default): messages of at most
  MAX_DATAPOINTS_PER_MESSAGE points, each a 4-byte big-endian length followed by a
  protocol-2 pickle of ``[(metric, (timestamp, value)), ...]`` -- carbon 1.1.10's framing.
* ``line``: ``metric value timestamp\\r\\n`` per point, the value formatted as the
  reference does (``%.10f`` without trailing zeros) and the timestamp as an integer.

The decoders are used to convert spooled data written under another protocol and by
the test and benchmark sinks.
"""

from __future__ import annotations

import pickle
import struct
from typing import Callable

from carbon.pipeline import Batch
from carbon.receivers.unpickler import PICKLE_ERRORS, safe_loads

_LENGTH = struct.Struct("!L")
LINE_DELIMITER = b"\r\n"

# encode(points, max_per_message) -> (payload, messages, points_encoded)
Encoder = Callable[[Batch, int], tuple[bytes, int, int]]


# A pickle message's items: ``(metric, (timestamp, value))``.
WireItems = list[tuple[str, tuple[float, float]]]


def wire_items(points: Batch) -> WireItems:
    """Points reshaped into pickle message items."""
    return [(m, (t, v)) for m, t, v in points]


def encode_pickle_items(items: WireItems, max_per_message: int = 500
                        ) -> tuple[bytes, int, int]:
    """Frame message items as pickle messages; returns (bytes, messages, points)."""
    step = max(1, int(max_per_message))
    frames: list[bytes] = []
    pack = _LENGTH.pack
    dumps = pickle.dumps  # byte for byte what the reference sends (memo and all)
    for start in range(0, len(items), step):
        body = dumps(items[start:start + step], 2)
        frames.append(pack(len(body)))
        frames.append(body)
    return b"".join(frames), len(frames) // 2, len(items)


def encode_pickle(points: Batch, max_per_message: int = 500) -> tuple[bytes, int, int]:
    """Frame ``points`` as pickle messages; returns (bytes, messages, points)."""
    return encode_pickle_items(wire_items(points), max_per_message)


def format_value(value: float) -> str:
    """The reference line client's value text: ``%.10f`` minus trailing zeros and dot."""
    if isinstance(value, float):
        return ("%.10f" % value).rstrip("0").rstrip(".")
    return "%d" % value


def encode_line(points: Batch, max_per_message: int = 500) -> tuple[bytes, int, int]:
    """Encode ``points`` as plaintext lines; points that cannot be written are skipped."""
    try:
        text = "".join(["%s %s %d\r\n" % (m, ("%.10f" % v).rstrip("0").rstrip("."), t)
                        for m, t, v in points])
        return text.encode("utf-8"), len(points), len(points)
    except (ValueError, OverflowError, TypeError):
        pass
    lines = []
    for m, t, v in points:
        try:
            lines.append("%s %s %d\r\n" % (m, format_value(v), t))
        except (ValueError, OverflowError, TypeError):
            continue
    return "".join(lines).encode("utf-8"), len(lines), len(lines)


ENCODERS: dict[str, Encoder] = {"pickle": encode_pickle, "line": encode_line}


def decode_pickle_stream(buffer: bytes) -> tuple[Batch, bytes, int]:
    """Decode complete pickle frames; returns (points, unconsumed tail, bad frames)."""
    points: Batch = []
    bad = 0
    offset, size = 0, len(buffer)
    unpack = _LENGTH.unpack_from
    while size - offset >= 4:
        (length,) = unpack(buffer, offset)
        if size - offset - 4 < length:
            break
        body = buffer[offset + 4:offset + 4 + length]
        offset += 4 + length
        try:
            for metric, (timestamp, value) in safe_loads(body):
                points.append((metric, float(timestamp), float(value)))
        except PICKLE_ERRORS:
            bad += 1
    return points, buffer[offset:], bad


def decode_line_stream(buffer: bytes) -> tuple[Batch, bytes, int]:
    """Decode complete lines; returns (points, unfinished tail, bad lines)."""
    lines = buffer.split(b"\n")
    tail = lines.pop()
    points: Batch = []
    bad = 0
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        try:
            metric, value, timestamp = parts
            points.append((metric.decode("utf-8"), float(timestamp), float(value)))
        except (ValueError, UnicodeDecodeError):
            bad += 1
    return points, tail, bad


DECODERS = {"pickle": decode_pickle_stream, "line": decode_line_stream}


def encoder_for(protocol: str) -> Encoder:
    """The encoder of a DESTINATION_PROTOCOL; ValueError naming the known ones."""
    try:
        return ENCODERS[protocol]
    except KeyError:
        raise ValueError("DESTINATION_PROTOCOL must be one of %s. Invalid value: '%s'"
                         % (", ".join(sorted(ENCODERS)), protocol)) from None
