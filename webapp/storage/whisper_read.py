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
import sys
from typing import Any, BinaryIO, Optional

from carbon.storage import whisper_format
from carbon.storage.whisper_format import (
    POINT_SIZE, CorruptWhisperFile, WhisperError,
)
from carbon.storage.whisper_fetch import (
    archive_ranges as _ranges, choose_archive, decode_values as _decode_list, interval_range,
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
    return (time_info, _values(time_info, base, chunk)), header


def read_info(path: str) -> dict:
    """``whisper.info(path)`` of a plain or gzipped (``.gz``) whisper file."""
    opener: Any = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as fh:
        return whisper_format.read_header_from(fh, path).info()


def _file_read(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    return fh.read(size)


def _locate(archive: dict[str, Any], from_time: int, until_time: int, read: Any,
            name: str) -> tuple[tuple[int, int, int], int, bytes]:
    """(time_info, base interval, point bytes) of the range, read with ``read(off, size)``."""
    time_info, base_interval, ranges = _ranges(archive, from_time, until_time, read, name)
    data = b''.join(read(offset, size) for offset, size in ranges)
    if len(data) % POINT_SIZE:
        raise CorruptWhisperFile("Unable to read datapoints", name)
    return time_info, base_interval, data


def _values(time_info: tuple[int, int, int], base: int, data: bytes) -> list:
    """whisper.fetch's value list of a range read at ``base`` (0: the archive is empty,
    every slot None)."""
    if not base:
        return [None] * ((time_info[1] - time_info[0]) // time_info[2])
    return _decode_list(time_info, data)


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


def _choice(head: bytes, path: str, from_time: int, until_time: Optional[int],
            now: Optional[int]) -> tuple:
    """(header, archive or None, from, until, time_info, points) of a file's header."""
    header = parse_header(head, path, lambda off, size: _read_at(path, off, size))
    archive, start, end = choose_archive(header, from_time, until_time, now)
    if archive is None:
        return header, None, start, end, None, 0
    time_info = interval_range(archive['secondsPerPoint'], start, end)
    from_interval, until_interval, step = time_info
    return header, archive, start, end, time_info, (until_interval - from_interval) // step


def fs_names(paths: list[str]) -> list[bytes]:
    """``os.fsencode`` of each path, without a call per path."""
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    return [path.encode(encoding, errors) for path in paths]


def _kind_of(head: Any, path: str, from_time: int, until_time: Optional[int],
             now: Optional[int]) -> tuple:
    """(header, archive or None, (time_info, points), datapoints to read, (offset, size)
    of the archive, whether whisper could have written that layout) of a file's header
    bytes (an int: the errno of a file that could not be read, raised as OSError)."""
    if type(head) is int:
        raise OSError(head, os.strerror(head), path)
    header, archive, start, end, time_info, points = \
        _choice(head, path, from_time, until_time, now)
    if archive is None:
        return header, None, None, 0, None, False
    offset, size = archive['offset'], archive['size']
    return (header, archive, (time_info, points), (end - start) // time_info[2] + 1,
            (offset, size), size > 0 and points * POINT_SIZE <= size)


def _read_direct(paths: list[str], from_time: int, until_time: Optional[int],
                 now: Optional[int], budget: Any) -> list[Any]:
    """read_many with the C reader: every header in one call; files of one header (so
    one archive choice) and time range become rows of one unread FileBlock. A file
    shorter than its chosen archive is read at once (its error, if any, returned)."""
    names = fs_names(paths)
    sizes = packed.np.zeros(len(paths), dtype=packed.np.int64)
    heads = _points.read_heads(names, _HEAD_READ, sizes)
    file_sizes = sizes.tolist()
    out: list[Any] = [None] * len(paths)
    # per distinct complete header: (header, archive or None, (time_info, points),
    # datapoints, (offset, size) of the archive, whether whisper could have written it)
    known: dict[bytes, tuple] = {}
    spans: list[Any] = [None] * len(paths)     # (offset, size) of each chosen archive
    lazy: dict[tuple, list[int]] = {}
    eager: dict[tuple, list[int]] = {}
    spent = 0                                  # datapoints of the files so far
    room = budget.max_points - budget.points if budget is not None else float('inf')
    for i, head in enumerate(heads):
        if budget is not None and not i & 255:
            budget.check_time()
        kind = known.get(head) if type(head) is bytes else None
        if kind is None:
            try:
                kind = _kind_of(head, paths[i], from_time, until_time, now)
            except (OSError, WhisperError) as err:
                out[i] = err
                continue
            if whisper_format.header_size(head) == len(head):
                known[head] = kind
        header, archive, key, cost, span, layout = kind
        if archive is None:
            out[i] = (None, header)
            continue
        spent += cost
        if spent > room:       # before reading: bounded memory per request
            budget.spend_points(spent, paths[i])
        if not layout:         # not a layout whisper writes
            out[i] = _read_one(paths[i], from_time, until_time, now)
            continue
        out[i] = (key[0], header)
        spans[i] = span
        (eager if file_sizes[i] < span[0] + span[1] else lazy).setdefault(key, []).append(i)
    if budget is not None:
        budget.spend_points(spent, paths[-1] if paths else '')
    for (time_info, points), members in lazy.items():
        block = packed.FileBlock(_points.scan, [names[i] for i in members],
                                 [spans[i][0] for i in members],
                                 [spans[i][1] for i in members], time_info, points)
        for row, i in enumerate(members):
            out[i] = ((time_info, packed.PackedValues(block, row)), out[i][1])
    for (time_info, points), members in eager.items():
        _read_block(names, spans, members, time_info, points, out)
    return out


def read_many(paths: list[str], from_time: int, until_time: Optional[int],
              now: Optional[int], budget: Any = None) -> list[Any]:
    """For each path: (whisper.fetch result or None, header), or the exception raised.

    ``budget`` (``webapp.limits.Budget``) is charged each file's datapoints before they
    are read, and its time limit is checked between files.

    Values are :class:`~webapp.storage.packed.PackedValues` when numpy is enabled,
    lists otherwise. With the C accelerator (``_points``) only the headers are read
    here: the points stay in the files (:class:`~webapp.storage.packed.FileBlock`)
    until a consumer asks for them or for their sums.
    """
    if packed.ENABLED and _points is not None:
        return _read_direct(paths, from_time, until_time, now, budget)
    out: list[Any] = []
    groups: dict[tuple, list[int]] = {}
    chunks: list[Any] = []
    for i, path in enumerate(paths):
        chunks.append(None)
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
            out.append(((time_info, _values(time_info, base, data)), header))
            continue
        points = len(data) // POINT_SIZE if base else \
            (time_info[1] - time_info[0]) // time_info[2]
        chunks[i] = data if base else None
        groups.setdefault((time_info, points), []).append(i)
        out.append((time_info, header))
    for (time_info, points), members in groups.items():
        block = packed.decode_block([chunks[i] for i in members], time_info, points)
        for row, i in enumerate(members):
            out[i] = ((time_info, packed.PackedValues(block, row)), out[i][1])
    return out


def _read_one(path: str, from_time: int, until_time: Optional[int],
              now: Optional[int]) -> Any:
    """(whisper.fetch result or None, header) of one file, as value lists, or the error."""
    try:
        raw, header = _read_raw(path, from_time, until_time, now)
    except (OSError, WhisperError) as err:
        return err
    if raw is None:
        return None, header
    time_info, base, data = raw
    return (time_info, _values(time_info, base, data)), header


def _read_block(names: list[bytes], spans: list[Any], members: list[int],
                time_info: tuple[int, int, int], points: int, out: list[Any]) -> None:
    """Read the ``members`` files at once into one Block; a file that cannot be read (cut
    short) gets its error in ``out``."""
    files = packed.FileBlock(_points.scan, [names[i] for i in members],
                             [spans[i][0] for i in members], [spans[i][1] for i in members],
                             time_info, points)
    values, valid, failed = files.read(list(range(len(members))))
    block = packed.Block(values, valid, time_info)
    for row, i in enumerate(members):
        out[i] = ((time_info, packed.PackedValues(block, row)), out[i][1])
    for index, error in failed:
        path = os.fsdecode(names[members[index]])
        out[members[index]] = OSError(error, os.strerror(error), path) if error \
            else CorruptWhisperFile("Unable to read datapoints", path)
