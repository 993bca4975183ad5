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
    """Multiply every value by a constant.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``factor``: the multiplier (``0.001`` to turn milliseconds into seconds, ``-1`` to
      draw a series below the axis...).

    None values stay None. Named ``scale(name,factor)``.

    Example:

    .. code-block:: none

      &target=scale(servers.web01.response_time_ms,0.001)
    """
    times = float(factor)   # safe_mul(v, factor) inlined: float(v) * float(factor)
    arrays = packed_rows.packed_grid(seriesList)
    if arrays is not None:
        return _renamed_rows(seriesList, 'scale(%%s,%g)' % times, ('scale', factor),
                             packed_rows.scaled(*arrays, times))
    return _pointwise(seriesList, 'scale(%%s,%g)' % times, ('scale', factor),
                      lambda v: None if v is None else float(v) * times)


@render_function('scaleToSeconds', TRANSFORM, [SL, P('seconds', 'float', required=True)])
def scaleToSeconds(requestContext: dict, seriesList: list, seconds: float) -> list[TimeSeries]:
    """Turn values counted per point into values per a number of seconds.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``seconds``: the length of the wanted unit: ``1`` for a per-second rate, ``60`` per
      minute...

    Each value is multiplied by ``seconds / step``, the step being the series' own (after
    any consolidation done by earlier functions), and rounded to 6 decimals. None values
    stay None. Named ``scaleToSeconds(name,seconds)``.

    Example:

    .. code-block:: none

      &target=scaleToSeconds(summarize(app.requests,"1min","sum"),1)
    """
    for series in seriesList:
        series.tags['scaleToSeconds'] = seconds
        rename(series, 'scaleToSeconds(%s,%d)' % (series.name, seconds))
        factor = seconds / series.step
        series[:] = [None if v is None else round(v * factor, 6)
                     for v in list.__iter__(series)]
    return seriesList


@render_function('offset', TRANSFORM, [SL, P('factor', 'float', required=True)])
def offset(requestContext: dict, seriesList: list, factor: float) -> list[TimeSeries]:
    """Add a constant to every value.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``factor``: the number added (negative to subtract).

    None values stay None (they do not become the constant). Named ``offset(name,factor)``.

    Example:

    .. code-block:: none

      &target=offset(servers.web01.temperature,-273.15)
    """
    return _pointwise(seriesList, 'offset(%%s,%g)' % float(factor), ('offset', factor),
                      lambda v: None if v is None else v + factor)


@render_function('add', TRANSFORM, [SL, P('constant', 'float', required=True)])
def add(requestContext: dict, seriesList: list, constant: float) -> list[TimeSeries]:
    """Add a constant to every value.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``constant``: the number added (negative to subtract).

    None values stay None. Named ``add(name,constant)``, the constant shown as a whole
    number as graphite-web shows it. ``offset`` does the same.

    Example:

    .. code-block:: none

      &target=add(servers.web01.temperature,-273)
    """
    return _pointwise(seriesList, 'add(%%s,%d)' % constant, ('add', constant),
                      lambda v: None if v is None else v + constant)


