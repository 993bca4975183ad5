"""Combine group: functions that merge several series into one (sumSeries, averageSeries...)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from webapp.functions.common import (
    NormalizeEmptyResultError, format_path_expressions, get_agg_func, normalize, percentile,
    rows, safe_avg, safe_max, safe_min, safe_pow, safe_sum, xff_values,
)
from webapp.functions.registry import NO_TRAITS, Traits, render_function
from webapp.render import pysum
from webapp.render.errors import InputParameterError
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

COMBINE = 'Combine'
SL = P('seriesList', 'seriesList', required=True)
SLS = [P('seriesLists', 'seriesList', required=True, multiple=True)]
TWO_LISTS = [P('seriesListFirstPos', 'seriesList', required=True),
             P('seriesListSecondPos', 'seriesList', required=True)]
POSITIONS = [SL, P('position', 'node', multiple=True)]


@render_function('aggregate', COMBINE, [SL, P('func', 'aggFunc', required=True),
                                        P('xFilesFactor', 'float')])
def aggregate(requestContext: dict, seriesList: Any, func: str,
              xFilesFactor: Optional[float] = None) -> list[TimeSeries]:
    """Aggregate all series into one, point by point, using ``func`` (sum, average, max...).

    The result is named ``<func>Series(<path expressions>)``.
    """
    raw = func
    if func.endswith('Series'):
        func = func[:-6]
    agg = get_agg_func(func, raw)
    if not seriesList:
        return []
    if isinstance(seriesList[0], TimeSeries):
        seriesList = [seriesList]
    try:
        series_list, start, end, step = normalize(seriesList)
    except NormalizeEmptyResultError:
        return []
    if xFilesFactor is None:
        xFilesFactor = requestContext.get('xFilesFactor')
    name, tags = aggregate_name_tags(series_list, func)
    values = None
    if agg in _ARRAY_AGGREGATES:
        values = array_aggregate(series_list, _ARRAY_AGGREGATES[agg], xFilesFactor)
    if values is None:
        values = [agg(row) if xff_values(row, xFilesFactor) else None
                  for row in rows(series_list)]
    return [TimeSeries(name, start, end, step, values, xFilesFactor=xFilesFactor, tags=tags)]


_FLOATS_OR_NONE = frozenset([float, type(None)])
_ARRAY_AGGREGATES = {safe_sum: 'sum', safe_avg: 'average', safe_max: 'max', safe_min: 'min'}


def array_aggregate(series_list: list, how: Any,
                    x_files_factor: Optional[float]) -> Optional[list]:
    """Point-by-point sum, average, max or min (``how``) of the known values with numpy,
    the same floats as graphite-web's Python: sums add the series one after the other
    from 0 as the running Python's ``sum()`` does (``pysum``), and a max/min of zero is
    taken again with Python's max/min (which keeps the first of 0.0 and -0.0). None (use
    the Python rows) without numpy or for values other than floats/None."""
    from webapp.storage import packed
    np = packed.np
    if np is None or len(series_list) < 2:
        return None
    lists = [list(series) for series in series_list]
    arrays = float_grid(lists)
    if arrays is None:
        return None
    grid, known = arrays
    width = grid.shape[1]
    count = known.sum(axis=0)
    with np.errstate(all='ignore'):       # inf - inf is nan, as in Python
        if how in ('sum', 'average'):
            total = np.zeros(width)
            comp = np.zeros_like(total)
            for row in np.where(known, grid, 0.0):
                pysum.add_into(np, total, comp, row)
            total = pysum.result(np, total, comp)
            if how == 'average':
                total = total / np.maximum(count, 1)
        else:
            total = (np.fmax if how == 'max' else np.fmin).reduce(grid, axis=0)
        ok = (count > 0) & (count / len(series_list) >= (x_files_factor or 0.0))
    cells = packed.value_lists(total, ok)
    if how in ('max', 'min'):
        pick = max if how == 'max' else min
        for i in np.flatnonzero(ok & (total == 0)).tolist():
            cells[i] = pick(v[i] for v in lists if i < len(v) and v[i] is not None)
    return cells


def float_grid(lists: list[list]) -> Optional[tuple[Any, Any]]:
    """(values, known) float64/bool arrays of value lists padded with NaN to the longest,
    or None when a list holds anything but floats and None (a stored NaN included: then
    Python's rules apply)."""
    from webapp.storage import packed
    np = packed.np
    if any(not frozenset(map(type, values)) <= _FLOATS_OR_NONE for values in lists):
        return None
    width = max(map(len, lists))
    if all(len(values) == width for values in lists):
        grid = np.array(lists, dtype=np.float64).reshape(len(lists), width)   # None -> NaN
    else:
        grid = np.full((len(lists), width), np.nan)
        for i, values in enumerate(lists):
            grid[i, :len(values)] = np.array(values, dtype=np.float64)
    known = ~np.isnan(grid)
    if int(known.sum()) != sum(len(values) - values.count(None) for values in lists):
        return None
    return grid, known


def aggregate_name_tags(series_list: list[TimeSeries], func: str) -> tuple[str, dict]:
    """Name and tags of ``aggregate(series_list, func)``'s result (tags they all share)."""
    name = '%sSeries(%s)' % (func, format_path_expressions(series_list))
    tags = dict(series_list[0].tags)
    for series in series_list[1:]:
        if not tags:
            break          # nothing left to share
        tags = {k: v for k, v in tags.items() if series.tags.get(k) == v}
    tags.setdefault('name', name)
    tags['aggregatedBy'] = func
    return name, tags


def _simple(func: str) -> Callable[..., list[TimeSeries]]:
    def combined(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
        return aggregate(requestContext, seriesLists, func)
    return combined


def _register_simple(name: str, func: str, doc: str, aliases: tuple = ()) -> None:
    impl = _simple(func)
    impl.__name__ = name
    impl.__doc__ = doc
    # the evaluator may compute these over packed whisper rows (webapp.render.fused)
    traits = Traits(fused_aggregate=func) if func in ('sum', 'average', 'max', 'min') \
        else NO_TRAITS
    render_function(name, COMBINE, SLS, aliases=aliases, aggregator=True, traits=traits)(impl)


_register_simple('sumSeries', 'sum', 'Sum of the series at each point (None ignored).',
                 ('sum',))
_register_simple('averageSeries', 'average',
                 'Average of the non-null values of the series at each point.', ('avg',))
_register_simple('minSeries', 'min', 'Lowest value of the series at each point.')
_register_simple('maxSeries', 'max', 'Highest value of the series at each point.')
_register_simple('diffSeries', 'diff',
                 'First series minus all the others, point by point (None ignored).')
_register_simple('stddevSeries', 'stddev',
                 'Population standard deviation across the series at each point.')
_register_simple('rangeOfSeries', 'rangeOf', 'Max minus min across the series at each point.')


@render_function('multiplySeries', COMBINE, SLS, aggregator=True)
def multiplySeries(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """Product of the series at each point (None if any is None); one series passes through."""
    if len(seriesLists) == 1 and len(seriesLists[0]) == 1:
        return seriesLists[0]
    return aggregate(requestContext, seriesLists, 'multiply')


@render_function('aggregateSeriesLists', COMBINE, TWO_LISTS + [
    P('func', 'aggFunc', required=True), P('xFilesFactor', 'float')])
def aggregateSeriesLists(requestContext: dict, seriesListFirstPos: list,
                         seriesListSecondPos: list, func: str,
                         xFilesFactor: Optional[float] = None) -> list[TimeSeries]:
    """Aggregate the i-th series of the first list with the i-th series of the second."""
    if len(seriesListFirstPos) != len(seriesListSecondPos):
        raise InputParameterError(
            'seriesListFirstPos and seriesListSecondPos argument must have equal length')
    results = []
    for first, second in zip(seriesListFirstPos, seriesListSecondPos, strict=True):
        combined = aggregate(requestContext, [first, second], func, xFilesFactor=xFilesFactor)
        if not combined:
            continue
        result = combined[0]
        result.name = result.name[:result.name.find('Series(')] + 'Series(%s,%s)' % (
            first.name, second.name)
        results.append(result)
    return results


def _lists(func: str, name: str, doc: str) -> None:
    def impl(requestContext: dict, seriesListFirstPos: list,
             seriesListSecondPos: list) -> list[TimeSeries]:
        return aggregateSeriesLists(requestContext, seriesListFirstPos, seriesListSecondPos, func)
    impl.__name__ = name
    impl.__doc__ = doc
    render_function(name, COMBINE, TWO_LISTS, aggregator=True)(impl)


_lists('sum', 'sumSeriesLists', 'Pairwise sum of two equally long series lists.')
_lists('diff', 'diffSeriesLists', 'Pairwise difference of two equally long series lists.')
_lists('multiply', 'multiplySeriesLists', 'Pairwise product of two equally long series lists.')


@render_function('aggregateWithWildcards', COMBINE, [
    SL, P('func', 'aggFunc', required=True), P('position', 'node', multiple=True)])
def aggregateWithWildcards(requestContext: dict, seriesList: list, func: str,
                           *positions: int) -> list[TimeSeries]:
    """Group series by their name without the given nodes and aggregate each group."""
    groups: dict[str, list] = {}
    for series in seriesList:
        key = '.'.join(node for i, node in enumerate(series.name.split('.'))
                       if i not in positions)
        groups.setdefault(key, []).append(series)
    results = []
    for key, members in groups.items():
        result = aggregate(requestContext, members, func)[0]
        result.name = key
        results.append(result)
    return results


def _wildcards(func: str, name: str, doc: str) -> None:
    def impl(requestContext: dict, seriesList: list, *position: int) -> list[TimeSeries]:
        return aggregateWithWildcards(requestContext, seriesList, func, *position)
    impl.__name__ = name
    impl.__doc__ = doc
    render_function(name, COMBINE, POSITIONS, aggregator=True)(impl)


_wildcards('sum', 'sumSeriesWithWildcards', 'Sum series that match once the given nodes '
           'are removed from their names.')
_wildcards('average', 'averageSeriesWithWildcards', 'Average series that match once the '
           'given nodes are removed from their names.')
_wildcards('multiply', 'multiplySeriesWithWildcards', 'Multiply series that match once the '
           'given nodes are removed from their names.')


@render_function('percentileOfSeries', COMBINE, [
    SL, P('n', 'float', required=True), P('interpolate', 'boolean', default=False)])
def percentileOfSeries(requestContext: dict, seriesList: list, n: float,
                       interpolate: bool = False) -> list[TimeSeries]:
    """The n-th percentile across the series at each point."""
    if n <= 0:
        raise InputParameterError('The requested percent is required to be greater than 0')
    if not seriesList:
        return []
    name = 'percentileOfSeries(%s,%g)' % (seriesList[0].pathExpression, n)
    _, start, end, step = normalize([seriesList])
    values = [percentile(row, n, interpolate) for row in rows(seriesList)]
    return [TimeSeries(name, start, end, step, values,
                       xFilesFactor=requestContext.get('xFilesFactor'))]


@render_function('countSeries', COMBINE, [P('seriesLists', 'seriesList', multiple=True)],
                 aggregator=True)
def countSeries(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """A constant series holding the number of series given.

    With no argument it is a line at 0; with arguments matching nothing the answer is
    empty (normalize's NormalizeEmptyResultError, as graphite-web 1.1.10 answers ``[]``).
    """
    if not seriesLists:
        from webapp.functions.special import constantLine
        series = constantLine(requestContext, 0)[0]
        series.pathExpression = 'countSeries()'
        return [series]
    series_list, start, end, step = normalize(seriesLists)
    name = 'countSeries(%s)' % format_path_expressions(series_list)
    values = [len(row) for row in rows(series_list)]
    return [TimeSeries(name, start, end, step, values,
                       xFilesFactor=requestContext.get('xFilesFactor'))]


@render_function('group', COMBINE, [P('seriesLists', 'seriesList', multiple=True)])
def group(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """Concatenate several series lists into one."""
    return [series for seriesList in seriesLists for series in seriesList]


@render_function('powSeries', COMBINE, [P('seriesList', 'seriesList', required=True,
                                          multiple=True)], aggregator=True)
def powSeries(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """First series raised to the power of the second, then the third... point by point."""
    try:
        series_list, start, end, step = normalize(seriesLists)
    except NormalizeEmptyResultError:
        return []
    name = 'powSeries(%s)' % ','.join(s.name for s in series_list)
    values = []
    for row in rows(series_list):
        acc = row[0]
        for element in row[1:]:
            acc = safe_pow(acc, element)
        values.append(acc)
    return [TimeSeries(name, start, end, step, values,
                       xFilesFactor=requestContext.get('xFilesFactor'))]
