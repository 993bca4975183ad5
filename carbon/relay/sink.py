"""RelaySink: the relay's pipeline sink -- route each batch, queue it per destination.

Its parts live beside it: the clients with their spools and TLS (``client_set``), the
timers (``timers``), DYNAMIC_ROUTER (``dynamic``) and the flush at shutdown
(``shutdown``); TAG_RELAY_NORMALIZED is ``carbon.tags.normalize_batch``.

Built from its ``RelaySinkConfig``, a router and its destinations, a FlowControl, a Stats
and a reactor (``RelaySink.from_settings`` builds the config and the router from
carbon.conf once; a log and the spool directory may be passed in too). ``start()`` connects
to every destination and replays what a previous run spooled; ``put_many(batch)`` routes
and queues; ``put_chunk(read)`` routes and checks a whole read of lines in C and writes
each destination's lines or pickle items (``chunks``); ``put_lines(line_batch)`` (the lean
path) routes received lines by name through a ``RouteIndex`` and queues their bytes as they
came (line protocol) or points made in bulk (pickle); sending happens a moment later
(TIME_TO_DEFER_SENDING) in whole buffers, or at once when a queue reaches its high
watermark. ``stop()`` flushes for SHUTDOWN_FLUSH_TIMEOUT seconds, then spools what is left
and closes; the Deferred fires when done.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress
from typing import Any, Callable, cast

from twisted.internet import defer

from carbon.formats.pickled import items_from_lines
from carbon.logs import CarbonLog
from carbon.pipeline import Batch, LineBatch, Sink
from carbon.relay.client import DestinationClient
from carbon.relay.chunks import ChunkRouter, available as chunks_available
from carbon.relay.client_set import (ClientSetConfig, checked_destinations,
                                     configured_destinations, make_clients, spool_directory)
from carbon.relay.destinations import Destination
from carbon.relay.dynamic import DynamicRouting
from carbon.relay.index import RouteIndex
from carbon.relay.shutdown import flush_then_close
from carbon.relay.timers import RelayTimers
from carbon.relay.routing import DatapointRouter, make_router
from carbon.tags import normalize_batch


# How often dropped and unroutable points are logged when CARBON_METRIC_INTERVAL is 0
# (no self-metrics).
DROP_LOG_SECONDS = 60.0


@dataclass(frozen=True)
class RelaySinkConfig:
    """What the relay's sink reads of carbon.conf besides the routing (the router and
    destinations it is given), built once (``from_settings``)."""

    clients: ClientSetConfig  # the destination clients'
    spool_dir: str  # STORAGE_DIR/relay-spool/<program>-<instance>
    log_interval: float  # CARBON_METRIC_INTERVAL (DROP_LOG_SECONDS when 0)
    normalize_tags: bool  # TAG_RELAY_NORMALIZED
    defer_sending: float  # TIME_TO_DEFER_SENDING
    dynamic_router: bool  # DYNAMIC_ROUTER
    dynamic_retries: int  # DYNAMIC_ROUTER_MAX_RETRIES
    hash_cache_size: int  # RELAY_HASH_CACHE_SIZE
    shutdown_flush_timeout: float  # SHUTDOWN_FLUSH_TIMEOUT
    config_file: str | None  # named by a ConfigError

    @classmethod
    def from_settings(cls, settings: Any, spool_dir: str | None = None) -> RelaySinkConfig:
        return cls(  # checked in the order the sink used to read them
            spool_dir=spool_dir or spool_directory(settings),
            clients=ClientSetConfig.from_settings(settings),
            log_interval=float(settings["CARBON_METRIC_INTERVAL"] or DROP_LOG_SECONDS),
            normalize_tags=bool(settings["TAG_RELAY_NORMALIZED"]),
            defer_sending=float(settings["TIME_TO_DEFER_SENDING"] or 0),
            dynamic_router=bool(settings["DYNAMIC_ROUTER"]),
            dynamic_retries=int(settings["DYNAMIC_ROUTER_MAX_RETRIES"] or 0),
            hash_cache_size=int(settings["RELAY_HASH_CACHE_SIZE"] or 0),
            shutdown_flush_timeout=float(settings["SHUTDOWN_FLUSH_TIMEOUT"] or 0),
            config_file=settings.get("config_file"))


class RelaySink(Sink):
    """Routes batches to destination clients; see the module docstring."""

    @classmethod
    def from_settings(cls, settings: Any, flow: Any, stats: Any, reactor: Any, *,
                      router: DatapointRouter | None = None,
                      destinations: list[Destination] | None = None,
                      spool_dir: str | None = None, **options: Any) -> RelaySink:
        """The relay's sink as carbon.conf says: DESTINATIONS (or ``destinations``),
        the RELAY_METHOD router (or ``router``), its RelaySinkConfig; ``options`` go
        to the constructor."""
        checked = configured_destinations(settings, destinations)
        if router is None:
            router = make_router(settings, checked)
        config = RelaySinkConfig.from_settings(settings, spool_dir)
        return cls(config, router, checked, flow, stats, reactor, **options)

    def __init__(self, config: RelaySinkConfig, router: Any, destinations: list[Destination],
                 flow: Any, stats: Any, reactor: Any, *, log: CarbonLog | None = None,
                 spill_after: float = 3.0, headroom: int = 50000,
                 initial_delay: float = 0.2, max_delay: float = 5.0,
                 check_interval: float = 0.1, log_interval: float | None = None) -> None:
        self.config = config
        self.flow = flow
        self.stats = stats
        self.reactor = reactor
        self.log = log if log is not None else CarbonLog()
        self.destinations = checked_destinations(destinations, config.config_file)
        self.router = router
        self.spool_dir = config.spool_dir
        self.check_interval = check_interval
        self.log_interval = float(log_interval if log_interval is not None
                                  else config.log_interval)
        self.normalize_tags = config.normalize_tags
        self.timers = RelayTimers(reactor, config.defer_sending, self._flush_all)
        self.schedule_flush = self.timers.schedule_flush
        self.dynamic: DynamicRouting | None = None
        if config.dynamic_router:
            self.dynamic = DynamicRouting(self.router, config.dynamic_retries,
                                          self.log, self.put_many)
        self.client_options = dict(spill_after=spill_after, headroom=headroom,
                                   initial_delay=initial_delay, max_delay=max_delay)
        self.clients: dict[Destination, DestinationClient] = self._make_clients(
            self.destinations)
        # destinations a new ring dropped: sending what they hold, then closed
        self.retiring: dict[Destination, DestinationClient] = {}
        self._build_index()
        self.unroutable_unlogged = 0
        self.stopping = False
        self.stopped = False
        declared = isinstance(self.router, DatapointRouter)
        unknown = self.router.unknown_rule_destinations() if declared else []
        if unknown:
            self.log.msg("WARNING: relay rules name destinations missing from DESTINATIONS, "
                         "which are never used: %s" % ", ".join(map(str, unknown)))

    def _make_clients(self, destinations: list[Destination]
                      ) -> dict[Destination, DestinationClient]:
        dynamic = self.dynamic
        return make_clients(destinations, self.config.clients, self.stats, self.flow,
                            self.reactor, self.log, self.spool_dir, self.schedule_flush,
                            state_changed=dynamic.state_changed if dynamic is not None
                            else None, **self.client_options)

    def _build_index(self) -> None:
        """The client list and the lean paths' route index for the current router."""
        self.client_list = list(self.clients.values())
        # The lean path: received lines are routed by name bytes. Tag normalisation
        # rewrites names, and a router plugin that is not a DatapointRouter (one check,
        # here) has no ``generation`` to say when its placement changes: both take the
        # tuple path.
        self.line_protocol = self.config.clients.client.protocol == "line"
        self.accepts_lines = not self.normalize_tags and isinstance(self.router,
                                                                    DatapointRouter)
        self.index: RouteIndex | None = None
        self.chunks: ChunkRouter | None = None
        if self.accepts_lines:
            self.index = RouteIndex(self.router, [c.destination for c in self.client_list],
                                    self.config.hash_cache_size)
            # The whole-read path: reads routed (and lines written) in C.
            if chunks_available():
                self.chunks = ChunkRouter(self.index, self.router, self.index.size)

    def swap_routing(self, router: Any, destinations: list[Destination]
                     ) -> tuple[list[Destination], list[Destination]]:
        """A new routing table in place (``carbon.relay.ring_swap``): from now on every
        point is routed by ``router`` to ``destinations``. A destination kept keeps its
        client (connection, queue, spool); a new one gets a client that connects now; a
        dropped one stops getting points and is closed once it has sent what it holds
        (queue and spool). Points already queued keep the destinations they were routed
        to. Returns (added, dropped)."""
        destinations = checked_destinations(destinations, self.config.config_file)
        kept: dict[Destination, DestinationClient | None] = {}
        for dest in destinations:
            client = self.clients.get(dest)
            if client is None and dest in self.retiring and not self.retiring[dest].stopping:
                client = self.retiring.pop(dest)  # dropped, back before it closed
            kept[dest] = client
        added = [d for d, client in kept.items() if client is None]
        fresh = self._make_clients(added) if added else {}
        clients: dict[Destination, DestinationClient] = {}
        for dest in destinations:
            client = kept[dest]
            clients[dest] = fresh[dest] if client is None else client
        dropped = [d for d in self.clients if d not in clients]
        for dest in dropped:
            self.retiring[dest] = self.clients[dest]
        self.router, self.destinations, self.clients = router, list(destinations), clients
        if self.dynamic is not None:
            self.dynamic.router = router
        self._build_index()
        if not self.stopping:
            for dest in added:
                fresh[dest].connect()
        self.schedule_flush()
        return added, dropped

    def _retire(self) -> None:
        """Close each dropped destination's client once its queue and spool are sent."""
        for dest, client in list(self.retiring.items()):
            client.flush()
            if client.drained() and not client.spool.points and not client.stopping:
                client.begin_stop()
                client.close().addCallback(self._retired, dest, client)

    def _retired(self, _: Any, dest: Destination, client: DestinationClient) -> None:
        client.finish()
        if self.retiring.get(dest) is client:
            del self.retiring[dest]
            self.log.clients("%s: drained and closed (no longer a destination)" % client)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Connect to every destination; spooled points are replayed first."""
        for client in self.clients.values():
            if client.spool.points:
                self.log.msg("%s: %d spooled datapoints to replay"
                             % (client, client.spool.points))
            client.connect()
        self.timers.every(self.check_interval, self._check)
        self.timers.every(self.log_interval, self._log_drops)
        # the reference re-reads rules every 10 s (the router may change on SIGHUP)
        self.timers.every(10.0, self._check_rules)

    def _check_rules(self) -> None:
        if not (isinstance(self.router, DatapointRouter) and self.router.rechecks_rules):
            return
        error = self.router.check_rules()
        if error is not None:
            self.log.msg("aggregation rules not reloaded: %s" % error)

    # -- data path ----------------------------------------------------------------------
    def put_many(self, batch: Batch) -> None:
        """Route ``batch`` and queue each destination's share."""
        if not batch:
            return
        if self.normalize_tags:
            batch = cast(Batch, normalize_batch(batch, _keep_name))  # the list or a new one
        if self.stopped:
            self._spool_late(batch)
            return
        now = self.reactor.seconds()
        for client, points in self._shares(batch):
            client.enqueue(points)
            self._queued(client, now)
        self.schedule_flush()

    def put_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        """Route and queue a whole read of complete lines in one C call (``chunks``):
        line bytes or pickle message items per destination; returns its datapoints, or
        None when the read must be parsed instead."""
        if self.chunks is None or self.stopped:
            return None
        routed = self.chunks.route(chunk, max_length, not self.line_protocol)
        if routed is None:
            return None
        payloads, counts, nowhere, example, count = routed
        clients = self.client_list
        now = self.reactor.seconds()
        for k, payload in enumerate(payloads):
            if payload is not None:
                self._queue(clients[k], payload, counts[k], now)
        if nowhere:
            self._unroutable(nowhere, example.decode("utf-8"))
        self.schedule_flush()
        return count

    def put_lines(self, batch: LineBatch) -> None:
        """Route a LineBatch by name through the RouteIndex and queue each destination's
        share as its queue keeps it: the lines' bytes (line) or message items (pickle)."""
        if self.stopped:
            self.put_many(batch.points())
            return
        index = self.index
        assert index is not None  # (accepts_lines)
        codes = index.codes(batch.names)
        if codes is None:  # more destination sets than route codes
            self.put_many(batch.points())
            return
        lines = self.line_protocol
        items: list[Any] = batch.lines if lines else items_from_lines(batch)
        clients = self.client_list
        now = self.reactor.seconds()
        count = len(items)
        first = codes[0]
        if codes.count(first) == count:  # the whole batch goes to the same place
            payload = b"\r\n".join(items) + b"\r\n" if lines else None
            for n, k in enumerate(index.members[first]):
                # A queue owns the item lists it is given: each replica gets its own.
                self._queue(clients[k], payload or (list(items) if n else items), count, now)
        else:
            for k, table in enumerate(index.tables):
                selected = codes.translate(table)
                number = selected.count(1)
                if number:
                    share = list(compress(items, selected))
                    self._queue(clients[k], b"\r\n".join(share) + b"\r\n" if lines else share,
                                number, now)
        nowhere = codes.count(0)
        if nowhere:
            self._unroutable(nowhere, batch.names[codes.index(0)].decode("utf-8"))
        self.schedule_flush()

    def _queue(self, client: DestinationClient, prepared: Any, count: int, now: float) -> None:
        client.enqueue_prepared(prepared, count)
        self._queued(client, now)

    @staticmethod
    def _queued(client: DestinationClient, now: float) -> None:
        """After queueing to ``client``: sent at once past its high mark, then checked."""
        if client.queued >= client.high:
            client.flush()
        client.check(now)

    def _spool_late(self, batch: Batch) -> None:
        """Points arriving after stop() finished go straight to the spools."""
        for client, points in self._shares(batch):
            client.enqueue(points)
            client.finish()

    def _shares(self, batch: Batch) -> Iterator[tuple[DestinationClient, Batch]]:
        """(client, points) for each destination's share of ``batch``; a share no client
        takes is counted unroutable."""
        clients = self.clients
        for dest, points in self.router.route_batch(batch).items():
            client = clients.get(dest)
            if client is None:
                self._unroutable(len(points), points[0][0])
            else:
                yield client, points

    def _unroutable(self, count: int, example: str) -> None:
        self.stats.increment("relayUnroutable", count)
        if not self.unroutable_unlogged:
            self.log.msg("no destination for %s (and others): datapoints dropped" % example)
        self.unroutable_unlogged += count

    def _flush_all(self) -> bool:
        """Flush every client; True if any has more to send."""
        more = False
        for client in self.clients.values():
            if client.flush():
                more = True
        for client in self.retiring.values():
            if client.flush():
                more = True
        return more

    def _check(self) -> None:
        now = self.reactor.seconds()
        for client in self.clients.values():
            client.check(now)
            if client.pending or client.spool.points:
                self.schedule_flush()
        if self.retiring:
            for client in self.retiring.values():
                client.check(now)
            self._retire()

    def _log_drops(self) -> None:
        for client in self.clients.values():
            client.log_drops()
        if self.unroutable_unlogged:
            self.log.msg("%d datapoints had no destination in the last interval"
                         % self.unroutable_unlogged)
            self.unroutable_unlogged = 0

    # -- introspection ------------------------------------------------------------------
    @property
    def queued(self) -> int:
        """Points in memory queues plus spools."""
        return sum(c.queued + c.spool.points for c in
                   [*self.clients.values(), *self.retiring.values()])

    def gauges(self) -> dict[str, Callable[[], float]]:
        """Per-destination queue gauges for the Reporter (memory and spool points)."""
        out: dict[str, Callable[[], float]] = {}
        for client in self.clients.values():
            name = "destinations.%s." % client.destination.stat_name
            out[name + "queued"], out[name + "spool"] = _queue_gauges(client)
        return out

    # -- shutdown -----------------------------------------------------------------------
    def stop(self) -> defer.Deferred[Any]:
        """Flush for SHUTDOWN_FLUSH_TIMEOUT seconds, spool the rest, close everything."""
        if self.stopping:
            return defer.succeed(None)
        self.stopping = True
        self.timers.stop_loops()
        done = flush_then_close({**self.retiring, **self.clients}, self.reactor,
                                self.config.shutdown_flush_timeout, self.log,
                                self.timers.cancel_flush)
        done.addCallback(self._stopped)
        return done

    def _stopped(self, _: Any) -> None:
        self.stopped = True


def _queue_gauges(client: DestinationClient) -> tuple[Callable[[], float], Callable[[], float]]:
    """A client's queued and spooled points, as gauges."""
    return (lambda: client.queued), (lambda: client.spool.points)


def _keep_name(name: str, error: ValueError) -> str:
    """TAG_RELAY_NORMALIZED keeps a name that does not parse as received (the reference)."""
    return name


def relay_extra(counters: dict[str, float], samples: dict[str, Any],
                record: Callable[[str, float], None]) -> None:
    """Reporter hook: every ``destinations.*`` counter (the reference's relay metrics)."""
    for name, value in counters.items():
        if name.startswith("destinations."):
            record(name, value)
    if counters.get("relayUnroutable"):
        record("relayUnroutable", counters["relayUnroutable"])
