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
    """A horizontal line at ``value`` across the whole graph (3 points)."""
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
    """How to merge points when there are more than pixels / maxDataPoints (sum, max, ...)."""
    for series in seriesList:
        series.consolidationFunc = consolidationFunc
        series.tags['consolidateBy'] = consolidationFunc
        series.name = 'consolidateBy(%s,"%s")' % (series.name, consolidationFunc)
        series.pathExpression = series.name
    return seriesList


@render_function('cumulative', SPECIAL, [SL])
def cumulative(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Same as consolidateBy(seriesList, 'sum')."""
    return consolidateBy(requestContext, seriesList, 'sum')


@render_function('setXFilesFactor', SPECIAL, [SL, P('xFilesFactor', 'float', required=True)],
                 aliases=('xFilesFactor',))
def setXFilesFactor(requestContext: dict, seriesList: list,
                    xFilesFactor: float) -> list[TimeSeries]:
    """Minimum ratio of known points for consolidation and later aggregations."""
    requestContext['xFilesFactor'] = xFilesFactor
    for series in seriesList:
        series.xFilesFactor = xFilesFactor
        series.tags['xFilesFactor'] = xFilesFactor
    return seriesList


@render_function('fallbackSeries', SPECIAL, [SL, P('fallback', 'seriesList', required=True)])
def fallbackSeries(requestContext: dict, seriesList: list, fallback: list) -> list[TimeSeries]:
    """``fallback`` when seriesList is empty, else seriesList."""
    return seriesList if len(seriesList) > 0 else fallback


@render_function('substr', SPECIAL, [SL, P('start', 'node', default=0),
                                     P('stop', 'node', default=0)])
def substr(requestContext: dict, seriesList: list, start: int = 0,
           stop: int = 0) -> list[TimeSeries]:
    """Rename to path nodes start..stop of the innermost metric in the name."""
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
    """Append aligned 'Current: Max: Min:' values to each name, Cacti style."""
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
    """A random walk starting at 0, moving by up to +/-0.5 each step (for testing)."""
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
    """Series whose tags match all expressions, e.g. 'name=cpu', 'host=~web.*', 'dc!=x'."""
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
    """Count of tagged events per second ('*' for all); needs an events store in the app."""
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
