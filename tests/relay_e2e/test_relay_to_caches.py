"""Our carbon-relay hashing to two of our carbon-caches: whisper contents end to end."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from carbon.hashing import ConsistentHashRing
from tests.support import CarbonInstance, read_whisper, send_tcp, wait_for

NOW = int(time.time()) // 60 * 60
RUN = itertools.count()


def stored(instance: CarbonInstance, metric: str) -> dict:
    return read_whisper(instance.whisper_path(metric), NOW - 3600, NOW + 60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    caches = {name: CarbonInstance(base / name) for name in ("a", "b")}
    for cache in caches.values():
        cache.start_foreground()
    destinations = ["127.0.0.1:%d:%s" % (c.pickle_port, name) for name, c in caches.items()]
    relay = CarbonInstance(base / "relay", program="carbon-relay", section="relay",
                           RELAY_METHOD="consistent-hashing",
                           DESTINATIONS=", ".join(destinations))
    relay.start_foreground()
    ring = ConsistentHashRing([("127.0.0.1", name) for name in caches])
    yield relay, caches, ring
    relay.kill()
    for cache in caches.values():
        cache.kill()


def owner(ring: ConsistentHashRing, caches: dict, metric: str) -> tuple[CarbonInstance,
                                                                        CarbonInstance]:
    _, name = ring.get_node(metric)
    other = next(n for n in caches if n != name)
    return caches[name], caches[other]


def test_every_point_lands_on_its_ring_owner(cluster):
    relay, caches, ring = cluster
    metrics = ["e2e.host%d.cpu" % i for i in range(40)]
    send_tcp(relay.line_port, b"".join(b"%s %d %d\n" % (m.encode(), i, NOW - 60)
                                       for i, m in enumerate(metrics)))
    for i, metric in enumerate(metrics):
        home, other = owner(ring, caches, metric)
        wait_for(lambda h=home, m=metric: stored(h, m), what=metric)
        assert stored(home, metric) == {NOW - 60: float(i)}
        assert not other.whisper_path(metric).exists()
    assert {owner(ring, caches, m)[0] for m in metrics} == set(caches.values())


line_junk = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b""))


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32),
                       min_size=1, max_size=6),
       junk=st.lists(line_junk, max_size=6), seed=st.randoms(use_true_random=False))
def test_fuzzed_inbound_streams_keep_every_valid_point(cluster, values, junk, seed):
    relay, caches, ring = cluster
    run = next(RUN)
    good = [("fuzz.r%d.m%d" % (run, i), v) for i, v in enumerate(values)]
    lines = [("%s %r %d" % (m, v, NOW - 120)).encode() for m, v in good] + junk
    seed.shuffle(lines)
    send_tcp(relay.line_port, b"\n".join(lines) + b"\n")
    for metric, value in good:
        home, _ = owner(ring, caches, metric)
        wait_for(lambda h=home, m=metric: stored(h, m), what=metric)
        assert stored(home, metric) == {NOW - 120: pytest.approx(value)}
    assert relay.proc.poll() is None
