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

import functools
import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Optional

from webapp import pysum
from webapp.render.series import PackedSeries
from webapp.storage import packed

try:  # pragma: no cover - exercised by whichever environment runs the tests
    import orjson
except ImportError:  # pragma: no cover
    orjson = None
try:  # pragma: no cover - the optional C accelerator (setup.py NATIVE)
    from webapp.render import _rows
except ImportError:  # pragma: no cover
    _rows = None

_ENCODE = json.JSONEncoder(allow_nan=True).encode
_QUOTE = json.encoder.encode_basestring_ascii
FEW_DISTINCT = 1024
# more cells than this are printed by orjson (a day of one series' minutes is 1,440)
ORJSON_MIN_CELLS = 256
_FLOAT_LISTS = (frozenset([float]), frozenset([type(None)]), frozenset([float, type(None)]))
MAX_FAST_VPP = 64
# groups whose files are read ahead of the one being printed
PREPARE_AHEAD = 2
# rows are formatted in blocks of about this many values, so the temporary arrays stay
# small next to the body itself (1,000 series x 1,440 points: 23 blocks)
BLOCK_CELLS = 1 << 16
# orjson prints the same shortest round-trip digits as float.__repr__; outside this range
# of magnitudes their exponent styles differ (1e-05 / 1e-5), so those go through repr
FAST_LOW, FAST_HIGH = 1e-3, 1e15


def _quirks(text: str) -> str:
    """graphite-web's text replacements, which also reach names and tags."""
    return text.replace('NaN,', 'null,').replace('Infinity,', '1e9999,')


def header(series: Any) -> str:
    """``{"target": ..., "tags": ..., "datapoints": `` of one series."""
    name = series.name
    tags = series.tags
    if type(name) is str:
        quoted = _QUOTE(name)
        if len(tags) == 1 and tags.get('name') == name:
            text = '{"target": %s, "tags": {"name": %s}, "datapoints": ' % (quoted, quoted)
        else:
            text = '{"target": %s, "tags": %s, "datapoints": ' % (quoted,
                                                                  json.dumps(dict(tags)))
    else:
        text = '{"target": %s, "tags": %s, "datapoints": ' % (json.dumps(name),
                                                              json.dumps(dict(tags)))
    return _quirks(text) if 'N' in text or 'I' in text else text


def _texts(distinct: Any) -> list[str]:
    """JSON text of each float64: ``float.__repr__`` (as json), null, +-1e9999."""
    np = packed.np
    texts = list(map(float.__repr__, distinct.tolist()))
    for i in np.flatnonzero(~np.isfinite(distinct)).tolist():
        value = distinct[i]
        texts[i] = 'null' if value != value else ('1e9999' if value > 0 else '-1e9999')
    return texts


def _timestamps(series: Any) -> range:
    step = int(series.step * series.valuesPerPoint) or 1
    return range(int(series.start), int(series.end) + 1, step)


def _codes(matrix: Any) -> tuple[Any, Any]:
    """(distinct float64 values, index of each cell's value) by bit pattern."""
    np = packed.np
    bits = np.ascontiguousarray(matrix).view(np.uint64)
    ordered = np.sort(bits, axis=None)
    keep = np.empty(ordered.shape, dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    distinct = ordered[keep]
    if len(distinct) > FEW_DISTINCT:
        # binary searches over many values mispredict; let unique() build the inverse
        distinct, codes = np.unique(bits, return_inverse=True)
        return distinct.view(np.float64), codes.reshape(bits.shape)
    codes = _hashed_codes(distinct, bits)
    if codes is None:
        codes = np.searchsorted(distinct, bits)
    return distinct.view(np.float64), codes


# odd 64-bit multipliers for the multiplicative hash (golden ratio, splitmix64, murmur3)
_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB,
                0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)


