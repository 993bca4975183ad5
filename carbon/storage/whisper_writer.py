"""A fast ``update_many`` on an open whisper file, byte-identical to whisper 1.1.10.

Same semantics as ``whisper.update_many``: points (newest first, stable order) go to
the first archive whose retention covers their age (older ones are dropped; future
ones go to the first archive); per archive, the last point of each run of equal
aligned intervals wins (for equal timestamps that is the earliest given); runs of
contiguous intervals are written relative to the archive's base point (slot 0);
then each lower archive is aggregated, interval by interval, in the iteration order
of the same ``set`` whisper builds (it decides which interval becomes an empty
archive's base point), stopping at the first level where nothing propagated. Even
whisper's oddities are kept: a run never ends after interval 0, and a run of future
points longer than its archive is written past the archive's end.

What is faster: positional I/O on a cached descriptor; the header re-read with
archive 0's base point in one ``pread`` and parsed only when its bytes are new; base
points remembered within the call; one read of the higher archive per propagation
level (instead of three reads and a write per lower interval) and the lower points
written in coalesced runs; many runs with gaps between them written as one span read,
patched and written back (gap slots are rewritten with the bytes just read, so a
concurrent unlocked writer to those very slots could be undone; with
WHISPER_LOCK_WRITES writers serialise on the lock).
"""

from __future__ import annotations

import os
import struct
from itertools import chain
from operator import eq

from carbon.storage.whisper_format import (
    ARCHIVE_INFO_SIZE, METADATA_SIZE, POINT, POINT_SIZE, CorruptWhisperFile, Header,
    header_size, parse_header, run_struct,
)
from carbon.storage.whisper_points import (
    consecutive_intervals, contiguous_runs, lower_candidate, read_span,
    runs_as_whisper, split_by_archive,
)

__all__ = ["read_header", "remember_header", "apply_update"]

_TS = struct.Struct("!L")
_MAX_TS = 1 << 32
_MAX_HEADER_READ = 1 << 20
_HEADER_GUESS = METADATA_SIZE + 6 * ARCHIVE_INFO_SIZE
_HEADER_CACHE_SIZE = 4096


def read_header(fd: int, path: str, cached: Header | None,
                headers: dict[bytes, Header]) -> tuple[Header, int | None]:
    """The file's current header and, when the first archive starts right after the
    header, that archive's base timestamp; one ``pread`` in the usual case.

    ``cached`` (the header last seen in this file) is reused if its bytes are unchanged;
    else ``headers`` (parsed headers by their bytes: files of one schema share one)
    is consulted and filled.
    """
    want = (cached.size if cached is not None else _HEADER_GUESS) + POINT_SIZE
    raw = os.pread(fd, want, 0)
    if cached is not None and raw[:cached.size] == cached.raw:
        header = cached
    else:
        size = header_size(raw)
        if size == 0:
            raise CorruptWhisperFile("Unable to read header", path)
        if len(raw) < size + POINT_SIZE and len(raw) == want:
            raw = os.pread(fd, min(size + POINT_SIZE, _MAX_HEADER_READ), 0)
        header = headers.get(raw[:size])
        if header is None:
            header = parse_header(raw, path)
            remember_header(headers, header)
    if not header.archives:
        raise CorruptWhisperFile("No archives in header", path)
    base0 = None
    if header.archives[0].offset == header.size and len(raw) >= header.size + _TS.size:
        base0 = _TS.unpack_from(raw, header.size)[0]
    return header, base0


def remember_header(headers: dict[bytes, Header], header: Header) -> None:
    """Add a parsed header to ``headers`` (bounded: cleared when full)."""
    if len(headers) >= _HEADER_CACHE_SIZE:
        headers.clear()
    headers[header.raw] = header


def apply_update(fd: int, path: str, header: Header, base0: int | None,
                 points: list[tuple[int, float]], now: int) -> int:
    """Write ``points`` (from ``prepare_points``) into the open file; returns how many
    were dropped for being older than the largest retention."""
    groups, dropped = split_by_archive(header.archives, points, now)
    for _, group in groups:  # in time order: check the oldest and the newest
        if group[0][0] < 0 or group[-1][0] >= _MAX_TS:
            raise ValueError("timestamps must be in [0, 2**32) to be stored in whisper")
    update = _Update(fd, path, header)
    if base0 is not None:
        update.bases[0] = base0
    for index, group in groups:
        intervals = update.write_archive(index, group)
        update.propagate(index, intervals)
    return dropped


