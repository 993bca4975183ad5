"""The routers' machinery: the per-name LRU, the batch API, rules and hash placement.

Built-in routers register in ``carbon.plugins.ROUTERS`` here (and in
``carbon.relay.aggregated``); ``make_router`` builds the RELAY_METHOD one.
``carbon.routers`` (the reference module name) re-exports them.
"""

from __future__ import annotations

import functools
import importlib.util
from bisect import bisect_left
from itertools import repeat
import os
from typing import Any, Callable, ClassVar, Iterable

from carbon.config.defaults import DEFAULTS
from carbon.config.errors import ConfigError
from carbon.hashing import ConsistentHashRing, hash_function, positions_function
from carbon.pipeline import Batch, Datapoint
from carbon.plugins import HASH_RINGS, ROUTERS
from carbon.relay.destinations import Destination, parse_destinations
from carbon.relay.rules import RelayRule, load_relay_rules


def _setting(settings: Any, key: str, default: Any = None) -> Any:
    # drop-in: a Settings (dict) or carbon 1.1.10's settings object (attributes)
    getter = getattr(settings, "get", None)
    if getter is not None:
        return getter(key, default)
    return getattr(settings, key, default)


def _configured(settings: Any, key: str) -> Any:
    """``key`` of ``settings`` (either kind), else its default (carbon.config.defaults)."""
    return _setting(settings, key, DEFAULTS[key])


class DatapointRouter:
    """Base router: destination bookkeeping, the per-name LRU and the batch API.

    A router plugin (ROUTERS) subclasses it, as carbon 1.1.10's do; its ``generation``
    says when placement changed, which the relay's lean paths need. A router with rules
    of its own re-read every 10 s declares ``rechecks_rules`` and ``check_rules``.
    """

    plugin_name = ""
    rechecks_rules: ClassVar[bool] = False

    def __init__(self, settings: Any) -> None:
        size = int(_configured(settings, "RELAY_HASH_CACHE_SIZE") or 0)
        self.cache_size = max(0, size)
        self.generation = 0  # bumped whenever placement may have changed
        # functools' C LRU: same bound and eviction order as cachetools.LRUCache, and
        # about twice as fast on hits (the data path's common case).
        self.get_destinations = functools.lru_cache(maxsize=self.cache_size)(
            self._destinations)

    # -- subclasses implement these -------------------------------------------------
    def add_destination(self, destination: tuple) -> None:
        raise NotImplementedError

    def remove_destination(self, destination: tuple) -> None:
        raise NotImplementedError

    def has_destination(self, destination: tuple) -> bool:
        raise NotImplementedError

    def count_destinations(self) -> int:
        raise NotImplementedError

    def compute_destinations(self, metric: str) -> list[Destination]:
        """Uncached placement of ``metric``."""
        raise NotImplementedError

    def check_rules(self) -> ConfigError | None:
        """Reload changed rules (with ``rechecks_rules``); the error that kept the old."""
        return None

    def unknown_rule_destinations(self) -> list[Destination]:
        """Destinations the router's rules name that are not among its own (none)."""
        return []

    # -- shared --------------------------------------------------------------------
    def clear_cache(self) -> None:
        """Forget cached placements (call it whenever placement may change)."""
        self.get_destinations.cache_clear()
        self.generation += 1

    @property
    def cached_names(self) -> int:
        return self.get_destinations.cache_info().currsize

    def _destinations(self, metric: str) -> tuple[Destination, ...]:
        return tuple(self.compute_destinations(metric))

    def uncached_destinations(self, metric: str) -> tuple[Destination, ...]:
        """``get_destinations`` without the LRU, for callers keeping their own index."""
        return tuple(self.compute_destinations(metric))

    def destinations_many(self, metrics: list[str]) -> list[tuple[Destination, ...]]:
        """``uncached_destinations`` of many names (routers may answer in bulk faster)."""
        compute = self.compute_destinations
        return [tuple(compute(metric)) for metric in metrics]

    # ``get_destinations(metric) -> tuple[Destination, ...]`` (set in __init__): the
    # destinations of ``metric`` in the reference's order, each at most once, cached.

    def route_batch(self, batch: Batch) -> dict[Destination, list[Datapoint]]:
        """Split a batch by destination; a point with several replicas is in each list.

        Points with no destination are returned under the key ``None``.
        """
        out: dict[Any, list[Datapoint]] = {}
        lookup = self.get_destinations
        if not self.cache_size:
            memo: dict[str, tuple] = {}
            uncached = lookup

            def lookup(name: str) -> tuple:
                found = memo.get(name)
                if found is None:
                    found = memo[name] = uncached(name)
                return found
        get = out.get
        for point in batch:
            dests = lookup(point[0])
            if len(dests) == 1:
                bucket = get(dests[0])
                if bucket is None:
                    out[dests[0]] = [point]
                else:
                    bucket.append(point)
                continue
            for dest in dests or (None,):
                bucket = get(dest)
                if bucket is None:
                    out[dest] = [point]
                else:
                    bucket.append(point)
        return out

    # -- reference spellings (carbonate and friends call these) ---------------------
    def addDestination(self, destination: tuple) -> None:  # noqa: N802
        self.add_destination(destination)

    def removeDestination(self, destination: tuple) -> None:  # noqa: N802
        self.remove_destination(destination)

    def hasDestination(self, destination: tuple) -> bool:  # noqa: N802
        return self.has_destination(destination)

    def countDestinations(self) -> int:  # noqa: N802
        return self.count_destinations()

    def getDestinations(self, metric: str) -> tuple[Destination, ...]:  # noqa: N802
        return self.get_destinations(metric)


