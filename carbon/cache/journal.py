"""The cache journal: a write-ahead log of every batch the cache accepts.

A batch is appended (one ``write``) to the current segment file before it enters the
cache, so a point the cache holds is in the page cache of a segment file and survives
the process being killed; ``fsync_interval`` bounds what a power loss can take. A
record is ``RECORD`` (magic, payload bytes, points, CRC-32 of the payload) then the
payload: per point the UTF-8 name's length (uint32), the name, the timestamp and the
value (two doubles), native byte order (the journal never leaves its machine).

Retiring: when the current segment is full (or old, or the journal is over its bound)
the journal rotates and takes a snapshot of the metrics with points pending (cached or
being written). Every point of the segments before it belongs to one of those metrics,
so once each of them has been popped by a writer *after* the snapshot and that write
is committed (``done``), those segments are in whisper and are deleted. A writer takes
``mark()`` before it pops, so the journal knows which snapshots a pop came after. An
empty cache retires every closed segment at once.

Replay (``open``): every record of the existing segments back into the cache, before
the daemon listens; those segments retire like any others. A record that fails its
checks (a torn write at a power loss) ends its segment's replay, with one log line.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Callable

from carbon.cache.store import MetricCache
from carbon.config.settings import Settings
from carbon.formats.plaintext import parse_lines_py
from carbon.logs import CarbonLog
from carbon.pipeline import Batch
from carbon.tags import needs_normalizing

RECORD = struct.Struct("=4sIII")  # magic, payload bytes, points, crc32(payload)
MAGIC = b"CJ01"
_NAME_LEN = struct.Struct("=I")
_TAIL = struct.Struct("=dd")
SUFFIX = ".journal"
ROTATE_AFTER_SECONDS = 10.0

try:  # optional C accelerator (setup.py builds it)
    from carbon.cache._journal import decode as _native_decode
    from carbon.cache._journal import encode as _native_encode
    from carbon.cache._journal import encode_lines as _native_encode_lines
except ImportError:  # pragma: no cover - built without a compiler
    _native_encode = _native_decode = _native_encode_lines = None


def encode_py(batch: Batch) -> bytes:
    """A batch in the journal's point form; what carbon.cache._journal.encode does."""
    parts = []
    for metric, stamp, value in batch:
        if type(metric) is not str:
            raise TypeError("batch items must be (str, float, float)")
        name = metric.encode("utf-8")
        parts.append(_NAME_LEN.pack(len(name)) + name + _TAIL.pack(stamp, value))
    return b"".join(parts)


def encode_lines_py(chunk: bytes, max_length: int, now: float) -> tuple[bytes, int] | None:
    """A socket read of plaintext lines (complete, each ending in ``\\n``) straight to the
    point form: ``(payload, points)``, what ``encode(parse_lines(lines)[0])`` gives, or
    None when the read must take the general path (which applies every bad-input
    rule): a line over ``max_length`` (when > 0), a line ``parse_lines`` finds bad, a
    name carbon's tag parser rewrites or rejects (``needs_normalizing``), or a last line
    without its ``\\n``. What carbon.cache._journal.encode_lines does in one pass."""
    lines = chunk.split(b"\n")
    if lines.pop():
        return None
    if max_length > 0 and lines and max(map(len, lines)) > max_length:
        return None
    batch, bad = parse_lines_py(lines, now)
    if bad or any(needs_normalizing(point[0]) for point in batch):
        return None
    return encode_py(batch), len(batch)


def decode_py(payload: bytes | memoryview[int], count: int) -> list[tuple[str, float, float]]:
    """``count`` points back from their journal form; ValueError if malformed."""
    view = memoryview(payload)
    points = []
    offset = 0
    try:
        for _ in range(count):
            (length,) = _NAME_LEN.unpack_from(view, offset)
            offset += 4
            if offset + length + 16 > len(view):
                raise ValueError("malformed journal payload")
            name = str(view[offset:offset + length], "utf-8")
            stamp, value = _TAIL.unpack_from(view, offset + length)
            offset += length + 16
            points.append((name, stamp, value))
    except struct.error:
        raise ValueError("malformed journal payload") from None
    if offset != len(view) or count < 0:
        raise ValueError("malformed journal payload")
    return points


