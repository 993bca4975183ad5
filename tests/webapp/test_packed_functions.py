"""Functions computed on packed rows give exactly what their list code gives.

scale, derivative, nonNegativeDerivative, perSecond, keepLastValue, transformNull,
summarize, sortByMaxima, highestMax and asPercent take their first argument as packed whisper rows
(``packed_input``, webapp/functions/packed_rows.py). The oracle is the same function on
plain lists (which the recorded graphite-web answers check): names, tags, order and the
repr of every value must match, with gaps at the edges, NaN, infinities, counter wraps,
maxValue/minValue arguments and two step sizes.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.webapp.helpers import aligned_now, make_whisper, render_with_and_without_packed
from webapp.functions import packed_rows
from webapp.functions.grouping import asPercent
from webapp.functions.sorting import sortByMaxima
from webapp.plugins import RENDER_FUNCTIONS
from webapp.functions.transform import (
    derivative, keepLastValue, nonNegativeDerivative, perSecond, scale, transformNull,
)
from webapp.functions.timefuncs import summarize
from webapp.render.series import PackedSeries, TimeSeries
from webapp.storage import packed

INF = float('inf')
highestMax = RENDER_FUNCTIONS.get('highestMax').func
cell = st.one_of(st.none(), st.floats(width=64), st.integers(-50, 50).map(float),
                 st.sampled_from([0.0, -0.0, INF, -INF, float('nan'), 1e300, 7.25e-7]))


def as_packed(rows: list[list], step: int) -> list[PackedSeries]:
    width = len(rows[0])
    values = np.array([[0.0 if v is None else v for v in row] for row in rows],
                      dtype=np.float64).reshape(len(rows), width)
    valid = np.array([[v is not None for v in row] for row in rows],
                     dtype=bool).reshape(len(rows), width)
    block = packed.Block(values, valid, (1000, 1000 + step * width, step))
    return [PackedSeries('a.s%d' % i, 1000, 1000 + step * width, step,
                         packed.PackedValues(block, i)) for i in range(len(rows))]


def as_lists(rows: list[list], step: int) -> list[TimeSeries]:
    return [TimeSeries('a.s%d' % i, 1000, 1000 + step * len(row), step, list(row))
            for i, row in enumerate(rows)]


def seen(result: list) -> list[tuple]:
    """What a caller sees of a result: name, tags, times and each value's repr."""
    out = []
    for series in result:
        if isinstance(series, PackedSeries):
            series.materialize()
        out.append((series.name, series.pathExpression, dict(series.tags), series.start,
                    series.end, series.step, [repr(v) for v in list.__iter__(series)]))
    return out


CALLS = [
    (scale, (0.5,)), (scale, (-3,)), (scale, (1e-300,)),
    (derivative, ()),
    (nonNegativeDerivative, ()), (nonNegativeDerivative, (100.0,)),
    (nonNegativeDerivative, (40, 5)), (nonNegativeDerivative, (None, -10.0)),
    (nonNegativeDerivative, (None, 0)), (nonNegativeDerivative, (2 ** 60,)),
    (perSecond, ()), (perSecond, (100.0,)), (perSecond, (40, 5)), (perSecond, (None, -10.0)),
    (keepLastValue, ()), (keepLastValue, (1,)), (keepLastValue, (2,)), (keepLastValue, (0,)),
    (transformNull, ()), (transformNull, (-1.5,)), (transformNull, (0,)),
    (sortByMaxima, ()), (highestMax, (2,)),
    (summarize, ('1min',)), (summarize, ('5min', 'average')), (summarize, ('1h', 'avg')),
    (summarize, ('2min', 'total')), (summarize, ('3min', 'max')), (summarize, ('7min',)),
    (summarize, ('1min', 'sum', True)),
]


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 4).flatmap(lambda n: st.integers(0, 30).flatmap(
    lambda w: st.lists(st.lists(cell, min_size=w, max_size=w), min_size=n, max_size=n))),
    step=st.sampled_from([10, 60, 7]))
