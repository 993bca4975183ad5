"""Filter Series and Filter Data groups: keep or drop whole series, or individual points."""

from __future__ import annotations

import re
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
    """Keep series whose ``func`` aggregate compares true against ``threshold``."""
    agg = get_agg_func(func)
    if operator not in OPERATORS:
        raise InputParameterError('Unsupported operator: %s' % operator)
    compare = OPERATORS[operator]
    return [s for s in seriesList if compare(agg(s), threshold)]


def _filter(name: str, func: str, operator: str, doc: str) -> None:
    def impl(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
        return filterSeries(requestContext, seriesList, func, operator, n)
    impl.__name__ = name
    impl.__doc__ = doc
    render_function(name, FILTER, N_FLOAT)(impl)


_filter('maximumAbove', 'max', '>', 'Series whose maximum is above n.')
_filter('minimumAbove', 'min', '>', 'Series whose minimum is above n.')
_filter('maximumBelow', 'max', '<=', 'Series whose maximum is at or below n.')
_filter('minimumBelow', 'min', '<=', 'Series whose minimum is at or below n.')
_filter('currentAbove', 'last', '>', 'Series whose last non-null value is above n.')
_filter('currentBelow', 'last', '<=', 'Series whose last non-null value is at or below n.')
_filter('averageAbove', 'average', '>', 'Series whose average is above n.')
_filter('averageBelow', 'average', '<=', 'Series whose average is at or below n.')


@render_function('highest', FILTER, [SL, P('n', 'integer', required=True),
                                     P('func', 'aggFunc', default='average')])
def highest(requestContext: dict, seriesList: list, n: int = 1,
            func: str = 'average') -> list[TimeSeries]:
    """The n series with the highest ``func`` aggregate."""
    if func != 'max' or not packed_rows.sort_by_max(seriesList):
        materialize_all(seriesList)
        seriesList.sort(key=key_func(get_agg_func(func)), reverse=True)
    return seriesList[:int(n)]


@render_function('lowest', FILTER, [SL, P('n', 'integer', required=True),
                                    P('func', 'aggFunc', default='average')])
def lowest(requestContext: dict, seriesList: list, n: int = 1,
           func: str = 'average') -> list[TimeSeries]:
    """The n series with the lowest ``func`` aggregate (all-null series rank lowest)."""
    seriesList.sort(key=key_func(get_agg_func(func)))
    return seriesList[:int(n)]


def _ranked(name: str, base: Callable, func: str, doc: str) -> None:
    def impl(requestContext: dict, seriesList: list, n: int) -> list[TimeSeries]:
        return base(requestContext, seriesList, n, func)
    impl.__name__ = name
    impl.__doc__ = doc
    # highest(..., 'max') ranks packed rows itself (webapp.render.evaluator)
    traits = Traits(packed_input=base is highest and func == 'max')
    render_function(name, FILTER, N_INT, traits=traits)(impl)


_ranked('highestCurrent', highest, 'current', 'The n series with the highest last value.')
_ranked('highestMax', highest, 'max', 'The n series with the highest maximum.')
_ranked('highestAverage', highest, 'average', 'The n series with the highest average.')
_ranked('lowestCurrent', lowest, 'current', 'The n series with the lowest last value.')
_ranked('lowestAverage', lowest, 'average', 'The n series with the lowest average.')


@render_function('limit', FILTER, N_INT, traits=Traits(keeps_values=True))
def limit(requestContext: dict, seriesList: list, n: int) -> list[TimeSeries]:
    """The first n series."""
    return seriesList[0:n]


@render_function('mostDeviant', FILTER, N_INT)
def mostDeviant(requestContext: dict, seriesList: list, n: int) -> list[TimeSeries]:
    """The n series with the largest variance."""
    ranked = []
    for series in seriesList:
        mean = safe_avg(series)
        if mean is None:
            continue
        variance = sum((v - mean) ** 2 for v in series if v is not None) / safe_len(series)
        ranked.append((variance, series))
    ranked.sort(key=lambda pair: pair[0], reverse=True)
    return [series for _, series in ranked][:n]


@render_function('averageOutsidePercentile', FILTER, N_FLOAT)
def averageOutsidePercentile(requestContext: dict, seriesList: list,
                             n: float) -> list[TimeSeries]:
    """Series whose average lies outside the n-th / (100-n)-th percentile of all averages."""
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
    """Drop series that stay strictly inside the per-point percentile band everywhere."""
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
    """Drop series with no values (or fewer than xFilesFactor known)."""
    ratio = xFilesFactor if xFilesFactor is not None else 0
    return [s for s in seriesList if xff_values(s, ratio)]


@render_function('unique', FILTER, [P('seriesLists', 'seriesList', required=True,
                                      multiple=True)])
def unique(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """Series with distinct names (first one wins)."""
    seen, result = set(), []
    for seriesList in seriesLists:
        for series in seriesList:
            if series.name not in seen:
                seen.add(series.name)
                result.append(series)
    return result


@render_function('exclude', FILTER, [SL, P('pattern', 'string', required=True)])
def exclude(requestContext: dict, seriesList: list, pattern: str) -> list[TimeSeries]:
    """Drop series whose name matches the regular expression."""
    regex = re.compile(pattern)
    return [s for s in seriesList if not regex.search(s.name)]


@render_function('grep', FILTER, [SL, P('pattern', 'string', required=True)])
def grep(requestContext: dict, seriesList: list, pattern: str) -> list[TimeSeries]:
    """Keep series whose name matches the regular expression."""
    regex = re.compile(pattern)
    return [s for s in seriesList if regex.search(s.name)]


@render_function('useSeriesAbove', FILTER, [
    SL, P('value', 'float', required=True), P('search', 'string', required=True),
    P('replace', 'string', required=True)])
def useSeriesAbove(requestContext: dict, seriesList: list, value: float, search: str,
                   replace: str) -> list[TimeSeries]:
    """For series peaking above ``value``, fetch the series named by a regex substitution."""
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
    """Set points above the series' n-th percentile to None."""
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
    """Set points below the series' n-th percentile to None."""
    for series in seriesList:
        rename(series, 'removeBelowPercentile(%s, %g)' % (series.name, n))
        cut = _percentile_of(series, n)
        if cut is None:
            continue
        series[:] = [None if v is None or v < cut else v for v in list.__iter__(series)]
    return seriesList


@render_function('removeAboveValue', FILTER_DATA, N_FLOAT)
def removeAboveValue(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
    """Set points above n to None."""
    for series in seriesList:
        rename(series, 'removeAboveValue(%s, %g)' % (series.name, n))
        series[:] = [None if v is not None and v > n else v for v in list.__iter__(series)]
    return seriesList


@render_function('removeBelowValue', FILTER_DATA, N_FLOAT)
def removeBelowValue(requestContext: dict, seriesList: list, n: float) -> list[TimeSeries]:
    """Set points below n to None."""
    for series in seriesList:
        rename(series, 'removeBelowValue(%s, %g)' % (series.name, n))
        series[:] = [None if v is None or v < n else v for v in list.__iter__(series)]
    return seriesList
