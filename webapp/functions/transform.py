"""Transform group: point-by-point maths on each series (scale, offset, derivative, ...)."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from webapp.functions import packed_rows
from webapp.functions.common import (
    INF, rename, rows, safe_max, safe_min, safe_pow,
)
from webapp.functions.registry import Traits, render_function
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries, materialize_all
from webapp.storage import packed

TRANSFORM = 'Transform'
SL = P('seriesList', 'seriesList', required=True)


def _pointwise(seriesList: list, name: str, tag: tuple, func: Callable[[Any], Any]) -> list:
    """Rename each series (in place) with ``name % series.name`` and map its values."""
    for series in seriesList:
        series.tags[tag[0]] = tag[1]
        rename(series, name % series.name)
        series[:] = [func(v) for v in list.__iter__(series)]
    return seriesList


def _renamed_rows(seriesList: list, name: str, tag: Optional[tuple],
                  result: packed.Block) -> list:
    """What ``_pointwise`` does to each series, with the values as rows of ``result``."""
    for series, row in zip(seriesList, packed_rows.rows_of(result), strict=True):
        if tag is not None:
            series.tags[tag[0]] = tag[1]
        rename(series, name % series.name)
        series.packed = row
    return seriesList


@render_function('scale', TRANSFORM, [SL, P('factor', 'float', required=True)],
                 traits=Traits(packed_input=True))
def scale(requestContext: dict, seriesList: list, factor: float) -> list[TimeSeries]:
    """Multiply each value by ``factor``."""
    times = float(factor)   # safe_mul(v, factor) inlined: float(v) * float(factor)
    arrays = packed_rows.packed_grid(seriesList)
    if arrays is not None:
        return _renamed_rows(seriesList, 'scale(%%s,%g)' % times, ('scale', factor),
                             packed_rows.scaled(*arrays, times))
    return _pointwise(seriesList, 'scale(%%s,%g)' % times, ('scale', factor),
                      lambda v: None if v is None else float(v) * times)


@render_function('scaleToSeconds', TRANSFORM, [SL, P('seconds', 'float', required=True)])
def scaleToSeconds(requestContext: dict, seriesList: list, seconds: float) -> list[TimeSeries]:
    """Scale per-step values to a per-``seconds`` rate (value * seconds / step)."""
    for series in seriesList:
        series.tags['scaleToSeconds'] = seconds
        rename(series, 'scaleToSeconds(%s,%d)' % (series.name, seconds))
        factor = seconds / series.step
        series[:] = [None if v is None else round(v * factor, 6)
                     for v in list.__iter__(series)]
    return seriesList


@render_function('offset', TRANSFORM, [SL, P('factor', 'float', required=True)])
def offset(requestContext: dict, seriesList: list, factor: float) -> list[TimeSeries]:
    """Add ``factor`` to each non-null value."""
    return _pointwise(seriesList, 'offset(%%s,%g)' % float(factor), ('offset', factor),
                      lambda v: None if v is None else v + factor)


@render_function('add', TRANSFORM, [SL, P('constant', 'float', required=True)])
def add(requestContext: dict, seriesList: list, constant: float) -> list[TimeSeries]:
    """Add ``constant`` to each non-null value (name shows the constant as an integer)."""
    return _pointwise(seriesList, 'add(%%s,%d)' % constant, ('add', constant),
                      lambda v: None if v is None else v + constant)


@render_function('absolute', TRANSFORM, [SL])
def absolute(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Absolute value of each point."""
    return _pointwise(seriesList, 'absolute(%s)', ('absolute', 1),
                      lambda v: None if v is None else abs(v))


