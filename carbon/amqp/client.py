"""One AMQP 0-9-1 connection on txAMQP, with what txAMQP lacks filled in here.

``AMQPConnection`` is txAMQP's ``AMQClient`` with our spec (``carbon.amqp.spec``),
PLAIN login and channel 1 opened (``ready``), publisher confirms and the hooks a
consumer needs. Worked around here, each tested in tests/amqp:

- strings: every name goes out as UTF-8 bytes (txAMQP counts characters), and
  message bodies are read as bytes (txAMQP decodes them as text when it can,
  which miscounts a body with multi-byte characters);
- field tables: ours are encoded by ``carbon.amqp.fields`` (client capabilities
  need booleans and nested tables); received ones (server properties, message
  headers) are kept undecoded instead of failing on an unknown field type;
- methods txAMQP's delegate has no handler for, on which it drops the connection:
  basic.ack / basic.nack (publisher confirms), basic.cancel, connection.blocked
  and connection.unblocked;
- negotiation: frame-max and heartbeat take the broker's limits (txAMQP sends the
  broker's frame-max but its own heartbeat), the 0-9-1 protocol header is sent
  (txAMQP's header names 0-9), and a connection whose reads flow control holds is
  not declared dead for missing heartbeats;
- reconnecting is the caller's (``ReconnectingClientFactory``); txAMQP has none.
"""

from __future__ import annotations

import struct
from typing import Any

from twisted.internet import defer
from txamqp.client import Closed, TwistedDelegate
from txamqp.connection import Body, Frame
from txamqp.content import Content
from txamqp.message import Message
from txamqp.protocol import AMQClient, GarbageException

from carbon.amqp.fields import AMQPError, short_wire, table, text, wire

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_BODY = 3
FRAME_MAX = 131072
HEARTBEAT = 60
CHANNEL = 1
CLIENT_PROPERTIES = {"product": "carbon", "capabilities": {
    "authentication_failure_close": True, "connection.blocked": True,
    "consumer_cancel_notify": True, "publisher_confirms": True}}


def closed_reason(message: Message) -> str:
    """``broker closed the channel: 404 NOT_FOUND - ...`` for a received close method."""
    return "broker closed the %s: %d %s" % (message.method.klass.name, message.reply_code,
                                            text(message.reply_text))


def describe(error: Any) -> str:
    """A one-line reason for a failure, exception or txAMQP close reason."""
    error = getattr(error, "value", error)  # a Failure
    if isinstance(error, Closed) and error.args:
        error = getattr(error.args[0], "value", error.args[0])  # txAMQP's reason: a Failure
    if isinstance(error, Message):
        return closed_reason(error)
    return str(error) or error.__class__.__name__


class Delegate(TwistedDelegate):
    """txAMQP's handlers for methods the broker sends, completed (see the module doc)."""

    def connection_start(self, ch: Any, msg: Message) -> None:
        ch.connection_start_ok(client_properties=table(CLIENT_PROPERTIES),
                               mechanism=self.client.mechanism,
                               response=self.client.response, locale=self.client.locale)

    def connection_tune(self, ch: Any, msg: Message) -> None:
        self.client.tuned(ch, msg.channel_max, msg.frame_max, msg.heartbeat)

    def connection_close(self, ch: Any, msg: Message) -> None:
        self.client.error = AMQPError(closed_reason(msg))
        super().connection_close(ch, msg)

    def channel_close(self, ch: Any, msg: Message) -> None:
        self.client.error = AMQPError(closed_reason(msg))
        super().channel_close(ch, msg)
        self.client.transport.loseConnection()  # we use one channel: nothing left to do

    def connection_blocked(self, ch: Any, msg: Message) -> None:
        self.client.blocked(text(msg.reason))

    def connection_unblocked(self, ch: Any, msg: Message) -> None:
        self.client.blocked(None)

    def basic_deliver(self, ch: Any, msg: Message) -> None:
        body = msg.content.body
        self.client.message_received(wire(msg.routing_key), wire(body), msg.delivery_tag)

    def basic_ack(self, ch: Any, msg: Message) -> None:
        self.client.confirmed(msg.delivery_tag, msg.multiple, True)

    def basic_nack(self, ch: Any, msg: Message) -> None:
        self.client.confirmed(msg.delivery_tag, msg.multiple, False)

    def basic_cancel(self, ch: Any, msg: Message) -> None:
        self.client.error = AMQPError("broker cancelled consumer %s" % text(msg.consumer_tag))
        self.client.transport.loseConnection()  # reconnecting declares the queue again


