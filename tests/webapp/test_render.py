"""/render: parameters, every output format and graphite-web's consolidation."""

from __future__ import annotations

import csv
import io
import json
import pickle
from typing import Any

import pytest
import whisper

from tests.webapp.helpers import STEP, call
from webapp.render.series import TimeSeries
from webapp.render.views import render_json
from webapp.storage.nodes import safe_loads


def render(app: Any, base_time: int, **params: Any) -> tuple[int, dict, bytes]:
    params.setdefault('from', base_time - 3600)
    params.setdefault('until', base_time)
    return call(app, '/render', params)


def js(app: Any, base_time: int, **params: Any) -> list[dict]:
    status, headers, body = render(app, base_time, format='json', **params)
    assert status == 200, body
    assert headers['Content-Type'] == 'application/json'
    return json.loads(body)


def test_json_matches_whisper_fetch(app: Any, base_time: int, whisper_tree: str) -> None:
    out = js(app, base_time, target='servers.web1.cpu')
    (start, end, step), values = whisper.fetch(whisper_tree + '/servers/web1/cpu.wsp',
                                               base_time - 3600, base_time)
    assert out == [{'target': 'servers.web1.cpu', 'tags': {'name': 'servers.web1.cpu'},
                    'datapoints': [[v, start + i * step] for i, v in enumerate(values)]}]
    assert values[-10:] == [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]


def test_wildcards_sort_by_name_and_several_targets(app: Any, base_time: int) -> None:
    out = js(app, base_time, target=['servers.web*.mem', 'servers.db1.cpu'])
    assert [s['target'] for s in out] == ['servers.web1.mem', 'servers.web2.mem',
                                          'servers.db1.cpu']
    bracket = js(app, base_time, **{'target[]': ['servers.db1.cpu']})
    assert [s['target'] for s in bracket] == ['servers.db1.cpu']


def test_post_form_and_query_targets_combine(app: Any, base_time: int) -> None:
    body = 'target=servers.web2.cpu&format=json&from=%d&until=%d' % (base_time - 600, base_time)
    status, _, data = call(app, '/render/', {'target': 'servers.web1.cpu'}, method='POST',
                           body=body.encode())
    assert status == 200
    assert [s['target'] for s in json.loads(data)] == ['servers.web1.cpu', 'servers.web2.cpu']


def test_max_data_points_consolidates_like_graphite(app: Any, base_time: int) -> None:
    out = js(app, base_time, target='servers.web1.cpu', maxDataPoints=10)
    b = base_time
    expected = [[2.5, b - 3240], [6.5, b - 2880], [23 / 6, b - 2520], [4.5, b - 2160],
                [31 / 6, b - 1800], [2.5, b - 1440], [6.5, b - 1080], [23 / 6, b - 720],
                [4.5, b - 360], [0.5, b]]
    got = out[0]['datapoints']
    assert [t for _, t in got] == [t for _, t in expected]
    assert [round(v, 9) for v, _ in got] == [round(v, 9) for v, _ in expected]
    one = js(app, base_time, target='servers.web1.cpu', maxDataPoints=1)[0]['datapoints']
    assert one == [[4.5, base_time - 3540]]
    same = js(app, base_time, target='servers.web1.cpu', maxDataPoints=1000)[0]['datapoints']
    assert len(same) == 60
    assert js(app, base_time, target='servers.web1.cpu', maxDataPoints='x')[0]['datapoints'] \
        == same


def test_no_null_points(app: Any, base_time: int) -> None:
    full = js(app, base_time, target='gaps.a')[0]['datapoints']
    assert any(v is None for v, _ in full)
    out = js(app, base_time, target=['gaps.a', 'nonexistent.x'], noNullPoints='1')
    assert [s['target'] for s in out] == ['gaps.a']
    assert all(v == 1.0 for v, _ in out[0]['datapoints']) and len(out[0]['datapoints']) == 30


def test_json_null_nan_and_infinity() -> None:
    series = TimeSeries('x', 100, 160, 10, [None, float('nan'), float('inf'), -float('inf'),
                                           1, 2.5])
    resp = render_json({}, [series])
    assert resp.body == (b'[{"target": "x", "tags": {"name": "x"}, "datapoints": [[null, 100], '
                         b'[null, 110], [1e9999, 120], [-1e9999, 130], [1, 140], [2.5, 150]]}]')
    pretty = render_json({'pretty': True}, [TimeSeries('x', 100, 120, 10, [float('nan'), 1.0])])
    assert json.loads(pretty.body)[0]['datapoints'] == [[None, 100], [1.0, 110]]


