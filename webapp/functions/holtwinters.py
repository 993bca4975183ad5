"""Calculate group: Holt-Winters forecasting, confidence bands and aberrations."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from webapp.functions.calculate import CALCULATE, SL
from webapp.functions.common import evaluate_first_arg, interval_seconds
from webapp.functions.registry import render_function
from webapp.functions.registry import Param as P
from webapp.render.series import TimeSeries

ALPHA = GAMMA = 0.1
BETA = 0.0035
DELTA = P('delta', 'integer', default=3)
BOOTSTRAP = P('bootstrapInterval', 'interval', default='7d', suggestions=['7d', '30d'])
SEASONALITY = P('seasonality', 'interval', default='1d', suggestions=['1d', '7d'])


def holt_winters(values: list, step: int, seasonality: str = '1d') -> tuple[list, list]:
    """Triple exponential smoothing: (predictions, deviations) for every point."""
    season = interval_seconds(seasonality) // step
    intercepts: list = []
    slopes: list = []
    seasonals: list = []
    predictions: list = []
    deviations: list = []

    def back(history: list, i: int) -> Any:
        j = i - season
        return history[j] if j >= 0 else 0

    next_pred = None
    for i, actual in enumerate(values):
        if actual is None:
            intercepts.append(None)
            slopes.append(0)
            seasonals.append(0)
            predictions.append(next_pred)
            deviations.append(0)
            next_pred = None
            continue
        if i == 0:
            last_intercept, last_slope, prediction = actual, 0, actual
        else:
            last_intercept = intercepts[-1]
            last_slope = slopes[-1]
            if last_intercept is None:
                last_intercept = actual
            prediction = next_pred
        last_seasonal = back(seasonals, i)
        next_last_seasonal = back(seasonals, i + 1)
        last_dev = back(deviations, i)
        intercept = ALPHA * (actual - last_seasonal) + (1 - ALPHA) * (last_intercept + last_slope)
        slope = BETA * (intercept - last_intercept) + (1 - BETA) * last_slope
        seasonal = GAMMA * (actual - intercept) + (1 - GAMMA) * last_seasonal
        next_pred = intercept + slope + next_last_seasonal
        deviation = GAMMA * math.fabs(actual - (prediction or 0)) + (1 - GAMMA) * last_dev
        intercepts.append(intercept)
        slopes.append(slope)
        seasonals.append(seasonal)
        predictions.append(prediction)
        deviations.append(deviation)
    return predictions, deviations


def _analysed(series: TimeSeries, seasonality: str) -> tuple[list, list]:
    """holt_winters of ``series``; its tags gain holtWintersForecast and holtWintersDeviation
    as graphite-web's analysis marks them (the results share that tags object)."""
    series.tags['holtWintersForecast'] = 1
    series.tags['holtWintersDeviation'] = 1
    return holt_winters(list(series), series.step, seasonality)


def _bootstrapped(requestContext: dict, bootstrapInterval: str) -> tuple[int, list]:
    preview = interval_seconds(bootstrapInterval)
    wider = evaluate_first_arg(requestContext,
                               startTime=requestContext['startTime'] - timedelta(seconds=preview))
    return preview, wider


@render_function('holtWintersForecast', CALCULATE, [SL, BOOTSTRAP, SEASONALITY])
def holtWintersForecast(requestContext: dict, seriesList: list, bootstrapInterval: str = '7d',
                        seasonality: str = '1d') -> list[TimeSeries]:
    """What each series was expected to be, according to a Holt-Winters model of its history.

    Parameters:

    - ``seriesList``: the series to model.
    - ``bootstrapInterval``: how much history before ``from`` is fetched to train the model,
      ``"7d"`` by default.
    - ``seasonality``: the length of one season, ``"1d"`` by default (a daily pattern).

    The Holt-Winters model follows each series' level, trend and seasonal pattern (a season
    being ``seasonality`` long), trained on ``bootstrapInterval`` of history fetched before
    ``from``. The point after a None value has no forecast; the model
    picks the level up again from the next known value. The forecast for each point uses only
    the points before it. Named ``holtWintersForecast(name)``.

    Example:

    .. code-block:: none

      &target=app.requests&target=holtWintersForecast(app.requests,"14d","1d")
    """
    preview, wider = _bootstrapped(requestContext, bootstrapInterval)
    results = []
    for series in wider:
        predictions, _ = _analysed(series, seasonality)
        skip = preview // series.step
        results.append(TimeSeries('holtWintersForecast(%s)' % series.name,
                                  series.start + preview, series.end, series.step,
                                  predictions[skip:], tags=series.tags,
                                  xFilesFactor=series.xFilesFactor))
    return results


