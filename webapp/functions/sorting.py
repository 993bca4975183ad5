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
    """Order the series by an aggregate of their values.

    Parameters:

    - ``seriesList``: the series to order.
    - ``func``: the aggregate: ``average`` (default), ``max``, ``min``, ``sum``, ``last``,
      ``median``...
    - ``reverse``: false (default) sorts lowest first, true highest first.

    Aggregates skip None values; a series without values ranks below every number. Series
    are returned unchanged.

    Example:

    .. code-block:: none

      &target=sortBy(servers.*.cpu.user,"max",true)
    """
    seriesList.sort(key=key_func(get_agg_func(func)), reverse=reverse)
    return seriesList


@render_function('sortByName', SORTING, [SL, P('natural', 'boolean', default=False),
                                         P('reverse', 'boolean', default=False)])
def sortByName(requestContext: dict, seriesList: list, natural: bool = False,
               reverse: bool = False) -> list[TimeSeries]:
    """Order the series alphabetically by name.

    Parameters:

    - ``seriesList``: the series to order.
    - ``natural``: when true, numbers inside names compare by value (``host2`` before
      ``host10``); by default names compare character by character.
    - ``reverse``: when true, the order is reversed.

    Series are returned unchanged.

    Example:

    .. code-block:: none

      &target=sortByName(servers.*.cpu.user,true)
    """
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
    """Order the series by the sum of their values, largest first.

    Parameters:

    - ``seriesList``: the series to order.

    Same as ``sortBy(seriesList,"sum",true)``: None values are left out of each sum; a
    series without values comes last. Series are returned unchanged.

    Example:

    .. code-block:: none

      &target=sortByTotal(servers.*.requests)
    """
    return sortBy(requestContext, seriesList, 'sum', reverse=True)


@render_function('sortByMaxima', SORTING, [SL], traits=Traits(packed_input=True))
def sortByMaxima(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Order the series by their highest value, largest first.

    Parameters:

    - ``seriesList``: the series to order.

    None values are left out; a series without values comes last. Series are returned
    unchanged. Useful to put the busiest series at the top of a stacked graph or legend.

    Example:

    .. code-block:: none

      &target=sortByMaxima(servers.*.cpu.user)
    """
    if not packed_rows.sort_by_max(seriesList):
        seriesList.sort(key=key_func(safe_max), reverse=True)
    return seriesList




@render_function('sortByMinima', SORTING, [SL])
def sortByMinima(requestContext: dict, seriesList: list) -> list[TimeSeries]:
    """Order the series by their lowest value, smallest first.

    Parameters:

    - ``seriesList``: the series to order.

    Series whose highest value is not above 0 (all zero, negative or without values) are
    dropped; None values are left out of the minimum. Series are returned unchanged.

    Example:

    .. code-block:: none

      &target=sortByMinima(servers.*.disk.free)
    """
    kept = [s for s in seriesList if safe_max(s, default=0) > 0]
    kept.sort(key=key_func(safe_min))
    return kept
