"""One destination: a bounded memory queue, an on-disk spool, and a TCP connection.

Points are queued in the form the wire protocol sends (``carbon.relay.queues``: the
lists ``route_batch`` made for pickle, encoded lines for line) and sent as whole
buffers: up to ``write_points`` points written with one ``transport.write``. The
connection is a streaming producer for its transport, so a slow destination pauses
sending and the queue grows:

* at MAX_QUEUE_SIZE points (high watermark) the receivers are paused through
  ``flow.pause("relay:<dest>")``; at the low watermark they resume;
* a destination that is down, that has been holding receivers paused for
  ``spill_after`` seconds, or whose queue passes ``MAX_QUEUE_SIZE + headroom``
  spills its queue to the spool. Spooled data is older than anything in memory and
  is replayed first, in order. Only when the spool is full are points dropped.

Reconnects back off exponentially up to ``max_delay`` seconds. When the peer closes
its side (a draining carbon daemon), what was written is flushed before closing.

At least once: carbon's protocols have no acknowledgements, so what was written to a
connection that then ended is unknown. The last bytes written are kept (a
``ResendWindow``, bounded by DESTINATION_RESEND_WINDOW_BYTES and _SECONDS); when the
connection ends other than by our own clean close, they are resent first on the next
connection, or spooled. Duplicates are harmless downstream (same timestamp, same value)
and are counted in ``destinations.<dest>.resent``.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer
from twisted.internet.error import ConnectionDone

from carbon.keepalive import KeepAlive
from carbon.pipeline import Batch
from carbon.relay.connection import SenderProtocol, SenderFactory
from carbon.relay.destinations import Destination
from carbon.relay.queues import LineQueue, PointQueue
from carbon.relay.resend import ResendWindow
from carbon.relay.spool import Spool
from carbon.relay.wire import DECODERS, encoder_for


@dataclass(frozen=True)
class ClientConfig:
    """What a DestinationClient reads of carbon.conf, built once per set of clients
    (``from_settings``); the defaults are carbon.config.defaults'."""

    protocol: str  # DESTINATION_PROTOCOL
    per_message: int  # MAX_DATAPOINTS_PER_MESSAGE
    max_queue_size: int  # MAX_QUEUE_SIZE
    low_watermark_pct: float  # QUEUE_LOW_WATERMARK_PCT
    resend_window_bytes: int  # DESTINATION_RESEND_WINDOW_BYTES
    resend_window_seconds: float  # DESTINATION_RESEND_WINDOW_SECONDS
    keepalive: KeepAlive  # TCP_KEEPALIVE, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT

    @classmethod
    def from_settings(cls, settings: Any) -> ClientConfig:
        return cls(
            protocol=settings["DESTINATION_PROTOCOL"],
            per_message=max(1, int(settings["MAX_DATAPOINTS_PER_MESSAGE"])),
            max_queue_size=max(1, int(settings["MAX_QUEUE_SIZE"])),
            low_watermark_pct=float(settings["QUEUE_LOW_WATERMARK_PCT"]),
            resend_window_bytes=int(settings["DESTINATION_RESEND_WINDOW_BYTES"]),
            resend_window_seconds=float(settings["DESTINATION_RESEND_WINDOW_SECONDS"]),
            keepalive=KeepAlive.from_settings(settings))


