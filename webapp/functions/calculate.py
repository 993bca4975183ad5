"""Calculate group: moving windows, percentiles, regressions and other derived lines."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Optional

from webapp import pysum
from webapp.functions.common import (
    epoch, evaluate_first_arg, get_agg_func, interval_seconds, parse_at_time, percentile,
    safe_avg, safe_len, xff,
)
from webapp.functions.registry import NO_TRAITS, Traits, render_function
from webapp.render.errors import InputParameterError
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

CALCULATE = 'Calculate'
SL = P('seriesList', 'seriesList', required=True)
WINDOW_SUGGESTIONS = [5, 7, 10, '1min', '5min', '10min', '30min', '1hour']
WINDOW = P('windowSize', 'intOrInterval', required=True, suggestions=WINDOW_SUGGESTIONS)
XFF = P('xFilesFactor', 'float')


def window_preview(seriesList: list, windowSize: Any) -> int:
    if isinstance(windowSize, str):
        return abs(interval_seconds(windowSize))
    return max(s.step for s in seriesList) * int(windowSize)


@render_function('movingWindow', CALCULATE, [SL, WINDOW, P('func', 'aggFunc', default='average'),
                                             XFF], traits=Traits(fused_window={}))
def movingWindow(requestContext: dict, seriesList: list, windowSize: Any, func: str = 'average',
                 xFilesFactor: Optional[float] = None) -> list[TimeSeries]:
    """Any aggregation over a window that slides along each series.

    Parameters:

    - ``seriesList``: the series to smooth.
    - ``windowSize``: the window, as a number of points (``5``) or as a time span in quotes
      (``"5min"``, ``"1h"``): a time span is turned into points with each series' step.
    - ``func``: the aggregation applied to each window: ``average`` (default), ``median``,
      ``sum``, ``min``, ``max``, ``diff``, ``stddev``, ``count``, ``range``, ``multiply``,
      ``last``.
    - ``xFilesFactor``: the smallest share (0 to 1) of known values a window needs to give a
      value; by default the series' own xFilesFactor (0 unless set).

    The window ends at each point and covers the points before it; data from before ``from``
    is fetched so the first points of the graph have a full window. None values are left out
    of each window; a window without enough known values gives None. The result is named
    after the aggregation, e.g. ``movingMax(name,"5min")``.

    Example:

    .. code-block:: none

      &target=movingWindow(servers.web01.requests,"15min","median",0.5)
    """
    if not seriesList:
        return []
    preview = window_preview(seriesList, windowSize)
    agg = get_agg_func(func)
    tag = 'moving' + func.capitalize()
    wider = evaluate_first_arg(requestContext,
                               startTime=requestContext['startTime'] - timedelta(seconds=preview))
    plans = []
    for series in wider:
        if isinstance(windowSize, str):
            name = '%s(%s,"%s")' % (tag, series.name, windowSize)
            points = preview // series.step
        else:
            name = '%s(%s,%s)' % (tag, series.name, windowSize)
            points = int(windowSize)
        series.tags[tag] = windowSize
        ratio = xFilesFactor if xFilesFactor is not None else series.xFilesFactor
        plans.append((series, name, points, ratio, list(series)))
    computed: dict[int, list] = {}
    if func in ARRAY_WINDOWS:   # series of one window and length together, with numpy
        groups: dict[tuple, list[int]] = {}
        for i, plan in enumerate(plans):
            groups.setdefault((plan[2], len(plan[4])), []).append(i)
        for (points, _length), members in groups.items():
            out = _array_windows([plans[i][4] for i in members], points,
                                 [plans[i][3] for i in members], ARRAY_WINDOWS[func])
            if out is not None:
                computed.update(zip(members, out, strict=True))
    results = []
    for i, (series, name, points, ratio, raw) in enumerate(plans):
        values = computed.get(i)
        if values is None:
            values = []
            for end in range(points + 1, len(raw) + 1):
                window = [v for v in raw[end - points:end] if v is not None]
                values.append(agg(window) if window and xff(len(window), points, ratio)
                              else None)
        results.append(series.copy(name=name, start=series.start + preview, values=values))
    return results


ARRAY_WINDOWS = {'average': True, 'avg': True, 'sum': False, 'total': False}
MAX_ARRAY_WINDOW = 4096


def _array_window(raw: list, points: int, ratio: Optional[float],
                  average: bool) -> Optional[list]:
    """:func:`_array_windows` of one series."""
    out = _array_windows([raw], points, [ratio], average)
    return None if out is None else out[0]


def _array_windows(raws: list[list], points: int, ratios: list[Optional[float]],
                   average: bool) -> Optional[list[list]]:
    """Window sums (or averages) of ``points`` values ending before each point after the
    first ``points``, for series of one length, with numpy (:func:`window_arrays`). None
    (use the Python loop) without numpy, for values other than floats and None, for NaN
    values and for windows too wide to be worth it."""
    from webapp.functions.combine import float_grid
    from webapp.storage import packed
    np = packed.np
    if np is None or not 1 <= points <= MAX_ARRAY_WINDOW or len(raws[0]) <= points:
        return None
    arrays = float_grid(raws)
    if arrays is None:
        return None
    grid, known = arrays
    return packed.value_lists(*window_arrays(np, grid, known, points, ratios, average))


def window_arrays(np: Any, values: Any, known: Any, points: int,
                  ratios: list[Optional[float]], average: bool) -> tuple[Any, Any]:
    """(sums or averages, ok) of the windows of ``points`` known values ending before each
    point after the first ``points`` of each row: the known values of a window are added
    one after the other from 0 as graphite-web's ``sum()`` adds them (``pysum``),
    so the results are the same floats; ``ok`` is False where no value is known or the
    xFilesFactor ``ratios`` (one per row) is unmet."""
    rows, outputs = values.shape[0], values.shape[1] - points
    zeroed = np.where(known, values, 0.0)
    total = np.zeros((rows, outputs))
    comp = np.zeros_like(total)
    count = np.zeros((rows, outputs), dtype=np.int64)
    limits = np.array([ratio or 0.0 for ratio in ratios]).reshape(-1, 1)
    with np.errstate(all='ignore'):       # overflow to inf, inf - inf: as in Python
        for j in range(1, points + 1):
            pysum.add_into(np, total, comp, zeroed[:, j:j + outputs])
            count += known[:, j:j + outputs]
        total = pysum.result(np, total, comp)
        ok = (count > 0) & (count / points >= limits)
        result = total / np.maximum(count, 1) if average else total
    return result, ok


# the five moving-window functions' description (Grafana's help), filled in per function
MOVING_DOC = '''{what} over a window that slides along each series.

    Parameters:

    - ``seriesList``: the series to smooth.
    - ``windowSize``: the window, as a number of points (``5``) or as a time span in quotes
      (``"5min"``, ``"1h"``): a time span is turned into points with each series' step.
    - ``xFilesFactor``: the smallest share (0 to 1) of known values a window needs to give a
      value; by default the series' own xFilesFactor (0 unless set).

    The window ends at each point and covers the points before it; data from before ``from``
    is fetched so the first points of the graph have a full window. None values are left out
    of each window; a window without enough known values gives None. The result is named
    ``{name}(name,window)``.

    Example:

    .. code-block:: none

      &target={name}(servers.web01.cpu.user,{window})
    '''


def _moving(name: str, func: str, what: str, window: str) -> None:
    """Register the moving-window function ``name`` (``what``: its description's first
    words; ``window``: the example's window)."""
    def impl(requestContext: dict, seriesList: list, windowSize: Any,
             xFilesFactor: Optional[float] = None) -> list[TimeSeries]:
        return movingWindow(requestContext, seriesList, windowSize, func, xFilesFactor)
    impl.__name__ = name
    impl.__doc__ = MOVING_DOC.format(what=what, name=name, window=window)
    # a sum or average window is computed on packed rows by webapp.render.fused
    traits = Traits(fused_window={'func': func}) if func in ARRAY_WINDOWS else NO_TRAITS
    render_function(name, CALCULATE, [SL, WINDOW, XFF], traits=traits)(impl)


_moving('movingAverage', 'average', 'The average', '"10min"')
_moving('movingSum', 'sum', 'The sum', '60')
_moving('movingMin', 'min', 'The lowest value', '"5min"')
_moving('movingMax', 'max', 'The highest value', '"5min"')
_moving('movingMedian', 'median', 'The median', '5')


@render_function('exponentialMovingAverage', CALCULATE, [SL, WINDOW])
def exponentialMovingAverage(requestContext: dict, seriesList: list,
                             windowSize: Any) -> list[TimeSeries]:
    """An exponentially weighted moving average of each series.

    Parameters:

    - ``seriesList``: the series to smooth.
    - ``windowSize``: a number of points (``10``) or a time span in quotes (``"10min"``); it
      sets the smoothing constant to ``2 / (windowSize + 1)`` (for a time span its number of
      seconds is used) and the length of the first window.

    The average starts at the mean of the first window, fetched from before ``from``, and
    each later point moves it toward the new value by the smoothing constant. A None value
    gives None and leaves the average as it was. Values are rounded to 6 decimals.

    Example:

    .. code-block:: none

      &target=exponentialMovingAverage(servers.web01.load,20)
    """
    if not seriesList:
        return []
    preview = window_preview(seriesList, windowSize)
    if isinstance(windowSize, str):
        constant = 2.0 / (preview + 1)
    else:
        constant = 2.0 / (int(windowSize) + 1)
    wider = evaluate_first_arg(requestContext,
                               startTime=requestContext['startTime'] - timedelta(seconds=preview))
    results = []
    for series in wider:
        if isinstance(windowSize, str):
            name = 'exponentialMovingAverage(%s,"%s")' % (series.name, windowSize)
            points = preview // series.step
        else:
            name = 'exponentialMovingAverage(%s,%s)' % (series.name, windowSize)
            points = int(windowSize)
        series.tags['exponentialMovingAverage'] = windowSize
        raw = list(series)
        ema = safe_avg(raw[:points]) or 0
        values = [round(ema, 6)]
        for value in raw[points:]:
            if value is None:
                values.append(None)
            else:
                ema = constant * value + (1 - constant) * ema
                values.append(round(ema, 6))
        results.append(series.copy(name=name, start=series.start + preview, values=values))
    return results


@render_function('nPercentile', CALCULATE, [SL, P('n', 'float', required=True)])
def nPercentile(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
    """A flat line at a percentile of each series' values.

    Parameters:

    - ``seriesList``: the series to measure.
    - ``n``: the percentile, above 0 and up to 100 (``95`` for the 95th percentile).

    The percentile is taken over the known values of the whole requested range (None values
    are left out), nearest rank, no interpolation. A series without any value gives no line.
    The result is named ``nPercentile(name, n)``.

    Example:

    .. code-block:: none

      &target=nPercentile(servers.web01.response_time,95)
    """
    if not n:
        raise InputParameterError('The requested percent is required to be greater than 0')
    results = []
    for series in seriesList:
        known = sorted(v for v in series if v is not None)
        if not known:
            continue
        value = percentile(known, n)
        if value is None:
            continue
        series.tags['nPercentile'] = n
        count = int((series.end - series.start) / series.step)
        results.append(series.copy(name='nPercentile(%s, %g)' % (series.name, n),
                                   values=[value] * count))
    return results


@render_function('stdev', CALCULATE, [SL, P('points', 'integer', required=True),
                                      P('windowTolerance', 'float', default=0.1)])
def stdev(requestContext: dict, seriesList: list, points: int,
          windowTolerance: float = 0.1) -> list[TimeSeries]:
    """The standard deviation of each series over a moving window of points.

    Parameters:

    - ``seriesList``: the series to measure.
    - ``points``: the number of points in the window ending at each point.
    - ``windowTolerance``: the smallest share (0 to 1, default 0.1) of known values a window
      needs; with fewer the point is None.

    It is the population standard deviation of the known values in the window (None values
    are left out). The first points have shorter windows (nothing is fetched before
    ``from``). The result is named ``stdev(name,points)``.

    Example:

    .. code-block:: none

      &target=stdev(servers.web01.response_time,10,0.5)
    """
    for index, series in enumerate(seriesList):
        series.tags['stdev'] = points
        raw = list(series)
        values = []
        for i in range(len(raw)):
            window = [v for v in raw[max(0, i - points + 1):i + 1] if v is not None]
            if window and len(window) / points >= windowTolerance:
                total = pysum.total(window)
                squares = pysum.total(v * v for v in window)
                try:
                    values.append(math.sqrt(len(window) * squares - total ** 2) / len(window))
                except ValueError:
                    values.append(None)
            else:
                values.append(None)
        seriesList[index] = series.copy(name='stdev(%s,%d)' % (series.name, int(points)),
                                        values=values)
    return seriesList


@render_function('aggregateLine', CALCULATE, [SL, P('func', 'aggFunc', default='average'),
                                              P('keepStep', 'boolean', default=False)])
def aggregateLine(requestContext: dict, seriesList: list, func: str = 'average',
                  keepStep: bool = False) -> list[TimeSeries]:
    """A horizontal line at one aggregate of each series.

    Parameters:

    - ``seriesList``: the series to summarise.
    - ``func``: the aggregate: ``average`` (default), ``max``, ``min``, ``sum``, ``last``,
      ``median`` ... (None values are left out).
    - ``keepStep``: when true the line has as many points as the series (same step);
      otherwise it is drawn across the graph like ``constantLine``.

    A series without values gives a line of None values. The result is named
    ``aggregateLine(name, value)``.

    Example:

    .. code-block:: none

      &target=aggregateLine(servers.web01.cpu.user,"max")
    """
    from webapp.functions.special import constantLine
    agg = get_agg_func(func)
    results = []
    for series in seriesList:
        value = agg(series)
        if value is not None:
            name = 'aggregateLine(%s, %g)' % (series.name, value)
        else:
            name = 'aggregateLine(%s, None)' % series.name
        if keepStep:
            line = series.copy(name=name, values=[value] * len(series))
        else:
            line = constantLine(requestContext, value)[0]
            line.name = name
            line.pathExpression = name
        results.append(line)
    return results


def _regression(series: TimeSeries) -> Optional[tuple[float, float]]:
    points = [(i, v) for i, v in enumerate(series) if v is not None]
    n = safe_len(series)
    sum_i = pysum.total(i for i, _ in points)
    sum_v = pysum.total(v for _, v in points)
    sum_ii = pysum.total(i * i for i, _ in points)
    sum_iv = pysum.total(i * v for i, v in points)
    denominator = float(n * sum_ii - sum_i * sum_i)
    if denominator == 0:
        return None
    factor = (n * sum_iv - sum_i * sum_v) / denominator / series.step
    offset = (sum_ii * sum_v - sum_iv * sum_i) / denominator - factor * series.start
    return factor, offset


@render_function('linearRegression', CALCULATE, [SL, P('startSourceAt', 'date'),
                                                 P('endSourceAt', 'date')])
def linearRegression(requestContext: dict, seriesList: list, startSourceAt: Any = None,
                     endSourceAt: Any = None) -> list[TimeSeries]:
    """The least-squares straight line through each series, drawn over the graph.

    Parameters:

    - ``seriesList``: the series to fit.
    - ``startSourceAt``: optional start of the time range the line is fitted on (any
      ``from`` form: ``-7d``, ``00:00_20240101``...); by default the graph's ``from``.
    - ``endSourceAt``: optional end of that range; by default the graph's ``until``.

    None values are left out of the fit; a series with fewer than two known points gives no
    line. The line is then drawn at every point of the graph, which projects a trend beyond
    the data it was fitted on.

    Example:

    .. code-block:: none

      &target=linearRegression(storage.disk.used,"-14d","now")
    """
    changes = {}
    if startSourceAt is not None:
        changes['startTime'] = parse_at_time(startSourceAt, requestContext)
    if endSourceAt is not None:
        changes['endTime'] = parse_at_time(endSourceAt, requestContext)
    sources = evaluate_first_arg(requestContext, **changes)
    source_start = epoch(changes.get('startTime', requestContext['startTime']))
    source_end = epoch(changes.get('endTime', requestContext['endTime']))
    results = []
    for source, series in zip(sources, seriesList, strict=False):
        series.tags['linearRegressions'] = '%s, %s' % (source_start, source_end)
        name = 'linearRegression(%s, %s, %s)' % (series.name, source_start, source_end)
        fit = _regression(source)
        if fit is None:
            continue
        factor, offset = fit
        values = [offset + (series.start + i * series.step) * factor for i in range(len(series))]
        results.append(TimeSeries(name, series.start, series.end, series.step, values,
                                  tags=series.tags, xFilesFactor=series.xFilesFactor))
    return results


@render_function('identity', CALCULATE, [P('name', 'string', required=True)])
def identity(requestContext: dict, name: str) -> list[TimeSeries]:
    """A made-up series whose value is its own timestamp.

    Parameters:

    - ``name``: the name given to the series.

    One point a minute over the requested range, each value the Unix time of its point: a
    straight rising line, useful to test graphs and functions.

    Example:

    .. code-block:: none

      &target=identity("the time")
    """
    start = epoch(requestContext['startTime'])
    end = epoch(requestContext['endTime'])
    series = TimeSeries(name, start, end, 60, list(range(start, end, 60)),
                        xFilesFactor=requestContext.get('xFilesFactor'))
    series.pathExpression = 'identity("%s")' % name
    return [series]
