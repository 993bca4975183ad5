"""``whisper.fetch`` with the same archive choice, alignment and result, done faster.

``fetch``/``file_fetch`` read one (possibly gzipped) file into a value list.
``read_many`` reads a batch of plain files with positioned reads (one for the header
and the archive's first point, one or two for the range) and decodes all files that
share a time range together (:mod:`webapp.storage.packed`), or into lists when numpy
is unavailable. The header is returned too, so callers need not read it twice
(aggregation method for cache merges).
"""

from __future__ import annotations

import gzip
import os
import struct
import time
from typing import Any, BinaryIO, Optional

from carbon.storage import whisper_format
from carbon.storage.whisper_format import (
    POINT, POINT_SIZE, CorruptWhisperFile, InvalidTimeInterval, WhisperError,
)
from webapp.storage import packed

try:  # pragma: no cover - the optional C accelerator (setup.py NATIVE)
    from webapp.storage import _points
except ImportError:  # pragma: no cover
    _points = None

__all__ = ["WhisperError", "fetch", "file_fetch", "read_info", "choose_archive",
           "parse_header", "read_many"]

_HEAD_READ = 512
_HEADERS: dict[bytes, dict] = {}
Result = tuple[Optional[tuple], dict]


def fetch(path: str, from_time: int, until_time: Optional[int] = None,
          now: Optional[int] = None) -> Result:
    """(whisper.fetch's result, header) for a file path."""
    with open(path, 'rb') as fh:
        return file_fetch(fh, from_time, until_time, now)


