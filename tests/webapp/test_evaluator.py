"""The evaluator's contract with render functions: requestContext, args, batching."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from webapp.plugins import RENDER_FUNCTIONS
from tests.webapp.helpers import call
from webapp.functions.registry import Param, RenderFunction
from webapp.render.grammar import Const, PathExpr
from webapp.render.series import TimeSeries


def register(monkeypatch: Any, name: str, func: Any, params: list) -> None:
    RENDER_FUNCTIONS.names()  # load the built-ins first
    monkeypatch.setitem(RENDER_FUNCTIONS._plugins, name, RenderFunction(name, 'Test', params,
                                                                          func))


def test_request_context_contract(app: Any, base_time: int, monkeypatch: Any) -> None:
    seen: dict[str, Any] = {}

    def probe(ctx: dict, series: list, n: int, key: str = 'd') -> list:
        seen['ctx'] = dict(ctx)
        seen['args'] = list(ctx['args'])
        seen['values'] = (series, n, key)
        earlier = dict(ctx, startTime=ctx['startTime'] - timedelta(minutes=30))
        seen['again'] = ctx['evaluateTarget'](earlier, ctx['args'][0])
        seen['fetched'] = ctx['fetchSeries'](ctx, 'servers.db1.*')
        seen['by_text'] = ctx['evaluateTarget'](ctx, 'sumSeries(servers.web*.cpu)')
        return series
    register(monkeypatch, 'probe', probe, [Param('seriesList', 'seriesList', required=True),
                                           Param('n', 'integer'), Param('key', 'string')])
    status, _, body = call(app, '/render', {
        'target': "probe(servers.web1.cpu, 3, key='x')", 'format': 'json',
        'from': base_time - 600, 'until': base_time, 'tz': 'Europe/Paris', 'xFilesFactor': '0.5',
        'maxDataPoints': '5', 'local': '1', 'template[a]': 'b'})
    assert status == 200, body
    ctx = seen['ctx']
    for key in ('startTime', 'endTime', 'now', 'localOnly', 'template', 'tzinfo', 'xFilesFactor',
                'args', 'evaluateTarget', 'fetchSeries', 'maxDataPoints', 'targets'):
        assert key in ctx, key
    assert ctx['startTime'].tzinfo is not None and str(ctx['tzinfo']) == 'Europe/Paris'
    assert int(ctx['startTime'].timestamp()) == base_time - 600
    assert ctx['xFilesFactor'] == 0.5 and ctx['localOnly'] is True
    assert ctx['template'] == {'a': 'b'} and ctx['maxDataPoints'] == 5
    assert isinstance(seen['args'][0], PathExpr) and isinstance(seen['args'][1], Const)
    series, n, key = seen['values']
    assert n == 3 and key == 'x' and isinstance(series[0], TimeSeries)
    assert series[0].xFilesFactor == 0.5 and series[0].pathExpression == 'servers.web1.cpu'
    assert len(seen['again'][0]) == len(series[0]) + 30
    assert [s.name for s in seen['fetched']] == ['servers.db1.cpu', 'servers.db1.mem']
    assert seen['by_text'][0].name == 'sumSeries(servers.web*.cpu)'
    assert json.loads(body)[0]['target'] == 'servers.web1.cpu'


def test_one_store_round_per_request(app: Any, base_time: int, monkeypatch: Any) -> None:
    calls: list[list[str]] = []
    original = app.store.fetch

    def counting(patterns: list, *args: Any, **kw: Any) -> Any:
        calls.append(sorted(patterns))
        return original(patterns, *args, **kw)
    monkeypatch.setattr(app.store, 'fetch', counting)
    status, _, body = call(app, '/render', {
        'target': ['sumSeries(servers.web*.cpu, servers.db1.cpu)', 'servers.web1.mem',
                   'alias(servers.web1.mem, "again")', "seriesByTag('name=x')"],
        'format': 'json', 'from': base_time - 300, 'until': base_time})
    assert status == 200
    assert calls == [["seriesByTag('name=x')", 'servers.db1.cpu', 'servers.web*.cpu',
                      'servers.web1.mem']]
    assert [s['target'] for s in json.loads(body)] == [
        'sumSeries(servers.web*.cpu,servers.db1.cpu)', 'servers.web1.mem', 'again']


def test_enforced_validation(make_web_settings: Any, whisper_tree: str) -> None:
    from webapp.app import make_app
    application = make_app(make_web_settings(WHISPER_DIR=whisper_tree,
                                             ENFORCE_INPUT_VALIDATION=True))
    try:
        status, _, body = call(application, '/render', {
            'target': 'nonNegativeDerivative(servers.web1.cpu, maxValue="q")', 'format': 'json'})
        assert status == 400 and b'maxValue' in body
    finally:
        application.close()