class _Update:
    """One update_many call: the open file, its header and the base points seen so far."""

    __slots__ = ("fd", "path", "header", "bases")

    def __init__(self, fd: int, path: str, header: Header) -> None:
        self.fd = fd
        self.path = path
        self.header = header
        # Slot-0 timestamps known to be on disk now. A write running past its archive's
        # end (whisper does that for runs of future points longer than the archive)
        # forgets them all.
        self.bases: dict[int, int] = {}

    def base(self, index: int) -> int:
        """Timestamp in slot 0 of archive ``index``, as it is on disk now."""
        known = self.bases.get(index)
        if known is not None:
            return known
        raw = os.pread(self.fd, POINT_SIZE, self.header.archives[index].offset)
        if len(raw) < POINT_SIZE:
            raise CorruptWhisperFile("Unable to read base datapoint", self.path)
        value = _TS.unpack_from(raw)[0]
        self.bases[index] = value
        return value

    def _pwrite(self, data: bytes, offset: int) -> None:
        while data:
            written = os.pwrite(self.fd, data, offset)
            data = data[written:]
            offset += written

    def write_archive(self, index: int, points: list[tuple[int, float]]) -> list[int]:
        """Write time-ordered points to one archive; returns the distinct aligned
        intervals in order of first appearance (what whisper's propagation sees)."""
        archive = self.header.archives[index]
        step = archive.step
        if len(points) == 1:
            t, v = points[0]
            interval = t - t % step
            base = self.base(index) or interval
            offset = archive.offset + ((interval - base) // step * POINT_SIZE) % archive.size
            self._pwrite(POINT.pack(interval, v), offset)
            if offset == archive.offset:
                self.bases[index] = interval
            return [interval]
        intervals = consecutive_intervals(points, step)
        if intervals is not None:  # the usual case: one run, no interval 0
            runs = [(intervals[0], list(chain.from_iterable(points)))]
        else:
            latest = {t - t % step: v for t, v in points}  # the last of an interval wins
            intervals = list(latest)
            if 0 in latest:
                runs = runs_as_whisper(points, step)
            else:
                runs = contiguous_runs(latest, step)
                if len(runs) > 2:
                    first = runs[0][0]
                    count = (runs[-1][0] - first) // step + len(runs[-1][1]) // 2
                    if count <= archive.points:
                        base = self.base(index) or first
                        self._merge_runs(index, runs, base, first, count)
                        return intervals
        base = self.base(index)
        if base == 0:
            base = runs[0][0]
        start, size, end = archive.offset, archive.size, archive.end
        for interval, run_fields in runs:
            data = run_struct(len(run_fields) // 2).pack(*run_fields)
            offset = start + ((interval - base) // step * POINT_SIZE) % size
            beyond = offset + len(data) - end
            if beyond > 0:
                self._pwrite(data[:-beyond], offset)
                self._pwrite(data[-beyond:], start)
                self._note_slot0(index, data, len(data) - beyond)
                if beyond > size:
                    self.bases.clear()
            else:
                self._pwrite(data, offset)
                if offset == start:
                    self._note_slot0(index, data, 0)
        return intervals

    def _merge_runs(self, index: int, runs: list[tuple[int, list]], base: int, first: int,
                    count: int) -> None:
        """Write many runs (gaps between them) with one read and one write of the span
        ``count`` slots from interval ``first``: the gaps are written back unchanged."""
        archive = self.header.archives[index]
        step = archive.step
        slot = ((first - base) // step) % archive.points
        span = bytearray(self._read_raw(archive, slot, count))
        for interval, fields in runs:
            position = (interval - first) // step * POINT_SIZE
            data = run_struct(len(fields) // 2).pack(*fields)
            span[position:position + len(data)] = data
        head = min(count, archive.points - slot) * POINT_SIZE
        self._pwrite(span[:head], archive.offset + slot * POINT_SIZE)
        if head < len(span):
            self._pwrite(span[head:], archive.offset)
        zero = (archive.points - slot) % archive.points
        if zero < count:  # slot 0 was rewritten
            self._note_slot0(index, span, zero * POINT_SIZE)

    def _note_slot0(self, index: int, data: bytes, position: int) -> None:
        self.bases[index] = _TS.unpack_from(data, position)[0]

    def propagate(self, index: int, aligned: list[int]) -> None:
        """Aggregate the intervals touched in archive ``index`` into every coarser archive.

        ``aligned`` may omit repeats: a set's iteration order depends only on the order
        of first insertion of each distinct value.
        """
        archives = self.header.archives
        higher = index
        for lower in self.header.lowers[index]:
            lower_step = archives[lower].step
            intervals = {t - t % lower_step for t in aligned}
            if len(intervals) == 1:
                done = self._propagate_one(higher, lower, aligned[0] - aligned[0] % lower_step)
            else:
                done = self._propagate_level(higher, lower, intervals)
            if not done:
                break
            higher = lower

    def _propagate_one(self, higher: int, lower: int, x: int) -> bool:
        """``_propagate_level`` for a single lower interval ``x`` (the common case)."""
        header = self.header
        high, low = header.archives[higher], header.archives[lower]
        h_step = high.step
        per_lower = low.step // h_step
        h_base = self.base(higher)
        if not h_base or per_lower > high.points:
            return self._propagate_level(higher, lower, {x})
        flat = self._read_slots(high, ((x - h_base) // h_step) % high.points, per_lower)
        present = list(map(eq, flat[0::2], range(x, x + per_lower * h_step, h_step)))
        candidate = lower_candidate(flat[1::2], present, header)
        if candidate is None:
            return False
        known, neighbors = candidate
        l_base = self.base(lower)
        slot = ((x - l_base) // low.step) % low.points if l_base else 0
        self._pwrite(POINT.pack(x, header.aggregator(known, neighbors)),
                     low.offset + slot * POINT_SIZE)
        if not slot:
            self.bases[lower] = x
        return True

    def _propagate_level(self, higher: int, lower: int, intervals: set[int]) -> bool:
        """One level of whisper's propagation; True if any lower point was written."""
        header = self.header
        high, low = header.archives[higher], header.archives[lower]
        order = list(intervals)  # whisper visits them in this (set) order
        h_base = self.base(higher)
        h_step = high.step
        per_lower = low.step // h_step
        first = min(order)
        span = (max(order) - first) // h_step + per_lower
        candidates = []
        if h_base and span <= high.points and not low.step % h_step:
            # The usual case, in one read: all the higher points lie in one window of
            # the ring, in time order.
            flat = self._read_slots(high, ((first - h_base) // h_step) % high.points, span)
            values = flat[1::2]
            present = list(map(eq, flat[0::2], range(first, first + span * h_step, h_step)))
            for x in order:
                d = (x - first) // h_step
                e = d + per_lower
                candidate = lower_candidate(values[d:e], present[d:e], header)
                if candidate is not None:
                    candidates.append((x, candidate))
        else:
            for x, neighbors in self._neighbors_by_slot(high, low, order, h_base):
                known = [v for v in neighbors if v is not None]
                if known and float(len(known)) / float(len(neighbors)) >= header.xff:
                    candidates.append((x, (known, neighbors)))
        if not candidates:
            return False
        aggregator = header.aggregator
        low_step, low_points = low.step, low.points
        l_base = self.base(lower)
        writes: dict[int, bytes] = {}
        pack = POINT.pack
        for x, (known, neighbors) in candidates:
            # whisper re-reads the base point before each write: track it likewise
            if l_base:
                slot = ((x - l_base) // low_step) % low_points
                if not slot:
                    l_base = x
            else:
                slot, l_base = 0, x
            writes[slot] = pack(x, aggregator(known, neighbors))
        self.bases[lower] = l_base
        self._write_slots(low, writes)
        return True

    def _neighbors_by_slot(self, high, low, order: list[int],
                           h_base: int) -> list[tuple[int, list]]:
        """Whisper's reads for any layout: from each interval's first slot (slot 0 while
        the higher archive is empty) as many slots as its wrap arithmetic yields."""
        h_step, h_points = high.step, high.points
        per_lower = low.step // h_step
        if h_base == 0:
            firsts = [0] * len(order)
        else:
            firsts = [((x - h_base) // h_step) % h_points for x in order]
        counts = [read_span(f, per_lower, h_points) for f in firsts]
        # One read: a window from the earliest interval's slot, or the whole archive
        # when that window would wrap onto itself.
        anchor = firsts[order.index(min(order))]
        deltas = [(f - anchor) % h_points for f in firsts]
        window = max(d + c for d, c in zip(deltas, counts, strict=True))
        if window <= h_points:
            flat = self._read_slots(high, anchor, window)
            starts, modulo = deltas, 0
        else:
            flat = self._read_slots(high, 0, h_points)
            starts, modulo = firsts, h_points
        result = []
        for x, first, count in zip(order, starts, counts, strict=True):
            neighbors: list = []
            expected = x
            for i in range(first, first + count):
                k = 2 * (i % modulo if modulo else i)
                neighbors.append(flat[k + 1] if flat[k] == expected else None)
                expected += h_step
            result.append((x, neighbors))
        return result

    def _read_raw(self, archive, first: int, count: int) -> bytes:
        """The bytes of ``count`` slots from slot ``first``, wrapping."""
        head = min(count, archive.points - first)
        data = os.pread(self.fd, head * POINT_SIZE, archive.offset + first * POINT_SIZE)
        if head < count:
            data += os.pread(self.fd, (count - head) * POINT_SIZE, archive.offset)
        if len(data) != count * POINT_SIZE:
            raise CorruptWhisperFile("Unable to read datapoints", self.path)
        return data

    def _read_slots(self, archive, first: int, count: int) -> tuple:
        """Flat (timestamp, value, ...) of ``count`` slots from ``first``, wrapping."""
        return run_struct(count).unpack(self._read_raw(archive, first, count))

    def _write_slots(self, archive, writes: dict[int, bytes]) -> None:
        """Write single points by slot, coalescing neighbouring slots into one write."""
        if len(writes) == 1:
            for slot, data in writes.items():
                self._pwrite(data, archive.offset + slot * POINT_SIZE)
            return
        slots = sorted(writes)
        run_start = previous = slots[0]
        chunk = [writes[run_start]]
        for slot in slots[1:]:
            if slot != previous + 1:
                self._pwrite(b"".join(chunk), archive.offset + run_start * POINT_SIZE)
                run_start, chunk = slot, []
            chunk.append(writes[slot])
            previous = slot
        self._pwrite(b"".join(chunk), archive.offset + run_start * POINT_SIZE)
