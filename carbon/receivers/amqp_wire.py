"""A small AMQP 0-9-1 client protocol on Twisted: what carbon's listener and publisher need.

Frames, the connection handshake (PLAIN auth, tune, heartbeats), one channel,
synchronous methods one at a time (exchange/queue declare, bind, qos, consume,
confirm.select), content assembly for basic.deliver and basic.publish with
publisher confirms. Field tables sent by the broker are skipped, never decoded.
No spec file is needed (unlike txamqp, which ships none).
"""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet import defer, task
from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import Protocol

from carbon.receivers.amqp_codec import (
    PROTOCOL_HEADER, FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT, FRAME_END,
    FRAME_MAX, CHANNEL, CONNECTION_START, CONNECTION_START_OK, CONNECTION_TUNE,
    CONNECTION_TUNE_OK, CONNECTION_OPEN, CONNECTION_OPEN_OK, CONNECTION_CLOSE,
    CONNECTION_CLOSE_OK, CONNECTION_BLOCKED, CONNECTION_UNBLOCKED, CHANNEL_OPEN, CHANNEL_OPEN_OK,
    CHANNEL_CLOSE, CHANNEL_CLOSE_OK, EXCHANGE_DECLARE, EXCHANGE_DECLARE_OK, QUEUE_DECLARE,
    QUEUE_DECLARE_OK, QUEUE_BIND, QUEUE_BIND_OK, BASIC_QOS, BASIC_QOS_OK, BASIC_CONSUME,
    BASIC_CONSUME_OK, BASIC_PUBLISH, BASIC_DELIVER, BASIC_ACK, BASIC_NACK, CONFIRM_SELECT,
    CONFIRM_SELECT_OK, AMQPError, shortstr, longstr, table, bits, frame, method_frame,
    content_frames, Reader,
)