def test_jsonp_and_pretty(app: Any, base_time: int) -> None:
    status, headers, body = render(app, base_time, target='servers.web1.cpu', format='json',
                                   jsonp='cb', **{'from': base_time - 120})
    assert headers['Content-Type'] == 'text/javascript'
    assert body.startswith(b'cb([{"target"') and body.endswith(b'])')
    status, _, body = render(app, base_time, target='servers.web1.cpu', format='json',
                             pretty='1', **{'from': base_time - 120})
    assert b'\n  {\n' in body and json.loads(body)[0]['target'] == 'servers.web1.cpu'


def test_csv(app: Any, base_time: int) -> None:
    status, headers, body = render(app, base_time, target='gaps.a', format='csv',
                                   tz='America/New_York', **{'from': base_time - 180})
    assert status == 200 and headers['Content-Type'] == 'text/csv'
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert [r[0] for r in rows] == ['gaps.a'] * 3
    assert {r[2] for r in rows} == {'1.0', ''}
    from datetime import datetime
    from zoneinfo import ZoneInfo
    first = datetime.fromtimestamp(base_time - 120, ZoneInfo('America/New_York'))
    assert rows[0][1] == first.strftime('%Y-%m-%d %H:%M:%S')
    assert body.endswith(b'\r\n')


def test_raw(app: Any, base_time: int) -> None:
    status, headers, body = render(app, base_time, target='gaps.b', format='raw',
                                   **{'from': base_time - 180})
    assert headers['Content-Type'] == 'text/plain'
    assert body.decode() == 'gaps.b,%d,%d,60|None,2.0,None\n' % (base_time - 120, base_time + 60)
    status, _, legacy = render(app, base_time, target='gaps.b', rawData='1',
                               **{'from': base_time - 180})
    assert legacy == body


def test_pickle_is_graphite_web_cluster_shape(app: Any, base_time: int) -> None:
    status, headers, body = render(app, base_time, target='servers.web*.cpu', format='pickle',
                                   local='1', noCache='1', now=base_time,
                                   **{'from': base_time - 120})
    assert headers['Content-Type'] == 'application/pickle'
    data = safe_loads(body)
    assert [d['name'] for d in data] == ['servers.web1.cpu', 'servers.web2.cpu']
    assert set(data[0]) == {'name', 'start', 'end', 'step', 'values', 'pathExpression',
                            'valuesPerPoint', 'consolidationFunc', 'xFilesFactor'}
    assert data[0]['pathExpression'] == 'servers.web*.cpu'
    assert (data[0]['start'], data[0]['step'], data[0]['values']) == (base_time - 60, 60,
                                                                       [1.0, 0.0])
    assert pickle.loads(body) == data


def test_template_variables(app: Any, base_time: int) -> None:
    out = js(app, base_time, target='template(servers.$host.cpu, host="web2")')
    assert [s['target'] for s in out] == ['servers.web2.cpu']
    out = js(app, base_time, target='template(servers.$1.$2, "db1", "mem")')
    assert [s['target'] for s in out] == ['servers.db1.mem']
    out = js(app, base_time, target='template(servers.$host.cpu, host="web2")',
             **{'template[host]': 'web1'})
    assert [s['target'] for s in out] == ['servers.web1.cpu']
    out = js(app, base_time, target='template(scale(servers.web1.cpu, $f), f=2)',
             **{'from': base_time - 120})
    assert out[0]['datapoints'][-1][0] == 0.0 and out[0]['datapoints'][0][0] == 2.0


def test_functions_and_pipes(app: Any, base_time: int) -> None:
    a = js(app, base_time, target='sumSeries(servers.web*.cpu)')
    b = js(app, base_time, target='servers.web*.cpu|sumSeries()')
    assert a == b and a[0]['datapoints'][-1][0] == 100.0
    shifted = js(app, base_time + 600, target='timeShift(servers.web1.cpu, "10min")',
                 **{'from': base_time - 3000})
    plain = js(app, base_time, target='servers.web1.cpu', **{'from': base_time - 3600})
    assert [v for v, _ in shifted[0]['datapoints']] == [v for v, _ in plain[0]['datapoints']]


