"""Render functions through the real app: grammar, evaluator, whisper data, JSON output."""

from __future__ import annotations

import json
from typing import Any

from tests.webapp.helpers import call


def render(app: Any, base_time: int, target: Any, **params: Any) -> list[dict]:
    params.setdefault('from', base_time - 3600)
    params.setdefault('until', base_time)
    status, _, body = call(app, '/render', dict(params, target=target, format='json'))
    assert status == 200, body
    return json.loads(body)


def test_grafana_alias_sub_wrapper(app: Any, base_time: int) -> None:
    out = render(app, base_time, r'aliasSub(sumSeries(servers.web*.cpu), "(^.*$)", "\1 A")')
    assert [s['target'] for s in out] == ['sumSeries(servers.web*.cpu) A']
    out = render(app, base_time, r'aliasSub(servers.*.mem, "^servers\.(\w+)\..*", "\1")')
    assert [s['target'] for s in out] == ['db1', 'web1', 'web2']


def test_names_of_common_functions(app: Any, base_time: int) -> None:
    cases = {
        'sumSeries(servers.*.cpu)': ['sumSeries(servers.*.cpu)'],
        'averageSeries(servers.web1.cpu,servers.web2.cpu)':
            ['averageSeries(servers.web1.cpu,servers.web2.cpu)'],
        'scale(servers.web1.cpu, 2)': ['scale(servers.web1.cpu,2)'],
        'movingAverage(servers.web1.cpu, "5min")': ['movingAverage(servers.web1.cpu,"5min")'],
        'summarize(servers.web1.cpu, "10min", "max")':
            ['summarize(servers.web1.cpu, "10min", "max")'],
        'groupByNode(servers.*.cpu, 1, "sum")': ['db1', 'web1', 'web2'],
        'aliasByNode(servers.web1.*, 1, 2)': ['web1.cpu', 'web1.mem'],
        'divideSeries(servers.web1.cpu, servers.web2.cpu)':
            ['divideSeries(servers.web1.cpu,servers.web2.cpu)'],
        'highestMax(servers.*.cpu, 1)': ['servers.db1.cpu'],
        'keepLastValue(gaps.a)': ['keepLastValue(gaps.a)'],
        'sumSeries(scale(servers.web*.cpu, 2))':
            ['sumSeries(scale(servers.web1.cpu,2),scale(servers.web2.cpu,2))'],
    }
    for target, names in cases.items():
        assert [s['target'] for s in render(app, base_time, target)] == names, target


def test_moving_average_prefetches_earlier_data(app: Any, base_time: int) -> None:
    plain = render(app, base_time, 'servers.web1.cpu', **{'from': base_time - 1800})
    moving = render(app, base_time, 'movingAverage(servers.web1.cpu, 3)',
                    **{'from': base_time - 1800})
    raw = [v for v, _ in plain[0]['datapoints']]
    got = [v for v, _ in moving[0]['datapoints']]
    assert len(got) == len(raw) and None not in got
    # the first average needs the two points before "from"
    assert got[5] == sum(raw[3:6]) / 3


def test_keep_last_value_fills_gaps(app: Any, base_time: int) -> None:
    out = render(app, base_time, 'keepLastValue(gaps.a)')
    values = [v for v, _ in out[0]['datapoints']]
    assert None not in values[1:]


def test_png_with_graph_functions(app: Any, base_time: int) -> None:
    status, headers, body = call(app, '/render', {
        'target': ['color(lineWidth(servers.web1.cpu, 2), "red")',
                   'secondYAxis(servers.web2.mem)', 'threshold(50, "limit")'],
        'from': base_time - 3600, 'until': base_time, 'width': 500, 'height': 300,
        'areaMode': 'first', 'title': 'x'})
    assert status == 200 and headers['Content-Type'] == 'image/png'
    assert body.startswith(b'\x89PNG')
