"""Length-prefixed framing (4-byte big-endian length, then the payload), as carbon's
pickle receiver and carbonlink use it."""

from __future__ import annotations

import struct

_LENGTH = struct.Struct("!I")


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
        (length,) = _LENGTH.unpack_from(buffer, offset)
        if length > max_length:
            return frames, b"", length
        end = offset + 4 + length
        if end > size:
            break
        frames.append(buffer[offset + 4:end])
        offset = end
    return frames, buffer[offset:], None


def frame(payload: bytes) -> bytes:
    """``payload`` with its length prefix."""
    return _LENGTH.pack(len(payload)) + payload
