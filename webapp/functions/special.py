"""Special group: constant and generated series, consolidation control, tag queries, ..."""

from __future__ import annotations

import random
import re
from datetime import timedelta
from typing import Any, Optional

from webapp.functions.common import (
    NAN, epoch, format_units, safe_last, safe_max, safe_min,
)
from webapp.functions.registry import render_function
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

SPECIAL = 'Special'
SL = P('seriesList', 'seriesList', required=True)
CONSOLIDATIONS = ['sum', 'average', 'avg', 'avg_zero', 'min', 'max', 'first', 'last']


@render_function('constantLine', SPECIAL, [P('value', 'float', required=True)])
def constantLine(requestContext: dict, value: Any) -> list[TimeSeries]:
    """A horizontal line at a fixed value across the whole graph.

    Parameters:

    - ``value``: the line's value.

    The series has three points (start, middle, end of the range), all the same value, and
    is named after the value. Useful as a threshold, or as a fallback for
    ``fallbackSeries``.

    Example:

    .. code-block:: none

      &target=constantLine(80)
    """
    start = epoch(requestContext['startTime'])
    end = epoch(requestContext['endTime'])
    step = int((end - start) / 2.0)
    series = TimeSeries(str(value), start, end, step, [value, value, value],
                        xFilesFactor=requestContext.get('xFilesFactor'))
    series.pathExpression = 'constantLine(%s)' % value
    return [series]


@render_function('consolidateBy', SPECIAL, [SL, P('consolidationFunc', 'string', required=True,
                                                  options=CONSOLIDATIONS)])
def consolidateBy(requestContext: dict, seriesList: list,
                  consolidationFunc: str) -> list[TimeSeries]:
    """Choose how each series is thinned when it has more points than can be drawn or returned.

    Parameters:

    - ``seriesList``: the series concerned.
    - ``consolidationFunc``: ``average`` (the default behaviour), ``avg``, ``avg_zero``
      (None counts as 0), ``sum``, ``min``, ``max``, ``first`` or ``last``.

    When a graph is narrower than the number of points, or a json request sets
    ``maxDataPoints`` below it, neighbouring points are merged into one with this function.
    ``max`` keeps short peaks visible, ``sum`` keeps totals of counts right. None values are
    left out of each merge (except with ``avg_zero``). Values are not changed otherwise.
    Named ``consolidateBy(name,"func")``.

    Example:

    .. code-block:: none

      &target=consolidateBy(servers.web01.errors,"sum")&maxDataPoints=100
    """
    for series in seriesList:
        series.consolidationFunc = consolidationFunc
        series.tags['consolidateBy'] = consolidationFunc
        series.name = 'consolidateBy(%s,"%s")' % (series.name, consolidationFunc)
        series.pathExpression = series.name
    return seriesList


