"""The cluster file: hosts, their daemons and ports, the ring, loaded once into a ClusterSpec.

    [cluster]
    root = "data"                 # per-host folders (relative to the file's folder)
    [ring]
    hash_type = "carbon_ch"       # ROUTER_HASH_TYPE
    replication_factor = 1
    diverse_replicas = true
    [ports]                       # defaults for every host; [hosts.X.ports] overrides
    relay_line = 2003
    [carbon]                      # extra carbon.conf keys for every daemon
    MAX_CACHE_SIZE = "inf"
    [hosts.a]
    address = "127.0.0.2"         # one machine: 127.0.0.N; real machines: their address
    caches = ["a", "b"]           # carbon-cache instances on this host
    netns = false                 # run this host in its own network namespace (root)
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any

from carbon.config.errors import ConfigError
from carbon.hashing import HASH_FUNCTIONS
from carbon.relay.destinations import Destination


DEFAULT_PORTS = {
    "relay_line": 2003, "relay_pickle": 2004,
    "cache_line": 2103, "cache_pickle": 2104, "cache_query": 7102, "cache_step": 100,
    "render": 8080, "agent": 7070,
}
DEFAULT_SCHEMAS = "[default]\npattern = .*\nretentions = 60s:1d\n"
DEFAULT_AGGREGATION = ("[default_average]\npattern = .*\nxFilesFactor = 0.5\n"
                       "aggregationMethod = average\n")


@dataclass(frozen=True)
class CacheSpec:
    """One carbon-cache instance of a host."""

    instance: str
    line_port: int
    pickle_port: int
    query_port: int


@dataclass(frozen=True)
class HostSpec:
    """One host: its address, its carbon-cache instances, relay, render app and agent."""

    name: str
    address: str
    caches: tuple[CacheSpec, ...]
    relay_line_port: int
    relay_pickle_port: int
    render_port: int
    agent_port: int
    netns: bool = False

    def destinations(self) -> list[Destination]:
        """This host's caches as relay destinations (pickle ports)."""
        return [Destination(self.address, c.pickle_port, c.instance) for c in self.caches]

    @property
    def render_address(self) -> str:
        return "%s:%d" % (self.address, self.render_port)

    @property
    def agent_address(self) -> str:
        return "%s:%d" % (self.address, self.agent_port)


@dataclass(frozen=True)
class ClusterSpec:
    """The whole cluster file, checked."""

    path: str
    root: str
    hosts: tuple[HostSpec, ...]
    hash_type: str = "carbon_ch"
    replication_factor: int = 1
    diverse_replicas: bool = True
    carbon: dict[str, Any] = field(default_factory=dict)
    schemas: str = DEFAULT_SCHEMAS
    aggregation: str = DEFAULT_AGGREGATION
    netns_prefix: str = "carbon-"

    def host(self, name: str) -> HostSpec:
        for host in self.hosts:
            if host.name == name:
                return host
        raise ConfigError("no host %r (hosts: %s)" % (name, ", ".join(self.names())),
                          self.path, key="hosts")

    def names(self) -> list[str]:
        return [host.name for host in self.hosts]

    def destinations(self) -> list[Destination]:
        """Every cache of every host, in file order (the ring's insertion order)."""
        return [dest for host in self.hosts for dest in host.destinations()]

    def host_of(self, address: str) -> HostSpec:
        for host in self.hosts:
            if host.address == address:
                return host
        raise KeyError(address)

    def host_dir(self, host: HostSpec | str) -> str:
        return os.path.join(self.root, host if isinstance(host, str) else host.name)


