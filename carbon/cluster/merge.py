"""whisper-fill style merge of an old owner's copy into the new owner's file.

Every archive of the new owner's file is filled from the source archive with the same
step: a timestamp the new owner already holds keeps its value (new points win), a gap is
filled from the source, nothing newer is overwritten. Points are written in place at
their whisper slot, so a carbon-cache writing the same file keeps its own points.
Verification counts, per archive, the source points present in the result and compares
the last timestamps.
"""

from __future__ import annotations

import functools
import os
import struct
import tempfile
import time
from dataclasses import dataclass, field
from typing import BinaryIO

METADATA = struct.Struct("!2LfL")
ARCHIVE_INFO = struct.Struct("!3L")
POINT = struct.Struct("!Ld")


@dataclass(frozen=True)
class Archive:
    offset: int
    step: int
    points: int

    @property
    def retention(self) -> int:
        return self.step * self.points


def archives(data: bytes) -> list[Archive]:
    """The archive table of a whisper file's bytes; ValueError when it is not one."""
    if len(data) < METADATA.size:
        raise ValueError("not a whisper file (too short)")
    count = METADATA.unpack_from(data, 0)[3]
    if not 0 < count < 64 or len(data) < METADATA.size + count * ARCHIVE_INFO.size:
        raise ValueError("not a whisper file (archive count %d)" % count)
    out = [Archive(*ARCHIVE_INFO.unpack_from(data, METADATA.size + i * ARCHIVE_INFO.size))
           for i in range(count)]
    end = out[-1].offset + out[-1].points * POINT.size
    if len(data) < end:
        raise ValueError("not a whisper file (%d bytes, header says %d)" % (len(data), end))
    return out


@functools.lru_cache(maxsize=16)
def _stamps_format(points: int) -> struct.Struct:
    return struct.Struct("!" + "L8x" * points)  # the timestamps only, values skipped


def valid_slots(data: bytes, archive: Archive, now: int) -> dict[int, int]:
    """{timestamp: slot} of the archive's points inside its retention window at ``now``."""
    low, step = now - archive.retention, archive.step
    stamps = _stamps_format(archive.points).unpack_from(data, archive.offset)
    return {ts: slot for slot, ts in enumerate(stamps) if low < ts <= now and ts % step == 0}


@dataclass
class MergeResult:
    """What a merge did and what verification found."""

    created: bool = False
    filled: int = 0
    source_points: int = 0
    present_points: int = 0
    source_last: int = 0
    result_last: int = 0
    skipped_archives: list[int] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.present_points == self.source_points and \
            self.result_last >= self.source_last


def fill_file(target: str, source: bytes, now: int | None = None) -> MergeResult:
    """Merge ``source`` (a whole whisper file) into ``target``; create it if missing."""
    now = int(time.time()) if now is None else now
    result = MergeResult()
    src_archives = archives(source)
    if not os.path.exists(target):
        result.created = _create_from(target, source)
        if result.created:  # the source's own bytes, linked in whole: nothing to compare
            return _self_verified(target, source, now, result)
    if not result.created:
        with open(target, "r+b") as handle:
            data = handle.read()
            for index, archive in enumerate(archives(data)):
                match = [a for a in src_archives if a.step == archive.step]
                if not match:
                    result.skipped_archives.append(index)
                    continue
                result.filled += _fill_archive(handle, data, archive, source, match[0], now)
    return verify(target, source, now, result)


def _self_verified(target: str, source: bytes, now: int, result: MergeResult) -> MergeResult:
    """A file made from the source's bytes holds every source point if it has their size."""
    finest = min(archives(source), key=lambda a: a.step)
    points = valid_slots(source, finest, now)
    result.source_points = len(points)
    result.present_points = len(points) if os.path.getsize(target) == len(source) else 0
    result.source_last = result.result_last = max(points, default=0)
    return result


def _create_from(target: str, source: bytes) -> bool:
    """Put ``source`` at ``target`` atomically unless a file appeared there meanwhile."""
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".merge-", suffix=".wsp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(source)
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temp)


def _fill_archive(handle: BinaryIO, data: bytes, archive: Archive, source: bytes,
                  src_archive: Archive, now: int) -> int:
    src = valid_slots(source, src_archive, now)
    missing = sorted(src.keys() - valid_slots(data, archive, now).keys())
    if not missing:
        return 0
    base = POINT.unpack_from(data, archive.offset)[0]
    if base == 0:  # an empty archive: the first point written anchors slot 0
        base = missing[0]
    slots = sorted((((ts - base) // archive.step) % archive.points, ts) for ts in missing)
    # Consecutive slots go out in one write (a gap of history is usually one run); only
    # missing slots are written, so a cache writing other slots meanwhile keeps its points.
    # The source's 12-byte records are copied as they are.
    size, offset = POINT.size, src_archive.offset
    start = 0
    for end in range(1, len(slots) + 1):
        if end == len(slots) or slots[end][0] != slots[end - 1][0] + 1:
            chunk = b"".join(source[offset + src[ts] * size:offset + (src[ts] + 1) * size]
                             for _, ts in slots[start:end])
            os.pwrite(handle.fileno(), chunk, archive.offset + slots[start][0] * size)
            start = end
    return len(missing)


def verify(target: str, source: bytes, now: int, result: MergeResult | None = None
           ) -> MergeResult:
    """Count the source's points present in ``target`` (every archive with a matching
    step) and compare the finest archives' last timestamps."""
    result = result if result is not None else MergeResult()
    with open(target, "rb") as handle:
        data = handle.read()
    src_archives = archives(source)
    finest = min(src_archives, key=lambda a: a.step)
    result.source_points = result.present_points = 0
    result.source_last = result.result_last = 0
    for archive in archives(data):
        match = [a for a in src_archives if a.step == archive.step]
        if not match:
            continue
        have = valid_slots(data, archive, now)
        wanted = valid_slots(source, match[0], now)
        result.source_points += len(wanted)
        result.present_points += len(wanted.keys() & have.keys())
        if archive.step == finest.step:
            result.source_last = max(wanted, default=0)
            result.result_last = max(have, default=0)
    return result