@render_function('absolute', TRANSFORM, [SL])
def absolute(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """The absolute value of every point: negative values become positive.

    Parameters:

    - ``seriesList``: the series to transform.

    None values stay None. Named ``absolute(name)``.

    Example:

    .. code-block:: none

      &target=absolute(network.balance)
    """
    return _pointwise(seriesList, 'absolute(%s)', ('absolute', 1),
                      lambda v: None if v is None else abs(v))


@render_function('invert', TRANSFORM, [SL])
def invert(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """One divided by every value (1/x).

    Parameters:

    - ``seriesList``: the series to transform.

    A value of 0 and None values give None. Named ``invert(name)``.

    Example:

    .. code-block:: none

      &target=invert(app.requests_per_second)
    """
    return _pointwise(seriesList, 'invert(%s)', ('invert', 1), lambda v: safe_pow(v, -1))


@render_function('squareRoot', TRANSFORM, [SL])
def squareRoot(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """The square root of every value.

    Parameters:

    - ``seriesList``: the series to transform.

    Negative values and None values give None. Named ``squareRoot(name)``.

    Example:

    .. code-block:: none

      &target=squareRoot(physics.area)
    """
    return _pointwise(seriesList, 'squareRoot(%s)', ('squareRoot', 1),
                      lambda v: safe_pow(v, 0.5))


@render_function('pow', TRANSFORM, [SL, P('factor', 'float', required=True)])
def pow(requestContext: dict, seriesList: list, factor: float) -> list[TimeSeries]:
    """Raise every value to a power.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``factor``: the exponent (``2`` squares, ``0.5`` takes square roots).

    None values stay None, and so does a result that is not a real number (a negative value
    to a fractional power, an overflow). Named ``pow(name,factor)``.

    Example:

    .. code-block:: none

      &target=pow(physics.speed,2)
    """
    return _pointwise(seriesList, 'pow(%%s,%g)' % float(factor), ('pow', factor),
                      lambda v: safe_pow(v, factor))


def _exp(v: Any) -> Any:
    try:
        return math.exp(v)
    except (TypeError, OverflowError):
        return None


@render_function('exp', TRANSFORM, [SL])
def exp(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """e (2.718...) raised to the power of every value.

    Parameters:

    - ``seriesList``: the series to transform.

    None values stay None, and a result too large for a float gives None. Named
    ``exp(name)``.

    Example:

    .. code-block:: none

      &target=exp(model.log_odds)
    """
    return _pointwise(seriesList, 'exp(%s)', ('exp', 'e'), _exp)


def _sigmoid(v: Any) -> Any:
    try:
        return 1 / (1 + _exp(-v))
    except (TypeError, ValueError, ZeroDivisionError):
        return None


@render_function('sigmoid', TRANSFORM, [SL])
def sigmoid(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """The logistic function 1 / (1 + e^-x) of every value: a number between 0 and 1.

    Parameters:

    - ``seriesList``: the series to transform.

    None values stay None. Named ``sigmoid(name)``.

    Example:

    .. code-block:: none

      &target=sigmoid(model.score)
    """
    return _pointwise(seriesList, 'sigmoid(%s)', ('sigmoid', 'sigmoid'), _sigmoid)


def _logit(v: Any) -> Any:
    try:
        return math.log(v / (1 - v))
    except (TypeError, ValueError, ZeroDivisionError):
        return None


@render_function('logit', TRANSFORM, [SL])
def logit(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """The logit log(x / (1 - x)) of every value, the inverse of ``sigmoid``.

    Parameters:

    - ``seriesList``: the series to transform.

    Values outside the open interval 0 to 1 and None values give None. Named
    ``logit(name)``.

    Example:

    .. code-block:: none

      &target=logit(model.probability)
    """
    return _pointwise(seriesList, 'logit(%s)', ('logit', 'logit'), _logit)


@render_function('log', TRANSFORM, [SL, P('base', 'integer', default=10)])
def logarithm(requestContext: dict, seriesList: list, base: int = 10) -> list[TimeSeries]:
    """The logarithm of every value in a base.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``base``: the base, 10 by default (``2`` for bits, ``10`` for orders of magnitude).

    Values of 0 or below and None values give None. Named ``log(name, base)``.

    Example:

    .. code-block:: none

      &target=log(app.queue.size,2)
    """
    results = []
    for series in seriesList:
        values = [None if v is None or v <= 0 else math.log(v, base) for v in series]
        series.tags['log'] = base
        results.append(series.copy(name='log(%s, %s)' % (series.name, base), values=values))
    return results


@render_function('offsetToZero', TRANSFORM, [SL])
def offsetToZero(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Shift each series down (or up) so that its lowest value becomes 0.

    Parameters:

    - ``seriesList``: the series to transform.

    The lowest value is taken over the known values (None values stay None); a series
    without values stays as it is. Named ``offsetToZero(name)``. Handy to compare the shapes
    of series with different baselines.

    Example:

    .. code-block:: none

      &target=offsetToZero(servers.*.disk.used)
    """
    for series in seriesList:
        minimum = safe_min(series)
        series.tags['offsetToZero'] = minimum
        rename(series, 'offsetToZero(%s)' % series.name)
        series[:] = [None if v is None else v - minimum for v in list.__iter__(series)]
    return seriesList


@render_function('round', TRANSFORM, [SL, P('precision', 'integer', default=0)])
def roundFunction(requestContext: dict, seriesList: list,
                  precision: Optional[int] = None) -> list[TimeSeries]:
    """Round every value to a number of decimals.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``precision``: decimals to keep, 0 by default (whole numbers); a negative precision
      rounds to tens (-1), hundreds (-2)...

    None values stay None. Named ``round(name)`` or ``round(name,precision)``.

    Example:

    .. code-block:: none

      &target=round(servers.web01.load,1)
    """
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
    """Rescale each series to run from 0 (its lowest value) to 1 (its highest).

    Parameters:

    - ``seriesList``: the series to transform.

    Each value becomes ``(value - min) / (max - min)`` with the series' own known minimum
    and maximum; a flat series becomes all 0. None values stay None. Named ``minMax(name)``.

    Example:

    .. code-block:: none

      &target=minMax(servers.*.requests)
    """
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
    """Whether each point has a value: 1 where it does, 0 where it is None.

    Parameters:

    - ``seriesList``: the series to transform.

    Combined with ``sumSeries`` it counts, point by point, how many series reported. Named
    ``isNonNull(name)``.

    Example:

    .. code-block:: none

      &target=isNonNull(servers.*.heartbeat)
    """
    return _pointwise(seriesList, 'isNonNull(%s)', ('isNonNull', 1),
                      lambda v: 0 if v is None else 1)


@render_function('transformNull', TRANSFORM, [SL, P('default', 'float', default=0),
                                              P('referenceSeries', 'seriesList')],
                 traits=Traits(packed_input=True))
def transformNull(requestContext: dict, seriesList: list, default: float = 0,
                  referenceSeries: Optional[list] = None) -> list[TimeSeries]:
    """Replace the None values of each series with a number.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``default``: the value put in place of None, 0 by default.
    - ``referenceSeries``: optional series list: a None is replaced only at points where at
      least one of these series has a value (so gaps where nothing reported stay gaps).

    Known values are untouched. Named ``transformNull(name,default)`` (with
    ``,referenceSeries`` when one is given).

    Example:

    .. code-block:: none

      &target=transformNull(servers.web01.errors,0)
    """
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
    """Fill gaps with the last value seen before them.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``limit``: the longest gap (in points) that is filled; longer gaps stay None. No limit
      by default.

    A gap at the start of the series (nothing before it) stays None. Useful for series that
    only report when they change. Named ``keepLastValue(name)``.

    Example:

    .. code-block:: none

      &target=keepLastValue(servers.web01.config_version,10)
    """
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
    """Fill gaps with a straight line between the known values on either side.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``limit``: the longest gap (in points) that is filled; longer gaps stay None. No limit
      by default.

    Gaps at the start or the end of the series (no known value on one side) stay None. Named
    ``interpolate(name)``.

    Example:

    .. code-block:: none

      &target=interpolate(servers.web01.temperature,5)
    """
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
    """The change from each point to the next: value minus previous value.

    Parameters:

    - ``seriesList``: the series to transform.

    The first point, a None value and the point right after a None value give None. A
    decrease gives a negative value; for counters that reset, use ``nonNegativeDerivative``
    or ``perSecond``. Named ``derivative(name)``.

    Example:

    .. code-block:: none

      &target=derivative(servers.web01.net.bytes_total)
    """
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
    """The increase of a counter from each point to the next.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``maxValue``: optional highest value the counter reaches before it wraps to its
      minimum; with it, a decrease is counted as a wrap (the distance to ``maxValue`` plus
      the new value). Values above it give None.
    - ``minValue``: optional lowest value of the counter; with it (and without ``maxValue``)
      a decrease is counted as a restart from ``minValue``. Values below it give None.

    Without them, a decrease (a counter reset) gives None instead of a negative spike. The
    first point, a None value and the point after a None give None. Named
    ``nonNegativeDerivative(name)``.

    Example:

    .. code-block:: none

      &target=nonNegativeDerivative(servers.web01.net.bytes_total,4294967295)
    """
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
    """The per-second rate of a counter.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``maxValue``: optional value at which the counter wraps, as in
      ``nonNegativeDerivative``.
    - ``minValue``: optional lowest value of the counter, as in ``nonNegativeDerivative``.

    It is ``nonNegativeDerivative`` divided by the series' step (rounded to 6 decimals): a
    counter reset gives None, not a negative rate, and so do the first point and any point
    next to a gap. Named ``perSecond(name)``.

    Example:

    .. code-block:: none

      &target=perSecond(servers.web01.net.bytes_total)
    """
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
    """The running total of each series: every point is the sum of all values up to it.

    Parameters:

    - ``seriesList``: the series to transform.

    None values stay None in the result but do not reset the total: the next known value
    continues from it. Turns per-interval counts back into a growing counter. Named
    ``integral(name)``.

    Example:

    .. code-block:: none

      &target=integral(app.signups)
    """
    return _copy_each(seriesList, 'integral(%s)', ('integral', 1), _integral)


@render_function('delay', TRANSFORM, [SL, P('steps', 'integer', required=True)])
def delay(requestContext: dict, seriesList: list, steps: int) -> list[TimeSeries]:
    """Move the values of each series a number of points later in time.

    Parameters:

    - ``seriesList``: the series to transform.
    - ``steps``: points to move by; negative moves values earlier.

    Points shifted past the end are lost and the points left empty at the other end are
    None; timestamps stay the same. Compare with ``timeShift``, which fetches another time
    range. Named ``delay(name,steps)``.

    Example:

    .. code-block:: none

      &target=delay(servers.web01.requests,2)
    """
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
    """Mark the points where the value changed: 1 where it differs from the last known value
    before it, 0 elsewhere.

    Parameters:

    - ``seriesList``: the series to transform.

    None values give 0 and do not count as a change; the first known value is not a change.
    Named ``changed(name)``.

    Example:

    .. code-block:: none

      &target=changed(deploys.app.version)
    """
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
