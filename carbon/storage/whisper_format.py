"""The whisper 1.1.10 file format: header layout, validation, aggregation and creation.

File = metadata (aggregation type, max retention, xFilesFactor, archive count: ``!2LfL``),
then one ``!3L`` (offset, seconds per point, points) per archive, then the archives,
each a ring of ``!Ld`` (timestamp, value) points. Everything is big-endian.

The one home of the format: carbon's writer (carbon.storage.whisper_*), the render app's
reader (webapp.storage.whisper_read) and the C update (carbon/storage/_whisper_writer.c, which
mirrors ``parse_header`` and ``aggregate``) all take it from here.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import BinaryIO, Sequence

__all__ = [
    "WhisperError", "CorruptWhisperFile", "InvalidConfiguration", "InvalidAggregationMethod",
    "InvalidXFilesFactor", "AGGREGATION_TYPES", "AGGREGATION_METHODS", "AGGREGATORS", "Archive",
    "Header", "InvalidTimeInterval", "POINT_FORMAT", "run_struct", "header_size",
    "parse_header", "read_header_from", "pack_metadata", "validate_archive_list", "aggregate",
    "build_header",
]

METADATA = struct.Struct("!2LfL")
ARCHIVE_INFO = struct.Struct("!3L")
POINT_FORMAT = "!Ld"
POINT = struct.Struct(POINT_FORMAT)
POINT_SIZE = POINT.size
METADATA_SIZE = METADATA.size
ARCHIVE_INFO_SIZE = ARCHIVE_INFO.size

AGGREGATION_TYPES = {
    1: "average", 2: "sum", 3: "last", 4: "max", 5: "min", 6: "avg_zero", 7: "absmax",
    8: "absmin",
}
AGGREGATION_METHODS = {method: code for code, method in AGGREGATION_TYPES.items()}

class WhisperError(Exception):
    """Base class of whisper format errors."""


class CorruptWhisperFile(WhisperError):
    """A file whose header cannot be read as whisper."""

    def __init__(self, error: str, path: str) -> None:
        super().__init__(error)
        self.error = error
        self.path = path

    def __str__(self) -> str:
        return "%s (%s)" % (self.error, self.path)


class InvalidTimeInterval(WhisperError, ValueError):
    """A fetch whose from time is after its until time."""


class InvalidConfiguration(WhisperError, ValueError):
    """An archive list whisper refuses (or a file that already exists)."""


class InvalidAggregationMethod(WhisperError, ValueError):
    """An aggregation method name whisper does not know."""


class InvalidXFilesFactor(WhisperError, ValueError):
    """An xFilesFactor that is not a float between 0 and 1."""


class Archive:
    """One archive of a header; ``size`` is in bytes, ``retention`` in seconds."""

    __slots__ = ("offset", "step", "points", "retention", "size", "end")

    def __init__(self, offset: int, step: int, points: int) -> None:
        self.offset = offset
        self.step = step
        self.points = points
        self.retention = step * points
        self.size = points * POINT_SIZE
        self.end = offset + self.size


class Header:
    """A parsed whisper header plus the raw bytes it came from (for staleness checks)."""

    __slots__ = ("raw", "size", "aggregation_method", "max_retention", "xff", "archives",
                 "lowers", "aggregator")

    def __init__(self, raw: bytes, aggregation_method: str, max_retention: int, xff: float,
                 archives: list[Archive]) -> None:
        self.raw = raw
        self.size = len(raw)
        self.aggregation_method = aggregation_method
        self.max_retention = max_retention
        self.xff = xff
        self.archives = archives
        # per archive: the indexes of the coarser archives whisper propagates into
        self.lowers = [[j for j, lower in enumerate(archives) if lower.step > archive.step]
                       for archive in archives]
        self.aggregator = AGGREGATORS[aggregation_method]

    def info(self) -> dict:
        """The header as ``whisper.info`` returns it."""
        return {
            "aggregationMethod": self.aggregation_method,
            "maxRetention": self.max_retention,
            "xFilesFactor": self.xff,
            "archives": [{"offset": a.offset, "secondsPerPoint": a.step, "points": a.points,
                          "retention": a.retention, "size": a.size} for a in self.archives],
        }


def header_size(raw_metadata: bytes) -> int:
    """Total header length implied by the first METADATA_SIZE bytes (0 if too short)."""
    if len(raw_metadata) < METADATA_SIZE:
        return 0
    count = METADATA.unpack_from(raw_metadata)[3]
    return METADATA_SIZE + count * ARCHIVE_INFO_SIZE


def parse_header(raw: bytes, path: str) -> Header:
    """Parse ``raw`` (at least the full header) like whisper's header reader does."""
    try:
        agg_type, max_retention, xff, count = METADATA.unpack_from(raw)
    except struct.error:
        raise CorruptWhisperFile("Unable to read header", path) from None
    method = AGGREGATION_TYPES.get(agg_type)
    if method is None or not 0 <= xff <= 1:
        raise CorruptWhisperFile("Unable to read header", path)
    archives = []
    pos = METADATA_SIZE
    for i in range(count):
        try:
            offset, step, points = ARCHIVE_INFO.unpack_from(raw, pos)
        except struct.error:
            raise CorruptWhisperFile("Unable to read archive%d metadata" % i, path) from None
        archives.append(Archive(offset, step, points))
        pos += ARCHIVE_INFO_SIZE
    return Header(bytes(raw[:pos]), method, max_retention, xff, archives)


