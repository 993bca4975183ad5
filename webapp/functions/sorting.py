"""Sorting group: order a series list by name or by an aggregate of its values."""

from __future__ import annotations

import re

from webapp.functions import packed_rows
from webapp.functions.common import get_agg_func, key_func, safe_max, safe_min
from webapp.functions.registry import Traits, render_function
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

SORTING = 'Sorting'
SL = P('seriesList', 'seriesList', required=True)


@render_function('sortBy', SORTING, [SL, P('func', 'aggFunc', default='average'),
                                     P('reverse', 'boolean', default=False)])
def sortBy(requestContext: dict, seriesList: list, func: str = 'average',
           reverse: bool = False) -> list[TimeSeries]:
    """Sort ascending by the ``func`` aggregate (descending with reverse)."""
    seriesList.sort(key=key_func(get_agg_func(func)), reverse=reverse)
    return seriesList


@render_function('sortByName', SORTING, [SL, P('natural', 'boolean', default=False),
                                         P('reverse', 'boolean', default=False)])
def sortByName(requestContext: dict, seriesList: list, natural: bool = False,
               reverse: bool = False) -> list[TimeSeries]:
    """Sort by name; ``natural`` compares digit runs numerically (host2 < host10)."""
    if natural:
        def key(series: TimeSeries) -> str:
            return re.sub(r'(\d+)', lambda m: '%010d' % int(m.group(0)), series.name)
    else:
        def key(series: TimeSeries) -> str:
            return series.name
    seriesList.sort(key=key, reverse=reverse)
    return seriesList


@render_function('sortByTotal', SORTING, [SL])
def sortByTotal(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Sort by sum of values, largest first."""
    return sortBy(requestContext, seriesList, 'sum', reverse=True)


@render_function('sortByMaxima', SORTING, [SL], traits=Traits(packed_input=True))
def sortByMaxima(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Sort by maximum value, largest first."""
    if not packed_rows.sort_by_max(seriesList):
        seriesList.sort(key=key_func(safe_max), reverse=True)
    return seriesList




@render_function('sortByMinima', SORTING, [SL])
def sortByMinima(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Sort by minimum value, smallest first, dropping series whose maximum is not > 0."""
    kept = [s for s in seriesList if safe_max(s, default=0) > 0]
    kept.sort(key=key_func(safe_min))
    return kept
