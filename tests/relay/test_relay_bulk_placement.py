"""Placing many names at once gives exactly the per-name placement, for every hash type."""

from __future__ import annotations

import pytest

from carbon.config.settings import Settings
from carbon.hashing import ConsistentHashRing, hash_function, positions_function
from carbon.relay.index import RouteIndex
from carbon.routers import make_router

DESTS = ["127.0.0.1:2004:a", "127.0.0.1:2104:b", "127.0.0.2:2004:c"]
NAMES = (["bench.host%03d.metric%06d" % (i % 7, i) for i in range(3000)]
         + ["unicode.é.名前", "a", "", "x" * 300])


@pytest.mark.parametrize("hash_type", ["carbon_ch", "fnv1a_ch", "mmh3_ch"])
def test_bulk_positions_equal_one_by_one(hash_type):
    assert list(positions_function(hash_type)(NAMES)) == list(map(hash_function(hash_type),
                                                                  NAMES))


@pytest.mark.parametrize("hash_type", ["carbon_ch", "fnv1a_ch", "mmh3_ch"])
def test_destinations_many_equal_get_destinations(hash_type):
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", ROUTER_HASH_TYPE=hash_type,
                                  REPLICATION_FACTOR=1, DESTINATIONS=DESTS))
    assert type(router.ring) is ConsistentHashRing  # the bulk path, not the fallback
    # names past the ring's last position wrap around to its first node
    last = router.ring._positions[-1]
    wrapping = next(n for n in ("wrap.%d" % i for i in range(1_000_000))
                    if router.ring.compute_ring_position(n) > last)
    names = NAMES + [wrapping]
    assert router.destinations_many(names) == [router.get_destinations(n) for n in names]
    router.remove_destination(("127.0.0.1", 2104, "b"))  # the owners table follows changes
    assert router.destinations_many(names) == [router.get_destinations(n) for n in names]


def test_route_index_codes_follow_placement_across_generations():
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=1,
                                  DESTINATIONS=DESTS))
    dests = list(router.get_destinations(n)[0] for n in NAMES)
    order = sorted(set(dests), key=str)
    index = RouteIndex(router, order, size=1000)  # smaller than the names: generations turn
    raw = [n.encode() for n in NAMES]
    for chunk in (raw[:1500], raw[1000:], raw[:2000], raw):
        codes = index.codes(chunk)
        assert codes is not None
        for name, code in zip(chunk, codes, strict=True):
            where = dests[raw.index(name)]
            assert index.members[code] == (order.index(where),)
    assert len(index.current) <= 1000 + len(raw)
