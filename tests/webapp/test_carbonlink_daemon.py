"""/render merges whisper files with points held by two REAL carbon-cache processes.

Topology: a real carbon-relay (consistent-hashing, carbon_ch, destinations with instance
names ``a`` and ``b``) feeds two real carbon-cache daemons whose writes are paused
(MAX_UPDATES_PER_SECOND=0.0001). Older points are in whisper files written with the
whisper package; newer ones (and one overriding point) only in the caches. The render
app, with CARBONLINK_HOSTS naming the same instances, must ask each metric of the
cache the relay's ring sent it to, and merge the answers over the file values.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support import CarbonInstance, carbonlink, send_tcp, wait_for
from tests.webapp.helpers import LiveServer, http_get, make_whisper
from webapp.app import make_app
from webapp.settings import make_settings
from webapp.storage.carbonlink import CarbonLinkPool

METRICS = ['live.m%02d' % i for i in range(16)]
PAUSED = dict(MAX_UPDATES_PER_SECOND=0.0001, WRITER_THREADS=1)


def whisper_value(i: int, k: int) -> float:
    return 1000.0 * i + k


def cached_value(i: int, k: int) -> float:
    return -1.5 * (i + 1) if k == 12 else i + k / 10


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two paused caches sharing one whisper dir, a relay in front, data in both places."""
    data_dir = tmp_path / 'whisper'
    end = int(time.time()) // 60 * 60 - 60
    for i, metric in enumerate(METRICS):
        make_whisper(str(data_dir), metric, [(end - 60 * k, whisper_value(i, k))
                                             for k in range(10, 30)])
    caches = {name: CarbonInstance(tmp_path / name, LOCAL_DATA_DIR=str(data_dir), **PAUSED)
              for name in ('a', 'b')}
    relay = CarbonInstance(tmp_path / 'relay', program='carbon-relay', section='relay',
                           RELAY_METHOD='consistent-hashing', DESTINATIONS=', '.join(
                               '127.0.0.1:%d:%s' % (c.pickle_port, name)
                               for name, c in caches.items()))
    try:
        for cache in caches.values():
            # Paused writers wait for an update token before taking a metric, so every
            # point stays in the cache (and visible over carbonlink).
            cache.start_foreground()
        relay.start_foreground()
        lines = b''.join(b'%s %r %d\n' % (metric.encode(), cached_value(i, k), end - 60 * k)
                         for i, metric in enumerate(METRICS) for k in list(range(10)) + [12])
        send_tcp(relay.line_port, lines)

        def held() -> dict[str, str]:
            owners = {}
            for name, cache in caches.items():
                answer = carbonlink(cache.query_port, {'type': 'cache-query-bulk',
                                                       'metrics': METRICS})
                for metric, points in answer['datapointsByMetric'].items():
                    if len(points) == 11:
                        owners[metric] = name
            return owners if len(owners) == len(METRICS) else {}
        owners = wait_for(held, what='relay to deliver every point to the caches')
        yield {'caches': caches, 'owners': owners, 'data_dir': str(data_dir), 'end': end}
    finally:
        relay.kill()
        for cache in caches.values():
            cache.kill()


def render(cluster: dict[str, Any], hosts: list[str]) -> dict[str, list]:
    settings = make_settings(STORAGE_DIR=str(Path(cluster['data_dir']).parent),
                             WHISPER_DIR=cluster['data_dir'], CARBONLINK_HOSTS=hosts,
                             CARBONLINK_HASHING_TYPE='carbon_ch', CARBONLINK_TIMEOUT=5.0)
    app = make_app(settings)
    server = LiveServer(app)
    try:
        end = cluster['end']
        status, _, body = http_get(server.url('/render', {
            'target': 'live.*', 'format': 'json', 'from': end - 1800, 'until': end}))
    finally:
        server.stop()
        app.close()
    assert status == 200, body
    return {s['target']: s['datapoints'] for s in json.loads(body)}


def test_cached_points_merge_over_whisper_per_ring_owner(cluster: dict[str, Any]) -> None:
    caches, owners, end = cluster['caches'], cluster['owners'], cluster['end']
    hosts = ['127.0.0.1:%d:%s' % (c.query_port, name) for name, c in caches.items()]
    pool = CarbonLinkPool(hosts)
    try:
        # the relay's carbon_ch ring and the render app's ring place every metric alike
        assert {m: pool.select_host(m)[1] for m in METRICS} == owners
    finally:
        pool.close()
    assert set(owners.values()) == {'a', 'b'}
    series = render(cluster, hosts)
    assert sorted(series) == METRICS
    for i, metric in enumerate(METRICS):
        expected = [[cached_value(i, k) if k < 10 or k == 12 else whisper_value(i, k),
                     end - 60 * k] for k in range(29, -1, -1)]
        assert series[metric] == expected, metric


def test_wrong_instance_names_miss_the_cached_points(cluster: dict[str, Any]) -> None:
    caches, end = cluster['caches'], cluster['end']
    swapped = ['127.0.0.1:%d:%s' % (caches['a'].query_port, 'b'),
               '127.0.0.1:%d:%s' % (caches['b'].query_port, 'a')]
    series = render(cluster, swapped)
    for i, metric in enumerate(METRICS):
        points = dict((t, v) for v, t in series[metric])
        assert points[end] is None                      # newest minute only in a cache
        assert points[end - 720] == whisper_value(i, 12)  # file value not overridden
