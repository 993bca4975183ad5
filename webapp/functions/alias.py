"""Alias group: functions that only change series names."""

from __future__ import annotations

import re
from typing import Any

from webapp.functions.common import agg_key, evaluate, format_units, get_agg_func, safe_last
from webapp.functions.registry import (
    AGG_FUNC_ALIASES, AGG_FUNCS, InputParameterError, Traits, render_function,
)
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

ALIAS = 'Alias'
SL = P('seriesList', 'seriesList', required=True)


@render_function('alias', ALIAS, [SL, P('newName', 'string', required=True)],
                 traits=Traits(keeps_values=True))
def alias(requestContext: dict, seriesList: Any, newName: str) -> Any:
    """Give every series of the list the same new display name.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``newName``: the text shown in legends and in the ``target`` field of json answers.

    Only the name changes; values, step and tags stay as they were. Giving several series
    one name makes them hard to tell apart in a legend: for one name per series see
    ``aliasByNode``, ``aliasByTags`` or ``aliasSub``.

    Example:

    .. code-block:: none

      &target=alias(servers.web01.cpu.user,"web01 user CPU")
    """
    if isinstance(seriesList, TimeSeries):
        seriesList.name = newName
        return seriesList
    for series in seriesList:
        series.name = newName
    return seriesList


@render_function('aliasSub', ALIAS, [SL, P('search', 'string', required=True),
                                     P('replace', 'string', required=True)],
                 traits=Traits(keeps_values=True))
def aliasSub(requestContext: dict, seriesList: Any, search: str, replace: str) -> Any:
    r"""Rename each series by a regular expression substitution on its current name.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``search``: a Python regular expression looked for in the name.
    - ``replace``: what each match becomes; ``\1``, ``\2`` ... insert the groups of the
      match.

    Every match in the name is replaced (as Python's ``re.sub`` does); a name without a
    match keeps its name. Values are untouched.

    Example:

    .. code-block:: none

      &target=aliasSub(servers.*.cpu.user,"^servers\.([^.]+)\.cpu\..*","\1")

    names each series after its host (``web01``, ``web02``...).
    """
    if isinstance(seriesList, TimeSeries):
        seriesList.name = re.sub(search, replace, seriesList.name)
        return seriesList
    for series in seriesList:
        series.name = re.sub(search, replace, series.name)
    return seriesList


@render_function('aliasByNode', ALIAS, [SL, P('nodes', 'nodeOrTag', required=True,
                                              multiple=True)], traits=Traits(keeps_values=True))
def aliasByNode(requestContext: dict, seriesList: list, *nodes: Any) -> list[TimeSeries]:
    """Rename each series to some of the nodes of its metric path, joined with dots.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``nodes``: one or more positions in the path, counted from 0 at the left and from -1
      at the right; a string instead of a number takes the value of that tag.

    The path used is the innermost metric name, so ``aliasByNode(sumSeries(a.b.*),1)`` works
    on ``a.b.*``. Values are untouched.

    Example:

    .. code-block:: none

      &target=aliasByNode(servers.*.cpu.user,1)
      &target=aliasByNode(servers.*.disk.*.free,1,-2)

    The first names each series ``web01``, ``web02``...; the second ``web01.sda``...
    """
    for series in seriesList:
        series.name = agg_key(series, nodes)
    return seriesList


@render_function('aliasByTags', ALIAS, [SL, P('tags', 'nodeOrTag', required=True,
                                              multiple=True)])
def aliasByTags(requestContext: dict, seriesList: list, *tags: Any) -> list[TimeSeries]:
    """Rename each series to the values of some of its tags, joined with dots.

    Parameters:

    - ``seriesList``: the series to rename, usually from ``seriesByTag``.
    - ``tags``: the tag names whose values make the new name (``name`` is the metric name);
      a number takes that node of the path instead, as in ``aliasByNode``.

    Values are untouched; a tag the series does not have contributes an empty part.

    Example:

    .. code-block:: none

      &target=aliasByTags(seriesByTag("name=cpu.user","dc=ams"),"host","dc")

    names each series ``web01.ams``, ``web02.ams``...
    """
    return aliasByNode(requestContext, seriesList, *tags)


