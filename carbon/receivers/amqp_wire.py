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

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MAX = 131072
CHANNEL = 1

CONNECTION_START, CONNECTION_START_OK = (10, 10), (10, 11)
CONNECTION_TUNE, CONNECTION_TUNE_OK = (10, 30), (10, 31)
CONNECTION_OPEN, CONNECTION_OPEN_OK = (10, 40), (10, 41)
CONNECTION_CLOSE, CONNECTION_CLOSE_OK = (10, 50), (10, 51)
CONNECTION_BLOCKED, CONNECTION_UNBLOCKED = (10, 60), (10, 61)
CHANNEL_OPEN, CHANNEL_OPEN_OK = (20, 10), (20, 11)
CHANNEL_CLOSE, CHANNEL_CLOSE_OK = (20, 40), (20, 41)
EXCHANGE_DECLARE, EXCHANGE_DECLARE_OK = (40, 10), (40, 11)
QUEUE_DECLARE, QUEUE_DECLARE_OK = (50, 10), (50, 11)
QUEUE_BIND, QUEUE_BIND_OK = (50, 20), (50, 21)
BASIC_QOS, BASIC_QOS_OK = (60, 10), (60, 11)
BASIC_CONSUME, BASIC_CONSUME_OK = (60, 20), (60, 21)
BASIC_PUBLISH, BASIC_DELIVER = (60, 40), (60, 60)
BASIC_ACK, BASIC_NACK = (60, 80), (60, 120)
CONFIRM_SELECT, CONFIRM_SELECT_OK = (85, 10), (85, 11)


class AMQPError(Exception):
    """The broker closed the connection or channel, or broke the protocol."""


# -- encoding -----------------------------------------------------------------
def shortstr(value: str | bytes) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    if len(data) > 255:
        raise ValueError("AMQP short string longer than 255 bytes: %r" % data[:40])
    return bytes([len(data)]) + data


def longstr(value: str | bytes) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return struct.pack("!I", len(data)) + data


def table(fields: dict[str, Any] | None = None) -> bytes:
    """A field table of str, bool, int and nested dict values."""
    out = []
    for key, value in (fields or {}).items():
        out.append(shortstr(key))
        if isinstance(value, bool):
            out.append(b"t" + bytes([value]))
        elif isinstance(value, int):
            out.append(b"I" + struct.pack("!i", value))
        elif isinstance(value, dict):
            out.append(b"F" + table(value))
        else:
            out.append(b"S" + longstr(str(value)))
    return longstr(b"".join(out))


def bits(*flags: bool) -> bytes:
    return bytes([sum(1 << i for i, flag in enumerate(flags) if flag)])


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack("!BHI", kind, channel, len(payload)) + payload + b"\xce"


def method_frame(channel: int, method: tuple[int, int], args: bytes = b"") -> bytes:
    return frame(FRAME_METHOD, channel, struct.pack("!HH", *method) + args)


def content_frames(channel: int, body: bytes, frame_max: int, persistent: bool) -> bytes:
    """Header frame (delivery-mode property only) and body frames for basic.publish."""
    if persistent:
        header = struct.pack("!HHQH", 60, 0, len(body), 0x1000) + b"\x02"
    else:
        header = struct.pack("!HHQH", 60, 0, len(body), 0)
    parts = [frame(FRAME_HEADER, channel, header)]
    step = max(frame_max - 8, 1)
    for start in range(0, len(body), step):
        parts.append(frame(FRAME_BODY, channel, body[start:start + step]))
    return b"".join(parts)


# -- decoding -----------------------------------------------------------------
class Reader:
    """Reads AMQP fields from one method payload."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.offset = offset

    def _unpack(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.offset)[0]
        self.offset += struct.calcsize(fmt)
        return value

    def octet(self) -> int:
        return self._unpack("!B")

    def short(self) -> int:
        return self._unpack("!H")

    def long(self) -> int:
        return self._unpack("!I")

    def longlong(self) -> int:
        return self._unpack("!Q")

    def shortstr(self) -> bytes:
        size = self.octet()
        value = self.data[self.offset:self.offset + size]
        self.offset += size
        return value

    def longstr(self) -> bytes:
        size = self.long()
        value = self.data[self.offset:self.offset + size]
        self.offset += size
        return value

    skip_table = longstr


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
        self.dead = True
        self.lost_reason = reason
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
        args.octet(), args.octet()
        args.skip_table()
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
        channel_max, frame_max, heartbeat = args.short(), args.long(), args.short()
        self.frame_max = min(frame_max, FRAME_MAX) if frame_max else FRAME_MAX
        self.heartbeat = min(heartbeat, self.heartbeat_wanted) if heartbeat else 0
        self._send(CONNECTION_TUNE_OK, struct.pack("!HIH", min(channel_max or 1, 1),
                                                   self.frame_max, self.heartbeat), channel=0)
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
    def queue_declare(self, queue: str = "", exclusive: bool = True) -> Any:
        """Declare a queue; fires with its (server-generated if empty) name."""
        args = (struct.pack("!H", 0) + shortstr(queue)
                + bits(False, False, exclusive, exclusive, False) + table())
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
        settled = {t for t in self.unconfirmed if t <= tag} if multiple else {tag}
        settled &= self.unconfirmed
        self.unconfirmed -= settled
        if not ok:
            self.nacked += len(settled)
        self._settle()

    def _settle(self) -> None:
        oldest = min(self.unconfirmed, default=self.next_publish_tag + 1)
        done = [w for w in self.confirm_waiters if w[0] < oldest]
        self.confirm_waiters = [w for w in self.confirm_waiters if w[0] >= oldest]
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
