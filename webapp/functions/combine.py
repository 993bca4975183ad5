"""Combine group: functions that merge several series into one (sumSeries, averageSeries...)."""

from __future__ import annotations

import textwrap
from typing import Any, Callable, Optional

from webapp.functions.common import (
    NormalizeEmptyResultError, format_path_expressions, get_agg_func, normalize, percentile,
    rows, safe_avg, safe_max, safe_min, safe_pow, safe_sum, xff_values,
)
from webapp.functions.registry import NO_TRAITS, Traits, render_function
from webapp import pysum
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
    """Combine all series into one with the aggregation you name, point by point.

    Parameters:

    - ``seriesList``: the series to combine.
    - ``func``: ``sum``, ``average``, ``median``, ``min``, ``max``, ``diff``, ``stddev``,
      ``count``, ``range``, ``multiply``, ``last``, ``avg_zero`` (None counts as 0) or one
      of their aliases (``avg``, ``total``, ``rangeOf``, ``current``).
    - ``xFilesFactor``: the smallest share (0 to 1) of series that must have a value at a
      point for it to get one; by default that of the request (0 unless set).

    The series are first brought to a common step (the least common multiple of their steps)
    and time range. None values are left out of each point's aggregate, except that
    ``multiply`` gives None where any value is None and ``avg_zero`` counts them as 0. The
    result is named ``<func>Series(paths)``, e.g. ``sumSeries(servers.*.requests)``, and
    keeps the tags all series share, plus ``aggregatedBy``.

    Example:

    .. code-block:: none

      &target=aggregate(servers.*.requests,"median")
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
    from 0 as graphite-web's ``sum()`` does (``pysum``), and a max/min of zero is
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


def _simple_doc(name: str, summary: str, none_rule: str, example: str, alias: str) -> str:
    """The description of a sumSeries-like function: what differs is its summary, how it
    treats None values, its example and its short name."""
    body = textwrap.fill(
        'The series are first brought to a common step (the least common multiple of their'
        ' steps, consolidating each series with its own consolidation function) and a common'
        ' time range; then each point of the result combines the values the series have at'
        ' that time. %s The result is named ``%s(paths)`` and keeps the tags all series'
        ' share.' % (none_rule, name),
        width=88, initial_indent='    ', subsequent_indent='    ')
    examples = '      &target=%s(%s)\n' % (name, example)
    short = ''
    if alias:
        examples += '      &target=%s(%s)\n' % (alias, example)
        short = '\n    ``%s`` is a short name for the same function.\n' % alias
    return ('%s\n\n'
            '    Parameters:\n\n'
            '    - ``seriesLists``: one or more series lists (paths with wildcards, other'
            ' functions\'\n      results); all their series are combined together.\n\n'
            '%s\n\n'
            '    Example:\n\n'
            '    .. code-block:: none\n\n'
            '%s%s    ') % (summary, body, examples, short)


def _register_simple(name: str, func: str, summary: str, none_rule: str, example: str,
                     alias: str = '') -> None:
    impl = _simple(func)
    impl.__name__ = name
    impl.__doc__ = _simple_doc(name, summary, none_rule, example, alias)
    # the evaluator may compute these over packed whisper rows (webapp.render.fused)
    traits = Traits(fused_aggregate=func) if func in ('sum', 'average', 'max', 'min') \
        else NO_TRAITS
    render_function(name, COMBINE, SLS, aliases=(alias,) if alias else (), aggregator=True,
                    traits=traits)(impl)


_NONE_LEFT_OUT = 'None values are left out; a point where every series is None is None.'
_register_simple('sumSeries', 'sum',
                 'Add the series together, point by point, into one series.',
                 ('None values are left out of each sum; a point where every series is None is '
                  'None.'),
                 'servers.*.requests', 'sum')
_register_simple('averageSeries', 'average',
                 'The average of the series, point by point, as one series.',
                 ('Each point is the mean of the known values only: None values neither count as '
                  '0 nor as a member; a point where every series is None is None.'),
                 'servers.*.cpu.user', 'avg')
_register_simple('minSeries', 'min',
                 'The lowest value among the series at each point, as one series.',
                 _NONE_LEFT_OUT, 'servers.*.disk.free')
_register_simple('maxSeries', 'max',
                 'The highest value among the series at each point, as one series.',
                 _NONE_LEFT_OUT, 'servers.*.response_time')
_register_simple('diffSeries', 'diff',
                 'The first series minus all the others, point by point, as one series.',
                 ('None values are left out: where the first series is None the first known value'
                  ' takes its place; a point where every series is None is None.'),
                 'network.bytes_in,network.bytes_dropped')
_register_simple('stddevSeries', 'stddev',
                 'The standard deviation across the series at each point, as one series.',
                 ('It is the population standard deviation of the known values of each point '
                  '(None values left out); a point where every series is None is None.'),
                 'servers.*.response_time')
_register_simple('rangeOfSeries', 'rangeOf',
                 ('The spread (highest minus lowest value) across the series at each point,'
                  ' as one series.'),
                 _NONE_LEFT_OUT, 'servers.*.load')


@render_function('multiplySeries', COMBINE, SLS, aggregator=True)
def multiplySeries(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """The product of the series, point by point, as one series.

    Parameters:

    - ``seriesLists``: one or more series lists; all their series are multiplied together.

    The series are first brought to a common step (the least common multiple of their steps)
    and time range. A point is None as soon as any series is None there. A single series is
    returned as it is. The result is named ``multiplySeries(paths)``.

    Example:

    .. code-block:: none

      &target=multiplySeries(app.requests_per_second,app.cost_per_request)
    """
    if len(seriesLists) == 1 and len(seriesLists[0]) == 1:
        return seriesLists[0]
    return aggregate(requestContext, seriesLists, 'multiply')


@render_function('aggregateSeriesLists', COMBINE, TWO_LISTS + [
    P('func', 'aggFunc', required=True), P('xFilesFactor', 'float')])
def aggregateSeriesLists(requestContext: dict, seriesListFirstPos: list,
                         seriesListSecondPos: list, func: str,
                         xFilesFactor: Optional[float] = None) -> list[TimeSeries]:
    """Combine two series lists pair by pair: the first of one with the first of the other...

    Parameters:

    - ``seriesListFirstPos``: the first list.
    - ``seriesListSecondPos``: the second list, as long as the first (otherwise a 400).
    - ``func``: the aggregation applied to each pair, as in ``aggregate`` (``sum``,
      ``diff``, ``multiply``, ``average``, ``max``...).
    - ``xFilesFactor``: the smallest share of the pair that must have a value at a point; by
      default that of the request.

    Pairs are matched by position, so both lists should be sorted the same way. Each result
    is named ``<func>Series(first,second)``. None values are treated as ``aggregate`` treats
    them.

    Example:

    .. code-block:: none

      &target=aggregateSeriesLists(servers.*.bytes_in,servers.*.bytes_out,"sum")
    """
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


_lists('sum', 'sumSeriesLists',
    """Add two series lists pair by pair.

    Parameters:

    - ``seriesListFirstPos``: the first list.
    - ``seriesListSecondPos``: the second list, as long as the first (otherwise a 400).

    Series are paired by position, so both lists should be sorted the same way. Each pair
    becomes one series, ``aggregateSeriesLists`` with ``"sum"``: named
    ``sumSeries(first,second)``, None values left out of each point.

    Example:

    .. code-block:: none

      &target=sumSeriesLists(servers.*.bytes_in,servers.*.bytes_out)
    """)
_lists('diff', 'diffSeriesLists',
    """Subtract the second series list from the first, pair by pair.

    Parameters:

    - ``seriesListFirstPos``: the first list.
    - ``seriesListSecondPos``: the second list, as long as the first (otherwise a 400).

    Series are paired by position, so both lists should be sorted the same way. Each pair
    becomes one series, ``aggregateSeriesLists`` with ``"diff"``: named
    ``diffSeries(first,second)``, None values left out of each point.

    Example:

    .. code-block:: none

      &target=diffSeriesLists(servers.*.mem.total,servers.*.mem.free)
    """)
_lists('multiply', 'multiplySeriesLists',
    """Multiply two series lists pair by pair.

    Parameters:

    - ``seriesListFirstPos``: the first list.
    - ``seriesListSecondPos``: the second list, as long as the first (otherwise a 400).

    Series are paired by position, so both lists should be sorted the same way. Each pair
    becomes one series, ``aggregateSeriesLists`` with ``"multiply"``: named
    ``multiplySeries(first,second)``; a point is None where either value is None.

    Example:

    .. code-block:: none

      &target=multiplySeriesLists(servers.*.requests,servers.*.bytes_per_request)
    """)


@render_function('aggregateWithWildcards', COMBINE, [
    SL, P('func', 'aggFunc', required=True), P('position', 'node', multiple=True)])
def aggregateWithWildcards(requestContext: dict, seriesList: list, func: str,
                           *positions: int) -> list[TimeSeries]:
    """Combine the series whose names are the same once some nodes are left out.

    Parameters:

    - ``seriesList``: the series to combine.
    - ``func``: the aggregation, as in ``aggregate`` (``sum``, ``average``, ``max``...).
    - ``position``: one or more node positions (0 is the first) to leave out of the names;
      series equal on the other nodes are combined.

    Each group becomes one series named after the remaining nodes, computed as ``aggregate``
    (common step, None values left out).

    Example:

    .. code-block:: none

      &target=aggregateWithWildcards(dc1.servers.*.cpu.user,"sum",2)

    is one series, ``dc1.servers.cpu.user``, the sum over all servers.
    """
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


_wildcards('sum', 'sumSeriesWithWildcards',
    """Add up the series whose names are the same once some nodes are left out.

    Parameters:

    - ``seriesList``: the series to combine.
    - ``position``: one or more node positions (0 is the first) to leave out of the names;
      series equal on the other nodes are combined.

    This is ``aggregateWithWildcards`` with ``"sum"``: each group becomes one series named
    after the remaining nodes (common step, None values left out).

    Example:

    .. code-block:: none

      &target=sumSeriesWithWildcards(host.cpu-[0-7].cpu-{user,system}.value,1)

    gives ``host.cpu-user.value`` and ``host.cpu-system.value``, each summed over the CPUs.
    """)
_wildcards('average', 'averageSeriesWithWildcards',
    """Average the series whose names are the same once some nodes are left out.

    Parameters:

    - ``seriesList``: the series to combine.
    - ``position``: one or more node positions (0 is the first) to leave out of the names;
      series equal on the other nodes are combined.

    This is ``aggregateWithWildcards`` with ``"average"``: each group becomes one series
    named after the remaining nodes (common step, None values left out).

    Example:

    .. code-block:: none

      &target=averageSeriesWithWildcards(dc1.servers.*.cpu.user,2)

    gives one series, ``dc1.servers.cpu.user``, the average over all servers.
    """)
_wildcards('multiply', 'multiplySeriesWithWildcards',
    """Multiply the series whose names are the same once some nodes are left out.

    Parameters:

    - ``seriesList``: the series to combine.
    - ``position``: one or more node positions (0 is the first) to leave out of the names;
      series equal on the other nodes are combined.

    This is ``aggregateWithWildcards`` with ``"multiply"``: each group becomes one series
    named after the remaining nodes (common step; a point is None where any value is).

    Example:

    .. code-block:: none

      &target=multiplySeriesWithWildcards(web.host-[0-7].{avg-response,total-request}.value,2)

    gives one series per host, ``web.host-0.value``..., the product of its two series.
    """)


@render_function('percentileOfSeries', COMBINE, [
    SL, P('n', 'float', required=True), P('interpolate', 'boolean', default=False)])
def percentileOfSeries(requestContext: dict, seriesList: list, n: float,
                       interpolate: bool = False) -> list[TimeSeries]:
    """A percentile across the series at each point, as one series.

    Parameters:

    - ``seriesList``: the series to combine.
    - ``n``: the percentile, above 0 and up to 100.
    - ``interpolate``: when true, the value between the two nearest ranks is interpolated;
      by default (false) the nearest rank's value is taken, always one of the inputs.

    The series are brought to a common step and range first; None values are left out of
    each point; a point where every series is None is None. Named
    ``percentileOfSeries(path,n)``.

    Example:

    .. code-block:: none

      &target=percentileOfSeries(servers.*.response_time,95,false)
    """
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
    """A flat series whose value is the number of series given.

    Parameters:

    - ``seriesLists``: optional series lists; every series in them is counted, whether it
      has values or not.

    Without any argument the result is a line at 0; when the arguments match nothing the
    answer is empty. Named ``countSeries(paths)``.

    Example:

    .. code-block:: none

      &target=countSeries(servers.*.cpu.user)
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
    """Put several series lists together into one list.

    Parameters:

    - ``seriesLists``: any number of series lists (paths, wildcards, other functions'
      results).

    Nothing is computed and names are untouched; it lets one function take several unrelated
    paths at once.

    Example:

    .. code-block:: none

      &target=sumSeries(group(servers.web*.requests,servers.api*.requests))
    """
    return [series for seriesList in seriesLists for series in seriesList]


@render_function('powSeries', COMBINE, [P('seriesList', 'seriesList', required=True,
                                          multiple=True)], aggregator=True)
def powSeries(requestContext: dict, *seriesLists: Any) -> list[TimeSeries]:
    """Raise the first series to the power of the second, the result to the third, and so on,
    point by point.

    Parameters:

    - ``seriesList``: two or more series (one or more lists), in the order used.

    The series are brought to a common step and range first. A point is None where any
    series is None or where the power is not a real number (a negative base with a
    fractional exponent, an overflow). Named ``powSeries(names)``.

    Example:

    .. code-block:: none

      &target=powSeries(physics.base,physics.exponent)
    """
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
