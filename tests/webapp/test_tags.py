"""/tags endpoints over the SQLite TagDB, and seriesByTag rendering over tagged whisper files."""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any, Callable

import pytest
import whisper

from carbon import tags as carbon_tags
from tests.webapp.helpers import STEP, call
from webapp.app import make_app

SERIES = ['cpu.user;host=web1;dc=us', 'cpu.user;host=web2;dc=eu', 'cpu.sys;host=web1;dc=us',
          'mem.free;host=db1;dc=us;role=db']


def post(app: Any, path: str, body: str) -> tuple[int, Any]:
    status, _, data = call(app, path, method='POST', body=body.encode())
    return status, json.loads(data) if data else None


@pytest.fixture
def tagged_app(tmp_path: Any, make_web_settings: Callable, base_time: int) -> Any:
    root = str(tmp_path / 'whisper')
    for i, name in enumerate(SERIES):
        path = carbon_tags.filesystem_path(root, carbon_tags.normalize(name), hash_only=False)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, [(STEP, 600)])
        whisper.update_many(path, [(base_time - j * STEP, float(i + 1)) for j in range(5)])
    application = make_app(make_web_settings(WHISPER_DIR=root))
    for name in SERIES:
        assert post(application, '/tags/tagSeries', 'path=' + name.replace(';', '%3B'))[0] == 200
    yield application
    application.close()


def test_tag_series_returns_canonical_path(tagged_app: Any) -> None:
    status, path = post(tagged_app, '/tags/tagSeries', 'path=a.b%3Bz%3D1%3By%3D2')
    assert (status, path) == (200, 'a.b;y=2;z=1')
    status, paths = post(tagged_app, '/tags/tagMultiSeries',
                         'path=x%3Bk%3Dv&path=y%3Bk%3Dw')
    assert paths == ['x;k=v', 'y;k=w']
    status, paths = post(tagged_app, '/tags/tagMultiSeries', 'path%5B%5D=q%3Bk%3Dv')
    assert paths == ['q;k=v']


def test_find_series_expressions(tagged_app: Any) -> None:
    def find(*exprs: str) -> list[str]:
        status, _, body = call(tagged_app, '/tags/findSeries', {'expr': list(exprs)})
        assert status == 200, body
        return json.loads(body)
    assert find('host=web1') == ['cpu.sys;dc=us;host=web1', 'cpu.user;dc=us;host=web1']
    assert find('name=cpu.user', 'dc!=us') == ['cpu.user;dc=eu;host=web2']
    assert find('host=~web') == ['cpu.sys;dc=us;host=web1', 'cpu.user;dc=eu;host=web2',
                                 'cpu.user;dc=us;host=web1']
    assert find('dc=us', 'host!=~web') == ['mem.free;dc=us;host=db1;role=db']
    assert find('dc=us', 'role=') == ['cpu.sys;dc=us;host=web1', 'cpu.user;dc=us;host=web1']
    assert find('name=~cpu', 'host=~.*2') == ['cpu.user;dc=eu;host=web2']
    assert find('host=nope') == []


def test_find_series_errors(tagged_app: Any) -> None:
    status, _, body = call(tagged_app, '/tags/findSeries')
    assert (status, json.loads(body)) == (400, {'error': 'no tag expressions specified'})
    status, _, body = call(tagged_app, '/tags/findSeries', {'expr': 'role='})
    assert status == 400 and 'must not match the empty string' in json.loads(body)['error']
    status, _, body = call(tagged_app, '/tags/findSeries', {'expr': 'novalue'})
    assert status == 400 and 'Invalid tagspec' in json.loads(body)['error']
    status, _, body = call(tagged_app, '/tags/findSeries', {'expr': 'host=~(('})
    assert status == 400


def test_tag_list_and_details(tagged_app: Any) -> None:
    status, _, body = call(tagged_app, '/tags')
    assert [t['tag'] for t in json.loads(body)] == ['dc', 'host', 'name', 'role']
    assert set(json.loads(body)[0]) == {'id', 'tag'}
    _, _, body = call(tagged_app, '/tags/', {'filter': 'h', 'limit': '5'})
    assert [t['tag'] for t in json.loads(body)] == ['host']
    _, _, body = call(tagged_app, '/tags/host')
    detail = json.loads(body)
    assert detail['tag'] == 'host'
    assert [(v['value'], v['count']) for v in detail['values']] == [('db1', 1), ('web1', 2),
                                                                    ('web2', 1)]
    _, _, body = call(tagged_app, '/tags/host', {'filter': 'web', 'limit': '1'})
    assert [v['value'] for v in json.loads(body)['values']] == ['web1']
    assert json.loads(call(tagged_app, '/tags/nosuchtag')[2]) is None


