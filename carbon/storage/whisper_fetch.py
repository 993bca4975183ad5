"""whisper 1.1.10's fetch arithmetic: which archive a range reads, the range's intervals,
where its points lie in the archive ring and how the read points decode to values.

The one home of these rules: the render app's reader (webapp.storage.whisper_read) and
the resize (carbon.storage.whisper_resize, which fetches like whisper-resize.py) use them.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Optional

from carbon.storage import whisper_format
from carbon.storage.whisper_format import (
    POINT, POINT_SIZE, CorruptWhisperFile, InvalidTimeInterval,
)

__all__ = ["choose_archive", "interval_range", "archive_ranges", "decode_values"]


def choose_archive(header: dict, from_time: int, until_time: Optional[int],
                   now: Optional[int]) -> tuple[Optional[dict], int, int]:
    """(archive, from, until) as whisper.file_fetch picks them; archive None = no data."""
    if now is None:
        now = int(time.time())
    if until_time is None:
        until_time = now
    from_time = int(from_time)
    until_time = int(until_time)
    if from_time > until_time:
        raise InvalidTimeInterval(
            "Invalid time interval: from time '%s' is after until time '%s'"
            % (from_time, until_time))
    oldest = now - header['maxRetention']
    if from_time > now or until_time < oldest:
        return None, from_time, until_time
    if from_time < oldest:
        from_time = oldest
    if until_time > now:
        until_time = now
    diff = now - from_time
    archive = None
    for archive in header['archives']:
        if archive['retention'] >= diff:
            break
    if archive is None:
        raise CorruptWhisperFile('No archives', '')
    return archive, from_time, until_time


def interval_range(step: int, from_time: int, until_time: int) -> tuple[int, int, int]:
    """whisper's (from, until, step) of a fetch: both ends moved to the next step
    boundary, one step apart at least."""
    from_interval = int(from_time - (from_time % step)) + step
    until_interval = int(until_time - (until_time % step)) + step
    if from_interval == until_interval:
        until_interval += step
    return from_interval, until_interval, step


def archive_ranges(archive: dict[str, Any], from_time: int, until_time: int, read: Any,
            name: str) -> tuple[tuple[int, int, int], int, list[tuple[int, int]]]:
    """(time_info, base interval, [(offset, size), ...]) of the range: one (offset, size)
    or two when it wraps around the archive's end; none when the archive is empty."""
    time_info = interval_range(archive['secondsPerPoint'], from_time, until_time)
    from_interval, until_interval, step = time_info
    offset, size = archive['offset'], archive['size']
    try:
        base_interval, _ = POINT.unpack(read(offset, POINT_SIZE))
    except struct.error:
        raise CorruptWhisperFile("Unable to read base datapoint", name) from None
    if base_interval == 0:
        return time_info, 0, []
    from_offset = offset + (((from_interval - base_interval) // step) * POINT_SIZE % size)
    until_offset = offset + (((until_interval - base_interval) // step) * POINT_SIZE % size)
    if from_offset < until_offset:
        return time_info, base_interval, [(from_offset, until_offset - from_offset)]
    return time_info, base_interval, [(from_offset, offset + size - from_offset),
                                      (offset, until_offset - offset)]


def decode_values(time_info: tuple[int, int, int], data: bytes) -> list:
    from_interval, _, step = time_info
    points = len(data) // POINT_SIZE
    unpacked = whisper_format.run_struct(points).unpack(data)
    expected = range(from_interval, from_interval + points * step, step)
    stamps = unpacked[0::2]
    values = list(unpacked[1::2])
    if stamps != tuple(expected):
        for i, (t, e) in enumerate(zip(stamps, expected, strict=False)):
            if t != e:
                values[i] = None
    return values
