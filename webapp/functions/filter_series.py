"""Filter Series and Filter Data groups: keep or drop whole series, or individual points."""

from __future__ import annotations

import re
import textwrap
from typing import Any, Callable, Optional

from webapp.functions import packed_rows
from webapp.functions.common import (
    evaluate, get_agg_func, key_func, percentile, rename, safe_avg, safe_len, safe_max,
    xff_values,
)
from webapp.functions.registry import Traits, render_function
from webapp.render.errors import InputParameterError
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries, materialize_all
from webapp import pysum

FILTER = 'Filter Series'
FILTER_DATA = 'Filter Data'
SL = P('seriesList', 'seriesList', required=True)
N_FLOAT = [SL, P('n', 'float', required=True)]
N_INT = [SL, P('n', 'integer', required=True)]

OPERATORS: dict[str, Callable[[Any, float], bool]] = {
    '=': lambda v, t: v is not None and v == t,
    '!=': lambda v, t: v is None or v != t,
    '>': lambda v, t: v is not None and v > t,
    '>=': lambda v, t: v is not None and v >= t,
    '<': lambda v, t: v is None or v < t,
    '<=': lambda v, t: v is None or v <= t,
}


@render_function('filterSeries', FILTER, [
    SL, P('func', 'aggFunc', required=True),
    P('operator', 'string', required=True, options=sorted(OPERATORS)),
    P('threshold', 'float', required=True)])
def filterSeries(requestContext: dict, seriesList: list, func: str, operator: str,
                 threshold: float) -> list[TimeSeries]:
    """Keep the series whose aggregate compares true against a threshold.

    Parameters:

    - ``seriesList``: the series to filter.
    - ``func``: the aggregate computed over each series' known values: ``average``, ``max``,
      ``min``, ``sum``, ``last``, ``median``...
    - ``operator``: one of ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``.
    - ``threshold``: the number the aggregate is compared with.

    A series without any value has no aggregate: it is kept by ``!=``, ``<`` and ``<=`` and
    dropped by the others. Kept series are returned unchanged, in their order.

    Example:

    .. code-block:: none

      &target=filterSeries(servers.*.cpu.user,"max",">",80)
    """
    agg = get_agg_func(func)
    if operator not in OPERATORS:
        raise InputParameterError('Unsupported operator: %s' % operator)
    compare = OPERATORS[operator]
    return [s for s in seriesList if compare(agg(s), threshold)]


# What each aggregate is called in a shorthand's description, and how it is taken.
_AGGREGATE_WORDS = {
    'max': ('highest value', 'the maximum is taken'),
    'min': ('lowest value', 'the minimum is taken'),
    'last': ('last value', 'the last non-null value is taken'),
    'average': ('average', 'the average is taken'),
}


def _filter_doc(name: str, func: str, operator: str, example: str) -> str:
    """The description of a filterSeries shorthand, from what it compares."""
    what, taken = _AGGREGATE_WORDS[func]
    above = operator == '>'
    body = textwrap.fill(
        'This is ``filterSeries(seriesList,"%s","%s",n)``: %s over each series\' known values'
        ' (None values left out); a series without any value is %s. Kept series are returned'
        ' unchanged, in their order.' % (func, operator, taken, 'dropped' if above else 'kept'),
        width=88, initial_indent='    ', subsequent_indent='    ')
    return ('Keep the series whose %s is %s.\n\n'
            '    Parameters:\n\n'
            '    - ``seriesList``: the series to filter.\n'
            '    - ``n``: the threshold.\n\n'
            '%s\n\n'
            '    Example:\n\n'
            '    .. code-block:: none\n\n'
            '      &target=%s(%s)\n    ') % (what, 'above n' if above else 'n or less', body,
                                           name, example)