def _hashed_codes(distinct: Any, bits: Any) -> Optional[Any]:
    """Codes through a multiplicative hash that is collision-free on ``distinct``.

    One multiply, shift and table look-up per cell instead of a binary search; None
    when no multiplier separates the values within a 64K-slot table.
    """
    np = packed.np
    size_bits = min(16, max(8, 2 * (len(distinct) - 1).bit_length() + 1))
    shift = np.uint64(64 - size_bits)
    for multiplier in _MULTIPLIERS:
        m = np.uint64(multiplier)
        slots = (distinct * m) >> shift
        if len(np.unique(slots)) == len(distinct):
            table = np.zeros(1 << size_bits, dtype=np.intp)
            table[slots] = np.arange(len(distinct))
            hashed = bits * m
            np.right_shift(hashed, shift, out=hashed)
            return np.take(table, hashed)
    return None


def _many(matrix: Any) -> bool:
    """Whether the cells are printed by orjson (many values) rather than one by one."""
    return orjson is not None and matrix.size > ORJSON_MIN_CELLS


def _orjson_cells(matrix: Any) -> tuple[Any, bytes, Any, list]:
    """(flat values, orjson's comma-separated cell texts, indexes of the cells orjson
    writes differently from float.__repr__ (magnitudes outside FAST_LOW..FAST_HIGH in
    exponent form; infinities, which it writes null), their repr texts as bytes)."""
    np = packed.np
    flat = np.ascontiguousarray(matrix, dtype=np.float64).ravel()
    text = orjson.dumps(flat, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    with np.errstate(invalid='ignore'):
        size = np.abs(flat)
        # (infinities are among the sizes from FAST_HIGH up)
        odd = np.flatnonzero((size != 0) & ((size < FAST_LOW) | (size >= FAST_HIGH)))
    fixes = [t.encode() for t in _texts(flat[odd])] if len(odd) else []
    return flat, text, odd, fixes


def _cell_texts(matrix: Any) -> Any:
    """The JSON text of every cell (bytes array shaped like ``matrix``), as float.__repr__
    writes it: distinct values formatted once when few, else all cells by orjson."""
    np = packed.np
    if not _many(matrix):
        distinct, codes = _codes(matrix)
        texts = _texts(distinct)
        width = next((w for w in (8, 16, 32) if w >= max(map(len, texts))),
                     max(map(len, texts)))
        # numpy's take() has fast loops for 8/16/32-byte items only
        return np.take(np.array(texts, dtype='S%d' % width), codes)
    flat, text, odd, fixes = _orjson_cells(matrix)
    cells = np.array(text.split(b','))
    if len(odd):
        width = max(cells.dtype.itemsize, max(map(len, fixes)))
        if width > cells.dtype.itemsize:
            cells = cells.astype('S%d' % width)
        cells[odd] = fixes
    return cells.reshape(matrix.shape)


@functools.lru_cache(maxsize=8)
def _suffixes(stamps: range) -> list[bytes]:
    """The text after each cell: ``, <timestamp>], [`` (``]]}`` after the last). A
    dashboard's requests share their time range, so the lists are kept for a while
    (read only)."""
    suffixes = [b', %d], [' % t for t in stamps[:-1]]
    suffixes.append(b', %d]]}' % stamps[-1])
    return suffixes


def format_rows(headers: list[str], matrix: Any, stamps: range, before: str = '',
                after: str = '') -> bytes:
    """``before`` + ``header[[v, t], ...]]}`` per row of ``matrix`` (NaN = null) + ``after``.

    Rows are separated by ``, ``. Cells are fixed-width NUL-padded records that numpy
    fills; the padding is squeezed out at the end.
    """
    np = packed.np
    rows, points = matrix.shape
    if points == 0:
        return (before + ', '.join(h + '[]}' for h in headers) + after).encode()
    suffixes = _suffixes(stamps[:points])
    heads = [((', ' if i else before) + h).encode() + b'[[' for i, h in enumerate(headers)]
    if _rows is not None and _many(matrix):
        _flat, text, odd, fixes = _orjson_cells(matrix)
        return _rows.join_rows(text, points, heads, suffixes, odd.tolist(), fixes,
                               after.encode())
    cells = _cell_texts(matrix)
    tails = [b''] * (rows - 1) + [after.encode()]
    swidth = max(map(len, suffixes))
    cell = np.dtype([('v', cells.dtype), ('s', 'S%d' % swidth)])
    record = np.dtype([('h', 'S%d' % max(map(len, heads))), ('p', cell, (points,)),
                       ('t', 'S%d' % max(1, len(tails[-1])))])
    out = np.empty(rows, record)
    out['h'] = heads
    out['p']['v'] = cells
    out['p']['s'] = np.array(suffixes, dtype='S%d' % swidth)
    out['t'] = tails
    return out.tobytes().translate(None, b'\0')


def _packed_matrix(group: list[PackedSeries]) -> Optional[Any]:
    """Consolidated rows (NaN = null) of packed series sharing block, drop and vpp."""
    np = packed.np
    first = group[0]
    vpp = first.valuesPerPoint
    direct = packed.consolidate_means([s.packed for s in group], first.drop, vpp,
                                      pysum.COMPENSATED, first.xFilesFactor) \
        if vpp > 1 else None
    if direct is not None:       # consolidated while reading the files
        return direct
    arrays = packed.stack_rows([s.packed for s in group])
    if arrays is None:
        return None
    values, valid = arrays
    if first.drop:
        values, valid = values[:, first.drop:], valid[:, first.drop:]
    if vpp <= 1:
        return np.where(valid, values, np.nan)
    points = values.shape[1]
    buckets = -(-points // vpp)
    acc = np.zeros((len(group), buckets))
    comp = np.zeros_like(acc)
    count = np.zeros((len(group), buckets), dtype=np.int64)
    zeroed = np.where(valid, values, 0.0)
    with np.errstate(all='ignore'):  # inf - inf is nan, as in Python
        for j in range(min(vpp, points)):
            width = len(range(j, points, vpp))
            pysum.add_into(np, acc[:, :width], comp[:, :width], zeroed[:, j::vpp])
            count[:, :width] += valid[:, j::vpp]
    return _bucket_means(acc, comp, count, vpp, first.xFilesFactor)


def _bucket_means(acc: Any, comp: Any, count: Any, vpp: int, xff: Optional[float]) -> Any:
    """Each bucket's mean (NaN = null where it has no value or too few for ``xff``) from
    its sum, sum() correction and count of values."""
    np = packed.np
    with np.errstate(all='ignore'):  # inf - inf is nan, as in Python
        mean, ok = pysum.finish(np, acc, comp, count, True, vpp, xff)
    return np.where(ok, mean, np.nan)


def _list_rows(group: list[Any]) -> Optional[Any]:
    """Float64 rows (NaN = null) of list series of floats/None of one length (consolidated
    values), else None."""
    rows = [list(series) for series in group]
    if any(frozenset(map(type, values)) not in _FLOAT_LISTS for values in rows if values):
        return None
    if len({len(values) for values in rows}) != 1:
        return None
    return packed.np.array(rows, dtype=packed.np.float64).reshape(len(rows), -1)


def _group_key(series: Any) -> Optional[tuple]:
    """Series with equal keys are formatted together as rows of one matrix."""
    if isinstance(series, PackedSeries) and series.packed is not None:
        if series.consolidationFunc == 'average':
            return (id(series.packed.block), series.drop, series.valuesPerPoint, series.start,
                    series.end, series.step, series.xFilesFactor)
        return None
    return ('list', series.start, series.end, series.step, series.valuesPerPoint,
            list.__len__(series))


def _packed_cells(series: PackedSeries) -> int:
    """The cells a packed series prints: its points after ``drop``, consolidated by
    ``valuesPerPoint`` (so a group of maxDataPoints rows holds BLOCK_CELLS printed
    cells, and its files are read in one scan, not a few at a time)."""
    vpp = max(1, series.valuesPerPoint)
    return -(-max(0, len(series.packed) - series.drop) // vpp)


def _generic(series: Any) -> bytes:
    if isinstance(series, PackedSeries):
        series.materialize()
    points = _ENCODE(list(zip(series, _timestamps(series), strict=False)))
    if 'N' in points or 'I' in points:
        points = points.replace('NaN,', 'null,').replace('Infinity,', '1e9999,')
    return (header(series) + points + '}').encode()


def _prepare(group: list[Any]) -> tuple[Optional[Any], bytes]:
    """What a run of series needs before it is printed, read from the files:
    (its rows' float64 matrix, b'') or, for series the matrix writer does not take,
    (None, their finished text without separators)."""
    head = group[0]
    matrix = None
    key = _group_key(head)
    if key is not None and key[0] == 'list':
        matrix = _list_rows(group)
    elif key is not None and head.valuesPerPoint <= MAX_FAST_VPP:
        matrix = _packed_matrix(group)
    if matrix is None:
        return None, b', '.join(_generic(s) for s in group)
    return matrix, b''


def _chunk(group: list[Any], prepared: tuple[Optional[Any], bytes], before: str,
           after: str) -> bytes:
    """The text of a run of series (one group of packed rows, or a single series)."""
    matrix, text = prepared
    if matrix is None:
        return before.encode() + text + after.encode()
    head = group[0]
    stamps = _timestamps(head)
    points = min(matrix.shape[1], len(stamps))
    return format_rows([header(s) for s in group], matrix[:, :points], stamps, before, after)


def _prepared(groups: list[list[Any]]) -> Iterator[tuple[Optional[Any], bytes]]:
    """_prepare of each group in order; with more than two groups, on a thread of its
    own PREPARE_AHEAD groups ahead, so reading the files (which runs without the GIL)
    overlaps printing the groups before."""
    if len(groups) <= 2:
        yield from map(_prepare, groups)
        return
    pool = ThreadPoolExecutor(1, thread_name_prefix='webapp-json-read')
    try:
        pending = deque(pool.submit(_prepare, g) for g in groups[:PREPARE_AHEAD])
        for i in range(len(groups)):
            done = pending.popleft().result()
            if i + PREPARE_AHEAD < len(groups):
                pending.append(pool.submit(_prepare, groups[i + PREPARE_AHEAD]))
            yield done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def render_iter(data: list[Any], prefix: str = '', suffix: str = '') -> Iterator[bytes]:
    """The chunks of a format=json body, each printed when asked for (a group of rows of
    about BLOCK_CELLS values, files read as the group is printed).

    (No pretty printing, nulls kept; ``prefix``/``suffix`` carry a JSONP wrapper.)
    """
    if not packed.ENABLED or not data or '\0' in prefix + suffix:
        yield ((prefix + '[').encode() + b', '.join(_generic(s) for s in data) +
               (']' + suffix).encode())
        return
    groups = _groups(data)
    pending = b''
    for i, (group, prepared) in enumerate(zip(groups, _prepared(groups), strict=True)):
        text = _chunk(group, prepared, prefix + '[' if i == 0 else ', ',
                      ']' + suffix if i == len(groups) - 1 else '')
        if pending and len(text) < 65536 and len(pending) < 65536:
            pending += text
        else:
            if pending:
                yield pending
            pending = text
    yield pending


def _groups(data: list[Any]) -> list[list[Any]]:
    """Runs of series printed together: equal group keys, at most BLOCK_CELLS cells."""
    groups: list[list[Any]] = []
    last_key: Optional[tuple] = None
    cells = 0
    for series in data:
        key = _group_key(series)
        size = list.__len__(series) if key is None or key[0] == 'list' else \
            _packed_cells(series)
        if key is not None and key == last_key and cells + size <= BLOCK_CELLS:
            groups[-1].append(series)
            cells += size
        else:
            groups.append([series])
            cells = size
        last_key = key
    return groups
