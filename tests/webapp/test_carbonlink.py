"""CarbonLink: bulk queries against real TCP servers, the ring, time budget, merging."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.webapp.helpers import STEP, FakeCarbonCache, call, make_whisper
from webapp.app import make_app
from webapp.settings import parse_host
from webapp.storage.carbonlink import CarbonLinkPool, merge_with_cache

VECTORS = Path(__file__).resolve().parent.parent / 'data' / 'hashing-vectors.json'


@pytest.fixture
def caches() -> Any:
    started: list[FakeCarbonCache] = []

    def start(points: dict, **kw: Any) -> FakeCarbonCache:
        cache = FakeCarbonCache(points, **kw)
        started.append(cache)
        return cache
    yield start
    for cache in started:
        cache.stop()


def test_merge_with_cache_same_step() -> None:
    values = [1.0, None, 3.0, None]
    merged = merge_with_cache([(1090, 9.0), (1200, 7.0), (999, 5.0), (1320, 4.0)], 1020, 60,
                              values, 'average', 60)
    assert merged == [1.0, 9.0, 3.0, 7.0]


def test_merge_with_cache_keeps_last_point_per_raw_interval() -> None:
    merged = merge_with_cache([(1005, 1.0), (1030, 2.0)], 1000, 60, [None], 'average', 60)
    assert merged == [2.0]


@pytest.mark.parametrize('method, expected', [('average', 2.0), ('sum', 6.0), ('max', 3.0),
                                              ('min', 1.0), ('last', 3.0), ('avg_zero', 2.0),
                                              ('absmax', 3.0)])
def test_merge_with_cache_aggregates_into_coarser_step(method: str, expected: float) -> None:
    cached = [(1200, 1.0), (1260, 2.0), (1320, 3.0)]
    merged = merge_with_cache(cached, 1200, 300, [None, None], method, 60)
    assert merged == [expected, None]


def test_ring_matches_carbon_placement() -> None:
    vectors = json.loads(VECTORS.read_text())
    checked = 0
    for case in vectors['cases']:
        if case['router'] != 'consistent-hashing' or case['replication_factor'] != 1:
            continue
        pool = CarbonLinkPool(case['destinations'], hash_type=case['hash_type'])
        for metric, (route,) in case['routes'].items():
            server, _, instance = parse_host(route)
            assert pool.select_host(metric) == (server, instance), (case['hash_type'], metric)
            checked += 1
        pool.close()
    assert checked > 100


# CARBONLINK_HOSTS (graphite-web's parseHost) and DESTINATIONS (carbon's parseDestination)
# are one form: the two reference functions are the same code. Accepted: (text, answer).
HOST_FORMS = [
    ('127.0.0.1:7002', ('127.0.0.1', 7002, None)),
    (' cache.example:7002:a ', ('cache.example', 7002, 'a')),
    ('[::1]:7102', ('::1', 7102, None)),
    ('[::1]:7102:b', ('::1', 7102, 'b')),
    ('h:7002:', ('h', 7002, '')),           # instance '' (not None), as both references
    ('h:7002:a:b', ('h', 7002, 'a:b')),
    ('h:65535', ('h', 65535, None)),
]
# Rejected by both of ours; the references reject the first five (int() fails) and take
# the last three, which name no reachable cache.
BAD_HOSTS = ['', 'nocolon', 'h:', 'h:x', '[::1]', '[::1]7102', ':7002', 'h:0', 'h:65536']


@pytest.mark.parametrize('text, answer', HOST_FORMS)
def test_carbonlink_host_forms_are_the_relays(text: str, answer: tuple) -> None:
    from carbon.relay.destinations import parse_destination
    assert parse_host(text) == parse_destination(text) == answer
    assert type(parse_host(text)[2]) is type(answer[2])


@pytest.mark.parametrize('text', BAD_HOSTS)
def test_carbonlink_host_forms_rejected(text: str) -> None:
    from carbon.relay.destinations import parse_destination
    with pytest.raises(ValueError) as host_error:
        parse_host(text)
    assert str(host_error.value) == ('invalid host %r (want host:port[:instance], a port '
                                     'from 1 to 65535)' % text)
    with pytest.raises(ValueError) as dest_error:
        parse_destination(text)
    assert str(dest_error.value).startswith('Invalid destination string "%s"' % text)


def test_trailing_colon_hosts_placed_as_the_relay_places_them() -> None:
    """``h:port:`` keys the ring on (h, ''), in the render app as in the relay."""
    from carbon.config.settings import Settings
    from carbon.routers import make_router
    relay = make_router(Settings(RELAY_METHOD='consistent-hashing', DESTINATIONS=[
        '127.0.0.1:2004:', '127.0.0.2:2004:', '127.0.0.3:2004:']))
    pool = CarbonLinkPool(['127.0.0.1:7002:', '127.0.0.2:7002:', '127.0.0.3:7002:'])
    try:
        names = ['servers.web%d.cpu' % n for n in range(200)]
        # (with instance None instead, 112 of these 200 were looked up on another cache)
        assert [pool.select_host(n)[0] for n in names] == [
            relay.get_destinations(n)[0].host for n in names]
    finally:
        pool.close()


def test_bulk_query_one_request_per_cache(caches: Callable) -> None:
    a = caches({'m.1': [(100, 1.0)]})
    b = caches({'m.1': [(100, 1.0)]})
    hosts = ['127.0.0.1:%d:a' % a.port, '127.0.0.1:%d:b' % b.port]
    pool = CarbonLinkPool(hosts, timeout=2)
    metrics = ['m.%d' % i for i in range(40)]
    result = pool.query_bulk(metrics)
    assert len(a.requests) + len(b.requests) == 2
    owners = {m: pool.select_host(m) for m in metrics}
    for cache, instance in ((a, 'a'), (b, 'b')):
        req, = cache.requests
        assert req['type'] == 'cache-query-bulk'
        assert sorted(req['metrics']) == sorted(m for m in metrics if owners[m][1] == instance)
    assert result == {'m.1': [(100, 1.0)]}
    pool.query_bulk(metrics)  # connections are reused
    assert a.connections == 1 and b.connections == 1
    pool.close()


def test_carbon_metrics_are_asked_of_every_cache(caches: Callable) -> None:
    a = caches({'carbon.agents.x.cpu': [(100, 1.0)]})
    b = caches({'carbon.agents.x.cpu': [(160, 2.0)]})
    pool = CarbonLinkPool(['127.0.0.1:%d:a' % a.port, '127.0.0.1:%d:b' % b.port])
    assert pool.query_bulk(['carbon.agents.x.cpu']) == {
        'carbon.agents.x.cpu': [(100, 1.0), (160, 2.0)]}
    pool.close()


def test_time_budget_and_retry_delay(caches: Callable) -> None:
    slow = caches({'m': [(1, 1.0)]}, delay=1.5)
    pool = CarbonLinkPool(['127.0.0.1:%d' % slow.port], timeout=0.3, retry_delay=30)
    started = time.monotonic()
    assert pool.query_bulk(['m']) == {}
    assert time.monotonic() - started < 1.0
    assert not pool.is_available(('127.0.0.1', None))
    assert pool.query_bulk(['m']) == {}  # skipped without waiting
    assert len(slow.requests) == 1
    pool.close()


def test_unreachable_and_erroring_caches_yield_nothing(caches: Callable) -> None:
    bad = caches({}, error='boom')
    pool = CarbonLinkPool(['127.0.0.1:%d' % bad.port, '127.0.0.1:1:x'], timeout=0.5)
    assert pool.query_bulk(['a', 'b', 'c', 'd']) == {}
    pool.close()


def test_stale_pooled_connection_is_retried(caches: Callable) -> None:
    cache = caches({'m': [(1, 1.0)]})
    pool = CarbonLinkPool(['127.0.0.1:%d' % cache.port], timeout=2)
    assert pool.query('m') == [(1, 1.0)]
    cache.stop()
    cache2 = FakeCarbonCache({'m': [(2, 2.0)]})
    try:
        pool.ports[('127.0.0.1', None)] = cache2.port
        assert pool.query('m') == [(2, 2.0)]
    finally:
        cache2.stop()
        pool.close()


def test_render_merges_cache_points(tmp_path: Any, caches: Callable,
                                    make_web_settings: Callable, base_time: int) -> None:
    root = str(tmp_path / 'wsp')
    make_whisper(root, 'app.req', [(base_time - i * STEP, 1.0) for i in range(10)])
    make_whisper(root, 'app.coarse', [], archives=[(60, 5), (300, 100)], aggregation='sum')
    cache = caches({'app.req': [(base_time - STEP, 50.0), (base_time + STEP, 60.0)],
                    'app.coarse': [(base_time, 1.0), (base_time + 60, 2.0),
                                   (base_time + 120, 4.0)]})
    settings = make_web_settings(WHISPER_DIR=root, CARBONLINK_HOSTS=['127.0.0.1:%d' % cache.port])
    app = make_app(settings)
    try:
        status, _, body = call(app, '/render', {
            'target': ['app.req', 'app.coarse'], 'format': 'json',
            'from': base_time - 3 * STEP, 'until': base_time + 2 * STEP})
        assert status == 200
        series = {s['target']: s['datapoints'] for s in json.loads(body)}
        assert series['app.req'] == [[1.0, base_time - 2 * STEP], [50.0, base_time - STEP],
                                     [1.0, base_time], [60.0, base_time + STEP],
                                     [None, base_time + 2 * STEP]]
        coarse = dict((ts, v) for v, ts in series['app.coarse'])
        assert coarse[base_time] == 7.0
        assert len(cache.requests) == 1
        assert sorted(cache.requests[0]['metrics']) == ['app.coarse', 'app.req']
    finally:
        app.close()