def read_header_from(fh: BinaryIO, path: str) -> Header:
    """The header of an open (possibly gzip) file object, read from its start."""
    fh.seek(0)
    head = fh.read(METADATA_SIZE)
    size = header_size(head)
    if size == 0:
        raise CorruptWhisperFile("Unable to read header", path)
    return parse_header(head + fh.read(size - METADATA_SIZE), path)


@lru_cache(maxsize=512)
def run_struct(count: int) -> struct.Struct:
    """The packing of ``count`` consecutive points (``!LdLd...``)."""
    return struct.Struct("!" + "Ld" * count)


def pack_metadata(aggregation_method: str, max_retention: int, xff: float,
                  archive_count: int) -> bytes:
    """The 16 metadata bytes, validating the method and xFilesFactor as whisper does."""
    try:
        agg_type = AGGREGATION_METHODS[aggregation_method]
    except (KeyError, TypeError):
        raise InvalidAggregationMethod(
            "Unrecognized aggregation method: %s" % aggregation_method) from None
    try:
        xff = float(xff)
    except ValueError:
        raise InvalidXFilesFactor("Invalid xFilesFactor %s, not a float" % xff) from None
    if xff < 0 or xff > 1:
        raise InvalidXFilesFactor("Invalid xFilesFactor %s, not between 0 and 1" % xff)
    return METADATA.pack(agg_type, max_retention, xff, archive_count)


def validate_archive_list(archives: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The archives sorted by precision; InvalidConfiguration when whisper would refuse them."""
    if not archives:
        raise InvalidConfiguration("You must specify at least one archive configuration!")
    ordered = sorted(archives, key=lambda a: a[0])
    for i, (archive, following) in enumerate(zip(ordered[:-1], ordered[1:], strict=True)):
        if not archive[0] < following[0]:
            raise InvalidConfiguration(
                "A Whisper database may not be configured having two archives with the same "
                "precision (archive%d: %s, archive%d: %s)" % (i, archive, i + 1, following))
        if following[0] % archive[0] != 0:
            raise InvalidConfiguration(
                "Higher precision archives' precision must evenly divide all lower precision "
                "archives' precision (archive%d: %s, archive%d: %s)"
                % (i, archive[0], i + 1, following[0]))
        retention = archive[0] * archive[1]
        following_retention = following[0] * following[1]
        if not following_retention > retention:
            raise InvalidConfiguration(
                "Lower precision archives must cover larger time intervals than higher "
                "precision archives (archive%d: %s seconds, archive%d: %s seconds)"
                % (i, retention, i + 1, following_retention))
        per_consolidation = following[0] // archive[0]
        if not archive[1] >= per_consolidation:
            raise InvalidConfiguration(
                "Each archive must have at least enough points to consolidate to the next "
                "archive (archive%d consolidates %d of archive%d's points but it has only %d "
                "total points)" % (i + 1, per_consolidation, i, archive[1]))
    return ordered


def _average(known, neighbors):
    return float(sum(known)) / float(len(known))


def _sum(known, neighbors):
    return float(sum(known))


def _last(known, neighbors):
    return known[-1]


def _max(known, neighbors):
    return max(known)


def _min(known, neighbors):
    return min(known)


def _avg_zero(known, neighbors):
    values = [v or 0 for v in neighbors]
    return float(sum(values)) / float(len(values))


def _absmax(known, neighbors):
    return max(known, key=abs)


def _absmin(known, neighbors):
    return min(known, key=abs)


# Whisper's aggregation of one lower-archive interval: the same float operations in the
# same order. ``known`` are the values present, ``neighbors`` all slots (None if absent).
AGGREGATORS = {
    "average": _average, "sum": _sum, "last": _last, "max": _max, "min": _min,
    "avg_zero": _avg_zero, "absmax": _absmax, "absmin": _absmin,
}


def aggregate(method: str, known: Sequence[float], neighbors: Sequence[float | None]) -> float:
    """Whisper's aggregate of one lower-archive interval."""
    try:
        function = AGGREGATORS[method]
    except KeyError:
        raise InvalidAggregationMethod("Unrecognized aggregation method %s" % method) from None
    return function(known, neighbors)


def build_header(archives: list[tuple[int, int]], xff: float, aggregation_method: str) -> bytes:
    """The header bytes whisper.create writes for already-validated, sorted ``archives``."""
    oldest = max(step * points for step, points in archives)
    parts = [pack_metadata(aggregation_method, oldest, xff, len(archives))]
    offset = METADATA_SIZE + ARCHIVE_INFO_SIZE * len(archives)
    for step, points in archives:
        parts.append(ARCHIVE_INFO.pack(offset, step, points))
        offset += points * POINT_SIZE
    return b"".join(parts)
