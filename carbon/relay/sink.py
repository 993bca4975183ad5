"""RelaySink: the relay's pipeline sink -- route each batch, queue it per destination.

Built from a Settings, a FlowControl, a Stats and a reactor (a router, a log and the
spool directory may be passed in too). ``start()`` connects to every destination and
replays what a previous run spooled; ``put_many(batch)`` routes and queues;
``put_lines(line_batch)`` (the lean path) routes received lines by name through a
``RouteIndex`` and queues their bytes as they came (line protocol) or points made
in bulk (pickle); sending
happens a moment later (TIME_TO_DEFER_SENDING) in whole buffers, or at once when a
queue reaches its high watermark. ``stop()`` flushes for SHUTDOWN_FLUSH_TIMEOUT
seconds, then spools what is left and closes; the Deferred fires when done.
"""

from __future__ import annotations

import os
from itertools import compress
from typing import Any, Callable

from twisted.internet import defer, task

from carbon.config.errors import ConfigError
from carbon.logs import CarbonLog
from carbon.pipeline import Batch, LineBatch
from carbon.relay.client import DestinationClient
from carbon.relay.connection import tls_options
from carbon.relay.destinations import Destination, parse_destinations
from carbon.relay.index import RouteIndex
from carbon.relay.spool import Spool
from carbon.relay.wire import WireItems, encoder_for, wire_items
from carbon.routers import DatapointRouter, make_router
from carbon.tags import normalize


def spool_directory(settings: Any) -> str:
    """``STORAGE_DIR/relay-spool/<program>-<instance>``: one per daemon instance."""
    storage = settings.get("STORAGE_DIR")
    if not storage:
        raise ConfigError("STORAGE_DIR must be set: the relay spools undeliverable "
                          "datapoints under it", key="STORAGE_DIR")
    program = settings.get("program") or "carbon-relay"
    instance = settings.get("instance") or "a"
    return os.path.join(storage, "relay-spool", "%s-%s" % (program, instance))