@example(rows=[[None, 1.0, None, None, 3.0, None]], step=60)     # gaps at both edges
@example(rows=[[5.0, 2.0, float('nan'), 9.0, 1e308, -1e308]], step=10)
def test_packed_rows_give_the_list_answers(rows: list[list], step: int) -> None:
    for func, args in CALLS:
        want = seen(func({}, as_lists(rows, step), *args)) if rows[0] else None
        if rows[0]:
            got = seen(func({}, as_packed(rows, step), *args))
            assert got == want, (func.__name__, args)


def test_packed_rows_are_kept_for_the_json_writer() -> None:
    rows = [[1.0, None, 4.0, 2.0], [0.5, 0.25, None, None]]
    for func, args in CALLS:
        if func in (sortByMaxima, highestMax, summarize) or args in ((), (0,), (2 ** 60,)):
            continue
        result = func({}, as_packed(rows, 60), *args)
        assert all(type(s) is PackedSeries and s.packed is not None for s in result), \
            func.__name__
    # an int default (a direct call; requests pass floats) where a gap would show it: the
    # list code, which writes 0, not 0.0
    assert transformNull({}, as_packed(rows, 60), 0)[0].packed is None
    assert transformNull({}, as_packed([[1.0, 2.0]], 60), 0)[0].packed is not None
    # a bound numpy would round: the list code
    assert getattr(nonNegativeDerivative({}, as_packed(rows, 60), 2 ** 60)[0], 'packed',
                   None) is None


def test_as_percent_of_one_total_on_packed_rows() -> None:
    rows = [[1.0, None, 4.0, 2.0, -0.0], [0.5, 0.25, None, INF, 3.0]]
    totals = [2.0, 0.0, None, 8.0, 1e-310]
    expect = seen(asPercent({}, as_lists(rows, 60), [TimeSeries('t', 1000, 1300, 60,
                                                                 totals)]))
    got = seen(asPercent({}, as_packed(rows, 60), [TimeSeries('t', 1000, 1300, 60, totals)]))
    assert got == expect


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.floats(width=64), st.floats(-1e4, 1e4),
                 st.integers(-10 ** 9, 10 ** 9).map(lambda k: k / 128),   # exact ties
                 st.integers(-10 ** 12, 10 ** 12).map(lambda k: k / 2e6),
                 st.floats(-1e-5, 1e-5), st.floats(1e9, 1e11)))
@example(0.0078125)
@example(-2.5e-7)
@example(4503599627.3700005)
def test_round6_is_python_round(value: float) -> None:
    got = packed_rows.round6(np.array([[value, 1.0]]))[0, 0]
    assert repr(float(got)) == repr(round(value, 6))


# --- whole requests: packed (numpy) against the list paths --------------------------------
@pytest.fixture
def counter_tree(tmp_path: Any) -> tuple[str, int]:
    """Full-precision values, counters that wrap, gaps at the edges, NaN and infinities,
    at 60 s and at 10 s."""
    base = aligned_now() - 3600
    root = str(tmp_path / 'whisper')
    rng = np.random.default_rng(15)
    for i in range(4):
        level = 0.0
        points = []
        for j in range(2, 88):          # the first and last slots of the range stay empty
            level = (level + float(rng.random()) * 30) % 100   # wraps at 100
            if j % (5 + i):
                points.append((base - j * 60, level))
        make_whisper(root, 'c.m%d.count' % i, points)
    make_whisper(root, 'c.odd.count', [(base - j * 60, [float('nan'), INF, -INF, 3.5][j % 4])
                                       for j in range(90)])
    for i in range(3):
        make_whisper(root, 'f.m%d.count' % i,
                     [(base - j * 10, float(rng.random()) * 1000) for j in range(5, 500)
                      if j % (4 + i)], archives=[(10, 720)])
    return root, base


