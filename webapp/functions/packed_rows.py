"""Point-by-point functions computed on packed whisper rows instead of Python lists.

A function marked ``packed_input`` may get its first argument (a bare path) as
unmaterialised PackedSeries (see ``webapp.render.evaluator``). When every series is such
a row of one length, the values are computed here with numpy, with the same IEEE
operations in the same order as the list code, so the floats are bit-identical, and the
results go on as packed rows (the evaluator turns them into lists for any caller but the
JSON writer). Anything else (lists, NaN where Python's comparisons would decide, argument
types numpy would convert differently) materialises the series and the list code runs.
"""

from __future__ import annotations

from typing import Any, Optional

from webapp import pysum
from webapp.render.series import PackedSeries, materialize_all
from webapp.storage import packed

# |x| below this: x * 1e6 rounds to an integer that float64 holds exactly
_ROUND_LIMIT = 2.0 ** 52 / 1e6


def packed_grid(seriesList: list) -> Optional[tuple[Any, Any]]:
    """(values, valid) 2-D arrays of the series when all are untouched packed rows of
    one length; else None, with every PackedSeries materialised for the list code."""
    if packed.ENABLED and seriesList and all(
            type(s) is PackedSeries and s.packed is not None and not s.drop and
            s.valuesPerPoint == 1 for s in seriesList):
        arrays = packed.stack_rows([s.packed for s in seriesList])
        if arrays is not None:
            return arrays
    materialize_all(seriesList)
    return None


def exact_number(value: Any) -> bool:
    """Whether numpy compares and computes with ``value`` as Python does (a float, or an
    int that float64 holds exactly)."""
    return type(value) is float or (type(value) is int and abs(value) <= 2 ** 53)


def rows_of(result: packed.Block) -> list[packed.PackedValues]:
    return [packed.PackedValues(result, i) for i in range(result.values.shape[0])]


def copies(seriesList: list, name: str, result: packed.Block) -> list[PackedSeries]:
    """What ``series.copy(name=name % series.name, values=...)`` gives for each series,
    with the values as rows of ``result``."""
    return [PackedSeries(name % s.name, s.start, s.end, s.step, row,
                         consolidate=s.consolidationFunc, tags=s.tags,
                         xFilesFactor=s.xFilesFactor)
            for s, row in zip(seriesList, rows_of(result), strict=True)]


def scaled(values: Any, valid: Any, factor: float) -> packed.Block:
    """``float(v) * factor`` of each value."""
    np = packed.np
    with np.errstate(all='ignore'):
        return packed.Block.computed(values * factor, valid.copy())


def differences(values: Any, valid: Any) -> packed.Block:
    """``v - previous`` (no value at the first point or next to a gap)."""
    np = packed.np
    out = np.zeros_like(values)
    ok = np.zeros_like(valid)
    with np.errstate(all='ignore'):
        np.subtract(values[:, 1:], values[:, :-1], out=out[:, 1:])
    np.logical_and(valid[:, 1:], valid[:, :-1], out=ok[:, 1:])
    return packed.Block.computed(out, ok)


def counter_deltas(values: Any, valid: Any, maxValue: Any,
                   minValue: Any) -> Optional[tuple[Any, Any]]:
    """(deltas, ok) as ``non_negative_delta`` gives them point by point, or None when the
    bounds are not numbers numpy treats as Python does."""
    np = packed.np
    if any(b is not None and not exact_number(b) for b in (maxValue, minValue)):
        return None
    try:
        wrap = None if maxValue is None else float(maxValue + 1)
    except OverflowError:
        return None
    low = float(minValue or 0)
    clean = valid.copy()
    with np.errstate(all='ignore'):       # in place where it can: rows may be large
        if maxValue is not None:
            clean &= ~(values > maxValue)
        if minValue is not None:
            clean &= ~(values < minValue)
        prev = np.zeros_like(values)
        prev[:, 1:] = values[:, :-1]
        ok = np.zeros_like(valid)
        np.logical_and(clean[:, 1:], clean[:, :-1], out=ok[:, 1:])
        del clean
        rising = values >= prev
        out = values - prev
        if wrap is not None:
            wrapped = wrap + values
            wrapped -= prev
            wrapped -= low
            np.copyto(out, wrapped, where=~rising)
        elif minValue is not None:
            np.copyto(out, values - float(minValue), where=~rising)
        else:
            ok &= rising
    return out, ok


def round6(values: Any) -> Any:
    """Python's ``round(x, 6)`` of each value, bit for bit: the nearest integer to
    ``x * 1e6`` divided by 1e6 (one correctly rounded division, as round()'s decimal
    string read back), except where the product lies too close to a half for its float
    to decide the rounding, or is too large or not finite: those call round()."""
    np = packed.np
    with np.errstate(all='ignore'):       # in place where it can: rows may be large
        scaled_up = values * 1e6
        out = np.rint(scaled_up)
        half = np.floor(scaled_up)
        np.subtract(scaled_up, half, out=half)
        half -= 0.5
        np.abs(half, out=half)
        margin = np.spacing(scaled_up, out=scaled_up)
        np.abs(margin, out=margin)
        margin *= 4
        unsure = half <= margin
        del margin
        size = np.abs(values, out=half)
        unsure |= ~(size < _ROUND_LIMIT)
        del size, half
        out /= 1e6
    for index in map(tuple, np.argwhere(unsure)):
        out[index] = round(float(values[index]), 6)
    return out


