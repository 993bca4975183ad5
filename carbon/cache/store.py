"""The metric cache: datapoints waiting to be written, compact and thread-safe.

Points of one metric live in one ``array('d')`` as interleaved timestamp, value
pairs (16 bytes a point plus one small object per metric), far smaller than a
dict of float objects. Duplicates are resolved when read or drained: the last
value received for a timestamp wins, as in carbon.
"""

from __future__ import annotations

import threading
from array import array
from itertools import islice
from operator import lt
from typing import Iterator

from carbon.pipeline import Batch

Points = list[tuple[float, float]]


class SortedPoints(list):
    """(timestamp, value) pairs in strictly increasing time order, plus the same points
    as two columns (``columns``: timestamps, values), which lets the storage backend
    prepare them without a Python loop (carbon.storage.whisper_points)."""

    __slots__ = ("columns",)

    def __init__(self, stamps: array, values: array) -> None:
        super().__init__(zip(stamps, values, strict=True))
        self.columns = (stamps, values)


def dedupe_sorted(raw: array) -> Points:
    """Interleaved (ts, value) pairs -> sorted unique points, last value winning.

    Points usually arrive in time order: then they are taken as they are (checked in
    C, and returned as SortedPoints); else ``dict(zip(...))`` keeps the last value of a
    repeated timestamp.
    """
    stamps = raw[::2]
    if all(map(lt, stamps, islice(stamps, 1, None))):
        return SortedPoints(stamps, raw[1::2])
    return sorted(dict(zip(stamps, raw[1::2], strict=True)).items())


class MetricCache:
    """Metric name -> pending points, with a datapoint count for MAX_CACHE_SIZE.

    The reactor thread adds whole batches (``add_batch``); the writer thread
    removes one metric at a time (``pop``). A single lock guards both, taken
    once per batch, not once per point.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.data: dict[str, array] = {}
        self.size = 0
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

    def add_batch(self, batch: Batch, limit: float = float("inf")) -> int:
        """Add points; returns how many were accepted before ``limit`` was reached."""
        data = self.data
        with self.lock:
            room = limit - self.size
            if room <= 0:
                return 0
            if room < len(batch):
                batch = batch[:int(room)]
            for metric, stamp, value in batch:
                points = data.get(metric)
                if points is None:
                    data[metric] = array("d", (stamp, value))
                else:
                    points.append(stamp)
                    points.append(value)
            self.size += len(batch)
        return len(batch)

    def restore(self, metric: str, points: Points) -> None:
        """Put points back (e.g. a create that has to wait), keeping newer ones newer."""
        flat = array("d")
        for stamp, value in points:
            flat.append(stamp)
            flat.append(value)
        self.restore_raw(metric, flat)

    def restore_raw(self, metric: str, raw: array) -> None:
        """``restore`` for points as ``pop_raw_for_write`` gave them."""
        flat = array("d", raw)
        points = len(flat) // 2
        with self.lock:
            current = self.data.get(metric)
            if current is not None:
                flat.extend(current)
            self.data[metric] = flat
            self.size += points

    def pop(self, metric: str) -> Points:
        """Remove a metric and return its points sorted by time, duplicates resolved."""
        with self.lock:
            raw = self.data.pop(metric, None)
            if raw is None:
                return []
            self.size -= len(raw) // 2
        return dedupe_sorted(raw)

    def pop_for_write(self, metric: str) -> Points:
        """Like ``pop``, but the points stay visible to ``get`` until ``written``."""
        return dedupe_sorted(self.pop_raw_for_write([metric])[0])

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
                    raw = array("d")
                else:
                    self.size -= len(raw) >> 1
                writing[metric] = raw
                taken.append(raw)
        return taken

    def written(self, *metrics: str) -> None:
        """The points taken by ``pop_for_write`` are on disk (or were put back)."""
        writing = self.writing
        with self.lock:
            for metric in metrics:
                writing.pop(metric, None)

    def get(self, metric: str) -> Points:
        """The points of a metric (for carbonlink), without removing them.

        Includes points a writer is writing right now; newer cached values win.
        """
        with self.lock:
            raw = self.data.get(metric)
            raw = array("d", raw) if raw is not None else None
            writing = self.writing.get(metric)
        if writing is None:
            return dedupe_sorted(raw) if raw is not None else []
        merged = array("d", writing)
        if raw is not None:
            merged.extend(raw)
        return dedupe_sorted(merged)

    def count(self, metric: str) -> int:
        raw = self.data.get(metric)
        return len(raw) // 2 if raw is not None else 0

    def counts(self) -> list[tuple[str, int]]:
        """(metric, pending points) for every metric: a snapshot for strategies."""
        with self.lock:
            return [(metric, len(raw) >> 1) for metric, raw in self.data.items()]

    def oldest(self) -> list[tuple[str, float]]:
        """(metric, oldest pending timestamp) for every metric."""
        with self.lock:
            return [(metric, min(raw[::2])) for metric, raw in self.data.items()]

    def names(self) -> list[str]:
        with self.lock:
            return list(self.data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
