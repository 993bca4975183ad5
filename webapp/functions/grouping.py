"""Combine group, part two: division, percentages and node/tag based grouping."""

from __future__ import annotations

from functools import reduce
from typing import Any, Optional

from webapp.plugins import RENDER_FUNCTIONS
from webapp.functions import packed_rows
from webapp.functions.combine import COMBINE, SL, aggregate, float_grid
from webapp.functions.common import (
    agg_key, evaluate, format_path_expressions, lcm, normalize, rows, safe_div, safe_mul,
    safe_sum,
)
from webapp.functions.registry import Traits, render_function
from webapp.render.errors import InputParameterError
from webapp.functions.registry import Param as P
from webapp.render.series import PackedSeries, TimeSeries, parse_tags, materialize_all
from webapp.storage.packed import Block, PackedValues


def _divide(requestContext: dict, dividend: TimeSeries, divisor: TimeSeries) -> TimeSeries:
    both = (dividend, divisor)
    step = reduce(lcm, [s.step for s in both])
    for s in both:
        s.consolidate(step // s.step)
    start = min(s.start for s in both)
    end = max(s.end for s in both)
    end -= (end - start) % step
    values = [safe_div(a, b) for a, b in rows(both)]
    return TimeSeries('divideSeries(%s,%s)' % (dividend.name, divisor.name), start, end, step,
                      values, xFilesFactor=requestContext.get('xFilesFactor'))


@render_function('divideSeries', COMBINE, [P('dividendSeriesList', 'seriesList', required=True),
                                           P('divisorSeries', 'seriesList', required=True)])
def divideSeries(requestContext: dict, dividendSeriesList: list,
                 divisorSeries: list) -> list[TimeSeries]:
    """Divide each series by one divisor series, point by point.

    Parameters:

    - ``dividendSeriesList``: the series to divide.
    - ``divisorSeries``: exactly one series (more is a 400); every dividend is divided by
      it.

    The two are brought to a common step and range first. A point is None where either value
    is None or the divisor is 0. When the divisor matches nothing, each dividend becomes all
    None and is named ``divideSeries(name,MISSING)``. Named
    ``divideSeries(dividend,divisor)``.

    Example:

    .. code-block:: none

      &target=divideSeries(app.errors,app.requests)
    """
    if len(divisorSeries) == 0:
        for series in dividendSeriesList:
            series.name = 'divideSeries(%s,MISSING)' % series.name
            series.pathExpression = series.name
            series[:] = [None] * len(series)
        return dividendSeriesList
    if len(divisorSeries) > 1:
        raise InputParameterError('divideSeries second argument must reference exactly 1 '
                                  'series (got %d)' % len(divisorSeries))
    return [_divide(requestContext, s, divisorSeries[0]) for s in dividendSeriesList]


@render_function('divideSeriesLists', COMBINE, [
    P('dividendSeriesList', 'seriesList', required=True),
    P('divisorSeriesList', 'seriesList', required=True)])
def divideSeriesLists(requestContext: dict, dividendSeriesList: list,
                      divisorSeriesList: list) -> list[TimeSeries]:
    """Divide the series of one list by those of another, pair by pair.

    Parameters:

    - ``dividendSeriesList``: the series to divide.
    - ``divisorSeriesList``: as many series (otherwise a 400); the first divides the
      first...

    Pairs are matched by position, so both lists should be sorted the same way. A point is
    None where either value is None or the divisor is 0. Named
    ``divideSeries(dividend,divisor)``.

    Example:

    .. code-block:: none

      &target=divideSeriesLists(servers.*.errors,servers.*.requests)
    """
    if len(dividendSeriesList) != len(divisorSeriesList):
        raise InputParameterError(
            'dividendSeriesList and divisorSeriesList argument must have equal length')
    return [_divide(requestContext, a, b) for a, b in zip(dividendSeriesList, divisorSeriesList,
                                                              strict=True)]


def _percent_series(requestContext: dict, name: str, series: TimeSeries,
                    total: Any) -> TimeSeries:
    _, start, end, step = normalize([(series, total)])
    values = [safe_mul(safe_div(a, b), 100.0) for a, b in rows((series, total))]
    return TimeSeries(name, start, end, step, values,
                      xFilesFactor=requestContext.get('xFilesFactor'))


def _sum_group(requestContext: dict, members: list) -> TimeSeries:
    if len(members) == 1:
        return members[0]
    _, start, end, step = normalize([members])
    return TimeSeries('sumSeries(%s)' % format_path_expressions(members), start, end, step,
                      [safe_sum(row) for row in rows(members)],
                      xFilesFactor=requestContext.get('xFilesFactor'))


def _group_by(seriesList: list, nodes: tuple) -> dict[str, list]:
    groups: dict[str, list] = {}
    if not all(type(n) is int for n in nodes):
        for series in seriesList:
            groups.setdefault(agg_key(series, nodes), []).append(series)
        return groups
    for series in seriesList:     # integer nodes of plain names: agg_key without a call
        name = series.name
        key = None
        if name[-1:] != ')':
            parts = name.split(';', 2)[0].split('.')
            try:
                key = '.'.join([parts[n] for n in nodes])
            except IndexError:
                pass
        groups.setdefault(agg_key(series, nodes) if key is None else key, []).append(series)
    return groups


def _as_percent_nodes(requestContext: dict, seriesList: list, total: Any,
                      nodes: tuple) -> list[TimeSeries]:
    xff = requestContext.get('xFilesFactor')
    groups = _group_by(seriesList, nodes)
    keys = list(groups)
    if total is None:
        totals = {key: _sum_group(requestContext, members) for key, members in groups.items()}
    elif isinstance(total, list):
        total_groups = _group_by(total, nodes)
        keys += [k for k in total_groups if k not in keys]
        totals = {k: _sum_group(requestContext, m) for k, m in total_groups.items()}
    else:
        raise InputParameterError('total must be None or a seriesList')
    results = []
    for key in keys:
        if key not in groups:
            total_series = totals[key]
            results.append(TimeSeries('asPercent(MISSING,%s)' % total_series.name,
                                      total_series.start, total_series.end, total_series.step,
                                      [None] * len(list(total_series)), xFilesFactor=xff))
            continue
        for series in groups[key]:
            if key not in totals:
                results.append(TimeSeries('asPercent(%s,MISSING)' % series.name, series.start,
                                          series.end, series.step,
                                          [None] * len(list(series)), xFilesFactor=xff))
            else:
                name = 'asPercent(%s,%s)' % (series.name, totals[key].name)
                results.append(_percent_series(requestContext, name, series, totals[key]))
    return results


@render_function('asPercent', COMBINE, [SL, P('total', 'any'),
                                        P('nodes', 'nodeOrTag', multiple=True)],
                 aliases=('pct',), aggregator=True, traits=Traits(packed_input=True))
def asPercent(requestContext: dict, seriesList: list, total: Any = None,
              *nodes: Any) -> list[TimeSeries]:
    """Each series as a percentage of a total.

    Parameters:

    - ``seriesList``: the series to express as parts.
    - ``total``: optional; without it, the point-by-point sum of ``seriesList``; a number is
      a fixed total; one series is a total for all; a list as long as ``seriesList`` is
      paired with it by sorted names.
    - ``nodes``: optional node positions (or tag names): series and totals are grouped by
      them and each series is taken as a percentage of its own group's (summed) total; a
      group without a total or without series gives an all-None series named with
      ``MISSING``.

    A point is None where the value or the total is None, or the total is 0. Named
    ``asPercent(name,total)``. ``pct`` is a short name for the same function.

    Example:

    .. code-block:: none

      &target=asPercent(servers.web01.cpu.*)
      &target=asPercent(servers.*.disk.used,servers.*.disk.total,1)
      &target=pct(app.errors,app.requests)
    """
    if not seriesList:
        return []
    normalize([seriesList])
    if nodes or not (isinstance(total, list) and len(total) == 1 and len(seriesList) > 1):
        materialize_all(seriesList)    # packed rows only against one total series
    if nodes:
        return _as_percent_nodes(requestContext, seriesList, total, nodes)
    xff = requestContext.get('xFilesFactor')
    if total is None:
        total_values: Any = [safe_sum(row) for row in rows(seriesList)]
        total_text = 'sumSeries(%s)' % format_path_expressions(seriesList)
    elif isinstance(total, list):
        if len(total) not in (1, len(seriesList)):
            raise InputParameterError(
                'asPercent second argument must be missing, a single digit, reference exactly '
                '1 series or reference the same number of series as the first argument')
        if len(total) == len(seriesList):
            pairs = zip(sorted(seriesList, key=lambda s: s.name),
                        sorted(total, key=lambda s: s.name), strict=True)
            return [_percent_series(requestContext, 'asPercent(%s,%s)' % (a.name, b.name), a, b)
                    for a, b in pairs]
        normalize([seriesList, total])
        total_values = total[0]
        total_text = total_values.name
    else:
        total_values = [total] * len(seriesList[0])
        total_text = str(total)
    results = []
    percents = None if total is not None and not isinstance(total, list) else \
        _array_percents(seriesList, total_values)
    for i, series in enumerate(seriesList):
        name = 'asPercent(%s,%s)' % (series.name, total_text)
        if percents is not None:
            results.append(PackedSeries(name, series.start, series.end, series.step,
                                        PackedValues(percents, i), xFilesFactor=xff))
            continue
        # safe_mul(safe_div(v, t), 100.0) inlined: the same floats, without two calls
        values = [None if v is None or t is None or t == 0 else v / t * 100.0
                  for v, t in rows((series, total_values))]
        results.append(TimeSeries(name, series.start, series.end, series.step, values,
                                  xFilesFactor=xff))
    return results


def _array_percents(seriesList: list, total: Any) -> Optional[Block]:
    """``v / t * 100.0`` (no value where v or t is None or t is 0) of each series against
    ``total`` with numpy, as a block of packed rows (the evaluator turns them into lists
    unless the JSON writer takes them): the same IEEE operations, so the same floats.
    The series may be packed rows (``packed_input``). None (use the Python loop, the
    series materialised) without numpy, for lengths that differ or values other than
    floats and None (a stored NaN included)."""
    from webapp.storage import packed
    np = packed.np
    if not packed.ENABLED:
        return None
    rows_known = packed_rows.packed_grid(seriesList)
    if rows_known is not None:
        arrays = float_grid([list(total)])
        if arrays is None or arrays[0].shape[1] != rows_known[0].shape[1]:
            materialize_all(seriesList)
            return None
        (values, known), (totals, total_known) = rows_known, arrays
        totals, total_known = totals[0], total_known[0]
    else:
        lists = [list(series) for series in seriesList] + [list(total)]
        if len({len(values) for values in lists}) != 1:
            return None
        arrays = float_grid(lists)
        del lists
        if arrays is None:
            return None
        grid, known_all = arrays
        values, totals, known, total_known = grid[:-1], grid[-1], known_all[:-1], known_all[-1]
    ok = known & total_known & (totals != 0)
    with np.errstate(all='ignore'):
        out = values / totals * 100.0
    return Block.computed(out, ok)


@render_function('weightedAverage', COMBINE, [
    P('seriesListAvg', 'seriesList', required=True),
    P('seriesListWeight', 'seriesList', required=True),
    P('nodes', 'nodeOrTag', multiple=True)])
def weightedAverage(requestContext: dict, seriesListAvg: list, seriesListWeight: list,
                    *nodes: Any) -> list[TimeSeries]:
    """The average of one list weighted by the values of another, point by point.

    Parameters:

    - ``seriesListAvg``: the series to average.
    - ``seriesListWeight``: the weights, as many series as ``seriesListAvg`` (otherwise a
      400).
    - ``nodes``: node positions (or tag names) that pair each value series with its weight
      series: the two must agree on them.

    At each point the result is the sum of value x weight over the pairs where both are
    known, divided by the sum of the known weights; series without a partner are left out of
    the products; a point where the weights add up to 0 (or none is known) is None. Named
    ``weightedAverage(values, weights, nodes)``.

    Example:

    .. code-block:: none

      &target=weightedAverage(servers.*.response_time,servers.*.requests,1)
    """
    if len(seriesListAvg) != len(seriesListWeight):
        raise InputParameterError(
            'weightedAverage must receive the same number of series for seriesListAvg and '
            'seriesListWeight but received respectively %d and %d'
            % (len(seriesListAvg), len(seriesListWeight)))
    pairs: dict[str, dict] = {}
    for avg, weight in zip(seriesListAvg, seriesListWeight, strict=True):
        pairs.setdefault(agg_key(avg, nodes), {})['avg'] = avg
        pairs.setdefault(agg_key(weight, nodes), {})['weight'] = weight
    xff = requestContext.get('xFilesFactor')
    products = []
    for pair in pairs.values():
        if 'avg' not in pair or 'weight' not in pair:
            continue
        avg, weight = pair['avg'], pair['weight']
        values = [safe_mul(a, w) for a, w in rows((avg, weight))]
        products.append(TimeSeries('product(%s,%s)' % (weight.name, avg.name), avg.start,
                                   avg.end, avg.step, values, xFilesFactor=xff))
    if not products:
        return []
    sum_products = aggregate(requestContext, [products], 'sum')[0]
    sum_weights = aggregate(requestContext, [seriesListWeight], 'sum')[0]
    values = [safe_div(a, b) for a, b in rows((sum_products, sum_weights))]
    name = 'weightedAverage(%s, %s, %s)' % (
        ','.join(sorted(set(s.pathExpression for s in seriesListAvg))),
        ','.join(sorted(set(s.pathExpression for s in seriesListWeight))),
        ','.join(map(str, nodes)))
    return [TimeSeries(name, sum_products.start, sum_products.end, sum_products.step, values,
                       xFilesFactor=xff)]


def _apply_callback(requestContext: dict, callback: str, members: list) -> TimeSeries:
    if callback in RENDER_FUNCTIONS:
        return RENDER_FUNCTIONS.get(callback).func(requestContext, members)[0]
    return aggregate(requestContext, members, callback)[0]


@render_function('groupByNode', COMBINE, [SL, P('nodeNum', 'nodeOrTag', required=True),
                                          P('callback', 'aggOrSeriesFunc', default='average')],
                 traits=Traits(fused_group=('callback', 'nodeNum')))
def groupByNode(requestContext: dict, seriesList: list, nodeNum: Any,
                callback: str = 'average') -> list[TimeSeries]:
    """Group the series by one node of their path (or one tag) and combine each group.

    Parameters:

    - ``seriesList``: the series to group.
    - ``nodeNum``: the node position (0 is the first, -1 the last) or tag name the groups
      are made by.
    - ``callback``: how each group is combined: an aggregation (``average`` by default,
      ``sum``, ``max``, ``min``, ``median``, ``count``...) or the name of a function taking
      a series list, like ``sumSeries``.

    Each group becomes one series, named after the node's value; the aggregation leaves None
    values out of each point, as ``aggregate`` does.

    Example:

    .. code-block:: none

      &target=groupByNode(dc.*.servers.*.cpu.user,1,"sum")

    gives one series per data centre (``ams``, ``fra``...), each the sum of its servers.
    """
    return groupByNodes(requestContext, seriesList, callback, nodeNum)


@render_function('groupByNodes', COMBINE, [SL, P('callback', 'aggOrSeriesFunc', required=True),
                                           P('nodes', 'nodeOrTag', multiple=True)],
                 traits=Traits(fused_group=('callback', 'nodes')))
def groupByNodes(requestContext: dict, seriesList: list, callback: str,
                 *nodes: Any) -> list[TimeSeries]:
    """Group the series by several nodes of their path (or tags) and combine each group.

    Parameters:

    - ``seriesList``: the series to group.
    - ``callback``: how each group is combined: an aggregation (``sum``, ``average``,
      ``max``, ``min``, ``median``...) or the name of a function taking a series list.
    - ``nodes``: the node positions (0 is the first, -1 the last) or tag names whose values
      together make a group.

    Each group becomes one series named after those values joined with dots; the aggregation
    leaves None values out of each point.

    Example:

    .. code-block:: none

      &target=groupByNodes(dc.*.servers.*.disk.*.used,"sum",1,5)

    gives ``ams.sda``, ``ams.sdb``, ``fra.sda``...: per data centre and disk, the sum over
    servers.
    """
    results = []
    for key, members in _group_by(seriesList, nodes).items():
        result = _apply_callback(requestContext, callback, members)
        result.name = key
        results.append(result)
    return results


@render_function('groupByTags', COMBINE, [SL, P('callback', 'aggOrSeriesFunc', required=True),
                                          P('tags', 'tag', required=True, multiple=True)])
def groupByTags(requestContext: dict, seriesList: list, callback: str,
                *tags: str) -> list[TimeSeries]:
    """Group tagged series by the values of some tags and combine each group.

    Parameters:

    - ``seriesList``: the series to group, usually from ``seriesByTag``.
    - ``callback``: how each group is combined: an aggregation (``sum``, ``average``,
      ``max``...) or the name of a function taking a series list.
    - ``tags``: one or more tag names; series with the same values for them form a group.

    Each group becomes a tagged series named ``name;tag1=value1;tag2=value2``; its ``name``
    is the series' common name when they share one (or when ``name`` is among the tags),
    otherwise the callback's name. None values are left out of each point.

    Example:

    .. code-block:: none

      &target=groupByTags(seriesByTag("name=cpu.user"),"average","dc")
    """
    if not tags:
        raise InputParameterError('groupByTags(): no tags specified')
    if 'name' not in tags:
        names = {series.tags['name'] for series in seriesList}
        common = names.pop() if len(names) == 1 else callback
    groups: dict[str, list] = {}
    for series in seriesList:
        if 'name' not in tags:
            parts = [common] + sorted('%s=%s' % (t, series.tags.get(t, '')) for t in tags)
        else:
            parts = [series.tags['name']] + sorted(
                '%s=%s' % (t, series.tags.get(t, '')) for t in tags if t != 'name')
        groups.setdefault(';'.join(parts), []).append(series)
    results = []
    for key, members in groups.items():
        result = _apply_callback(requestContext, callback, members)
        result.name = key
        result.pathExpression = key
        result.tags = parse_tags(key)
        results.append(result)
    return results


@render_function('mapSeries', COMBINE, [SL, P('mapNodes', 'nodeOrTag', required=True,
                                                multiple=True)], aliases=('map',))
def mapSeries(requestContext: dict, seriesList: list, *mapNodes: Any) -> list[list]:
    """Split a series list into several lists, one per value of some nodes.

    Parameters:

    - ``seriesList``: the series to split.
    - ``mapNodes``: node positions (or tag names); series sharing their values end up in the
      same list.

    The result is a list of lists, which only ``reduceSeries`` takes: together they apply a
    function to each group, e.g. to divide one metric of a host by another metric of the
    same host. ``map`` is a short name for the same function.

    Example:

    .. code-block:: none

      &target=reduceSeries(mapSeries(servers.*.disk.{used,total},1),"asPercent",3,"used","total")
      &target=reduce(map(servers.*.disk.{used,total},1),"asPercent",3,"used","total")
    """
    return list(_group_by(seriesList, mapNodes).values())


@render_function('reduceSeries', COMBINE, [
    P('seriesLists', 'seriesLists', required=True),
    P('reduceFunction', 'string', required=True), P('reduceNode', 'node', required=True),
    P('reduceMatchers', 'string', required=True, multiple=True)], aliases=('reduce',))
def reduceSeries(requestContext: dict, seriesLists: list, reduceFunction: str,
                 reduceNode: int, *reduceMatchers: str) -> list[TimeSeries]:
    """Apply a function to matching series within each group made by ``mapSeries``.

    Parameters:

    - ``seriesLists``: the groups, as ``mapSeries`` returns them.
    - ``reduceFunction``: the name of a function taking that many series in order
      (``asPercent``, ``divideSeries``, ``diffSeries``...).
    - ``reduceNode``: the node position whose value tells the series of a group apart.
    - ``reduceMatchers``: the values of that node, in the order the function wants its
      arguments.

    In each group, the series whose node ``reduceNode`` equals each matcher are passed to
    the function in the matchers' order, so every group needs one series per matcher. Each
    result is named
    ``<group>.reduce.<reduceFunction>``. ``reduce`` is a short name for the same function.

    Example:

    .. code-block:: none

      &target=reduceSeries(mapSeries(servers.*.disk.{used,total},1),"asPercent",3,"used","total")
      &target=reduce(map(servers.*.disk.{used,total},1),"asPercent",3,"used","total")

    gives ``servers.web01.disk.reduce.asPercent``... one per host.
    """
    slots: dict[str, list] = {}
    for seriesList in seriesLists:
        for series in seriesList:
            nodes = series.name.split('.')
            node = nodes[reduceNode]
            if node in reduceMatchers:
                key = '.'.join(nodes[0:reduceNode]) + '.reduce.' + reduceFunction
                slot = slots.setdefault(key, [None] * len(reduceMatchers))
                slot[reduceMatchers.index(node)] = series
    func = RENDER_FUNCTIONS.get(reduceFunction).func
    results = []
    for key, members in slots.items():
        result = func(requestContext, *[[m] for m in members])[0]
        result.name = key
        results.append(result)
    return results


@render_function('applyByNode', COMBINE, [SL, P('nodeNum', 'node', required=True),
                                          P('templateFunction', 'string', required=True),
                                          P('newName', 'string')])
def applyByNode(requestContext: dict, seriesList: list, nodeNum: int, templateFunction: str,
                newName: Optional[str] = None) -> list[TimeSeries]:
    """Run a template query once for each distinct path prefix of the series.

    Parameters:

    - ``seriesList``: the series whose prefixes are taken.
    - ``nodeNum``: the last node (0 is the first) of each prefix: the prefix is the path up
      to and including it.
    - ``templateFunction``: a target in quotes in which every ``%`` is replaced by the
      prefix; it is evaluated once per prefix.
    - ``newName``: optional name of the results, ``%`` again replaced by the prefix.

    Prefixes are taken in sorted order; the results are whatever each template returns.

    Example:

    .. code-block:: none

      &target=applyByNode(servers.*.disk.used,1,"asPercent(%.disk.used,%.disk.total)","%.disk_pct")
    """
    prefixes = {'.'.join(s.name.split('.')[:nodeNum + 1]) for s in seriesList}
    if not seriesList:
        return []
    last = seriesList[-1]
    results = []
    for prefix in sorted(prefixes):
        for result in evaluate(requestContext, templateFunction.replace('%', prefix)):
            if newName:
                result.name = newName.replace('%', prefix)
            result.pathExpression = prefix
            result.start = last.start
            result.end = last.end
            results.append(result)
    return results