class DestinationClient:
    """Queue, spool and connection of one destination. See the module docstring."""

    def __init__(self, destination: Destination, config: ClientConfig, stats: Any, flow: Any,
                 reactor: Any, log: Any, spool: Spool, wake: Any, *,
                 spill_after: float = 3.0, headroom: int = 50000, write_points: int = 20000,
                 initial_delay: float = 0.2, max_delay: float = 5.0,
                 tls: Any = None, state_changed: Any = None) -> None:
        self.destination = destination
        self.config = config
        self.stats = stats
        self.flow = flow
        self.reactor = reactor
        self.log = log
        self.spool = spool
        self.wake = wake  # asks the sink to call flush() soon
        self.protocol_name = config.protocol
        self.encode = encoder_for(self.protocol_name)
        self.per_message = config.per_message
        self.high = config.max_queue_size
        self.low = int(self.high * config.low_watermark_pct)
        self.hard = self.high + max(0, int(headroom))
        self.spill_after = spill_after
        self.write_points = max(self.per_message, write_points)
        self.initial_delay, self.max_delay = initial_delay, max_delay
        self.tls = tls  # client TLS options when DESTINATION_TRANSPORT = ssl
        self.state_changed = state_changed  # called (client, up) for DYNAMIC_ROUTER
        self.queue = LineQueue() if self.protocol_name == "line" else PointQueue(
            self.per_message)
        self.window = ResendWindow(config.resend_window_bytes, config.resend_window_seconds)
        self.resend: deque[tuple[bytes, int]] = deque()  # (payload, points) to send again
        self.resend_points = 0
        self.protocol: SenderProtocol | None = None
        self.flow_reason = "relay:%s" % (destination,)
        self.paused_since: float | None = None
        self.retries = 0
        self.attempting = False
        self.stopping = False
        self.dropped_unlogged = 0
        self._reconnect_call: Any = None
        self._closed: defer.Deferred[Any] | None = None
        name = "destinations.%s." % destination.stat_name
        self.stat = {key: name + key for key in (
            "sent", "batchesSent", "attemptedRelays", "queuedUntilConnected",
            "queuedUntilReady", "relayMaxQueueLength", "fullQueueDrops", "spooled",
            "dropped", "replayed", "resent")}

    @property
    def queued(self) -> int:
        """Points in the memory queue (including those waiting to be resent)."""
        return self.queue.queued + self.resend_points

    @property
    def pending(self) -> bool:
        """Anything in memory waiting to be sent."""
        return bool(self.queue) or bool(self.resend)

    def __repr__(self) -> str:
        return "CarbonClientFactory(%s:%d:%s)" % tuple(self.destination)

    # -- connection ---------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self.protocol is not None and not self.protocol.closing

    @property
    def expected_up(self) -> bool:
        """Connected, or making the first attempt since it was last up (worth waiting
        for rather than spooling)."""
        return self.connected or (self.attempting and self.retries == 0)

    def connect(self) -> None:
        self._reconnect_call = None
        if self.stopping:
            return
        host, port, _ = self.destination
        self.log.clients("%s::startedConnecting (%s:%d)" % (self, host, port))
        self.attempting = True
        if self.tls is not None:
            self.reactor.connectSSL(host, port, SenderFactory(self), self.tls, timeout=10)
        else:
            self.reactor.connectTCP(host, port, SenderFactory(self), timeout=10)

    def connection_made(self, protocol: SenderProtocol) -> None:
        self.protocol = protocol
        self.attempting = False
        self.retries = 0
        self.log.clients("Destination is up: %s:%d:%s" % tuple(self.destination))
        if self.state_changed is not None:
            self.state_changed(self, True)
        self.wake()

    def connect_failed(self, reason: Any) -> None:
        self.log.clients("%s::clientConnectionFailed (%s:%d) %s" % (
            self, self.destination.host, self.destination.port, reason.getErrorMessage()))
        self._down()

    def connection_lost(self, protocol: SenderProtocol, reason: Any) -> None:
        if protocol is not self.protocol:
            return
        self.protocol = None
        message = reason.getErrorMessage() if reason is not None else "closed"
        self.log.clients("%s::clientConnectionLost (%s:%d) %s" % (
            self, self.destination.host, self.destination.port, message))
        clean = reason is None or reason.check(ConnectionDone) is not None
        if not (protocol.closed_by_us and clean):
            self._rewind("connection ended (%s)" % message)
        if self._closed is not None:
            closed, self._closed = self._closed, None
            closed.callback(None)
        self._down()

    def _down(self) -> None:
        self.attempting = False
        if self.stopping:
            return
        self.log.clients("Destination is down: %s:%d:%s (%d)" % (
            self.destination + (self.retries,)))
        self.check(self.reactor.seconds())
        delay = min(self.max_delay, self.initial_delay * (2 ** min(self.retries, 16)))
        delay *= random.uniform(0.9, 1.1)
        self.retries += 1
        self._reconnect_call = self.reactor.callLater(delay, self.connect)
        if self.state_changed is not None:
            self.state_changed(self, False)

    # -- queueing -----------------------------------------------------------------------
    def enqueue(self, points: Batch) -> None:
        count = len(points)
        self._count_attempt(count)
        self.queue.add(points)

    def enqueue_prepared(self, prepared: Any, count: int) -> None:
        """Queue ``count`` points already in the queue's form (``queues`` module)."""
        self._count_attempt(count)
        self.queue.add_prepared(prepared, count)

    def _count_attempt(self, count: int) -> None:
        stats, stat = self.stats, self.stat
        stats.increment(stat["attemptedRelays"], count)
        stats.max(stat["relayMaxQueueLength"], self.queue.queued)
        if self.protocol is None:
            stats.increment(stat["queuedUntilConnected"], count)

    def take_all(self) -> Batch:
        """Empty the memory queue (DYNAMIC_ROUTER re-routes it elsewhere)."""
        points: Batch = []
        decode = DECODERS[self.protocol_name]
        while self.resend:
            points.extend(decode(self.resend.popleft()[0])[0])
        self.resend_points = 0
        points.extend(self.queue.take_points(self.queue.queued))
        self._update_flow()
        return points

    # -- at least once ------------------------------------------------------------------
    def _write(self, protocol: SenderProtocol, payload: bytes, count: int) -> None:
        """Write ``payload`` and keep it in the resend window."""
        protocol.transport.write(payload)
        self.window.add(payload, count, self.reactor.seconds())

    def _rewind(self, why: str) -> None:
        """The connection ended without proof of delivery: what the resend window holds
        goes out again first (or to the spool)."""
        records, seconds = self.window.take(self.reactor.seconds())
        if not records:
            return
        points = sum(count for _, count in records)
        self.resend.extend(records)
        self.resend_points += points
        self.stats.increment(self.stat["resent"], points)
        self.log.clients("%s: %s; resending %d datapoints written in the last %.1f s"
                         % (self, why, points, seconds))

    # -- sending ------------------------------------------------------------------------
    def flush(self) -> bool:
        """Write what the connection accepts now; True if more is waiting to be sent."""
        protocol = self.protocol
        if protocol is None or protocol.closing:
            return False
        if protocol.paused:
            self.stats.max(self.stat["queuedUntilReady"], self.queued)
            return False
        if self.resend:
            self._send_resend(protocol)
        if self.spool.points:
            self._replay(protocol)
            if self.spool.points or protocol.paused:
                return bool(self.spool.points) and not protocol.paused
        queue = self.queue
        while queue and not protocol.paused and not protocol.closing:
            payload, messages, count = queue.take(self.write_points)
            self._write(protocol, payload, count)
            self.stats.increment(self.stat["sent"], count)
            self.stats.increment(self.stat["batchesSent"], messages)
        self._update_flow()
        return bool(self.queue) and not protocol.paused

    def _send_resend(self, protocol: SenderProtocol) -> None:
        """What the last connection may have lost, before anything newer."""
        while self.resend and not protocol.closing:
            payload, count = self.resend.popleft()
            self.resend_points -= count
            self._write(protocol, payload, count)
            self.stats.increment(self.stat["sent"], count)

    def _replay(self, protocol: SenderProtocol) -> None:
        records = self.spool.read(max(256 * 1024, self.write_points * 40))
        payloads, sent, messages = [], 0, 0
        for payload, count, protocol_name in records:
            if protocol_name != self.protocol_name:
                decode = DECODERS.get(protocol_name)
                if decode is None:
                    self._drop(count, "spooled with unknown protocol %r" % protocol_name)
                    continue
                points = decode(payload)[0]
                payload, _, count = self.encode(points, self.per_message)
            payloads.append(payload)
            sent += count
            messages += -(-count // self.per_message) if self.protocol_name == "pickle" else count
        if payloads:
            self._write(protocol, b"".join(payloads), sent)
            self.stats.increment(self.stat["sent"], sent)
            self.stats.increment(self.stat["replayed"], sent)
            self.stats.increment(self.stat["batchesSent"], messages)

    # -- watermarks and spilling --------------------------------------------------------
    def check(self, now: float) -> None:
        """Spill to the spool or pause/resume receivers as the queue state requires.

        A live destination whose spool is nearly full holds receivers paused instead
        of spilling: points are only dropped for a destination that is down.
        """
        self.window.expire(now)
        queued = self.queued
        if queued and not (self.expected_up and self.spool.nearly_full) and (
                queued >= self.hard
                or (queued >= self.high and (not self.expected_up or self.spool.points))
                or (self.paused_since is not None
                    and now - self.paused_since >= self.spill_after)):
            self.spill()
        self._update_flow(now)

    def _update_flow(self, now: float | None = None) -> None:
        if (self.queued >= self.high and self.expected_up
                and (not self.spool.points or self.spool.nearly_full)):
            if self.paused_since is None:
                self.paused_since = self.reactor.seconds() if now is None else now
                self.flow.pause(self.flow_reason)
        elif self.paused_since is not None and self.queued <= self.low:
            self.paused_since = None
            self.flow.resume(self.flow_reason)

    def spill(self) -> int:
        """Move the whole memory queue to the end of the spool; returns points moved."""
        moved = 0
        while self.resend or self.queue:
            if self.resend:
                payload, count = self.resend.popleft()
                self.resend_points -= count
            else:
                payload, _, count = self.queue.take(self.write_points)
            try:
                stored = not count or self.spool.append(payload, count)
                why = "spool full (%d bytes)" % self.spool.max_bytes
            except OSError as exc:  # disk full, permissions: count and log, never raise
                stored, why = False, "cannot write spool %s: %s" % (self.spool.directory, exc)
            if not stored:
                self._drop(count, why)
                continue
            moved += count
            self.stats.increment(self.stat["spooled"], count)
        self._update_flow()
        return moved

    def _drop(self, count: int, why: str) -> None:
        self.stats.increment(self.stat["fullQueueDrops"], count)
        self.stats.increment(self.stat["dropped"], count)
        if not self.dropped_unlogged:
            self.log.msg("%s dropping datapoints: %s" % (self, why))
        self.dropped_unlogged += count

    def log_drops(self) -> None:
        """Once per interval: one summary line for the points dropped since the last."""
        if self.dropped_unlogged:
            self.log.msg("%s dropped %d datapoints in the last interval"
                         % (self, self.dropped_unlogged))
            self.dropped_unlogged = 0

    # -- shutdown -----------------------------------------------------------------------
    def begin_stop(self) -> None:
        """Stop reconnecting; a destination that cannot take the queue now spools it."""
        self.stopping = True
        if self._reconnect_call is not None and self._reconnect_call.active():
            self._reconnect_call.cancel()
        self._reconnect_call = None
        if not self.connected or self.spool.points:
            self.spill()

    def drained(self) -> bool:
        return not self.pending

    def close(self, abort: bool = False) -> defer.Deferred[Any]:
        """Close the connection (flushing its buffer unless ``abort``); fires when closed."""
        protocol = self.protocol
        if protocol is None:
            return defer.succeed(None)
        if self._closed is None:
            self._closed = defer.Deferred()
        closed = self._closed
        if abort:
            protocol.closing = True
            protocol.transport.abortConnection()
            self._rewind("connection aborted at shutdown")
        elif not protocol.closing:
            protocol.closed_by_us = True
            protocol.finish_writing()
        return closed

    def finish(self) -> None:
        """Persist whatever is still queued and close the spool files."""
        self.spill()
        if self.paused_since is not None:
            self.paused_since = None
            self.flow.resume(self.flow_reason)
        self.spool.close()
