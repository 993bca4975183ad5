"""AMQP 0-9-1 string and field-table encoding that txAMQP gets wrong or lacks.

txAMQP writes a ``str``'s length as its count of characters, so any non-ASCII
name (routing key, vhost, password) corrupts the frame: every string we hand it
goes through ``wire()`` first and is bytes. Its table encoder knows only strings
and 32-bit unsigned integers (no booleans, nested tables, 64-bit or negative
numbers, lists), which connection capabilities and message headers need; tables
are encoded here and travel as txAMQP long strings (see ``carbon.amqp.spec``).
"""

from __future__ import annotations

import struct
from typing import Any, Mapping


class AMQPError(Exception):
    """The broker refused us, closed the connection, or a value cannot be sent."""


def wire(value: str | bytes) -> bytes:
    """A text field as the UTF-8 bytes AMQP carries."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def short_wire(value: str | bytes) -> bytes:
    """A short-string field: at most 255 bytes once encoded."""
    data = wire(value)
    if len(data) > 255:
        raise AMQPError("AMQP short string longer than 255 bytes: %r" % data[:40])
    return data


def text(value: str | bytes) -> str:
    """txAMQP decodes received strings when they are valid UTF-8; make them all str."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def table(fields: Mapping[str, Any]) -> bytes:
    """A field table's content (txAMQP adds the length as for any long string)."""
    out = bytearray()
    for key, value in fields.items():
        name = short_wire(key)
        out += bytes([len(name)]) + name + _value(value)
    return bytes(out)


def _value(value: Any) -> bytes:
    if value is None:
        return b"V"
    if isinstance(value, bool):
        return b"t" + bytes([value])
    if isinstance(value, int):
        return b"l" + struct.pack("!q", value)
    if isinstance(value, float):
        return b"d" + struct.pack("!d", value)
    if isinstance(value, (str, bytes)):
        data = wire(value)
        return b"S" + struct.pack("!I", len(data)) + data
    if isinstance(value, Mapping):
        data = table(value)
        return b"F" + struct.pack("!I", len(data)) + data
    if isinstance(value, (list, tuple)):
        data = b"".join(_value(item) for item in value)
        return b"A" + struct.pack("!I", len(data)) + data
    raise AMQPError("no AMQP field type for %r" % (value,))
