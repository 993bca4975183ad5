"""Pie functions: reduce one series to the single value a pie slice shows."""

from __future__ import annotations

from typing import Any

from webapp.functions.common import safe_div, safe_len, safe_max, safe_min, safe_sum
from webapp.functions.registry import render_function
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

SERIES = [P('series', 'series', required=True)]


@render_function('average', 'Pie', SERIES, pie=True)
def pieAverage(requestContext: dict, series: TimeSeries) -> Any:
    """For pie charts: each slice's size is the average of its series' values.

    Parameters:

    - ``series``: the series whose values are averaged (None values are left out).

    Chosen with ``graphType=pie&pieMode=average`` (the default mode).

    Example:

    .. code-block:: none

      &target=servers.*.requests&graphType=pie&pieMode=average
    """
    return safe_div(safe_sum(series), safe_len(series))


@render_function('maximum', 'Pie', SERIES, pie=True)
def pieMaximum(requestContext: dict, series: TimeSeries) -> Any:
    """For pie charts: each slice's size is the highest value of its series.

    Parameters:

    - ``series``: the series whose values are looked at (None values are left out).

    Chosen with ``graphType=pie&pieMode=maximum``.

    Example:

    .. code-block:: none

      &target=servers.*.requests&graphType=pie&pieMode=maximum
    """
    return safe_max(series)


@render_function('minimum', 'Pie', SERIES, pie=True)
def pieMinimum(requestContext: dict, series: TimeSeries) -> Any:
    """For pie charts: each slice's size is the lowest value of its series.

    Parameters:

    - ``series``: the series whose values are looked at (None values are left out).

    Chosen with ``graphType=pie&pieMode=minimum``.

    Example:

    .. code-block:: none

      &target=servers.*.requests&graphType=pie&pieMode=minimum
    """
    return safe_min(series)
