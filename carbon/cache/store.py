"""The metric cache: datapoints waiting to be written, compact and thread-safe.

Points of one metric live in one ``bytearray`` of native doubles, interleaved
timestamp, value pairs (16 bytes a point plus one small object per metric), far
smaller than a dict of float objects; a batch is appended by one C call
(carbon.cache._store) and taken out as an ``array('d')``. Duplicates are resolved
when read or drained: the last value received for a timestamp wins, as in carbon.
"""

from __future__ import annotations

import struct
import threading
from array import array
from itertools import islice
from operator import lt
from typing import Iterator

from carbon.pipeline import Batch

Points = list[tuple[float, float]]

_PAIR = struct.Struct("=dd")

try:  # optional C accelerator (setup.py builds it)
    from carbon.cache._store import add_batch as _native_add_batch
    from carbon.cache._store import Names as _Names
    from carbon.cache._store import add_encoded as _native_add_encoded
except ImportError:  # pragma: no cover - built without a compiler
    _native_add_batch = _native_add_encoded = _Names = None

# Names the C append remembers as str objects (carbon.cache._store.Names): a name seen
# again costs no new str and no hash; the table forgets them all at once past this
# many (16 bytes a slot, two slots a name, plus the strs no longer in the cache).
NAME_TABLE_SIZE = 1 << 17


def add_points_py(data: dict[str, bytearray], batch: Batch) -> int:
    """Append (metric, timestamp, value) points to their metrics' bytearrays; what
    carbon.cache._store.add_batch does."""
    pack = _PAIR.pack
    for metric, stamp, value in batch:
        pair = pack(stamp, value)
        points = data.get(metric)
        if points is None:
            data[metric] = bytearray(pair)
        else:
            points += pair
    return len(batch)


def add_encoded_py(data: dict[str, bytearray], payload: bytes, count: int,
                   names: object = None) -> int:
    """``add_points_py`` for ``count`` points in the journal's point form (checked whole
    first: ValueError and nothing added when malformed); what
    carbon.cache._store.add_encoded does (``names``, its table of str objects, changes
    no result and is not used here)."""
    # the journal's point form is decoded by the journal module, which imports this one
    from carbon.cache.journal import decode_py
    return add_points_py(data, decode_py(payload, count))


def as_pairs(raw: bytearray) -> array:
    """A metric's cached points as an ``array('d')`` of interleaved pairs (a copy)."""
    return array("d", raw)


class SortedPoints(list):
    """(timestamp, value) pairs in strictly increasing time order, plus the same points
    as two columns (``columns``: timestamps, values), which lets the storage backend
    prepare them without a Python loop (carbon.storage.whisper_points)."""

    __slots__ = ("columns",)

    def __init__(self, stamps: array, values: array) -> None:
        super().__init__(zip(stamps, values, strict=True))
        self.columns = (stamps, values)


def _increasing(stamps: array) -> bool:
    """Strictly increasing timestamps (checked at C level)."""
    return all(map(lt, stamps, islice(stamps, 1, None)))


def dedupe_sorted(raw: array, plain: bool = False) -> Points:
    """Interleaved (ts, value) pairs -> sorted unique points, last value winning.

    Points usually arrive in time order: then they are taken as they are (checked in
    C, and returned as SortedPoints, or with ``plain`` as a plain ``list`` of
    ``(float, float)`` tuples: the wire shape carbonlink answers carry, since
    graphite-web's unpickler takes no other class); else ``dict(zip(...))`` keeps the
    last value of a repeated timestamp.
    """
    stamps = raw[::2]
    if _increasing(stamps):
        if plain:
            return list(zip(stamps, raw[1::2], strict=True))
        return SortedPoints(stamps, raw[1::2])
    return sorted(dict(zip(stamps, raw[1::2], strict=True)).items())


