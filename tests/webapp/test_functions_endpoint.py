"""/functions and /functions/NAME: graphite-web's metadata JSON, grouped output, jsonp."""

from __future__ import annotations

import json
from typing import Any

from webapp.plugins import RENDER_FUNCTIONS
from tests.webapp.helpers import call


def test_function_list(app: Any) -> None:
    status, headers, body = call(app, '/functions')
    assert status == 200 and headers['Content-Type'] == 'application/json'
    data = json.loads(body)
    assert set(data) == set(RENDER_FUNCTIONS.names())
    info = data['sumSeries']
    assert set(info) == {'name', 'function', 'description', 'module', 'group', 'params'}
    assert info['name'] == 'sumSeries' and info['group'] == 'Combine'
    assert info['params'][0]['name'] == 'seriesLists'
    assert call(app, '/functions/')[2] == body


def test_grouped_and_filtered(app: Any) -> None:
    grouped = json.loads(call(app, '/functions', {'grouped': 'true'})[2])
    assert 'sumSeries' in grouped['Combine'] and 'sumSeries' not in grouped.get('Transform', {})
    assert sum(len(v) for v in grouped.values()) == len(RENDER_FUNCTIONS.names())
    only = json.loads(call(app, '/functions', {'group': 'Combine'})[2])
    assert only and all(v['group'] == 'Combine' for v in only.values())


def test_details_jsonp_and_errors(app: Any) -> None:
    status, _, body = call(app, '/functions/movingAverage')
    assert status == 200 and json.loads(body)['name'] == 'movingAverage'
    status, headers, body = call(app, '/functions/alias', {'jsonp': 'cb'})
    assert headers['Content-Type'] == 'text/javascript' and body.startswith(b'cb({')
    status, _, body = call(app, '/functions/nope')
    assert (status, json.loads(body)) == (404, {'error': 'Function not found: nope'})
    assert call(app, '/functions', method='POST', body=b'x=1')[0] == 405


def test_infinity_defaults_are_1e9999(app: Any) -> None:
    body = call(app, '/functions')[2]
    assert b'Infinity' not in body
    pretty = call(app, '/functions/sumSeries', {'pretty': '1'})[2]
    assert pretty.startswith(b'{\n  "description"')  # sorted keys when pretty


def test_pie_functions(app: Any) -> None:
    data = json.loads(call(app, '/functions', {'type': 'pie'})[2])
    assert set(data) == {'average', 'maximum', 'minimum'}
