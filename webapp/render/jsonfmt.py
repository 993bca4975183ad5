"""format=json writer producing graphite-web's exact bytes without per-point Python objects.

graphite-web writes ``json.dumps(series_data)`` then replaces ``NaN,`` with ``null,``
and ``Infinity,`` with ``1e9999,``. Here each series becomes a float64 row (NaN for
null: None and NaN print the same) and rows sharing timestamps are printed together:
every distinct value's text is made once (``float.__repr__``, as json does), points are
laid out as fixed-width NUL-padded cells by numpy and the padding is dropped at the end
(JSON text never contains a NUL byte). Series with other value types (ints, bools,
numpy scalars...) use json's own encoder.

maxDataPoints consolidation of packed rows is done on the arrays too, adding each
bucket's values in order from 0 exactly as ``sum()`` does, so averages are identical.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from webapp.render.series import PackedSeries
from webapp.storage import packed

_ENCODE = json.JSONEncoder(allow_nan=True).encode
_FLOAT_LISTS = (frozenset([float]), frozenset([type(None)]), frozenset([float, type(None)]))
MAX_FAST_VPP = 64


def _quirks(text: str) -> str:
    """graphite-web's text replacements, which also reach names and tags."""
    return text.replace('NaN,', 'null,').replace('Infinity,', '1e9999,')


def header(series: Any) -> str:
    """``{"target": ..., "tags": ..., "datapoints": `` of one series."""
    return _quirks('{"target": %s, "tags": %s, "datapoints": ' % (
        json.dumps(series.name), json.dumps(dict(series.tags))))


def _number(value: float) -> bytes:
    if value != value:
        return b'null'
    if value in (float('inf'), float('-inf')):
        return b'1e9999' if value > 0 else b'-1e9999'
    return float.__repr__(value).encode()


def _timestamps(series: Any) -> range:
    step = int(series.step * series.valuesPerPoint) or 1
    return range(int(series.start), int(series.end) + 1, step)


def format_rows(headers: list[str], matrix: Any, stamps: range) -> bytes:
    """``header[[v, t], ...]]}`` for each row of ``matrix`` (NaN = null), comma separated."""
    np = packed.np
    rows, points = matrix.shape
    if points == 0:
        return ', '.join(h + '[]}' for h in headers).encode()
    bits = np.ascontiguousarray(matrix).view(np.uint64)
    distinct = np.unique(bits)
    codes = np.searchsorted(distinct, bits)
    texts = [_number(v) for v in distinct.view(np.float64).tolist()]
    suffixes = [b', %d], [' % t for t in stamps[:points - 1]]
    suffixes.append(b', %d]]}' % stamps[points - 1])
    heads = [(', ' if i else '').encode() + h.encode() + b'[[' for i, h in enumerate(headers)]
    width = max(map(len, texts))
    swidth = max(map(len, suffixes))
    cell = np.dtype([('v', 'S%d' % width), ('s', 'S%d' % swidth)])
    record = np.dtype([('h', 'S%d' % max(map(len, heads))), ('p', cell, (points,))])
    out = np.empty(rows, record)
    out['h'] = heads
    out['p']['v'] = np.array(texts, dtype='S%d' % width)[codes]
    out['p']['s'] = np.array(suffixes, dtype='S%d' % swidth)
    return out.tobytes().replace(b'\0', b'')


def _packed_matrix(group: list[PackedSeries]) -> Optional[Any]:
    """Consolidated rows (NaN = null) of packed series sharing block, drop and vpp."""
    np = packed.np
    first = group[0]
    arrays = packed.stack_rows([s.packed for s in group])
    if arrays is None:
        return None
    values, valid = arrays
    if first.drop:
        values, valid = values[:, first.drop:], valid[:, first.drop:]
    vpp = first.valuesPerPoint
    if vpp <= 1:
        return np.where(valid, values, np.nan)
    points = values.shape[1]
    buckets = -(-points // vpp)
    acc = np.zeros((len(group), buckets))
    count = np.zeros((len(group), buckets), dtype=np.int64)
    zeroed = np.where(valid, values, 0.0)
    for j in range(min(vpp, points)):
        width = len(range(j, points, vpp))
        acc[:, :width] += zeroed[:, j::vpp]
        count[:, :width] += valid[:, j::vpp]
    ok = (count > 0) & (count / vpp >= (first.xFilesFactor or 0.0))
    mean = np.divide(acc, count, out=np.zeros_like(acc), where=count > 0)
    return np.where(ok, mean, np.nan)


def _list_row(series: Any) -> Optional[Any]:
    """A float64 row for a list series of floats/None (consolidated), else None."""
    values = list(series)
    if frozenset(map(type, values)) not in _FLOAT_LISTS and values:
        return None
    return packed.np.array(values, dtype=packed.np.float64).reshape(1, -1)


def _group_key(series: Any) -> Optional[tuple]:
    if isinstance(series, PackedSeries) and series.packed is not None and \
            series.consolidationFunc == 'average':
        return (id(series.packed.block), series.drop, series.valuesPerPoint, series.start,
                series.end, series.step, series.xFilesFactor)
    return None


def _generic(series: Any) -> bytes:
    if isinstance(series, PackedSeries):
        series.materialize()
    points = _ENCODE(list(zip(series, _timestamps(series), strict=False)))
    if 'N' in points or 'I' in points:
        points = points.replace('NaN,', 'null,').replace('Infinity,', '1e9999,')
    return (header(series) + points + '}').encode()


def _chunk(group: list[Any]) -> bytes:
    """The text of a run of series (one group of packed rows, or a single series)."""
    first = group[0]
    matrix = None
    if _group_key(first) is not None and first.valuesPerPoint <= MAX_FAST_VPP:
        matrix = _packed_matrix(group)
    elif len(group) == 1 and not isinstance(first, PackedSeries):
        matrix = _list_row(first)
    if matrix is None:
        return b', '.join(_generic(s) for s in group)
    stamps = _timestamps(first)
    points = min(matrix.shape[1], len(stamps))
    return format_rows([header(s) for s in group], matrix[:, :points], stamps)


def render(data: list[Any]) -> bytes:
    """The body of a format=json response (no pretty printing, nulls kept)."""
    if not packed.ENABLED:
        return b'[' + b', '.join(_generic(s) for s in data) + b']'
    groups: list[list[Any]] = []
    last_key: Optional[tuple] = None
    for series in data:
        key = _group_key(series)
        if key is not None and key == last_key:
            groups[-1].append(series)
        else:
            groups.append([series])
        last_key = key
    return b'[' + b', '.join(_chunk(g) for g in groups) + b']'