def load_cluster(path: str) -> ClusterSpec:
    """Read and check a cluster file; ConfigError names the file and key on any problem."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError("cannot read cluster file: %s" % exc.strerror, path) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("not valid TOML: %s" % exc, path) from None
    return parse_cluster(data, path)


def parse_cluster(data: dict[str, Any], path: str) -> ClusterSpec:
    """Build a ClusterSpec from the parsed TOML of ``path``."""
    known = {"cluster", "ring", "ports", "carbon", "storage", "hosts"}
    for key in data:
        if key not in known:
            raise ConfigError("unknown table [%s] (known: %s)" % (key, ", ".join(sorted(known))),
                              path, key=key)
    cluster = _table(data, "cluster", path)
    ring = _table(data, "ring", path)
    storage = _table(data, "storage", path)
    base = os.path.dirname(os.path.abspath(path))
    root = os.path.join(base, str(cluster.get("root", "cluster-data")))
    hash_type = str(ring.get("hash_type", "carbon_ch"))
    if hash_type not in HASH_FUNCTIONS:
        raise ConfigError("unknown hash type %r (known: %s)" % (
            hash_type, ", ".join(sorted(HASH_FUNCTIONS))), path, key="ring.hash_type")
    factor = _int(ring.get("replication_factor", 1), path, "ring.replication_factor")
    defaults = dict(DEFAULT_PORTS)
    defaults.update(_ports(_table(data, "ports", path), path, "ports"))
    hosts_table = _table(data, "hosts", path)
    if not hosts_table:
        raise ConfigError("the cluster has no [hosts.NAME] table", path, key="hosts")
    hosts = [_host(name, _table(hosts_table, name, path, "hosts."), defaults, path)
             for name in hosts_table]
    _check_unique(hosts, path)
    if hash_type == "fnv1a_ch":
        # carbon 1.1.10 (as carbon-c-relay) places fnv1a_ch nodes by instance name alone:
        # two caches named alike share every ring position.
        named: dict[str, str] = {}
        for host in hosts:
            for cache in host.caches:
                if cache.instance in named:
                    raise ConfigError(
                        "fnv1a_ch places caches by instance name alone: %r is on hosts %s "
                        "and %s (give every cache a cluster-unique name)" % (
                            cache.instance, named[cache.instance], host.name),
                        path, key="hosts.%s.caches" % host.name)
                named[cache.instance] = host.name
    if factor < 1 or factor > len(hosts):
        raise ConfigError("replication_factor must be between 1 and the number of hosts (%d)"
                          % len(hosts), path, key="ring.replication_factor")
    carbon = {str(k).upper(): v for k, v in _table(data, "carbon", path).items()}
    return ClusterSpec(path=os.path.abspath(path), root=root, hosts=tuple(hosts),
                       hash_type=hash_type, replication_factor=factor,
                       diverse_replicas=bool(ring.get("diverse_replicas", True)),
                       carbon=carbon,
                       schemas=str(storage.get("schemas", DEFAULT_SCHEMAS)),
                       aggregation=str(storage.get("aggregation", DEFAULT_AGGREGATION)),
                       netns_prefix=str(cluster.get("netns_prefix", "carbon-")))


def _table(data: dict[str, Any], key: str, path: str, prefix: str = "") -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError("[%s%s] must be a table" % (prefix, key), path, key=prefix + key)
    return value


def _int(value: Any, path: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError("must be an integer, got %r" % (value,), path, key=key)
    return value


def _ports(table: dict[str, Any], path: str, where: str) -> dict[str, int]:
    out = {}
    for key, value in table.items():
        if key not in DEFAULT_PORTS:
            raise ConfigError("unknown port %r (known: %s)" % (key, ", ".join(DEFAULT_PORTS)),
                              path, key="%s.%s" % (where, key))
        number = _int(value, path, "%s.%s" % (where, key))
        if not 0 < number < 65536:
            raise ConfigError("port out of range: %d" % number, path, key="%s.%s" % (where, key))
        out[key] = number
    return out


def _host(name: str, table: dict[str, Any], defaults: dict[str, int], path: str) -> HostSpec:
    where = "hosts.%s" % name
    for key in table:
        if key not in ("address", "caches", "ports", "netns"):
            raise ConfigError("unknown key (known: address, caches, ports, netns)", path,
                              key="%s.%s" % (where, key))
    address = table.get("address")
    try:
        ipaddress.ip_address(str(address))
    except ValueError:
        raise ConfigError("address must be an IP address, got %r" % (address,), path,
                          key=where + ".address") from None
    ports = dict(defaults)
    ports.update(_ports(_table(table, "ports", path, where + "."), path, where + ".ports"))
    instances = table.get("caches", ["a"])
    if isinstance(instances, int):
        instances = [chr(ord("a") + i) for i in range(instances)]
    if not instances or not all(isinstance(i, str) and i for i in instances) \
            or len(set(instances)) != len(instances):
        raise ConfigError("caches must be a list of distinct instance names or a count",
                          path, key=where + ".caches")
    step = ports["cache_step"]
    caches = tuple(CacheSpec(inst, ports["cache_line"] + k * step,
                             ports["cache_pickle"] + k * step, ports["cache_query"] + k * step)
                   for k, inst in enumerate(instances))
    return HostSpec(name=name, address=str(address), caches=caches,
                    relay_line_port=ports["relay_line"], relay_pickle_port=ports["relay_pickle"],
                    render_port=ports["render"], agent_port=ports["agent"],
                    netns=bool(table.get("netns", False)))


def _check_unique(hosts: list[HostSpec], path: str) -> None:
    seen: dict[tuple[str, int], str] = {}
    for host in hosts:
        ports = [host.relay_line_port, host.relay_pickle_port, host.render_port,
                 host.agent_port]
        for cache in host.caches:
            ports += [cache.line_port, cache.pickle_port, cache.query_port]
        for port in ports:
            other = seen.get((host.address, port))
            if other is not None:
                raise ConfigError("%s:%d is used twice (hosts %s and %s)" % (
                    host.address, port, other, host.name), path, key="hosts.%s" % host.name)
            seen[(host.address, port)] = host.name
