"""Two app instances federated over loopback HTTP, plus dead, hanging and broken hosts."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Callable, Iterator

import pytest
import whisper

from carbon import tags as carbon_tags
from tests.webapp.helpers import STEP, LiveServer, call, http_get, make_whisper
from webapp.app import make_app


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port with nothing listening (connections are refused)."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    yield port
    sock.close()


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A port that accepts connections but never answers."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def cluster(tmp_path: Any, make_web_settings: Callable, base_time: int,
            closed_port: int) -> Iterator[dict[str, Any]]:
    root_a, root_b = str(tmp_path / 'a'), str(tmp_path / 'b')
    even = [(base_time - i * STEP, 10.0 + i) for i in range(0, 20, 2)]
    odd = [(base_time - i * STEP, 20.0 + i) for i in range(1, 20, 2)]
    make_whisper(root_a, 'shared.m', even)
    make_whisper(root_b, 'shared.m', odd + [(base_time, 99.0)])
    make_whisper(root_a, 'only_a.y', [(base_time, 1.0)])
    make_whisper(root_b, 'only_b.x', [(base_time, 2.0)])
    tagged = 'tagged.m;dc=b'
    path = carbon_tags.filesystem_path(root_b, tagged, hash_only=False)
    os.makedirs(os.path.dirname(path))
    whisper.create(path, [(STEP, 600)])
    whisper.update_many(path, [(base_time, 5.0)])
    app_b = make_app(make_web_settings(WHISPER_DIR=root_b,
                                       TAGDB_SQLITE_PATH=str(tmp_path / 'b.db')))
    app_b.store.tagdb.tag_series(tagged)
    server_b = LiveServer(app_b)
    dead = '127.0.0.1:%d' % closed_port
    app_a = make_app(make_web_settings(
        WHISPER_DIR=root_a, CLUSTER_SERVERS=[server_b.address, dead], REMOTE_RETRY_DELAY=60,
        FETCH_TIMEOUT=2.0, FIND_TIMEOUT=2.0, TAGDB_SQLITE_PATH=str(tmp_path / 'a.db')))
    server_a = LiveServer(app_a)
    yield {'a': server_a, 'b': server_b, 'app_a': app_a, 'dead': dead}
    server_a.stop()
    server_b.stop()
    app_a.close()
    app_b.close()


def render(server: LiveServer, base_time: int, **params: Any) -> tuple[int, dict, Any]:
    params.setdefault('format', 'json')
    params.setdefault('from', base_time - 20 * STEP)
    params.setdefault('until', base_time)
    status, headers, body = http_get(server.url('/render', params))
    return status, headers, json.loads(body) if params['format'] == 'json' else body


def test_series_merge_point_by_point(cluster: dict, base_time: int) -> None:
    status, headers, out = render(cluster['a'], base_time, target=['shared.m', 'only_*.*'])
    assert status == 200
    series = {s['target']: [v for v, _ in s['datapoints']] for s in out}
    assert set(series) == {'shared.m', 'only_a.y', 'only_b.x'}
    # whisper points i minutes ago: A has the even minutes, B the odd ones; A wins at i=0
    expected = [(10.0 + i) if i % 2 == 0 else (20.0 + i) for i in range(19, -1, -1)]
    assert series['shared.m'] == expected
    assert headers['X-Graphite-Failed-Hosts'] == cluster['dead']


def test_local_only_ignores_cluster(cluster: dict, base_time: int) -> None:
    status, headers, out = render(cluster['a'], base_time, target='only_*.*', local='1')
    assert [s['target'] for s in out] == ['only_a.y']
    assert 'X-Graphite-Failed-Hosts' not in headers


def test_find_expand_and_index_span_hosts(cluster: dict) -> None:
    status, headers, body = http_get(cluster['a'].url('/metrics/find', {'query': '*'}))
    assert [n['text'] for n in json.loads(body)] == ['_tagged', 'only_a', 'only_b', 'shared']
    assert headers['X-Graphite-Failed-Hosts'] == cluster['dead']
    _, _, body = http_get(cluster['a'].url('/metrics/find', {'query': 'shared.*',
                                                             'format': 'json'}))
    nodes = json.loads(body)
    assert [(n['path'], n['is_leaf']) for n in nodes] == [('shared.m', True)]
    _, _, body = http_get(cluster['a'].url('/metrics/expand', {'query': 'only_*.*'}))
    assert json.loads(body) == {'results': ['only_a.y', 'only_b.x']}
    _, _, body = http_get(cluster['a'].url('/metrics/index.json'))
    index = json.loads(body)
    assert [m for m in index if not m.startswith('_tagged.')] == ['only_a.y', 'only_b.x',
                                                                  'shared.m']
    assert len(index) == 4
    _, _, body = http_get(cluster['a'].url('/metrics/index.json', {'local': '1'}))
    assert json.loads(body) == ['only_a.y', 'shared.m']


def test_series_by_tag_resolves_on_the_remote(cluster: dict, base_time: int) -> None:
    status, _, out = render(cluster['a'], base_time, target="seriesByTag('dc=b')")
    assert [s['target'] for s in out] == ['tagged.m;dc=b']
    assert out[0]['datapoints'][-1][0] == 5.0
    _, _, body = http_get(cluster['a'].url('/tags/autoComplete/values', {'tag': 'dc'}))
    assert json.loads(body) == ['b']


def test_dead_host_is_skipped_during_retry_delay(cluster: dict, base_time: int) -> None:
    render(cluster['a'], base_time, target='shared.m')
    remote = [r for r in cluster['app_a'].store.remotes if r.host == cluster['dead']][0]
    assert remote.disabled
    status, headers, _ = render(cluster['a'], base_time, target='shared.m')
    assert status == 200 and headers['X-Graphite-Failed-Hosts'] == cluster['dead']


def test_hanging_and_broken_hosts(tmp_path: Any, make_web_settings: Callable, base_time: int,
                                  hanging_port: int) -> None:
    root = str(tmp_path / 'w')
    make_whisper(root, 'x.y', [(base_time, 3.0)])

    def broken_app(environ: dict, start_response: Callable) -> list[bytes]:
        start_response('200 OK', [('Content-Type', 'application/pickle')])
        return [b'not a pickle']

    def failing_app(environ: dict, start_response: Callable) -> list[bytes]:
        start_response('500 Internal Server Error', [('Content-Type', 'text/plain')])
        return [b'oops']
    broken, failing = LiveServer(broken_app), LiveServer(failing_app)
    hanging = '127.0.0.1:%d' % hanging_port
    app = make_app(make_web_settings(
        WHISPER_DIR=root, CLUSTER_SERVERS=[hanging, broken.address, failing.address],
        FETCH_TIMEOUT=0.5, FIND_TIMEOUT=0.5, MAX_FETCH_RETRIES=1))
    try:
        started = time.monotonic()
        status, headers, body = call(app, '/render', {
            'target': 'x.y', 'format': 'json', 'from': base_time - 60, 'until': base_time})
        assert time.monotonic() - started < 2.0
        assert status == 200
        assert json.loads(body)[0]['datapoints'][-1][0] == 3.0
        failed = headers['X-Graphite-Failed-Hosts'].split(', ')
        assert sorted(failed) == sorted([hanging, broken.address, failing.address])
        status, headers, body = call(app, '/metrics/find', {'query': '*'})
        assert status == 200 and json.loads(body)[0]['text'] == 'x'
    finally:
        app.close()
        broken.stop()
        failing.stop()


def test_graphite_web_style_cluster_requests(cluster: dict, base_time: int) -> None:
    """The exact requests graphite-web 1.1 sends to a CLUSTER_SERVER."""
    from webapp.storage.nodes import safe_loads
    b = cluster['b']
    _, headers, body = http_get(b.url('/metrics/find/', [
        ('local', '1'), ('format', 'pickle'), ('query', 'shared.*'),
        ('from', base_time - 600), ('until', base_time)]))
    nodes = safe_loads(body)
    assert nodes[0]['path'] == 'shared.m' and nodes[0]['is_leaf'] is True
    assert len(nodes[0]['intervals'][0]) == 2
    _, headers, body = http_get(b.url('/render/', [
        ('format', 'pickle'), ('local', '1'), ('noCache', '1'), ('from', base_time - 120),
        ('until', base_time), ('target', 'shared.m'), ('target', 'only_b.x'),
        ('now', base_time)]))
    series = {s['name']: s for s in safe_loads(body)}
    assert series['shared.m']['values'] == [21.0, 99.0]
    assert series['only_b.x']['pathExpression'] == 'only_b.x'
