"""AMQP 0-9-1 framing: constants, field encoders and a payload reader (no I/O)."""

from __future__ import annotations

import struct
from typing import Any

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MAX = 131072
CHANNEL = 1

CONNECTION_START, CONNECTION_START_OK = (10, 10), (10, 11)
CONNECTION_TUNE, CONNECTION_TUNE_OK = (10, 30), (10, 31)
CONNECTION_OPEN, CONNECTION_OPEN_OK = (10, 40), (10, 41)
CONNECTION_CLOSE, CONNECTION_CLOSE_OK = (10, 50), (10, 51)
CONNECTION_BLOCKED, CONNECTION_UNBLOCKED = (10, 60), (10, 61)
CHANNEL_OPEN, CHANNEL_OPEN_OK = (20, 10), (20, 11)
CHANNEL_CLOSE, CHANNEL_CLOSE_OK = (20, 40), (20, 41)
EXCHANGE_DECLARE, EXCHANGE_DECLARE_OK = (40, 10), (40, 11)
QUEUE_DECLARE, QUEUE_DECLARE_OK = (50, 10), (50, 11)
QUEUE_BIND, QUEUE_BIND_OK = (50, 20), (50, 21)
BASIC_QOS, BASIC_QOS_OK = (60, 10), (60, 11)
BASIC_CONSUME, BASIC_CONSUME_OK = (60, 20), (60, 21)
BASIC_PUBLISH, BASIC_DELIVER = (60, 40), (60, 60)
BASIC_ACK, BASIC_NACK = (60, 80), (60, 120)
CONFIRM_SELECT, CONFIRM_SELECT_OK = (85, 10), (85, 11)


class AMQPError(Exception):
    """The broker closed the connection or channel, or broke the protocol."""


# -- encoding -----------------------------------------------------------------
def shortstr(value: str | bytes) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    if len(data) > 255:
        raise ValueError("AMQP short string longer than 255 bytes: %r" % data[:40])
    return bytes([len(data)]) + data


def longstr(value: str | bytes) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return struct.pack("!I", len(data)) + data


def table(fields: dict[str, Any] | None = None) -> bytes:
    """A field table of str, bool, int and nested dict values."""
    out = []
    for key, value in (fields or {}).items():
        out.append(shortstr(key))
        if isinstance(value, bool):
            out.append(b"t" + bytes([value]))
        elif isinstance(value, int):
            out.append(b"I" + struct.pack("!i", value))
        elif isinstance(value, dict):
            out.append(b"F" + table(value))
        else:
            out.append(b"S" + longstr(str(value)))
    return longstr(b"".join(out))


def bits(*flags: bool) -> bytes:
    return bytes([sum(1 << i for i, flag in enumerate(flags) if flag)])


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack("!BHI", kind, channel, len(payload)) + payload + b"\xce"


def method_frame(channel: int, method: tuple[int, int], args: bytes = b"") -> bytes:
    return frame(FRAME_METHOD, channel, struct.pack("!HH", *method) + args)


def content_frames(channel: int, body: bytes, frame_max: int, persistent: bool) -> bytes:
    """Header frame (delivery-mode property only) and body frames for basic.publish."""
    if persistent:
        header = struct.pack("!HHQH", 60, 0, len(body), 0x1000) + b"\x02"
    else:
        header = struct.pack("!HHQH", 60, 0, len(body), 0)
    parts = [frame(FRAME_HEADER, channel, header)]
    step = max(frame_max - 8, 1)
    for start in range(0, len(body), step):
        parts.append(frame(FRAME_BODY, channel, body[start:start + step]))
    return b"".join(parts)


# -- decoding -----------------------------------------------------------------
class Reader:
    """Reads AMQP fields from one method payload."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.offset = offset

    def _unpack(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.offset)[0]
        self.offset += struct.calcsize(fmt)
        return value

    def octet(self) -> int:
        return self._unpack("!B")

    def short(self) -> int:
        return self._unpack("!H")

    def long(self) -> int:
        return self._unpack("!I")

    def longlong(self) -> int:
        return self._unpack("!Q")

    def shortstr(self) -> bytes:
        size = self.octet()
        value = self.data[self.offset:self.offset + size]
        self.offset += size
        return value

    def longstr(self) -> bytes:
        size = self.long()
        value = self.data[self.offset:self.offset + size]
        self.offset += size
        return value

    skip_table = longstr