def test_autocomplete(tagged_app: Any) -> None:
    def get(path: str, **params: Any) -> Any:
        status, _, body = call(tagged_app, path, params)
        return status, json.loads(body)
    assert get('/tags/autoComplete/tags') == (200, ['dc', 'host', 'name', 'role'])
    assert get('/tags/autoComplete/tags', tagPrefix='h') == (200, ['host'])
    assert get('/tags/autoComplete/tags', expr='role=db')[1] == ['dc', 'host', 'name']
    assert get('/tags/autoComplete/tags', limit='2')[1] == ['dc', 'host']
    assert get('/tags/autoComplete/values', tag='host')[1] == ['db1', 'web1', 'web2']
    assert get('/tags/autoComplete/values', tag='host', valuePrefix='w')[1] == ['web1', 'web2']
    assert get('/tags/autoComplete/values', tag='host', expr='dc=us')[1] == ['db1', 'web1']
    assert get('/tags/autoComplete/values', tag='name', expr='host=web1')[1] == ['cpu.sys',
                                                                                 'cpu.user']
    assert get('/tags/autoComplete/values') == (400, {'error': 'no tag specified'})


def test_delete_series(tagged_app: Any) -> None:
    status, result = post(tagged_app, '/tags/delSeries', 'path=cpu.user%3Bhost%3Dweb2%3Bdc%3Deu')
    assert (status, result) == (200, True)
    _, _, body = call(tagged_app, '/tags/findSeries', {'expr': 'dc=eu'})
    assert json.loads(body) == []
    assert post(tagged_app, '/tags/delSeries', '')[0] == 400


def test_methods(tagged_app: Any) -> None:
    assert call(tagged_app, '/tags/tagSeries', {'path': 'a;b=c'})[0] == 405
    assert call(tagged_app, '/tags/delSeries', {'path': 'a;b=c'})[0] == 405
    status, body = post(tagged_app, '/tags/tagSeries', 'x=1')
    assert (status, body) == (400, {'error': 'no path specified'})
    status, body = post(tagged_app, '/tags/tagSeries', 'path=a%3Bb')
    assert status == 400 and 'invalid segment' in body['error']


def test_series_by_tag_render(tagged_app: Any, base_time: int) -> None:
    params = {'format': 'json', 'from': base_time - 180, 'until': base_time}
    status, _, body = call(tagged_app, '/render', dict(
        params, target="seriesByTag('name=cpu.user')"))
    assert status == 200, body
    out = json.loads(body)
    assert [s['target'] for s in out] == ['cpu.user;dc=eu;host=web2', 'cpu.user;dc=us;host=web1']
    assert out[0]['tags'] == {'name': 'cpu.user', 'dc': 'eu', 'host': 'web2'}
    assert [v for v, _ in out[1]['datapoints']] == [1.0, 1.0, 1.0]
    status, _, body = call(tagged_app, '/render', dict(
        params, target="sumSeries(seriesByTag('host=web1'))"))
    assert [v for v, _ in json.loads(body)[0]['datapoints']] == [4.0, 4.0, 4.0]
    status, _, body = call(tagged_app, '/render', dict(params, target='cpu.user;host=web1;dc=us'))
    assert [s['target'] for s in json.loads(body)] == ['cpu.user;host=web1;dc=us']
    status, _, body = call(tagged_app, '/render', dict(params, target="seriesByTag('x=')"))
    assert status == 400 and b'must not match the empty string' in body


def test_schema_is_graphite_webs(tagged_app: Any, make_web_settings: Callable) -> None:
    path = tagged_app.settings.TAGDB_SQLITE_PATH
    assert path.endswith('graphite.db')
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {'tags_tag', 'tags_tagvalue', 'tags_series', 'tags_seriestag'} <= tables


def test_without_tagdb(make_web_settings: Callable, whisper_tree: str) -> None:
    application = make_app(make_web_settings(WHISPER_DIR=whisper_tree, TAGDB=''))
    try:
        status, body = post(application, '/tags/tagSeries', 'path=a%3Bb%3Dc')
        assert status == 500 and 'not implemented' in body['error']
        assert json.loads(call(application, '/tags/findSeries', {'expr': 'a=b'})[2]) == []
        assert json.loads(call(application, '/tags')[2]) == []
    finally:
        application.close()