class AMQPConnection(AMQClient):
    """A client connection using channel 1.

    ``ready`` fires with the open channel (or fails with an ``AMQPError``);
    ``when_closed()`` fires once the TCP connection has ended, and ``error`` then
    says why when the broker or a timeout ended it. Consumers override
    ``message_received`` and ``data_processed``.
    """

    def __init__(self, spec: Any, user: str, password: str, vhost: str = "/",
                 heartbeat: int = HEARTBEAT, clock: Any = None) -> None:
        if clock is None:
            from twisted.internet import reactor as clock
        super().__init__(Delegate(), short_wire(vhost), spec, heartbeat=heartbeat, clock=clock)
        self.credentials = b"\0" + wire(user) + b"\0" + wire(password)
        self.ready: defer.Deferred = defer.Deferred()
        self.channel1: Any = None
        self.error: AMQPError | None = None
        self.reads_paused = False
        self.published = 0
        self.unconfirmed: set[int] = set()
        self.confirm_floor = 1  # every publish tag below it is settled
        self.confirm_waiters: list[tuple[int, defer.Deferred]] = []
        self.nacked = 0

    # -- connection -----------------------------------------------------------
    def send_init_string(self) -> None:
        self.transport.write(PROTOCOL_HEADER)

    def connectionMade(self) -> None:  # noqa: N802
        super().connectionMade()
        self._open().addCallbacks(self._opened, self._open_failed)

    @defer.inlineCallbacks
    def _open(self) -> Any:
        yield self.start(self.credentials, b"PLAIN", b"en_US")
        channel = yield self.channel(CHANNEL)
        yield channel.channel_open()
        return channel

    def _opened(self, channel: Any) -> None:
        self.channel1 = channel
        if not self.ready.called:
            self.ready.callback(channel)

    def _open_failed(self, failure: Any) -> None:
        self.error = self.error or AMQPError(describe(failure))
        if not self.ready.called:
            self.ready.errback(self.error)
        if self.transport is not None:
            self.transport.loseConnection()

    def tuned(self, channel0: Any, channel_max: int, frame_max: int, heartbeat: int) -> None:
        """Answer connection.tune within the broker's limits and ours."""
        frame_max = min(frame_max or FRAME_MAX, FRAME_MAX)
        if heartbeat and self.heartbeatInterval:
            self.heartbeatInterval = min(self.heartbeatInterval, heartbeat)
        self.MAX_LENGTH = frame_max
        channel0.connection_tune_ok(channel_max=channel_max, frame_max=frame_max,
                                    heartbeat=self.heartbeatInterval)
        self.started.fire()

    def _unpack_frame(self, data: bytes) -> Frame:
        if data[0] != FRAME_BODY:
            return super()._unpack_frame(data)
        if data[-1] != self.FRAME_END:
            raise GarbageException("frame error: expected %r, got %r" % (self.FRAME_END,
                                                                        data[-1]))
        return Frame(struct.unpack_from("!H", data, 1)[0], Body(bytes(data[7:-1])))

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        super().dataReceived(data)
        self.data_processed()

    def check_heartbeat(self) -> None:
        if self.reads_paused:  # silence is ours: the broker's frames wait unread
            self.reschedule_check_heartbeat()
            return
        self.error = AMQPError("no data from the broker for %ds (heartbeat)" % (
            self.heartbeatInterval * self.MAX_UNSEEN_HEARTBEAT))
        super().check_heartbeat()

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        super().connectionLost(reason)
        if self.error is None and reason is not None:
            self.error = AMQPError("connection lost: %s" % describe(reason))
        error = self.error or AMQPError("connection lost")
        if not self.ready.called:
            self.ready.errback(error)
        waiters, self.confirm_waiters = self.confirm_waiters, []
        for _, waiting in waiters:
            waiting.errback(error)

    def when_closed(self) -> defer.Deferred:
        """Fires (with None) once the TCP connection has ended."""
        return self.disconnected.wait()

    @defer.inlineCallbacks
    def shutdown(self, timeout: float = 1.0) -> Any:
        """connection.close; drop TCP after close-ok or ``timeout`` (at once if 0)."""
        if not self.closed and self.transport is not None:
            channel0 = yield self.channel(0)
            closing = channel0.connection_close(reply_code=200, reply_text=b"bye")
            closing.addErrback(lambda _: None)
            if timeout > 0:
                expire = self.clock.callLater(timeout, closing.cancel)
                yield closing
                if expire.active():
                    expire.cancel()
            self.transport.loseConnection()
        yield self.when_closed()

    # -- hooks ------------------------------------------------------------------
    def message_received(self, routing_key: bytes, body: bytes, delivery_tag: int) -> None:
        """One complete basic.deliver."""

    def data_processed(self) -> None:
        """Every complete frame of one read has been handled."""

    def blocked(self, reason: str | None) -> None:
        """The broker blocked publishing (``reason``) or unblocked it (None)."""

    # -- consuming --------------------------------------------------------------
    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        self._quiet(self.channel1.basic_ack(delivery_tag=delivery_tag, multiple=multiple))

    def requeue(self, delivery_tag: int) -> None:
        """Give one message back to the broker, which delivers it again."""
        self._quiet(self.channel1.basic_reject(delivery_tag=delivery_tag, requeue=True))

    @staticmethod
    def _quiet(sent: defer.Deferred) -> None:
        # A method without reply fails only when the channel is closed; the
        # connection is going then, and connectionLost reports why.
        sent.addErrback(lambda _: None)

    # -- publishing -------------------------------------------------------------
    def confirm_select(self) -> defer.Deferred:
        return self.channel1.confirm_select()

    def publish(self, exchange: str, routing_key: str | bytes, body: bytes,
                persistent: bool = True, headers: dict[str, Any] | None = None) -> int:
        """Publish one message; returns its confirm sequence number."""
        properties: dict[str, Any] = {"delivery-mode": 2} if persistent else {}
        if headers:
            properties["headers"] = table(headers)
        self._quiet(self.channel1.basic_publish(
            exchange=short_wire(exchange), routing_key=short_wire(routing_key),
            content=Content(bytes(body), properties=properties)))
        self.published += 1
        self.unconfirmed.add(self.published)
        return self.published

    def wait_confirms(self) -> defer.Deferred:
        """Fires with the count of nacked messages once all published so far are settled."""
        waiting: defer.Deferred = defer.Deferred()
        self.confirm_waiters.append((self.published, waiting))
        self._settle()
        return waiting

    def confirmed(self, tag: int, multiple: bool, ok: bool) -> None:
        """basic.ack or basic.nack from the broker for publish ``tag`` (and below)."""
        settled = 0
        for t in (range(self.confirm_floor, tag + 1) if multiple else (tag,)):
            if t in self.unconfirmed:
                self.unconfirmed.discard(t)
                settled += 1
        if not ok:
            self.nacked += settled
        self._settle()

    def _settle(self) -> None:
        while self.confirm_floor <= self.published and (
                self.confirm_floor not in self.unconfirmed):
            self.confirm_floor += 1
        done = [w for w in self.confirm_waiters if w[0] < self.confirm_floor]
        self.confirm_waiters = [w for w in self.confirm_waiters if w[0] >= self.confirm_floor]
        for _, waiting in done:
            waiting.callback(self.nacked)
