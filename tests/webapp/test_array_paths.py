"""The numpy/orjson paths give the very floats and text the plain Python paths give.

* moving window sums and averages (numpy, added left to right) against the per-window
  Python loop graphite-web runs;
* format=json cells written by orjson (many values) against ``json.dumps`` text, for
  full-precision values of every magnitude, nulls and infinities.
"""

from __future__ import annotations

import json
from typing import Any
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from webapp.functions.calculate import _array_window
from webapp.functions.combine import array_aggregate
from webapp.functions.common import xff
from webapp.render import jsonfmt
from webapp.render.series import TimeSeries

from tests.webapp.json_oracle import plain_sum

values = st.lists(st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False,
                                                 width=64)), min_size=0, max_size=60)


def python_window(raw: list, points: int, ratio: float, average: bool) -> list:
    out = []
    for i in range(points + 1, len(raw) + 1):
        window = [v for v in raw[i - points:i] if v is not None]
        if window and xff(len(window), points, ratio):
            out.append(plain_sum(window) / len(window) if average else plain_sum(window))
        else:
            out.append(None)
    return out


@settings(max_examples=300, deadline=None)
@given(values, st.integers(1, 12), st.sampled_from([0.0, 0.3, 0.5, 1.0]), st.booleans())
@example([0.0, 1e16, 1.0, -1e16, None], 3, 0.0, False)   # 3.12's sum() gives 1.0, graphite-web 0.0
def test_array_window_equals_python_loop(raw: list, points: int, ratio: float,
                                         average: bool) -> None:
    got = _array_window(raw, points, ratio, average)
    if len(raw) <= points:
        assert got is None
        return
    # graphite-web's sum(): plain additions, on every Python (webapp/pysum.py)
    want = python_window(raw, points, ratio, average)
    assert [repr(v) for v in got] == [repr(v) for v in want]


def test_array_window_refuses_what_it_cannot_copy() -> None:
    assert _array_window([1.0, float('nan'), 2.0, 3.0], 2, 0.0, True) is None
    assert _array_window([1, 2, 3, 4], 2, 0.0, True) is None           # ints stay ints
    assert _array_window([1.0, 2.0], 5, 0.0, True) is None


def dumps_like_graphite(series_list: list) -> str:
    data = [{'target': s.name, 'tags': dict(s.tags),
             'datapoints': [[v, s.start + i * s.step] for i, v in enumerate(s)]}
            for s in series_list]
    return json.dumps(data).replace('NaN,', 'null,').replace('Infinity,', '1e9999,')


