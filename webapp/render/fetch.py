"""Series of path expressions for a request's time range: one Store call per target set.

``prefetch`` fetches every path expression of the targets at once and keeps the results
in the request context; ``fetch_series`` answers one expression from there.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from webapp.render.attime import epoch
from webapp.render.series import PackedSeries, TimeSeries
from webapp.storage.packed import PackedValues

__all__ = ["timebounds", "prefetch", "fetch_series"]


def timebounds(ctx: dict[str, Any]) -> tuple[int, int, int]:
    """(start, end, now) of the request context as epoch seconds."""
    return epoch(ctx['startTime']), epoch(ctx['endTime']), epoch(ctx['now'])


def prefetch(ctx: dict[str, Any], path_expressions: list[str]) -> None:
    """Fetch all ``path_expressions`` for the context's time range in one Store call."""
    if not path_expressions:
        return
    start, end, now = timebounds(ctx)
    cache = ctx.setdefault('prefetched', {}).setdefault((start, end, now), {})
    missing = [p for p in path_expressions if p not in cache]
    if not missing:
        return
    for p in missing:
        cache[p] = []
    for result in ctx['store'].fetch(missing, start, end, now, ctx):
        cache.setdefault(result['pathExpression'], []).append(
            (result['name'], result['time_info'], result['values']))


def fetch_series(ctx: dict[str, Any], path_expression: str,
                 packed: bool = False) -> list[TimeSeries]:
    """Series of one path expression for the context's range, sorted by name.

    With ``packed``, series whose values are packed rows come back as PackedSeries.
    """
    start, end, now = timebounds(ctx)
    cache = ctx.setdefault('prefetched', {}).get((start, end, now))
    if cache is None or path_expression not in cache:
        prefetch(ctx, [path_expression])
        cache = ctx['prefetched'][(start, end, now)]
    xff = ctx.get('xFilesFactor')
    rows = sorted(cache.get(path_expression, []), key=itemgetter(0))
    if packed and all(type(values) is PackedValues for _, _, values in rows) and \
            len({row[0] for row in rows}) == len(rows):
        return PackedSeries.fetched(rows, xff, path_expression)
    out = []
    seen = set()
    for name, (s, e, step), values in rows:
        if name in seen:
            continue
        seen.add(name)
        if isinstance(values, PackedValues):
            if packed:
                out.append(PackedSeries(name, s, e, step, values, xFilesFactor=xff,
                                        pathExpression=path_expression))
                continue
            values = values.tolist()
        out.append(TimeSeries(name, s, e, step, values, xFilesFactor=xff,
                              pathExpression=path_expression))
    return out
