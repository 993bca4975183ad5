"""/events endpoints and the events() render function, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any, Callable, Iterator, Optional

import pytest

from tests.webapp.helpers import LiveServer, aligned_now
from webapp.app import GraphiteApp, make_app

JSON = {'Accept': 'application/json'}


class Client:
    """Real HTTP requests to a LiveServer running the app."""

    def __init__(self, app: GraphiteApp) -> None:
        self.app = app
        self.server = LiveServer(app)

    def request(self, path: str, params: Any = None, method: str = 'GET',
                body: Optional[bytes] = None,
                headers: Optional[dict] = None) -> tuple[int, dict, bytes]:
        req = urllib.request.Request(self.server.url(path, params), data=body,
                                     headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()

    def post_event(self, event: Any) -> tuple[int, dict, bytes]:
        body = event.encode() if isinstance(event, str) else json.dumps(event).encode()
        return self.request('/events/', method='POST', body=body,
                            headers={'Content-Type': 'application/json'})

    def get_data(self, **params: Any) -> list[dict]:
        status, headers, body = self.request('/events/get_data', params)
        assert status == 200, body
        assert headers['Content-Type'] == 'application/json'
        return json.loads(body)

    def whats(self, **params: Any) -> list[str]:
        return [e['what'] for e in self.get_data(**params)]


@pytest.fixture
def client(make_web_settings: Callable, whisper_tree: str) -> Iterator[Client]:
    application = make_app(make_web_settings(WHISPER_DIR=whisper_tree))
    c = Client(application)
    yield c
    c.server.stop()
    application.close()


@pytest.fixture
def t0() -> int:
    """A whole hour a day ago: event times are offsets from it."""
    return aligned_now() - 86400


def add(client: Client, what: str, when: float, tags: Any = None, **extra: Any) -> None:
    event = dict(what=what, when=when, **extra)
    if tags is not None:
        event['tags'] = tags
    status, _, body = client.post_event(event)
    assert (status, body) == (200, b'')


def test_create_list_get_delete(client: Client, t0: int) -> None:
    add(client, 'deploy <web>', t0 + 10, ['deploy', 'web'], data='v1.2')
    add(client, 'restart', t0 + 20.75, 'ops db')
    events = client.get_data()
    assert [(e['what'], e['when'], e['tags'], e['data']) for e in events] == [
        ('deploy <web>', t0 + 10, ['deploy', 'web'], 'v1.2'),
        ('restart', t0 + 20, ['ops', 'db'], '')]
    assert [list(e) for e in events] == [['when', 'what', 'data', 'tags', 'id']] * 2
    first, second = (e['id'] for e in events)
    assert first != second

    status, headers, page = client.request('/events/')
    assert status == 200 and headers['Content-Type'].startswith('text/html')
    assert b'deploy &lt;web&gt;' in page and b'/events/%d/' % second in page
    assert b'No events' not in page
    status, headers, body = client.request('/events', headers=JSON)
    assert headers['Content-Type'] == 'application/json' and json.loads(body) == events

    status, headers, body = client.request('/events/%d/' % second, headers=JSON)
    assert status == 200 and headers['Content-Type'] == 'application/json'
    iso = datetime.fromtimestamp(t0 + 20, UTC).strftime('%Y-%m-%dT%H:%M:%S') + '.750Z'
    assert json.loads(body) == {'id': second, 'when': iso, 'what': 'restart', 'data': '',
                                'tags': ['ops', 'db']}
    assert list(json.loads(body)) == ['id', 'when', 'what', 'data', 'tags']
    status, _, body = client.request('/events/%d' % first, {'pretty': 1}, headers=JSON)
    assert body.startswith(b'{\n  "data": "v1.2"')
    status, headers, page = client.request('/events/%d/' % first)
    assert status == 200 and b'<h1>deploy &lt;web&gt;</h1>' in page and b'deploy web' in page

    assert client.request('/events/%d/' % first, method='DELETE')[0] == 200
    assert client.whats() == ['restart']
    status, _, body = client.request('/events/%d/' % first, headers=JSON)
    assert (status, json.loads(body)) == (404, {'error': 'Event matching query does not exist'})
    assert client.request('/events/%d/' % first)[0] == 404
    assert client.request('/events/%d/' % first, method='DELETE')[0] == 404
    assert client.request('/events/', method='DELETE')[0] == 405
    assert client.request('/events/', method='PUT', body=b'{}')[0] == 405
    assert client.whats() == ['restart']


def test_empty_list_page(client: Client) -> None:
    status, _, page = client.request('/events/')
    assert status == 200 and b'No events' in page and b'curl -X POST http://127.0.0.1' in page
    assert client.get_data() == []


@pytest.mark.parametrize('body, status', [
    ({'what': 'x', 'tags': 5}, 400),
    ({'what': 'x', 'tags': {'a': 1}}, 400),
    ({'what': 'x', 'tags': True}, 400),
    ('not json', 500),
    ('', 500),
    ('[{"what": "x"}]', 500),
    ({'tags': 'a'}, 500),
    ({'what': 'x', 'when': 'yesterday'}, 500),
    ({'what': 'x', 'when': 1e20}, 500),
    ({'what': 'x', 'data': None}, 500),
    ({'what': 'x', 'tags': ['a', 1]}, 500),
])
def test_post_errors(client: Client, body: Any, status: int) -> None:
    got, headers, text = client.post_event(body)
    assert got == status, text
    if status == 400:
        assert json.loads(text) == {'error': '"tags" must be an array or space-separated string'}
    assert client.get_data() == []


def test_post_defaults_and_coercion(client: Client) -> None:
    before = int(time.time())
    assert client.post_event({'what': 123, 'data': {'k': 1}, 'tags': None})[0] == 200
    assert client.post_event({'what': 'plain'})[0] == 200
    events = client.get_data()
    assert [(e['what'], e['data'], e['tags']) for e in events] == [
        ('123', "{'k': 1}", []), ('plain', '', [])]
    assert all(before <= e['when'] <= time.time() for e in events)


def test_tag_matching(client: Client, t0: int) -> None:
    add(client, 'ab', t0 + 1, ['a', 'b'])
    add(client, 'bc', t0 + 2, 'b c')
    add(client, 'comma', t0 + 3, 'Deploy, prod  box')
    add(client, 'quoted', t0 + 4, '"two words" other')
    add(client, 'twice', t0 + 5, 'a a  b')
    add(client, 'none', t0 + 6)

    def whats(tags: str, op: Optional[str] = None) -> list[str]:
        params = {'from': t0, 'until': t0 + 10, 'tags': tags}
        if op:
            params['set'] = op
        return client.whats(**params)
    assert whats('b') == ['ab', 'bc', 'twice']
    assert whats('a b') == ['ab', 'twice']
    assert whats('a nosuchtag') == ['ab', 'twice']          # unknown names are ignored
    assert whats('nosuchtag') == [] and whats('') == []
    assert whats('a c', 'union') == ['ab', 'bc', 'twice']
    assert whats('a nosuchtag', 'union') == ['ab', 'twice']
    assert whats('a b', 'intersection') == ['ab', 'twice']
    assert whats('a nosuchtag', 'intersection') == []      # graphite-web's extra check
    assert whats('a  b', 'intersection') == []              # '' is a requested word too
    assert whats('a  b') == ['ab', 'twice']
    assert whats('B') == [] and whats('deploy') == []       # case-sensitive
    assert whats('Deploy') == ['comma'] and whats('prod') == []
    assert whats('prod  box') == []                         # split on single spaces
    assert whats('other') == ['quoted'] and whats('two') == []
    assert whats('a', 'bogus') == ['ab', 'twice']
    events = client.get_data(tags='Deploy')
    assert events[0]['tags'] == ['Deploy,', 'prod', 'box']  # the stored text, split
    assert client.request('/events/get_data', {'set': 'intersection'})[0] == 500


def test_time_ranges(client: Client, t0: int) -> None:
    add(client, 'early', t0 - 3600, 'x')
    add(client, 'start', t0, 'x')
    add(client, 'middle', t0 + 1800.5, 'x')
    add(client, 'end', t0 + 3600, 'x')
    add(client, 'future', time.time() + 7200, 'x')
    assert client.whats(**{'from': t0, 'until': t0 + 3600}) == ['start', 'middle', 'end']
    assert client.whats(**{'from': t0 + 1, 'until': t0 + 3599}) == ['middle']
    assert client.whats() == ['early', 'start', 'middle', 'end']          # from 0 until now
    assert client.whats(until=t0) == ['early', 'start']
    assert client.whats(**{'from': '-2d', 'until': 'now'}) == ['early', 'start', 'middle', 'end']
    stamp = datetime.fromtimestamp(t0, UTC)
    assert client.whats(**{'from': stamp.strftime('%H:%M_%Y%m%d'),
                           'until': stamp.strftime('%H:%M_%Y%m%d') + '+1h'}) == [
        'start', 'middle', 'end']
    assert client.whats(**{'from': t0 + 3600, 'until': t0}) == []
    status, headers, body = client.request('/events/get_data', {'from': 'garbage'})
    assert status == 500 and b'Invalid time' in body
    status, headers, body = client.request('/events/get_data',
                                           {'from': t0, 'until': t0, 'jsonp': 'cb'})
    assert headers['Content-Type'] == 'text/javascript' and body.startswith(b'cb([')
    assert json.loads(body[3:-1])[0]['what'] == 'start'
    status, _, body = client.request('/events/get_dat', {'from': t0, 'until': t0})
    assert status == 200 and json.loads(body)[0]['what'] == 'start'


def test_grafana_annotation_query(client: Client, t0: int) -> None:
    add(client, 'both', t0 + 60, ['a', 'b'], data='release 42')
    add(client, 'only a', t0 + 120, ['a'])
    add(client, 'other', t0 + 180, ['c'])
    status, headers, body = client.request(
        '/events/get_data', {'from': str(t0), 'until': str(t0 + 3600), 'tags': 'a b'})
    assert status == 200 and headers['Content-Type'] == 'application/json'
    (event,) = json.loads(body)
    assert set(event) == {'id', 'when', 'what', 'data', 'tags'}
    assert isinstance(event['id'], int) and isinstance(event['when'], int)
    assert (event['when'], event['what'], event['data'], event['tags']) == (
        t0 + 60, 'both', 'release 42', ['a', 'b'])
    assert client.whats(**{'from': '-7d', 'until': 'now', 'tags': 'a'}) == ['both', 'only a']


def test_events_render_function(client: Client, t0: int) -> None:
    add(client, 'd1', t0 + 2, 'deploy web')
    add(client, 'd2', t0 + 2.5, 'deploy')
    add(client, 'd3', t0 + 7, 'deploy db')
    add(client, 'o', t0 + 4, 'other')

    def render(target: str) -> dict:
        status, _, body = client.request('/render', {'target': target, 'from': t0,
                                                     'until': t0 + 10, 'format': 'json'})
        assert status == 200, body
        (series,) = json.loads(body)
        return {ts - t0: v for v, ts in series['datapoints'] if v is not None} | {
            'target': series['target'], 'n': len(series['datapoints'])}
    assert render('events("deploy")') == {2: 2, 7: 1, 'target': 'events("deploy")', 'n': 10}
    assert render('events("*")') == {2: 2, 4: 1, 7: 1, 'target': 'events("*")', 'n': 10}
    assert render('events("deploy", "web")') == {2: 1, 'target': 'events("deploy", "web")',
                                                 'n': 10}
    assert render('events("web", "nosuchtag")')[2] == 1
    assert render('events("nosuchtag")') == {'target': 'events("nosuchtag")', 'n': 10}
    status, _, body = client.request('/render', {'target': 'sumSeries(events("*"))',
                                                 'from': t0, 'until': t0 + 10, 'format': 'json'})
    assert [v for v, _ in json.loads(body)[0]['datapoints'] if v] == [2, 1, 1]


def test_table_layout_shared_with_tagdb(client: Client, t0: int) -> None:
    add(client, 'ours', t0 + 0.25, 'x y')
    path = client.app.settings.TAGDB_SQLITE_PATH
    assert path == client.app.store.tagdb.path
    with sqlite3.connect(path) as conn:
        columns = [r[1] for r in conn.execute('PRAGMA table_info(events_event)')]
        assert columns == ['id', 'when', 'what', 'data', 'tags']
        row = conn.execute('SELECT "when", "what", "data", "tags" FROM events_event').fetchone()
        stamp = datetime.fromtimestamp(t0, UTC).strftime('%Y-%m-%d %H:%M:%S')
        assert row == (stamp + '.250000', 'ours', '', 'x y')
        conn.execute('INSERT INTO events_event ("when", what, data, tags) VALUES (?, ?, ?, ?)',
                     (datetime.fromtimestamp(t0 + 5, UTC).strftime('%Y-%m-%d %H:%M:%S'),
                      'from graphite-web', 'd', 'y z'))
    assert client.whats(**{'from': t0, 'until': t0 + 10, 'tags': 'y'}) == [
        'ours', 'from graphite-web']
