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
    """Draw each series in a chosen colour.

    Parameters:

    - ``seriesList``: the series concerned.
    - ``theColor``: a colour name (``red``, ``green``, ``blue``...) or hex digits
      (``ff0000``, or ``ff000080`` with opacity).

    Only the picture changes; values are unchanged.

    Example:

    .. code-block:: none

      &target=color(servers.web01.errors,"red")
    """
    for series in seriesList:
        series.color = theColor
    return seriesList


@render_function('alpha', GRAPH, [SL, P('alpha', 'float', required=True)])
def alpha(requestContext: dict, seriesList: list, alpha: float) -> list[TimeSeries]:
    """Draw each series with some transparency.

    Parameters:

    - ``seriesList``: the series concerned.
    - ``alpha``: opacity from 0 (invisible) to 1 (opaque).

    Only the picture changes (PNG, SVG, PDF); values and json answers are unchanged.

    Example:

    .. code-block:: none

      &target=alpha(servers.*.cpu.user,0.4)&areaMode=all
    """
    for series in seriesList:
        series.options['alpha'] = alpha
    return seriesList


@render_function('lineWidth', GRAPH, [SL, P('width', 'float', required=True)])
def lineWidth(requestContext: dict, seriesList: list, width: float) -> list[TimeSeries]:
    """Draw each series with a chosen line width.

    Parameters:

    - ``seriesList``: the series concerned.
    - ``width``: the width in pixels (``0.5``, ``3``...).

    Only the picture changes; values are unchanged.

    Example:

    .. code-block:: none

      &target=lineWidth(app.requests,3)
    """
    for series in seriesList:
        series.options['lineWidth'] = width
    return seriesList


@render_function('dashed', GRAPH, [SL, P('dashLength', 'integer', default=5)])
def dashed(requestContext: dict, seriesList: list, dashLength: int = 5) -> list[TimeSeries]:
    """Draw each series as a dashed line.

    Parameters:

    - ``seriesList``: the series concerned.
    - ``dashLength``: length of the dashes in pixels, 5 by default.

    Only the picture changes; values are unchanged. Named ``dashed(name, dashLength)``.

    Example:

    .. code-block:: none

      &target=dashed(timeShift(app.requests,"7d"),3)
    """
    for series in seriesList:
        series.tags['dashed'] = dashLength
        series.name = 'dashed(%s, %g)' % (series.name, dashLength)
        series.options['dashed'] = dashLength
    return seriesList


@render_function('drawAsInfinite', GRAPH, [SL])
def drawAsInfinite(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Draw a full-height vertical line at each point with a non-zero value.

    Parameters:

    - ``seriesList``: the series concerned (events, deploys...).

    Points that are 0 or None draw nothing. Only the picture changes; values are unchanged.
    Named ``drawAsInfinite(name)``.

    Example:

    .. code-block:: none

      &target=drawAsInfinite(deploys.production)
    """
    for series in seriesList:
        series.options['drawAsInfinite'] = True
        series.tags['drawAsInfinite'] = 1
        series.name = 'drawAsInfinite(%s)' % series.name
    return seriesList


@render_function('secondYAxis', GRAPH, [SL])
def secondYAxis(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Draw each series against a second Y axis on the right.

    Parameters:

    - ``seriesList``: the series concerned.

    Useful when two series have very different scales. Only the picture changes; values are
    unchanged. Named ``secondYAxis(name)``.

    Example:

    .. code-block:: none

      &target=app.requests&target=secondYAxis(app.response_time)
    """
    for series in seriesList:
        series.options['secondYAxis'] = True
        series.tags['secondYAxis'] = 1
        series.name = 'secondYAxis(%s)' % series.name
    return seriesList


@render_function('stacked', GRAPH, [SL, P('stack', 'string')])
def stacked(requestContext: dict, seriesLists: list,
            stackName: str = '__DEFAULT__') -> list[TimeSeries]:
    """Draw the series stacked on top of each other.

    Parameters:

    - ``seriesList``: the series to stack.
    - ``stack``: optional stack name: series given the same name in several ``stacked``
      calls stack together; by default they join the ``__DEFAULT__`` stack.

    In a picture each series starts at the top of the one before it; json answers hold the
    same running totals. A None value stays None and adds nothing to the series above. Named
    ``stacked(name)`` in the default stack; in a named stack names are unchanged.

    Example:

    .. code-block:: none

      &target=stacked(servers.web01.cpu.{user,system,iowait})
    """
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
    """Fill the area between two series, e.g. a minimum and a maximum.

    Parameters:

    - ``seriesList``: exactly two series (more or fewer is a 400): the lower bound and the
      upper bound.

    In a picture the lower series is made invisible and the space up to the upper one is
    filled; values are unchanged, and both series are named ``areaBetween(upper path)``.

    Example:

    .. code-block:: none

      &target=areaBetween(group(minSeries(servers.*.load),maxSeries(servers.*.load)))
    """
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
    """A horizontal line at a value, with an optional label and colour.

    Parameters:

    - ``value``: where the line is drawn.
    - ``label``: the legend text, by default the value.
    - ``color``: the line's colour (name or hex digits).

    Like ``constantLine`` with a name and colour: the series has three points at that value.

    Example:

    .. code-block:: none

      &target=app.response_time&target=threshold(500,"SLO","red")
    """
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
    """A vertical line at a given time, with an optional label and colour.

    Parameters:

    - ``ts``: the time, in any ``from`` form (``"-6h"``, ``"12:00_20240101"``...); it must
      lie within the graph's range (otherwise a 400).
    - ``label``: the legend text.
    - ``color``: the line's colour (name or hex digits).

    Drawn like ``drawAsInfinite``; in json it is a series of 1.0 at that time.

    Example:

    .. code-block:: none

      &target=app.requests&target=verticalLine("-6h","deploy","blue")
    """
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