class RelaySink:
    """Routes batches to destination clients; see the module docstring."""

    def __init__(self, settings: Any, flow: Any, stats: Any, reactor: Any, *,
                 router: DatapointRouter | None = None,
                 destinations: list[Destination] | None = None,
                 log: CarbonLog | None = None, spool_dir: str | None = None,
                 spill_after: float = 3.0, headroom: int = 50000,
                 initial_delay: float = 0.2, max_delay: float = 5.0,
                 check_interval: float = 0.1, log_interval: float | None = None) -> None:
        self.settings = settings
        self.flow = flow
        self.stats = stats
        self.reactor = reactor
        self.log = log if log is not None else CarbonLog()
        if destinations is None:
            try:
                destinations = parse_destinations(settings.DESTINATIONS or [])
            except ValueError as exc:
                raise ConfigError(str(exc), settings.get("config_file"),
                                  key="DESTINATIONS") from None
        if not destinations:
            raise ConfigError("DESTINATIONS is empty: the relay has nowhere to send",
                              settings.get("config_file"), key="DESTINATIONS")
        self.destinations = [Destination(*d) for d in destinations]
        self.router = router if router is not None else make_router(settings, self.destinations)
        self.spool_dir = spool_dir or spool_directory(settings)
        self.check_interval = check_interval
        self.log_interval = float(log_interval if log_interval is not None
                                  else settings.get("CARBON_METRIC_INTERVAL") or 60)
        try:
            encoder_for(settings.DESTINATION_PROTOCOL)
        except ValueError as exc:
            raise ConfigError(str(exc), settings.get("config_file"),
                              key="DESTINATION_PROTOCOL") from None
        transport = settings.get("DESTINATION_TRANSPORT") or "none"
        if transport not in ("none", "ssl"):
            raise ConfigError("DESTINATION_TRANSPORT must be none or ssl, not %r" % transport,
                              settings.get("config_file"), key="DESTINATION_TRANSPORT")
        if settings.get("DESTINATION_POOL_REPLICAS"):
            self.log.msg("WARNING: DESTINATION_POOL_REPLICAS is not supported; each "
                         "destination gets one connection")
        self.dynamic = bool(settings.get("DYNAMIC_ROUTER"))
        self.dynamic_retries = int(settings.get("DYNAMIC_ROUTER_MAX_RETRIES") or 0)
        self.normalize_tags = bool(settings.get("TAG_RELAY_NORMALIZED"))
        self.clients: dict[Destination, DestinationClient] = {}
        for dest in self.destinations:
            if dest in self.clients:
                raise ConfigError("destination %s is listed twice" % (dest,), key="DESTINATIONS")
            spool = Spool(os.path.join(self.spool_dir, dest.stat_name.replace("/", "_")),
                          int(settings.SPOOL_MAX_BYTES), settings.DESTINATION_PROTOCOL)
            self.clients[dest] = DestinationClient(
                dest, settings, stats, flow, reactor, self.log, spool, self.schedule_flush,
                spill_after=spill_after, headroom=headroom,
                initial_delay=initial_delay, max_delay=max_delay,
                tls=tls_options(settings, dest.host) if transport == "ssl" else None,
                state_changed=self._state_changed if self.dynamic else None)
        self.client_list = list(self.clients.values())
        # The lean path: received lines are routed by name bytes. Tag normalisation
        # rewrites names, and a router without a ``generation`` cannot say when its
        # placement changes: both take the tuple path.
        self.line_protocol = settings.DESTINATION_PROTOCOL == "line"
        self.accepts_lines = not self.normalize_tags and hasattr(self.router, "generation")
        self.index = RouteIndex(self.router, [c.destination for c in self.client_list],
                                int(settings.get("RELAY_HASH_CACHE_SIZE", 100000) or 0))
        self.defer_seconds = float(settings.TIME_TO_DEFER_SENDING or 0)
        self.unroutable_unlogged = 0
        self.stopping = False
        self.stopped = False
        self._flush_call: Any = None
        self._loops: list[task.LoopingCall] = []
        unknown = getattr(self.router, "unknown_rule_destinations", lambda: [])()
        if unknown:
            self.log.msg("WARNING: relay rules name destinations missing from DESTINATIONS, "
                         "which are never used: %s" % ", ".join(map(str, unknown)))

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Connect to every destination; spooled points are replayed first."""
        for client in self.clients.values():
            if client.spool.points:
                self.log.msg("%s: %d spooled datapoints to replay"
                             % (client, client.spool.points))
            client.connect()
        self._every(self.check_interval, self._check)
        self._every(self.log_interval, self._log_drops)
        if hasattr(self.router, "check_rules"):
            self._every(10.0, self._check_rules)  # the reference re-reads rules every 10 s

    def _check_rules(self) -> None:
        error = self.router.check_rules()
        if error is not None:
            self.log.msg("aggregation rules not reloaded: %s" % error)

    def _every(self, seconds: float, func: Callable[[], None]) -> None:
        loop = task.LoopingCall(func)
        loop.clock = self.reactor
        loop.start(seconds, now=False)
        self._loops.append(loop)

    # -- data path ----------------------------------------------------------------------
    def put_many(self, batch: Batch) -> None:
        """Route ``batch`` and queue each destination's share."""
        if not batch:
            return
        if self.normalize_tags:
            batch = normalize_names(batch)
        if self.stopped:
            self._spool_late(batch)
            return
        clients = self.clients
        now = self.reactor.seconds()
        for dest, points in self.router.route_batch(batch).items():
            client = clients.get(dest)
            if client is None:
                self._unroutable(len(points), points[0][0])
                continue
            client.enqueue(points)
            if client.queued >= client.high:
                client.flush()
            client.check(now)
        self.schedule_flush()

    def put_lines(self, batch: LineBatch) -> None:
        """Route a LineBatch by name through the RouteIndex and queue each destination's
        share as its queue keeps it: the lines' bytes (line) or message items (pickle)."""
        if self.stopped:
            self.put_many(batch.points())
            return
        codes = self.index.codes(batch.names)
        if codes is None:  # more destination sets than route codes
            self.put_many(batch.points())
            return
        lines = self.line_protocol
        items: list = batch.lines if lines else pickle_items(batch)
        clients = self.client_list
        now = self.reactor.seconds()
        count = len(items)
        first = codes[0]
        if codes.count(first) == count:  # the whole batch goes to the same place
            payload = b"\r\n".join(items) + b"\r\n" if lines else None
            for n, k in enumerate(self.index.members[first]):
                # A queue owns the item lists it is given: each replica gets its own.
                self._queue(clients[k], payload or (list(items) if n else items), count, now)
        else:
            for k, table in enumerate(self.index.tables):
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
        if client.queued >= client.high:
            client.flush()
        client.check(now)

    def _state_changed(self, client: DestinationClient, up: bool) -> None:
        """DYNAMIC_ROUTER: take a destination out of the router after
        DYNAMIC_ROUTER_MAX_RETRIES failed attempts (its queue is routed to the others;
        the last destination is kept so its points spool), and back in once it is up."""
        router, dest = self.router, client.destination
        if up:
            if not router.has_destination(dest):
                self.log.clients("Adding client %s:%d:%s to router" % tuple(dest))
                router.add_destination(dest)
            return
        if (client.retries < self.dynamic_retries or not router.has_destination(dest)
                or router.count_destinations() <= 1):
            return
        self.log.clients("Removing client %s:%d:%s to router" % tuple(dest))
        router.remove_destination(dest)
        points = client.take_all()
        self.log.clients("Re-injecting %d metrics from %s" % (len(points), client))
        if points:
            self.put_many(points)

    def _spool_late(self, batch: Batch) -> None:
        """Points arriving after stop() finished go straight to the spools."""
        for dest, points in self.router.route_batch(batch).items():
            client = self.clients.get(dest)
            if client is None:
                self._unroutable(len(points), points[0][0])
                continue
            client.enqueue(points)
            client.finish()

    def _unroutable(self, count: int, example: str) -> None:
        self.stats.increment("relayUnroutable", count)
        if not self.unroutable_unlogged:
            self.log.msg("no destination for %s (and others): datapoints dropped" % example)
        self.unroutable_unlogged += count

    def schedule_flush(self) -> None:
        if self._flush_call is None:
            self._flush_call = self.reactor.callLater(self.defer_seconds, self._flush_all)

    def _flush_all(self) -> None:
        self._flush_call = None
        more = False
        for client in self.clients.values():
            if client.flush():
                more = True
        if more:
            self.schedule_flush()

    def _check(self) -> None:
        now = self.reactor.seconds()
        for client in self.clients.values():
            client.check(now)
            if client.pending or client.spool.points:
                self.schedule_flush()

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
        return sum(c.queued + c.spool.points for c in self.clients.values())

    def gauges(self) -> dict[str, Callable[[], float]]:
        """Per-destination queue gauges for the Reporter (memory and spool points)."""
        out: dict[str, Callable[[], float]] = {}
        for client in self.clients.values():
            name = "destinations.%s." % client.destination.stat_name
            out[name + "queued"] = lambda c=client: c.queued
            out[name + "spool"] = lambda c=client: c.spool.points
        return out

    # -- shutdown -----------------------------------------------------------------------
    def stop(self) -> defer.Deferred:
        """Flush for SHUTDOWN_FLUSH_TIMEOUT seconds, spool the rest, close everything."""
        done: defer.Deferred = defer.Deferred()
        if self.stopping:
            return defer.succeed(None)
        self.stopping = True
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        deadline = self.reactor.seconds() + float(self.settings.SHUTDOWN_FLUSH_TIMEOUT or 0)
        for client in self.clients.values():
            client.begin_stop()
        closing: dict[Destination, defer.Deferred] = {}

        def poll() -> None:
            for dest, client in self.clients.items():
                if dest in closing:
                    continue
                client.flush()
                if client.drained() or not client.connected:
                    closing[dest] = client.close()
            waiting = [d for d in closing.values() if not d.called]
            if len(closing) == len(self.clients) and not waiting:
                finish()
            elif self.reactor.seconds() >= deadline:
                finish()
            else:
                self._stop_call = self.reactor.callLater(0.02, poll)

        def finish() -> None:
            if self._flush_call is not None and self._flush_call.active():
                self._flush_call.cancel()
            self._flush_call = None
            left = 0
            for client in self.clients.values():
                left += client.queued
                if client.protocol is not None:
                    client.close(abort=True)
                client.finish()
            spooled = sum(c.spool.points for c in self.clients.values())
            if spooled:
                self.log.msg("relay stopped with %d datapoints spooled for the next start "
                             "(%d of them still queued at the flush deadline)"
                             % (spooled, left))
            self.stopped = True
            done.callback(None)

        poll()
        return done


def pickle_items(batch: LineBatch) -> WireItems:
    """A LineBatch as pickle message items, made with C-level maps and zips."""
    if batch.values is None or batch.stamps is None:
        return wire_items(batch.points())
    return list(zip(map(bytes.decode, batch.names),
                    zip(map(float, batch.stamps), map(float, batch.values), strict=True),
                    strict=True))


def normalize_names(batch: Batch) -> Batch:
    """TAG_RELAY_NORMALIZED: route tagged series by their normalised names."""
    out: Batch = []
    for point in batch:
        name = point[0]
        if ";" in name or "{" in name or name[:1] == "~":
            try:
                normalized = normalize(name)
            except ValueError:
                normalized = name  # like the reference: keep the name as received
            if normalized != name:
                point = (normalized, point[1], point[2])
        out.append(point)
    return out


def relay_extra(counters: dict, samples: dict, record: Callable[[str, float], None]) -> None:
    """Reporter hook: every ``destinations.*`` counter (the reference's relay metrics)."""
    for name, value in counters.items():
        if name.startswith("destinations."):
            record(name, value)
    if counters.get("relayUnroutable"):
        record("relayUnroutable", counters["relayUnroutable"])