@render_function('aliasByMetric', ALIAS, [SL])
def aliasByMetric(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Rename each series to the last node of its metric path.

    Parameters:

    - ``seriesList``: the series to rename.

    Function calls wrapped around the metric are dropped from the name too, so
    ``aliasByMetric(scale(servers.web01.load,2))`` is named ``load``. Same as
    ``substr(seriesList,-1)``. Values are untouched.

    Example:

    .. code-block:: none

      &target=aliasByMetric(servers.web01.disk.*)

    names the series ``read_bytes``, ``write_bytes``...
    """
    from webapp.functions.special import substr
    return substr(requestContext, seriesList, -1, 0)


@render_function('aliasQuery', ALIAS, [SL, P('search', 'string', required=True),
                                       P('replace', 'string', required=True),
                                       P('newName', 'string', required=True)])
def aliasQuery(requestContext: dict, seriesList: list, search: str, replace: str,
               newName: str) -> list[TimeSeries]:
    r"""Rename each series with a value read from another query derived from its name.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``search``: a regular expression looked for in each series' name.
    - ``replace``: its replacement (``\1`` for groups): the result is a target that is
      evaluated for each series.
    - ``newName``: a printf-style format (``%d``, ``%s``, ``%.1f``) given the last non-null
      value of the first series that query returns.

    A query that finds nothing, or whose last value is None, is a 400 error naming it.

    Example:

    .. code-block:: none

      &target=aliasQuery(hosts.*.load,"hosts\.(\w+)\.load","hosts.\1.cores","%d cores")
    """
    for series in seriesList:
        query = re.sub(search, replace, series.name)
        found = evaluate(requestContext, query)
        if not found:
            raise InputParameterError('No series found with query: ' + query)
        current = safe_last(found[0])
        if current is None:
            raise InputParameterError('Cannot get last value of series: ' + found[0].name)
        series.name = newName % current
    return seriesList


LEGEND_OPTIONS = AGG_FUNCS + AGG_FUNC_ALIASES + [
    f + 'Series' for f in AGG_FUNCS + AGG_FUNC_ALIASES] + ['si', 'binary']


@render_function('legendValue', ALIAS, [SL, P('valuesTypes', 'string', multiple=True,
                                              options=LEGEND_OPTIONS)])
def legendValue(requestContext: dict, seriesList: list, *valueTypes: str) -> list[TimeSeries]:
    """Append summary values of each series to its name, for the graph legend.

    Parameters:

    - ``seriesList``: the series to label.
    - ``valuesTypes``: one or more of ``avg``, ``total``, ``min``, ``max``, ``last`` (and
      the other aggregation names); a last argument ``si`` or ``binary`` formats the numbers
      with unit prefixes (K, M, G or Ki, Mi, Gi) in aligned columns.

    Each aggregate skips None values; an aggregate over no values shows ``None``. The values
    are those of the whole requested range, before any consolidation for the picture.

    Example:

    .. code-block:: none

      &target=legendValue(servers.web01.net.bytes_in,"avg","max","si")
    """
    system = None
    if valueTypes and valueTypes[-1] in ('si', 'binary'):
        system = valueTypes[-1]
        valueTypes = valueTypes[:-1]
    for value_type in valueTypes:
        try:
            func = get_agg_func(value_type)
        except InputParameterError:
            def func(series: Any) -> str:
                return '(?)'
        for series in seriesList:
            value = func(series)
            if system is None:
                series.name += ' (%s: %s)' % (value_type, value)
                continue
            if isinstance(value, str) or value is None:
                formatted = value
            else:
                formatted = '%.2f%s' % format_units(value, system=system)
            series.name = '%-20s%-5s%-10s' % (series.name, value_type, formatted)
    return seriesList


def _change_case(seriesList: list, positions: tuple, change: Any) -> list[TimeSeries]:
    for series in seriesList:
        if not positions:
            series.name = change(series.name)
            continue
        chars = list(series.name)
        for i in positions:
            try:
                chars[i] = change(chars[i])
            except IndexError:
                pass
        series.name = ''.join(chars)
    return seriesList


@render_function('upper', ALIAS, [SL, P('pos', 'integer', multiple=True)])
def toUpperCase(requestContext: dict, seriesList: list, *pos: int) -> list[TimeSeries]:
    """Turn series names to upper case, all of it or only some characters.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``pos``: optional positions (0 is the first character, -1 the last) of the characters
      to change; without any the whole name changes. Positions past the end are ignored.

    Values are untouched.

    Example:

    .. code-block:: none

      &target=upper(servers.web01.cpu)
      &target=upper(servers.web01.cpu,0)

    The first is named ``SERVERS.WEB01.CPU``, the second ``Servers.web01.cpu``.
    """
    return _change_case(seriesList, pos, str.upper)


@render_function('lower', ALIAS, [SL, P('pos', 'integer', multiple=True)])
def toLowerCase(requestContext: dict, seriesList: list, *pos: int) -> list[TimeSeries]:
    """Turn series names to lower case, all of it or only some characters.

    Parameters:

    - ``seriesList``: the series to rename.
    - ``pos``: optional positions (0 is the first character, -1 the last) of the characters
      to change; without any the whole name changes. Positions past the end are ignored.

    Values are untouched.

    Example:

    .. code-block:: none

      &target=lower(Servers.WEB01.CPU)
      &target=lower(Servers.web01.cpu,0)

    The first is named ``servers.web01.cpu``, the second ``servers.web01.cpu`` as well.
    """
    return _change_case(seriesList, pos, str.lower)