PACKED_TARGETS = [
    'scale(c.*.count,0.5)', 'scale(f.*.count,-2)', 'derivative(c.*.count)',
    'derivative(f.*.count)', 'nonNegativeDerivative(c.*.count)',
    'nonNegativeDerivative(c.*.count,100)', 'nonNegativeDerivative(c.*.count,99.5,3)',
    'nonNegativeDerivative(f.*.count,None,2)', 'perSecond(c.*.count)',
    'perSecond(f.*.count)', 'perSecond(c.*.count,100)', 'perSecond(c.*.count,None,-1)',
    'keepLastValue(c.*.count)', 'keepLastValue(c.*.count,1)', 'keepLastValue(f.*.count,2)',
    'transformNull(c.*.count,0)', 'transformNull(f.*.count,-1.5)', 'transformNull(f.*.count)',
    'transformNull(c.m0.count,-3)', 'alias(transformNull(c.m1.count,7),"t")',
    'transformNull(c.*.count,5000000000)', 'summarize(c.*.count,"5min")',
    'summarize(f.*.count,"1min","avg")', 'summarize(c.*.count,"1h","sum",true)',
    'summarize(c.*.count,"10min","max")', 'summarize(f.*.count,"7s")',
    'sortByMaxima(c.*.count)',
    'sortByMaxima(f.*.count)', 'highestMax(c.*.count,2)', 'highestMax(f.*.count,1)',
    'asPercent(c.m*.count,sumSeries(c.m*.count))', 'asPercent(f.*.count,c.m0.count)',
    # nested: the inner result comes back as lists
    'alias(scale(c.*.count,2),"x")', 'sumSeries(derivative(c.m*.count))',
    'aliasByNode(perSecond(f.*.count),1)', 'highestMax(derivative(c.*.count),1)',
    # both step sizes in one call: rows of different lengths go the list way
    'scale(*.*.count,3)', 'perSecond(*.*.count)',
]


@pytest.mark.parametrize('extra', [{}, {'maxDataPoints': 7}, {'format': 'csv'}, 'no C'])
def test_app_answers_same_with_and_without_packed_rows(counter_tree: tuple[str, int],
                                                       make_web_settings: Any,
                                                       extra: Any, monkeypatch: Any) -> None:
    if extra == 'no C':      # the JSON writer without its C accelerator
        from webapp.render import jsonfmt
        monkeypatch.setattr(jsonfmt, '_rows', None)
        extra = {'maxDataPoints': 1000}
    root, base = counter_tree
    params = dict({'format': 'json', 'from': base - 5400, 'until': base, 'now': base,
                   'target': PACKED_TARGETS}, **extra)
    fast, slow = render_with_and_without_packed(make_web_settings(WHISPER_DIR=root), params)
    assert fast[0] == slow[0] == 200
    assert fast[2] == slow[2]
    if not extra:
        answer = json.loads(fast[2])
        assert len(answer) > 40 and any(v is None for s in answer for v, _ in s['datapoints'])
        # the default is a float parameter: 0 arrives as 0.0, the packed path takes it
        filled = [v for s in answer if s['target'] == 'transformNull(c.m0.count,0)'
                  for v, _ in s['datapoints']]
        assert None not in filled and any(v == 0 for v in filled)


def test_summarize_buckets_come_from_the_rows() -> None:
    rows = [[1.5, None, 2.25, 4.0, None, None, 8.0], [None] * 7]
    got = packed_rows.bucket_values(as_packed(rows, 10), 'sum', 30)
    assert got == [[1.5, 6.25, 8.0], [None, None, None]]   # buckets from 990: 1000, 1020..
    assert seen(summarize({}, as_packed(rows, 10), '30s')) == \
        seen(summarize({}, as_lists(rows, 10), '30s'))
    # buckets that do not fall on points, or other functions: the list code
    assert packed_rows.bucket_values(as_packed(rows, 10), 'sum', 25) is None
    assert packed_rows.bucket_values(as_packed(rows, 10), 'median', 30) is None
