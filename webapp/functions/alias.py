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
    """Rename every series to ``newName``."""
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
    """Rename with a regex substitution (Python ``re.sub``; ``\\1`` back-references work)."""
    if isinstance(seriesList, TimeSeries):
        seriesList.name = re.sub(search, replace, seriesList.name)
        return seriesList
    for series in seriesList:
        series.name = re.sub(search, replace, series.name)
    return seriesList


@render_function('aliasByNode', ALIAS, [SL, P('nodes', 'nodeOrTag', required=True,
                                              multiple=True)], traits=Traits(keeps_values=True))
def aliasByNode(requestContext: dict, seriesList: list, *nodes: Any) -> list[TimeSeries]:
    """Rename to the given path nodes (0-based, negative from the end) or tag values."""
    for series in seriesList:
        series.name = agg_key(series, nodes)
    return seriesList


@render_function('aliasByTags', ALIAS, [SL, P('tags', 'nodeOrTag', required=True,
                                              multiple=True)])
def aliasByTags(requestContext: dict, seriesList: list, *tags: Any) -> list[TimeSeries]:
    """Rename to the values of the given tags (or nodes), dot-joined."""
    return aliasByNode(requestContext, seriesList, *tags)


@render_function('aliasByMetric', ALIAS, [SL])
def aliasByMetric(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Rename to the last node of the metric path."""
    from webapp.functions.special import substr
    return substr(requestContext, seriesList, -1, 0)


@render_function('aliasQuery', ALIAS, [SL, P('search', 'string', required=True),
                                       P('replace', 'string', required=True),
                                       P('newName', 'string', required=True)])
def aliasQuery(requestContext: dict, seriesList: list, search: str, replace: str,
               newName: str) -> list[TimeSeries]:
    """Rename with ``newName % value``, value being the last value of a derived query."""
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
    """Append aggregate values (avg, max, last, ...) to each name; 'si'/'binary' formats units."""
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
    """Upper-case the name, or only the characters at the given positions."""
    return _change_case(seriesList, pos, str.upper)


@render_function('lower', ALIAS, [SL, P('pos', 'integer', multiple=True)])
def toLowerCase(requestContext: dict, seriesList: list, *pos: int) -> list[TimeSeries]:
    """Lower-case the name, or only the characters at the given positions."""
    return _change_case(seriesList, pos, str.lower)
