"""carbon.hashing: placement must equal carbon 1.1.10's, bumps included."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbon.hashing import (ConsistentHashRing, CRelayHashRing, JumpHashRing, carbonHash,
                            compactHash, fnv32a, jump_bucket)
from carbon.plugins import HASH_RINGS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from common import reference_package_dir  # noqa: E402

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "hashing-vectors.json").read_text())


@functools.lru_cache(maxsize=1)
def _reference_module():
    """carbon 1.1.10's hashing.py (it imports only the standard library and mmh3), loaded
    from the reference venv that bench/common.py installs on first use."""
    path = reference_package_dir("carbon") / "hashing.py"
    spec = importlib.util.spec_from_file_location("_reference_hashing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("hash_type", sorted(VECTORS["metric_positions"]))
def test_metric_positions_match_reference(hash_type):
    positions = VECTORS["metric_positions"][hash_type]
    assert len(positions) >= 40
    for name, expected in positions.items():
        assert carbonHash(name, hash_type) == expected, name


def test_known_hash_values():
    assert compactHash("foo.bar").startswith("04f9")  # 0x04f9 == 1273, the carbon_ch vector
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C  # published FNV-1a test vector
    with pytest.raises(ValueError, match="unknown hash type"):
        carbonHash("x", "sha1_ch")


def test_bump_changes_positions_like_reference():
    # Ten nodes x 100 replicas in a 16-bit space collide; every position must stay unique.
    nodes = [("10.1.0.%d" % i, chr(ord("a") + i - 1)) for i in range(1, 11)]
    ring = ConsistentHashRing(nodes)
    positions = [p for p, _ in ring.ring]
    assert len(positions) == len(set(positions)) == 1000
    assert positions == sorted(positions)
    raw = {ConsistentHashRing([])._position_of("%s:%d" % (n, i)) for n in nodes for i in range(100)}
    assert len(raw) < 1000, "expected at least one collision to exercise the bump"


def test_get_node_and_get_nodes():
    ring = ConsistentHashRing([("127.0.0.1", "a"), ("127.0.0.1", "b"), ("127.0.0.2", "a")])
    nodes = list(ring.get_nodes("foo.bar"))
    assert sorted(nodes) == sorted(ring.nodes)
    assert nodes[0] == ring.get_node("foo.bar")
    ring.remove_node(nodes[0])
    assert nodes[0] not in list(ring.get_nodes("foo.bar"))
    assert ring.get_node("foo.bar") == nodes[1]  # the others keep their positions
    single = ConsistentHashRing([("h", None)])
    assert list(single.get_nodes("x")) == [("h", None)]
    with pytest.raises(LookupError):
        ConsistentHashRing([]).get_node("x")
    assert list(ConsistentHashRing([]).get_nodes("x")) == []


@settings(max_examples=60, deadline=None)
@given(
    hosts=st.lists(st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3", "h.example", "::1"]),
                   min_size=1, max_size=6),
    instances=st.lists(st.sampled_from(["a", "b", "c", None, "1"]), min_size=6, max_size=6),
    hash_type=st.sampled_from(["carbon_ch", "fnv1a_ch", "mmh3_ch"]),
    replicas=st.sampled_from([1, 3, 100]),
    keys=st.lists(st.text(min_size=0, max_size=30), min_size=1, max_size=20),
)
def test_differential_against_reference_ring(hosts, instances, hash_type, replicas, keys):
    reference = _reference_module()
    nodes = list(dict.fromkeys(zip(hosts, instances, strict=False)))
    ours = ConsistentHashRing(nodes, replica_count=replicas, hash_type=hash_type)
    theirs = reference.ConsistentHashRing(nodes, replica_count=replicas, hash_type=hash_type)
    assert ours.ring == theirs.ring
    for key in keys:
        assert ours.get_node(key) == theirs.get_node(key)
        # The reference yields a lone node twice; placement (first occurrences) is equal.
        assert list(ours.get_nodes(key)) == list(dict.fromkeys(theirs.get_nodes(key)))


def test_registry_has_every_hash_type():
    for name in ("carbon_ch", "fnv1a_ch", "mmh3_ch", "crelay_carbon_ch", "crelay_fnv1a_ch",
                 "jump_fnv1a_ch"):
        assert name in HASH_RINGS
    ring = HASH_RINGS.get("fnv1a_ch")([("a", "x"), ("b", "y")])
    assert isinstance(ring, ConsistentHashRing) and ring.hash_type == "fnv1a_ch"


def test_crelay_carbon_ch_has_no_bump_and_orders_ties():
    dests = [("10.1.0.%d" % i, 2004, chr(ord("a") + i - 1)) for i in range(1, 11)]
    ring = CRelayHashRing(dests, hash_type="carbon_ch")
    reference = ConsistentHashRing([(h, i) for h, _, i in dests])
    assert len(ring._positions) == 1000
    assert len(set(ring._positions)) < 1000  # duplicates kept, not bumped
    # Without collisions on a key's path the two agree; overall they differ somewhere.
    agree = sum(ring.get_node(k)[0::2] == reference.get_node(k) for k in map(str, range(2000)))
    assert 1800 < agree < 2000
    # Ties: the first entry of equal positions owns them all.
    for i in range(1, len(ring._positions)):
        if ring._positions[i] == ring._positions[i - 1]:
            assert ring._owners[i] == ring._owners[i - 1]


def test_crelay_fnv1a_ch_uses_ip_port_without_instance():
    with_port = CRelayHashRing([("127.0.0.1", 2003, None), ("127.0.0.1", 2103, None)],
                               hash_type="fnv1a_ch")
    owners = {with_port.get_node(str(i)) for i in range(200)}
    assert owners == {("127.0.0.1", 2003, None), ("127.0.0.1", 2103, None)}
    # With an instance only the instance counts: host and port changes move nothing.
    a = CRelayHashRing([("h1", 1, "x"), ("h2", 2, "y")], hash_type="fnv1a_ch")
    b = CRelayHashRing([("h3", 3, "x"), ("h4", 4, "y")], hash_type="fnv1a_ch")
    for key in map(str, range(200)):
        assert a.get_node(key)[2] == b.get_node(key)[2]
    assert set(a.get_nodes("k")) == {("h1", 1, "x"), ("h2", 2, "y")}


def test_jump_hash_matches_published_algorithm_and_is_consistent():
    # The published jump-hash test vectors (Lamping & Veach's algorithm).
    assert jump_bucket(42, 57) == 43
    assert jump_bucket(0xDEAD10CC, 666) == 361
    assert jump_bucket(256, 1024) == 520
    assert jump_bucket(2 ** 64 - 1, 128) == 92
    assert [jump_bucket(k, 1) for k in range(5)] == [0] * 5
    assert jump_bucket(0, 10) == 0
    assert jump_bucket(0xDEADBEEF, 1 << 16) in range(1 << 16)
    # Growing from n to n+1 buckets only moves keys to the new bucket.
    for key in range(0, 10 ** 6, 9973):
        before, after = jump_bucket(key, 7), jump_bucket(key, 8)
        assert after == before or after == 7
    ring = JumpHashRing([("h", 1, "2"), ("h", 2, "10"), ("h", 3, None), ("h", 4, "1")])
    assert ring._buckets[:3] == [("h", 4, "1"), ("h", 1, "2"), ("h", 2, "10")]
    picks = list(ring.get_nodes("foo.bar"))
    assert sorted(picks) == sorted(ring.nodes) and len(picks) == 4
    assert ring.get_node("foo.bar") == picks[0]
