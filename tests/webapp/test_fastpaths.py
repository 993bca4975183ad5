"""The numpy fast paths give exactly the bytes of the list paths and of graphite-web.

Oracles: ``whisper.fetch`` for reads, a line-by-line port of graphite-web's JSON view
(tests/webapp/json_oracle.py) for the writer and consolidation, and the same app with
``packed.ENABLED = False`` (plain lists everywhere) for whole requests.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from typing import Any, Optional

import pytest
import whisper
from hypothesis import HealthCheck, given, settings, strategies as st

from carbon.storage.whisper_format import CorruptWhisperFile
from tests.webapp.json_oracle import Series, plain_sum, render_json_body
from tests.webapp.helpers import (
    STEP, aligned_now, call, create_whisper_with, make_whisper, render_with_and_without_packed,
)
from webapp.app import make_app
from webapp.render.series import PackedSeries, TimeSeries
from webapp.render.views import render_json
from webapp.storage import packed, whisper_read

np = pytest.importorskip('numpy')
NOW = 1_700_000_000

special = st.sampled_from([float('nan'), float('inf'), -float('inf'), -0.0, 0.0, 1e16, 1e-5,
                           5e-324, 1.7976931348623157e308, 0.1, -2.5, 100.0, 123456789.0])
present_values_st = st.one_of(special, st.floats(allow_nan=True, allow_infinity=True),
                              st.integers(-1000, 1000).map(float),
                              st.integers(-400, 400).map(lambda i: i / 4))
values_st = st.one_of(st.none(), present_values_st)


# --- reads --------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(files=st.lists(st.tuples(
    st.sampled_from([[(1, 50)], [(10, 30)], [(60, 20), (300, 12)], [(7, 13), (21, 9)],
                     [(10, 60), (60, 80)]]),   # the second archive starts past 512 bytes
    st.lists(st.tuples(st.integers(0, 4000), present_values_st),
             max_size=30)), min_size=1, max_size=4),
       start=st.integers(-200, 4500), length=st.integers(0, 4500),
       now_shift=st.integers(-100, 100), enabled=st.booleans(), direct=st.booleans())
def test_read_many_matches_whisper_fetch(files: list, start: int, length: int, now_shift: int,
                                         enabled: bool, direct: bool) -> None:
    tmp = tempfile.mkdtemp()
    old, reader = packed.ENABLED, whisper_read._points
    packed.ENABLED = enabled
    if not direct:
        whisper_read._points = None      # the Python decoder (decode_block)
    try:
        paths = []
        for i, (archives, writes) in enumerate(files):
            path = os.path.join(tmp, 'm%d.wsp' % i)
            create_whisper_with(path, archives, writes, NOW)
            paths.append(path)
        now = NOW + now_shift
        from_time = NOW - 4000 + start
        answers = whisper_read.read_many(paths, from_time, from_time + length, now)
        for path, answer in zip(paths, answers, strict=True):
            expected = whisper.fetch(path, from_time, from_time + length, now=now)
            data, header = answer
            assert header['archives'] == whisper.info(path)['archives']
            if expected is None:
                assert data is None
                continue
            (time_info, values) = data
            assert isinstance(values, packed.PackedValues) == enabled
            got = packed.to_list(values)
            assert time_info == expected[0]
            assert [repr(v) for v in got] == [repr(v) for v in expected[1]]
    finally:
        packed.ENABLED, whisper_read._points = old, reader
        shutil.rmtree(tmp)


def test_direct_reader_reports_unreadable_files(tmp_path: Any) -> None:
    import errno
    assert whisper_read._points is not None, 'the C reader (webapp.storage._points) is built'
    now = aligned_now(60)
    good = make_whisper(str(tmp_path), 'good', [(now - 60, 1.0)])
    short = make_whisper(str(tmp_path), 'short', [(now - 60, 2.0)])
    with open(short, 'r+b') as fh:       # the range is cut off after the header was read
        fh.truncate(os.path.getsize(short) - 12)
    answers = whisper_read.read_many([good, short], now - 600, now, now)
    assert isinstance(answers[1], CorruptWhisperFile)
    (time_info, values), _header = answers[0]
    assert 1.0 in packed.to_list(values)
    values = np.ones((1, 2))
    valid = np.ones((1, 2), dtype=bool)
    failed = whisper_read._points.scan(0, [str(tmp_path / 'gone.wsp').encode()], [28], [24],
                                       [], 60, 180, 60, 2, 0, 1, False, values, valid,
                                       bytearray())
    assert failed == [(0, errno.ENOENT)] and not valid.any() and not values.any()


def test_read_many_reports_corrupt_and_missing_files(tmp_path: Any) -> None:
    now = aligned_now(60)
    good = make_whisper(str(tmp_path), 'good', [(now - 60, 1.0)])
    bad = str(tmp_path / 'bad.wsp')
    with open(bad, 'wb') as fh:
        fh.write(b'\x00\x00\x00\x09' + b'\x00' * 20)
    answers = whisper_read.read_many([bad, str(tmp_path / 'missing.wsp'), good],
                                     now - 600, now - 1, now)
    assert isinstance(answers[0], CorruptWhisperFile)
    assert str(answers[0]) == 'Unable to read header (%s)' % bad
    assert isinstance(answers[1], FileNotFoundError)
    assert packed.to_list(answers[2][0][1])[-1] == 1.0


# --- JSON writer -----------------------------------------------------------------------------
names = st.one_of(st.sampled_from(['a.b', 'sumSeries(a.NaN,b.Infinity,c)', 'a.b;k=v;z=NaN,',
                                   'caf\u00e9.\u2603', 'x"y\\z', 'tab\tname']),
                  st.text(min_size=1, max_size=12))


@settings(max_examples=150, deadline=None)
@given(series=st.lists(st.tuples(names, st.integers(0, 10 ** 9), st.integers(1, 600),
                                 st.lists(values_st, max_size=40)), max_size=5),
       jsonp=st.sampled_from([None, 'cb', 'x\u00e9']))
def test_json_writer_matches_graphite_web(series: list, jsonp: Optional[str]) -> None:
    ours = [TimeSeries(name, start, start + step * len(values), step, values)
            for name, start, step, values in series]
    ref = [Series(s.name, s.start, s.end, s.step, list(s), tags=dict(s.tags)) for s in ours]
    opts: dict[str, Any] = {} if jsonp is None else {'jsonp': jsonp}
    body = render_json(opts, ours).body
    expected = render_json_body(ref)
    if jsonp is not None:
        expected = ('%s(' % jsonp).encode() + expected + b')'
    assert body == expected


def _packed_series(rows: list[list], start: int, step: int, xff: float) -> list[PackedSeries]:
    width = len(rows[0])
    values = np.array([[0.0 if v is None else v for v in row] for row in rows],
                      dtype=np.float64).reshape(len(rows), width)
    valid = np.array([[v is not None for v in row] for row in rows],
                     dtype=bool).reshape(len(rows), width)
    block = packed.Block(values, valid, (start, start + step * width, step))
    return [PackedSeries('s.%d' % i, start, start + step * width, step,
                         packed.PackedValues(block, i), xFilesFactor=xff)
            for i in range(len(rows))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(width=st.integers(0, 200), count=st.integers(1, 4), data=st.data(),
       start=st.integers(10 ** 9, 10 ** 9 + 10 ** 6), step=st.sampled_from([1, 10, 60, 300]),
       max_points=st.one_of(st.none(), st.integers(1, 12), st.integers(1, 250)),
       xff=st.sampled_from([0.0, 0.25, 0.5, 1.0]))
def test_packed_rows_and_consolidation_match_graphite_web(
        width: int, count: int, data: Any, start: int, step: int, max_points: Optional[int],
        xff: float) -> None:
    cells = st.one_of(values_st, st.integers(0, 9).map(float)) if data.draw(st.booleans()) \
        else values_st
    rows = [data.draw(st.lists(cells, min_size=width, max_size=width)) for _ in range(count)]
    ours = _packed_series(rows, start, step, xff) if width else \
        [TimeSeries('s.%d' % i, start, start, step, []) for i in range(count)]
    ref = [Series(s.name, s.start, s.end, s.step, list(row), xFilesFactor=xff)
           for s, row in zip(ours, rows, strict=True)]
    opts = {} if max_points is None else {'maxDataPoints': max_points}
    assert render_json(opts, ours).body == render_json_body(ref, max_points)


def test_only_empty_series_render_as_empty_list() -> None:
    assert render_json({}, [TimeSeries('a', 0, 0, 60, [])]).body == b'[]'
    assert render_json_body([Series('a', 0, 0, 60, [])]) == b'[]'


# --- whole requests, fused aggregates ---------------------------------------------------------
@pytest.fixture
def decimal_tree(tmp_path: Any) -> tuple[str, int]:
    """Series whose values are non-integral decimals (sums depend on the addition order)."""
    base = aligned_now() - 3600
    root = str(tmp_path / 'whisper')
    rng = np.random.default_rng(7)
    for i in range(12):
        points = [(base - j * STEP, round(float(rng.normal(50, 30)), 3))
                  for j in range(90) if (i * 7 + j) % (5 + i % 4)]
        make_whisper(root, 'dec.h%02d.load' % i, points)
    make_whisper(root, 'dec.nan.load', [(base - j * STEP, float('nan') if j % 9 == 0 else 1.5)
                                         for j in range(90)])
    # signed zeros: max()/min() keep the first of 0.0 and -0.0
    make_whisper(root, 'dec.zneg.load', [(base - j * STEP, -0.0 if j % 3 else 0.0)
                                          for j in range(90)])
    make_whisper(root, 'dec.zpos.load', [(base - j * STEP, 0.0 if j % 2 else -0.0)
                                          for j in range(90)])
    for name, gap in (('grp.a.x', 3), ('grp.a.y', 4), ('grp.b.x', 5), ('grp.a.z', 7)):
        make_whisper(root, name, [(base - j * STEP, round(float(rng.normal(5, 3)), 3))
                                  for j in range(90) if j % gap])
    return root, base


TARGETS = [
    'dec.*.load', 'sumSeries(dec.h*.load)', 'averageSeries(dec.h0*.load, dec.h1*.load)',
    'sum(dec.*.load)', 'avg(dec.*.load)', 'sumSeries(dec.nan.load, dec.h01.load)',
    'maxSeries(dec.*.load)', 'scale(dec.h01.load, 0.1)', 'countSeries(dec.*.load)',
    'keepLastValue(dec.h0*.load)', 'sumSeries(dec.nothing.*)',
    # fused max/min, groupByNode(s); renames and limit written from packed rows
    'maxSeries(dec.h*.load)', 'minSeries(dec.h*.load)', 'maxSeries(dec.z*.load)',
    'minSeries(dec.z*.load)', 'minSeries(dec.*.load)',
    'groupByNode(dec.*.load,0,"sumSeries")', 'groupByNode(dec.*.load,1)',
    'groupByNode(dec.*.load,2,"maxSeries")', 'groupByNodes(dec.*.load,"min",0,2)',
    'groupByNodes(dec.h0*.load,"average",1)', 'groupByNode(dec.*.load,-2,"median")',
    'aliasByNode(dec.*.load,1)', 'alias(dec.h0*.load,"x")',
    'aliasSub(dec.h*.load,"h(\\d)","g\\1")', 'limit(dec.*.load,3)',
    'sumSeries(aliasByNode(dec.h0*.load,1))',
    'asPercent(dec.*.load,sumSeries(dec.h*.load))', 'asPercent(dec.h*.load)',
    'asPercent(dec.z*.load,sumSeries(dec.zneg.load))', 'asPercent(dec.h0*.load,2)',
    # moving windows on packed rows (fused), nested (lists) and not fused (NaN, median)
    'movingAverage(dec.h*.load,5)', 'movingSum(dec.*.load,"3min")',
    'movingWindow(dec.h*.load,4,"avg",0.6)', 'movingAverage(dec.h0*.load,3,0.9)',
    'alias(movingAverage(dec.h*.load,6),"m")', 'movingAverage(dec.nan.load,3)',
    'movingMedian(dec.h0*.load,3)', 'movingWindow(dec.h0*.load,"2min","median")',
    'timeShift(dec.h*.load,"2min")', 'alias(timeShift(dec.h0*.load,"1min"),"t")',
    'timeShift(movingAverage(dec.h*.load,3),"1min")',
    # groups of different sizes, summed all at once
    'groupByNode(grp.*.*,1,"sum")', 'groupByNode(grp.*.*,2,"average")',
    'groupByNodes(grp.*.*,"sumSeries",1,2)', 'alias(groupByNode(grp.*.*,1,"sum"),"g")',
]


@pytest.mark.parametrize('extra', [{}, {'maxDataPoints': 7}, {'maxDataPoints': 1},
                                   {'xFilesFactor': '0.75'}, {'noNullPoints': '1'},
                                   {'pretty': '1'}, {'jsonp': 'f'}, {'format': 'csv'},
                                   {'format': 'raw'}, {'format': 'pickle'}])
def test_app_bytes_same_with_and_without_numpy(decimal_tree: tuple[str, int], make_web_settings:
                                               Any, extra: dict) -> None:
    root, base = decimal_tree
    params = dict({'format': 'json', 'from': base - 5400, 'until': base, 'now': base,
                   'target': TARGETS}, **extra)
    fast, slow = render_with_and_without_packed(make_web_settings(WHISPER_DIR=root), params)
    assert fast[0] == slow[0] == 200
    assert fast[2] == slow[2]
    assert fast[1]['Content-Length'] == str(len(fast[2]))


def test_fused_sum_is_builtin_sum(decimal_tree: tuple[str, int],
                                         make_web_settings: Any) -> None:
    root, base = decimal_tree
    app = make_app(make_web_settings(WHISPER_DIR=root))
    try:
        params = {'format': 'json', 'from': base - 5400, 'until': base, 'now': base}
        out = json.loads(call(app, '/render', dict(params, target='sumSeries(dec.h*.load)'))[2])
        each = json.loads(call(app, '/render', dict(params, target='dec.h*.load'))[2])
    finally:
        app.close()
    assert out[0]['target'] == 'sumSeries(dec.h*.load)'
    assert out[0]['tags'] == {'name': 'sumSeries(dec.h*.load)', 'aggregatedBy': 'sum'}
    for i, (value, _) in enumerate(out[0]['datapoints']):
        column = [s['datapoints'][i][0] for s in each if s['datapoints'][i][0] is not None]
        expected = plain_sum(column) if column else None
        assert value == expected and (value is None or math.copysign(1, value) ==
                                      math.copysign(1, expected))


@pytest.mark.parametrize('target', ['averageSeries(dec.h*.load)', 'maxSeries(dec.h*.load)',
                                    'groupByNode(dec.*.load,0,"sum")',
                                    'groupByNodes(dec.h*.load,"max",0,2)',
                                    'movingAverage(dec.h*.load,5)',
                                    'movingWindow(dec.h*.load,"2min","sum",0.5)'])
def test_fused_path_is_used_and_matches_generic(decimal_tree: tuple[str, int],
                                                monkeypatch: Any, make_web_settings: Any,
                                                target: str) -> None:
    from webapp.render import fused
    root, base = decimal_tree
    calls = []
    original = fused.fused_aggregate

    def spy(*args: Any) -> Any:
        result = original(*args)
        calls.append(result is not None)
        return result
    monkeypatch.setattr('webapp.render.evaluator.fused_aggregate', spy)
    app = make_app(make_web_settings(WHISPER_DIR=root))
    try:
        params = {'format': 'json', 'from': base - 5400, 'until': base, 'now': base,
                  'target': target}
        fast = call(app, '/render', params)[2]
        monkeypatch.setattr(packed, 'ENABLED', False)
        slow = call(app, '/render', params)[2]
    finally:
        app.close()
    assert calls == [True, False] and fast == slow and json.loads(fast)


def test_fused_max_keeps_first_signed_zero() -> None:
    from webapp.render.fused import reduce_rows
    from webapp.render.series import PackedSeries
    block = packed.Block(np.array([[-0.0, 0.0, 1.0], [0.0, -0.0, float('nan')]]),
                         np.array([[True, True, True], [True, True, False]]), (0, 30, 10))
    rows = [PackedSeries('a', 0, 30, 10, packed.PackedValues(block, i)) for i in range(2)]
    for func, pick in (('max', max), ('min', min)):
        got = reduce_rows(rows, func, 0.0)
        want = [pick(v for v in column if v is not None)
                for column in zip(*(r.packed.tolist() for r in rows), strict=True)]
        assert [repr(v) for v in got] == [repr(v) for v in want]


def test_fused_group_arguments_come_from_the_signature() -> None:
    from webapp.functions.grouping import groupByNode, groupByNodes
    from webapp.render.fused import const_arguments
    from webapp.render.grammar import parse_target
    args = const_arguments(groupByNode, parse_target('groupByNode(a.*.b,1)'))
    assert (args['nodeNum'], args['callback']) == (1, 'average')      # its default
    args = const_arguments(groupByNodes, parse_target('groupByNodes(a.*.b,"max",0,2)'))
    assert (args['callback'], args['nodes']) == ('max', (0, 2))
    assert const_arguments(groupByNode, parse_target('groupByNode(a.*.b,1,"sum",3)')) is None
    assert const_arguments(groupByNode, parse_target('groupByNode(a.*.b,x.y)')) is None


def test_read_many_second_archive_past_the_header_read(tmp_path: Any) -> None:
    now = aligned_now(60)
    path = str(tmp_path / 'deep.wsp')
    whisper.create(path, [(10, 60), (60, 80)])          # archive 2 starts at byte 760
    whisper.update_many(path, [(now - j * 10, j * 0.25) for j in range(1, 400)])
    want = whisper.fetch(path, now - 3000, now, now=now)
    (time_info, values), _header = whisper_read.read_many([path], now - 3000, now, now)[0]
    assert time_info == want[0] and time_info[2] == 60
    assert [repr(v) for v in packed.to_list(values)] == [repr(v) for v in want[1]]
    assert any(v is not None for v in want[1])


@pytest.mark.parametrize('cells', [7, 40, 1 << 16])
def test_json_groups_of_printed_cells_give_the_same_bytes(decimal_tree: tuple[str, int],
                                                          make_web_settings: Any,
                                                          monkeypatch: Any, cells: int) -> None:
    """maxDataPoints rows are grouped by the cells they print (BLOCK_CELLS): however the
    series are split into groups (here 1-2 series a group, several, all of them), the
    body is the list path's."""
    from webapp.render import jsonfmt
    root, base = decimal_tree
    monkeypatch.setattr(jsonfmt, 'BLOCK_CELLS', cells)
    params = {'format': 'json', 'from': base - 5400, 'until': base, 'now': base,
              'target': ['dec.*.load', 'grp.*.*'], 'maxDataPoints': 20}
    fast, slow = render_with_and_without_packed(make_web_settings(WHISPER_DIR=root), params)
    assert fast[0] == slow[0] == 200 and fast[2] == slow[2]
    assert len(json.loads(fast[2])[0]['datapoints']) <= 20