encode: Callable[[Batch], bytes] = _native_encode or encode_py
decode: Callable[[bytes | memoryview[int], int], list[tuple[str, float, float]]] = \
    _native_decode or decode_py
encode_lines: Callable[[bytes, int, float], tuple[bytes, int] | None] = (
    _native_encode_lines or encode_lines_py)


def native_encode_lines() -> bool:
    """True when ``encode_lines`` is the C one (the cache sink takes whole reads then)."""
    return _native_encode_lines is not None


@dataclass(frozen=True)
class JournalConfig:
    """What the journal reads of carbon.conf, built once (``from_settings``); the
    defaults are carbon.config.defaults'."""

    enabled: bool  # CACHE_JOURNAL
    # CACHE_JOURNAL_DIR, else STORAGE_DIR/cache-journal/<program>-<instance> ('': disabled)
    directory: str
    segment_bytes: int  # CACHE_JOURNAL_SEGMENT_BYTES
    max_bytes: float  # CACHE_JOURNAL_MAX_BYTES
    fsync_interval: float  # CACHE_JOURNAL_FSYNC_INTERVAL

    @classmethod
    def from_settings(cls, settings: Settings) -> JournalConfig:
        enabled = bool(settings["CACHE_JOURNAL"])
        directory = str(settings["CACHE_JOURNAL_DIR"] or "")
        if enabled and not directory:
            # program and instance come from the command line (the loader sets them)
            program = settings.get("program") or "carbon-cache"
            instance = settings.get("instance") or "a"
            directory = os.path.join(str(settings["STORAGE_DIR"]), "cache-journal",
                                     "%s-%s" % (program, instance))
        return cls(enabled=enabled, directory=directory,
                   segment_bytes=int(settings["CACHE_JOURNAL_SEGMENT_BYTES"]),
                   max_bytes=float(settings["CACHE_JOURNAL_MAX_BYTES"]),
                   fsync_interval=float(settings["CACHE_JOURNAL_FSYNC_INTERVAL"]))


def read_records(data: bytes) -> tuple[list[tuple[memoryview[int], int]], int]:
    """The valid records of a segment's bytes as (payload, points), and the offset of the
    first byte not read (== len(data) when the whole segment is good)."""
    records = []
    offset = 0
    view = memoryview(data)
    size = len(data)
    while offset + RECORD.size <= size:
        magic, length, count, crc = RECORD.unpack_from(view, offset)
        start = offset + RECORD.size
        if magic != MAGIC or start + length > size:
            break
        payload = view[start:start + length]
        if zlib.crc32(payload) != crc:
            break
        records.append((payload, count))
        offset = start + length
    return records, offset


class Segment:
    """One journal file: its sequence number, path and bytes written."""

    __slots__ = ("seq", "path", "bytes", "opened")

    def __init__(self, seq: int, path: str, size: int = 0) -> None:
        self.seq = seq
        self.path = path
        self.bytes = size
        self.opened = time.monotonic()


