"""RELAY_METHOD routers: which destinations a metric name goes to.

Same module name and router names as carbon 1.1.10 (``rules``, ``consistent-hashing``,
``aggregated-consistent-hashing``, ``fast-hashing``, ``fast-aggregated-hashing``),
registered in ``carbon.plugins.ROUTERS``; placement equals the reference's.

Every router answers ``get_destinations(metric) -> list[Destination]`` and, on the
data path, ``route_batch(batch) -> {destination: [datapoint, ...]}``. The answer per
name is kept in a bounded LRU (``RELAY_HASH_CACHE_SIZE`` entries), so routing a name
seen before is one cache lookup. Changing destinations clears the cache; so must a
reload of the rules a router depends on (``clear_cache()``, which also bumps the
router's ``generation`` so the relay's lean-path index, ``carbon.relay.index``, drops
its entries). ``destinations_many(names)`` places many names uncached, in bulk.
"""

from __future__ import annotations

from typing import Any, Iterable

from carbon.config.errors import ConfigError
from carbon.plugins import ROUTERS
from carbon.relay.aggregated import (AggregatedConsistentHashingRouter,
                                     FastAggregatedHashingRouter)
from carbon.relay.destinations import (Destination, parse_destination, parse_destinations,
                                       parseDestination, parseDestinations)
from carbon.relay.routing import (ConsistentHashingRouter, DatapointRouter, FastHashingRouter,
                                  FastHashRing, RelayRulesRouter, _setting)
from carbon.relay.rules import RelayRule, load_relay_rules

__all__ = ["DatapointRouter", "RelayRulesRouter", "ConsistentHashingRouter",
           "AggregatedConsistentHashingRouter", "FastHashingRouter",
           "FastAggregatedHashingRouter", "FastHashRing", "RelayRule", "load_relay_rules",
           "make_router", "Destination", "parse_destination", "parse_destinations",
           "parseDestination", "parseDestinations"]


for _router in (RelayRulesRouter, ConsistentHashingRouter, AggregatedConsistentHashingRouter,
                FastHashingRouter, FastAggregatedHashingRouter):
    ROUTERS.add(_router.plugin_name, _router)


def make_router(settings: Any, destinations: Iterable[tuple] | None = None,
                **kwargs: Any) -> DatapointRouter:
    """The RELAY_METHOD router with DESTINATIONS (or ``destinations``) added in order.

    Extra keyword arguments go to the router (``rules=``, ``aggregation_rules=``).
    """
    method = _setting(settings, "RELAY_METHOD", "rules")
    try:
        router_class = ROUTERS.get(method)
    except KeyError:
        raise ConfigError("In carbon.conf, RELAY_METHOD must be one of %s. Invalid value: '%s'"
                          % (", ".join(ROUTERS.names()), method), key="RELAY_METHOD") from None
    router = router_class(settings, **kwargs)
    if destinations is None:
        try:
            destinations = parse_destinations(_setting(settings, "DESTINATIONS", []) or [])
        except ValueError as exc:
            raise ConfigError(str(exc), key="DESTINATIONS") from None
    for dest in destinations:
        try:
            router.add_destination(Destination(*dest))
        except ValueError as exc:
            raise ConfigError(str(exc), key="DESTINATIONS") from None
    return router
