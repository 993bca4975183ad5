"""A new ring for a running relay: SIGHUP re-reads the routing keys of carbon.conf and
swaps the routing table in place.

The routing keys (``ROUTING_KEYS``: RELAY_METHOD, DESTINATIONS, the hash type,
replication, REBALANCE_STATE...) are read again from the relay's carbon.conf. When any
changed, a new router is built from them and ``RelaySink.swap_routing`` puts it in
place between two reads: the listening sockets are not touched (no sender sees a
refused or reset connection), a destination kept keeps its connection, queue and
spool, a new destination gets a client that connects at once, and a dropped one gets
no more points and is closed once it has sent what it holds. Points already queued
keep the destinations they were routed to (see docs/cluster.md, "A new ring without a
restart", for why that is right during a rebalance's double-write phase).

Each relay process (the master and every RELAY_WORKERS worker, which get the SIGHUP
passed on) then writes ``routing.json`` into its own spool folder: its pid, the time
of the reload, the routing keys in force and the destinations it now sends to, so the
cluster agent can wait until every process of a relay has switched.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from carbon.config.errors import ConfigError
from carbon.config.loader import load_settings
from carbon.relay.client_set import configured_destinations
from carbon.relay.routing import make_router
from carbon.relay.sink import RelaySink

ROUTING_KEYS = ("RELAY_METHOD", "DESTINATIONS", "ROUTER_HASH_TYPE", "REPLICATION_FACTOR",
                "DIVERSE_REPLICAS", "REBALANCE_STATE", "RELAY_RULES")
ACK_FILE = "routing.json"


def _key(value: Any) -> Any:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else value


def changed_keys(running: Any, fresh: Any) -> list[str]:
    """The routing keys whose value in ``fresh`` differs from the running settings."""
    return [key for key in ROUTING_KEYS if _key(running.get(key)) != _key(fresh.get(key))]


def swap_ring(settings: Any, sink: RelaySink, gauges: dict[str, Callable[[], float]],
              say: Callable[[str], None], workers: list[int] | None = None) -> bool:
    """Re-read the routing keys of the relay's carbon.conf (``settings``, the running
    ones) and swap ``sink``'s router and destinations when they changed; True if
    swapped. ``gauges``: the reporter's, which gets the queue gauges of added
    destinations. A file that no longer loads, or a router that cannot be built from
    it, keeps what runs (said why)."""
    swapped = False
    if not settings.get("config_file"):  # built in code, not from a file: nothing to read
        return False
    try:
        fresh = load_settings(settings["program"], settings.get("instance"),
                              settings["config_file"], settings.get("GRAPHITE_ROOT"))
    except (ConfigError, KeyError) as exc:
        say("SIGHUP: kept the running ring: %s" % exc)
        fresh = None
    keys = changed_keys(settings, fresh) if fresh is not None else []
    if fresh is not None and keys:
        candidate = type(settings)()
        candidate.update(settings)
        for key in ROUTING_KEYS:
            candidate[key] = fresh.get(key)
        try:
            destinations = configured_destinations(candidate)
            router = make_router(candidate, destinations)
        except (ConfigError, ValueError) as exc:
            say("SIGHUP: kept the running ring: %s" % exc)
        else:
            for key in ROUTING_KEYS:
                settings[key] = candidate[key]  # what a restarted worker starts with
            added, dropped = sink.swap_routing(router, destinations)
            for name, gauge in sink.gauges().items():
                gauges.setdefault(name, gauge)
            swapped = True
            say("SIGHUP: new ring (%s changed): RELAY_METHOD %s, %d destinations, %d added "
                "(%s), %d dropped (%s; drained before closing)" % (
                    ", ".join(keys), settings.get("RELAY_METHOD"), len(destinations),
                    len(added), ", ".join(map(str, added)) or "none", len(dropped),
                    ", ".join(map(str, dropped)) or "none"))
    write_ack(sink, settings, workers or [])
    return swapped


def write_ack(sink: Any, settings: Any, workers: list[int]) -> None:
    """``routing.json`` in the process's spool folder (atomically replaced)."""
    ack = {"pid": os.getpid(), "time": time.time(), "workers": workers,
           "relay_method": settings.get("RELAY_METHOD"),
           "rebalance_state": settings.get("REBALANCE_STATE"),
           "destinations": [str(d) for d in sink.destinations]}
    try:
        os.makedirs(sink.spool_dir, exist_ok=True)
        path = os.path.join(sink.spool_dir, ACK_FILE)
        with open(path + ".tmp", "w", encoding="utf-8") as out:
            json.dump(ack, out)
        os.replace(path + ".tmp", path)
    except OSError as exc:
        sink.log.msg("cannot write %s: %s" % (ACK_FILE, exc))