class MetricCache:
    """Metric name -> pending points, with a datapoint count for MAX_CACHE_SIZE.

    The reactor thread adds whole batches (``add_batch``); the writer thread
    removes a batch of metrics at a time (``pop_raw_for_write``). A single lock
    guards both, taken once per batch, not once per point.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, bytearray] = {}
        self.add_points = _native_add_batch or add_points_py
        self.add_points_encoded = _native_add_encoded or add_encoded_py
        self.name_table = _Names(NAME_TABLE_SIZE) if _Names is not None else None
        self.size = 0
        # Points ever added by the receivers (add_batch, add_encoded; not put back): the
        # writer's pacing sees from it whether points are still coming in.
        self.received = 0
        # Points taken by a writer thread and not yet on disk (as they were cached):
        # still answered by carbonlink (``get``) so a reader never sees them in neither
        # place.
        self.writing: dict[str, array] = {}

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, metric: object) -> bool:
        return metric in self.data

    def __bool__(self) -> bool:
        return bool(self.data)

    def add_batch(self, batch: Batch) -> int:
        """Add points (all of them: MAX_CACHE_SIZE is the sink's flow control); returns
        how many."""
        with self.lock:
            added = self.add_points(self.data, batch)
            self.size += added
            self.received += added
        return added

    def add_encoded(self, payload: bytes, count: int) -> int:
        """``add_batch`` for ``count`` points in the journal's point form (as
        carbon.cache.journal.encode_lines makes them from a read)."""
        with self.lock:
            added = self.add_points_encoded(self.data, payload, count, self.name_table)
            self.size += added
            self.received += added
        return added

    def restore(self, metric: str, points: Points) -> None:
        """Put points back (e.g. a create that has to wait), keeping newer ones newer."""
        flat = bytearray()
        for point in points:
            flat += _PAIR.pack(*point)
        self._put_back(metric, flat)

    def restore_raw(self, metric: str, raw: array) -> None:
        """``restore`` for points as ``pop_raw_for_write`` gave them."""
        self._put_back(metric, bytearray(raw))

    def _put_back(self, metric: str, flat: bytearray) -> None:
        added = len(flat) >> 4
        with self.lock:
            current = self.data.get(metric)
            if current is not None:
                flat += current
            self.data[metric] = flat
            self.size += added

    def pop(self, metric: str) -> Points:
        """Remove a metric and return its points sorted by time, duplicates resolved (the
        last value of a timestamp wins): a plain list of (timestamp, value) tuples."""
        with self.lock:
            raw = self.data.pop(metric, None)
            if raw is None:
                return []
            self.size -= len(raw) >> 4
        return sorted(dict(_PAIR.iter_unpack(raw)).items())

    def pop_raw_for_write(self, metrics: list[str]) -> list[array]:
        """Remove metrics for a writer: per metric its points as cached (interleaved
        timestamp, value pairs in arrival order; duplicates not resolved), which stay
        visible to ``get`` until ``written``."""
        data, writing = self.data, self.writing
        taken = []
        with self.lock:
            for metric in metrics:
                raw = data.pop(metric, None)
                if raw is None:
                    pairs = array("d")
                else:
                    self.size -= len(raw) >> 4
                    pairs = as_pairs(raw)
                writing[metric] = pairs
                taken.append(pairs)
            if not data:
                data.clear()  # an emptied dict keeps its table (sized for its peak) else
        return taken

    def written(self, *metrics: str) -> None:
        """The points taken by ``pop_raw_for_write`` are on disk (or were put back)."""
        writing = self.writing
        with self.lock:
            for metric in metrics:
                writing.pop(metric, None)
            if not writing:
                writing.clear()

    def get(self, metric: str) -> Points:
        """The points of a metric (for carbonlink), without removing them: a plain list
        of (timestamp, value) tuples, time-ordered, duplicates resolved
        (``dedupe_sorted(..., plain=True)``).

        Includes points a writer is writing right now; newer cached values win.
        """
        with self.lock:
            raw = self.data.get(metric)
            raw = as_pairs(raw) if raw is not None else None
            writing = self.writing.get(metric)
        if writing is None:
            return dedupe_sorted(raw, plain=True) if raw is not None else []
        merged = array("d", writing)
        if raw is not None:
            merged.extend(raw)
        return dedupe_sorted(merged, plain=True)

    def count(self, metric: str) -> int:
        raw = self.data.get(metric)
        return len(raw) >> 4 if raw is not None else 0

    def counts(self) -> list[tuple[str, int]]:
        """(metric, pending points) for every metric: a snapshot for strategies."""
        with self.lock:
            return [(metric, len(raw) >> 4) for metric, raw in self.data.items()]

    def oldest(self) -> list[tuple[str, float]]:
        """(metric, oldest pending timestamp) for every metric."""
        with self.lock:
            return [(metric, min(as_pairs(raw)[::2])) for metric, raw in self.data.items()]

    def names(self) -> list[str]:
        with self.lock:
            return list(self.data)

    def pending_names(self) -> set[str]:
        """Every metric with points not yet on disk: cached or being written (the
        journal's retirement snapshot)."""
        with self.lock:
            return set(self.data).union(self.writing)

    def is_empty(self) -> bool:
        """No point cached and none being written."""
        with self.lock:
            return not self.data and not self.writing

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