def file_fetch(fh: BinaryIO, from_time: int, until_time: Optional[int] = None,
               now: Optional[int] = None) -> Result:
    """(whisper.file_fetch's result, header) for an open file."""
    header = whisper_format.read_header_from(fh, fh.name).info()
    archive, from_time, until_time = choose_archive(header, from_time, until_time, now)
    if archive is None:
        return None, header
    time_info, base, chunk = _locate(archive, from_time, until_time,
                                     lambda off, size: _file_read(fh, off, size), fh.name)
    return (time_info, _decode_list(time_info, chunk) if base else
            [None] * ((time_info[1] - time_info[0]) // time_info[2])), header


def read_info(path: str) -> dict:
    """``whisper.info(path)`` of a plain or gzipped (``.gz``) whisper file."""
    opener: Any = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as fh:
        return whisper_format.read_header_from(fh, path).info()


def _file_read(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    return fh.read(size)


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


def _locate(archive: dict[str, Any], from_time: int, until_time: int, read: Any,
            name: str) -> tuple[tuple[int, int, int], int, bytes]:
    """(time_info, base interval, point bytes) of the range, read with ``read(off, size)``."""
    time_info, base_interval, ranges = _ranges(archive, from_time, until_time, read, name)
    data = b''.join(read(offset, size) for offset, size in ranges)
    if len(data) % POINT_SIZE:
        raise CorruptWhisperFile("Unable to read datapoints", name)
    return time_info, base_interval, data


def _ranges(archive: dict[str, Any], from_time: int, until_time: int, read: Any,
            name: str) -> tuple[tuple[int, int, int], int, list[tuple[int, int]]]:
    """(time_info, base interval, [(offset, size), ...]) of the range: one (offset, size)
    or two when it wraps around the archive's end; none when the archive is empty."""
    step = archive['secondsPerPoint']
    from_interval = int(from_time - (from_time % step)) + step
    until_interval = int(until_time - (until_time % step)) + step
    if from_interval == until_interval:
        until_interval += step
    time_info = (from_interval, until_interval, step)
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


def _decode_list(time_info: tuple[int, int, int], data: bytes) -> list:
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


def parse_header(head: bytes, name: str, read: Any) -> dict:
    """whisper's header dict from the file's first bytes (``read`` fetches any rest).

    Files of one schema share their header bytes, so parsed headers are kept by those
    exact bytes (callers must not modify the returned dict).
    """
    size = whisper_format.header_size(head)
    if size == 0:
        raise CorruptWhisperFile("Unable to read header", name)
    raw = head[:size]
    known = _HEADERS.get(raw)
    if known is not None:
        return known
    if len(head) < size:
        head = head + read(len(head), size - len(head))
    header = whisper_format.parse_header(head, name).info()
    if len(raw) == size:
        if len(_HEADERS) >= 4096:
            _HEADERS.clear()
        _HEADERS[raw] = header
    return header


def _read_raw(path: str, from_time: int, until_time: Optional[int],
              now: Optional[int], budget: Any = None) -> tuple[Optional[tuple], dict]:
    """((time_info, base, bytes) or None, header) of one plain file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, _HEAD_READ, 0)

        def read(offset: int, size: int) -> bytes:
            if offset + size <= len(head):
                return head[offset:offset + size]
            return os.pread(fd, size, offset)
        header = parse_header(head, path, read)
        archive, start, end = choose_archive(header, from_time, until_time, now)
        if archive is None:
            return None, header
        if budget is not None:  # before reading: bounded memory per request
            step = archive['secondsPerPoint']
            budget.spend_points((end - start) // step + 1, path)
        return _locate(archive, start, end, read, path), header
    finally:
        os.close(fd)


def _read_at(path: str, offset: int, size: int) -> bytes:
    """``size`` bytes at ``offset`` of the file at ``path`` (fewer at its end)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, offset)
    finally:
        os.close(fd)


def _direct_ranges(paths: list[str], from_time: int, until_time: Optional[int],
                   now: Optional[int], budget: Any) -> list[Any]:
    """For each path: ((time_info, base, [(offset, size), ...]) or None, header), or
    the exception raised: what ``_read_raw`` finds without reading the points. The
    headers (and, where the chosen archive starts past them, its first point) of all
    files are read by the C accelerator in one call each."""
    names = [os.fsencode(path) for path in paths]
    heads = _points.pread_many(names, [0] * len(paths), _HEAD_READ)
    results: list[Any] = [None] * len(paths)
    later: dict[int, tuple] = {}     # files whose archive's first point is past the head
    for i, (path, head) in enumerate(zip(paths, heads, strict=True)):
        if budget is not None:
            budget.check_time()
        try:
            if type(head) is int:
                raise OSError(head, os.strerror(head), path)
            header = parse_header(head, path, lambda off, size, p=path: _read_at(p, off, size))
            archive, start, end = choose_archive(header, from_time, until_time, now)
            if archive is None:
                results[i] = (None, header)
                continue
            if budget is not None:  # before reading: bounded memory per request
                budget.spend_points((end - start) // archive['secondsPerPoint'] + 1, path)
            if archive['offset'] + POINT_SIZE <= len(head):
                results[i] = (_ranges(archive, start, end,
                                      lambda off, size, h=head: h[off:off + size], path), header)
            else:
                later[i] = (archive, start, end, header)
        except (OSError, WhisperError) as err:
            results[i] = err
    if later:
        order = list(later)
        firsts = _points.pread_many([names[i] for i in order],
                                    [later[i][0]['offset'] for i in order], POINT_SIZE)
        for i, first in zip(order, firsts, strict=True):
            archive, start, end, header = later[i]
            try:
                if type(first) is int:
                    raise OSError(first, os.strerror(first), paths[i])
                # _ranges reads only the archive's first point
                results[i] = (_ranges(archive, start, end, lambda off, size, b=first: b,
                                      paths[i]), header)
            except (OSError, WhisperError) as err:
                results[i] = err
    return results


def read_many(paths: list[str], from_time: int, until_time: Optional[int],
              now: Optional[int], budget: Any = None) -> list[Any]:
    """For each path: (whisper.fetch result or None, header), or the exception raised.

    ``budget`` (``webapp.limits.Budget``) is charged each file's datapoints before they
    are read, and its time limit is checked between files.

    Values are :class:`~webapp.storage.packed.PackedValues` when numpy is enabled,
    lists otherwise. With the C accelerator (``_points``) each file's header is read
    first, then the point ranges of all files sharing a time range are read and decoded
    straight into one block's arrays (no bytes object per file).
    """
    out: list[Any] = []
    groups: dict[tuple, list[int]] = {}
    chunks: list[Any] = []
    direct = packed.ENABLED and _points is not None
    planned = _direct_ranges(paths, from_time, until_time, now, budget) if direct else None
    for i, path in enumerate(paths):
        chunks.append(None)
        if planned is not None:
            if isinstance(planned[i], Exception):
                out.append(planned[i])
                continue
            raw, header = planned[i]
        else:
            if budget is not None:
                budget.check_time()
            try:
                raw, header = _read_raw(path, from_time, until_time, now, budget)
            except (OSError, WhisperError) as err:
                out.append(err)
                continue
        if raw is None:
            out.append((None, header))
            continue
        time_info, base, data = raw
        if not packed.ENABLED:
            values = _decode_list(time_info, data) if base else \
                [None] * ((time_info[1] - time_info[0]) // time_info[2])
            out.append(((time_info, values), header))
            continue
        if direct:
            points = sum(size for _, size in data) // POINT_SIZE if base else \
                (time_info[1] - time_info[0]) // time_info[2]
        else:
            points = len(data) // POINT_SIZE if base else \
                (time_info[1] - time_info[0]) // time_info[2]
        chunks[i] = data if base else None
        groups.setdefault((time_info, points), []).append(i)
        out.append((time_info, header))
    for (time_info, points), members in groups.items():
        if direct:
            block = _read_block(paths, chunks, members, time_info, points, out)
        else:
            block = packed.decode_block([chunks[i] for i in members], time_info, points)
        for row, i in enumerate(members):
            if not isinstance(out[i], Exception):
                out[i] = ((time_info, packed.PackedValues(block, row)), out[i][1])
    return out


def _read_block(paths: list[str], ranges: list[Any], members: list[int],
                time_info: tuple[int, int, int], points: int, out: list[Any]) -> packed.Block:
    """One block of the ``members`` files' points, read by the C accelerator from their
    ``ranges``; a file that cannot be read gets its error in ``out``."""
    np = packed.np
    values = np.zeros((len(members), points))
    valid = np.zeros((len(members), points), dtype=bool)
    rows = [row for row, i in enumerate(members) if ranges[i]]
    if rows:
        chosen = [ranges[members[row]] for row in rows]
        first = [r[0] for r in chosen]
        second = [r[1] if len(r) > 1 else (0, 0) for r in chosen]
        if len(rows) == len(members):
            target_values, target_valid = values, valid
        else:
            target_values = np.zeros((len(rows), points))
            target_valid = np.zeros((len(rows), points), dtype=bool)
        failed = _points.read_rows([os.fsencode(paths[members[row]]) for row in rows], first,
                                   second, time_info[0], time_info[2], points,
                                   target_values, target_valid)
        if target_values is not values:
            values[rows] = target_values
            valid[rows] = target_valid
        for index, error in failed:
            path = paths[members[rows[index]]]
            out[members[rows[index]]] = OSError(error, os.strerror(error), path) if error \
                else CorruptWhisperFile("Unable to read datapoints", path)
    return packed.Block(values, valid, time_info)