class Journal:
    """Segments under ``directory``; see the module docstring."""

    @classmethod
    def configured(cls, config: JournalConfig, cache: MetricCache, log: CarbonLog,
                   owner: tuple[int, int] | None = None) -> Journal:
        """The journal ``config`` describes (``owner``: the uid and gid of USER)."""
        return cls(config.directory, cache, log, segment_bytes=config.segment_bytes,
                   max_bytes=config.max_bytes, fsync_interval=config.fsync_interval,
                   owner=owner)

    def __init__(self, directory: str, cache: MetricCache, log: CarbonLog, segment_bytes: int,
                 max_bytes: float, fsync_interval: float,
                 owner: tuple[int, int] | None = None) -> None:
        self.directory = directory
        self.owner = owner  # (uid, gid) the daemon drops to (USER): it makes new segments
        self.cache = cache
        self.log = log
        self.segment_bytes = max(int(segment_bytes), 4096)
        self.max_bytes = float(max_bytes)
        self.fsync_interval = float(fsync_interval)
        self.lock = threading.Lock()
        self.segments: list[Segment] = []  # live, oldest first; the last one is current
        self.live_bytes = 0  # bytes of ``segments``, kept under ``lock``
        self.fd = -1
        # (snapshot number, last segment seq it covers, metrics still to be written)
        self.snapshots: deque[tuple[int, int, set[str]]] = deque()
        self.snapshot_count = 0
        self.unsynced: list[int] = []  # rotated descriptors the next sync closes
        self.dirty = False
        self.backlog = bytearray()  # records a failed write left (disk full): retried
        self.write_error: OSError | None = None
        self.replayed = 0
        self.retired = 0

    # -- start ------------------------------------------------------------------------
    def existing(self) -> list[Segment]:
        """The segment files already in the directory, oldest first."""
        found = []
        for name in os.listdir(self.directory):
            if name.endswith(SUFFIX) and name[:-len(SUFFIX)].isdigit():
                path = os.path.join(self.directory, name)
                found.append(Segment(int(name[:-len(SUFFIX)]), path, os.path.getsize(path)))
        return sorted(found, key=lambda segment: segment.seq)

    def open(self) -> int:
        """Replay existing segments into the cache, then open a new segment. Returns the
        points replayed."""
        os.makedirs(self.directory, exist_ok=True)
        if self.owner is not None:
            os.chown(self.directory, *self.owner)
        old = self.existing()
        if old:
            self.log.msg("Journal: replaying %d segments (%d bytes) from %s"
                         % (len(old), sum(segment.bytes for segment in old), self.directory))
        started = time.monotonic()
        for segment in old:
            self.replayed += self._replay(segment)
        if old:
            took = time.monotonic() - started
            self.log.msg("Journal: replayed %d datapoints from %d segments in %.2f seconds "
                         "(%.0f datapoints/s)" % (self.replayed, len(old), took,
                                                   self.replayed / max(took, 1e-9)))
        with self.lock:
            self.segments = list(old)
            self.live_bytes = sum(segment.bytes for segment in old)
        self._new_segment(old[-1].seq + 1 if old else 1)
        if old:  # the replayed points retire like any others
            self._snapshot(old[-1].seq)
        return self.replayed

    def _replay(self, segment: Segment) -> int:
        with open(segment.path, "rb") as handle:
            data = handle.read()
        records, end = read_records(data)
        replayed = 0
        add = self.cache.add_batch
        for payload, count in records:
            try:
                points = decode(payload, count)
            except ValueError:
                end = -1
                break
            add(points)
            replayed += count
        if end != len(data):
            self.log.msg("Journal: %s has an unreadable record after %d datapoints; the "
                         "rest of it (%d bytes) is skipped"
                         % (segment.path, replayed, len(data) - max(end, 0)))
        return replayed

    def _new_segment(self, seq: int) -> None:
        path = os.path.join(self.directory, "%016d%s" % (seq, SUFFIX))
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        with self.lock:
            self.segments.append(Segment(seq, path))

    # -- appending (reactor thread) ---------------------------------------------------
    @property
    def current(self) -> Segment:
        return self.segments[-1]

    @property
    def size(self) -> int:
        """Bytes of the live segments and of the backlog."""
        return self.live_bytes + len(self.backlog)

    def _wrote(self, count: int) -> None:
        """``count`` bytes went to the current segment."""
        with self.lock:
            self.current.bytes += count
            self.live_bytes += count

    def append(self, batch: Batch) -> bool:
        """Write ``batch`` to the journal; False if it is only in the backlog (the disk
        refused it: ``write_error``), to be retried by ``tick``."""
        if not batch:
            return True
        return self.append_encoded(encode(batch), len(batch))

    def append_encoded(self, payload: bytes, count: int) -> bool:
        """``append`` for ``count`` points already in the point form (``encode_lines``)."""
        header = RECORD.pack(MAGIC, len(payload), count, zlib.crc32(payload))
        if self.current.bytes >= self.segment_bytes and not self.backlog:
            self.rotate()
        if self.backlog:
            self.backlog += header
            self.backlog += payload
            return self.flush_backlog()
        try:  # one system call, no copy of the payload
            written = os.writev(self.fd, (header, payload))
        except OSError:
            written = 0
        self._wrote(written)
        if written == len(header) + len(payload):
            self.dirty = True
            return True
        return self._write((header + payload)[written:])

    def _write(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except OSError as exc:
                self.write_error = exc
                self.backlog += view
                return False
            self._wrote(written)
            view = view[written:]
        self.dirty = True
        return True

    def flush_backlog(self) -> bool:
        """Try the records a failed write kept; True when none are left."""
        if not self.backlog:
            self.write_error = None
            return True
        pending = bytes(self.backlog)
        self.backlog = bytearray()
        if self._write(pending):
            self.write_error = None
            return True
        return False

    def rotate(self) -> None:
        """Start a new segment; the metrics pending now must be written before the
        segments so far retire."""
        last = self.current.seq
        old_fd = self.fd
        self._new_segment(last + 1)
        with self.lock:
            if self.fsync_interval > 0:
                self.unsynced.append(old_fd)
            else:
                os.close(old_fd)
        self._snapshot(last)

    def _snapshot(self, last_seq: int) -> None:
        pending = self.cache.pending_names()
        with self.lock:
            self.snapshots.append((self.snapshot_count, last_seq, pending))
            self.snapshot_count += 1
            self._retire_ready()

    def tick(self) -> None:
        """Periodic (reactor thread): retry a backlog; rotate an old or over-bound
        segment so it can retire; an empty cache retires every closed segment."""
        if self.backlog:
            self.flush_backlog()
            return
        current = self.current
        if current.bytes and (time.monotonic() - current.opened >= ROTATE_AFTER_SECONDS
                              or self.size >= self.max_bytes):
            self.rotate()
        if self.cache.is_empty():
            with self.lock:
                if self.snapshots:
                    self.snapshots.clear()
                    self._retire_through(self.current.seq - 1)

    def over_limit(self) -> bool:
        return self.size >= self.max_bytes

    def below_resume_mark(self) -> bool:
        return self.size < self.max_bytes * 0.9 and not self.backlog

    # -- retiring (writer threads) ----------------------------------------------------
    def mark(self) -> int:
        """Taken by a writer before it pops metrics (see ``done``)."""
        return self.snapshot_count

    def done(self, metrics: list[str], mark: int) -> None:
        """``metrics``, popped after ``mark()`` returned ``mark``, are on disk (or were
        dropped for good)."""
        if not metrics:
            return
        with self.lock:
            for number, _last, pending in self.snapshots:
                if number >= mark:
                    break
                pending.difference_update(metrics)
            self._retire_ready()

    def _retire_ready(self) -> None:
        snapshots = self.snapshots
        last = None
        while snapshots and not snapshots[0][2]:
            last = snapshots.popleft()[1]
        if last is not None:
            self._retire_through(last)

    def _retire_through(self, last_seq: int) -> None:
        """Delete the segments up to ``last_seq`` (never the current one); lock held."""
        keep = []
        for segment in self.segments:
            if segment.seq <= last_seq and segment is not self.segments[-1]:
                try:
                    os.unlink(segment.path)
                except FileNotFoundError:
                    pass
                self.retired += 1
                self.live_bytes -= segment.bytes
            else:
                keep.append(segment)
        self.segments = keep

    # -- durability -------------------------------------------------------------------
    def sync(self) -> None:
        """fdatasync the current segment and close rotated ones (any thread, one at a
        time)."""
        with self.lock:
            closing, self.unsynced = self.unsynced, []
            current = self.fd
            dirty, self.dirty = self.dirty, False
        for fd in closing:
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        if dirty and current >= 0:
            try:
                os.fdatasync(current)
            except OSError:  # closed by a concurrent close(): nothing left to sync
                pass

    def close(self, remove: bool = False) -> None:
        """Flush and close; ``remove`` deletes every segment (the cache was drained)."""
        self.flush_backlog()
        with self.lock:
            closing, self.unsynced = self.unsynced, []
            fd, self.fd = self.fd, -1
        for handle in closing + ([fd] if fd >= 0 else []):
            try:
                if self.fsync_interval > 0 and not remove:
                    os.fdatasync(handle)
            finally:
                os.close(handle)
        if remove:
            with self.lock:
                for segment in self.segments:
                    try:
                        os.unlink(segment.path)
                    except FileNotFoundError:
                        pass
                self.segments = []
                self.live_bytes = 0
                self.snapshots.clear()
