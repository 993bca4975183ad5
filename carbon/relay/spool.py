"""A bounded, ordered on-disk spool of encoded datapoints for one destination.

Segments ``NNNNNNNNNN.spool`` in one directory hold records in arrival order. A
segment starts with ``CSPOOL1 <protocol>\\n``; a record is an 8-byte header
(payload length, point count) and the payload: points already encoded in the wire
format of that protocol, so replay is a plain write. Reading consumes records from
the oldest segment; a fully read segment is deleted. ``close()`` remembers how far
the oldest segment was read, so the next open resumes there (a crash instead may
resend part of one segment). A torn record at the end of a segment (crash while
writing) is cut off when the spool is opened.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import BinaryIO

log = logging.getLogger("carbon.relay")

_RECORD = struct.Struct("!LL")
_MAGIC = b"CSPOOL1 "
_POSITION_FILE = "read.pos"


class Spool:
    """Append encoded records; read them back in order; never exceed ``max_bytes``."""

    def __init__(self, directory: str, max_bytes: int, protocol: str,
                 segment_bytes: int = 8 * 1024 * 1024) -> None:
        self.directory = directory
        self.max_bytes = int(max_bytes)
        self.protocol = protocol
        self.segment_bytes = max(4096, min(segment_bytes, self.max_bytes // 4 or 4096))
        self.points = 0          # unread points
        self.disk_bytes = 0      # bytes of all segment files (the bounded quantity)
        self._segments: list[int] = []      # segment numbers, oldest first
        self._sizes: dict[int, int] = {}
        self._protocols: dict[int, str] = {}
        self._writer: BinaryIO | None = None
        self._reader: BinaryIO | None = None
        self._read_segment: int | None = None
        os.makedirs(directory, exist_ok=True)
        self._open_existing()

    # -- opening ----------------------------------------------------------------------
    def _path(self, number: int) -> str:
        return os.path.join(self.directory, "%010d.spool" % number)

    def _open_existing(self) -> None:
        numbers = sorted(int(name[:-6]) for name in os.listdir(self.directory)
                         if name.endswith(".spool") and name[:-6].isdigit())
        start_segment, start_offset = self._read_position()
        for number in numbers:
            if start_segment is not None and number < start_segment:
                os.unlink(self._path(number))
                continue
            offset = start_offset if number == start_segment else None
            points = self._scan(number, offset)
            if points is None:
                continue
            self._segments.append(number)
            self.points += points
        if self._segments and start_segment == self._segments[0] and start_offset:
            self._open_reader(self._segments[0], start_offset)

    def _read_position(self) -> tuple[int | None, int]:
        path = os.path.join(self.directory, _POSITION_FILE)
        try:
            with open(path) as handle:
                segment, offset = handle.read().split()
            os.unlink(path)
            return int(segment), int(offset)
        except (OSError, ValueError):
            return None, 0

    def _scan(self, number: int, offset: int | None) -> int | None:
        """Count a segment's unread points, truncating a torn tail; None if unusable."""
        path = self._path(number)
        with open(path, "r+b") as handle:
            header = handle.readline(256)
            if not header.startswith(_MAGIC) or not header.endswith(b"\n"):
                log.error("relay spool %s: not a spool segment, ignored", path)
                return None
            self._protocols[number] = header[len(_MAGIC):-1].decode("ascii", "replace")
            good = handle.tell()
            points = 0
            counting = offset is None or offset <= good
            while True:
                raw = handle.read(_RECORD.size)
                if len(raw) < _RECORD.size:
                    break
                length, count = _RECORD.unpack(raw)
                handle.seek(length, os.SEEK_CUR)
                if handle.tell() > os.fstat(handle.fileno()).st_size:
                    break
                if not counting and good >= offset:
                    counting = True
                if counting:
                    points += count
                good = handle.tell()
            size = os.fstat(handle.fileno()).st_size
            if good < size:
                log.warning("relay spool %s: cut %d bytes of a torn record", path, size - good)
                handle.truncate(good)
        self._sizes[number] = good
        self.disk_bytes += good
        return points

    # -- writing ------------------------------------------------------------------------
    def append(self, payload: bytes, count: int) -> bool:
        """Append one record; False (nothing written) if it would pass ``max_bytes``."""
        needed = _RECORD.size + len(payload)
        writer = self._writer
        if writer is None or self._sizes[self._segments[-1]] >= self.segment_bytes:
            needed += len(_MAGIC) + len(self.protocol) + 1
        if self.disk_bytes + needed > self.max_bytes:
            return False
        if writer is None or self._sizes[self._segments[-1]] >= self.segment_bytes:
            writer = self._new_segment()
        number = self._segments[-1]
        try:
            writer.write(_RECORD.pack(len(payload), count))
            writer.write(payload)
            writer.flush()
        except OSError:
            self._cut_torn_write(number)
            raise
        self._sizes[number] += _RECORD.size + len(payload)
        self.disk_bytes += _RECORD.size + len(payload)
        self.points += count
        return True

    def _cut_torn_write(self, number: int) -> None:
        """After a failed write, drop the partial record so the segment stays readable."""
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close()
        except OSError:
            pass
        try:
            os.truncate(self._path(number), self._sizes[number])
        except OSError:
            log.error("relay spool %s: cannot cut a failed write", self._path(number))
        # With no writer, the next append starts a new segment; this one stays readable.

    def _new_segment(self) -> BinaryIO:
        if self._writer is not None:
            self._writer.close()
        number = self._segments[-1] + 1 if self._segments else 1
        header = _MAGIC + self.protocol.encode("ascii") + b"\n"
        self._writer = open(self._path(number), "wb")
        self._writer.write(header)
        self._writer.flush()
        self._segments.append(number)
        self._sizes[number] = len(header)
        self._protocols[number] = self.protocol
        self.disk_bytes += len(header)
        return self._writer

    # -- reading ------------------------------------------------------------------------
    def _open_reader(self, number: int, offset: int | None = None) -> BinaryIO:
        if self._reader is not None:
            self._reader.close()
        self._reader = open(self._path(number), "rb")
        self._read_segment = number
        if offset:
            self._reader.seek(offset)
        else:
            self._reader.readline(256)
        return self._reader

    def read(self, max_bytes: int = 1024 * 1024) -> list[tuple[bytes, int, str]]:
        """Consume records totalling about ``max_bytes``: [(payload, points, protocol)]."""
        out: list[tuple[bytes, int, str]] = []
        total = 0
        while self._segments and total < max_bytes:
            number = self._segments[0]
            reader = self._reader if self._read_segment == number else None
            if reader is None:
                reader = self._open_reader(number)
            if self._writer is not None and number == self._segments[-1]:
                self._writer.flush()
            raw = reader.read(_RECORD.size)
            if len(raw) == _RECORD.size:
                length, count = _RECORD.unpack(raw)
                payload = reader.read(length)
                if len(payload) == length:
                    out.append((payload, count, self._protocols[number]))
                    self.points -= count
                    total += length
                    continue
            # End of this segment: drop it unless it is the one still being written.
            if number == self._segments[-1] and self._writer is not None:
                # Records are flushed whole, so the writer's segment read to its end
                # means everything was read.
                self._reset()
                break
            self._drop_head()
        return out

    def _drop_head(self) -> None:
        number = self._segments.pop(0)
        if self._reader is not None:
            self._reader.close()
            self._reader, self._read_segment = None, None
        self.disk_bytes -= self._sizes.pop(number)
        self._protocols.pop(number, None)
        try:
            os.unlink(self._path(number))
        except FileNotFoundError:
            pass

    def _reset(self) -> None:
        """Everything was read: delete all segments and start afresh."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        while self._segments:
            self._drop_head()
        self.points = 0
        self.disk_bytes = 0

    def __len__(self) -> int:
        return self.points

    @property
    def nearly_full(self) -> bool:
        """Less than a tenth of ``max_bytes`` (or one segment) left."""
        return self.max_bytes - self.disk_bytes < max(self.max_bytes // 10, self.segment_bytes)

    def close(self) -> None:
        """Close files and remember the read position of a part-read oldest segment."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reader is not None:
            offset = self._reader.tell()
            self._reader.close()
            self._reader = None
            if self._segments and self._read_segment == self._segments[0]:
                with open(os.path.join(self.directory, _POSITION_FILE), "w") as handle:
                    handle.write("%d %d\n" % (self._read_segment, offset))
            self._read_segment = None
        if not self._segments:
            for name in os.listdir(self.directory):
                if name.endswith(".spool"):
                    os.unlink(os.path.join(self.directory, name))
