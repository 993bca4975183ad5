"""Consistent hash rings, placement-compatible with carbon 1.1.10 and carbon-c-relay.

``ConsistentHashRing`` keeps the reference module name and API (carbonate and the
render app import it). Nodes are ``(server, instance)`` tuples, exactly as the
reference uses them; a node's 100 ring positions are hashes of ``str(node)`` plus a
replica number, and a position already taken is bumped by one (carbon 1.1.10's
collision rule), so placement equals the reference for the same nodes added in the
same order.

Hash types registered in ``carbon.plugins.HASH_RINGS`` (``factory(nodes, replica_count)``):

* ``carbon_ch`` / ``fnv1a_ch`` / ``mmh3_ch`` -- the reference ring.
* ``crelay_carbon_ch`` -- carbon-c-relay's carbon_ch: no collision bump, ties sorted by
  server then instance.
* ``crelay_fnv1a_ch`` -- carbon-c-relay's fnv1a_ch: hashes ``instance`` or, without one,
  ``server:port``.
* ``jump_fnv1a_ch`` -- carbon-c-relay's jump consistent hash over fnv1a-64.

The carbon-c-relay rings take full ``(server, port, instance)`` destinations as nodes
(``takes_port = True``) because their placement depends on the port.
"""

from __future__ import annotations

import bisect
from hashlib import md5
from functools import partial
from itertools import repeat
from operator import itemgetter, methodcaller
from typing import Any, Callable, Hashable, Iterable, Iterator

from carbon.plugins import HASH_RINGS

try:  # CPython's own md5: about twice as fast as OpenSSL's on names this short
    from _md5 import md5 as _small_md5
except ImportError:  # pragma: no cover - a CPython built without it
    _small_md5 = md5

try:
    import mmh3
except ImportError:  # pragma: no cover - mmh3 is a dependency, but keep the error readable
    mmh3 = None

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def fnv32a(data: bytes, seed: int = _FNV32_OFFSET) -> int:
    """32-bit FNV-1a of ``data`` (bytes as unsigned, as carbon does)."""
    hval = seed
    for byte in data:
        hval = ((hval ^ byte) * _FNV32_PRIME) & _MASK32
    return hval


def _fnv32a_signed_char(data: bytes) -> int:
    """32-bit FNV-1a with C ``char`` sign extension, as carbon-c-relay computes it on x86."""
    hval = _FNV32_OFFSET
    for byte in data:
        if byte > 127:
            byte |= 0xFFFFFF00
        hval = ((hval ^ byte) * _FNV32_PRIME) & _MASK32
    return hval


def _fnv64a_signed_char(data: bytes) -> int:
    """64-bit FNV-1a with C ``char`` sign extension (carbon-c-relay's jump_fnv1a_ch)."""
    hval = _FNV64_OFFSET
    for byte in data:
        if byte > 127:
            byte |= 0xFFFFFFFFFFFFFF00
        hval = ((hval ^ byte) * _FNV64_PRIME) & _MASK64
    return hval


def compactHash(string: str) -> str:  # noqa: N802 - reference name
    """Hex md5 of ``string`` (reference helper)."""
    return md5(string.encode("utf-8")).hexdigest()


def carbon_position(key: str) -> int:
    """carbon_ch: the first 16 bits of md5(key)."""
    digest = md5(key.encode("utf-8")).digest()
    return (digest[0] << 8) | digest[1]


def fnv1a_position(key: str) -> int:
    """fnv1a_ch: the 32-bit FNV-1a folded to 16 bits."""
    big = fnv32a(key.encode("utf-8"))
    return (big >> 16) ^ (big & 0xFFFF)


def mmh3_position(key: str) -> int:
    """mmh3_ch: signed 32-bit murmur3 (seed 0)."""
    if mmh3 is None:
        raise RuntimeError('Install "mmh3" to use the mmh3_ch hash type.')
    return mmh3.hash(key)


_DIGEST = methodcaller("digest")
_FIRST_TWO = itemgetter(slice(0, 2))


def carbon_positions(keys: Iterable[str]) -> Iterator[int]:
    """``carbon_position`` of many keys, every step a C-level ``map``."""
    digests = map(_DIGEST, map(_small_md5, map(str.encode, keys)))
    return map(int.from_bytes, map(_FIRST_TWO, digests), repeat("big"))


def positions_function(hash_type: str) -> Callable[[Iterable[str]], Iterator[int]]:
    """The bulk form of ``hash_function(hash_type)``: ring positions of many keys
    (carbon_ch through ``carbon_positions``, the others a ``map`` of the one-key function)."""
    if hash_type == "carbon_ch":
        return carbon_positions
    return partial(map, hash_function(hash_type))


HASH_FUNCTIONS: dict[str, Callable[[str], int]] = {
    "carbon_ch": carbon_position,
    "fnv1a_ch": fnv1a_position,
    "mmh3_ch": mmh3_position,
}