@render_function('cumulative', SPECIAL, [SL])
def cumulative(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Thin a series by adding points up when there are more points than can be drawn or
    returned.

    Parameters:

    - ``seriesList``: the series concerned.

    Same as ``consolidateBy(seriesList,"sum")``: merged points are summed instead of
    averaged, so totals of counts stay right. Values are not changed otherwise.

    Example:

    .. code-block:: none

      &target=cumulative(app.requests)&maxDataPoints=100
    """
    return consolidateBy(requestContext, seriesList, 'sum')


@render_function('setXFilesFactor', SPECIAL, [SL, P('xFilesFactor', 'float', required=True)],
                 aliases=('xFilesFactor',))
def setXFilesFactor(requestContext: dict, seriesList: list,
                    xFilesFactor: float) -> list[TimeSeries]:
    """Set how many known values a consolidated or aggregated point needs.

    Parameters:

    - ``seriesList``: the series concerned.
    - ``xFilesFactor``: a share from 0 to 1: a merged point gets a value only when at least
      that share of the points merged into it are known, otherwise it is None.

    It applies to the consolidation for drawing or ``maxDataPoints`` and to the functions
    after it that aggregate (``summarize``, ``aggregate``, ``sumSeries``...). Values are not
    changed otherwise. ``xFilesFactor`` is a short name for the same function.

    Example:

    .. code-block:: none

      &target=summarize(setXFilesFactor(app.requests,0.5),"1h","sum")
      &target=xFilesFactor(app.requests,0.5)
    """
    requestContext['xFilesFactor'] = xFilesFactor
    for series in seriesList:
        series.xFilesFactor = xFilesFactor
        series.tags['xFilesFactor'] = xFilesFactor
    return seriesList


@render_function('fallbackSeries', SPECIAL, [SL, P('fallback', 'seriesList', required=True)])
def fallbackSeries(requestContext: dict, seriesList: list, fallback: list) -> list[TimeSeries]:
    """Use other series when a query finds nothing.

    Parameters:

    - ``seriesList``: the series wanted.
    - ``fallback``: the series returned instead when ``seriesList`` is empty.

    A ``seriesList`` with at least one series, even without values, is returned as it is.

    Example:

    .. code-block:: none

      &target=fallbackSeries(servers.web01.requests,constantLine(0))
    """
    return seriesList if len(seriesList) > 0 else fallback


@render_function('substr', SPECIAL, [SL, P('start', 'node', default=0),
                                     P('stop', 'node', default=0)])
def substr(requestContext: dict, seriesList: list, start: int = 0,
           stop: int = 0) -> list[TimeSeries]:
    """Rename each series to a slice of the nodes of its metric path.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``start``: the first node kept (0 is the first; negative counts from the end).
    - ``stop``: the node the slice stops before; 0 (the default) keeps every node to the
      end.

    The path used is the metric inside any function calls of the name. Values are untouched.

    Example:

    .. code-block:: none

      &target=substr(servers.web01.cpu.user,1,3)

    is named ``web01.cpu``.
    """
    for series in seriesList:
        left = series.name.rfind('(') + 1
        right = series.name.find(')')
        if right < 0:
            right = len(series.name) + 1
        nodes = series.name[left:right].split('.')
        if int(stop) == 0:
            name = '.'.join(nodes[int(start):])
        else:
            name = '.'.join(nodes[int(start):int(stop)])
        series.name = re.sub(',.*$', '', name)
    return seriesList


@render_function('cactiStyle', SPECIAL, [SL, P('system', 'string', options=['si', 'binary']),
                                         P('units', 'string')])
def cactiStyle(requestContext: dict, seriesList: list, system: Optional[str] = None,
               units: Optional[str] = None) -> list[TimeSeries]:
    """Append current, highest and lowest values to each name, in aligned columns as Cacti
    shows them.

    Parameters:

    - ``seriesList``: the series to label.
    - ``system``: optional ``si`` (K, M, G...) or ``binary`` (Ki, Mi, Gi...) unit prefixes
      for the numbers.
    - ``units``: optional unit text written after each number (``b/s``, ``ms``).

    Current is the last known value; the values skip None; a series without values shows
    ``nan``. Names are padded so the columns line up in the legend.

    Example:

    .. code-block:: none

      &target=cactiStyle(servers.*.net.bytes_in,"si","B")
    """
    if not seriesList:
        return seriesList
    if system:
        if units:
            def fmt(x: float) -> str:
                return '%.2f %s' % format_units(x, system=system, units=units)
        else:
            def fmt(x: float) -> str:
                return '%.2f%s' % format_units(x, system=system)
    elif units:
        def fmt(x: float) -> str:
            return '%.2f %s' % (x, units)
    else:
        def fmt(x: float) -> str:
            return '%.2f' % x

    def width(func: Any) -> int:
        return max([0] + [len(fmt(int(func(s) or 3))) for s in seriesList]) + 3

    name_len = max([0] + [len(s.name) for s in seriesList])
    last_len, max_len, min_len = width(safe_last), width(safe_max), width(safe_min)
    for series in seriesList:
        shown = []
        for func in (safe_last, safe_max, safe_min):
            value = func(series)
            shown.append(NAN if value is None else fmt(float(value)))
        series.name = '%*s Current:%*s Max:%*s Min:%*s ' % (
            -name_len, series.name, -last_len, shown[0], -max_len, shown[1],
            -min_len, shown[2])
    return seriesList


@render_function('randomWalkFunction', SPECIAL, [P('name', 'string', required=True),
                                                 P('step', 'integer', default=60)],
                 aliases=('randomWalk',))
def randomWalkFunction(requestContext: dict, name: str, step: int = 60) -> list[TimeSeries]:
    """A made-up series that wanders at random, to try out graphs and functions.

    Parameters:

    - ``name``: the name given to the series.
    - ``step``: seconds between points, 60 by default.

    It starts at 0 and moves by a random amount between -0.5 and 0.5 at each point, so every
    request draws a different line. ``randomWalkFunction`` is the long name of the same
    function.

    Example:

    .. code-block:: none

      &target=randomWalk("test.walk",10)
      &target=randomWalkFunction("test.walk")
    """
    start, end = requestContext['startTime'], requestContext['endTime']
    values, current, when = [], 0.0, start
    while when < end:
        values.append(current)
        current += random.random() - 0.5
        when += timedelta(seconds=step)
    return [TimeSeries(name, epoch(start), epoch(end), step, values,
                       xFilesFactor=requestContext.get('xFilesFactor'))]


def _quote(expr: str) -> str:
    return "'%s'" % expr if "'" not in expr else '"%s"' % expr


@render_function('seriesByTag', SPECIAL, [P('tagExpressions', 'string', required=True,
                                             multiple=True)])
def seriesByTag(requestContext: dict, *tagExpressions: str) -> list[TimeSeries]:
    """Find tagged series by expressions on their tags.

    Parameters:

    - ``tagExpressions``: one or more quoted expressions, all of which must hold:
      ``tag=value`` (equal), ``tag!=value``, ``tag=~regex`` (matches), ``tag!=~regex``;
      ``name`` is the metric name's tag. At least one expression must require a non-empty
      value (``dc!=x`` alone would match every series).

    Series are found in the tag database the caches feed (TAGDB); each is fetched like a
    path and named by its tagged name, ``cpu.user;dc=ams;host=web01``.

    Example:

    .. code-block:: none

      &target=seriesByTag("name=cpu.user","dc=ams","host=~web.*")
    """
    tagdb = requestContext.get('tagdb')
    if tagdb is None:
        return []
    path_expression = 'seriesByTag(%s)' % ','.join(_quote(e) for e in tagExpressions)
    fetch = requestContext['fetchSeries']
    results = []
    for path in tagdb.find_series(list(tagExpressions)):
        for series in fetch(requestContext, path):
            series.pathExpression = path_expression
            results.append(series)
    return results


@render_function('events', SPECIAL, [P('tags', 'string', required=True, multiple=True)])
def events(requestContext: dict, *tags: str) -> list[TimeSeries]:
    """A series of the events recorded at /events, counted per second.

    Parameters:

    - ``tags``: one or more tags; an event counts when it has all of them; ``"*"`` counts
      every event.

    The series has one point a second over the requested range: the number of events at that
    second, None where there were none. Drawn with ``drawAsInfinite`` it marks each event
    with a vertical line.

    Example:

    .. code-block:: none

      &target=drawAsInfinite(events("deploy","production"))
    """
    name = 'events("' + '", "'.join(tags) + '")'
    wanted = None if tags == ('*',) else list(tags)
    start = epoch(requestContext['startTime'])
    end = epoch(requestContext['endTime'])
    values: list = [None] * (end - start)
    finder = requestContext.get('findEvents')
    for when in (finder(start, end, wanted) if finder else []):
        offset = int(when) - start
        if 0 <= offset < len(values):
            values[offset] = (values[offset] or 0) + 1
    return [TimeSeries(name, start, end, 1, values, 'sum',
                       xFilesFactor=requestContext.get('xFilesFactor'))]