def test_now_param_and_relative_times(app: Any, base_time: int) -> None:
    out = js(app, base_time, target='servers.web1.cpu', now=str(base_time), **{
        'from': '-5min', 'until': 'now'})
    assert [t for _, t in out[0]['datapoints']][-1] == base_time
    assert len(out[0]['datapoints']) == 5


def test_cache_headers(app: Any, base_time: int) -> None:
    _, headers, _ = render(app, base_time, target='gaps.a', format='json')
    assert headers['Cache-Control'] == 'max-age=60' and 'Expires' in headers
    _, headers, _ = render(app, base_time, target='gaps.a', format='json', noCache='1')
    assert 'no-cache' in headers['Cache-Control']


@pytest.mark.parametrize('params, fragment', [
    ({'target': 'nosuchfunction(a.b)'}, b'unknown function: nosuchfunction'),
    ({'target': 'sumSeries(a.b'}, b'expected'),
    ({'target': 'a.b)'}, b'unexpected text'),
    ({'target': 'a.b', 'from': 'banana'}, b'Unknown day reference: banana'),
    ({'target': 'a.b', 'until': '-5x'}, b"Invalid offset unit 'x'"),
    ({'target': 'a.b', 'from': '1600000000', 'until': '1600000000'}, b'Invalid empty time range'),
    ({'target': 'a.b', 'graphType': 'bar'}, b"Invalid graphType 'bar'"),
    ({'target': 'a.b', 'xFilesFactor': 'lots'}, b'Invalid parameters'),
    ({'target': 'a.b', 'cacheTimeout': 'soon'}, b'Invalid parameters'),
    ({'target': 'template(a.b, c.d)'}, b'invalid template() syntax'),
    ({'target': 'f(' * 2000 + 'a' + ')' * 2000}, b'Invalid parameters'),
    ({'target': 'scale(servers.web1.cpu, "x")'}, b'Invalid "float" value'),
    ({'target': 'sumSeries(1)'}, b'"seriesList" value'),
    ({'target': 'sumSeries(servers.web1.cpu, foo=1)'}, b'Unexpected key word arguments: foo'),
    ({'target': 'alias(servers.web1.cpu)'}, b'Missing required parameter "newName"'),
    ({'target': 'scale()'}, b'Missing required parameter "seriesList"'),
    ({'target': 'movingAverage(servers.web1.cpu, "bogus")'}, b'bogus'),
    ({'target': 'servers.web1.cpu', 'graphType': 'pie', 'pieMode': 'median'}, b'pieMode'),
])
def test_user_errors_are_400_text(app: Any, params: dict, fragment: bytes) -> None:
    params.setdefault('format', 'json')
    status, headers, body = call(app, '/render', params)
    assert status == 400, body
    assert headers['Content-Type'].startswith('text/plain')
    assert fragment in body and b'<html' not in body.lower()


def test_empty_results(app: Any, base_time: int) -> None:
    assert js(app, base_time, target='no.such.metric') == []
    assert js(app, base_time, target='') == []
    status, _, body = render(app, base_time, target='no.such', format='pickle')
    assert safe_loads(body) == []


def test_images(app: Any, base_time: int) -> None:
    graphs = pytest.importorskip('webapp.graphs')
    if not hasattr(graphs, 'render_graph'):
        pytest.skip('graph renderer not available yet')
    status, headers, body = render(app, base_time, target='servers.web*.cpu')
    assert status == 200 and headers['Content-Type'] == 'image/png'
    assert body.startswith(b'\x89PNG')
    status, headers, body = render(app, base_time, target='servers.web1.cpu', format='svg')
    assert headers['Content-Type'] == 'image/svg+xml' and b'<svg' in body
    status, headers, body = render(app, base_time, target=['a:1', 'b:2'], graphType='pie')
    assert status == 200 and body.startswith(b'\x89PNG')


def test_step_is_minute(app: Any, base_time: int) -> None:
    out = js(app, base_time, target='servers.db1.mem', **{'from': base_time - 300})
    stamps = [t for _, t in out[0]['datapoints']]
    assert all(b - a == STEP for a, b in zip(stamps, stamps[1:], strict=False))