def hash_function(hash_type: str) -> Callable[[str], int]:
    """The key -> ring position function of a reference hash type."""
    try:
        return HASH_FUNCTIONS[hash_type]
    except KeyError:
        raise ValueError("unknown hash type %r (known: %s)" % (
            hash_type, ", ".join(sorted(HASH_FUNCTIONS)))) from None


def carbonHash(key: str, hash_type: str) -> int:  # noqa: N802 - reference name
    """Ring position of ``key`` for ``hash_type`` (reference helper)."""
    return hash_function(hash_type)(key)


class ConsistentHashRing:
    """carbon 1.1.10's consistent hash ring, with its exact placement."""

    takes_port = False

    def __init__(self, nodes: Iterable[Hashable] = (), replica_count: int = 100,
                 hash_type: str = "carbon_ch") -> None:
        self.ring: list[tuple[int, Any]] = []
        self.ring_len = 0
        self.nodes: set[Any] = set()
        self.nodes_len = 0
        self.replica_count = replica_count
        self.hash_type = hash_type
        self._position_of = hash_function(hash_type)
        self._positions: list[int] = []
        self._taken: set[int] = set()
        for node in nodes:
            self.add_node(node)

    def compute_ring_position(self, key: str) -> int:
        return self._position_of(key)

    def _replica_key(self, node: Any, i: int) -> str:
        if self.hash_type == "fnv1a_ch":
            return "%d-%s" % (i, node[1])
        return "%s:%d" % (node, i)

    def add_node(self, key: Any) -> None:
        """Add a node's replica positions, bumping any position already taken."""
        self.nodes.add(key)
        self.nodes_len = len(self.nodes)
        for i in range(self.replica_count):
            position = self._position_of(self._replica_key(key, i))
            while position in self._taken:
                position += 1
            self._taken.add(position)
            index = bisect.bisect_left(self._positions, position)
            self._positions.insert(index, position)
            self.ring.insert(index, (position, key))
        self.ring_len = len(self.ring)

    def remove_node(self, key: Any) -> None:
        """Drop a node's positions; other nodes keep theirs (bumps included)."""
        self.nodes.discard(key)
        self.nodes_len = len(self.nodes)
        self.ring = [entry for entry in self.ring if entry[1] != key]
        self._positions = [entry[0] for entry in self.ring]
        self._taken = set(self._positions)
        self.ring_len = len(self.ring)

    def _start_index(self, key: str) -> int:
        position = self._position_of(key)
        return bisect.bisect_left(self._positions, position) % self.ring_len

    def get_node(self, key: str) -> Any:
        """The node owning ``key``; LookupError on an empty ring."""
        if not self.ring:
            raise LookupError("the hash ring has no nodes")
        return self.ring[self._start_index(key)][1]

    def get_nodes(self, key: str) -> Iterator[Any]:
        """Distinct nodes in ring order from ``key``'s position (the reference's walk).

        Like the reference, the walk stops one entry short of a full turn.
        """
        if not self.ring:
            return
        if self.nodes_len == 1:
            yield next(iter(self.nodes))
            return
        ring = self.ring
        ring_len = self.ring_len
        index = self._start_index(key)
        last_index = (index - 1) % ring_len
        seen: set[Any] = set()
        while len(seen) < self.nodes_len and index != last_index:
            node = ring[index][1]
            if node not in seen:
                seen.add(node)
                yield node
            index = (index + 1) % ring_len


class CRelayHashRing:
    """carbon-c-relay's carbon_ch and fnv1a_ch rings (no collision bump).

    Nodes are ``(server, port, instance)`` destinations. Equal positions are ordered
    by server, then instance (carbon_ch, no instance last) or port (fnv1a_ch); the
    first of equal positions owns them all.
    """

    takes_port = True

    def __init__(self, nodes: Iterable[tuple[str, int, str | None]] = (),
                 replica_count: int = 100, hash_type: str = "carbon_ch") -> None:
        if hash_type not in ("carbon_ch", "fnv1a_ch"):
            raise ValueError("carbon-c-relay rings are carbon_ch or fnv1a_ch, not %r"
                             % hash_type)
        self.hash_type = hash_type
        self.replica_count = replica_count
        self.nodes: list[tuple[str, int, str | None]] = []
        self._positions: list[int] = []
        self._owners: list[Any] = []
        for node in nodes:
            self.add_node(node)

    def compute_ring_position(self, key: str) -> int:
        if self.hash_type == "carbon_ch":
            return carbon_position(key)
        big = _fnv32a_signed_char(key.encode("utf-8"))
        return (big >> 16) ^ (big & 0xFFFF)

    def _entries(self, node: tuple[str, int, str | None]) -> list[tuple[Any, ...]]:
        server, port, instance = node
        out = []
        for i in range(self.replica_count):
            if self.hash_type == "carbon_ch":
                text = "('%s', %s):%d" % (server, "None" if instance is None
                                          else "'%s'" % instance, i)
                tie = (server, instance is None, instance or "")
            else:
                text = ("%d-%s:%d" % (i, server, port) if instance is None
                        else "%d-%s" % (i, instance))
                tie = (server, port)
            out.append((self.compute_ring_position(text), tie, node))
        return out

    def _rebuild(self) -> None:
        entries = sorted((e for n in self.nodes for e in self._entries(n)),
                         key=lambda e: (e[0], e[1]))
        self._positions = [e[0] for e in entries]
        owners: list[Any] = []
        for i, entry in enumerate(entries):
            if i and entry[0] == entries[i - 1][0]:
                owners.append(owners[-1])
            else:
                owners.append(entry[2])
        self._owners = owners

    def add_node(self, node: tuple[str, int, str | None]) -> None:
        self.nodes.append(tuple(node))
        self._rebuild()

    def remove_node(self, node: tuple[str, int, str | None]) -> None:
        self.nodes = [n for n in self.nodes if n != tuple(node)]
        self._rebuild()

    def get_node(self, key: str) -> Any:
        return next(iter(self.get_nodes(key)))

    def get_nodes(self, key: str) -> Iterator[Any]:
        if not self._owners:
            return
        total = len(set(self.nodes))
        index = bisect.bisect_left(self._positions, self.compute_ring_position(key))
        seen: set[Any] = set()
        for step in range(len(self._owners)):
            owner = self._owners[(index + step) % len(self._owners)]
            if owner not in seen:
                seen.add(owner)
                yield owner
                if len(seen) == total:
                    return