def rates(seriesList: list, values: Any, valid: Any, maxValue: Any,
          minValue: Any) -> Optional[packed.Block]:
    """perSecond: ``round(delta / step, 6)`` of each counter delta (each series' step)."""
    found = counter_deltas(values, valid, maxValue, minValue)
    if found is None:
        return None
    deltas, ok = found
    np = packed.np
    steps = np.array([float(s.step) for s in seriesList]).reshape(-1, 1)
    with np.errstate(all='ignore'):
        deltas /= steps
    deltas[~ok] = 0.0
    return packed.Block.computed(round6(deltas), ok)


def kept_last(values: Any, valid: Any, limit: float) -> packed.Block:
    """keepLastValue: each gap of at most ``limit`` points after a value takes that
    value."""
    np = packed.np
    points = values.shape[1]
    index = np.arange(points)
    last = np.maximum.accumulate(np.where(valid, index, -1), axis=1)
    following = np.minimum.accumulate(np.where(valid, index, points)[:, ::-1], axis=1)[:, ::-1]
    fill = ~valid & (last >= 0) & (following - last - 1 <= limit)
    rows = np.arange(values.shape[0])[:, None]
    out = np.where(fill, values[rows, np.maximum(last, 0)], values)
    return packed.Block.computed(out, valid | fill)


def max_keys(seriesList: list) -> Optional[list[float]]:
    """Each series' largest value (-inf for none) from its packed row, or None (lists
    materialised) when a row holds NaN, where Python's max() depends on the order."""
    arrays = packed_grid(seriesList)
    if arrays is None:
        return None
    values, valid = arrays
    np = packed.np
    if np.isnan(values[valid]).any():
        materialize_all(seriesList)
        return None
    top = np.where(valid, values, -np.inf).max(axis=1) if values.shape[1] else \
        np.full(values.shape[0], -np.inf)
    return top.tolist()


def sort_by_max(seriesList: list) -> bool:
    """Sort the series by their largest value, largest first, as ``sort(key=...max...,
    reverse=True)`` does; False (lists materialised) when the rows cannot say."""
    keys = max_keys(seriesList)
    if keys is None:
        return False
    order = sorted(range(len(seriesList)), key=keys.__getitem__, reverse=True)
    seriesList[:] = [seriesList[i] for i in order]
    return True


# summarize's functions computed here: name -> average (else sum)
BUCKET_SUMS = {'sum': False, 'total': False, 'average': True, 'avg': True}


def bucket_values(seriesList: list, func: str, interval: int) -> Optional[list[list]]:
    """summarize(..., func, alignToFrom=False)'s values of each series (sum or average
    of the known values of each interval-aligned bucket, added in time order from 0 as
    ``sum()`` adds them; None where the bucket misses the xFilesFactor), or None (lists
    materialised) when the rows are not one time range or the buckets do not fall on
    points."""
    average = BUCKET_SUMS.get(func) if type(func) is str else None
    if type(interval) is not int or interval <= 0:
        average = None
    arrays = None if average is None else packed_grid(seriesList)
    if arrays is None:
        materialize_all(seriesList)
        return None
    first = seriesList[0]
    start, step, points = int(first.start), int(first.step), arrays[0].shape[1]
    new_start = start - start % interval
    new_end = int(first.end) - int(first.end) % interval + interval
    if any((s.start, s.end, s.step) != (first.start, first.end, first.step)
           for s in seriesList) or step <= 0 or interval % step or \
            (start - new_start) % step or first.end != start + points * step:
        materialize_all(seriesList)
        return None
    np = packed.np
    per, buckets = interval // step, (new_end - new_start) // interval
    offset = (start - new_start) // step
    values, valid = arrays
    grid = np.zeros((len(seriesList), buckets * per))
    known = np.zeros(grid.shape, dtype=bool)
    grid[:, offset:offset + points] = np.where(valid, values, 0.0)
    known[:, offset:offset + points] = valid
    grid = grid.reshape(len(seriesList), buckets, per)
    count = known.reshape(grid.shape).sum(axis=2)
    acc = np.zeros((len(seriesList), buckets))
    comp = np.zeros_like(acc)
    with np.errstate(all='ignore'):       # inf - inf is nan, as in Python
        for j in range(per):              # 0.0 where no point: as if skipped
            pysum.add_into(np, acc, comp, grid[:, :, j])
        ratios = np.array([s.xFilesFactor or 0.0 for s in seriesList]).reshape(-1, 1)
        acc, ok = pysum.finish(np, acc, comp, count, average, interval / step, ratios)
    return packed.value_lists(acc, ok)