def _filter(name: str, func: str, operator: str, example: str) -> None:
    """Register ``name`` as ``filterSeries(seriesList, func, operator, n)``."""
    def impl(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
        return filterSeries(requestContext, seriesList, func, operator, n)
    impl.__name__ = name
    impl.__doc__ = _filter_doc(name, func, operator, example)
    render_function(name, FILTER, N_FLOAT)(impl)


_filter('maximumAbove', 'max', '>', 'servers.*.cpu.user,90')
_filter('minimumAbove', 'min', '>', 'servers.*.disk.free,1000000')
_filter('maximumBelow', 'max', '<=', 'servers.*.errors,0')
_filter('minimumBelow', 'min', '<=', 'servers.*.disk.free,1000')
_filter('currentAbove', 'last', '>', 'servers.*.queue.size,100')
_filter('currentBelow', 'last', '<=', 'servers.*.free_workers,2')
_filter('averageAbove', 'average', '>', 'servers.*.cpu.user,50')
_filter('averageBelow', 'average', '<=', 'servers.*.requests,10')


@render_function('highest', FILTER, [SL, P('n', 'integer', required=True),
                                     P('func', 'aggFunc', default='average')])
def highest(requestContext: dict, seriesList: list, n: int = 1,
            func: str = 'average') -> list[TimeSeries]:
    """The n series that rank highest by an aggregate of their values.

    Parameters:

    - ``seriesList``: the series to rank.
    - ``n``: how many series to keep.
    - ``func``: the aggregate to rank by: ``average`` (default), ``max``, ``min``, ``sum``,
      ``current`` / ``last``, ``median``...

    The aggregate skips None values; a series without values ranks below every number. The
    series come back highest first, unchanged.

    Example:

    .. code-block:: none

      &target=highest(servers.*.cpu.user,5,"max")
    """
    if func != 'max' or not packed_rows.sort_by_max(seriesList):
        materialize_all(seriesList)
        seriesList.sort(key=key_func(get_agg_func(func)), reverse=True)
    return seriesList[:int(n)]


@render_function('lowest', FILTER, [SL, P('n', 'integer', required=True),
                                    P('func', 'aggFunc', default='average')])
def lowest(requestContext: dict, seriesList: list, n: int = 1,
           func: str = 'average') -> list[TimeSeries]:
    """The n series that rank lowest by an aggregate of their values.

    Parameters:

    - ``seriesList``: the series to rank.
    - ``n``: how many series to keep.
    - ``func``: the aggregate to rank by: ``average`` (default), ``max``, ``min``, ``sum``,
      ``current`` / ``last``, ``median``...

    The aggregate skips None values; a series without values ranks below every number, so it
    comes first. The series come back lowest first, unchanged.

    Example:

    .. code-block:: none

      &target=lowest(servers.*.disk.free,3,"current")
    """
    seriesList.sort(key=key_func(get_agg_func(func)))
    return seriesList[:int(n)]


# What each ranking aggregate is called in a shorthand's description.
_RANK_WORDS = {
    'current': ('last value', 'the last non-null value'),
    'max': ('peak', 'the maximum'),
    'average': ('average', 'the average'),
}


def _ranked_doc(name: str, direction: str, func: str, example: str) -> str:
    """The description of a highest/lowest shorthand, from what it ranks by."""
    what, taken = _RANK_WORDS[func]
    body = textwrap.fill(
        'This is ``%s(seriesList,n,"%s")``: %s skips None values, and a series without values'
        ' ranks below every number. The series come back %s first, unchanged.'
        % (direction, func, taken, direction),
        width=88, initial_indent='    ', subsequent_indent='    ')
    return ('The n series with the %s %s.\n\n'
            '    Parameters:\n\n'
            '    - ``seriesList``: the series to rank.\n'
            '    - ``n``: how many series to keep.\n\n'
            '%s\n\n'
            '    Example:\n\n'
            '    .. code-block:: none\n\n'
            '      &target=%s(%s)\n    ') % (direction, what, body, name, example)


def _ranked(name: str, base: Callable, func: str, example: str) -> None:
    """Register ``name`` as ``base(seriesList, n, func)`` (base: highest or lowest)."""
    def impl(requestContext: dict, seriesList: list, n: int) -> list[TimeSeries]:
        return base(requestContext, seriesList, n, func)
    impl.__name__ = name
    impl.__doc__ = _ranked_doc(name, base.__name__, func, example)
    # highest(..., 'max') ranks packed rows itself (webapp.render.evaluator)
    traits = Traits(packed_input=base is highest and func == 'max')
    render_function(name, FILTER, N_INT, traits=traits)(impl)


_ranked('highestCurrent', highest, 'current', 'servers.*.queue.size,5')
_ranked('highestMax', highest, 'max', 'servers.*.response_time,3')
_ranked('highestAverage', highest, 'average', 'servers.*.cpu.user,5')
_ranked('lowestCurrent', lowest, 'current', 'servers.*.disk.free,3')
_ranked('lowestAverage', lowest, 'average', 'servers.*.requests,5')


@render_function('limit', FILTER, N_INT, traits=Traits(keeps_values=True))
def limit(requestContext: dict, seriesList: list, n: int) -> list[TimeSeries]:
    """Only the first n series of the list.

    Parameters:

    - ``seriesList``: the series, in the order they come (sort them first to choose).
    - ``n``: how many to keep.

    Series and values are unchanged; a list shorter than n is returned whole.

    Example:

    .. code-block:: none

      &target=limit(sortByMaxima(servers.*.cpu.user),10)
    """
    return seriesList[0:n]


@render_function('mostDeviant', FILTER, N_INT)
def mostDeviant(requestContext: dict, seriesList: list, n: int) -> list[TimeSeries]:
    """The n series whose values vary the most.

    Parameters:

    - ``seriesList``: the series to rank.
    - ``n``: how many to keep.

    Each series' variance is computed over its known values around its own mean (None values
    left out); series without values are dropped. The series come back most variable first,
    unchanged.

    Example:

    .. code-block:: none

      &target=mostDeviant(servers.*.response_time,5)
    """
    ranked = []
    for series in seriesList:
        mean = safe_avg(series)
        if mean is None:
            continue
        variance = pysum.total((v - mean) ** 2 for v in series if v is not None) / safe_len(series)
        ranked.append((variance, series))
    ranked.sort(key=lambda pair: pair[0], reverse=True)
    return [series for _, series in ranked][:n]


@render_function('averageOutsidePercentile', FILTER, N_FLOAT)
def averageOutsidePercentile(requestContext: dict, seriesList: list,
                             n: float) -> list[TimeSeries]:
    """Keep the series whose average is an outlier among the averages of all series.

    Parameters:

    - ``seriesList``: the series to filter.
    - ``n``: a percentile; a series is kept when its average is at or below the (100-n)-th
      percentile of all averages or at or above the n-th (n and 100-n give the same band).

    Averages skip None values; a series without values is dropped. Kept series are returned
    unchanged.

    Example:

    .. code-block:: none

      &target=averageOutsidePercentile(servers.*.response_time,95)
    """
    averages = [safe_avg(s) for s in seriesList]
    if n < 50:
        n = 100 - n
    low = percentile(averages, 100 - n)
    high = percentile(averages, n)
    return [s for s, avg in zip(seriesList, averages, strict=True)
            if avg is not None and not low < avg < high]


@render_function('removeBetweenPercentile', FILTER, N_FLOAT)
def removeBetweenPercentile(requestContext: dict, seriesList: list,
                            n: float) -> list[TimeSeries]:
    """Keep the series that leave the band of the other series at least once.

    Parameters:

    - ``seriesList``: the series to filter.
    - ``n``: a percentile; at each point the band runs from the (100-n)-th to the n-th
      percentile of the series' values there (n and 100-n give the same band).

    A series is kept when at least one of its known values lies on or outside the band at
    its point; None values never count. Kept series are returned unchanged.

    Example:

    .. code-block:: none

      &target=removeBetweenPercentile(servers.*.response_time,95)
    """
    if n < 50:
        n = 100 - n
    columns = list(zip(*seriesList, strict=False))
    lows = [percentile(col, 100 - n) for col in columns]
    highs = [percentile(col, n) for col in columns]

    def outside(i: int, v: Any) -> bool:
        if v is None or lows[i] is None:
            return False
        return not lows[i] < v < highs[i]
    return [s for s in seriesList
            if any(outside(i, v) for i, v in enumerate(list(s)[:len(columns)]))]


@render_function('removeEmptySeries', FILTER, [SL, P('xFilesFactor', 'float')])
def removeEmptySeries(requestContext: dict, seriesList: list,
                      xFilesFactor: Optional[float] = None) -> list[TimeSeries]:
    """Drop the series that have no values in the requested range.

    Parameters:

    - ``seriesList``: the series to filter.
    - ``xFilesFactor``: optional share (0 to 1) of known values a series needs to be kept;
      by default one known value is enough.

    Kept series are returned unchanged. Useful before functions that would draw or count
    empty series.

    Example:

    .. code-block:: none

      &target=removeEmptySeries(servers.*.errors,0.5)
    """
    ratio = xFilesFactor if xFilesFactor is not None else 0
    return [s for s in seriesList if xff_values(s, ratio)]


@render_function('unique', FILTER, [P('seriesLists', 'seriesList', required=True,
                                      multiple=True)])
def unique(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """Drop the series whose name appeared earlier in the list.

    Parameters:

    - ``seriesLists``: one or more series lists; the first series of each name is kept.

    Series are compared by their displayed name only; the kept ones are returned unchanged,
    in their order.

    Example:

    .. code-block:: none

      &target=unique(servers.web01.*,servers.*.cpu)
    """
    seen, result = set(), []
    for seriesList in seriesLists:
        for series in seriesList:
            if series.name not in seen:
                seen.add(series.name)
                result.append(series)
    return result


@render_function('exclude', FILTER, [SL, P('pattern', 'string', required=True)])
def exclude(requestContext: dict, seriesList: list, pattern: str) -> list[TimeSeries]:
    """Drop the series whose name matches a regular expression.

    Parameters:

    - ``seriesList``: the series to filter.
    - ``pattern``: a Python regular expression, looked for anywhere in each name.

    The others are returned unchanged. ``grep`` keeps the matches instead.

    Example:

    .. code-block:: none

      &target=exclude(servers.*.disk.*.free,"loop[0-9]+")
    """
    regex = re.compile(pattern)
    return [s for s in seriesList if not regex.search(s.name)]


@render_function('grep', FILTER, [SL, P('pattern', 'string', required=True)])
def grep(requestContext: dict, seriesList: list, pattern: str) -> list[TimeSeries]:
    """Keep only the series whose name matches a regular expression.

    Parameters:

    - ``seriesList``: the series to filter.
    - ``pattern``: a Python regular expression, looked for anywhere in each name.

    The matches are returned unchanged. ``exclude`` drops them instead.

    Example:

    .. code-block:: none

      &target=grep(servers.*.disk.*.free,"sd[a-z]$")
    """
    regex = re.compile(pattern)
    return [s for s in seriesList if regex.search(s.name)]


@render_function('useSeriesAbove', FILTER, [
    SL, P('value', 'float', required=True), P('search', 'string', required=True),
    P('replace', 'string', required=True)])
def useSeriesAbove(requestContext: dict, seriesList: list, value: float, search: str,
                   replace: str) -> list[TimeSeries]:
    """For each series that peaks above a value, fetch a related series instead.

    Parameters:

    - ``seriesList``: the series whose peaks are checked.
    - ``value``: the threshold their maximum (None values left out) must exceed.
    - ``search``: a regular expression looked for in the name of each series above it.
    - ``replace``: its replacement: the result is the path of the series to fetch.

    The derived paths are fetched together; the series found (with values) are the answer.
    No series above the value gives an empty answer.

    Example:

    .. code-block:: none

      &target=useSeriesAbove(servers.*.requests,1000,"requests","response_time")
    """
    names = [re.sub(search, replace, s.name) for s in seriesList
             if (safe_max(s) is not None and safe_max(s) > value)]
    if not names:
        return []
    found = evaluate(requestContext, 'group(%s)' % ','.join(names))
    return [s for s in found if s is not None and len(s) > 0]


def _percentile_of(series: TimeSeries, n: float) -> Any:
    """The n-th percentile of the known values; the series' tags gain nPercentile as
    graphite-web's call of nPercentile marks them (only when it has values)."""
    known = [v for v in series if v is not None]
    if not known:
        return None
    cut = percentile(known, n)
    if cut is not None:
        series.tags['nPercentile'] = n
    return cut


@render_function('removeAbovePercentile', FILTER_DATA, N_FLOAT)
def removeAbovePercentile(requestContext: dict, seriesList: list,
                          n: float) -> list[TimeSeries]:
    """Blank out the values above a percentile of each series.

    Parameters:

    - ``seriesList``: the series to clean.
    - ``n``: the percentile (0 to 100) of each series' own known values above which values
      become None.

    Outliers at the top disappear, the other values (and None values) stay. A series without
    values is left as it is. Named ``removeAbovePercentile(name, n)``.

    Example:

    .. code-block:: none

      &target=removeAbovePercentile(servers.web01.response_time,99)
    """
    for series in seriesList:
        rename(series, 'removeAbovePercentile(%s, %g)' % (series.name, n))
        cut = _percentile_of(series, n)
        if cut is None:
            continue
        series[:] = [None if v is not None and v > cut else v for v in list.__iter__(series)]
    return seriesList


@render_function('removeBelowPercentile', FILTER_DATA, N_FLOAT)
def removeBelowPercentile(requestContext: dict, seriesList: list,
                          n: float) -> list[TimeSeries]:
    """Blank out the values below a percentile of each series.

    Parameters:

    - ``seriesList``: the series to clean.
    - ``n``: the percentile (0 to 100) of each series' own known values below which values
      become None.

    Outliers at the bottom disappear, the other values (and None values) stay. A series
    without values is left as it is. Named ``removeBelowPercentile(name, n)``.

    Example:

    .. code-block:: none

      &target=removeBelowPercentile(servers.web01.response_time,1)
    """
    for series in seriesList:
        rename(series, 'removeBelowPercentile(%s, %g)' % (series.name, n))
        cut = _percentile_of(series, n)
        if cut is None:
            continue
        series[:] = [None if v is None or v < cut else v for v in list.__iter__(series)]
    return seriesList


@render_function('removeAboveValue', FILTER_DATA, N_FLOAT)
def removeAboveValue(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
    """Blank out the values above a fixed number.

    Parameters:

    - ``seriesList``: the series to clean.
    - ``n``: values above it become None; values equal to it stay.

    None values stay None. Named ``removeAboveValue(name, n)``.

    Example:

    .. code-block:: none

      &target=removeAboveValue(servers.*.temperature,150)
    """
    for series in seriesList:
        rename(series, 'removeAboveValue(%s, %g)' % (series.name, n))
        series[:] = [None if v is not None and v > n else v for v in list.__iter__(series)]
    return seriesList


@render_function('removeBelowValue', FILTER_DATA, N_FLOAT)
def removeBelowValue(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
    """Blank out the values below a fixed number.

    Parameters:

    - ``seriesList``: the series to clean.
    - ``n``: values below it become None; values equal to it stay.

    None values stay None. Named ``removeBelowValue(name, n)``.

    Example:

    .. code-block:: none

      &target=removeBelowValue(servers.*.requests,0)
    """
    for series in seriesList:
        rename(series, 'removeBelowValue(%s, %g)' % (series.name, n))
        series[:] = [None if v is None or v < n else v for v in list.__iter__(series)]
    return seriesList
