"""RELAY_METHOD = cluster-rebalance: the relays' router while a cluster's ring changes.

DESTINATIONS lists the caches of both rings (the relay keeps a client for each);
REBALANCE_STATE names a JSON file written by the host's agent::

    {"old": [...], "new": [...], "hash_type": "carbon_ch", "replication_factor": 1,
     "diverse_replicas": true, "moved": ".../moved.txt"}

A metric goes to its owners on the new ring and, until its name is listed in the
``moved`` file, to its owners on the old ring too (double-write), so no point lands
only on a copy about to be deleted. The relay polls ``check_rules()`` every 10 s, and
at once on SIGHUP (``RelayDaemon.reload``, ``carbon.daemon.relay``): new state or newly
moved names clear the route cache. The relay takes and leaves this router on SIGHUP too
(``carbon.relay.ring_swap``), without a restart.
"""

from __future__ import annotations

import json
import os
from typing import Any

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.relay.destinations import Destination, parse_destinations
from carbon.relay.routing import ConsistentHashingRouter, DestinationSetRouter, _setting


def _ring(state: dict[str, Any], key: str) -> ConsistentHashingRouter:
    settings = Settings(REPLICATION_FACTOR=int(state.get("replication_factor", 1)),
                        DIVERSE_REPLICAS=bool(state.get("diverse_replicas", True)),
                        ROUTER_HASH_TYPE=state.get("hash_type") or "carbon_ch",
                        RELAY_HASH_CACHE_SIZE=0)
    router = ConsistentHashingRouter(settings)
    for dest in parse_destinations(state.get(key) or []):
        router.add_destination(dest)
    return router


class RebalancingRouter(DestinationSetRouter):
    """New ring's owners plus, for metrics not moved yet, the old ring's owners.
    DESTINATIONS (the clients) are kept as a set; the rings alone decide placement."""

    plugin_name = "cluster-rebalance"
    rechecks_rules = True  # the cluster plan file

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self.state_path = _setting(settings, "REBALANCE_STATE")
        if not self.state_path:
            raise ConfigError("RELAY_METHOD cluster-rebalance needs REBALANCE_STATE",
                              key="REBALANCE_STATE")
        self.moved: set[str] = set()
        self._moved_offset = 0
        self._state_mtime: float | None = None
        self.old: ConsistentHashingRouter | None = None
        self.new: ConsistentHashingRouter | None = None
        self.moved_path = ""
        error = self.check_rules()
        if error is not None:
            raise error

    def check_rules(self) -> ConfigError | None:
        """Reload the state file when it changed and read newly moved names."""
        changed = False
        try:
            mtime = os.stat(self.state_path).st_mtime
        except OSError:
            return ConfigError("cannot read rebalance state", self.state_path,
                               key="REBALANCE_STATE")
        if mtime != self._state_mtime:
            try:
                with open(self.state_path, encoding="utf-8") as handle:
                    state = json.load(handle)
                old, new = _ring(state, "old"), _ring(state, "new")
            except (OSError, ValueError) as exc:
                return ConfigError("bad rebalance state: %s" % exc, self.state_path,
                                   key="REBALANCE_STATE")
            self.old, self.new, self._state_mtime = old, new, mtime
            if state.get("moved") != self.moved_path:
                self.moved_path, self.moved, self._moved_offset = state.get("moved") or "", \
                    set(), 0
            changed = True
        changed = self._read_moved() or changed
        if changed:
            self.clear_cache()
        return None

    def _read_moved(self) -> bool:
        if not self.moved_path:
            return False
        try:
            with open(self.moved_path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size < self._moved_offset:
                    self.moved, self._moved_offset = set(), 0  # the file was reset
                handle.seek(self._moved_offset)
                data = handle.read()
        except FileNotFoundError:
            return False
        complete = data.rfind(b"\n") + 1
        if not complete:
            return False
        self._moved_offset += complete
        self.moved.update(data[:complete].decode("utf-8", "replace").split("\n")[:-1])
        return True

    def compute_destinations(self, metric: str) -> list[Destination]:
        assert self.new is not None and self.old is not None
        out = list(self.new.compute_destinations(metric))
        if metric not in self.moved:
            out += [d for d in self.old.compute_destinations(metric) if d not in out]
        return out
