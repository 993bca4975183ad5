"""Graph group: per-series drawing options honoured by the PNG/SVG renderer."""

from __future__ import annotations

from typing import Any, Optional

from webapp.functions.common import epoch, parse_at_time
from webapp.functions.registry import render_function
from webapp.render.errors import InputParameterError
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

GRAPH = 'Graph'
SL = P('seriesList', 'seriesList', required=True)


@render_function('color', GRAPH, [SL, P('theColor', 'string', required=True)])
def color(requestContext: dict, seriesList: list, theColor: str) -> list[TimeSeries]:
    """Draw the series in this colour (name like 'red' or hex like 'ff0000' / '6464ffaa')."""
    for series in seriesList:
        series.color = theColor
    return seriesList


@render_function('alpha', GRAPH, [SL, P('alpha', 'float', required=True)])
def alpha(requestContext: dict, seriesList: list, alpha: float) -> list[TimeSeries]:
    """Draw the series with this opacity (0 to 1)."""
    for series in seriesList:
        series.options['alpha'] = alpha
    return seriesList


@render_function('lineWidth', GRAPH, [SL, P('width', 'float', required=True)])
def lineWidth(requestContext: dict, seriesList: list, width: float) -> list[TimeSeries]:
    """Draw the series with this line width in pixels."""
    for series in seriesList:
        series.options['lineWidth'] = width
    return seriesList


@render_function('dashed', GRAPH, [SL, P('dashLength', 'integer', default=5)])
def dashed(requestContext: dict, seriesList: list, dashLength: int = 5) -> list[TimeSeries]:
    """Draw the series as a dashed line."""
    for series in seriesList:
        series.tags['dashed'] = dashLength
        series.name = 'dashed(%s, %g)' % (series.name, dashLength)
        series.options['dashed'] = dashLength
    return seriesList


@render_function('drawAsInfinite', GRAPH, [SL])
def drawAsInfinite(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Draw a full-height vertical line wherever the value is non-zero."""
    for series in seriesList:
        series.options['drawAsInfinite'] = True
        series.tags['drawAsInfinite'] = 1
        series.name = 'drawAsInfinite(%s)' % series.name
    return seriesList


@render_function('secondYAxis', GRAPH, [SL])
def secondYAxis(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Plot the series against a second Y axis on the right."""
    for series in seriesList:
        series.options['secondYAxis'] = True
        series.tags['secondYAxis'] = 1
        series.name = 'secondYAxis(%s)' % series.name
    return seriesList


@render_function('stacked', GRAPH, [SL, P('stack', 'string')])
def stacked(requestContext: dict, seriesLists: list,
            stackName: str = '__DEFAULT__') -> list[TimeSeries]:
    """Stack the series on top of each other (and of earlier stacks with the same name)."""
    totals = requestContext.setdefault('totalStack', {}).get(stackName, [])
    results = []
    for series in seriesLists:
        values = []
        for i, value in enumerate(list.__iter__(series)):
            if len(totals) <= i:
                totals.append(0)
            if value is None:
                values.append(None)
            else:
                totals[i] += value
                values.append(totals[i])
        if stackName == '__DEFAULT__':
            series.tags['stacked'] = stackName
            name = 'stacked(%s)' % series.name
        else:
            name = series.name
        result = series.copy(name=name, values=values)
        result.options['stacked'] = True
        results.append(result)
    requestContext['totalStack'][stackName] = totals
    return results


@render_function('areaBetween', GRAPH, [SL])
def areaBetween(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Fill the area between exactly two series (lower first, upper second)."""
    if len(seriesList) != 2:
        raise InputParameterError(
            'areaBetween series argument must reference *exactly* 2 series')
    lower, upper = seriesList
    lower.options['stacked'] = True
    lower.options['invisible'] = True
    upper.options['stacked'] = True
    upper.tags['areaBetween'] = 1
    lower.tags = upper.tags
    lower.name = upper.name = 'areaBetween(%s)' % upper.pathExpression
    return seriesList


@render_function('threshold', GRAPH, [P('value', 'float', required=True),
                                      P('label', 'string'), P('color', 'string')])
def threshold(requestContext: dict, value: float, label: Optional[str] = None,
              color: Optional[str] = None) -> list[TimeSeries]:
    """A horizontal line at ``value``, optionally labelled and coloured."""
    from webapp.functions.special import constantLine
    series = constantLine(requestContext, value)[0]
    if label:
        series.name = label
    if color:
        series.color = color
    return [series]


@render_function('verticalLine', GRAPH, [P('ts', 'date', required=True),
                                         P('label', 'string'), P('color', 'string')])
def verticalLine(requestContext: dict, ts: Any, label: Optional[str] = None,
                 color: Optional[str] = None) -> list[TimeSeries]:
    """A vertical line at time ``ts`` (which must lie inside the graph's range)."""
    when = epoch(parse_at_time(ts, requestContext))
    start = epoch(requestContext['startTime'])
    end = epoch(requestContext['endTime'])
    if when < start:
        raise InputParameterError('verticalLine(): timestamp %s exists before start of range'
                                  % when)
    if when > end:
        raise InputParameterError('verticalLine(): timestamp %s exists after end of range'
                                  % when)
    series = TimeSeries(label, when, when, 1.0, [1.0, 1.0],
                        xFilesFactor=requestContext.get('xFilesFactor'))
    series.options['drawAsInfinite'] = True
    if color:
        series.color = color
    return [series]
