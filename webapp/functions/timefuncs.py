"""Transform group, time based: summarize, hitcount, timeShift, timeStack, timeSlice, ..."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Optional

from webapp.functions import packed_rows
from webapp.functions.common import (
    DAY, HOUR, MINUTE, epoch, evaluate_first_arg, get_agg_func, interval_seconds,
    parse_at_time, parse_interval, rename, xff,
)
from webapp.functions.registry import Traits, render_function
from webapp.functions.registry import Param as P
from webapp.render.attime import get_unit_string
from webapp.render.series import TimeSeries, materialize_all
from webapp import pysum

TRANSFORM = 'Transform'
SL = P('seriesList', 'seriesList', required=True)
INTERVAL_SUGGESTIONS = ['10min', '1h', '1d']
SHIFT_SUGGESTIONS = ['1h', '6h', '12h', '1d', '2d', '7d', '14d', '30d']


def summarize_values(series: TimeSeries, func: str, interval: int,
                     newStart: Optional[int] = None,
                     newEnd: Optional[int] = None) -> tuple[list, int]:
    """Bucket a series into ``interval``-second buckets from newStart; (values, end)."""
    start = series.start if newStart is None else newStart
    end = series.end if newEnd is None else newEnd
    agg = get_agg_func(func)
    timestamps = list(range(int(series.start), int(series.end), int(series.step)))
    points = list(series)
    per_bucket = interval / series.step
    count = min(len(timestamps), len(points))
    values, i, ts = [], 0, start
    while ts < end:
        first, known = i, 0
        while i < count and timestamps[i] < ts + interval:
            if timestamps[i] <= ts:
                first = i
            if timestamps[i] >= ts and points[i] is not None:
                known += 1
            i += 1
        values.append(agg(points[first:i]) if xff(known, per_bucket, series.xFilesFactor)
                      else None)
        ts += interval
    return values, ts


@render_function('summarize', TRANSFORM, [
    SL, P('intervalString', 'interval', required=True, suggestions=INTERVAL_SUGGESTIONS),
    P('func', 'aggFunc', default='sum'), P('alignToFrom', 'boolean', default=False)],
                 traits=Traits(packed_input=True))
def summarize(requestContext: dict, seriesList: list, intervalString: str, func: str = 'sum',
              alignToFrom: bool = False) -> list[TimeSeries]:
    """Add up (or otherwise combine) the points of each series into buckets of a fixed length.

    Parameters:

    - ``seriesList``: the series to summarise.
    - ``intervalString``: the bucket length: ``"1h"``, ``"1d"``, ``"15min"``...
    - ``func``: how the points of a bucket are combined: ``sum`` (default), ``average``,
      ``max``, ``min``, ``last``, ``median``, ``count``...
    - ``alignToFrom``: false (default): buckets start at multiples of the interval since the
      epoch (an hourly bucket starts on the hour), so the first and last may be partial;
      true: the first bucket starts at the request's ``from``.

    None values are left out of each bucket; a bucket without values (or with fewer known
    values than the series' xFilesFactor asks) is None. ``sum`` of a per-minute counter
    gives counts per bucket. Named ``summarize(name, "interval", "func")``.

    Example:

    .. code-block:: none

      &target=summarize(app.orders,"1d","sum")
      &target=summarize(servers.web01.cpu.user,"1h","max",true)
    """
    interval = interval_seconds(intervalString)
    rows = None
    if alignToFrom or not seriesList:
        materialize_all(seriesList)
    else:
        rows = packed_rows.bucket_values(seriesList, func, interval)
    results = []
    for i, series in enumerate(seriesList):
        if alignToFrom:
            new_start, new_end = series.start, series.end
        else:
            new_start = series.start - (series.start % interval)
            new_end = series.end - (series.end % interval) + interval
        if rows is not None:
            values = rows[i]
        else:
            values, aligned_end = summarize_values(series, func, interval, new_start, new_end)
        if alignToFrom:
            new_end = aligned_end
        series.tags['summarize'] = intervalString
        series.tags['summarizeFunction'] = func
        name = 'summarize(%s, "%s", "%s"%s)' % (series.name, intervalString, func,
                                                ', true' if alignToFrom else '')
        results.append(series.copy(name=name, start=new_start, end=new_end, step=interval,
                                   values=values))
    return results


# its first argument may come as packed rows (webapp.functions.packed_rows)


def _align_start(start: datetime, alignTo: str) -> datetime:
    unit = get_unit_string(alignTo.lstrip('0123456789'))
    tz = start.tzinfo
    if unit == 'years':
        return datetime(start.year, 1, 1, tzinfo=tz)
    if unit == 'months':
        return datetime(start.year, start.month, 1, tzinfo=tz)
    if unit == 'weeks':
        weekday = int(alignTo[-1]) if alignTo[-1].isdigit() else 1
        back = (start.isoweekday() - weekday) % 7
        return datetime(start.year, start.month, start.day, tzinfo=tz) - timedelta(days=back)
    if unit == 'days':
        return datetime(start.year, start.month, start.day, tzinfo=tz)
    if unit == 'hours':
        return datetime(start.year, start.month, start.day, start.hour, tzinfo=tz)
    if unit == 'minutes':
        return datetime(start.year, start.month, start.day, start.hour, start.minute, tzinfo=tz)
    return start.replace(microsecond=0)


@render_function('smartSummarize', TRANSFORM, [
    SL, P('intervalString', 'interval', required=True, suggestions=INTERVAL_SUGGESTIONS),
    P('func', 'aggFunc', default='sum'),
    P('alignTo', 'string', options=[None, 'years', 'months', 'weeks', 'days', 'hours',
                                    'minutes', 'seconds', True, False])])
def smartSummarize(requestContext: dict, seriesList: list, intervalString: str,
                   func: str = 'sum', alignTo: Any = None) -> list[TimeSeries]:
    """Combine the points of each series into buckets of a fixed length that start at ``from``.

    Parameters:

    - ``seriesList``: the series to summarise.
    - ``intervalString``: the bucket length: ``"1h"``, ``"1d"``...
    - ``func``: how the points of a bucket are combined: ``sum`` (default), ``average``,
      ``max``, ``min``, ``last``...
    - ``alignTo``: optional unit (``years``, ``months``, ``weeks``, ``days``, ``hours``,
      ``minutes``, ``seconds``): ``from`` is first moved back to the start of that unit, and
      the data is fetched again from there.

    Unlike ``summarize`` the buckets follow the requested range rather than the epoch. None
    values are left out of each bucket; an empty bucket is None. Named
    ``smartSummarize(name, "interval", "func")``.

    Example:

    .. code-block:: none

      &target=smartSummarize(app.orders,"1d","sum","days")
    """
    if alignTo is not None and not isinstance(alignTo, bool):
        start = _align_start(requestContext['startTime'], alignTo)
        seriesList = evaluate_first_arg(requestContext, startTime=start)
    interval = interval_seconds(intervalString)
    results = []
    for series in seriesList:
        values, aligned_end = summarize_values(series, func, interval)
        series.tags['smartSummarize'] = intervalString
        series.tags['smartSummarizeFunction'] = func
        name = 'smartSummarize(%s, "%s", "%s")' % (series.name, intervalString, func)
        results.append(series.copy(name=name, end=aligned_end, step=interval, values=values))
    return results


def _hit_buckets(series: TimeSeries, interval: int) -> tuple[int, list]:
    step = int(series.step)
    count = int(math.ceil(float(series.end - series.start) / interval))
    buckets: list[list] = [[] for _ in range(count)]
    new_start = int(series.end - count * interval)
    for i, value in enumerate(series):
        if value is None:
            continue
        t0 = int(series.start + i * step)
        b0, m0 = divmod(t0 - new_start, interval)
        b1, m1 = divmod(t0 + step - new_start, interval)
        if b1 >= count:
            b1, m1 = count - 1, interval
        if b0 == b1:
            if b0 >= 0:
                buckets[b0].append(value * (m1 - m0))
            continue
        if b0 >= 0:
            buckets[b0].append(value * (interval - m0))
        for j in range(b0 + 1, b1):
            buckets[j].append(value * interval)
        if m1 > 0:
            buckets[b1].append(value * m1)
    return new_start, [pysum.total(b) if b else None for b in buckets]


@render_function('hitcount', TRANSFORM, [
    SL, P('intervalString', 'interval', required=True, suggestions=INTERVAL_SUGGESTIONS),
    P('alignToInterval', 'boolean', default=False)])
def hitcount(requestContext: dict, seriesList: list, intervalString: str,
             alignToInterval: bool = False) -> list[TimeSeries]:
    """Turn a rate (per second) into the number of hits in each bucket of a fixed length.

    Parameters:

    - ``seriesList``: series of per-second rates.
    - ``intervalString``: the bucket length: ``"1h"``, ``"1d"``...
    - ``alignToInterval``: when true, the range is first moved back to the start of the
      bucket's unit (day, hour or minute) so buckets fall on round times.

    Each point contributes rate x the seconds it overlaps a bucket, split between buckets
    where it straddles two. None values add nothing; a bucket that gets nothing is None.
    Named ``hitcount(name, "interval")``.

    Example:

    .. code-block:: none

      &target=hitcount(app.requests_per_second,"1h",true)
    """
    interval = int(interval_seconds(intervalString))
    if alignToInterval:
        s = requestContext['startTime']
        if interval >= DAY:
            s = datetime(s.year, s.month, s.day, tzinfo=s.tzinfo)
        elif interval >= HOUR:
            s = datetime(s.year, s.month, s.day, s.hour, tzinfo=s.tzinfo)
        elif interval >= MINUTE:
            s = datetime(s.year, s.month, s.day, s.hour, s.minute, tzinfo=s.tzinfo)
        seriesList = evaluate_first_arg(requestContext, startTime=s)
        for series in seriesList:
            buckets = int((series.end - series.start) // interval)
            series.end = series.start + buckets * interval + interval
    results = []
    for series in seriesList:
        new_start, values = _hit_buckets(series, interval)
        series.tags['hitcount'] = intervalString
        name = 'hitcount(%s, "%s"%s)' % (series.name, intervalString,
                                         ', true' if alignToInterval else '')
        results.append(series.copy(name=name, start=new_start, step=interval, values=values))
    return results


def _negative(offset: str) -> str:
    return '-' + offset if offset[0].isdigit() else offset


def _is_dst(dt: datetime) -> bool:
    return bool(dt.dst())


@render_function('timeShift', TRANSFORM, [
    SL, P('timeShift', 'interval', required=True, suggestions=SHIFT_SUGGESTIONS),
    P('resetEnd', 'boolean', default=True), P('alignDst', 'boolean', default=False)])
def timeShift(requestContext: dict, seriesList: list, timeShift: str, resetEnd: bool = True,
              alignDST: bool = False) -> list[TimeSeries]:
    """Draw each series as it was some time ago, on the current time axis.

    Parameters:

    - ``seriesList``: the series to shift.
    - ``timeShift``: how far back: ``"1d"``, ``"7d"``, ``"1h"``...; a leading ``+`` shifts
      into the future instead.
    - ``resetEnd``: true (default): the shifted series stops where the current data ends (a
      shift into the future does not run past now).
    - ``alignDst``: when true, the shift is corrected by an hour where it crosses a daylight
      saving change, so a day-ago series lines up by local time of day.

    The same paths are fetched again for the shifted range and their timestamps moved to the
    requested one. Named ``timeShift(name, "interval")``.

    Example:

    .. code-block:: none

      &target=app.requests&target=timeShift(app.requests,"7d")
    """
    timeShift = _negative(timeShift)
    delta = parse_interval(timeShift)
    start = requestContext['startTime'] + delta
    end = requestContext['endTime'] + delta
    if alignDST:
        req = (_is_dst(requestContext['startTime']), _is_dst(requestContext['endTime']))
        mine = (_is_dst(start), _is_dst(end))
        shift = timedelta(0)
        if all(req) and not any(mine):
            shift = timedelta(hours=1)
        elif not any(req) and all(mine):
            shift = timedelta(hours=-1)
        start, end = start + shift, end + shift
    if not seriesList:
        return []
    first = seriesList[0]
    results = []
    for shifted in evaluate_first_arg(requestContext, packed=True, startTime=start,
                                      endTime=end):
        shifted.tags['timeShift'] = timeShift
        shifted.name = 'timeShift(%s, "%s")' % (shifted.name, timeShift)
        if resetEnd:
            shifted.end = first.end
        else:
            shifted.end = shifted.end - shifted.start + first.start
        shifted.start = first.start
        results.append(shifted)
    return results


@render_function('timeStack', TRANSFORM, [
    SL, P('timeShiftUnit', 'interval', default='1d', suggestions=SHIFT_SUGGESTIONS),
    P('timeShiftStart', 'integer', default=0), P('timeShiftEnd', 'integer', default=7)])
def timeStack(requestContext: dict, seriesList: list, timeShiftUnit: str = '1d',
              timeShiftStart: int = 0, timeShiftEnd: int = 7) -> list[TimeSeries]:
    """Several time-shifted copies of each series, one per multiple of a unit, drawn on the
    current axis.

    Parameters:

    - ``seriesList``: the series to shift.
    - ``timeShiftUnit``: the unit of each shift, ``"1d"`` by default.
    - ``timeShiftStart``: the first multiple, 0 by default (0 is the current data).
    - ``timeShiftEnd``: the multiple to stop before, 7 by default.

    Each copy is fetched again for its shifted range, like ``timeShift``; with the defaults
    the result is the last seven days laid over each other. Named ``timeShift(name, "unit",
    n)`` per copy.

    Example:

    .. code-block:: none

      &target=averageSeries(timeStack(app.requests,"1d",1,8))
    """
    timeShiftUnit = _negative(timeShiftUnit)
    delta = parse_interval(timeShiftUnit)
    if not seriesList:
        return []
    first = seriesList[0]
    results = []
    for shift in range(int(timeShiftStart), int(timeShiftEnd)):
        inner = delta * shift
        for shifted in evaluate_first_arg(requestContext,
                                          startTime=requestContext['startTime'] + inner,
                                          endTime=requestContext['endTime'] + inner):
            shifted.tags['timeShiftUnit'] = timeShiftUnit
            shifted.tags['timeShift'] = shift
            rename(shifted, 'timeShift(%s, %s, %s)' % (shifted.name, timeShiftUnit, shift))
            shifted.start = first.start
            shifted.end = first.end
            results.append(shifted)
    return results


@render_function('timeSlice', TRANSFORM, [SL, P('startSliceAt', 'date', required=True),
                                          P('endSliceAt', 'date', default='now')])
def timeSlice(requestContext: dict, seriesList: list, startSliceAt: str,
              endSliceAt: str = 'now') -> list[TimeSeries]:
    """Keep only the part of each series between two times.

    Parameters:

    - ``seriesList``: the series to cut.
    - ``startSliceAt``: the first time kept, in any ``from`` form (``"-2h"``,
      ``"09:00_20240101"``...).
    - ``endSliceAt``: the last time kept, ``"now"`` by default.

    Points outside the slice become None; the series keeps its full length. Named
    ``timeSlice(name, start, end)``.

    Example:

    .. code-block:: none

      &target=timeSlice(app.requests,"-2h","-1h")
    """
    start = epoch(parse_at_time(startSliceAt, requestContext))
    end = epoch(parse_at_time(endSliceAt, requestContext))
    for series in seriesList:
        series.tags['timeSliceStart'] = start
        series.tags['timeSliceEnd'] = end
        series.name = 'timeSlice(%s, %s, %s)' % (series.name, start, end)
        current = epoch(requestContext['startTime'])
        for i, value in enumerate(list.__iter__(series)):
            if value is None or current < start or current > end:
                series[i] = None
            current += series.step
    return seriesList


@render_function('integralByInterval', TRANSFORM, [
    SL, P('intervalUnit', 'string', required=True)])
def integralByInterval(requestContext: dict, seriesList: list,
                       intervalUnit: str) -> list[TimeSeries]:
    """A running total of each series that starts again at every interval.

    Parameters:

    - ``seriesList``: the series to add up.
    - ``intervalUnit``: the length after which the total goes back to 0: ``"1d"`` for daily
      totals, ``"1h"``...; intervals are counted from the request's ``from``.

    None values add nothing (the total carries on). Named
    ``integralByInterval(name,'interval')``.

    Example:

    .. code-block:: none

      &target=integralByInterval(app.signups,"1d")
    """
    duration = abs(interval_seconds(intervalUnit))
    origin = epoch(requestContext['startTime'])
    results = []
    for series in seriesList:
        values, total, current = [], 0.0, series.start
        for value in series:
            if (current - origin) // duration != (current - origin - series.step) // duration:
                total = 0.0
            if value is not None:
                total += value
            values.append(total)
            current += series.step
        series.tags['integralByInterval'] = intervalUnit
        results.append(series.copy(name="integralByInterval(%s,'%s')" % (series.name,
                                                                          intervalUnit),
                                   values=values))
    return results


def compress_periodic_gaps(series: TimeSeries) -> TimeSeries:
    """Re-step a series whose points arrive only every k-th step (None in between)."""
    first = second = 0
    for i, value in enumerate(series):
        if value:
            if first > 0:
                second = i
                break
            first = i
    guess = second - first
    third = second + guess
    interval = None
    if guess > 1 and third <= len(series) - 2 and series[third] \
            and series[third - 1] is None and series[third + 1] is None:
        interval = guess * series.step
    if not interval:
        return series
    new_start = series.start + first * series.step
    values, _ = summarize_values(series, 'last', interval, new_start, series.end)
    new_end = new_start + interval * (len(values) - 1)
    return TimeSeries(series.name, new_start, new_end, interval, values,
                      consolidate=series.consolidationFunc, tags=series.tags,
                      xFilesFactor=series.xFilesFactor, pathExpression=series.pathExpression)


@render_function('compressPeriodicGaps', TRANSFORM, [SL])
def compressPeriodicGaps(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Give series that report less often than their storage step their real step.

    Parameters:

    - ``seriesList``: the series to compress.

    A series stored every 10 seconds but written every 60 has five None values between its
    points; when the gaps repeat regularly, the series is rebuilt with the real interval as
    its step and the None values gone. Series without such a pattern are unchanged apart
    from the name, ``compressPeriodicGaps(name)``.

    Example:

    .. code-block:: none

      &target=compressPeriodicGaps(cron.backup.duration)
    """
    results = []
    for series in seriesList:
        rename(series, 'compressPeriodicGaps(%s)' % series.name)
        results.append(compress_periodic_gaps(series))
    return results


def _generated(requestContext: dict, name: str, step: int, value_at: Any) -> list[TimeSeries]:
    start, end = requestContext['startTime'], requestContext['endTime']
    values, when = [], start
    while when < end:
        values.append(value_at(epoch(when)))
        when += timedelta(seconds=step)
    return [TimeSeries(name, epoch(start), epoch(end), step, values,
                       xFilesFactor=requestContext.get('xFilesFactor'))]


@render_function('timeFunction', TRANSFORM, [P('name', 'string', required=True),
                                             P('step', 'integer', default=60)],
                 aliases=('time',))
def timeFunction(requestContext: dict, name: str, step: int = 60) -> list[TimeSeries]:
    """A made-up series whose value at each point is that point's Unix time.

    Parameters:

    - ``name``: the name given to the series.
    - ``step``: seconds between points, 60 by default.

    Useful to try out graphs and functions. ``time`` is a short name for the same function.

    Example:

    .. code-block:: none

      &target=timeFunction("the.time",10)
      &target=time("the.time")
    """
    return _generated(requestContext, name, step, float)


@render_function('sinFunction', TRANSFORM, [P('name', 'string', required=True),
                                            P('amplitude', 'integer', default=1),
                                            P('step', 'integer', default=60)],
                 aliases=('sin',))
def sinFunction(requestContext: dict, name: str, amplitude: int = 1,
                step: int = 60) -> list[TimeSeries]:
    """A made-up sine wave, to try out graphs and functions.

    Parameters:

    - ``name``: the name given to the series.
    - ``amplitude``: the height of the wave, 1 by default.
    - ``step``: seconds between points, 60 by default.

    Each value is ``sin(timestamp) x amplitude``. ``sin`` is a short name for the same
    function.

    Example:

    .. code-block:: none

      &target=sinFunction("a.wave",2,10)
      &target=sin("a.wave")
    """
    return _generated(requestContext, name, step, lambda t: math.sin(t) * amplitude)
