"""whisper-fill style merge of an old owner's copy into the new owner's file.

Every archive of the new owner's file is filled from the source archive with the same
step: a timestamp the new owner already holds keeps its value (new points win), a gap is
filled from the source, nothing newer is overwritten. Points are written in place at
their whisper slot, so a carbon-cache writing the same file keeps its own points.
Verification counts, per archive, the source points present in the result at the slot
whisper reads them from and compares the last timestamps. The merge holds flock(LOCK_EX)
on the new owner's file from its read to its verification: a cache writing with
WHISPER_LOCK_WRITES (carbon-cluster turns it on) waits, so the two never place points
from different first slots into an archive both found empty. Slots are read as whole
numpy arrays (a 1-year, 1-minute archive has 525,600 of them).

A source travels sparse (``segments``): the header, each archive's first record (the
slot whisper places every other point from) and the runs of records inside the
archive's retention; the rest of a whisper file is zeros or expired points.
"""

from __future__ import annotations

import fcntl
import os
import struct
import tempfile
import time
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy

METADATA = struct.Struct("!2LfL")
ARCHIVE_INFO = struct.Struct("!3L")
POINT = struct.Struct("!Ld")
RECORD = numpy.dtype([("t", ">u4"), ("v", ">f8")])  # one whisper point, 12 bytes
# A sparse source is sent whole when its runs are this many or more (a file of
# scattered points: the list would cost more than the bytes it saves).
MAX_SEGMENTS = 4096
# How long a merge waits for a file another process is creating (the cache opens it,
# then writes its header) before it calls the file broken.
CREATE_WAIT_SECONDS = 5.0

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True)
class Archive:
    offset: int
    step: int
    points: int

    @property
    def retention(self) -> int:
        return self.step * self.points


def archives(data: Buffer) -> list[Archive]:
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


def records(data: Buffer, archive: Archive) -> numpy.ndarray:
    """The archive's records as a read-only structured array over ``data``."""
    return numpy.frombuffer(data, RECORD, archive.points, archive.offset)


def window_slots(data: Buffer, archive: Archive, now: int,
                 newest: int | None = None) -> tuple[numpy.ndarray, numpy.ndarray]:
    """(timestamps, slots) of the archive's points inside its retention window at
    ``now`` (at most ``newest``; default ``now``), in slot order."""
    stamps = records(data, archive)["t"].astype(numpy.uint32)  # native order: fast compares
    newest = min(now if newest is None else newest, 2 ** 32 - 1)
    slots = numpy.flatnonzero((stamps > max(0, now - archive.retention)) & (stamps <= newest))
    found = stamps[slots].astype(numpy.int64)
    aligned = found % archive.step == 0
    return found[aligned], slots[aligned]


def distinct(stamps: numpy.ndarray) -> numpy.ndarray:
    """``stamps`` sorted without repeats (a whisper archive repeats none unless torn)."""
    stamps = numpy.sort(stamps)
    if len(stamps) > 1 and not (numpy.diff(stamps) > 0).all():
        stamps = numpy.unique(stamps)
    return stamps


def segments(data: Buffer, now: int | None = None) -> list[tuple[int, int]]:
    """(offset, length) runs of ``data`` that carry everything a merge reads: the
    header, each archive's first record and its records inside the retention window
    (future ones too: the receiver applies its own clock). The whole file as one run
    when the runs would be more than MAX_SEGMENTS."""
    now = int(time.time()) if now is None else now
    table = archives(data)
    out = [(0, table[0].offset)]
    for archive in table:
        _, slots = window_slots(data, archive, now, newest=2 ** 32)
        slots = numpy.union1d(slots, [0])
        breaks = numpy.flatnonzero(numpy.diff(slots) != 1) + 1
        for first, last in zip(numpy.r_[0, breaks], numpy.r_[breaks, len(slots)],
                               strict=True):
            out.append((archive.offset + int(slots[first]) * POINT.size,
                        int(slots[last - 1] - slots[first] + 1) * POINT.size))
        if len(out) >= MAX_SEGMENTS:
            return [(0, len(data))]
    return out


def from_segments(size: int, parts: list[tuple[int, int]], payload: Buffer) -> bytearray:
    """A file image of ``size`` bytes, zeros except the ``parts`` (offset, length) whose
    bytes follow one another in ``payload``."""
    image = bytearray(size)
    read = 0
    for offset, length in parts:
        if offset < 0 or offset + length > size or read + length > len(payload):
            raise ValueError("segment %d+%d outside a %d-byte file" % (offset, length, size))
        image[offset:offset + length] = payload[read:read + length]
        read += length
    if read != len(payload):
        raise ValueError("%d payload bytes for %d bytes of segments" % (len(payload), read))
    return image


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