class DestinationSetRouter(DatapointRouter):
    """A router whose destinations are a plain set (``self.destinations``): adding or
    removing one clears the cached placements."""

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self.destinations: set[Destination] = set()

    def add_destination(self, destination: tuple) -> None:
        self.destinations.add(Destination(*destination))
        self.clear_cache()

    def remove_destination(self, destination: tuple) -> None:
        self.destinations.discard(Destination(*destination))
        self.clear_cache()

    def has_destination(self, destination: tuple) -> bool:
        return Destination(*destination) in self.destinations

    def count_destinations(self) -> int:
        return len(self.destinations)


@ROUTERS.register('rules')
class RelayRulesRouter(DestinationSetRouter):
    """RELAY_METHOD = rules: first matching rule wins unless it says ``continue``.

    Only destinations also listed in DESTINATIONS (added to the router) are used.
    """

    plugin_name = "rules"
    rules_path: str | None = None  # the file the rules came from (SIGHUP re-reads it)

    def __init__(self, settings: Any, rules: list[RelayRule] | None = None) -> None:
        super().__init__(settings)
        if rules is None:
            path = _setting(settings, "relay-rules") or os.path.join(
                _setting(settings, "CONF_DIR", "") or "",
                _configured(settings, "RELAY_RULES"))
            self.rules_path = path
            rules = load_relay_rules(path)
        self.rules = rules

    def unknown_rule_destinations(self) -> list[Destination]:
        """Destinations named by rules but missing from DESTINATIONS (never used)."""
        named = {d for rule in self.rules for d in rule.destinations}
        return sorted(named - self.destinations, key=str)

    def compute_destinations(self, metric: str) -> list[Destination]:
        out: list[Destination] = []
        for rule in self.rules:
            if rule.matches(metric):
                for dest in rule.destinations:
                    if dest in self.destinations and dest not in out:
                        out.append(dest)
                if not rule.continue_matching:
                    break
        return out