@render_function('invert', TRANSFORM, [SL])
def invert(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """1/x for each point (None for 0)."""
    return _pointwise(seriesList, 'invert(%s)', ('invert', 1), lambda v: safe_pow(v, -1))


@render_function('squareRoot', TRANSFORM, [SL])
def squareRoot(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Square root of each point (None for negatives)."""
    return _pointwise(seriesList, 'squareRoot(%s)', ('squareRoot', 1),
                      lambda v: safe_pow(v, 0.5))


@render_function('pow', TRANSFORM, [SL, P('factor', 'float', required=True)])
def pow(requestContext: dict, seriesList: list, factor: float) -> list[TimeSeries]:
    """Raise each point to the power ``factor``."""
    return _pointwise(seriesList, 'pow(%%s,%g)' % float(factor), ('pow', factor),
                      lambda v: safe_pow(v, factor))


def _exp(v: Any) -> Any:
    try:
        return math.exp(v)
    except (TypeError, OverflowError):
        return None


@render_function('exp', TRANSFORM, [SL])
def exp(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """e raised to the power of each point."""
    return _pointwise(seriesList, 'exp(%s)', ('exp', 'e'), _exp)


def _sigmoid(v: Any) -> Any:
    try:
        return 1 / (1 + _exp(-v))
    except (TypeError, ValueError, ZeroDivisionError):
        return None


@render_function('sigmoid', TRANSFORM, [SL])
def sigmoid(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Logistic sigmoid 1 / (1 + e^-x) of each point."""
    return _pointwise(seriesList, 'sigmoid(%s)', ('sigmoid', 'sigmoid'), _sigmoid)


def _logit(v: Any) -> Any:
    try:
        return math.log(v / (1 - v))
    except (TypeError, ValueError, ZeroDivisionError):
        return None


@render_function('logit', TRANSFORM, [SL])
def logit(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """log(x / (1 - x)) of each point (None outside (0, 1))."""
    return _pointwise(seriesList, 'logit(%s)', ('logit', 'logit'), _logit)


@render_function('log', TRANSFORM, [SL, P('base', 'integer', default=10)])
def logarithm(requestContext: dict, seriesList: list, base: int = 10) -> list[TimeSeries]:
    """Logarithm of each point in ``base`` (None for values <= 0)."""
    results = []
    for series in seriesList:
        values = [None if v is None or v <= 0 else math.log(v, base) for v in series]
        series.tags['log'] = base
        results.append(series.copy(name='log(%s, %s)' % (series.name, base), values=values))
    return results


@render_function('offsetToZero', TRANSFORM, [SL])
def offsetToZero(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Shift each series so its minimum becomes 0."""
    for series in seriesList:
        minimum = safe_min(series)
        series.tags['offsetToZero'] = minimum
        rename(series, 'offsetToZero(%s)' % series.name)
        series[:] = [None if v is None else v - minimum for v in list.__iter__(series)]
    return seriesList


@render_function('round', TRANSFORM, [SL, P('precision', 'integer', default=0)])
def roundFunction(requestContext: dict, seriesList: list,
                  precision: Optional[int] = None) -> list[TimeSeries]:
    """Round each point to ``precision`` decimal places (negative rounds to tens, ...)."""
    for series in seriesList:
        series.tags['round'] = precision or 0
        if precision is None:
            rename(series, 'round(%s)' % series.name)
        else:
            rename(series, 'round(%s,%g)' % (series.name, int(precision)))
        series[:] = [None if v is None else round(v, precision or 0)
                     for v in list.__iter__(series)]
    return seriesList


@render_function('minMax', TRANSFORM, [SL])
def minMax(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Rescale each series to [0, 1] using its own min and max."""
    for series in seriesList:
        rename(series, 'minMax(%s)' % series.name)
        low = safe_min(series, default=0.0)
        high = safe_max(series, default=0.0)
        series[:] = [None if v is None else (float(v - low) / (high - low) if high != low
                                             else 0.0)
                     for v in list.__iter__(series)]
    return seriesList


@render_function('isNonNull', TRANSFORM, [SL])
def isNonNull(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """1 where the series has a value, 0 where it is None."""
    return _pointwise(seriesList, 'isNonNull(%s)', ('isNonNull', 1),
                      lambda v: 0 if v is None else 1)


@render_function('transformNull', TRANSFORM, [SL, P('default', 'float', default=0),
                                              P('referenceSeries', 'seriesList')],
                 traits=Traits(packed_input=True))
def transformNull(requestContext: dict, seriesList: list, default: float = 0,
                  referenceSeries: Optional[list] = None) -> list[TimeSeries]:
    """Replace None with ``default`` (only where some referenceSeries has data, if given)."""
    arrays = None if referenceSeries else packed_rows.packed_grid(seriesList)
    if arrays is not None and (type(default) is float or arrays[1].all()):
        values, valid = arrays
        np = packed.np
        fill = float(default) if type(default) is float else 0.0   # 0.0: never used
        filled = packed.Block.computed(np.where(valid, values, fill), np.ones_like(valid))
        return _renamed_rows(seriesList, 'transformNull(%%s,%g)' % default,
                             ('transformNull', default), filled)
    materialize_all(seriesList)
    defaults = None
    if referenceSeries:
        defaults = [default if any(v is not None for v in row) else None
                    for row in rows(referenceSeries)]
    for series in seriesList:
        series.tags['transformNull'] = default
        if referenceSeries:
            series.tags['referenceSeries'] = 1
            rename(series, 'transformNull(%s,%g,referenceSeries)' % (series.name, default))
        else:
            rename(series, 'transformNull(%s,%g)' % (series.name, default))
        if defaults:
            values = [d if v is None else v for v, d in rows((list(series), defaults))]
        else:
            values = [default if v is None else v for v in series]
        series[:] = values
    return seriesList


@render_function('keepLastValue', TRANSFORM, [SL, P('limit', 'intOrInf', default=INF)],
                 traits=Traits(packed_input=True))
def keepLastValue(requestContext: dict, seriesList: list, limit: float = INF) -> list[TimeSeries]:
    """Fill gaps of at most ``limit`` Nones with the last value seen before them."""
    arrays = packed_rows.packed_grid(seriesList)
    if arrays is not None and type(limit) in (int, float):
        return _renamed_rows(seriesList, 'keepLastValue(%s)', None,
                             packed_rows.kept_last(*arrays, limit))
    materialize_all(seriesList)
    for series in seriesList:
        rename(series, 'keepLastValue(%s)' % series.name)
        gap, last = 0, None
        for i, value in enumerate(list.__iter__(series)):
            if value is None:
                gap += 1
                continue
            if 0 < gap <= limit and last is not None:
                series[i - gap:i] = [last] * gap
            gap, last = 0, value
        if 0 < gap <= limit and last is not None:
            series[len(series) - gap:] = [last] * gap
    return seriesList


@render_function('interpolate', TRANSFORM, [SL, P('limit', 'intOrInf', default=INF)])
def interpolate(requestContext: dict, seriesList: list, limit: float = INF) -> list[TimeSeries]:
    """Linearly fill gaps of at most ``limit`` Nones lying between two known values."""
    for series in seriesList:
        rename(series, 'interpolate(%s)' % series.name)
        gap = 0
        for i, value in enumerate(list.__iter__(series)):
            if i == 0:
                continue
            if value is None:
                gap += 1
                continue
            if gap == 0:
                continue
            before = series[i - gap - 1]
            if before is not None and gap <= limit:
                for k in range(1, gap + 1):
                    series[i - gap - 1 + k] = before + k * (value - before) / (gap + 1)
            gap = 0
    return seriesList


def _copy_each(seriesList: list, name: str, tag: tuple,
               compute: Callable[[TimeSeries], list]) -> list[TimeSeries]:
    results = []
    for series in seriesList:
        values = compute(series)
        series.tags[tag[0]] = tag[1]
        results.append(series.copy(name=name % series.name, values=values))
    return results


def _copied_rows(seriesList: list, name: str, tag: tuple,
                 result: packed.Block) -> list:
    """What ``_copy_each`` gives, with the values as rows of ``result``."""
    for series in seriesList:
        series.tags[tag[0]] = tag[1]
    return packed_rows.copies(seriesList, name, result)


def _derivative(series: TimeSeries) -> list:
    out, prev = [], None
    for value in series:
        out.append(None if prev is None or value is None else value - prev)
        prev = value
    return out


@render_function('derivative', TRANSFORM, [SL], traits=Traits(packed_input=True))
def derivative(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Difference between each point and the previous one (None next to gaps)."""
    arrays = packed_rows.packed_grid(seriesList)
    if arrays is not None:
        return _copied_rows(seriesList, 'derivative(%s)', ('derivative', 1),
                            packed_rows.differences(*arrays))
    return _copy_each(seriesList, 'derivative(%s)', ('derivative', 1), _derivative)


def non_negative_delta(val: Any, prev: Any, maxValue: Optional[float],
                       minValue: Optional[float]) -> tuple[Any, Any]:
    """(delta, new previous) for a counter, handling wraps with maxValue/minValue."""
    if maxValue is not None and val is not None and val > maxValue:
        return None, None
    if minValue is not None and val is not None and val < minValue:
        return None, None
    if prev is None or val is None:
        return None, val
    if val >= prev:
        return val - prev, val
    if maxValue is not None:
        return maxValue + 1 + val - prev - (minValue or 0), val
    if minValue is not None:
        return val - minValue, val
    return None, val


@render_function('nonNegativeDerivative', TRANSFORM, [SL, P('maxValue', 'float'),
                                                      P('minValue', 'float')],
                 traits=Traits(packed_input=True))
def nonNegativeDerivative(requestContext: dict, seriesList: list, maxValue: Optional[float] = None,
                          minValue: Optional[float] = None) -> list[TimeSeries]:
    """Derivative of a counter; a decrease counts as a wrap (or None without maxValue)."""
    arrays = packed_rows.packed_grid(seriesList)
    found = None if arrays is None else packed_rows.counter_deltas(*arrays, maxValue, minValue)
    if found is not None:
        return _copied_rows(seriesList, 'nonNegativeDerivative(%s)',
                            ('nonNegativeDerivative', 1), packed.Block.computed(*found))
    materialize_all(seriesList)

    def compute(series: TimeSeries) -> list:
        out, prev = [], None
        for value in series:
            delta, prev = non_negative_delta(value, prev, maxValue, minValue)
            out.append(delta)
        return out
    return _copy_each(seriesList, 'nonNegativeDerivative(%s)', ('nonNegativeDerivative', 1),
                      compute)


@render_function('perSecond', TRANSFORM, [SL, P('maxValue', 'float'), P('minValue', 'float')],
                 traits=Traits(packed_input=True))
def perSecond(requestContext: dict, seriesList: list, maxValue: Optional[float] = None,
              minValue: Optional[float] = None) -> list[TimeSeries]:
    """Per-second rate of a counter: nonNegativeDerivative divided by the step."""
    arrays = packed_rows.packed_grid(seriesList)
    found = None if arrays is None else packed_rows.rates(seriesList, *arrays, maxValue,
                                                            minValue)
    if found is not None:
        return _copied_rows(seriesList, 'perSecond(%s)', ('perSecond', 1), found)
    materialize_all(seriesList)

    def compute(series: TimeSeries) -> list:
        out, prev = [], None
        for value in series:
            delta, prev = non_negative_delta(value, prev, maxValue, minValue)
            if delta is None:
                out.append(None)
            else:
                try:
                    out.append(round(delta / series.step, 6))
                except OverflowError:
                    out.append(delta // series.step)
        return out
    return _copy_each(seriesList, 'perSecond(%s)', ('perSecond', 1), compute)


def _integral(series: TimeSeries) -> list:
    out, total = [], 0.0
    for value in series:
        if value is None:
            out.append(None)
        else:
            total += value
            out.append(total)
    return out


@render_function('integral', TRANSFORM, [SL])
def integral(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Running total of the series (None points stay None)."""
    return _copy_each(seriesList, 'integral(%s)', ('integral', 1), _integral)


@render_function('delay', TRANSFORM, [SL, P('steps', 'integer', required=True)])
def delay(requestContext: dict, seriesList: list, steps: int) -> list[TimeSeries]:
    """Shift values ``steps`` points later (earlier when negative), padding with None."""
    results = []
    for series in seriesList:
        raw = list(list.__iter__(series))
        if steps < 0:
            values = raw[-steps:] + [None] * min(-steps, len(raw))
        else:
            values = [None] * min(steps, len(raw)) + raw[:len(raw) - steps if steps else None]
        series.tags['delay'] = steps
        results.append(series.copy(name='delay(%s,%d)' % (series.name, steps), values=values))
    return results


@render_function('changed', 'Special', [SL])
def changed(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """1 where the value differs from the previous non-null value, else 0."""
    for series in seriesList:
        rename(series, 'changed(%s)' % series.name)
        previous = None
        out = []
        for value in list.__iter__(series):
            if previous is None:
                previous = value
                out.append(0)
            elif value is not None and previous != value:
                out.append(1)
                previous = value
            else:
                out.append(0)
        series[:] = out
    return seriesList


# these take their first argument as packed rows when they can (webapp.render.evaluator)