def jump_bucket(key: int, buckets: int) -> int:
    """Lamping & Veach's jump consistent hash, as carbon-c-relay computes it."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & _MASK64
        j = int(float(b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


class JumpHashRing:
    """carbon-c-relay's jump_fnv1a_ch: nodes with an instance first (numeric or string
    order), then nodes without one in the order added; replicas chosen by re-hashing
    with xorshift and removing the chosen bucket."""

    takes_port = True
    hash_type = "jump_fnv1a_ch"

    def __init__(self, nodes: Iterable[tuple[str, int, str | None]] = (),
                 replica_count: int = 1) -> None:
        self.nodes: list[tuple[str, int, str | None]] = []
        self._buckets: list[Any] = []
        for node in nodes:
            self.add_node(node)

    @staticmethod
    def _instance_order(instance: str) -> tuple[int, Any]:
        try:
            return (0, int(instance))
        except ValueError:
            return (1, instance)

    def _rebuild(self) -> None:
        with_instance = [n for n in self.nodes if n[2] is not None]
        without = [n for n in self.nodes if n[2] is None]
        with_instance.sort(key=lambda n: self._instance_order(n[2]))
        self._buckets = with_instance + without

    def add_node(self, node: tuple[str, int, str | None]) -> None:
        self.nodes.append(tuple(node))
        self._rebuild()

    def remove_node(self, node: tuple[str, int, str | None]) -> None:
        self.nodes = [n for n in self.nodes if n != tuple(node)]
        self._rebuild()

    def compute_ring_position(self, key: str) -> int:
        return jump_bucket(_fnv64a_signed_char(key.encode("utf-8")), len(self._buckets))

    def get_node(self, key: str) -> Any:
        return next(iter(self.get_nodes(key)))

    def get_nodes(self, key: str) -> Iterator[Any]:
        buckets = list(self._buckets)
        hval = _fnv64a_signed_char(key.encode("utf-8"))
        while buckets:
            j = jump_bucket(hval, len(buckets))
            yield buckets[j]
            hval ^= hval >> 12
            hval = (hval ^ (hval << 25)) & _MASK64
            hval ^= hval >> 27
            hval = (hval * 2685821657736338717) & _MASK64
            buckets[j] = buckets[-1]
            buckets.pop()


def _reference_ring(hash_type: str) -> Callable[..., ConsistentHashRing]:
    def factory(nodes: Iterable[Any] = (), replica_count: int = 100) -> ConsistentHashRing:
        return ConsistentHashRing(nodes, replica_count=replica_count, hash_type=hash_type)
    factory.takes_port = False  # type: ignore[attr-defined]
    factory.__doc__ = "carbon 1.1.10's ring with the %s hash." % hash_type
    return factory


def _crelay_ring(hash_type: str) -> Callable[..., CRelayHashRing]:
    def factory(nodes: Iterable[Any] = (), replica_count: int = 100) -> CRelayHashRing:
        return CRelayHashRing(nodes, replica_count=replica_count, hash_type=hash_type)
    factory.takes_port = True  # type: ignore[attr-defined]
    factory.__doc__ = "carbon-c-relay's %s ring." % hash_type
    return factory


for _name in ("carbon_ch", "fnv1a_ch", "mmh3_ch"):
    HASH_RINGS.add(_name, _reference_ring(_name))
HASH_RINGS.add("crelay_carbon_ch", _crelay_ring("carbon_ch"))
HASH_RINGS.add("crelay_fnv1a_ch", _crelay_ring("fnv1a_ch"))
HASH_RINGS.add("jump_fnv1a_ch", JumpHashRing)