@render_function('holtWintersConfidenceBands', CALCULATE, [SL, DELTA, BOOTSTRAP, SEASONALITY])
def holtWintersConfidenceBands(requestContext: dict, seriesList: list, delta: int = 3,
                               bootstrapInterval: str = '7d',
                               seasonality: str = '1d') -> list[TimeSeries]:
    """Upper and lower bands around the Holt-Winters forecast of each series.

    Parameters:

    - ``seriesList``: the series to model.
    - ``delta``: the width of the bands in predicted deviations, 3 by default.
    - ``bootstrapInterval``: how much history before ``from`` is fetched to train the model,
      ``"7d"`` by default.
    - ``seasonality``: the length of one season, ``"1d"`` by default (a daily pattern).

    The Holt-Winters model follows each series' level, trend and seasonal pattern (a season
    being ``seasonality`` long), trained on ``bootstrapInterval`` of history fetched before
    ``from``. The point after a None value has no forecast; the model
    picks the level up again from the next known value. Each band is the forecast plus or minus
    ``delta`` times the predicted deviation; values outside them are unusual. Named
    ``holtWintersConfidenceUpper(name)`` and ``holtWintersConfidenceLower(name)``.

    Example:

    .. code-block:: none

      &target=app.requests&target=holtWintersConfidenceBands(app.requests,3)
    """
    preview, wider = _bootstrapped(requestContext, bootstrapInterval)
    results = []
    for series in wider:
        predictions, deviations = _analysed(series, seasonality)
        skip = preview // series.step
        upper, lower = [], []
        for forecast, deviation in zip(predictions[skip:], deviations[skip:], strict=True):
            if forecast is None or deviation is None:
                upper.append(None)
                lower.append(None)
            else:
                upper.append(forecast + delta * deviation)
                lower.append(forecast - delta * deviation)
        start = series.start + preview
        # graphite-web gives both bands the one (shared) tags object, marked twice
        series.tags['holtWintersConfidenceUpper'] = 1
        series.tags['holtWintersConfidenceLower'] = 1
        for kind, values in (('Lower', lower), ('Upper', upper)):
            tags = series.tags
            band = TimeSeries('holtWintersConfidence%s(%s)' % (kind, series.name), start,
                              series.end, series.step, values, tags=tags,
                              xFilesFactor=series.xFilesFactor)
            band.pathExpression = series.pathExpression
            results.append(band)
    return results


@render_function('holtWintersAberration', CALCULATE, [SL, DELTA, BOOTSTRAP, SEASONALITY])
def holtWintersAberration(requestContext: dict, seriesList: list, delta: int = 3,
                          bootstrapInterval: str = '7d',
                          seasonality: str = '1d') -> list[TimeSeries]:
    """How far each value lies outside its Holt-Winters confidence bands.

    Parameters:

    - ``seriesList``: the series to model.
    - ``delta``: the width of the bands in predicted deviations, 3 by default.
    - ``bootstrapInterval``: how much history before ``from`` is fetched to train the model,
      ``"7d"`` by default.
    - ``seasonality``: the length of one season, ``"1d"`` by default (a daily pattern).

    The Holt-Winters model follows each series' level, trend and seasonal pattern (a season
    being ``seasonality`` long), trained on ``bootstrapInterval`` of history fetched before
    ``from``. The point after a None value has no forecast; the model
    picks the level up again from the next known value. Each point is the distance above the
    upper band (positive) or below the lower band (negative), 0 inside them and for None
    values. Named ``holtWintersAberration(name)``.

    Example:

    .. code-block:: none

      &target=holtWintersAberration(app.requests,2)
    """
    bands = {s.name: s for s in holtWintersConfidenceBands(
        requestContext, seriesList, delta, bootstrapInterval, seasonality)}
    results = []
    for series in seriesList:
        lower = bands['holtWintersConfidenceLower(%s)' % series.name]
        upper = bands['holtWintersConfidenceUpper(%s)' % series.name]
        values = []
        for i, actual in enumerate(series):
            hi = upper[i] if i < len(upper) else None
            lo = lower[i] if i < len(lower) else None
            if actual is None:
                values.append(0)
            elif hi is not None and actual > hi:
                values.append(actual - hi)
            elif lo is not None and actual < lo:
                values.append(actual - lo)
            else:
                values.append(0)
        series.tags['holtWintersAberration'] = 1
        results.append(TimeSeries('holtWintersAberration(%s)' % series.name, series.start,
                                  series.end, series.step, values, tags=series.tags,
                                  xFilesFactor=series.xFilesFactor))
    return results


@render_function('holtWintersConfidenceArea', CALCULATE, [SL, DELTA, BOOTSTRAP, SEASONALITY])
def holtWintersConfidenceArea(requestContext: dict, seriesList: list, delta: int = 3,
                              bootstrapInterval: str = '7d',
                              seasonality: str = '1d') -> list[TimeSeries]:
    """The Holt-Winters confidence bands of each series, drawn as a filled area.

    Parameters:

    - ``seriesList``: the series to model.
    - ``delta``: the width of the bands in predicted deviations, 3 by default.
    - ``bootstrapInterval``: how much history before ``from`` is fetched to train the model,
      ``"7d"`` by default.
    - ``seasonality``: the length of one season, ``"1d"`` by default (a daily pattern).

    The Holt-Winters model follows each series' level, trend and seasonal pattern (a season
    being ``seasonality`` long), trained on ``bootstrapInterval`` of history fetched before
    ``from``. The point after a None value has no forecast; the model
    picks the level up again from the next known value. Same bands as
    ``holtWintersConfidenceBands``, given to ``areaBetween`` so the graph fills the space
    between them.

    Example:

    .. code-block:: none

      &target=app.requests&target=holtWintersConfidenceArea(app.requests)
    """
    from webapp.functions.graph import areaBetween
    bands = holtWintersConfidenceBands(requestContext, seriesList, delta, bootstrapInterval,
                                       seasonality)
    results = areaBetween(requestContext, bands)
    for series in results:
        series.tags.pop('areaBetween', None)
        series.tags['holtWintersConfidenceArea'] = 1
        series.name = series.name.replace('areaBetween', 'holtWintersConfidenceArea')
        series.pathExpression = series.name
    return results
