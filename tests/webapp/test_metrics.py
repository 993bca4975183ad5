"""/metrics/find, /metrics/expand and /metrics/index.json shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.webapp.helpers import call
from webapp.storage.nodes import safe_loads


def find(app: Any, **params: Any) -> tuple[int, dict, Any]:
    status, headers, body = call(app, '/metrics/find', params)
    return status, headers, body


def test_treejson_default(app: Any) -> None:
    status, headers, body = find(app, query='servers.*')
    assert status == 200 and headers['Content-Type'] == 'application/json'
    assert headers['Pragma'] == 'no-cache' and headers['Cache-Control'] == 'no-cache'
    assert json.loads(body) == [
        {'text': name, 'id': 'servers.' + name, 'allowChildren': 1, 'expandable': 1, 'leaf': 0}
        for name in ['db1', 'web1', 'web2']]
    _, _, body = find(app, query='servers.web1.*', wildcards='1')
    nodes = json.loads(body)
    assert nodes[0] == {'text': '*', 'id': 'servers.web1.*', 'allowChildren': 0,
                        'expandable': 0, 'leaf': 1}
    assert [n['text'] for n in nodes[1:]] == ['cpu', 'mem']
    assert all(n['leaf'] == 1 for n in nodes)


def test_treejson_branches_before_leaves(app: Any, whisper_tree: str) -> None:
    from tests.webapp.helpers import make_whisper
    make_whisper(whisper_tree, 'aaa', [])
    _, _, body = find(app, query='*')
    assert [(n['text'], n['leaf']) for n in json.loads(body)] == [
        ('gaps', 0), ('servers', 0), ('aaa', 1)]


def test_completer(app: Any) -> None:
    _, _, body = find(app, query='servers.w', format='completer')
    assert json.loads(body) == {'metrics': [
        {'path': 'servers.web1.', 'name': 'web1', 'is_leaf': '0'},
        {'path': 'servers.web2.', 'name': 'web2', 'is_leaf': '0'}]}
    _, _, body = find(app, query='servers.web1.', format='completer', wildcards='1')
    metrics = json.loads(body)['metrics']
    assert metrics == [{'path': 'servers.web1.cpu', 'name': 'cpu', 'is_leaf': '1'},
                       {'path': 'servers.web1.mem', 'name': 'mem', 'is_leaf': '1'},
                       {'name': '*'}]
    _, _, body = find(app, query='servers.web1,db1.c', format='completer',
                      automatic_variants='1')
    assert [m['path'] for m in json.loads(body)['metrics']] == ['servers.db1.cpu',
                                                                'servers.web1.cpu']


def test_json_and_pickle_formats(app: Any) -> None:
    _, _, body = find(app, query='servers.web1.*', format='json')
    nodes = json.loads(body)
    assert [n['path'] for n in nodes] == ['servers.web1.cpu', 'servers.web1.mem']
    assert nodes[0]['is_leaf'] is True and set(nodes[0]['intervals'][0]) == {'start', 'end'}
    _, _, body = find(app, query='servers.*', format='json')
    assert json.loads(body)[0] == {'path': 'servers.db1', 'is_leaf': False}
    status, headers, body = find(app, query='servers.web1.*', format='pickle', local='1')
    assert headers['Content-Type'] == 'application/pickle'
    data = safe_loads(body)
    assert [(d['path'], d['is_leaf']) for d in data] == [('servers.web1.cpu', True),
                                                         ('servers.web1.mem', True)]
    start, end = data[0]['intervals'][0]
    assert end > start


def test_nodelist(app: Any) -> None:
    _, _, body = find(app, query='servers.*.*', format='nodelist', position='1')
    assert json.loads(body) == {'nodes': ['db1', 'web1', 'web2']}
    _, _, body = find(app, query='servers.*.*', format='nodelist')
    assert json.loads(body) == {'nodes': ['cpu', 'mem']}


def test_leaves_only_and_jsonp(app: Any) -> None:
    _, _, body = find(app, query='*', leavesOnly='1', format='json')
    assert json.loads(body) == []
    _, headers, body = find(app, query='gaps.*', jsonp='cb')
    assert headers['Content-Type'] == 'text/javascript' and body.startswith(b'cb([')


def test_non_ascii_answer_follows_accept_header(app: Any, whisper_tree: str) -> None:
    from tests.webapp.helpers import make_whisper
    make_whisper(whisper_tree, 'unicode.caf\u00e9', [])
    _, headers, body = call(app, '/metrics/find', {'query': 'unicode.*'})
    assert b'caf\\u00e9' in body and headers['Content-Type'] == 'application/json'
    _, headers, body = call(app, '/metrics/find', {'query': 'unicode.*'},
                            headers={'Accept': 'application/json, text/plain, */*'})
    assert 'café'.encode() in body
    assert headers['Content-Type'] == 'application/json;charset=utf-8'


@pytest.mark.parametrize('params, fragment', [
    ({}, b"Missing required parameter 'query'"),
    ({'query': ''}, b"Required parameter 'query' is empty"),
    ({'query': 'a', 'leavesOnly': 'x'}, b'Invalid int value'),
    ({'query': 'a', 'from': 'never'}, b'Invalid value'),
    ({'query': 'a', 'format': 'yaml'}, b"Invalid value for 'format' parameter"),
])
def test_find_errors(app: Any, params: dict, fragment: bytes) -> None:
    status, headers, body = find(app, **params)
    assert status == 400 and fragment in body
    assert headers['Content-Type'].startswith('text/plain')


def test_metrics_alias_and_post(app: Any) -> None:
    status, _, body = call(app, '/metrics', {'query': 'gaps.*', 'format': 'json'})
    assert [n['path'] for n in json.loads(body)] == ['gaps.a', 'gaps.b']
    status, _, body = call(app, '/metrics/find/', method='POST',
                           body=b'query=gaps.a&format=json')
    assert [n['path'] for n in json.loads(body)] == ['gaps.a']


def test_expand(app: Any) -> None:
    _, headers, body = call(app, '/metrics/expand', {'query': ['servers.web*', 'gaps.*']})
    assert json.loads(body) == {'results': ['gaps.a', 'gaps.b', 'servers.web1', 'servers.web2']}
    assert headers['Pragma'] == 'no-cache'
    _, _, body = call(app, '/metrics/expand', {'query': ['servers.web*.cpu', 'gaps.*'],
                                               'groupByExpr': '1'})
    assert json.loads(body) == {'results': {'servers.web*.cpu': ['servers.web1.cpu',
                                                                 'servers.web2.cpu'],
                                            'gaps.*': ['gaps.a', 'gaps.b']}}
    _, _, body = call(app, '/metrics/expand', {'query': 'servers.*', 'leavesOnly': '1'})
    assert json.loads(body) == {'results': []}


def test_index(app: Any) -> None:
    status, _, body = call(app, '/metrics/index.json')
    index = json.loads(body)
    assert index[:2] == ['gaps.a', 'gaps.b'] and 'servers.web2.mem' in index
    assert len(index) == 8
    _, headers, body = call(app, '/metrics/index.json', {'jsonp': 'f', 'local': '1'})
    assert body.startswith(b'f([') and headers['Content-Type'] == 'text/javascript'


def test_version_and_unknown_paths(app: Any) -> None:
    assert call(app, '/version')[2] == b'1.1.10\n'
    assert call(app, '/version/')[0] == 200
    status, headers, _ = call(app, '/nope')
    assert status == 404 and headers['Content-Type'].startswith('text/plain')