@pytest.mark.parametrize('accelerated', [True, False], ids=['C join_rows', 'numpy cells'])
def test_orjson_cells_write_what_json_writes(accelerated: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    if accelerated:
        assert jsonfmt._rows is not None, 'webapp.render._rows is not built'
    else:
        monkeypatch.setattr(jsonfmt, '_rows', None)
    rng = np.random.RandomState(5)
    magnitudes = 10.0 ** rng.randint(-12, 22, size=6000)
    row = (rng.random_sample(6000) - 0.3) * magnitudes
    row[::97] = np.nan
    row[5] = math.inf
    row[6] = -math.inf
    row[7] = 0.0
    row[8] = -0.0
    row[9:13] = [1e-3, 9.99e-4, 1e15, 9.999999999999998e14]
    series = [TimeSeries('s%d' % i, 1000, 1000 + 60 * 3000, 60,
                         [None if v != v else float(v) for v in row[i * 3000:(i + 1) * 3000]])
              for i in range(2)]
    assert row.size > jsonfmt.ORJSON_MIN_CELLS     # the orjson path, not the distinct one
    body = b''.join(jsonfmt.render_iter(series)).decode()
    assert body == dumps_like_graphite(series)


@pytest.mark.parametrize('points', [10, 60, 128])
def test_few_cells_printed_once_per_distinct_value(points: int) -> None:
    odd = [0.5, -0.0, 0.0, 1e-05, 1e16, 123456789.0, math.inf, -math.inf, None, 0.1 + 0.2]
    series = [TimeSeries('s%d' % i, 0, 60 * points, 60,
                         [odd[(i * 7 + j * 3) % len(odd)] for j in range(points)])
              for i in range(2)]
    assert 2 * points <= jsonfmt.ORJSON_MIN_CELLS   # the distinct-value path
    assert b''.join(jsonfmt.render_iter(series)).decode() == dumps_like_graphite(series)


@settings(max_examples=400, deadline=None)
@given(st.lists(values, min_size=2, max_size=5), st.sampled_from([0.0, 0.5, 1.0]),
       st.sampled_from(['sum', 'average', 'max', 'min']))
def test_array_aggregate_equals_python_rows(lists: list, ratio: float, how: str) -> None:
    from itertools import zip_longest
    series = [TimeSeries('s%d' % i, 0, 60 * len(v), 60, v) for i, v in enumerate(lists)]
    got = array_aggregate(series, how, ratio)
    want = []
    for row in zip_longest(*lists):
        known = [v for v in row if v is not None]
        if not (known and xff(len(known), len(row), ratio)):
            want.append(None)
        elif how in ('max', 'min'):
            want.append(max(known) if how == 'max' else min(known))
        else:
            total = plain_sum(known)   # graphite-web's sum(): one after the other from 0
            want.append(total / len(known) if how == 'average' else total)
    assert [repr(v) for v in got] == [repr(v) for v in want]


def test_join_rows_checks_its_input() -> None:
    from webapp.render import _rows
    heads, suffixes = [b'A[[', b', B[['], [b', 1], [', b', 2]]}']
    assert _rows.join_rows(b'1.5,null,3e-05,4.0', 2, heads, suffixes, [2], [b'3e-05x'],
                           b']') == b'A[[1.5, 1], [null, 2]]}, B[[3e-05x, 1], [4.0, 2]]}]'
    with pytest.raises(ValueError, match='fewer cells'):
        _rows.join_rows(b'1.5,2.5,3.5', 2, heads, suffixes, [], [], b'')
    with pytest.raises(ValueError, match='more cells'):
        _rows.join_rows(b'1,2,3,4,5', 2, heads, suffixes, [], [], b'')
    with pytest.raises(ValueError, match='suffixes must have 2 items'):
        _rows.join_rows(b'1,2,3,4', 2, heads, suffixes[:1], [], [], b'')
    with pytest.raises(TypeError):
        _rows.join_rows(b'1,2,3,4', 2, ['A', 'B'], suffixes, [], [], b'')


def python_join(text: bytes, points: int, heads: list, suffixes: list, odd: list,
                fixes: list, tail: bytes) -> bytes:
    cells = text.split(b',')
    for i, fix in zip(odd, fixes, strict=True):
        cells[i] = fix
    out = []
    for r, head in enumerate(heads):
        out.append(head)
        for p in range(points):
            out.append(cells[r * points + p] + suffixes[p])
    return b''.join(out) + tail


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.data())
def test_join_rows_equals_a_plain_join(rows: int, points: int, data: Any) -> None:
    """Cells of every length around the fixed-size copies (long ones, short ones, at the
    end of the text) and suffixes longer than the table's first stride."""
    from webapp.render import _rows
    cell = st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b',', b'.'))
    cells = data.draw(st.lists(cell, min_size=rows * points, max_size=rows * points))
    suffixes = data.draw(st.lists(st.binary(max_size=70), min_size=points, max_size=points))
    heads = data.draw(st.lists(st.binary(max_size=50), min_size=rows, max_size=rows))
    odd = sorted(data.draw(st.sets(st.integers(0, rows * points - 1), max_size=3)))
    fixes = [data.draw(st.binary(max_size=40)) for _ in odd]
    text = b','.join(cells)
    want = python_join(text, points, heads, suffixes, odd, fixes, b']x')
    assert _rows.join_rows(text, points, heads, suffixes, odd, fixes, b']x') == want