def fill_file(target: str, source: Buffer, now: int | None = None,
              parts: list[tuple[int, int]] | None = None) -> MergeResult:
    """Merge ``source`` (a whole whisper file image) into ``target``; create it if
    missing (only the ``parts`` runs of the source are written then: a sparse file,
    as ``rsync -S`` makes; default the whole image)."""
    now = int(time.time()) if now is None else now
    result = MergeResult()
    src_archives = archives(source)
    if not os.path.exists(target):
        result.created = _create_from(target, source, parts)
        if result.created:  # the source's own bytes: nothing to compare
            return _self_verified(target, source, now, result)
    with open(target, "r+b") as handle:
        data, table = _locked_read(handle, target)
        try:
            for index, archive in enumerate(table):
                match = [a for a in src_archives if a.step == archive.step]
                if not match:
                    result.skipped_archives.append(index)
                    continue
                result.filled += _fill_archive(handle, data, archive, source, match[0], now)
            return verify(_read_all(handle), source, now, result)
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_all(handle: BinaryIO) -> bytes:
    handle.seek(0)
    return handle.read()


def _locked_read(handle: BinaryIO, target: str) -> tuple[bytes, list[Archive]]:
    """The file's bytes and archive table under LOCK_EX (kept on return), once its header
    is complete: a file the cache has just opened is empty or zeros until its header's
    write."""
    deadline = time.monotonic() + CREATE_WAIT_SECONDS
    while True:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        data = _read_all(handle)
        try:
            return data, archives(data)
        except ValueError:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            if time.monotonic() >= deadline:
                raise ValueError("%s: not a whisper file after %.0f s" % (
                    target, CREATE_WAIT_SECONDS)) from None
            time.sleep(0.02)


def _self_verified(target: str, source: Buffer, now: int, result: MergeResult
                   ) -> MergeResult:
    """A file made from the source's bytes holds every source point if it has their size."""
    finest = min(archives(source), key=lambda a: a.step)
    stamps, _ = window_slots(source, finest, now)
    result.source_points = len(distinct(stamps))
    result.present_points = result.source_points \
        if os.path.getsize(target) == len(source) else 0
    result.source_last = result.result_last = int(stamps.max()) if len(stamps) else 0
    return result


def _create_from(target: str, source: Buffer, parts: list[tuple[int, int]] | None) -> bool:
    """Put ``source`` at ``target`` atomically unless a file appeared there meanwhile."""
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".merge-", suffix=".wsp")
    try:
        with os.fdopen(handle, "wb") as out:
            if parts is None:
                out.write(source)
            else:
                out.truncate(len(source))
                view = memoryview(source)
                for offset, length in parts:
                    os.pwrite(out.fileno(), view[offset:offset + length], offset)
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temp)


def _fill_archive(handle: BinaryIO, data: bytes, archive: Archive, source: Buffer,
                  src_archive: Archive, now: int) -> int:
    src_stamps, src_slots = window_slots(source, src_archive, now)
    have = in_place(data, archive, now)  # a point at another slot reads as missing
    keep = ~numpy.isin(src_stamps, have)
    if not keep.any():
        return 0
    src_stamps, src_slots = src_stamps[keep], src_slots[keep]
    base = POINT.unpack_from(data, archive.offset)[0]
    if base == 0:  # an empty archive: the first point written anchors slot 0
        base = int(src_stamps.min())
    slots = (src_stamps - base) // archive.step % archive.points
    order = numpy.argsort(slots, kind="stable")
    slots, first = slots[order], order
    if len(slots) > 1 and not (numpy.diff(slots) > 0).all():  # a slot twice: a torn file
        slots, first = numpy.unique(slots, return_index=True)
    # Only missing slots are written, so a cache writing other slots meanwhile keeps its
    # points; consecutive slots go out in one write (a gap is usually one run), the
    # source's 12-byte records copied as they are.
    chunk = records(source, src_archive)[src_slots[first]].tobytes()
    breaks = numpy.flatnonzero(numpy.diff(slots) != 1) + 1
    for start, end in zip(numpy.r_[0, breaks], numpy.r_[breaks, len(slots)], strict=True):
        os.pwrite(handle.fileno(), chunk[start * POINT.size:end * POINT.size],
                  archive.offset + int(slots[start]) * POINT.size)
    return len(slots)


def in_place(data: Buffer, archive: Archive, now: int) -> numpy.ndarray:
    """Timestamps of the archive's points inside its window that sit at the slot whisper
    reads them from (counted from the timestamp in the first slot)."""
    stamps, slots = window_slots(data, archive, now)
    base = POINT.unpack_from(data, archive.offset)[0]
    if base and len(stamps):
        stamps = stamps[(stamps - base) // archive.step % archive.points == slots]
    return stamps


def verify(data: Buffer, source: Buffer, now: int, result: MergeResult | None = None
           ) -> MergeResult:
    """Count the source's points present in a merged file's bytes ``data`` (every
    archive with a matching step, each point at its slot) and compare the finest
    archives' last timestamps."""
    result = result if result is not None else MergeResult()
    src_archives = archives(source)
    finest = min(src_archives, key=lambda a: a.step)
    result.source_points = result.present_points = 0
    result.source_last = result.result_last = 0
    for archive in archives(data):
        match = [a for a in src_archives if a.step == archive.step]
        if not match:
            continue
        have = in_place(data, archive, now)
        wanted = distinct(window_slots(source, match[0], now)[0])
        result.source_points += len(wanted)
        result.present_points += int(numpy.isin(wanted, have).sum())
        if archive.step == finest.step:
            result.source_last = int(wanted.max()) if len(wanted) else 0
            result.result_last = int(have.max()) if len(have) else 0
    return result
