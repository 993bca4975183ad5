"""The relay's whole-read path for line destinations: one C call a socket read.

``RouteTable`` (``_route.c``) splits a read into lines, checks each line, looks its
name up in a bounded C table (name -> route code, two generations of
RELAY_HASH_CACHE_SIZE names, like ``RouteIndex``), places names it does not know on
the reference ring itself (carbon_ch, fnv1a_ch, mmh3_ch, jump_fnv1a_ch with one
replica) and writes each destination's bytes: ``name value timestamp\\r\\n``, the
value as carbon's line client writes the parsed float (or, for pickle destinations,
its message items ``(name, (timestamp, value))``). Names it cannot place (rules,
replicas, other rings) are placed here in bulk by ``RouteIndex.place`` and taught to
the table. A read holding any line the C path would not write exactly as
``parse_lines`` + ``encode_line`` do (a bad line, inf or nan, a timestamp meaning now,
an overlong line) returns None: the caller takes the general path for that read, so
every bad-input rule stays where it is.

``ChunkStage`` is the pipeline processor that hands reads to ``RelaySink.put_chunk``
(``Pipeline.process_chunk``); batches and LineBatches pass through it unchanged.
"""

from __future__ import annotations

from typing import Any

from carbon.hashing import ConsistentHashRing, JumpHashRing
from carbon.pipeline import Batch, LineBatch, Processor
from carbon.relay.index import RouteIndex
from carbon.relay.routing import ConsistentHashingRouter, DatapointRouter, _same_key

try:  # the C router (setup.py builds it when it can); without it reads are parsed
    from carbon.relay._route import RouteTable
except ImportError:  # pragma: no cover - depends on the build
    RouteTable = None

RING_KINDS = {"carbon_ch": 1, "fnv1a_ch": 2, "mmh3_ch": 3}
JUMP_KIND = 4
Routed = tuple[list[Any], list[int], int, Any, int]


def available() -> bool:
    """True when the C router is built."""
    return RouteTable is not None


class ChunkRouter:
    """Drives one ``RouteTable`` for a RelaySink's destinations (see the module doc)."""

    def __init__(self, index: RouteIndex, router: DatapointRouter, size: int) -> None:
        if RouteTable is None:
            raise RuntimeError("carbon.relay._route is not built")
        self.index = index
        self.router = router
        self.table = RouteTable(len(index.tables), max(0, int(size)))
        self.generation: int | None = None
        self.codes_synced = 0
        self.ring_kind = 0

    @property
    def known(self) -> int:
        """Names the table holds."""
        return self.table.known

    @property
    def memory(self) -> int:
        """Bytes the table holds for names."""
        return self.table.memory

    def route(self, chunk: bytes, max_length: int = 0, items: bool = False) -> Routed | None:
        """(payloads, counts, nowhere, example name, datapoints) of a read of complete
        lines, or None when the read must be parsed (see the module doc). A payload is
        a destination's line bytes, or with ``items`` its pickle message items."""
        generation = self.router.generation
        if generation != self.generation:
            self.table.clear()
            self.generation = generation
            self._set_ring()
        table = self.table
        for _ in range(2):  # a table smaller than one read's names: parse it instead
            routed = table.route(chunk, max_length, items)
            if type(routed) is not list:
                return routed
            unknown = list(dict.fromkeys(routed))
            codes = self.index.place(unknown)
            if codes is None:  # more destination sets than route codes
                return None
            self._sync_codes()
            table.learn(unknown, codes)
        return None

    def _sync_codes(self) -> None:
        members = self.index.members
        for code in range(self.codes_synced, len(members)):
            self.table.set_code(code, members[code])
        self.codes_synced = len(members)

    def _set_ring(self) -> None:
        """Let the table place unknown names itself when the router's answer is the
        owner of one ring position (see ``ConsistentHashingRouter.compute_destinations``)."""
        kind, positions = 0, []
        codes: list[int | None] = []
        router = self.router
        # exactly consistent hashing's placement: not a subclass placing names its own way
        if (isinstance(router, ConsistentHashingRouter) and router.replication_factor == 1
                and type(router).compute_destinations
                is ConsistentHashingRouter.compute_destinations
                and router.getKey is _same_key):
            ring, owners = router.ring, []
            if type(ring) is ConsistentHashRing and ring.hash_type in RING_KINDS and ring.ring:
                kind, positions = RING_KINDS[ring.hash_type], list(ring._positions)
                owners = [node for _, node in ring.ring]
            elif type(ring) is JumpHashRing and ring._buckets:
                kind, owners = JUMP_KIND, list(ring._buckets)
                positions = list(range(len(owners)))
            codes = [self.index._answer_code((router._destination(node),)) for node in owners]
        if kind and None not in codes:
            self.table.set_ring(kind, positions, bytes(codes + codes[:1]))
        else:
            kind = 0
            self.table.set_ring(0, [], b"\0")
        self.ring_kind = kind
        self._sync_codes()


class ChunkStage(Processor):
    """The relay's last processor: whole reads go to ``RelaySink.put_chunk``."""

    handles_lines = True
    handles_chunks = True
    passes_chunks = True

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def process_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        return self.sink.put_chunk(chunk, max_length)

    def process(self, batch: Batch) -> Batch:
        return batch

    def process_lines(self, batch: LineBatch) -> LineBatch:
        return batch