class AMQPClient(Protocol):
    """Client side of one AMQP connection using channel 1.

    ``ready`` fires once the channel is open (errbacks if the connection ends
    first); ``when_closed()`` fires when the TCP connection ends. Subclasses override
    ``message_received`` and ``data_processed`` to consume.
    """

    def __init__(self, user: str, password: str, vhost: str = "/", heartbeat: int = 60,
                 clock: Any = None) -> None:
        self.user = user
        self.password = password
        self.vhost = vhost
        self.heartbeat_wanted = heartbeat
        if clock is None:
            from twisted.internet import reactor as clock
        self.clock = clock
        self.ready: defer.Deferred = defer.Deferred()
        self.closed: defer.Deferred = defer.Deferred()
        self.frame_max = FRAME_MAX
        self.heartbeat = 0
        self.buffer = bytearray()
        self.pending: tuple[tuple[int, int], defer.Deferred] | None = None
        self.error: AMQPError | None = None
        self.delivery: list[Any] | None = None
        self.last_received = self.clock.seconds()
        self.heartbeat_loop: task.LoopingCall | None = None
        self.dead = False
        self.lost_reason: Any = None
        self.next_publish_tag = 0
        self.unconfirmed: set[int] = set()
        self.confirm_floor = 1  # every tag below it is settled
        self.confirm_waiters: list[tuple[int, defer.Deferred]] = []
        self.nacked = 0

    # -- transport ----------------------------------------------------------
    def connectionMade(self) -> None:  # noqa: N802
        self.transport.write(PROTOCOL_HEADER)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.last_received = self.clock.seconds()
        buffer = self.buffer
        buffer += data
        if buffer[:4] == b"AMQP":
            self._fail(AMQPError("broker refused protocol 0-9-1 (offers %r)" % bytes(buffer[:8])))
            return
        offset = 0
        while len(buffer) - offset >= 7 and not self.dead:
            kind, channel, size = struct.unpack_from("!BHI", buffer, offset)
            end = offset + 7 + size
            if size > self.frame_max + 8:
                self._fail(AMQPError("frame of %d bytes exceeds frame-max" % size))
                return
            if len(buffer) < end + 1:
                break
            if buffer[end] != FRAME_END:
                self._fail(AMQPError("bad frame end byte"))
                return
            self._frame(kind, channel, bytes(buffer[offset + 7:end]))
            offset = end + 1
        del buffer[:offset]
        self.data_processed()

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.dead = True
        self.lost_reason = reason
        if self.heartbeat_loop is not None and self.heartbeat_loop.running:
            self.heartbeat_loop.stop()
        failure = self.error or AMQPError("connection lost: %s" % (
            reason.value if reason is not None and not reason.check(ConnectionDone)
            else "closed"))
        if not self.ready.called:
            self.ready.errback(failure)
        if self.pending is not None:
            _, waiting = self.pending
            self.pending = None
            waiting.errback(failure)
        for _, waiting in self.confirm_waiters:
            waiting.errback(failure)
        self.confirm_waiters = []
        self.closed.callback(self)

    def _fail(self, error: AMQPError) -> None:
        self.error = error
        if not self.dead:
            self.dead = True
            self.transport.abortConnection()

    def _send(self, method: tuple[int, int], args: bytes = b"", channel: int = CHANNEL) -> None:
        self.transport.write(method_frame(channel, method, args))

    def call(self, method: tuple[int, int], args: bytes, reply: tuple[int, int]) -> defer.Deferred:
        """Send a synchronous method on channel 1; fires with a Reader of the reply."""
        if self.pending is not None:
            raise AMQPError("a synchronous AMQP method is already pending")
        waiting: defer.Deferred = defer.Deferred()
        self.pending = (reply, waiting)
        self._send(method, args)
        return waiting

    # -- frames -------------------------------------------------------------
    def _frame(self, kind: int, channel: int, payload: bytes) -> None:
        if kind == FRAME_METHOD:
            method = struct.unpack_from("!HH", payload)
            self._method(channel, method, Reader(payload, 4))
        elif kind == FRAME_HEADER and self.delivery is not None:
            self.delivery[2] = struct.unpack_from("!Q", payload, 4)[0]
            self._maybe_delivered()
        elif kind == FRAME_BODY and self.delivery is not None:
            self.delivery[3].append(payload)
            self.delivery[4] += len(payload)
            self._maybe_delivered()

    def _maybe_delivered(self) -> None:
        tag, key, size, chunks, received = self.delivery  # type: ignore[misc]
        if size is not None and received >= size:
            self.delivery = None
            self.message_received(key, b"".join(chunks), tag)

    def _method(self, channel: int, method: tuple[int, int], args: Reader) -> None:
        if method == BASIC_DELIVER:
            args.shortstr()  # consumer tag
            tag = args.longlong()
            args.octet()  # redelivered
            args.shortstr()  # exchange
            self.delivery = [tag, args.shortstr(), None, [], 0]
        elif method in (BASIC_ACK, BASIC_NACK):
            tag = args.longlong()
            multiple = bool(args.octet() & 1)
            self._confirmed(tag, multiple, method == BASIC_ACK)
        elif method == CONNECTION_START:
            self._start(args)
        elif method == CONNECTION_TUNE:
            self._tune(args)
        elif method == CONNECTION_OPEN_OK:
            self._send(CHANNEL_OPEN, shortstr(""))
        elif method == CHANNEL_OPEN_OK:
            self.ready.callback(self)
        elif method in (CONNECTION_CLOSE, CHANNEL_CLOSE):
            code, text = args.short(), args.shortstr().decode("utf-8", "replace")
            where = "connection" if method == CONNECTION_CLOSE else "channel"
            self.error = AMQPError("broker closed the %s: %d %s" % (where, code, text))
            if method == CONNECTION_CLOSE:
                self._send(CONNECTION_CLOSE_OK, channel=0)
            else:
                self._send(CHANNEL_CLOSE_OK)
            self.transport.loseConnection()
        elif method == CONNECTION_CLOSE_OK:
            self.transport.loseConnection()
        elif method in (CONNECTION_BLOCKED, CONNECTION_UNBLOCKED):
            self.blocked(method == CONNECTION_BLOCKED)
        elif self.pending is not None and self.pending[0] == method:
            _, waiting = self.pending
            self.pending = None
            waiting.callback(args)

    def _start(self, args: Reader) -> None:
        args.short()  # version major, minor
        args.skip_table()  # server properties
        if b"PLAIN" not in args.longstr().split():
            self._fail(AMQPError("broker does not offer PLAIN authentication"))
            return
        properties = table({"product": "carbon", "capabilities": {
            "authentication_failure_close": True, "connection.blocked": True,
            "publisher_confirms": True}})
        response = b"\0" + self.user.encode("utf-8") + b"\0" + self.password.encode("utf-8")
        self._send(CONNECTION_START_OK, properties + shortstr("PLAIN") + longstr(response)
                   + shortstr("en_US"), channel=0)

    def _tune(self, args: Reader) -> None:
        args.short()  # channel-max: one channel is used
        frame_max, heartbeat = args.long(), args.short()
        self.frame_max = min(frame_max, FRAME_MAX) if frame_max else FRAME_MAX
        self.heartbeat = min(heartbeat, self.heartbeat_wanted) if heartbeat else 0
        self._send(CONNECTION_TUNE_OK, struct.pack("!HIH", 1, self.frame_max,
                                                   self.heartbeat), channel=0)
        self._send(CONNECTION_OPEN, shortstr(self.vhost) + shortstr("") + bits(False),
                   channel=0)
        if self.heartbeat:
            self.heartbeat_loop = task.LoopingCall(self._beat)
            self.heartbeat_loop.clock = self.clock
            self.heartbeat_loop.start(self.heartbeat / 2.0, now=False)

    def _beat(self) -> None:
        if self.dead:
            return
        self.transport.write(frame(FRAME_HEARTBEAT, 0, b""))
        silent = self.clock.seconds() - self.last_received
        if not self.reading_paused() and silent > 2 * self.heartbeat:
            self._fail(AMQPError("no data from broker for %.0fs (heartbeat)" % silent))

    # -- hooks --------------------------------------------------------------
    def message_received(self, routing_key: bytes, body: bytes, delivery_tag: int) -> None:
        """One complete basic.deliver."""

    def data_processed(self) -> None:
        """Every complete frame of one read has been handled."""

    def reading_paused(self) -> bool:
        """True while flow control holds reads (no heartbeat timeout then)."""
        return False

    def blocked(self, blocked: bool) -> None:
        """The broker blocked (resource alarm) or unblocked publishing."""

    # -- methods ------------------------------------------------------------
    def exchange_declare(self, exchange: str, kind: str = "topic",
                         durable: bool = True) -> defer.Deferred:
        args = (struct.pack("!H", 0) + shortstr(exchange) + shortstr(kind)
                + bits(False, durable, False, False, False) + table())
        return self.call(EXCHANGE_DECLARE, args, EXCHANGE_DECLARE_OK)

    @defer.inlineCallbacks
    def queue_declare(self, queue: str = "", exclusive: bool = True,
                      durable: bool = False) -> Any:
        """Declare a queue; fires with its (server-generated if empty) name.

        An exclusive queue is also auto-deleted; a durable one survives broker and
        consumer restarts."""
        args = (struct.pack("!H", 0) + shortstr(queue)
                + bits(False, durable, exclusive, exclusive, False) + table())
        reply = yield self.call(QUEUE_DECLARE, args, QUEUE_DECLARE_OK)
        return reply.shortstr().decode("utf-8")

    def queue_bind(self, queue: str, exchange: str, routing_key: str) -> defer.Deferred:
        args = (struct.pack("!H", 0) + shortstr(queue) + shortstr(exchange)
                + shortstr(routing_key) + bits(False) + table())
        return self.call(QUEUE_BIND, args, QUEUE_BIND_OK)

    def basic_qos(self, prefetch_count: int) -> defer.Deferred:
        return self.call(BASIC_QOS, struct.pack("!IH", 0, prefetch_count) + bits(False),
                         BASIC_QOS_OK)

    def basic_consume(self, queue: str, consumer_tag: str, no_ack: bool = False) -> defer.Deferred:
        args = (struct.pack("!H", 0) + shortstr(queue) + shortstr(consumer_tag)
                + bits(False, no_ack, False, False) + table())
        return self.call(BASIC_CONSUME, args, BASIC_CONSUME_OK)

    def basic_ack(self, delivery_tag: int, multiple: bool = False) -> None:
        self._send(BASIC_ACK, struct.pack("!Q", delivery_tag) + bits(multiple))

    def confirm_select(self) -> defer.Deferred:
        return self.call(CONFIRM_SELECT, bits(False), CONFIRM_SELECT_OK)

    def basic_publish(self, exchange: str, routing_key: str, body: bytes,
                      persistent: bool = True) -> int:
        """Publish one message; returns its confirm sequence number."""
        args = struct.pack("!H", 0) + shortstr(exchange) + shortstr(routing_key) + bits(False)
        self.transport.write(method_frame(CHANNEL, BASIC_PUBLISH, args)
                             + content_frames(CHANNEL, body, self.frame_max, persistent))
        self.next_publish_tag += 1
        self.unconfirmed.add(self.next_publish_tag)
        return self.next_publish_tag

    def wait_confirms(self) -> defer.Deferred:
        """Fires with the count of nacked messages once the broker settled all published so far.

        Needs ``confirm_select`` first.
        """
        waiting: defer.Deferred = defer.Deferred()
        self.confirm_waiters.append((self.next_publish_tag, waiting))
        self._settle()
        return waiting

    def _confirmed(self, tag: int, multiple: bool, ok: bool) -> None:
        settled = 0
        for t in (range(self.confirm_floor, tag + 1) if multiple else (tag,)):
            if t in self.unconfirmed:
                self.unconfirmed.discard(t)
                settled += 1
        if not ok:
            self.nacked += settled
        self._settle()

    def _settle(self) -> None:
        while self.confirm_floor <= self.next_publish_tag and (
                self.confirm_floor not in self.unconfirmed):
            self.confirm_floor += 1
        done = [w for w in self.confirm_waiters if w[0] < self.confirm_floor]
        self.confirm_waiters = [w for w in self.confirm_waiters if w[0] >= self.confirm_floor]
        for _, waiting in done:
            waiting.callback(self.nacked)

    def close(self, timeout: float = 1.0) -> defer.Deferred:
        """Send connection.close; drop the TCP connection after close-ok or ``timeout``.

        With ``timeout`` 0 the connection is closed once the close is written.
        """
        if self.transport is None or self.dead:
            return defer.succeed(None)
        self._send(CONNECTION_CLOSE, struct.pack("!H", 200) + shortstr("bye")
                   + struct.pack("!HH", 0, 0), channel=0)
        if timeout <= 0:
            self.transport.loseConnection()
            return self.when_closed()
        abort = self.clock.callLater(timeout, self.transport.abortConnection)

        def cancel(result: Any) -> Any:
            if abort.active():
                abort.cancel()
            return result

        self.closed.addBoth(cancel)
        return self.when_closed()

    def when_closed(self) -> defer.Deferred:
        """A new Deferred that fires (with None) once the TCP connection has ended."""
        done: defer.Deferred = defer.Deferred()

        def fire(result: Any) -> Any:
            done.callback(None)
            return result

        self.closed.addBoth(fire)
        return done
