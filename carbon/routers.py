"""RELAY_METHOD routers: which destinations a metric name goes to.

Same module name and router names as carbon 1.1.10 (``rules``, ``consistent-hashing``,
``aggregated-consistent-hashing``, ``fast-hashing``, ``fast-aggregated-hashing``),
registered in ``carbon.plugins.ROUTERS`` by their own modules (carbon.relay.routing,
carbon.relay.aggregated); placement equals the reference's. This module only re-exports
them for code written against carbon 1.1.10; nothing of ours imports it.

Every router answers ``get_destinations(metric) -> list[Destination]`` and, on the
data path, ``route_batch(batch) -> {destination: [datapoint, ...]}``. The answer per
name is kept in a bounded LRU (``RELAY_HASH_CACHE_SIZE`` entries), so routing a name
seen before is one cache lookup. Changing destinations clears the cache; so must a
reload of the rules a router depends on (``clear_cache()``, which also bumps the
router's ``generation`` so the relay's lean-path index, ``carbon.relay.index``, drops
its entries). ``destinations_many(names)`` places many names uncached, in bulk.
"""

from __future__ import annotations

from carbon.relay.aggregated import (AggregatedConsistentHashingRouter,
                                     FastAggregatedHashingRouter)
from carbon.relay.destinations import (Destination, parse_destination, parse_destinations,
                                       parseDestination, parseDestinations)
from carbon.relay.routing import (ConsistentHashingRouter, DatapointRouter, FastHashingRouter,
                                  FastHashRing, RelayRulesRouter, make_router)
from carbon.relay.rules import RelayRule, load_relay_rules

__all__ = ["DatapointRouter", "RelayRulesRouter", "ConsistentHashingRouter",
           "AggregatedConsistentHashingRouter", "FastHashingRouter",
           "FastAggregatedHashingRouter", "FastHashRing", "RelayRule", "load_relay_rules",
           "make_router", "Destination", "parse_destination", "parse_destinations",
           "parseDestination", "parseDestinations"]
