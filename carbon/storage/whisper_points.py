"""Point handling of whisper 1.1.10's update_many, as pure functions.

Ordering and per-archive assignment of points, run building (including whisper's
quirk at interval 0), the xFilesFactor test of one lower interval and whisper's wrap
arithmetic. Used by carbon.storage.whisper_writer.
"""

from __future__ import annotations

from itertools import chain, compress, islice
from operator import itemgetter, lt
from typing import Iterable, Sequence

from carbon.storage.whisper_format import Header

__all__ = ["prepare_points", "split_by_archive", "consecutive_intervals",
           "contiguous_runs", "runs_as_whisper", "lower_candidate", "read_span"]


def prepare_points(datapoints: Iterable[tuple[float, float]]) -> list[tuple[int, float]]:
    """``(int(t), float(v))`` pairs in time order; equal timestamps in reverse given order.

    That is whisper's newest-first stable sort, reversed (as whisper walks each archive).
    Points that also come as ``columns`` (timestamps strictly increasing, values floats;
    carbon.cache.store.SortedPoints) are converted with C-level map and zip when their
    integer timestamps stay distinct.
    """
    # carbon.cache.store.SortedPoints, which this lower layer does not import
    columns = getattr(datapoints, "columns", None)
    if columns is not None:
        stamps = list(map(int, columns[0]))
        if all(map(lt, stamps, islice(stamps, 1, None))):
            return list(zip(stamps, columns[1], strict=True))
    points = [(int(t), float(v)) for t, v in datapoints]
    if len(points) > 1:
        points.reverse()
        points.sort(key=_timestamp)
    return points


_timestamp = itemgetter(0)


def split_by_archive(archives: list, points: list[tuple[int, float]],
                     now: int) -> tuple[list[tuple[int, list[tuple[int, float]]]], int]:
    """Points per archive (in time order), as whisper's newest-first retention walk
    assigns them, and how many are too old for every archive."""
    if not points:
        return [], 0
    if now - points[0][0] <= archives[0].retention:  # the usual case: all in the first
        return [(0, points)], 0
    groups = []
    index = 0
    current: list[tuple[int, float]] = []
    for i in range(len(points) - 1, -1, -1):
        age = now - points[i][0]
        while archives[index].retention < age:
            if current:
                current.reverse()
                groups.append((index, current))
                current = []
            index += 1
            if index == len(archives):
                return groups, i + 1
        current.append(points[i])
    if current:
        current.reverse()
        groups.append((index, current))
    return groups, 0


def consecutive_intervals(points: list[tuple[int, float]], step: int) -> list[int] | None:
    """The timestamps of ``points`` if they are exactly consecutive aligned intervals
    after 0 (then each point is its own interval and they form one run), else None."""
    first = points[0][0]
    last = points[-1][0]
    if first % step or not first or last - first != step * (len(points) - 1):
        return None
    intervals = list(range(first, last + 1, step))
    return intervals if list(map(_timestamp, points)) == intervals else None


def contiguous_runs(latest: dict[int, float], step: int) -> list[tuple[int, list]]:
    """Contiguous runs of ``latest`` (interval -> value, ascending): (start, fields)."""
    keys = list(latest)
    count = len(keys)
    if keys[-1] - keys[0] == step * (count - 1):
        return [(keys[0], list(chain.from_iterable(latest.items())))]
    items = list(latest.items())
    bounds = [0, *[i for i in range(1, count) if keys[i] - keys[i - 1] != step], count]
    return [(keys[lo], list(chain.from_iterable(items[lo:hi])))
            for lo, hi in zip(bounds, bounds[1:], strict=False)]


def runs_as_whisper(points: list[tuple[int, float]], step: int) -> list[tuple[int, list]]:
    """Whisper's own run building, needed when an interval is 0: its test is "not
    previous", so a run never ends after interval 0 and its start is computed back
    from the last interval."""
    aligned = [t - t % step for t, _ in points]
    result: list[tuple[int, list]] = []
    fields: list = []
    previous = 0
    last = len(points) - 1
    for i, interval in enumerate(aligned):
        if i < last and interval == aligned[i + 1]:
            continue  # a later point of the same interval wins
        if not previous or interval == previous + step:
            fields.append(interval)
            fields.append(points[i][1])
        else:
            result.append((previous - step * (len(fields) // 2 - 1), fields))
            fields = [interval, points[i][1]]
        previous = interval
    result.append((previous - step * (len(fields) // 2 - 1), fields))
    return result


def lower_candidate(values: Sequence[float], present: list[bool],
                    header: Header) -> tuple[Sequence, Sequence | None] | None:
    """(known, neighbors) of one lower interval if it passes xFilesFactor, else None.

    ``present[i]`` tells whether slot i holds its own interval. ``neighbors`` (with None
    for absent slots) is only built when the aggregation needs it (avg_zero).
    """
    known = list(compress(values, present))
    count = len(known)
    if count == len(values):
        return known, known
    if not count or float(count) / float(len(values)) < header.xff:
        return None
    if header.aggregation_method != "avg_zero":
        return known, None
    return known, [v if ok else None for v, ok in zip(values, present, strict=True)]


def read_span(first: int, wanted: int, points: int) -> int:
    """How many slots whisper reads from ``first`` for ``wanted`` higher points."""
    last = (first + wanted) % points
    return last - first if first < last else points - first + last