@ROUTERS.register('consistent-hashing')
class ConsistentHashingRouter(DatapointRouter):
    """RELAY_METHOD = consistent-hashing, with REPLICATION_FACTOR and DIVERSE_REPLICAS."""

    plugin_name = "consistent-hashing"
    default_hash_type = "carbon_ch"

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self.replication_factor = int(_configured(settings, "REPLICATION_FACTOR"))
        self.diverse_replicas = bool(_configured(settings, "DIVERSE_REPLICAS"))
        self.hash_type = _setting(settings, "ROUTER_HASH_TYPE") or self.default_hash_type
        self.ring = self._make_ring(settings)
        self.instance_ports: dict[tuple, int] = {}  # {(server, instance): port}
        self.getKey: Callable[[str], str] = _same_key  # noqa: N815
        self._owners: tuple[int, list[tuple[Destination, ...]]] = (-1, [])

    def _make_ring(self, settings: Any) -> Any:
        return HASH_RINGS.resolve(self.hash_type, "ROUTER_HASH_TYPE")([])

    def _member(self, destination: tuple) -> tuple:
        """What makes a destination unique on this ring: (server, instance) as in the
        reference, or the whole destination for rings that hash the port."""
        server, port, instance = destination
        # an optional attribute of a HASH_RINGS plugin (third-party rings lack it)
        if getattr(self.ring, "takes_port", False):
            return Destination(server, port, instance)
        return (server, instance)

    def add_destination(self, destination: tuple) -> None:
        server, port, instance = destination
        member = self._member(destination)
        if member in self.instance_ports:
            raise ValueError("destination instance (%s, %s) already configured"
                             % (server, instance))
        self.instance_ports[member] = port
        self.ring.add_node(member)
        self.clear_cache()

    def remove_destination(self, destination: tuple) -> None:
        server, port, instance = destination
        member = self._member(destination)
        if member not in self.instance_ports:
            raise ValueError("destination instance (%s, %s) not configured"
                             % (server, instance))
        del self.instance_ports[member]
        self.ring.remove_node(member)
        self.clear_cache()

    def has_destination(self, destination: tuple) -> bool:
        return self._member(destination) in self.instance_ports

    def count_destinations(self) -> int:
        return len(self.instance_ports)

    def _destination(self, node: tuple) -> Destination:
        if len(node) == 3:
            return Destination(*node)
        server, instance = node
        return Destination(server, self.instance_ports[(server, instance)], instance)

    def compute_destinations(self, metric: str) -> list[Destination]:
        key = self.getKey(metric)
        out: list[Destination] = []
        if self.replication_factor < 1:
            return out
        if self.replication_factor == 1:
            # The first node of the walk; rings with get_node answer it directly.
            # an optional method of a HASH_RINGS plugin (third-party rings lack it)
            first = getattr(self.ring, "get_node", None)
            if first is not None:
                try:
                    return [self._destination(first(key))]
                except (LookupError, StopIteration):
                    return out
        if self.diverse_replicas:
            used_servers: set[str] = set()
            for node in self.ring.get_nodes(key):
                if node[0] in used_servers:
                    continue
                used_servers.add(node[0])
                out.append(self._destination(node))
                if len(used_servers) >= self.replication_factor:
                    break
        else:
            for node in self.ring.get_nodes(key):
                out.append(self._destination(node))
                if len(out) == self.replication_factor:
                    break
        return out

    def destinations_many(self, metrics: list[str]) -> list[tuple[Destination, ...]]:
        """One replica on the reference ring, keyed by the name: in bulk, each name is
        one hash and one bisect (the same walk ``get_node`` does)."""
        ring = self.ring
        if (self.replication_factor != 1 or self.getKey is not _same_key
                or type(ring) is not ConsistentHashRing or not ring.ring):
            return super().destinations_many(metrics)
        generation, owners = self._owners
        if generation != self.generation:
            owners = [(self._destination(node),) for _, node in ring.ring]
            owners.append(owners[0])
            self._owners = (self.generation, owners)
        # bisect_left answers 0..size; owners[size] is owners[0] (the walk wraps around)
        found = map(bisect_left, repeat(ring._positions), positions_function(ring.hash_type)(
            metrics))
        return list(map(owners.__getitem__, found))

    def setKeyFunction(self, func: Callable[[str], str]) -> None:  # noqa: N802
        self.getKey = func
        self.clear_cache()

    def setKeyFunctionFromModule(self, keyfunc_spec: str) -> None:  # noqa: N802
        """``/path/to/module.py:function`` -- the routing key function carbonate uses."""
        module_path, func_name = keyfunc_spec.rsplit(":", 1)
        spec = importlib.util.spec_from_file_location("keyfunc_module", module_path)
        if spec is None or spec.loader is None:
            raise ValueError("cannot load key function module %s" % module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.setKeyFunction(getattr(module, func_name))


def _same_key(metric: str) -> str:
    """The default routing key: the metric name itself."""
    return metric


class FastHashRing:
    """carbon 1.1.10's fast-hashing 'ring': nodes sorted by hash, start at hash % n."""

    takes_port = False

    def __init__(self, hash_type: str = "mmh3_ch") -> None:
        self.hash_type = hash_type
        self._hash = hash_function(hash_type)
        self.nodes: set[tuple] = set()
        self.sorted_nodes: list[tuple[int, tuple]] = []

    def _update_nodes(self) -> None:
        self.sorted_nodes = sorted(((self._hash(str(n)), n) for n in self.nodes),
                                   key=lambda v: (v[0], str(v[1])))

    def add_node(self, node: tuple) -> None:
        self.nodes.add(node)
        self._update_nodes()

    def remove_node(self, node: tuple) -> None:
        self.nodes.discard(node)
        self._update_nodes()

    def get_nodes(self, key: str) -> Iterable[tuple]:
        count = len(self.sorted_nodes)
        if not count:
            return
        seed = self._hash(key) % count
        for n in range(seed, seed + count):
            yield self.sorted_nodes[n % count][1]


@ROUTERS.register('fast-hashing')
class FastHashingRouter(ConsistentHashingRouter):
    """RELAY_METHOD = fast-hashing (mmh3_ch unless ROUTER_HASH_TYPE says otherwise)."""

    plugin_name = "fast-hashing"
    default_hash_type = "mmh3_ch"

    def _make_ring(self, settings: Any) -> Any:
        try:
            return FastHashRing(self.hash_type)
        except ValueError as exc:
            raise ConfigError(str(exc), key="ROUTER_HASH_TYPE") from None


def make_router(settings: Any, destinations: Iterable[tuple] | None = None,
                **kwargs: Any) -> DatapointRouter:
    """The RELAY_METHOD router with DESTINATIONS (or ``destinations``) added in order.

    Extra keyword arguments go to the router (``rules=``, ``aggregation_rules=``).
    """
    method = _configured(settings, "RELAY_METHOD")
    try:
        router_class = ROUTERS.get(method)
    except KeyError:
        raise ConfigError("In carbon.conf, RELAY_METHOD must be one of %s. Invalid value: '%s'"
                          % (", ".join(ROUTERS.names()), method), key="RELAY_METHOD") from None
    router = router_class(settings, **kwargs)
    if destinations is None:
        try:
            destinations = parse_destinations(_configured(settings, "DESTINATIONS") or [])
        except ValueError as exc:
            raise ConfigError(str(exc), key="DESTINATIONS") from None
    for dest in destinations:
        try:
            router.add_destination(Destination(*dest))
        except ValueError as exc:
            raise ConfigError(str(exc), key="DESTINATIONS") from None
    return router
