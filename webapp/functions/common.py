"""Helpers shared by the render functions: null-safe maths, aggregation, normalisation."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any, Callable, Iterable, Optional, Sequence

from webapp.graphs.units import UNIT_SYSTEMS, format_units  # noqa: F401 - for the functions
from webapp.render import attime
from webapp.render.attime import parse_time_offset
from webapp.render.errors import InputParameterError
from webapp.render.series import TimeSeries, xff
from webapp import pysum

INF = float('inf')
NAN = float('nan')
DAY = 86400
HOUR = 3600
MINUTE = 60


def nonnull(values: Iterable) -> list:
    """The values that are not None."""
    return [v for v in values if v is not None]


def safe_sum(values: Iterable) -> Any:
    vals = nonnull(values)
    return pysum.total(vals) if vals else None


def safe_diff(values: Iterable) -> Any:
    vals = nonnull(values)
    return vals[0] - pysum.total(vals[1:]) if vals else None


def safe_len(values: Iterable) -> int:
    return len(nonnull(values))


def safe_div(a: Any, b: Any) -> Any:
    if a is None or b is None or b == 0:
        return None
    return a / b


def safe_mul(*factors: Any) -> Any:
    if any(f is None for f in factors):
        return None
    return reduce(lambda x, y: x * y, [float(f) for f in factors])


def safe_pow(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def safe_avg(values: Iterable) -> Any:
    vals = nonnull(values)
    return pysum.total(vals) / len(vals) if vals else None


def safe_avg_zero(values: Iterable) -> Any:
    values = list(values)
    return pysum.total(0 if v is None else v for v in values) / len(values) if values else None


def safe_median(values: Iterable) -> Any:
    vals = sorted(nonnull(values))
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2.0


def safe_stddev(values: Iterable) -> Any:
    vals = nonnull(values)
    if not vals:
        return None
    mean = pysum.total(vals) / len(vals)
    return math.sqrt(pysum.total((v - mean) ** 2 for v in vals) / len(vals))


def safe_last(values: Iterable) -> Any:
    vals = nonnull(values)
    return vals[-1] if vals else None


def safe_min(values: Iterable, default: Any = None) -> Any:
    vals = nonnull(values)
    return min(vals) if vals else default


def safe_max(values: Iterable, default: Any = None) -> Any:
    vals = nonnull(values)
    return max(vals) if vals else default


def safe_range(values: Iterable) -> Any:
    vals = nonnull(values)
    return float(max(vals)) - float(min(vals)) if vals else None


def safe_multiply(values: Iterable) -> Any:
    return safe_mul(*values)


AGG_FUNCTIONS: dict[str, Callable[[Sequence], Any]] = {
    'average': safe_avg, 'avg_zero': safe_avg_zero, 'median': safe_median, 'sum': safe_sum,
    'min': safe_min, 'max': safe_max, 'diff': safe_diff, 'stddev': safe_stddev,
    'count': safe_len, 'range': safe_range, 'multiply': safe_multiply, 'last': safe_last,
    'rangeOf': safe_range, 'avg': safe_avg, 'total': safe_sum, 'current': safe_last,
}


def get_agg_func(name: str, raw: Optional[str] = None) -> Callable[[Sequence], Any]:
    """The aggregation function called ``name`` (average, sum, max, ... or an alias)."""
    try:
        return AGG_FUNCTIONS[name]
    except KeyError:
        raise InputParameterError('Unsupported aggregation function: %s' % (raw or name)) from None


def key_func(func: Callable) -> Callable:
    """Sort key that ranks None below every number."""
    def key(values: Any) -> Any:
        value = func(values)
        return -INF if value is None else value
    return key


def xff_values(values: Sequence, x_files_factor: Optional[float]) -> bool:
    values = list(values)
    return bool(values) and xff(safe_len(values), len(values), x_files_factor)


def lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b) if a and b else max(a, b)


class NormalizeEmptyResultError(Exception):
    """normalize() was given nothing to normalise."""


def normalize(seriesLists: Sequence[Sequence[TimeSeries]]) -> tuple[list, int, int, int]:
    """Consolidate all series to a common step: (series, start, end, step)."""
    seriesList = [s for sl in seriesLists for s in sl]
    if not seriesList:
        raise NormalizeEmptyResultError()
    step = reduce(lcm, [s.step for s in seriesList])
    for s in seriesList:
        s.consolidate(step // s.step)
    start = min(s.start for s in seriesList)
    end = max(s.end for s in seriesList)
    end -= (end - start) % step
    return seriesList, start, end, step


def rows(seriesList: Sequence[TimeSeries]) -> Iterable[tuple]:
    """Aligned value tuples across series (shorter ones padded with None)."""
    from itertools import zip_longest
    return zip_longest(*seriesList)


def format_path_expressions(seriesList: Iterable[TimeSeries]) -> str:
    """Comma-joined distinct pathExpressions in first-seen order."""
    return ','.join(dict.fromkeys(s.pathExpression for s in seriesList))


def _first_arg(text: str) -> str:
    """The text up to the first top-level ``,`` or unmatched ``)``."""
    depth, quote = 0, ''
    for pos, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ''
        elif ch in '\'"':
            quote = ch
        elif ch in '({[':
            depth += 1
        elif ch in ')}]':
            if depth == 0:
                return text[:pos]
            depth -= 1
        elif ch == ',' and depth == 0:
            return text[:pos]
    return text


def first_path_expression(name: str) -> Optional[str]:
    """The first metric path inside a function-wrapped name: ``f(g(a.b,1),c)`` -> ``a.b``."""
    text = name.strip()
    while True:
        i = 0
        while i < len(text) and (text[i].isalnum() or text[i] == '_'):
            i += 1
        if 0 < i < len(text) and text[i] == '(':
            text = _first_arg(text[i + 1:]).strip()
            continue
        break
    if not text or text[0] in '\'"' or text[0].isdigit() and text.replace('.', '').isdigit():
        return None
    return text


def node_or_tag(series: TimeSeries, n: Any, pathExpression: Optional[str] = None) -> str:
    """Node ``n`` of the series path, or tag ``n`` when n is not a valid integer node."""
    try:
        if n == int(n):
            return (pathExpression or series.name).split(';', 2)[0].split('.')[n]
    except (ValueError, IndexError, TypeError):
        pass
    return series.tags.get(str(n), '')


def agg_key(series: TimeSeries, nodes: Sequence, pathExpression: Optional[str] = None) -> str:
    """Dot-joined nodes/tags of a series, looking inside function-wrapped names."""
    if pathExpression is None and series.name and series.name[-1] == ')':
        pathExpression = first_path_expression(series.name)
    return '.'.join(node_or_tag(series, n, pathExpression) for n in nodes)


def parse_interval(offset: str) -> timedelta:
    """A signed offset such as ``-1d``, ``5min`` or ``1h30min`` as a timedelta
    (graphite's ``parseTimeOffset``); InputParameterError for malformed offsets."""
    try:
        return parse_time_offset(str(offset)) if offset else timedelta()
    except (ValueError, TypeError, KeyError) as err:
        raise InputParameterError('Invalid interval %r: %s' % (offset, err)) from None


def interval_seconds(offset: str) -> int:
    """Whole seconds of an interval string (sign kept)."""
    delta = parse_interval(offset)
    return delta.days * 86400 + delta.seconds


def epoch(dt: datetime) -> int:
    """Unix timestamp of an aware (or UTC-naive) datetime."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp())


def parse_at_time(value: Any, requestContext: dict) -> datetime:
    """A graphite 'at' time (``now-1h``, epoch seconds, ``20240101``...) in the request's tz."""
    tz = requestContext.get('tzinfo') or UTC
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(int(value))
    now = requestContext.get('now') or datetime.now(tz)
    try:
        return attime.parse_at_time(value, tz, now)
    except (ValueError, KeyError, TypeError) as err:
        raise InputParameterError('Invalid time %r: %s' % (value, err)) from None


def evaluate_first_arg(requestContext: dict, packed: bool = False,
                       **changes: Any) -> list[TimeSeries]:
    """Re-evaluate the current call's first argument with a modified request context.

    With ``packed`` the series may be unmaterialised PackedSeries, for a function that
    only changes their names, tags or times and returns them (the evaluator turns them
    into lists for any caller but the JSON writer)."""
    ctx = dict(requestContext)
    ctx['prefetch'] = {}
    ctx.update(changes)
    if packed:
        return requestContext['evaluateTarget'](ctx, requestContext['args'][0], packed=True)
    return requestContext['evaluateTarget'](ctx, requestContext['args'][0])


def evaluate(requestContext: dict, target: Any, **changes: Any) -> list[TimeSeries]:
    """Evaluate ``target`` (string or node) in a copy of the request context."""
    ctx = dict(requestContext)
    ctx['prefetch'] = {}
    ctx.update(changes)
    return requestContext['evaluateTarget'](ctx, target)


def percentile(points: Iterable, n: float, interpolate: bool = False) -> Any:
    """NIST-style percentile of the non-null points (nearest rank unless interpolating)."""
    ordered = sorted(nonnull(points))
    if not ordered:
        return None
    fractional = (n / 100.0) * (len(ordered) + 1)
    rank = int(fractional)
    fraction = fractional - rank
    if not interpolate:
        rank += int(math.ceil(fraction))
    if rank == 0:
        value = ordered[0]
    elif rank - 1 == len(ordered):
        value = ordered[-1]
    else:
        value = ordered[rank - 1]
    if interpolate and rank != len(ordered):
        value = value + fraction * (ordered[rank] - value)
    return value


def rename(series: TimeSeries, name: str) -> TimeSeries:
    """Set name and pathExpression together (the in-place functions do this)."""
    series.name = name
    series.pathExpression = name
    return series
