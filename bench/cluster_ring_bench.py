"""The design's limits as the cluster grows, computed with the relay's own ring code.

    .venv/bin/python bench/cluster_ring_bench.py [--hosts 3 10 100] [--caches 2]
                                                 [--names 200000]

Per ring size (hosts x caches per host; carbon_ch, fnv1a_ch, mmh3_ch): positions taken on the
ring, each node's share of ``--names`` metric names (min, max against the even share),
the fraction of names whose owner changes when one host is added (what a rebalance
moves and what the relays double-write meanwhile), the relay's connections (one per
cache; old ring + new ring while a move runs), and the placement cost (names/s through
``destinations_many``, the relay's bulk path, route cache off).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from carbon.config.settings import Settings  # noqa: E402
from carbon.relay.routing import ConsistentHashingRouter  # noqa: E402


def router(hosts: int, caches: int, hash_type: str) -> ConsistentHashingRouter:
    ring = ConsistentHashingRouter(Settings(REPLICATION_FACTOR=1, DIVERSE_REPLICAS=True,
                                            ROUTER_HASH_TYPE=hash_type,
                                            RELAY_HASH_CACHE_SIZE=0))
    for h in range(hosts):
        for c in range(caches):
            # fnv1a_ch places by instance name alone: cluster-unique names ("h7c1")
            ring.add_destination(("10.%d.%d.%d" % (h // 65536, h // 256 % 256, h % 256),
                                  2104, "h%dc%d" % (h, c)))
    return ring


def owners(ring: ConsistentHashingRouter, names: list[str]) -> list[str]:
    return [dests[0].host for dests in ring.destinations_many(names)]


def measure(hosts: int, caches: int, hash_type: str, names: list[str]) -> dict:
    ring = router(hosts, caches, hash_type)
    started = time.perf_counter()
    before = owners(ring, names)
    seconds = time.perf_counter() - started
    nodes = Counter(str(d) for d in ring.destinations_many(names) for d in d[:1])
    even = len(names) / (hosts * caches)
    grown = owners(router(hosts + 1, caches, hash_type), names)
    moved = sum(a != b for a, b in zip(before, grown, strict=True))
    return {"hosts": hosts, "caches_per_host": caches, "hash_type": hash_type,
            "ring_positions": ring.ring.ring_len,
            "share_min": min(nodes.values()) / even if len(nodes) == hosts * caches else 0.0,
            "share_max": max(nodes.values()) / even,
            "moved_adding_one_host": moved / len(names),
            "ideal_moved": 1 / (hosts + 1),
            "relay_connections": hosts * caches,
            "relay_connections_during_move": (hosts + 1) * caches,
            "placement_names_per_s": len(names) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[3, 10, 100])
    parser.add_argument("--caches", type=int, default=2)
    parser.add_argument("--names", type=int, default=200_000)
    args = parser.parse_args()
    names = ["app%03d.host%04d.metric%06d" % (n % 997, n % 4999, n) for n in range(args.names)]
    for hosts in args.hosts:
        for hash_type in ("carbon_ch", "fnv1a_ch", "mmh3_ch"):
            print(json.dumps(measure(hosts, args.caches, hash_type, names)), flush=True)


if __name__ == "__main__":
    main()
